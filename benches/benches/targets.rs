//! The performance targets, measured side by side in one run.
//!
//! ```sh
//! cargo bench -p connreg-benches --bench targets
//! CONNREG_TARGETS_SECS=20 cargo bench -p connreg-benches --bench targets
//! ```
//!
//! Three parts, in this order:
//!
//! 1. Criterion benches `backend/<memory|postgres>/<operation>/<replicas>`:
//!    new-route resolve, resolve of an existing route, settle, heartbeat and
//!    one catalog page, one caller at a time, on fleets of 1,000, 10,000 and
//!    100,000 replicas. Every fleet gives the benched tenants the same ten
//!    replicas each; the rest are other tenants', so the cost at 100,000 ÷ at
//!    1,000 shows whether routing grows with unrelated replicas (AUTH-4).
//! 2. Throughput at [`CLIENTS`] clients on PostgreSQL (10,000 replicas) beside
//!    pgbench on the same server in the same run, with `fsync` and
//!    `synchronous_commit` on: new-route resolves with their p99, whole
//!    actions (resolve then settle), resolves of existing routes, TPC-B at a
//!    scale of at least the client count and select-only; WAL bytes per
//!    transaction from the server's WAL position before and after each.
//! 3. Memory per retained route on the in-memory backend, from a counting
//!    allocator, and the simulator's seeds per minute on two threads.
//!
//! At the end a table and one line per target:
//! `TARGET <name> measured=<value> goal=<value> holds=<yes|no>`.
//!
//! Knobs: `CONNREG_TARGETS_SECS` (measured seconds of each throughput run,
//! default 5, at most [`SECS_MAX`]), `CONNREG_TARGETS_PARTS` (comma
//! separated subset of `memory,postgres,alloc,sim`; default all;
//! `pgload` alone runs the 16-client PostgreSQL runs without the
//! PostgreSQL criterion benches). The
//! PostgreSQL server comes from connreg-pgtest (`CONNREG_TEST_DATABASE_URL`,
//! else a throwaway local cluster, whose `fsync` the bench turns on).
//!
//! The counting allocator ([cap](https://docs.rs/cap)) adds an atomic
//! update to every allocation and free of this process; the in-memory
//! figures include it.

use std::alloc::System;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cap::Cap;
use connreg::contracts::{CatalogRead, ReplicaLifecycle, Routing};
use connreg::limits::{LEASE_TTL_MS_MAX, REPLICA_CAPACITY_MAX, SCOPE_LIMIT_MAX};
use connreg::postgres::testing::TestRegistry;
use connreg::postgres::{PgDataPlane, PgRegistry, PoolOptions};
use connreg::{
    CatalogQuery, HeartbeatParams, ManualClock, MemoryRegistry, Outcome, Reader, RegistryConfig,
    ReplicaId, RouteAssignment, RouteRequest, SettleParams, TenantId, Timestamp,
};
use connreg_benches::qualify::fleet::{self as qfleet, Admission, FleetPlan, FleetShape};
use connreg_benches::resolve_bench::fleet as pgfleet;
use connreg_benches::resolve_bench::pgbench::{Pgbench, PgbenchRun};
use connreg_pgtest::TestDatabase;
use criterion::{BenchmarkId, Criterion};
use hdrhistogram::Histogram;
use tokio::runtime::Runtime;

/// The process's allocator, counting the bytes held.
#[global_allocator]
static ALLOCATOR: Cap<System> = Cap::new(System, usize::MAX);

fn held_bytes() -> i64 {
    ALLOCATOR.allocated() as i64
}

/// Fleet sizes, in replicas.
const FLEET_REPLICAS: [u32; 3] = [1_000, 10_000, 100_000];

/// The fleet of the throughput runs.
const THROUGHPUT_REPLICAS: u32 = 10_000;

/// Replicas of every tenant's one instance.
const REPLICAS_PER_TENANT: u32 = 10;

/// Tenants the benched calls spread over (the first ones of every fleet).
const BENCHED_TENANTS: u32 = 100;

/// Clients of the throughput runs.
const CLIENTS: u32 = 16;

/// Most measured seconds of one throughput run.
const SECS_MAX: u64 = 600;

