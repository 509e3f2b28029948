//! The bodies between hyper and the router: a request body with a deadline (the body
//! timeout) and a response body that ends its request in the connection's tracker when
//! it has been sent (or dropped).

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tokio::time::Sleep;

use crate::server::connections::RequestGuard;

/// The error a [`DeadlineBody`] gives when its deadline passes.
#[derive(Debug)]
pub(crate) struct BodyTimeout;

impl fmt::Display for BodyTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the request body did not arrive in time")
    }
}

impl Error for BodyTimeout {}

/// A request body that fails, and sets its flag, when it has not ended within its
/// timeout of the request head.
#[derive(Debug)]
pub(crate) struct DeadlineBody<B> {
    inner: B,
    deadline: Pin<Box<Sleep>>,
    expired: Arc<AtomicBool>,
}

impl<B> DeadlineBody<B> {
    /// `inner`, due within `timeout` from now; `expired` is set if it is not.
    pub(crate) fn new(inner: B, timeout: Duration, expired: Arc<AtomicBool>) -> DeadlineBody<B> {
        DeadlineBody {
            inner,
            deadline: Box::pin(tokio::time::sleep(timeout)),
            expired,
        }
    }
}

impl<B> HttpBody for DeadlineBody<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn Error + Send + Sync>>,
{
    type Data = Bytes;
    type Error = Box<dyn Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => Poll::Ready(frame.map(|f| f.map_err(Into::into))),
            Poll::Pending => {
                if this.deadline.as_mut().poll(cx).is_ready() {
                    this.expired.store(true, Ordering::Release);
                    Poll::Ready(Some(Err(Box::new(BodyTimeout))))
                } else {
                    Poll::Pending
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A response body holding its request's guard until its last frame (or its drop).
#[derive(Debug)]
pub(crate) struct TrackedBody {
    inner: Body,
    guard: Option<RequestGuard>,
}

impl TrackedBody {
    /// `inner`, ending `guard`'s request when done.
    pub(crate) fn new(inner: Body, guard: RequestGuard) -> TrackedBody {
        TrackedBody {
            inner,
            guard: Some(guard),
        }
    }
}

impl HttpBody for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None) | Poll::Ready(Some(Err(_)))) {
            this.guard = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
