//! Publication latency under load on PostgreSQL (part `fleet`, LOCK-4):
//! [`RESOLVERS`] tasks share one registry whose data pool has a connection
//! for each, all resolving new actions of ONE tenant, so every resolve
//! takes the same admission counter (the hot spot). A quiet phase without
//! publications, then a busy phase in which a publisher re-publishes the
//! tenant's binding with the next policy revision every
//! [`PUBLICATION_INTERVAL_MS`] (each publication takes the catalog's
//! exclusive lock that every decision takes shared). Reported: publication
//! latency (p50, p99, max), publications that failed (an `Unavailable`
//! included), and resolve p99 in each phase.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use connreg::contracts::{CatalogAdmin, Routing};
use connreg::limits::{
    PUBLICATION_LOCK_ATTEMPTS_MAX, PUBLICATION_LOCK_BACKOFF_MS_PER_ATTEMPT,
    PUBLICATION_LOCK_WAIT_MS,
};
use connreg::postgres::PgRegistry;
use connreg::{Change, Error, Publication};
use connreg_benches::resolve_bench::fleet as pgfleet;
use hdrhistogram::Histogram;

use crate::common::{latency_histogram, one_tenant_fleet};

/// Concurrent resolvers, and connections of the data pool.
pub(crate) const RESOLVERS: u32 = 32;

/// Replicas of the tenant's instance (capacity 10,000 each).
const REPLICAS: u32 = 64;

/// The one tenant every resolve is for (the one [`one_tenant_fleet`]
/// publishes).
const TENANT: u32 = 0;

/// Pause between two publications in the busy phase.
pub(crate) const PUBLICATION_INTERVAL_MS: u64 = 100;

/// Unmeasured seconds before the quiet phase: connections, plans, caches.
const WARM_UP_SECS: u64 = 1;

/// Longest a publication can wait for the catalog lock before it answers
/// `Unavailable`: every attempt's wait in the queue and the pauses after
/// them (`postgres/catalog.rs`), 4,900 ms; its own run comes on top.
pub(crate) const PUBLICATION_WAITS_MS_MAX: u32 = PUBLICATION_LOCK_WAIT_MS
    * PUBLICATION_LOCK_ATTEMPTS_MAX
    + PUBLICATION_LOCK_BACKOFF_MS_PER_ATTEMPT
        * (PUBLICATION_LOCK_ATTEMPTS_MAX * (PUBLICATION_LOCK_ATTEMPTS_MAX + 1) / 2);

/// One phase's resolves.
#[derive(Default)]
pub(crate) struct Resolves {
    pub(crate) created: u64,
    pub(crate) no_capacity: u64,
    /// Any other answer than a route or `NoCapacity`.
    pub(crate) failed: u64,
    pub(crate) p99_ms: f64,
}

/// Both phases and the publications of the busy one.
pub(crate) struct PublicationLoad {
    pub(crate) quiet: Resolves,
    pub(crate) busy: Resolves,
    pub(crate) published: u64,
    /// Publications answered with an error, `Unavailable` included.
    pub(crate) failed: u64,
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) max_ms: f64,
}

impl PublicationLoad {
    /// Resolve p99 with publications ÷ without: the routing stall.
    pub(crate) fn stall(&self) -> f64 {
        self.busy.p99_ms / self.quiet.p99_ms.max(0.001)
    }
}

