//! The OpenAI request and response bodies the server reads and writes, and the checks
//! that turn a request's sampling fields into engine settings.

use serde::{Deserialize, Serialize};

use crate::chat::{ChatMessage, ToolCall};
use crate::engine::{FinishReason, MAX_TOP_LOGPROBS, SamplerConfig};
use crate::json::JsonValue;
use crate::server::errors::ApiError;

/// The most stop strings a request may give.
pub(crate) const MAX_STOP_STRINGS: usize = 16;

/// `prompt`: a string, a list holding one string, or token ids.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum Prompt {
    /// Text.
    Text(String),
    /// Several texts (one choice or `n` per prompt, in order).
    Texts(Vec<String>),
    /// Token ids.
    Tokens(Vec<u32>),
    /// Several prompts as token ids.
    TokenLists(Vec<Vec<u32>>),
}

/// `logprobs`: a flag (chat, with `top_logprobs` alternatives) or the number of
/// alternatives (completions).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum LogprobsField {
    /// Chat's `true` / `false`.
    Flag(bool),
    /// Completions' count of alternatives.
    Count(i64),
}

/// The most `logit_bias` entries a request may give.
pub(crate) const MAX_LOGIT_BIAS: usize = 1024;

/// `stop`: one string or a list.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum Stop {
    /// One string.
    One(String),
    /// Several.
    Many(Vec<String>),
}

/// A message's `content`: text, or a list of parts of which the text ones are used.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum Content {
    /// Text.
    Text(String),
    /// Content parts (`{"type": "text", "text": ...}`).
    Parts(Vec<ContentPart>),
}

/// One content part.
#[derive(Debug, Deserialize)]
pub(crate) struct ContentPart {
    /// `text` (other types are refused).
    #[serde(rename = "type")]
    pub(crate) kind: String,
    /// The text of a `text` part.
    #[serde(default)]
    pub(crate) text: Option<String>,
}

/// One message of a chat request.
#[derive(Debug, Deserialize)]
pub(crate) struct MessageIn {
    /// `system`, `user`, `assistant`, ...
    pub(crate) role: String,
    /// The content (`null` is an empty message).
    #[serde(default)]
    pub(crate) content: Option<Content>,
    /// The author's name.
    #[serde(default)]
    pub(crate) name: Option<String>,
    /// An assistant turn's tool calls.
    #[serde(default)]
    pub(crate) tool_calls: Option<Vec<ToolCallIn>>,
    /// The call a `tool` message answers.
    #[serde(default)]
    pub(crate) tool_call_id: Option<String>,
    /// An assistant turn's reasoning (as llama-server and reasoning APIs return it).
    #[serde(default)]
    pub(crate) reasoning_content: Option<String>,
}

/// One tool call of an assistant message.
#[derive(Debug, Deserialize)]
pub(crate) struct ToolCallIn {
    /// The call's id.
    #[serde(default)]
    pub(crate) id: Option<String>,
    /// The call.
    pub(crate) function: FunctionCallIn,
}

/// A function call: its name and arguments (a JSON string, as OpenAI sends them, or an
/// object).
#[derive(Debug, Deserialize)]
pub(crate) struct FunctionCallIn {
    /// The function.
    pub(crate) name: String,
    /// The arguments.
    #[serde(default)]
    pub(crate) arguments: Option<JsonValue>,
}

/// `stream_options`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct StreamOptions {
    /// Send a last chunk with the token usage.
    #[serde(default)]
    pub(crate) include_usage: bool,
}

