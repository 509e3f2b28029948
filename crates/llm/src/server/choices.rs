//! `Choices`: the choices of one response (a request's prompts, each with `n`
//! continuations) built from the engine's events, as one JSON response or as the chunks
//! of a stream.

use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::Value;

use crate::chat::{ReplyParser, ToolFormat};
use crate::engine::{FinishReason, Model, TokenLogprob};
use crate::server::admission::JobEvent;
use crate::server::errors::ApiError;
use crate::server::logprob_json::{LogprobWriter, take_logprobs};
use crate::server::openai::{Endpoint, ResponseHead, Usage, finish_reason};
use crate::server::reply_stream::{ReplyStream, call_ids, message};

/// An echoed completions prompt: its text and tokens.
#[derive(Debug, Clone)]
pub(crate) struct Echo {
    /// The text the choice shows first.
    pub(crate) text: String,
    /// The prompt's tokens (for their log-probabilities).
    pub(crate) prompt: Vec<u32>,
}

/// How a response's choices are made.
#[derive(Debug)]
pub(crate) struct ChoicesPlan {
    /// Continuations per prompt.
    pub(crate) n: usize,
    /// Per prompt: its echo (completions with `echo`).
    pub(crate) echoes: Vec<Option<Echo>>,
    /// Report log-probabilities.
    pub(crate) logprobs: bool,
    /// Chat: how to read replies, and the tool format of their calls.
    pub(crate) parser: Option<ReplyParser>,
    /// The tool format of the calls.
    pub(crate) tool_format: Option<ToolFormat>,
}

/// How a job ended.
#[derive(Clone, Copy, Debug)]
struct Ended {
    reason: FinishReason,
    prompt_tokens: usize,
    cached_tokens: usize,
    completion_tokens: usize,
}

/// One choice being built.
#[derive(Debug)]
struct Choice {
    /// Its prompt's index.
    prompt: usize,
    /// The text so far (a whole response's; a stream sends it as it comes).
    text: String,
    /// Generated tokens' log-probabilities not yet written.
    generated: Vec<TokenLogprob>,
    writer: Option<LogprobWriter>,
    reply: Option<ReplyStream>,
    /// Its response id for tool-call ids (unique per choice).
    call_seed: String,
    /// The echo not yet sent (streams).
    echo: Option<Echo>,
    /// No chunk sent yet (chat's first carries the role).
    first: bool,
    ended: Option<Ended>,
}

impl Choice {
    /// Chat chunks of choice `index` for a reply parser's `deltas`, the log-probabilities
    /// waiting so far on the first.
    fn send_deltas(
        &mut self,
        head: &ResponseHead,
        index: usize,
        deltas: Vec<Value>,
        chunks: &mut Vec<Value>,
    ) {
        for delta in deltas {
            let logprobs = take_logprobs(&mut self.writer);
            chunks.push(head.delta_chunk(index, delta, self.first, None, logprobs));
            self.first = false;
        }
    }
}

/// What one event made of a stream.
#[derive(Debug, Default)]
pub(crate) struct StreamStep {
    /// Chunks to send.
    pub(crate) chunks: Vec<Value>,
    /// An error to send, after which the stream ends.
    pub(crate) error: Option<Value>,
}

/// A response's choices.
#[derive(Debug)]
pub(crate) struct Choices {
    head: ResponseHead,
    n: usize,
    tool_format: Option<ToolFormat>,
    choices: Vec<Choice>,
    /// Per prompt: its tokens' log-probabilities, once its first job sent them.
    prompt_logprobs: Vec<Option<Vec<TokenLogprob>>>,
}

impl Choices {
    /// The choices of a response with `head`, reading token texts from `model`.
    pub(crate) fn new(head: ResponseHead, plan: ChoicesPlan, model: &Arc<Model>) -> Choices {
        let prompts = plan.echoes.len();
        let choices = (0..prompts * plan.n)
            .map(|index| {
                let call_seed = if index == 0 {
                    head.id.clone()
                } else {
                    format!("{}-{index}", head.id)
                };
                Choice {
                    prompt: index / plan.n,
                    text: String::new(),
                    generated: Vec::new(),
                    writer: plan
                        .logprobs
                        .then(|| LogprobWriter::new(Arc::clone(model), head.endpoint)),
                    reply: plan
                        .parser
                        .map(|p| ReplyStream::new(p, plan.tool_format, &call_seed)),
                    call_seed,
                    echo: plan.echoes[index / plan.n].clone(),
                    first: true,
                    ended: None,
                }
            })
            .collect();
        Choices {
            head,
            n: plan.n,
            tool_format: plan.tool_format,
            choices,
            prompt_logprobs: vec![None; prompts],
        }
    }

    /// Whether every choice ended.
    pub(crate) fn all_ended(&self) -> bool {
        self.choices.iter().all(|c| c.ended.is_some())
    }

    /// The usage: each prompt counted once (by its first job), every choice's tokens.
    pub(crate) fn usage(&self) -> Usage {
        let (mut prompt, mut cached, mut completion) = (0, 0, 0);
        for (i, c) in self.choices.iter().enumerate() {
            let Some(e) = c.ended else { continue };
            if i % self.n == 0 {
                prompt += e.prompt_tokens;
                cached += e.cached_tokens;
            }
            completion += e.completion_tokens;
        }
        Usage::new(prompt, cached, completion)
    }

    /// The usage chunk that ends a stream with `stream_options.include_usage`.
    pub(crate) fn usage_chunk(&self) -> Value {
        self.head.usage_chunk(self.usage())
    }