/// Calls timed per batch in a criterion bench.
const BATCH_CALLS_MAX: u64 = 1_000;

/// Routes one in-memory registry takes before it is rebuilt (routes are
/// never deleted, REC-6).
const ROUTES_PER_REGISTRY_MAX: u64 = 200_000;

/// Routes created to measure memory per retained route.
const ALLOC_ROUTES: u32 = 100_000;

/// Existing routes the existing-resolve run re-resolves, per client.
const EXISTING_ROUTES_PER_CLIENT: u32 = 200;

/// The bench clock's time: before every replica's lease end.
const CLOCK_MS: u64 = 1_000_000;

const _: () = {
    assert!(BATCH_CALLS_MAX <= REPLICA_CAPACITY_MAX as u64 * REPLICAS_PER_TENANT as u64);
    assert!(BATCH_CALLS_MAX <= SCOPE_LIMIT_MAX as u64);
    assert!(ROUTES_PER_REGISTRY_MAX > BATCH_CALLS_MAX);
    assert!(FLEET_REPLICAS[0] / REPLICAS_PER_TENANT >= BENCHED_TENANTS);
};

/// Mean nanoseconds per call of every criterion bench, by ID.
static MEANS: Mutex<BTreeMap<String, (u128, u64)>> = Mutex::new(BTreeMap::new());

fn record(id: &str, elapsed: Duration, iters: u64) {
    let mut means = MEANS.lock().unwrap_or_else(|e| e.into_inner());
    let entry = means.entry(id.to_owned()).or_default();
    entry.0 += elapsed.as_nanos();
    entry.1 += iters;
}

fn mean_ns(id: &str) -> Option<f64> {
    let means = MEANS.lock().unwrap_or_else(|e| e.into_inner());
    means
        .get(id)
        .filter(|(_, n)| *n > 0)
        .map(|(ns, n)| *ns as f64 / *n as f64)
}

fn id<T: TryFrom<String, Error = connreg::Error>>(s: impl Into<String>) -> T {
    T::try_from(s.into()).unwrap_or_else(|e| panic!("bench identifiers are valid: {e}"))
}

/// Splits `iters` into batches of at most [`BATCH_CALLS_MAX`] and sums
/// what `batch` reports for each.
fn batched(iters: u64, mut batch: impl FnMut(usize) -> Duration) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(BATCH_CALLS_MAX);
        total += batch(n as usize);
        left -= n;
    }
    total
}

// ---------------------------------------------------------------- memory

fn memory_shape(replicas: u32) -> FleetShape {
    FleetShape {
        tenants: replicas / REPLICAS_PER_TENANT,
        capabilities: 1,
        bindings_per_tenant_capability: 1,
        instances_per_tenant: 1,
        replicas_per_instance: REPLICAS_PER_TENANT,
        regions: vec!["eu-west".into(), "us-east".into()],
        zones_per_region: 2,
        replica_capacity: REPLICA_CAPACITY_MAX,
        lease_ttl_ms: LEASE_TTL_MS_MAX,
        admission: Admission {
            tenant_limit: Some(SCOPE_LIMIT_MAX),
            binding_limit: None,
        },
    }
}

/// One in-memory registry with a fleet, and the benched tenants' requests.
struct MemoryBench {
    runtime: Runtime,
    plan: FleetPlan,
    registry: MemoryRegistry,
    routes: u64,
    next_action: u64,
    health_seq: u64,
}

impl MemoryBench {
    fn new(replicas: u32) -> MemoryBench {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a tokio runtime");
        let plan = FleetPlan::new(&memory_shape(replicas));
        let registry = memory_registry(&runtime, &plan);
        MemoryBench {
            runtime,
            plan,
            registry,
            routes: 0,
            next_action: 0,
            health_seq: 1,
        }
    }

    fn room_for(&mut self, more: u64) {
        if self.routes + more > ROUTES_PER_REGISTRY_MAX {
            self.registry = memory_registry(&self.runtime, &self.plan);
            self.routes = 0;
        }
    }

    /// A new action of one of the benched tenants, in turn.
    fn new_request(&mut self) -> RouteRequest {
        self.next_action += 1;
        let tenant = (self.next_action % u64::from(BENCHED_TENANTS)) as usize;
        RouteRequest {
            action: id(format!("a{}", self.next_action)),
            tenant: Some(self.plan.tenants[tenant].clone()),
            capability: self.plan.capabilities[0].clone(),
            topology: self.plan.topology(0, 0),
        }
    }

