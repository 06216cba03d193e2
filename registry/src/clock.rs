//! Time, injected (LEASE-4). No rule reads the machine's wall clock directly.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// Milliseconds since an epoch the clock chooses. Only differences and
/// order matter to the registry.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(pub u64);

impl Timestamp {
    /// This instant plus `ms` milliseconds, saturating.
    pub fn plus_ms(self, ms: u64) -> Timestamp {
        Timestamp(self.0.saturating_add(ms))
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

/// A source of the current time.
pub trait Clock: Send + Sync + 'static {
    /// The current instant.
    fn now(&self) -> Timestamp;
}

/// A clock that moves only when told to: tests and the simulator drive it.
/// Clones share one time.
#[derive(Clone, Default, Debug)]
pub struct ManualClock {
    ms: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock starting at `start`.
    pub fn new(start: Timestamp) -> ManualClock {
        ManualClock {
            ms: Arc::new(AtomicU64::new(start.0)),
        }
    }

    /// Moves the clock forward by `ms` milliseconds.
    pub fn advance_ms(&self, ms: u64) {
        self.ms.fetch_add(ms, Ordering::SeqCst);
    }

    /// Sets the clock, forward or backward (a clock jump).
    pub fn set(&self, to: Timestamp) {
        self.ms.store(to.0, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.ms.load(Ordering::SeqCst))
    }
}

/// The machine's clock, for production processes. Not used by the
/// deterministic parts (tests, the simulator).
#[derive(Clone, Copy, Default, Debug)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(
        clippy::disallowed_methods,
        reason = "the production clock is the one place that reads it"
    )]
    fn now(&self) -> Timestamp {
        let since = std::time::SystemTime::now() // determinism-ok: production clock only
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp(since.as_millis() as u64)
    }
}