    /// Takes in choice `index`'s `event` for a whole response; an error ends it.
    pub(crate) fn absorb(&mut self, index: usize, event: JobEvent) -> Result<(), ApiError> {
        let Some(choice) = self.choices.get_mut(index) else {
            return Ok(());
        };
        match event {
            JobEvent::Text { text, logprobs } => {
                choice.text.push_str(&text);
                choice.generated.extend(logprobs);
            }
            JobEvent::PromptLogprobs(entries) => {
                self.prompt_logprobs[choice.prompt] = Some(entries);
            }
            // Not sent for generation jobs.
            JobEvent::Embedding(_) => {}
            JobEvent::Done {
                reason,
                prompt_tokens,
                cached_tokens,
                completion_tokens,
            } => {
                choice.ended = Some(Ended {
                    reason,
                    prompt_tokens,
                    cached_tokens,
                    completion_tokens,
                });
            }
            JobEvent::Failed(message) => {
                return Err(ApiError::server(StatusCode::INTERNAL_SERVER_ERROR, message));
            }
            JobEvent::Invalid(message) => return Err(ApiError::invalid(None, message)),
        }
        Ok(())
    }

    /// The whole response, once every choice ended.
    pub(crate) fn response(mut self) -> Value {
        let usage = self.usage();
        let mut values = Vec::with_capacity(self.choices.len());
        for (index, choice) in self.choices.iter_mut().enumerate() {
            let ended = choice.ended.map_or(FinishReason::Length, |e| e.reason);
            let mut text = String::new();
            if let Some(echo) = &choice.echo {
                text.push_str(&echo.text);
                if let (Some(w), Some(entries)) = (
                    choice.writer.as_mut(),
                    self.prompt_logprobs[choice.prompt].as_ref(),
                ) {
                    w.push_prompt(&echo.prompt, entries, echo.text.chars().count());
                }
            }
            text.push_str(&choice.text);
            if let Some(w) = choice.writer.as_mut() {
                w.push(std::mem::take(&mut choice.generated));
            }
            let logprobs = take_logprobs(&mut choice.writer);
            let value = match choice.reply.as_mut() {
                None => self
                    .head
                    .choice(index, &text, finish_reason(ended, false), logprobs),
                Some(reply) => {
                    reply.push(&text);
                    let (_, parsed) = reply.finish();
                    let ids = call_ids(&parsed, self.tool_format, &choice.call_seed);
                    let finish = finish_reason(ended, !parsed.calls.is_empty());
                    self.head
                        .message_choice(index, message(&parsed, &ids), finish, logprobs)
                }
            };
            values.push(value);
        }
        self.head.full_choices(values, usage)
    }

    /// Takes in choice `index`'s `event` for a stream: the chunks it makes.
    pub(crate) fn stream(&mut self, index: usize, event: JobEvent) -> StreamStep {
        let mut step = StreamStep::default();
        let chat = self.head.endpoint == Endpoint::Chat;
        let Some(choice) = self.choices.get_mut(index) else {
            return step;
        };
        if let JobEvent::PromptLogprobs(entries) = &event {
            self.prompt_logprobs[choice.prompt] = Some(entries.clone());
        }
        if let Some(echo) = choice.echo.take() {
            // The prompt goes first, with its log-probabilities when they came.
            if let (Some(w), Some(entries)) = (
                choice.writer.as_mut(),
                self.prompt_logprobs[choice.prompt].as_ref(),
            ) {
                w.push_prompt(&echo.prompt, entries, echo.text.chars().count());
            }
            let logprobs = take_logprobs(&mut choice.writer);
            step.chunks.push(
                self.head
                    .chunk(index, Some(&echo.text), false, None, logprobs),
            );
        }
        match event {
            JobEvent::PromptLogprobs(_) | JobEvent::Embedding(_) => {}
            JobEvent::Text { text, logprobs } => {
                if let Some(w) = choice.writer.as_mut() {
                    w.push(logprobs);
                }
                match choice.reply.as_mut() {
                    Some(reply) => {
                        let deltas = reply.push(&text);
                        choice.send_deltas(&self.head, index, deltas, &mut step.chunks);
                    }
                    None => {
                        let logprobs = take_logprobs(&mut choice.writer);
                        step.chunks.push(self.head.chunk(
                            index,
                            Some(&text),
                            chat && choice.first,
                            None,
                            logprobs,
                        ));
                        choice.first = false;
                    }
                }
            }
            JobEvent::Done {
                reason,
                prompt_tokens,
                cached_tokens,
                completion_tokens,
            } => {
                let mut called = false;
                if let Some(reply) = choice.reply.as_mut() {
                    let (deltas, parsed) = reply.finish();
                    called = !parsed.calls.is_empty();
                    choice.send_deltas(&self.head, index, deltas, &mut step.chunks);
                }
                let finish = finish_reason(reason, called);
                let text = if chat { None } else { Some("") };
                // Entries whose text a reply parser held to the end come with it.
                let logprobs = match choice.writer.as_mut() {
                    Some(w) if w.has_pending() => w.take(),
                    _ => Value::Null,
                };
                step.chunks.push(self.head.chunk(
                    index,
                    text,
                    chat && choice.first,
                    Some(finish),
                    logprobs,
                ));
                choice.ended = Some(Ended {
                    reason,
                    prompt_tokens,
                    cached_tokens,
                    completion_tokens,
                });
            }
            JobEvent::Failed(message) => {
                step.error = Some(serde_json::json!({
                    "error": {"message": message, "type": "server_error", "param": null, "code": null}
                }));
            }
            JobEvent::Invalid(message) => {
                step.error = Some(serde_json::json!({
                    "error": {"message": message, "type": "invalid_request_error", "param": null, "code": null}
                }));
            }
        }
        step
    }
}