    fn resolve(&mut self, requests: Vec<RouteRequest>) -> (Duration, Vec<RouteAssignment>) {
        self.routes += requests.len() as u64;
        let registry = &self.registry;
        self.runtime.block_on(async {
            let mut out = Vec::with_capacity(requests.len());
            let started = Instant::now();
            for r in requests {
                let resolved = registry.route_resolve(r).await.expect("the bench has room");
                out.push(black_box(resolved).assignment);
            }
            (started.elapsed(), out)
        })
    }

    fn settle(&self, assignments: Vec<RouteAssignment>) -> Duration {
        let registry = &self.registry;
        let params: Vec<SettleParams> = assignments
            .into_iter()
            .map(|assignment| SettleParams {
                assignment,
                outcome: Outcome::Completed,
            })
            .collect();
        self.runtime.block_on(async {
            let started = Instant::now();
            for p in params {
                black_box(registry.route_settle(p).await.expect("settles"));
            }
            started.elapsed()
        })
    }
}

fn memory_registry(runtime: &Runtime, plan: &FleetPlan) -> MemoryRegistry {
    let registry = MemoryRegistry::new(
        ManualClock::new(Timestamp(CLOCK_MS)),
        RegistryConfig::default(),
    )
    .expect("a registry");
    runtime
        .block_on(qfleet::build(&registry, plan))
        .expect("the bench fleet builds");
    registry
}

fn memory_benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("backend");
    for replicas in FLEET_REPLICAS {
        eprintln!("targets: in-memory fleet of {replicas} replicas");
        let mut bench = MemoryBench::new(replicas);
        let name = format!("memory/resolve_new/{replicas}");
        group.bench_function(BenchmarkId::new("memory/resolve_new", replicas), |b| {
            b.iter_custom(|iters| {
                let elapsed = batched(iters, |n| {
                    bench.room_for(n as u64);
                    let requests = (0..n).map(|_| bench.new_request()).collect();
                    let (elapsed, held) = bench.resolve(requests);
                    bench.settle(held);
                    elapsed
                });
                record(&name, elapsed, iters);
                elapsed
            });
        });

        let existing = bench.new_request();
        bench.resolve(vec![existing.clone()]);
        let name = format!("memory/resolve_existing/{replicas}");
        group.bench_function(BenchmarkId::new("memory/resolve_existing", replicas), |b| {
            b.iter_custom(|iters| {
                let elapsed = batched(iters, |n| {
                    let (elapsed, _) = bench.resolve(vec![existing.clone(); n]);
                    bench.routes -= n as u64;
                    elapsed
                });
                record(&name, elapsed, iters);
                elapsed
            });
        });

        let name = format!("memory/settle/{replicas}");
        group.bench_function(BenchmarkId::new("memory/settle", replicas), |b| {
            b.iter_custom(|iters| {
                let elapsed = batched(iters, |n| {
                    bench.room_for(n as u64);
                    let requests = (0..n).map(|_| bench.new_request()).collect();
                    let (_, held) = bench.resolve(requests);
                    bench.settle(held)
                });
                record(&name, elapsed, iters);
                elapsed
            });
        });

        let replica = bench.plan.replicas[0].id.clone();
        let name = format!("memory/heartbeat/{replicas}");
        group.bench_function(BenchmarkId::new("memory/heartbeat", replicas), |b| {
            b.iter_custom(|iters| {
                let elapsed = batched(iters, |n| {
                    let first = bench.health_seq + 1;
                    bench.health_seq += n as u64;
                    let registry = &bench.registry;
                    let replica = &replica;
                    bench.runtime.block_on(async {
                        let started = Instant::now();
                        for seq in first..first + n as u64 {
                            let params = HeartbeatParams {
                                replica: replica.clone(),
                                health_seq: seq,
                                lease_ttl_ms: LEASE_TTL_MS_MAX,
                            };
                            black_box(registry.replica_heartbeat(params).await.expect("beats"));
                        }
                        started.elapsed()
                    })
                });
                record(&name, elapsed, iters);
                elapsed
            });
        });

        let query = CatalogQuery::first_page(Reader::Tenant(bench.plan.tenants[0].clone()));
        let name = format!("memory/catalog_page/{replicas}");
        group.bench_function(BenchmarkId::new("memory/catalog_page", replicas), |b| {
            b.iter_custom(|iters| {
                let elapsed = batched(iters, |n| {
                    let registry = &bench.registry;
                    let query = &query;
                    bench.runtime.block_on(async {
                        let started = Instant::now();
                        for _ in 0..n {
                            black_box(registry.catalog_page(query.clone()).await.expect("a page"));
                        }
                        started.elapsed()
                    })
                });
                record(&name, elapsed, iters);
                elapsed
            });
        });
    }
    group.finish();
}

