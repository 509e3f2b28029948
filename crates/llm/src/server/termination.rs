//! SIGINT (Ctrl-C) and SIGTERM, listened for once per process from the first
//! [`listen`] on and counted as they arrive, so that a signal is never lost between two
//! listeners: one that comes after the loading responder hands its socket back and
//! before the running server waits still stops that server. A thread of its own
//! (`tempra-signals`) owns the listeners for the rest of the process, which from then
//! on no longer takes the signals' default action.

use std::sync::OnceLock;

use tokio::sync::watch;

/// The count of signals since listening began; `None` where the listeners could not be
/// set up (the signals then keep their default action).
static SIGNALS: OnceLock<Option<watch::Receiver<u64>>> = OnceLock::new();

/// Starts listening, once per process: from its return on, every SIGINT and SIGTERM is
/// counted.
pub(crate) fn listen() {
    let _ = SIGNALS.get_or_init(start);
}

/// Resolves once `n` signals (1: the first) have arrived since [`listen`], whenever
/// they arrived; never where signals cannot be listened for.
pub(crate) async fn signals(n: u64) {
    match SIGNALS.get_or_init(start).clone() {
        Some(mut count) => {
            if count.wait_for(|&c| c >= n).await.is_err() {
                // The listener thread ended: no more signals will be counted.
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending::<()>().await,
    }
}

/// Spawns the listener thread and returns once its listeners are installed.
fn start() -> Option<watch::Receiver<u64>> {
    let (count, receiver) = watch::channel(0u64);
    let (ready, installed) = std::sync::mpsc::sync_channel(1);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    std::thread::Builder::new()
        .name("tempra-signals".into())
        .spawn(move || runtime.block_on(count_signals(count, ready)))
        .ok()?;
    match installed.recv() {
        Ok(true) => Some(receiver),
        _ => None,
    }
}

/// Installs the listeners, says so on `ready`, then adds one to `count` per signal.
async fn count_signals(count: watch::Sender<u64>, ready: std::sync::mpsc::SyncSender<bool>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut interrupt), Ok(mut terminate)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            let _ = ready.send(false);
            return;
        };
        let _ = ready.send(true);
        loop {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
            count.send_modify(|c| *c += 1);
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ready.send(true);
        while tokio::signal::ctrl_c().await.is_ok() {
            count.send_modify(|c| *c += 1);
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::time::Duration;

    use super::*;

    /// The window the latch closes: a signal that arrives while nobody waits is seen
    /// by a waiter that starts later; a second signal is counted apart.
    #[test]
    fn a_signal_before_anyone_waits_is_not_lost() {
        listen();
        // SAFETY: `kill` with this process's own id and SIGTERM only sends a signal,
        // which the listener thread installed above handles.
        assert_eq!(unsafe { libc::kill(libc::getpid(), libc::SIGTERM) }, 0);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(10), signals(1))
                .await
                .expect("the first signal is seen by a later waiter");
            let second = tokio::time::timeout(Duration::from_millis(200), signals(2)).await;
            assert!(second.is_err(), "one signal counted as two");
            // SAFETY: as above.
            assert_eq!(unsafe { libc::kill(libc::getpid(), libc::SIGINT) }, 0);
            tokio::time::timeout(Duration::from_secs(10), signals(2))
                .await
                .expect("the second signal");
        });
    }
}
