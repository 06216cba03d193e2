//! The PostgreSQL throughput runs (part `pgload`, also run by `postgres`):
//! [`CLIENTS`] clients of one connection each on a fleet of
//! [`THROUGHPUT_REPLICAS`] replicas, with `fsync` and `synchronous_commit`
//! on, doing new-route resolves, whole actions and existing resolves,
//! beside pgbench's TPC-B and select-only on the same server, with the WAL
//! each transaction writes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use connreg::contracts::Routing;
use connreg::postgres::testing::TestRegistry;
use connreg::postgres::{PgDataPlane, PgRegistry, PoolOptions};
use connreg::{ManualClock, Outcome, RegistryConfig, SettleParams, Timestamp};
use connreg_benches::resolve_bench::fleet as pgfleet;
use connreg_benches::resolve_bench::pgbench::{Pgbench, PgbenchRun};
use connreg_pgtest::TestDatabase;
use hdrhistogram::Histogram;

use crate::common::{BENCHED_TENANTS, CLOCK_MS, REPLICAS_PER_TENANT, latency_histogram};
use crate::wal::{Wal, wal_between, wal_breakdown, wal_lsn};

/// The fleet of the throughput runs.
pub(crate) const THROUGHPUT_REPLICAS: u32 = 10_000;

/// Clients of the throughput runs.
pub(crate) const CLIENTS: u32 = 16;

/// Existing routes the existing-resolve run re-resolves, per client.
const EXISTING_ROUTES_PER_CLIENT: u32 = 200;

/// What a throughput run's clients do per operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Load {
    /// Resolve a new action.
    NewRoute,
    /// Resolve a new action, then settle it: a whole action.
    Action,
    /// Resolve one of the client's existing routes again.
    Existing,
}

/// One throughput run's figures.
pub(crate) struct Throughput {
    pub(crate) tps: f64,
    pub(crate) ops: u64,
    pub(crate) errors: u64,
    pub(crate) p99_ms: f64,
    /// Per operation.
    pub(crate) wal: Wal,
    /// Per operation, by record kind.
    pub(crate) wal_kinds: Vec<String>,
}

/// `CLIENTS` clients, each a thread with its own single-threaded runtime
/// and one connection (like `pgbench -c N -j N`), doing `load` for `secs`.
async fn throughput(
    data: &PoolOptions,
    admin: &mut sqlx::PgConnection,
    load: Load,
    secs: u64,
    run: &str,
) -> Result<Throughput, String> {
    let stop = Arc::new(AtomicBool::new(false));
    // Clients connect and (for `Existing`) create their routes, then wait
    // here; the measurement starts when all have arrived.
    let ready = Arc::new(std::sync::Barrier::new(CLIENTS as usize + 1));
    let mut threads = Vec::new();
    for client in 0..CLIENTS {
        let (stop, ready) = (stop.clone(), ready.clone());
        let mut data = data.clone();
        data.max_connections = 1;
        data.min_connections = 1;
        let run = run.to_owned();
        threads.push(std::thread::spawn(
            move || -> Result<(u64, u64, Histogram<u64>), String> {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                let Ok(runtime) = runtime else {
                    ready.wait();
                    return Err("no runtime".into());
                };
                runtime.block_on(client_loop(client, data, load, &run, &stop, &ready))
            },
        ));
    }
    let started = tokio::task::spawn_blocking({
        let ready = ready.clone();
        move || ready.wait()
    });
    started.await.map_err(|e| e.to_string())?;
    let wal_before = wal_lsn(admin).await?;
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.store(true, Ordering::Relaxed);
    let mut ops = 0;
    let mut errors = 0;
    let mut latencies = latency_histogram()?;
    for thread in threads {
        let (done, failed, histogram) = tokio::task::spawn_blocking(move || thread.join())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|_| "a client thread panicked".to_string())??;
        ops += done;
        errors += failed;
        latencies.add(&histogram).map_err(|e| e.to_string())?;
    }
    let elapsed = started.elapsed();
    let wal_after = wal_lsn(admin).await?;
    let wal = wal_between(admin, &wal_before, &wal_after).await?.per(ops);
    let wal_kinds = wal_breakdown(admin, &wal_before, &wal_after, ops).await;
    Ok(Throughput {
        tps: ops as f64 / elapsed.as_secs_f64(),
        ops,
        errors,
        p99_ms: latencies.value_at_quantile(0.99) as f64 / 1_000.0,
        wal,
        wal_kinds,
    })
}