/// Bytes the in-memory registry keeps per route: [`ALLOC_ROUTES`] new
/// routes, each resolved and settled, with the allocator's count of held
/// bytes before and after. Requests are built inside the window, so what
/// the registry keeps of them counts and what it drops does not.
fn memory_per_route() -> f64 {
    let mut bench = MemoryBench::new(FLEET_REPLICAS[0]);
    // Warm the maps a little so the first growth is not all in the window.
    let warm: Vec<RouteRequest> = (0..BATCH_CALLS_MAX).map(|_| bench.new_request()).collect();
    let (_, held) = bench.resolve(warm);
    bench.settle(held);
    let before = held_bytes();
    for _ in 0..ALLOC_ROUTES / BATCH_CALLS_MAX as u32 {
        let requests = (0..BATCH_CALLS_MAX).map(|_| bench.new_request()).collect();
        let (_, held) = bench.resolve(requests);
        bench.settle(held);
    }
    let after = held_bytes();
    drop(bench);
    (after - before) as f64 / f64::from(ALLOC_ROUTES)
}

// -------------------------------------------------------------- postgres

/// One PostgreSQL registry with a fleet, a single-connection data plane and
/// the benched tenants' requests.
struct PgBench {
    runtime: Runtime,
    test: TestRegistry,
    control: PgRegistry,
    plane: PgDataPlane,
    next_action: u64,
    health_seq: u64,
    tag: String,
}

impl PgBench {
    fn new(replicas: u32, tag: &str) -> Result<PgBench, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let (test, control, plane) = runtime.block_on(async {
            let test = TestRegistry::create().await.map_err(|e| e.to_string())?;
            let options = test.options();
            let mut data = options.data.clone();
            let clock = ManualClock::new(Timestamp(CLOCK_MS));
            let control = PgRegistry::connect(options, clock.clone(), RegistryConfig::default())
                .await
                .map_err(|e| e.to_string())?;
            let tenants = replicas / REPLICAS_PER_TENANT;
            pgfleet::publish(&control, tenants)
                .await
                .map_err(|e| e.to_string())?;
            let mut admin = test.admin_connection().await.map_err(|e| e.to_string())?;
            pgfleet::load_replicas(&mut admin, tenants, REPLICAS_PER_TENANT)
                .await
                .map_err(|e| e.to_string())?;
            data.max_connections = 1;
            data.min_connections = 1;
            let plane = PgDataPlane::connect(data, clock, RegistryConfig::default())
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>((test, control, plane))
        })?;
        Ok(PgBench {
            runtime,
            test,
            control,
            plane,
            next_action: 0,
            health_seq: 1,
            tag: tag.to_owned(),
        })
    }

    fn new_request(&mut self) -> RouteRequest {
        self.next_action += 1;
        let tenant = (self.next_action % u64::from(BENCHED_TENANTS)) as u32;
        pgfleet::request(format!("{}a{}", self.tag, self.next_action), tenant)
    }

    fn resolve(&self, requests: Vec<RouteRequest>) -> (Duration, Vec<RouteAssignment>) {
        let plane = &self.plane;
        self.runtime.block_on(async {
            let mut out = Vec::with_capacity(requests.len());
            let started = Instant::now();
            for r in requests {
                let resolved = plane.route_resolve(r).await.expect("the bench has room");
                out.push(black_box(resolved).assignment);
            }
            (started.elapsed(), out)
        })
    }

    fn settle(&self, assignments: Vec<RouteAssignment>) -> Duration {
        let plane = &self.plane;
        self.runtime.block_on(async {
            let started = Instant::now();
            for assignment in assignments {
                let params = SettleParams {
                    assignment,
                    outcome: Outcome::Completed,
                };
                black_box(plane.route_settle(params).await.expect("settles"));
            }
            started.elapsed()
        })
    }

    fn close(self) {
        self.runtime.block_on(async {
            self.plane.close().await;
            self.control.close().await;
        });
        drop(self.test);
    }
}

