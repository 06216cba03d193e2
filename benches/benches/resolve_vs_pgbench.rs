//! New-route resolves per second on the PostgreSQL backend, at several
//! client counts, against a fleet of (by default) 10,000 replicas, beside
//! pgbench's built-in TPC-B on the same server in the same run.
//!
//! ```sh
//! cargo bench -p connreg-benches --bench resolve_vs_pgbench
//! CONNREG_BENCH_SECS=20 cargo bench -p connreg-benches --bench resolve_vs_pgbench
//! ```
//!
//! Knobs: see `connreg_benches::resolve_bench::settings` (by default 3 s a
//! measurement, clients 1, 4 and 16). The server comes from connreg-pgtest
//! (`CONNREG_TEST_DATABASE_URL`, else a throwaway local cluster). Every
//! resolve is a new action, so every one runs the whole decision: action
//! lock, binding check, replica choice under `SKIP LOCKED`, scope and
//! replica reservation, fence, insert, commit, with `synchronous_commit` on,
//! and (on the bench's own throwaway cluster) `fsync` turned on so that
//! commits are durable.
//!
//! TPC-B runs on two databases: at scale 1, plain `pgbench -i`, where every
//! client updates the one branch row and so waits for the others (the
//! figure people usually quote, and a flattering one to compare against),
//! and at a scale of at least the largest client count, where clients
//! rarely meet on a branch. Each client count measures the resolves and
//! both TPC-B runs in turn for the same time, and prints every figure, both
//! ratios and the server's `fsync` and `synchronous_commit` as read at that
//! moment.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use connreg::contracts::Routing;
use connreg::postgres::testing::TestRegistry;
use connreg::postgres::{PgDataPlane, PgRegistry, PoolOptions};
use connreg::{ManualClock, RegistryConfig, Timestamp};
use connreg_benches::resolve_bench::fleet;
use connreg_benches::resolve_bench::pgbench::Pgbench;
use connreg_benches::resolve_bench::settings::{PGBENCH_DEFAULT_SCALE, Settings};
use connreg_pgtest::TestDatabase;

/// The bench clock's time: before every replica's lease end.
const CLOCK_MS: u64 = 1_000;

/// One client count's figures.
struct Row {
    clients: u32,
    resolve_tps: f64,
    errors: u64,
    /// TPC-B at [`PGBENCH_DEFAULT_SCALE`].
    tpcb_default_tps: f64,
    /// TPC-B at the settings' wide scale.
    tpcb_wide_tps: f64,
    durability: Durability,
}

/// The server's durability settings, as read beside a measurement.
#[derive(Clone)]
struct Durability {
    fsync: String,
    synchronous_commit: String,
}