/// The body of `POST /v1/completions` and `POST /v1/chat/completions` (unknown fields are
/// ignored, as clients send many).
#[derive(Debug, Deserialize)]
pub(crate) struct GenerationRequest {
    /// The model asked for: any name is served by the loaded model, so it is only read
    /// to refuse a value that is not a string.
    #[serde(default)]
    #[allow(dead_code)]
    pub(crate) model: Option<String>,
    /// Completions: the prompt.
    #[serde(default)]
    pub(crate) prompt: Option<Prompt>,
    /// Chat: the conversation.
    #[serde(default)]
    pub(crate) messages: Option<Vec<MessageIn>>,
    /// The most tokens to generate.
    #[serde(default)]
    pub(crate) max_tokens: Option<i64>,
    /// The newer name of `max_tokens` in chat requests.
    #[serde(default)]
    pub(crate) max_completion_tokens: Option<i64>,
    /// Temperature (0: greedy).
    #[serde(default)]
    pub(crate) temperature: Option<f32>,
    /// Nucleus sampling threshold.
    #[serde(default)]
    pub(crate) top_p: Option<f32>,
    /// Keep the K most likely tokens (0: all).
    #[serde(default)]
    pub(crate) top_k: Option<i64>,
    /// Drop tokens below this fraction of the best one's probability.
    #[serde(default)]
    pub(crate) min_p: Option<f32>,
    /// Random seed.
    #[serde(default)]
    pub(crate) seed: Option<u64>,
    /// Stop strings.
    #[serde(default)]
    pub(crate) stop: Option<Stop>,
    /// Repetition penalty (llama.cpp's; 1: off).
    #[serde(default, alias = "repeat_penalty")]
    pub(crate) repetition_penalty: Option<f32>,
    /// OpenAI's frequency penalty.
    #[serde(default)]
    pub(crate) frequency_penalty: Option<f32>,
    /// OpenAI's presence penalty.
    #[serde(default)]
    pub(crate) presence_penalty: Option<f32>,
    /// Choices per prompt (each in its own slot; they share the prompt's prefill).
    #[serde(default)]
    pub(crate) n: Option<i64>,
    /// Log-probabilities of the output tokens: `true` in chat, the number of
    /// alternatives in completions.
    #[serde(default)]
    pub(crate) logprobs: Option<LogprobsField>,
    /// Chat: the alternatives per token with `logprobs: true` (0 to 20).
    #[serde(default)]
    pub(crate) top_logprobs: Option<i64>,
    /// Completions: the prompt before the output (with its log-probabilities when
    /// `logprobs` is given; `max_tokens: 0` then scores the prompt alone).
    #[serde(default)]
    pub(crate) echo: Option<bool>,
    /// Token id (as a string) to a bias in [-100, 100] added to its logit.
    #[serde(default)]
    pub(crate) logit_bias: Option<std::collections::BTreeMap<String, f64>>,
    /// Server-sent events.
    #[serde(default)]
    pub(crate) stream: Option<bool>,
    /// Streaming options.
    #[serde(default)]
    pub(crate) stream_options: Option<StreamOptions>,
    /// Keep generating past end-of-generation tokens (llama.cpp's extension).
    #[serde(default)]
    pub(crate) ignore_eos: Option<bool>,
    /// `{"type": "text" | "json_object" | "json_schema", ...}`.
    #[serde(default)]
    pub(crate) response_format: Option<JsonValue>,
    /// A GBNF grammar the output must match (llama-server's field).
    #[serde(default)]
    pub(crate) grammar: Option<String>,
    /// A JSON schema the output must match (llama-server's field).
    #[serde(default)]
    pub(crate) json_schema: Option<JsonValue>,
    /// Tool definitions.
    #[serde(default)]
    pub(crate) tools: Option<JsonValue>,
    /// `auto`, `none`, `required` or `{"type": "function", "function": {"name": ...}}`.
    #[serde(default)]
    pub(crate) tool_choice: Option<JsonValue>,
    /// Whether several tool calls may come in one reply (default true).
    #[serde(default)]
    pub(crate) parallel_tool_calls: Option<bool>,
    /// Extra variables for the chat template (llama-server's field).
    #[serde(default)]
    pub(crate) chat_template_kwargs: Option<JsonValue>,
    /// The template's `enable_thinking` (a shorthand for
    /// `chat_template_kwargs.enable_thinking`).
    #[serde(default)]
    pub(crate) enable_thinking: Option<bool>,
}

/// A request's generation settings, checked.
#[derive(Debug)]
pub(crate) struct Plan {
    /// Sampling.
    pub(crate) sampler: SamplerConfig,
    /// The most tokens (`None`: until the context is full).
    pub(crate) max_tokens: Option<usize>,
    /// Stop strings.
    pub(crate) stop: Vec<String>,
    /// Keep going past end-of-generation tokens.
    pub(crate) ignore_eos: bool,
    /// Stream.
    pub(crate) stream: bool,
    /// Send a usage chunk at the end of a stream.
    pub(crate) include_usage: bool,
    /// Report log-probabilities with this many alternatives per token.
    pub(crate) logprobs: Option<usize>,
    /// Completions: put the prompt before the output.
    pub(crate) echo: bool,
    /// Choices per prompt.
    pub(crate) n: usize,
}