fn pg_benches(c: &mut Criterion) -> Result<(), String> {
    let mut group = c.benchmark_group("backend");
    // Single calls take milliseconds: fewer, longer samples.
    group.sample_size(10);
    for replicas in FLEET_REPLICAS {
        eprintln!("targets: PostgreSQL fleet of {replicas} replicas");
        let mut bench = PgBench::new(replicas, &format!("f{replicas}"))?;
        let name = format!("postgres/resolve_new/{replicas}");
        group.bench_function(BenchmarkId::new("postgres/resolve_new", replicas), |b| {
            b.iter_custom(|iters| {
                let elapsed = batched(iters, |n| {
                    let requests = (0..n).map(|_| bench.new_request()).collect();
                    let (elapsed, held) = bench.resolve(requests);
                    bench.settle(held);
                    elapsed
                });
                record(&name, elapsed, iters);
                elapsed
            });
        });

        let existing = bench.new_request();
        bench.resolve(vec![existing.clone()]);
        let name = format!("postgres/resolve_existing/{replicas}");
        group.bench_function(
            BenchmarkId::new("postgres/resolve_existing", replicas),
            |b| {
                b.iter_custom(|iters| {
                    let elapsed = batched(iters, |n| bench.resolve(vec![existing.clone(); n]).0);
                    record(&name, elapsed, iters);
                    elapsed
                });
            },
        );

        let name = format!("postgres/settle/{replicas}");
        group.bench_function(BenchmarkId::new("postgres/settle", replicas), |b| {
            b.iter_custom(|iters| {
                let elapsed = batched(iters, |n| {
                    let requests = (0..n).map(|_| bench.new_request()).collect();
                    let (_, held) = bench.resolve(requests);
                    bench.settle(held)
                });
                record(&name, elapsed, iters);
                elapsed
            });
        });

        let replica: ReplicaId = id("t0-i-r0");
        let name = format!("postgres/heartbeat/{replicas}");
        group.bench_function(BenchmarkId::new("postgres/heartbeat", replicas), |b| {
            b.iter_custom(|iters| {
                let elapsed = batched(iters, |n| {
                    let first = bench.health_seq + 1;
                    bench.health_seq += n as u64;
                    let plane = &bench.plane;
                    let replica = &replica;
                    bench.runtime.block_on(async {
                        let started = Instant::now();
                        for seq in first..first + n as u64 {
                            let params = HeartbeatParams {
                                replica: replica.clone(),
                                health_seq: seq,
                                lease_ttl_ms: LEASE_TTL_MS_MAX,
                            };
                            black_box(plane.replica_heartbeat(params).await.expect("beats"));
                        }
                        started.elapsed()
                    })
                });
                record(&name, elapsed, iters);
                elapsed
            });
        });

        let tenant: TenantId = id("t0");
        let query = CatalogQuery::first_page(Reader::Tenant(tenant));
        let name = format!("postgres/catalog_page/{replicas}");
        group.bench_function(BenchmarkId::new("postgres/catalog_page", replicas), |b| {
            b.iter_custom(|iters| {
                let elapsed = batched(iters, |n| {
                    let plane = &bench.plane;
                    let query = &query;
                    bench.runtime.block_on(async {
                        let started = Instant::now();
                        for _ in 0..n {
                            black_box(plane.catalog_page(query.clone()).await.expect("a page"));
                        }
                        started.elapsed()
                    })
                });
                record(&name, elapsed, iters);
                elapsed
            });
        });
        bench.close();
    }
    group.finish();
    Ok(())
}

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
struct Throughput {
    tps: f64,
    ops: u64,
    errors: u64,
    p99_ms: f64,
    /// Per operation.
    wal: Wal,
    /// Per operation, by record kind.
    wal_kinds: Vec<String>,
}

