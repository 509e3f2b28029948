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

struct StreamState {
    events: UnboundedReceiver<JobEvent>,
    head: ResponseHead,
    include_usage: bool,
    first: bool,
    done: bool,
}

fn data(value: &serde_json::Value) -> Event {
    Event::default().data(value.to_string())
}

/// The SSE response for a job whose events arrive on `events`.
pub(crate) fn stream_response(
    events: UnboundedReceiver<JobEvent>,
    head: ResponseHead,
    include_usage: bool,
) -> Response {
    let state = StreamState {
        events,
        head,
        include_usage,
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
            Some(JobEvent::Text(text)) => {
                out.push(data(&st.head.chunk(Some(&text), chat && st.first, None)));
                st.first = false;
            }
            Some(JobEvent::Done {
                reason,
                prompt_tokens,
                cached_tokens,
                completion_tokens,
            }) => {
                let finish = finish_reason(reason);
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