fn check(ok: bool, param: &str, message: impl FnOnce() -> String) -> Result<(), ApiError> {
    if ok {
        Ok(())
    } else {
        Err(ApiError::invalid(Some(param), message()))
    }
}

impl GenerationRequest {
    /// The generation settings for `endpoint` over a vocabulary of `vocab_size`
    /// tokens, or a 400 naming the field at fault.
    pub(crate) fn plan(&self, endpoint: Endpoint, vocab_size: usize) -> Result<Plan, ApiError> {
        let n = self.n.unwrap_or(1);
        check(n >= 1, "n", || format!("n must be at least 1 (got {n})"))?;
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        let logprobs = self.logprobs_plan(endpoint)?;
        let echo = self.echo.unwrap_or(false);
        check(!echo || endpoint == Endpoint::Completions, "echo", || {
            "`echo` is for /v1/completions".into()
        })?;
        let max_tokens = match self.max_tokens.or(self.max_completion_tokens) {
            Some(m) => {
                // Scoring a prompt: its echo and log-probabilities, no output.
                let least = if echo { 0 } else { 1 };
                check(m >= least, "max_tokens", || {
                    if echo {
                        format!("max_tokens must be 0 or more (got {m})")
                    } else {
                        format!("max_tokens must be at least 1 (got {m}; 0 only with `echo`)")
                    }
                })?;
                Some(usize::try_from(m).unwrap_or(usize::MAX))
            }
            None => None,
        };
        let defaults = SamplerConfig::default();
        let temperature = self.temperature.unwrap_or(defaults.temperature);
        check(
            temperature.is_finite() && (0.0..=2.0).contains(&temperature),
            "temperature",
            || format!("temperature must be between 0 and 2 (got {temperature})"),
        )?;
        let top_p = self.top_p.unwrap_or(defaults.top_p);
        check(top_p > 0.0 && top_p <= 1.0, "top_p", || {
            format!("top_p must be in (0, 1] (got {top_p})")
        })?;
        let top_k = self.top_k.unwrap_or(defaults.top_k as i64);
        check(top_k >= 0, "top_k", || {
            format!("top_k must be 0 (off) or more (got {top_k})")
        })?;
        let min_p = self.min_p.unwrap_or(defaults.min_p);
        check((0.0..=1.0).contains(&min_p), "min_p", || {
            format!("min_p must be in [0, 1] (got {min_p})")
        })?;
        let repetition_penalty = self
            .repetition_penalty
            .unwrap_or(defaults.repetition_penalty);
        check(
            repetition_penalty.is_finite() && repetition_penalty > 0.0,
            "repetition_penalty",
            || format!("repetition_penalty must be positive (got {repetition_penalty})"),
        )?;
        let frequency_penalty = self.frequency_penalty.unwrap_or(0.0);
        check(
            (-2.0..=2.0).contains(&frequency_penalty),
            "frequency_penalty",
            || format!("frequency_penalty must be between -2 and 2 (got {frequency_penalty})"),
        )?;
        let presence_penalty = self.presence_penalty.unwrap_or(0.0);
        check(
            (-2.0..=2.0).contains(&presence_penalty),
            "presence_penalty",
            || format!("presence_penalty must be between -2 and 2 (got {presence_penalty})"),
        )?;
        let stop = match &self.stop {
            None => Vec::new(),
            Some(Stop::One(s)) => vec![s.clone()],
            Some(Stop::Many(v)) => v.clone(),
        };
        check(stop.len() <= MAX_STOP_STRINGS, "stop", || {
            format!(
                "at most {MAX_STOP_STRINGS} stop strings (got {})",
                stop.len()
            )
        })?;
        let seed = self.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        });
        Ok(Plan {
            sampler: SamplerConfig {
                temperature,
                top_k: usize::try_from(top_k).unwrap_or(usize::MAX),
                top_p,
                min_p,
                repetition_penalty,
                frequency_penalty,
                presence_penalty,
                seed,
                logit_bias: self.logit_bias_plan(vocab_size)?,
                ..defaults
            },
            max_tokens,
            stop,
            ignore_eos: self.ignore_eos.unwrap_or(false),
            stream: self.stream.unwrap_or(false),
            include_usage: self
                .stream_options
                .as_ref()
                .is_some_and(|o| o.include_usage),
            logprobs,
            echo,
            n,
        })
    }

    /// How many alternatives per token to report (`None`: no log-probabilities):
    /// chat's `logprobs: true` with `top_logprobs`, completions' `logprobs: N`.
    fn logprobs_plan(&self, endpoint: Endpoint) -> Result<Option<usize>, ApiError> {
        let bounded = |param: &str, n: i64| {
            check((0..=MAX_TOP_LOGPROBS as i64).contains(&n), param, || {
                format!("{param} must be between 0 and {MAX_TOP_LOGPROBS} (got {n})")
            })
            .map(|()| n as usize)
        };
        match endpoint {
            Endpoint::Chat => {
                let on = match self.logprobs {
                    None | Some(LogprobsField::Flag(false)) => false,
                    Some(LogprobsField::Flag(true)) => true,
                    Some(LogprobsField::Count(_)) => {
                        return Err(ApiError::invalid(
                            Some("logprobs"),
                            "`logprobs` is true or false in chat; the number of alternatives goes in `top_logprobs`",
                        ));
                    }
                };
                match self.top_logprobs {
                    None => Ok(on.then_some(0)),
                    Some(n) => {
                        let n = bounded("top_logprobs", n)?;
                        check(on, "top_logprobs", || {
                            "`top_logprobs` needs `logprobs: true`".into()
                        })?;
                        Ok(Some(n))
                    }
                }
            }
            Endpoint::Completions => {
                check(self.top_logprobs.is_none(), "top_logprobs", || {
                    "`top_logprobs` is for chat; completions take the number of alternatives in `logprobs`".into()
                })?;
                match self.logprobs {
                    None => Ok(None),
                    Some(LogprobsField::Count(n)) => bounded("logprobs", n).map(Some),
                    Some(LogprobsField::Flag(_)) => Err(ApiError::invalid(
                        Some("logprobs"),
                        format!(
                            "`logprobs` is a number of alternatives (0 to {MAX_TOP_LOGPROBS}) in completions"
                        ),
                    )),
                }
            }
        }
    }

    /// `logit_bias` as `(id, bias)` sorted by id, or a 400: a key that is not a token
    /// id of the vocabulary, a bias outside [-100, 100], too many entries.
    fn logit_bias_plan(&self, vocab_size: usize) -> Result<Vec<(u32, f32)>, ApiError> {
        let Some(map) = &self.logit_bias else {
            return Ok(Vec::new());
        };
        check(map.len() <= MAX_LOGIT_BIAS, "logit_bias", || {
            format!(
                "at most {MAX_LOGIT_BIAS} logit_bias entries (got {})",
                map.len()
            )
        })?;
        let mut bias = map
            .iter()
            .map(|(key, &b)| {
                let id = key
                    .parse::<u32>()
                    .ok()
                    .filter(|&id| (id as usize) < vocab_size)
                    .ok_or_else(|| {
                        ApiError::invalid(
                            Some("logit_bias"),
                            format!(
                                "`logit_bias`: {key:?} is not a token id of this model (0 to {})",
                                vocab_size.saturating_sub(1)
                            ),
                        )
                    })?;
                check((-100.0..=100.0).contains(&b), "logit_bias", || {
                    format!("`logit_bias`: the bias of token {id} must be between -100 and 100 (got {b})")
                })?;
                Ok((id, b as f32))
            })
            .collect::<Result<Vec<_>, ApiError>>()?;
        bias.sort_unstable_by_key(|e| e.0);
        // "7" and "07" name the same token: refuse rather than pick one.
        if let Some(w) = bias.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(ApiError::invalid(
                Some("logit_bias"),
                format!("`logit_bias` names token {} twice", w[0].0),
            ));
        }
        Ok(bias)
    }

    /// The chat messages, or a 400 (a missing or empty list, content parts that are not
    /// text, a role not in `roles`).
    pub(crate) fn chat_messages(&self, roles: &[String]) -> Result<Vec<ChatMessage>, ApiError> {
        let Some(messages) = &self.messages else {
            return Err(ApiError::invalid(
                Some("messages"),
                "`messages` is required",
            ));
        };
        check(!messages.is_empty(), "messages", || {
            "`messages` must hold at least one message".into()
        })?;
        // The ids of the tool calls made so far.
        let mut call_ids: Vec<String> = Vec::new();
        messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                if !roles.contains(&m.role) {
                    let param = format!("messages[{i}].role");
                    let message = format!(
                        "`{param}`: {:?} is not a role this server accepts ({}); an operator can add one with --allow-role",
                        m.role,
                        roles.join(", ")
                    );
                    return Err(ApiError::invalid(Some(&param), message));
                }
                let content = match &m.content {
                    None => String::new(),
                    Some(Content::Text(t)) => t.clone(),
                    Some(Content::Parts(parts)) => {
                        let mut text = String::new();
                        for part in parts {
                            match (&*part.kind, &part.text) {
                                ("text", Some(t)) => text.push_str(t),
                                (kind, _) => {
                                    return Err(ApiError::invalid(
                                        Some(&format!("messages[{i}].content")),
                                        format!("content parts of type `{kind}` are not supported (text only)"),
                                    ));
                                }
                            }
                        }
                        text
                    }
                };
                let mut message = ChatMessage::new(m.role.clone(), content);
                if let Some(name) = &m.name {
                    message = message.with_name(name.clone());
                }
                if let Some(r) = &m.reasoning_content {
                    message = message.with_reasoning(r.clone());
                }
                if let Some(calls) = &m.tool_calls {
                    message = message.with_tool_calls(tool_calls(i, calls, &mut call_ids)?);
                }
                if m.role == "tool" {
                    let param = format!("messages[{i}].tool_call_id");
                    let Some(id) = &m.tool_call_id else {
                        return Err(ApiError::invalid(
                            Some(&param),
                            format!("`{param}` is required in a tool message (the id of the call it answers)"),
                        ));
                    };
                    if !call_ids.contains(id) {
                        return Err(ApiError::invalid(
                            Some(&param),
                            format!("`{param}`: no earlier assistant message made a tool call with id {id:?}"),
                        ));
                    }
                    message = message.with_tool_call_id(id.clone());
                }
                Ok(message)
            })
            .collect()
    }
}