async fn client_loop(
    client: u32,
    data: PoolOptions,
    load: Load,
    run: &str,
    stop: &AtomicBool,
    ready: &std::sync::Barrier,
) -> Result<(u64, u64, Histogram<u64>), String> {
    let plane = PgDataPlane::connect(
        data,
        ManualClock::new(Timestamp(CLOCK_MS)),
        RegistryConfig::default(),
    )
    .await;
    let plane = match plane {
        Ok(plane) => plane,
        Err(e) => {
            ready.wait();
            return Err(e.to_string());
        }
    };
    let tenant_of =
        |n: u64| ((u64::from(client) * 7_919 + n * 104_729) % u64::from(BENCHED_TENANTS)) as u32;
    let mut existing = Vec::new();
    if load == Load::Existing {
        for n in 0..u64::from(EXISTING_ROUTES_PER_CLIENT) {
            let request = pgfleet::request(format!("{run}-{client}-{n}"), tenant_of(n));
            if let Err(e) = plane.route_resolve(request.clone()).await {
                ready.wait();
                return Err(format!("creating existing routes: {e}"));
            }
            existing.push(request);
        }
    }
    ready.wait();
    let mut histogram = latency_histogram()?;
    let (mut done, mut failed, mut n) = (0u64, 0u64, 0u64);
    let mut last_error = None;
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        let result = match load {
            Load::NewRoute => plane
                .route_resolve(pgfleet::request(
                    format!("{run}-{client}-{n}"),
                    tenant_of(n),
                ))
                .await
                .map(drop),
            Load::Action => {
                match plane
                    .route_resolve(pgfleet::request(
                        format!("{run}-{client}-{n}"),
                        tenant_of(n),
                    ))
                    .await
                {
                    Ok(resolved) => plane
                        .route_settle(SettleParams {
                            assignment: resolved.assignment,
                            outcome: Outcome::Completed,
                        })
                        .await
                        .map(drop),
                    Err(e) => Err(e),
                }
            }
            Load::Existing => plane
                .route_resolve(existing[(n % existing.len() as u64) as usize].clone())
                .await
                .map(drop),
        };
        let micros = started.elapsed().as_micros() as u64;
        match result {
            Ok(()) => {
                done += 1;
                histogram.saturating_record(micros.max(1));
            }
            Err(e) => {
                failed += 1;
                last_error = Some(e);
            }
        }
        n += 1;
    }
    plane.close().await;
    if let Some(e) = last_error {
        eprintln!("targets: a call failed: {e}");
    }
    Ok((done, failed, histogram))
}

/// The PostgreSQL throughput figures beside pgbench.
pub(crate) struct PgFigures {
    pub(crate) fsync: String,
    pub(crate) synchronous_commit: String,
    pub(crate) new_route: Throughput,
    pub(crate) action: Throughput,
    pub(crate) existing: Throughput,
    pub(crate) tpcb: PgbenchRun,
    pub(crate) tpcb_wal: Wal,
    pub(crate) tpcb_wal_kinds: Vec<String>,
    pub(crate) select_only: PgbenchRun,
}

