//! Call deadlines and recovery from dead connections (LOCK-6).
//!
//! Every contract call of the PostgreSQL backend runs under its pool's
//! call deadline ([`PoolOptions::call_deadline_ms`]): past it the call
//! answers `Unavailable` saying so, whatever the network does (a black hole
//! included; sqlx 0.8 exposes no client TCP keepalive, so the deadline is
//! the client's bound, and the server's own keepalive and connection check
//! end the session on its side). A connection abandoned by a deadline is
//! closed, not returned to the pool, so the server ends its transaction.
//!
//! After a call lost its connection (or ran out of time), the pool tests
//! the next connections it hands out, up to its size, with a ping, and
//! discards dead ones: after a server restart every pooled connection is
//! dead, and only one call pays for finding out.
//!
//! [`PoolOptions::call_deadline_ms`]: super::PoolOptions::call_deadline_ms

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::error::{Error, Result};

/// The reason every lost connection is answered with.
pub(crate) const CONNECTION_LOST: &str = "connection to the store lost";

/// Shared by a pool and the calls on it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Health {
    /// Connections still to be tested before they are handed out.
    suspect: Arc<AtomicU32>,
}

impl Health {
    /// After a loss: test the next `n` connections handed out.
    pub(crate) fn suspect(&self, n: u32) {
        self.suspect.fetch_max(n, Ordering::SeqCst);
    }

    /// True when the connection about to be handed out must be tested.
    pub(crate) fn take_suspect(&self) -> bool {
        self.suspect
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
}

/// True for the answer of a call whose connection failed under it.
pub(crate) fn lost_connection(e: &Error) -> bool {
    matches!(e, Error::Unavailable { reason } if reason == CONNECTION_LOST)
}

/// Runs `call` under `deadline_ms`; marks the pool's connections suspect
/// after a loss or a missed deadline.
pub(crate) async fn within<T>(
    deadline_ms: u64,
    pool_size: u32,
    health: &Health,
    call: impl Future<Output = Result<T>>,
) -> Result<T> {
    match tokio::time::timeout(Duration::from_millis(deadline_ms), call).await {
        Ok(Err(e)) if lost_connection(&e) => {
            health.suspect(pool_size);
            Err(e)
        }
        Ok(answer) => answer,
        Err(_) => {
            health.suspect(pool_size);
            Err(Error::Unavailable {
                reason: format!(
                    "no answer from the store within the call deadline of {deadline_ms} ms"
                ),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suspicion_is_taken_once_per_connection() {
        let health = Health::default();
        assert!(!health.take_suspect());
        health.suspect(2);
        health.suspect(1);
        assert!(health.take_suspect());
        assert!(health.take_suspect());
        assert!(!health.take_suspect());
    }
}
