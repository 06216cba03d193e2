//! Running async work from sync code: on a new thread with its own runtime.
//!
//! [`TestDatabase::create_blocking`](crate::TestDatabase::create_blocking)
//! may be called from inside a tokio runtime, where blocking on another
//! runtime panics, or from none at all. A fresh thread works in both cases and
//! lets the caller stop waiting after a bound.

use std::future::Future;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// Why the work produced no result.
#[derive(Debug)]
pub(crate) enum FreshThreadError {
    /// The thread or its runtime could not be created.
    Io(std::io::Error),
    /// The work did not finish within the wait; it is left running detached.
    TimedOut,
    /// The work panicked.
    Panicked,
}

impl std::fmt::Display for FreshThreadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FreshThreadError::Io(error) => {
                write!(f, "could not start a thread and runtime: {error}")
            }
            FreshThreadError::TimedOut => f.write_str("it did not finish in time"),
            FreshThreadError::Panicked => f.write_str("it panicked"),
        }
    }
}

/// Runs the future `make` returns on a new thread with a current-thread
/// tokio runtime, and waits at most `wait` for its output.
pub(crate) fn run_on_fresh_thread<T, F, Fut>(
    name: &str,
    wait: Duration,
    make: F,
) -> Result<T, FreshThreadError>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T>,
    T: Send + 'static,
{
    let (sender, receiver) = mpsc::sync_channel(1);
    thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let outcome = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map(|runtime| runtime.block_on(make()));
            // The receiver is gone only if the caller stopped waiting.
            let _ = sender.send(outcome);
        })
        .map_err(FreshThreadError::Io)?;
    match receiver.recv_timeout(wait) {
        Ok(Ok(output)) => Ok(output),
        Ok(Err(error)) => Err(FreshThreadError::Io(error)),
        Err(mpsc::RecvTimeoutError::Timeout) => Err(FreshThreadError::TimedOut),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(FreshThreadError::Panicked),
    }
}
