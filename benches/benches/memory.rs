//! Criterion benches of the in-memory backend: resolve of new actions on
//! fleets of 100 and 10,000 replicas side by side, duplicate resolve,
//! settle, and a catalog page read.
//!
//! ```sh
//! cargo bench -p connreg-benches --bench memory
//! cargo bench -p connreg-benches --bench memory -- --quick
//! ```
//!
//! Both fleets give the benched tenant the same candidates: one binding to
//! one instance of [`TARGET_REPLICAS`] replicas. The rest of each fleet is
//! other tenants' replicas, 90 in the small fleet and 9,990 in the large
//! one, so `resolve_new/10000 ÷ resolve_new/100` near 1 shows that routing
//! cost does not grow with unrelated replicas (AUTH-4).
//!
//! Only registry calls are timed: requests are built before the clock
//! starts, and the reservations a batch made are settled after it stops.
//! Every [`ROUTES_PER_REGISTRY_MAX`] routes the registry is rebuilt
//! (untimed), since routes are never deleted (REC-6) and the store would
//! otherwise grow without bound.

use std::hint::black_box;
use std::time::{Duration, Instant};

use connreg::contracts::{CatalogRead, Routing};
use connreg::limits::{LEASE_TTL_MS_MAX, REPLICA_CAPACITY_MAX, SCOPE_LIMIT_MAX};
use connreg::{
    ActionId, CatalogQuery, ManualClock, MemoryRegistry, Outcome, Reader, RegistryConfig,
    RouteAssignment, RouteRequest, SettleParams, Timestamp,
};
use connreg_benches::qualify::fleet::{self, Admission, FleetPlan, FleetShape};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use tokio::runtime::Runtime;

/// Fleet sizes, in replicas, benched side by side.
const FLEET_REPLICAS: [u32; 2] = [100, 10_000];

/// Replicas of each tenant's one instance, the benched tenant's included.
const TARGET_REPLICAS: u32 = 10;

/// Calls timed per batch; a batch's reservations are settled after it.
const BATCH_CALLS_MAX: u64 = 1_000;

/// Routes one registry takes before it is rebuilt.
const ROUTES_PER_REGISTRY_MAX: u64 = 200_000;

// A batch's reservations must fit the benched tenant's replicas and its
// scope, or a resolve would answer `no_capacity`.
const _: () = {
    assert!(BATCH_CALLS_MAX <= REPLICA_CAPACITY_MAX as u64 * TARGET_REPLICAS as u64);
    assert!(BATCH_CALLS_MAX <= SCOPE_LIMIT_MAX as u64);
    assert!(ROUTES_PER_REGISTRY_MAX > BATCH_CALLS_MAX);
};

/// A fleet of `replicas` replicas: tenants of one instance of
/// [`TARGET_REPLICAS`] replicas each, one capability, one binding each.
fn shape(replicas: u32) -> FleetShape {
    FleetShape {
        tenants: replicas / TARGET_REPLICAS,
        capabilities: 1,
        bindings_per_tenant_capability: 1,
        instances_per_tenant: 1,
        replicas_per_instance: TARGET_REPLICAS,
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

/// One registry with a built fleet, and the benched tenant's requests.
struct Bench {
    runtime: Runtime,
    plan: FleetPlan,
    registry: MemoryRegistry,
    routes: u64,
    next_action: u64,
}

impl Bench {
    fn new(replicas: u32) -> Bench {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a tokio runtime");
        let plan = FleetPlan::new(&shape(replicas));
        let registry = build(&runtime, &plan);
        Bench {
            runtime,
            plan,
            registry,
            routes: 0,
            next_action: 0,
        }
    }

    /// Rebuilds the registry when `more` routes would pass the bound.
    fn room_for(&mut self, more: u64) {
        if self.routes + more > ROUTES_PER_REGISTRY_MAX {
            self.registry = build(&self.runtime, &self.plan);
            self.routes = 0;
        }
    }

    /// A new action of tenant `t0` for the fleet's capability.
    fn new_request(&mut self) -> RouteRequest {
        self.next_action += 1;
        RouteRequest {
            action: ActionId::new(format!("a{}", self.next_action)).expect("valid id"),
            tenant: Some(self.plan.tenants[0].clone()),
            capability: self.plan.capabilities[0].clone(),
            topology: self.plan.topology(0, 0),
        }
    }

    /// Resolves `requests`, timed; returns the time and the assignments.
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

    /// Settles `assignments` as completed, timed.
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

fn build(runtime: &Runtime, plan: &FleetPlan) -> MemoryRegistry {
    let registry = MemoryRegistry::new(
        ManualClock::new(Timestamp(1_000_000)),
        RegistryConfig::default(),
    )
    .expect("a registry");
    runtime
        .block_on(fleet::build(&registry, plan))
        .expect("the bench fleet builds");
    registry
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

fn resolve_new(c: &mut Criterion) {
    let mut group = c.benchmark_group("resolve_new");
    for replicas in FLEET_REPLICAS {
        let mut bench = Bench::new(replicas);
        group.bench_with_input(BenchmarkId::from_parameter(replicas), &replicas, |b, _| {
            b.iter_custom(|iters| {
                batched(iters, |n| {
                    bench.room_for(n as u64);
                    let requests = (0..n).map(|_| bench.new_request()).collect();
                    let (elapsed, held) = bench.resolve(requests);
                    bench.settle(held);
                    elapsed
                })
            });
        });
    }
    group.finish();
}

fn resolve_duplicate(c: &mut Criterion) {
    let mut bench = Bench::new(FLEET_REPLICAS[1]);
    let request = bench.new_request();
    bench.resolve(vec![request.clone()]);
    c.bench_function("resolve_duplicate/10000", |b| {
        b.iter_custom(|iters| {
            batched(iters, |n| {
                let requests = vec![request.clone(); n];
                let (elapsed, _) = bench.resolve(requests);
                // Duplicates make no routes.
                bench.routes -= n as u64;
                elapsed
            })
        });
    });
}

fn settle(c: &mut Criterion) {
    let mut bench = Bench::new(FLEET_REPLICAS[1]);
    c.bench_function("settle/10000", |b| {
        b.iter_custom(|iters| {
            batched(iters, |n| {
                bench.room_for(n as u64);
                let requests = (0..n).map(|_| bench.new_request()).collect();
                let (_, held) = bench.resolve(requests);
                bench.settle(held)
            })
        });
    });
}

fn catalog_page(c: &mut Criterion) {
    let bench = Bench::new(FLEET_REPLICAS[1]);
    let query = CatalogQuery::first_page(Reader::Tenant(bench.plan.tenants[0].clone()));
    c.bench_function("catalog_page/10000", |b| {
        b.iter_custom(|iters| {
            batched(iters, |n| {
                let queries = vec![query.clone(); n];
                let registry = &bench.registry;
                bench.runtime.block_on(async {
                    let started = Instant::now();
                    for q in queries {
                        black_box(registry.catalog_page(q).await.expect("a page"));
                    }
                    started.elapsed()
                })
            })
        });
    });
}

criterion_group! {
    name = memory;
    // Short by default: the whole file runs in well under a minute.
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    targets = resolve_new, resolve_duplicate, settle, catalog_page
}
criterion_main!(memory);
