//! The in-memory criterion benches, `backend/memory/<operation>/<replicas>`:
//! new-route resolve, existing resolve, settle, heartbeat and one catalog
//! page, one caller at a time, on each fleet of [`FLEET_REPLICAS`]; and
//! [`MemoryBench`], the registry with a fleet that the allocation count
//! reuses.

use std::hint::black_box;
use std::time::{Duration, Instant};

use connreg::contracts::{CatalogRead, ReplicaLifecycle, Routing};
use connreg::limits::{LEASE_TTL_MS_MAX, REPLICA_CAPACITY_MAX, SCOPE_LIMIT_MAX};
use connreg::{
    CatalogQuery, HeartbeatParams, ManualClock, MemoryRegistry, Outcome, Reader, RegistryConfig,
    RouteAssignment, RouteRequest, SettleParams, Timestamp,
};
use connreg_benches::qualify::fleet::{self as qfleet, Admission, FleetPlan, FleetShape};
use criterion::{BenchmarkId, Criterion};
use tokio::runtime::Runtime;

use crate::common::{
    BATCH_CALLS_MAX, BENCHED_TENANTS, CLOCK_MS, FLEET_REPLICAS, REPLICAS_PER_TENANT, batched, id,
    record,
};

/// Routes one in-memory registry takes before it is rebuilt (routes are
/// never deleted, REC-6).
const ROUTES_PER_REGISTRY_MAX: u64 = 200_000;

const _: () = assert!(ROUTES_PER_REGISTRY_MAX > BATCH_CALLS_MAX);

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
pub(crate) struct MemoryBench {
    runtime: Runtime,
    plan: FleetPlan,
    registry: MemoryRegistry,
    routes: u64,
    next_action: u64,
    health_seq: u64,
}

impl MemoryBench {
    pub(crate) fn new(replicas: u32) -> MemoryBench {
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
    pub(crate) fn new_request(&mut self) -> RouteRequest {
        self.next_action += 1;
        let tenant = (self.next_action % u64::from(BENCHED_TENANTS)) as usize;
        RouteRequest {
            action: id(format!("a{}", self.next_action)),
            tenant: Some(self.plan.tenants[tenant].clone()),
            capability: self.plan.capabilities[0].clone(),
            topology: self.plan.topology(0, 0),
        }
    }

    pub(crate) fn resolve(
        &mut self,
        requests: Vec<RouteRequest>,
    ) -> (Duration, Vec<RouteAssignment>) {
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

    pub(crate) fn settle(&self, assignments: Vec<RouteAssignment>) -> Duration {
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

pub(crate) fn memory_benches(c: &mut Criterion) {
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
