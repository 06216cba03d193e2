//! [`StreamInvocation`]: a streaming invocation whose sends and bounded
//! cancellation all go to the target captured before the stream began
//! (DIR-6).

use crate::error::{CancelError, TransportError};
use crate::limits::CANCEL_ATTEMPTS_MAX;
use crate::resolved::ResolvedTarget;

/// Carries a stream's frames and its cancellation to a resolved target.
pub trait Transport {
    /// Sends one frame of the stream to `target`.
    fn send(&mut self, target: &ResolvedTarget, frame: &[u8]) -> Result<(), TransportError>;

    /// Asks `target` to cancel the stream; one attempt.
    fn cancel(&mut self, target: &ResolvedTarget) -> Result<(), TransportError>;
}

/// A streaming invocation after its target was resolved.
///
/// It holds the resolved target and nothing that can read the directory, so
/// a document that changes, turns invalid or disappears during the stream
/// cannot move it.
#[derive(Debug, Clone, PartialEq, Eq)]
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

    /// Cancels the stream at the captured target, trying at most
    /// [`CANCEL_ATTEMPTS_MAX`] times and never anywhere else. Returns how
    /// many attempts it took.
    pub fn cancel<T: Transport + ?Sized>(self, transport: &mut T) -> Result<u32, CancelError> {
        let mut attempts = 1;
        let mut outcome = transport.cancel(&self.target);
        while outcome.is_err() && attempts < CANCEL_ATTEMPTS_MAX {
            attempts += 1;
            outcome = transport.cancel(&self.target);
        }
        outcome
            .map(|()| attempts)
            .map_err(|last| CancelError::AttemptsExhausted { attempts, last })
    }

    /// Ends the stream normally, returning its target.
    #[must_use]
    pub fn finish(self) -> ResolvedTarget {
        self.target
    }
}