async fn pgbench_counted(
    pgbench: &Pgbench,
    admin: &mut sqlx::PgConnection,
    secs: u64,
    select_only: bool,
) -> Result<(PgbenchRun, Wal, Vec<String>), String> {
    let before = wal_lsn(admin).await?;
    let pgbench = pgbench.clone();
    let run = tokio::task::spawn_blocking(move || pgbench.run_counted(CLIENTS, secs, select_only))
        .await
        .map_err(|e| e.to_string())??;
    let after = wal_lsn(admin).await?;
    let wal = wal_between(admin, &before, &after).await?;
    let kinds = wal_breakdown(admin, &before, &after, run.transactions).await;
    Ok((run, wal.per(run.transactions), kinds))
}

pub(crate) async fn pg_throughput(secs: u64) -> Result<PgFigures, String> {
    let test = TestRegistry::create().await.map_err(|e| e.to_string())?;
    let options = test.options();
    let data = options.data.clone();
    let clock = ManualClock::new(Timestamp(CLOCK_MS));
    let control = PgRegistry::connect(options, clock, RegistryConfig::default())
        .await
        .map_err(|e| e.to_string())?;
    let tenants = THROUGHPUT_REPLICAS / REPLICAS_PER_TENANT;
    pgfleet::publish(&control, tenants)
        .await
        .map_err(|e| e.to_string())?;
    let mut admin = test.admin_connection().await.map_err(|e| e.to_string())?;
    pgfleet::load_replicas(&mut admin, tenants, REPLICAS_PER_TENANT)
        .await
        .map_err(|e| e.to_string())?;
    let local = test
        .database()
        .is_some_and(|d| d.server().source() == connreg_pgtest::ServerSource::Local);
    if local {
        // The throwaway cluster starts with fsync off; here commits must
        // reach the disk, as synchronous_commit on promises.
        for statement in ["ALTER SYSTEM SET fsync = on", "SELECT pg_reload_conf()"] {
            sqlx::query(statement)
                .execute(&mut admin)
                .await
                .map_err(|e| e.to_string())?;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (fsync, synchronous_commit): (String, String) =
        sqlx::query_as("SELECT current_setting('fsync'), current_setting('synchronous_commit')")
            .fetch_one(&mut admin)
            .await
            .map_err(|e| e.to_string())?;

    let tpcb_db = TestDatabase::create().await.map_err(|e| e.to_string())?;
    let pgbench = Pgbench::for_database(&tpcb_db)?;
    {
        let pgbench = pgbench.clone();
        tokio::task::spawn_blocking(move || pgbench.initialize(CLIENTS))
            .await
            .map_err(|e| e.to_string())??;
    }
    if let Err(e) = sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        .execute(&mut admin)
        .await
    {
        eprintln!("targets: no pg_walinspect ({e}); WAL is compared with full-page images");
    }
    if let Err(e) = sqlx::query("CHECKPOINT").execute(&mut admin).await {
        eprintln!("targets: no CHECKPOINT after loading ({e}); figures may be noisier");
    }

    eprintln!("targets: PostgreSQL throughput at {CLIENTS} clients, {secs} s each");
    // Warm-up: caches, the fleet's pages, the plans.
    throughput(&data, &mut admin, Load::NewRoute, 1.min(secs), "w").await?;
    let new_route = throughput(&data, &mut admin, Load::NewRoute, secs, "n").await?;
    let (tpcb, tpcb_wal, tpcb_wal_kinds) =
        pgbench_counted(&pgbench, &mut admin, secs, false).await?;
    let action = throughput(&data, &mut admin, Load::Action, secs, "s").await?;
    let existing = throughput(&data, &mut admin, Load::Existing, secs, "e").await?;
    let (select_only, _, _) = pgbench_counted(&pgbench, &mut admin, secs, true).await?;
    control.close().await;
    drop(tpcb_db);
    drop(test);
    Ok(PgFigures {
        fsync,
        synchronous_commit,
        new_route,
        action,
        existing,
        tpcb,
        tpcb_wal,
        tpcb_wal_kinds,
        select_only,
    })
}