/// The tool calls of message `i`, with their ids added to `ids`; arguments given as a
/// JSON string are parsed (templates get them as objects).
fn tool_calls(
    i: usize,
    calls: &[ToolCallIn],
    ids: &mut Vec<String>,
) -> Result<Vec<ToolCall>, ApiError> {
    calls
        .iter()
        .enumerate()
        .map(|(j, c)| {
            let param = format!("messages[{i}].tool_calls[{j}]");
            let id = c.id.clone().unwrap_or_else(|| format!("call_{i}_{j}"));
            let arguments = match &c.function.arguments {
                None => JsonValue::Object(Vec::new()),
                Some(JsonValue::String(text)) => JsonValue::parse(text).map_err(|e| {
                    let p = format!("{param}.function.arguments");
                    ApiError::invalid(Some(&p), format!("`{p}` is not JSON: {e}"))
                })?,
                Some(v) => v.clone(),
            };
            ids.push(id.clone());
            Ok(ToolCall {
                id,
                name: c.function.name.clone(),
                arguments,
            })
        })
        .collect()
}

/// OpenAI's `finish_reason` for an engine finish (`tool_calls` when the reply called
/// tools and was not cut short).
pub(crate) fn finish_reason(reason: FinishReason, called: bool) -> &'static str {
    match reason {
        FinishReason::Length | FinishReason::ContextFull => "length",
        _ if called => "tool_calls",
        _ => "stop",
    }
}