/// The quiet phase, then the busy one, `secs` each, on a fresh database.
pub(crate) async fn publication_load(secs: u64) -> Result<PublicationLoad, String> {
    let (test, registry, admin) = one_tenant_fleet(
        |options| {
            options.data.max_connections = RESOLVERS;
            options.data.min_connections = RESOLVERS;
        },
        REPLICAS,
    )
    .await?;
    drop(admin);
    eprintln!(
        "targets: {RESOLVERS} resolvers of one tenant, {secs} s without publications, then {secs} s with one every {PUBLICATION_INTERVAL_MS} ms"
    );
    let run = async {
        resolve_phase(&registry, WARM_UP_SECS, "w").await?;
        let quiet = resolve_phase(&registry, secs, "q").await?;
        let stop = Arc::new(AtomicBool::new(false));
        let publisher = tokio::spawn(publish_until(registry.clone(), stop.clone()));
        let busy = resolve_phase(&registry, secs, "b").await;
        stop.store(true, Ordering::Relaxed);
        let (published, failed, latencies) = publisher
            .await
            .map_err(|e| format!("the publisher: {e}"))??;
        let ms = |micros: u64| micros as f64 / 1_000.0;
        Ok::<_, String>(PublicationLoad {
            quiet,
            busy: busy?,
            published,
            failed,
            p50_ms: ms(latencies.value_at_quantile(0.5)),
            p99_ms: ms(latencies.value_at_quantile(0.99)),
            max_ms: ms(latencies.max()),
        })
    };
    let load = run.await;
    registry.close().await;
    drop(test);
    load
}

/// [`RESOLVERS`] tasks resolving new actions of the tenant for `secs`.
async fn resolve_phase(registry: &PgRegistry, secs: u64, tag: &str) -> Result<Resolves, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..RESOLVERS)
        .map(|task| {
            let (registry, stop) = (registry.clone(), stop.clone());
            let prefix = format!("{tag}-{task}");
            tokio::spawn(async move { resolve_until(&registry, &stop, &prefix).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = latency_histogram()?;
    let mut out = Resolves::default();
    for task in tasks {
        let (tally, histogram) = task.await.map_err(|e| format!("a resolver: {e}"))??;
        out.created += tally.created;
        out.no_capacity += tally.no_capacity;
        out.failed += tally.failed;
        all.add(&histogram).map_err(|e| e.to_string())?;
    }
    out.p99_ms = all.value_at_quantile(0.99) as f64 / 1_000.0;
    Ok(out)
}

/// One resolver: new actions `{prefix}-{n}` until `stop`, each timed.
async fn resolve_until(
    registry: &PgRegistry,
    stop: &AtomicBool,
    prefix: &str,
) -> Result<(Resolves, Histogram<u64>), String> {
    let mut histogram = latency_histogram()?;
    let mut tally = Resolves::default();
    let mut last_error = None;
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let request = pgfleet::request(format!("{prefix}-{n}"), TENANT);
        let started = Instant::now();
        let answer = registry.route_resolve(request).await;
        let micros = started.elapsed().as_micros() as u64;
        match answer {
            Ok(_) => {
                tally.created += 1;
                histogram.saturating_record(micros.max(1));
            }
            Err(Error::NoCapacity) => tally.no_capacity += 1,
            Err(e) => {
                tally.failed += 1;
                last_error = Some(e);
            }
        }
    }
    if let Some(e) = last_error {
        eprintln!("targets: a resolve under publications failed: {e}");
    }
    Ok((tally, histogram))
}

/// Publishes the tenant's binding with the next policy revision every
/// [`PUBLICATION_INTERVAL_MS`] until `stop`: publications that landed,
/// those that failed, and the latency of each, in microseconds.
async fn publish_until(
    registry: PgRegistry,
    stop: Arc<AtomicBool>,
) -> Result<(u64, u64, Histogram<u64>), String> {
    let mut latencies = latency_histogram()?;
    let (mut published, mut failed) = (0u64, 0u64);
    // Revision 1 is the fleet's own.
    let mut policy_revision = 1;
    while !stop.load(Ordering::Relaxed) {
        policy_revision += 1;
        let publication = Publication {
            changes: vec![Change::UpsertBinding(pgfleet::binding(
                TENANT,
                policy_revision,
            ))],
        };
        let started = Instant::now();
        let answer = registry.catalog_publish(publication).await;
        latencies.saturating_record((started.elapsed().as_micros() as u64).max(1));
        match answer {
            Ok(_) => published += 1,
            Err(e) => {
                failed += 1;
                eprintln!("targets: publication {policy_revision} failed: {e}");
            }
        }
        tokio::time::sleep(Duration::from_millis(PUBLICATION_INTERVAL_MS)).await;
    }
    Ok((published, failed, latencies))
}
