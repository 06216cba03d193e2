//! Resolve latency on PostgreSQL with and without catalog publications
//! running beside it (LOCK-4): the same clients, the same fleet, the same
//! run, one phase after the other.
//!
//! ```sh
//! cargo bench -p connreg-benches --bench publication_stall
//! CONNREG_BENCH_SECS=20 cargo bench -p connreg-benches --bench publication_stall
//! ```
//!
//! Each phase runs [`CLIENTS`] clients resolving new actions for
//! `CONNREG_BENCH_SECS` seconds (default 5). In the second phase a
//! publisher publishes a small catalog change every
//! [`PUBLICATION_INTERVAL_MS`]. A publication takes the catalog's exclusive
//! lock, which every resolve takes shared; the figures show how much of the
//! publisher's wait reaches the resolves. Latencies are client-side, per
//! resolve, in microseconds.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use connreg::contracts::{CatalogAdmin, Routing};
use connreg::postgres::PgRegistry;
use connreg::postgres::testing::TestRegistry;
use connreg::{CapabilityDefinition, Change, ManualClock, Publication, RegistryConfig, Timestamp};
use connreg_benches::resolve_bench::fleet;
use hdrhistogram::Histogram;

/// Resolving clients in both phases.
const CLIENTS: u32 = 8;
/// Tenants of the fleet; clients spread over them.
const TENANTS: u32 = 8;
/// Replicas per tenant.
const REPLICAS_PER_TENANT: u32 = 64;
/// Pause between two publications in the second phase.
const PUBLICATION_INTERVAL_MS: u64 = 100;
/// Longest phase the knob accepts, in seconds.
const SECS_MAX: u64 = 600;
/// The clock the registry sees: before every lease end.
const CLOCK_MS: u64 = 1_000;

struct Phase {
    resolves: u64,
    errors: u64,
    publications: u64,
    histogram: Histogram<u64>,
}

fn main() {
    let secs = match std::env::var("CONNREG_BENCH_SECS") {
        Err(_) => 5,
        Ok(v) => match v.parse::<u64>() {
            Ok(s) if (1..=SECS_MAX).contains(&s) => s,
            _ => {
                eprintln!("publication_stall: CONNREG_BENCH_SECS must be 1 to {SECS_MAX}");
                std::process::exit(2);
            }
        },
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    if let Err(e) = runtime.block_on(run(secs)) {
        eprintln!("publication_stall: {e}");
        std::process::exit(1);
    }
}

async fn run(secs: u64) -> Result<(), String> {
    let test = TestRegistry::create().await.map_err(|e| e.to_string())?;
    let registry = PgRegistry::connect(
        test.options(),
        ManualClock::new(Timestamp(CLOCK_MS)),
        RegistryConfig::default(),
    )
    .await
    .map_err(|e| e.to_string())?;
    fleet::publish(&registry, TENANTS)
        .await
        .map_err(|e| e.to_string())?;
    let mut admin = test.admin_connection().await.map_err(|e| e.to_string())?;
    fleet::load_replicas(&mut admin, TENANTS, REPLICAS_PER_TENANT)
        .await
        .map_err(|e| e.to_string())?;
    println!(
        "publication_stall: {CLIENTS} clients, {secs} s a phase, {TENANTS} tenants x {REPLICAS_PER_TENANT} replicas, publications every {PUBLICATION_INTERVAL_MS} ms in the second phase"
    );
    let quiet = phase(&registry, secs, false, "quiet").await?;
    let busy = phase(&registry, secs, true, "busy").await?;
    println!(
        "| phase | resolves | errors | publications | p50 µs | p99 µs | max µs |\n|---|---|---|---|---|---|---|"
    );
    for (name, p) in [("no publications", &quiet), ("publications", &busy)] {
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} |",
            p.resolves,
            p.errors,
            p.publications,
            p.histogram.value_at_quantile(0.5),
            p.histogram.value_at_quantile(0.99),
            p.histogram.max()
        );
    }
    let ratio = busy.histogram.value_at_quantile(0.99) as f64
        / quiet.histogram.value_at_quantile(0.99).max(1) as f64;
    println!("p99 with publications / p99 without: {ratio:.2}");
    Ok(())
}

async fn phase(
    registry: &PgRegistry,
    secs: u64,
    publish: bool,
    tag: &str,
) -> Result<Phase, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let publications = Arc::new(AtomicU64::new(0));
    let publisher = publish.then(|| {
        let registry = registry.clone();
        let stop = stop.clone();
        let publications = publications.clone();
        tokio::spawn(async move {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                // A small catalog change: one definition's summary.
                let change = Change::UpsertDefinition(CapabilityDefinition {
                    id: "bench.noop".try_into().expect("a valid id"),
                    summary: format!("publication {n}"),
                    schema: "{}".into(),
                    active: true,
                });
                if registry
                    .catalog_publish(Publication {
                        changes: vec![change],
                    })
                    .await
                    .is_ok()
                {
                    publications.fetch_add(1, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(PUBLICATION_INTERVAL_MS)).await;
            }
        })
    });
    let mut clients = Vec::new();
    for c in 0..CLIENTS {
        let registry = registry.clone();
        let stop = stop.clone();
        let tag = tag.to_string();
        clients.push(tokio::spawn(async move {
            let mut histogram = Histogram::<u64>::new(3).expect("a histogram");
            let (mut resolves, mut errors, mut n) = (0u64, 0u64, 0u64);
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let request = fleet::request(format!("{tag}-{c}-{n}"), c % TENANTS);
                let started = Instant::now();
                let answer = registry.route_resolve(request).await;
                let micros = started.elapsed().as_micros() as u64;
                match answer {
                    Ok(_) => {
                        resolves += 1;
                        let _ = histogram.record(micros);
                    }
                    Err(_) => errors += 1,
                }
            }
            (resolves, errors, histogram)
        }));
    }
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.store(true, Ordering::Relaxed);
    let mut out = Phase {
        resolves: 0,
        errors: 0,
        publications: 0,
        histogram: Histogram::new(3).expect("a histogram"),
    };
    for client in clients {
        let (resolves, errors, histogram) = client.await.map_err(|e| e.to_string())?;
        out.resolves += resolves;
        out.errors += errors;
        out.histogram.add(histogram).map_err(|e| e.to_string())?;
    }
    if let Some(publisher) = publisher {
        publisher.await.map_err(|e| e.to_string())?;
    }
    out.publications = publications.load(Ordering::Relaxed);
    Ok(out)
}