/// `usage`.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Usage {
    /// Prompt tokens.
    pub(crate) prompt_tokens: usize,
    /// Generated tokens.
    pub(crate) completion_tokens: usize,
    /// Both.
    pub(crate) total_tokens: usize,
    /// Prompt tokens served from the slot's cache.
    pub(crate) prompt_tokens_details: CachedTokens,
}

/// `usage.prompt_tokens_details`.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct CachedTokens {
    /// Prompt tokens reused from the prompt cache.
    pub(crate) cached_tokens: usize,
}

impl Usage {
    /// Usage of a finished job.
    pub(crate) fn new(
        prompt_tokens: usize,
        cached_tokens: usize,
        completion_tokens: usize,
    ) -> Usage {
        Usage {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens + completion_tokens,
            prompt_tokens_details: CachedTokens { cached_tokens },
        }
    }
}

/// Which endpoint a response is for (they differ in object names and field layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// `/v1/completions`.
    Completions,
    /// `/v1/chat/completions`.
    Chat,
}

/// What identifies a response: endpoint, id, creation time and model.
#[derive(Debug, Clone)]
pub(crate) struct ResponseHead {
    /// The endpoint.
    pub(crate) endpoint: Endpoint,
    /// `cmpl-N` / `chatcmpl-N`.
    pub(crate) id: String,
    /// Unix time.
    pub(crate) created: u64,
    /// The model id.
    pub(crate) model: String,
}

