//! What the parts of the targets bench share: the fleet's shape, the bench
//! clock, the criterion benches' record of mean call times, batching,
//! identifiers, latency histograms, and the one-tenant PostgreSQL fleet of
//! the fleet-scale runs.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use connreg::postgres::testing::TestRegistry;
use connreg::postgres::{PgOptions, PgRegistry};
use connreg::{ManualClock, RegistryConfig, Timestamp};
use connreg_benches::resolve_bench::fleet as pgfleet;
use hdrhistogram::Histogram;
use sqlx::PgConnection;

pub(crate) use connreg_benches::memory_fleet::{
    BATCH_CALLS_MAX, BENCHED_TENANTS, CLOCK_MS, FLEET_REPLICAS, REPLICAS_PER_TENANT, id,
};

/// Most microseconds one call's latency is recorded as.
const LATENCY_US_MAX: u64 = 60_000_000;

/// Mean nanoseconds per call of every criterion bench, by ID.
pub(crate) static MEANS: Mutex<BTreeMap<String, (u128, u64)>> = Mutex::new(BTreeMap::new());

pub(crate) fn record(id: &str, elapsed: Duration, iters: u64) {
    let mut means = MEANS.lock().unwrap_or_else(|e| e.into_inner());
    let entry = means.entry(id.to_owned()).or_default();
    entry.0 += elapsed.as_nanos();
    entry.1 += iters;
}

pub(crate) fn mean_ns(id: &str) -> Option<f64> {
    let means = MEANS.lock().unwrap_or_else(|e| e.into_inner());
    means
        .get(id)
        .filter(|(_, n)| *n > 0)
        .map(|(ns, n)| *ns as f64 / *n as f64)
}

/// Splits `iters` into batches of at most [`BATCH_CALLS_MAX`] and sums
/// what `batch` reports for each.
pub(crate) fn batched(iters: u64, mut batch: impl FnMut(usize) -> Duration) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(BATCH_CALLS_MAX);
        total += batch(n as usize);
        left -= n;
    }
    total
}

pub(crate) fn latency_histogram() -> Result<Histogram<u64>, String> {
    Histogram::new_with_bounds(1, LATENCY_US_MAX, 3).map_err(|e| e.to_string())
}

/// A fresh database and a registry on it at [`CLOCK_MS`], its pools as
/// `adjust` leaves the test sizes, with one tenant of the bench fleet
/// (`t0`, its instance, binding and tenant scope) published and `replicas`
/// ready replicas of its instance loaded; and the admin connection that
/// loaded them.
pub(crate) async fn one_tenant_fleet(
    adjust: impl FnOnce(&mut PgOptions),
    replicas: u32,
) -> Result<(TestRegistry, PgRegistry, PgConnection), String> {
    let test = TestRegistry::create().await.map_err(|e| e.to_string())?;
    let mut options = test.options();
    adjust(&mut options);
    let registry = PgRegistry::connect(
        options,
        ManualClock::new(Timestamp(CLOCK_MS)),
        RegistryConfig::default(),
    )
    .await
    .map_err(|e| e.to_string())?;
    pgfleet::publish(&registry, 1)
        .await
        .map_err(|e| e.to_string())?;
    let mut admin = test.admin_connection().await.map_err(|e| e.to_string())?;
    pgfleet::load_replicas(&mut admin, 1, replicas)
        .await
        .map_err(|e| e.to_string())?;
    Ok((test, registry, admin))
}
