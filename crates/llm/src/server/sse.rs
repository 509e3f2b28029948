//! Streaming responses: the engine's events for one request's choices as server-sent
//! events in the OpenAI format (`data: {chunk}` per piece of text, each choice's last
//! chunk with its finish reason, optionally a usage chunk, then `data: [DONE]`).
//!
//! Dropping the stream (the client disconnected) drops the request's receiver; the
//! engine thread sees the closed channel before its next step and frees the slots.

use std::convert::Infallible;

use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, StreamExt};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::server::admission::JobEvent;
use crate::server::choices::Choices;

struct StreamState<H> {
    events: UnboundedReceiver<(usize, JobEvent)>,
    /// What the request holds until its stream ends (its queue place, its key's
    /// permit).
    _hold: H,
    choices: Choices,
    include_usage: bool,
    done: bool,
}

fn data(value: &serde_json::Value) -> Event {
    Event::default().data(value.to_string())
}

/// The SSE response for a request whose choices' events arrive on `events`; `hold` is
/// dropped with the stream.
pub(crate) fn stream_response<H: Send + 'static>(
    events: UnboundedReceiver<(usize, JobEvent)>,
    choices: Choices,
    include_usage: bool,
    hold: H,
) -> Response {
    let state = StreamState {
        events,
        _hold: hold,
        choices,
        include_usage,
        done: false,
    };
    let batches = stream::unfold(state, |mut st| async move {
        if st.done {
            return None;
        }
        let mut out = Vec::with_capacity(3);
        match st.events.recv().await {
            Some((index, event)) => {
                let step = st.choices.stream(index, event);
                out.extend(step.chunks.iter().map(data));
                if let Some(error) = step.error {
                    out.push(data(&error));
                    st.done = true;
                } else if st.choices.all_ended() {
                    if st.include_usage {
                        out.push(data(&st.choices.usage_chunk()));
                    }
                    out.push(Event::default().data("[DONE]"));
                    st.done = true;
                }
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
