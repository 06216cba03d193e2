//! The PostgreSQL criterion benches, `backend/postgres/<operation>/<replicas>`:
//! the same operations as the in-memory ones, one caller at a time on a
//! single-connection data plane, on each fleet of [`FLEET_REPLICAS`]
//! loaded by SQL (`connreg_benches::resolve_bench::fleet`).

use std::hint::black_box;
use std::time::{Duration, Instant};

use connreg::contracts::{CatalogRead, ReplicaLifecycle, Routing};
use connreg::limits::LEASE_TTL_MS_MAX;
use connreg::postgres::testing::TestRegistry;
use connreg::postgres::{PgDataPlane, PgRegistry};
use connreg::{
    CatalogQuery, HeartbeatParams, ManualClock, Outcome, Reader, RegistryConfig, ReplicaId,
    RouteAssignment, RouteRequest, SettleParams, TenantId, Timestamp,
};
use connreg_benches::resolve_bench::fleet as pgfleet;
use criterion::{BenchmarkId, Criterion};
use tokio::runtime::Runtime;

use crate::common::{
    BENCHED_TENANTS, CLOCK_MS, FLEET_REPLICAS, REPLICAS_PER_TENANT, batched, id, record,
};

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

pub(crate) fn pg_benches(c: &mut Criterion) -> Result<(), String> {
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