impl ResponseHead {
    /// A streamed chunk of choice `index` carrying `text` (chat: as `delta.content`,
    /// plus the role on the choice's first chunk), its tokens' `logprobs` (`null` when
    /// not asked for) and the finish reason on the choice's last.
    pub(crate) fn chunk(
        &self,
        index: usize,
        text: Option<&str>,
        role: bool,
        finish: Option<&str>,
        logprobs: serde_json::Value,
    ) -> serde_json::Value {
        let choice = match self.endpoint {
            Endpoint::Completions => serde_json::json!({
                "index": index,
                "text": text.unwrap_or(""),
                "logprobs": logprobs,
                "finish_reason": finish,
            }),
            Endpoint::Chat => {
                let mut delta = serde_json::Map::new();
                if role {
                    delta.insert("role".into(), "assistant".into());
                }
                if let Some(text) = text {
                    delta.insert("content".into(), text.into());
                }
                serde_json::json!({
                    "index": index,
                    "delta": delta,
                    "logprobs": logprobs,
                    "finish_reason": finish,
                })
            }
        };
        self.wrap(true, vec![choice])
    }

    /// A chat chunk of choice `index` with `delta` (reasoning, content or tool calls;
    /// the role on the choice's first chunk), `logprobs` and the finish reason on the
    /// last.
    pub(crate) fn delta_chunk(
        &self,
        index: usize,
        delta: serde_json::Value,
        role: bool,
        finish: Option<&str>,
        logprobs: serde_json::Value,
    ) -> serde_json::Value {
        let mut delta = match delta {
            serde_json::Value::Object(m) => m,
            _ => serde_json::Map::new(),
        };
        if role {
            delta.insert("role".into(), "assistant".into());
        }
        self.wrap(
            true,
            vec![serde_json::json!({"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish})],
        )
    }

    /// The last chunk of a stream with `stream_options.include_usage`: no choices, the
    /// usage.
    pub(crate) fn usage_chunk(&self, usage: Usage) -> serde_json::Value {
        serde_json::json!({
            "id": self.id,
            "object": self.object(true),
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": usage,
        })
    }

    /// Choice `index` of a whole response: `text` (chat: the assistant message's
    /// content).
    pub(crate) fn choice(
        &self,
        index: usize,
        text: &str,
        finish: &str,
        logprobs: serde_json::Value,
    ) -> serde_json::Value {
        match self.endpoint {
            Endpoint::Completions => serde_json::json!({
                "index": index,
                "text": text,
                "logprobs": logprobs,
                "finish_reason": finish,
            }),
            Endpoint::Chat => serde_json::json!({
                "index": index,
                "message": {"role": "assistant", "content": text},
                "logprobs": logprobs,
                "finish_reason": finish,
            }),
        }
    }

    /// Chat choice `index` of a whole response with `message` (reasoning and tool
    /// calls included).
    pub(crate) fn message_choice(
        &self,
        index: usize,
        message: serde_json::Value,
        finish: &str,
        logprobs: serde_json::Value,
    ) -> serde_json::Value {
        serde_json::json!({"index": index, "message": message, "logprobs": logprobs, "finish_reason": finish})
    }

    /// The whole (non-streamed) response with `choices`.
    pub(crate) fn full_choices(
        &self,
        choices: Vec<serde_json::Value>,
        usage: Usage,
    ) -> serde_json::Value {
        let mut response = self.wrap(false, choices);
        response["usage"] = serde_json::json!(usage);
        response
    }

    /// A response (or chunk) with `choices`.
    fn wrap(&self, chunk: bool, choices: Vec<serde_json::Value>) -> serde_json::Value {
        serde_json::json!({
            "id": self.id,
            "object": self.object(chunk),
            "created": self.created,
            "model": self.model,
            "choices": choices,
        })
    }

    fn object(&self, chunk: bool) -> &'static str {
        match (self.endpoint, chunk) {
            (Endpoint::Completions, _) => "text_completion",
            (Endpoint::Chat, false) => "chat.completion",
            (Endpoint::Chat, true) => "chat.completion.chunk",
        }
    }
}
