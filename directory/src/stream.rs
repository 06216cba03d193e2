//! [`StreamInvocation`]: a streaming invocation whose sends and bounded
//! cancellation all go to the target captured before the stream began
//! (DIR-6).

use std::time::{Duration, Instant};

use crate::error::{CancelError, TransportError};
use crate::limits::{CANCEL_ATTEMPTS_MAX, CANCEL_MS_MAX};
use crate::resolved::ResolvedTarget;

/// Carries a stream's frames and its cancellation to a resolved target.
pub trait Transport {
    /// Sends one frame of the stream to `target`.
    fn send(&mut self, target: &ResolvedTarget, frame: &[u8]) -> Result<(), TransportError>;

    /// Asks `target` to cancel the stream; one attempt, which should give up
    /// within `time_left` (the rest of the cancellation's
    /// [`CANCEL_MS_MAX`] budget).
    fn cancel(
        &mut self,
        target: &ResolvedTarget,
        time_left: Duration,
    ) -> Result<(), TransportError>;
}

/// A streaming invocation after its target was resolved.
///
/// It holds the resolved target and nothing that can read the directory, so
/// a document that changes, turns invalid or disappears during the stream
/// cannot move it. It is not `Clone`: a stream is cancelled once, so its
/// cancellation bounds hold for the stream, not for each copy of it.
#[derive(Debug, PartialEq, Eq)]
pub struct StreamInvocation {
    target: ResolvedTarget,
}

impl StreamInvocation {
    pub(crate) fn new(target: ResolvedTarget) -> Self {
        Self { target }
    }

    /// The target captured when the stream was opened.
    #[must_use]
    pub fn target(&self) -> &ResolvedTarget {
        &self.target
    }

    /// Sends one frame to the captured target.
    pub fn send<T: Transport + ?Sized>(
        &self,
        transport: &mut T,
        frame: &[u8],
    ) -> Result<(), TransportError> {
        transport.send(&self.target, frame)
    }

    /// Cancels the stream at the captured target and never anywhere else,
    /// trying at most [`CANCEL_ATTEMPTS_MAX`] times within [`CANCEL_MS_MAX`]
    /// all together: no attempt starts once the time is spent, and each is
    /// told the time left. Returns how many attempts it took.
    pub fn cancel<T: Transport + ?Sized>(self, transport: &mut T) -> Result<u32, CancelError> {
        self.cancel_with_clock(transport, Instant::now)
    }

    /// [`cancel`](Self::cancel) with the time read from `now`, so that a
    /// test or a simulation can decide how long attempts take.
    pub fn cancel_with_clock<T, C>(self, transport: &mut T, mut now: C) -> Result<u32, CancelError>
    where
        T: Transport + ?Sized,
        C: FnMut() -> Instant,
    {
        let budget = Duration::from_millis(CANCEL_MS_MAX);
        let started = now();
        let mut attempts = 0;
        loop {
            let elapsed = now().saturating_duration_since(started);
            let time_left = budget.saturating_sub(elapsed);
            attempts += 1;
            let last = match transport.cancel(&self.target, time_left) {
                Ok(()) => return Ok(attempts),
                Err(last) => last,
            };
            if attempts >= CANCEL_ATTEMPTS_MAX {
                return Err(CancelError::AttemptsExhausted { attempts, last });
            }
            if now().saturating_duration_since(started) >= budget {
                return Err(CancelError::DeadlinePassed {
                    attempts,
                    after_ms: CANCEL_MS_MAX,
                    last,
                });
            }
        }
    }

    /// Ends the stream normally, returning its target.
    #[must_use]
    pub fn finish(self) -> ResolvedTarget {
        self.target
    }
}
