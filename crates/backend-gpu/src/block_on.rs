//! A minimal executor for wgpu's futures.
//!
//! On native backends wgpu resolves `request_adapter`, `request_device` and error-scope
//! futures synchronously, so polling with a no-op waker until ready is enough and saves a
//! dependency. Buffer mapping is not driven through futures here: it completes inside
//! `Device::poll`.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// Runs `future` to completion on this thread.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::yield_now();
    }
}
