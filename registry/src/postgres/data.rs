//! What every data-plane call needs: the data pool, the clock, the policy.

use std::sync::Arc;

use std::future::Future;

use sqlx::PgPool;

use super::config::PoolOptions;
use super::health::{self, Health};
use crate::error::Result;

use crate::clock::{Clock, Timestamp};
use crate::request::RegistryConfig;

/// The data plane's handle. Clones share the pool and the clock.
#[derive(Clone)]
pub(crate) struct Data {
    pub(crate) pool: PgPool,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) config: RegistryConfig,
    pub(crate) calls: Calls,
    /// A planted bug, for proving the checks catch it.
    #[cfg(feature = "plant")]
    pub(crate) plant: Option<crate::plant::PgPlant>,
}

/// How the calls on one pool are bounded (LOCK-6).
#[derive(Debug, Clone)]
pub(crate) struct Calls {
    /// The pool's call deadline.
    pub(crate) deadline_ms: u64,
    /// The pool's most connections: how many to test after a loss.
    pub(crate) pool_size: u32,
    pub(crate) health: Health,
}

impl Calls {
    pub(crate) fn of(options: &PoolOptions, health: Health) -> Calls {
        Calls {
            deadline_ms: options.call_deadline_ms,
            pool_size: options.max_connections,
            health,
        }
    }

    /// Runs one contract call under the deadline.
    pub(crate) async fn within<T>(&self, call: impl Future<Output = Result<T>>) -> Result<T> {
        health::within(self.deadline_ms, self.pool_size, &self.health, call).await
    }
}

impl Data {
    /// The injected clock's time (LEASE-4): passed to every query that
    /// compares with a lease; the server's `now()` is never used.
    pub(crate) fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// True when `plant` is switched on.
    #[cfg(feature = "plant")]
    pub(crate) fn planted(&self, plant: crate::plant::PgPlant) -> bool {
        self.plant == Some(plant)
    }
}
