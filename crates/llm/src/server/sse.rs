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
use crate::server::openai::{Endpoint, ResponseHead, Usage, finish_reason};
use crate::server::reply_stream::ReplyStream;

struct StreamState<H> {
    events: UnboundedReceiver<JobEvent>,
    /// What the request holds until its stream ends (its queue place, its key's
    /// permit).
    _hold: H,
    head: ResponseHead,
    include_usage: bool,
    /// Reads a chat reply into reasoning, content and tool calls, if the request asks.
    reply: Option<ReplyStream>,
    first: bool,
    done: bool,
}

fn data(value: &serde_json::Value) -> Event {
    Event::default().data(value.to_string())
}

/// The SSE response for a job whose events arrive on `events` (read by `reply` into
/// reasoning, content and tool-call deltas when given); `hold` is dropped with the
/// stream.
pub(crate) fn stream_response<H: Send + 'static>(
    events: UnboundedReceiver<JobEvent>,
    head: ResponseHead,
    include_usage: bool,
    reply: Option<ReplyStream>,
    hold: H,
) -> Response {
    let state = StreamState {
        events,
        _hold: hold,
        head,
        include_usage,
        reply,
        first: true,
        done: false,
    };
    let batches = stream::unfold(state, |mut st| async move {
        if st.done {
            return None;
        }
        let mut out = Vec::with_capacity(3);
        let chat = st.head.endpoint == Endpoint::Chat;
        match st.events.recv().await {
            Some(JobEvent::Text(text)) => match st.reply.as_mut() {
                Some(reply) => {
                    for delta in reply.push(&text) {
                        out.push(data(&st.head.delta_chunk(delta, st.first, None)));
                        st.first = false;
                    }
                }
                None => {
                    out.push(data(&st.head.chunk(Some(&text), chat && st.first, None)));
                    st.first = false;
                }
            },
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
                        out.push(data(&st.head.delta_chunk(delta, st.first, None)));
                        st.first = false;
                    }
                }
                let finish = finish_reason(reason, called);
                let text = if chat { None } else { Some("") };
                out.push(data(&st.head.chunk(text, chat && st.first, Some(finish))));
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
