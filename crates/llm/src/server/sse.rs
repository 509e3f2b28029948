//! Streaming responses: the engine's events for one job as server-sent events in the
//! OpenAI format (`data: {chunk}` per piece of text, a last chunk with the finish
//! reason, optionally a usage chunk, then `data: [DONE]`).
//!
//! Dropping the stream (the client disconnected) drops the job's receiver; the engine
//! thread sees the closed channel before its next step and frees the slot.

use std::convert::Infallible;

use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, StreamExt};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::server::admission::JobEvent;
use crate::server::logprob_json::{LogprobWriter, take_logprobs};
use crate::server::openai::{Endpoint, ResponseHead, Usage, finish_reason};
use crate::server::reply_stream::ReplyStream;

/// An echoed completions prompt: its text and tokens.
#[derive(Debug)]
pub(crate) struct Echo {
    /// The text the response shows first.
    pub(crate) text: String,
    /// The prompt's tokens (for their log-probabilities).
    pub(crate) prompt: Vec<u32>,
}

struct StreamState<H> {
    events: UnboundedReceiver<JobEvent>,
    /// What the request holds until its stream ends (its queue place, its key's
    /// permit).
    _hold: H,
    head: ResponseHead,
    include_usage: bool,
    /// Reads a chat reply into reasoning, content and tool calls, if the request asks.
    reply: Option<ReplyStream>,
    /// The tokens' log-probabilities, when asked for; entries wait there until a chunk
    /// carries text (a reply parser can hold text back).
    logprobs: Option<LogprobWriter>,
    /// The echoed prompt, until its chunk is sent.
    echo: Option<Echo>,
    first: bool,
    done: bool,
}

fn data(value: &serde_json::Value) -> Event {
    Event::default().data(value.to_string())
}

/// The SSE response for a job whose events arrive on `events` (read by `reply` into
/// reasoning, content and tool-call deltas when given), with the tokens'
/// log-probabilities when `extras` has a writer and the echoed prompt first when it has
/// one; `hold` is dropped with the stream.
pub(crate) fn stream_response<H: Send + 'static>(
    events: UnboundedReceiver<JobEvent>,
    head: ResponseHead,
    include_usage: bool,
    reply: Option<ReplyStream>,
    extras: (Option<LogprobWriter>, Option<Echo>),
    hold: H,
) -> Response {
    let (logprobs, echo) = extras;
    let state = StreamState {
        events,
        _hold: hold,
        head,
        include_usage,
        reply,
        logprobs,
        echo,
        first: true,
        done: false,
    };
    let batches = stream::unfold(state, |mut st| async move {
        if st.done {
            return None;
        }
        let mut out = Vec::with_capacity(3);
        let chat = st.head.endpoint == Endpoint::Chat;
        let event = st.events.recv().await;
        if let Some(echo) = st.echo.take() {
            // The prompt goes first, with its log-probabilities when they come now.
            if let (Some(JobEvent::PromptLogprobs(entries)), Some(w)) =
                (&event, st.logprobs.as_mut())
            {
                w.push_prompt(&echo.prompt, entries, echo.text.chars().count());
            }
            let logprobs = take_logprobs(&mut st.logprobs);
            out.push(data(&st.head.chunk(
                Some(&echo.text),
                false,
                None,
                logprobs,
            )));
        }
        match event {
            Some(JobEvent::PromptLogprobs(_)) => {}
            Some(JobEvent::Text { text, logprobs }) => {
                if let Some(w) = st.logprobs.as_mut() {
                    w.push(logprobs);
                }
                match st.reply.as_mut() {
                    Some(reply) => {
                        for delta in reply.push(&text) {
                            let logprobs = take_logprobs(&mut st.logprobs);
                            out.push(data(&st.head.delta_chunk(delta, st.first, None, logprobs)));
                            st.first = false;
                        }
                    }
                    None => {
                        let logprobs = take_logprobs(&mut st.logprobs);
                        let chunk = st.head.chunk(Some(&text), chat && st.first, None, logprobs);
                        out.push(data(&chunk));
                        st.first = false;
                    }
                }
            }
            Some(JobEvent::Done {
                reason,
                prompt_tokens,
                cached_tokens,
                completion_tokens,
            }) => {
                let mut called = false;
                if let Some(reply) = st.reply.as_mut() {
                    let (deltas, parsed) = reply.finish();
                    called = !parsed.calls.is_empty();
                    for delta in deltas {
                        let logprobs = take_logprobs(&mut st.logprobs);
                        out.push(data(&st.head.delta_chunk(delta, st.first, None, logprobs)));
                        st.first = false;
                    }
                }
                let finish = finish_reason(reason, called);
                let text = if chat { None } else { Some("") };
                // Entries whose text a reply parser held to the end come with it.
                let logprobs = match st.logprobs.as_mut() {
                    Some(w) if w.has_pending() => w.take(),
                    _ => serde_json::Value::Null,
                };
                out.push(data(&st.head.chunk(
                    text,
                    chat && st.first,
                    Some(finish),
                    logprobs,
                )));
                if st.include_usage {
                    let usage = Usage::new(prompt_tokens, cached_tokens, completion_tokens);
                    out.push(data(&st.head.usage_chunk(usage)));
                }
                out.push(Event::default().data("[DONE]"));
                st.done = true;
            }
            Some(JobEvent::Failed(message)) => {
                out.push(data(&serde_json::json!({
                    "error": {"message": message, "type": "server_error", "param": null, "code": null}
                })));
                st.done = true;
            }
            Some(JobEvent::Invalid(message)) => {
                out.push(data(&serde_json::json!({
                    "error": {"message": message, "type": "invalid_request_error", "param": null, "code": null}
                })));
                st.done = true;
            }
            None => {
                out.push(data(&serde_json::json!({
                    "error": {"message": "the server is shutting down", "type": "server_error", "param": null, "code": null}
                })));
                st.done = true;
            }
        }
        Some((out, st))
    });
    let events = batches.flat_map(stream::iter).map(Ok::<Event, Infallible>);
    Sse::new(events).into_response()
}