/// Most microseconds one call's latency is recorded as.
const LATENCY_US_MAX: u64 = 60_000_000;

fn latency_histogram() -> Result<Histogram<u64>, String> {
    Histogram::new_with_bounds(1, LATENCY_US_MAX, 3).map_err(|e| e.to_string())
}

/// The server's WAL position.
async fn wal_lsn(admin: &mut sqlx::PgConnection) -> Result<String, String> {
    sqlx::query_scalar::<_, String>("SELECT pg_current_wal_lsn()::text")
        .fetch_one(admin)
        .await
        .map_err(|e| e.to_string())
}

/// WAL written between two positions, in bytes: all of it, and the part
/// that is not full-page images. Full-page images depend on how long ago
/// the last checkpoint was and how many distinct pages a workload touches
/// since (TPC-B's accounts are spread over the whole table, a resolve
/// appends), so the comparison uses the records alone and shows both.
#[derive(Debug, Clone, Copy, Default)]
struct Wal {
    total: f64,
    records: Option<f64>,
}

async fn wal_between(
    admin: &mut sqlx::PgConnection,
    before: &str,
    after: &str,
) -> Result<Wal, String> {
    let total: f64 = sqlx::query_scalar("SELECT pg_wal_lsn_diff($2::pg_lsn, $1::pg_lsn)::float8")
        .bind(before)
        .bind(after)
        .fetch_one(&mut *admin)
        .await
        .map_err(|e| e.to_string())?;
    // pg_walinspect (PostgreSQL 15 contrib) splits records from images;
    // without it (a server given by URL, no superuser) only the total.
    let records = sqlx::query_scalar::<_, f64>(
        "SELECT coalesce(sum(record_size), 0)::float8
         FROM pg_get_wal_stats($1::pg_lsn, $2::pg_lsn)",
    )
    .bind(before)
    .bind(after)
    .fetch_one(&mut *admin)
    .await
    .ok();
    Ok(Wal { total, records })
}

/// Most record kinds the WAL breakdown prints.
const WAL_KINDS_SHOWN: i64 = 12;

/// What the WAL between two positions is made of, per transaction: each
/// resource manager and record kind with its count and record bytes,
/// largest first. Empty without pg_walinspect.
async fn wal_breakdown(
    admin: &mut sqlx::PgConnection,
    before: &str,
    after: &str,
    transactions: u64,
) -> Vec<String> {
    let rows = sqlx::query_as::<_, (String, f64, f64, f64)>(
        "SELECT \"resource_manager/record_type\", count::float8,
                record_size::float8, fpi_size::float8
           FROM pg_get_wal_stats($1::pg_lsn, $2::pg_lsn, per_record => true)
          WHERE count > 0
          ORDER BY record_size DESC
          LIMIT $3",
    )
    .bind(before)
    .bind(after)
    .bind(WAL_KINDS_SHOWN)
    .fetch_all(&mut *admin)
    .await
    .unwrap_or_default();
    let n = transactions.max(1) as f64;
    rows.into_iter()
        .map(|(kind, count, records, images)| {
            format!(
                "{kind:<28} {:>6.2} records {:>7.1} B  images {:>7.1} B",
                count / n,
                records / n,
                images / n
            )
        })
        .collect()
}

impl Wal {
    fn show(self) -> String {
        match self.records {
            Some(r) => format!("{r:.0}, {:.0}", self.total),
            None => format!("-, {:.0}", self.total),
        }
    }