impl Durability {
    async fn read(admin: &mut sqlx::PgConnection) -> Result<Durability, String> {
        let (fsync, synchronous_commit): (String, String) = sqlx::query_as(
            "SELECT current_setting('fsync'), current_setting('synchronous_commit')",
        )
        .fetch_one(admin)
        .await
        .map_err(|e| e.to_string())?;
        Ok(Durability {
            fsync,
            synchronous_commit,
        })
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not supported.
    let settings = match Settings::from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("resolve_vs_pgbench: {e}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    if let Err(e) = runtime.block_on(run(settings)) {
        eprintln!("resolve_vs_pgbench: {e}");
        std::process::exit(1);
    }
}

async fn run(settings: Settings) -> Result<(), String> {
    println!(
        "resolve_vs_pgbench: {} s per measurement and client count, clients {:?}, fleet {} tenants x {} replicas = {} replicas, pgbench scales {} and {}",
        settings.secs,
        settings.clients,
        settings.tenants,
        settings.replicas_per_tenant,
        settings.replicas(),
        PGBENCH_DEFAULT_SCALE,
        settings.pgbench_scale
    );

    // The registry's database, its roles, and the fleet.
    let test = TestRegistry::create().await.map_err(|e| e.to_string())?;
    let options = test.options();
    let data_options = options.data.clone();
    let clock = ManualClock::new(Timestamp(CLOCK_MS));
    let registry = PgRegistry::connect(options, clock, RegistryConfig::default())
        .await
        .map_err(|e| e.to_string())?;
    fleet::publish(&registry, settings.tenants)
        .await
        .map_err(|e| e.to_string())?;
    let mut admin = test.admin_connection().await.map_err(|e| e.to_string())?;
    fleet::load_replicas(&mut admin, settings.tenants, settings.replicas_per_tenant)
        .await
        .map_err(|e| e.to_string())?;
    let local = test
        .database()
        .is_some_and(|d| d.server().source() == connreg_pgtest::ServerSource::Local);
    if settings.durable && local {
        // The throwaway cluster starts with fsync off; commits here should
        // reach the disk, as synchronous_commit on promises.
        for statement in ["ALTER SYSTEM SET fsync = on", "SELECT pg_reload_conf()"] {
            sqlx::query(statement)
                .execute(&mut admin)
                .await
                .map_err(|e| e.to_string())?;
        }
        // The reload reaches the backends asynchronously.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let durability = Durability::read(&mut admin).await?;
    if durability.synchronous_commit != "on" {
        return Err(format!(
            "synchronous_commit is {}; the comparison needs it on",
            durability.synchronous_commit
        ));
    }
    let source = test
        .database()
        .map(|d| d.server().source().to_string())
        .unwrap_or_default();
    println!(
        "server: source {source}, synchronous_commit={}, fsync={}{}",
        durability.synchronous_commit,
        durability.fsync,
        if durability.fsync == "off" {
            " (every side commits without flushing to disk)"
        } else {
            ""
        }
    );

    // pgbench's two databases on the same server: plain `pgbench -i`, and
    // one branch row for each client.
    let default_db = TestDatabase::create().await.map_err(|e| e.to_string())?;
    let wide_db = TestDatabase::create().await.map_err(|e| e.to_string())?;
    let pgbench_default = Pgbench::for_database(&default_db)?;
    let pgbench_wide = Pgbench::for_database(&wide_db)?;
    for (pgbench, scale) in [
        (&pgbench_default, PGBENCH_DEFAULT_SCALE),
        (&pgbench_wide, settings.pgbench_scale),
    ] {
        let pgbench = pgbench.clone();
        tokio::task::spawn_blocking(move || pgbench.initialize(scale))
            .await
            .map_err(|e| e.to_string())??;
    }
    // Loading the wide database dirtied a lot of pages: write them out now,
    // not during the first measurements. Needs a superuser (or
    // pg_checkpoint); without one the run goes on, noisier.
    if let Err(e) = sqlx::query("CHECKPOINT").execute(&mut admin).await {
        println!("note: no CHECKPOINT after loading ({e}); early figures may be noisier");
    }

    let mut rows = Vec::new();
    let mut next_action = 0u64;
    for &clients in &settings.clients {
        if settings.warmup_secs > 0 {
            resolve_for(
                &data_options,
                &settings,
                clients,
                settings.warmup_secs,
                &mut next_action,
            )
            .await?;
        }
        let (resolves, errors, elapsed) = resolve_for(
            &data_options,
            &settings,
            clients,
            settings.secs,
            &mut next_action,
        )
        .await?;
        let resolve_tps = resolves as f64 / elapsed.as_secs_f64();
        let tpcb_default_tps = tpcb(&pgbench_default, clients, settings.secs).await?;
        let tpcb_wide_tps = tpcb(&pgbench_wide, clients, settings.secs).await?;
        let durability = Durability::read(&mut admin).await?;
        println!(
            "clients {clients:>3}: resolve {resolve_tps:>9.1} tps ({errors} errors), \
             TPC-B scale {PGBENCH_DEFAULT_SCALE} {tpcb_default_tps:>9.1} tps (ratio {:.2}), \
             TPC-B scale {} {tpcb_wide_tps:>9.1} tps (ratio {:.2}), fsync={}, synchronous_commit={}",
            resolve_tps / tpcb_default_tps,
            settings.pgbench_scale,
            resolve_tps / tpcb_wide_tps,
            durability.fsync,
            durability.synchronous_commit,
        );
        rows.push(Row {
            clients,
            resolve_tps,
            errors,
            tpcb_default_tps,
            tpcb_wide_tps,
            durability,
        });
    }

    let wide = settings.pgbench_scale;
    let default = PGBENCH_DEFAULT_SCALE;
    println!();
    println!(
        "| clients | resolve tps | TPC-B s={default} tps | resolve / TPC-B s={default} | TPC-B s={wide} tps | resolve / TPC-B s={wide} | fsync | synchronous_commit |"
    );
    println!(
        "|--------:|------------:|--------------:|--------------------:|---------------:|---------------------:|:-----:|:------------------:|"
    );
    for r in &rows {
        println!(
            "| {:>7} | {:>11.1} | {:>13.1} | {:>19.2} | {:>14.1} | {:>20.2} | {:^5} | {:^18} |",
            r.clients,
            r.resolve_tps,
            r.tpcb_default_tps,
            r.resolve_tps / r.tpcb_default_tps,
            r.tpcb_wide_tps,
            r.resolve_tps / r.tpcb_wide_tps,
            r.durability.fsync,
            r.durability.synchronous_commit,
        );
    }
    let errors: u64 = rows.iter().map(|r| r.errors).sum();
    registry.close().await;
    drop(test);
    if errors > 0 {
        return Err(format!("{errors} resolves failed"));
    }
    Ok(())
}

/// pgbench's TPC-B with `clients` clients for `secs`, off the runtime.
async fn tpcb(pgbench: &Pgbench, clients: u32, secs: u64) -> Result<f64, String> {
    let pgbench = pgbench.clone();
    tokio::task::spawn_blocking(move || pgbench.run(clients, secs))
        .await
        .map_err(|e| e.to_string())?
}

/// `clients` clients resolving new actions for `secs`; successes, failures
/// and the time measured.
///
/// Like `pgbench -c N -j N`, every client is a thread of its own with its
/// own single-threaded runtime and one connection (a data-plane registry
/// with a pool of one), so clients do not queue behind each other in the
/// bench process.
async fn resolve_for(
    data: &PoolOptions,
    settings: &Settings,
    clients: u32,
    secs: u64,
    next_action: &mut u64,
) -> Result<(u64, u64, Duration), String> {
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(std::sync::Barrier::new(clients as usize + 1));
    let base = *next_action;
    let mut threads = Vec::new();
    for client in 0..clients {
        let (stop, ready) = (stop.clone(), ready.clone());
        let mut data = data.clone();
        data.max_connections = 1;
        data.min_connections = 1;
        let tenants = settings.tenants;
        threads.push(std::thread::spawn(move || -> Result<(u64, u64), String> {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    // Every client reaches the barrier, whatever happens.
                    ready.wait();
                    return Err(e.to_string());
                }
            };
            runtime.block_on(async move {
                let plane = PgDataPlane::connect(
                    data,
                    ManualClock::new(Timestamp(CLOCK_MS)),
                    RegistryConfig::default(),
                )
                .await;
                // Every client reaches the barrier, connected or not.
                ready.wait();
                let plane = plane.map_err(|e| e.to_string())?;
                let (mut done, mut failed, mut n) = (0u64, 0u64, 0u64);
                let mut last_error = None;
                while !stop.load(Ordering::Relaxed) {
                    // Distinct actions for every client and run; tenants
                    // spread by strides prime to any smaller tenant count.
                    let action = format!("a{base}-{client}-{n}");
                    let tenant =
                        ((u64::from(client) * 7_919 + n * 104_729) % u64::from(tenants)) as u32;
                    match plane.route_resolve(fleet::request(action, tenant)).await {
                        Ok(_) => done += 1,
                        Err(e) => {
                            failed += 1;
                            last_error = Some(e);
                        }
                    }
                    n += 1;
                }
                plane.close().await;
                if let Some(e) = last_error {
                    eprintln!("a resolve failed: {e}");
                }
                Ok((done, failed))
            })
        }));
    }
    let started = tokio::task::spawn_blocking(move || {
        ready.wait();
        Instant::now()
    })
    .await
    .map_err(|e| e.to_string())?;
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.store(true, Ordering::Relaxed);
    let elapsed = started.elapsed();
    let (mut done, mut failed) = (0, 0);
    for thread in threads {
        let (d, f) = tokio::task::spawn_blocking(move || thread.join())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|_| "a client thread panicked".to_string())??;
        done += d;
        failed += f;
    }
    *next_action += 1;
    Ok((done, failed, elapsed))
}
