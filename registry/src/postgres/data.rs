//! What every data-plane call needs: the data pool, the clock, the policy.

use std::sync::Arc;

use sqlx::PgPool;

use crate::clock::{Clock, Timestamp};
use crate::request::RegistryConfig;

/// The data plane's handle. Clones share the pool and the clock.
#[derive(Clone)]
pub(crate) struct Data {
    pub(crate) pool: PgPool,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) config: RegistryConfig,
}

impl Data {
    /// The injected clock's time (LEASE-4): passed to every query that
    /// compares with a lease; the server's `now()` is never used.
    pub(crate) fn now(&self) -> Timestamp {
        self.clock.now()
    }
}