    fn per(self, transactions: u64) -> Wal {
        let n = transactions.max(1) as f64;
        Wal {
            total: self.total / n,
            records: self.records.map(|r| r / n),
        }
    }
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
struct PgFigures {
    fsync: String,
    synchronous_commit: String,
    new_route: Throughput,
    action: Throughput,
    existing: Throughput,
    tpcb: PgbenchRun,
    tpcb_wal: Wal,
    tpcb_wal_kinds: Vec<String>,
    select_only: PgbenchRun,
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

async fn pg_throughput(secs: u64) -> Result<PgFigures, String> {
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

// ------------------------------------------------------------- simulator

/// Standard-scenario seeds per minute on two threads, for `secs`.
fn sim_seeds_per_minute(secs: u64) -> Result<f64, String> {
    let scenario = connreg_sim::Scenario::standard();
    let deadline = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();
    let workers: Vec<_> = (0..2u64)
        .map(|w| {
            let scenario = scenario.clone();
            std::thread::spawn(move || -> Result<u64, String> {
                let mut seeds = 0;
                let mut seed = w + 1;
                while Instant::now() < deadline {
                    let options = connreg_sim::RunOptions {
                        seed,
                        ..connreg_sim::RunOptions::default()
                    };
                    let report =
                        connreg_sim::run(&scenario, &options).map_err(|e| e.to_string())?;
                    black_box(report.trace_hash);
                    seeds += 1;
                    seed += 2;
                }
                Ok(seeds)
            })
        })
        .collect();
    let mut seeds = 0;
    for worker in workers {
        seeds += worker
            .join()
            .map_err(|_| "a simulator thread panicked".to_string())??;
    }
    Ok(seeds as f64 * 60.0 / started.elapsed().as_secs_f64())
}

// ------------------------------------------------------------------ main

/// One target: its name, what was measured, the goal, and whether the
/// measure must stay at most (`true`) or at least (`false`) the goal.
struct Target {
    name: &'static str,
    measured: Option<f64>,
    goal: f64,
    at_most: bool,
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(a? / b?)
}

fn main() {
    let secs = match std::env::var("CONNREG_TARGETS_SECS") {
        Err(_) => 5,
        Ok(v) => match v.parse::<u64>() {
            Ok(s) if (1..=SECS_MAX).contains(&s) => s,
            _ => {
                eprintln!("targets: CONNREG_TARGETS_SECS must be 1..={SECS_MAX}, got {v:?}");
                std::process::exit(2);
            }
        },
    };
    let parts = std::env::var("CONNREG_TARGETS_PARTS")
        .unwrap_or_else(|_| "memory,postgres,alloc,sim".into());
    let parts: Vec<&str> = parts.split(',').map(str::trim).collect();
    for part in &parts {
        if !["memory", "postgres", "pgload", "alloc", "sim"].contains(part) {
            eprintln!(
                "targets: CONNREG_TARGETS_PARTS names {part:?}; the parts are memory, postgres, pgload, alloc and sim"
            );
            std::process::exit(2);
        }
    }
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
        .configure_from_args();
    if parts.contains(&"memory") {
        memory_benches(&mut criterion);
    }
    let mut pg = None;
    if parts.contains(&"postgres")
        && let Err(e) = pg_benches(&mut criterion)
    {
        eprintln!("targets: PostgreSQL benches: {e}");
        std::process::exit(1);
    }
    if parts.contains(&"postgres") || parts.contains(&"pgload") {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        match runtime.block_on(pg_throughput(secs)) {
            Ok(figures) => pg = Some(figures),
            Err(e) => {
                eprintln!("targets: PostgreSQL throughput: {e}");
                std::process::exit(1);
            }
        }
    }
    criterion.final_summary();
    let per_route = parts.contains(&"alloc").then(memory_per_route);
    let seeds_per_minute = if parts.contains(&"sim") {
        match sim_seeds_per_minute(secs.max(10)) {
            Ok(v) => Some(v),
            Err(e) => {
                eprintln!("targets: simulator: {e}");
                std::process::exit(1);
            }
        }
    } else {
        None
    };

    println!();
    println!("| bench | mean per call |");
    println!("|---|---:|");
    for (name, (ns, n)) in MEANS.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        println!(
            "| backend/{name} | {:.2} µs |",
            *ns as f64 / *n as f64 / 1_000.0
        );
    }
    if let Some(pg) = &pg {
        println!();
        println!(
            "PostgreSQL at {CLIENTS} clients, fsync={}, synchronous_commit={}, {} replicas:",
            pg.fsync, pg.synchronous_commit, THROUGHPUT_REPLICAS
        );
        println!("| run | tps | p99 | WAL bytes per transaction (records, all) | errors |");
        println!("|---|---:|---:|---:|---:|");
        for (name, t) in [
            ("new-route resolve", &pg.new_route),
            ("resolve + settle", &pg.action),
            ("existing resolve", &pg.existing),
        ] {
            println!(
                "| {name} | {:.0} | {:.2} ms | {} | {} of {} |",
                t.tps,
                t.p99_ms,
                t.wal.show(),
                t.errors,
                t.ops
            );
        }
        println!(
            "| pgbench TPC-B, scale {CLIENTS} | {:.0} | | {} | |",
            pg.tpcb.tps,
            pg.tpcb_wal.show()
        );
        println!("| pgbench select-only | {:.0} | | | |", pg.select_only.tps);
        for (name, kinds) in [
            ("new-route resolve", &pg.new_route.wal_kinds),
            ("resolve + settle", &pg.action.wal_kinds),
            ("pgbench TPC-B", &pg.tpcb_wal_kinds),
        ] {
            if !kinds.is_empty() {
                println!();
                println!("WAL per transaction by record kind, {name}:");
                for line in kinds {
                    println!("  {line}");
                }
            }
        }
    }
    if let Some(b) = per_route {
        println!();
        println!("in-memory bytes held per retained route: {b:.0}");
    }
    if let Some(s) = seeds_per_minute {
        println!("simulator standard-scenario seeds per minute, 2 threads: {s:.0}");
    }

    let flat = |backend: &str| {
        ratio(
            mean_ns(&format!("{backend}/resolve_new/100000")),
            mean_ns(&format!("{backend}/resolve_new/1000")),
        )
    };
    let targets = [
        Target {
            name: "postgres_resolve_vs_tpcb",
            measured: pg.as_ref().map(|p| p.new_route.tps / p.tpcb.tps),
            goal: 0.9,
            at_most: false,
        },
        Target {
            name: "postgres_resolve_p99_ms",
            measured: pg.as_ref().map(|p| p.new_route.p99_ms),
            goal: 20.0,
            at_most: true,
        },
        Target {
            name: "postgres_action_vs_tpcb",
            measured: pg.as_ref().map(|p| p.action.tps / p.tpcb.tps),
            goal: 0.5,
            at_most: false,
        },
        Target {
            name: "postgres_existing_vs_select_only",
            measured: pg.as_ref().map(|p| p.existing.tps / p.select_only.tps),
            goal: 0.5,
            at_most: false,
        },
        Target {
            name: "postgres_wal_vs_tpcb",
            measured: pg
                .as_ref()
                .map(|p| match (p.new_route.wal.records, p.tpcb_wal.records) {
                    (Some(resolve), Some(tpcb)) => resolve / tpcb,
                    _ => p.new_route.wal.total / p.tpcb_wal.total,
                }),
            goal: 1.0,
            at_most: true,
        },
        Target {
            name: "memory_resolves_per_s",
            measured: mean_ns("memory/resolve_new/1000").map(|ns| 1e9 / ns),
            goal: 1_000_000.0,
            at_most: false,
        },
        Target {
            name: "memory_bytes_per_route",
            measured: per_route,
            goal: 300.0,
            at_most: true,
        },
        Target {
            name: "memory_flat_100k_vs_1k",
            measured: flat("memory"),
            goal: 1.2,
            at_most: true,
        },
        Target {
            name: "postgres_flat_100k_vs_1k",
            measured: flat("postgres"),
            goal: 1.2,
            at_most: true,
        },
        Target {
            name: "sim_seeds_per_minute",
            measured: seeds_per_minute,
            goal: 20_000.0,
            at_most: false,
        },
    ];
    println!();
    for t in &targets {
        match t.measured {
            Some(m) => {
                let holds = if t.at_most { m <= t.goal } else { m >= t.goal };
                println!(
                    "TARGET {} measured={} goal={} holds={}",
                    t.name,
                    figure(m),
                    figure(t.goal),
                    if holds { "yes" } else { "no" }
                );
            }
            None => println!(
                "TARGET {} measured=none goal={} holds=not-measured",
                t.name,
                figure(t.goal)
            ),
        }
    }
    if pg
        .as_ref()
        .is_some_and(|p| p.new_route.errors + p.action.errors + p.existing.errors > 0)
    {
        eprintln!("targets: some calls failed (see above)");
        std::process::exit(1);
    }
}

/// A figure with as many decimals as its size needs.
fn figure(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}
