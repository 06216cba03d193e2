//! The in-memory registry the targets bench measures, shared by the
//! criterion benches (`benches/targets/memory.rs`) and the bytes-per-route
//! figure of `connreg-route-bytes`, which runs in a process of its own so
//! that its counting allocator never slows the throughput figures.

use std::hint::black_box;
use std::time::{Duration, Instant};

use connreg::contracts::Routing;
use connreg::limits::{LEASE_TTL_MS_MAX, REPLICA_CAPACITY_MAX, SCOPE_LIMIT_MAX};
use connreg::{
    ManualClock, MemoryRegistry, Outcome, RegistryConfig, RouteAssignment, RouteRequest,
    SettleParams, Timestamp,
};
use tokio::runtime::Runtime;

use crate::qualify::fleet::{self as qfleet, Admission, FleetPlan, FleetShape};

/// Fleet sizes, in replicas.
pub const FLEET_REPLICAS: [u32; 3] = [1_000, 10_000, 100_000];

/// Replicas of every tenant's one instance.
pub const REPLICAS_PER_TENANT: u32 = 10;

/// Tenants the benched calls spread over (the first ones of every fleet).
pub const BENCHED_TENANTS: u32 = 100;

/// Calls timed per batch in a criterion bench.
pub const BATCH_CALLS_MAX: u64 = 1_000;

/// The bench clock's time: before every replica's lease end.
pub const CLOCK_MS: u64 = 1_000_000;

/// Routes one in-memory registry takes before it is rebuilt (routes are
/// never deleted, REC-6).
const ROUTES_PER_REGISTRY_MAX: u64 = 200_000;

const _: () = {
    assert!(BATCH_CALLS_MAX <= REPLICA_CAPACITY_MAX as u64 * REPLICAS_PER_TENANT as u64);
    assert!(BATCH_CALLS_MAX <= SCOPE_LIMIT_MAX as u64);
    assert!(FLEET_REPLICAS[0] / REPLICAS_PER_TENANT >= BENCHED_TENANTS);
    assert!(ROUTES_PER_REGISTRY_MAX > BATCH_CALLS_MAX);
};

/// A valid bench identifier of any kind.
pub fn id<T: TryFrom<String, Error = connreg::Error>>(s: impl Into<String>) -> T {
    T::try_from(s.into()).unwrap_or_else(|e| panic!("bench identifiers are valid: {e}"))
}

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
pub struct MemoryBench {
    /// The runtime every call runs on, one thread.
    pub runtime: Runtime,
    /// The fleet the registry holds.
    pub plan: FleetPlan,
    /// The registry under measure.
    pub registry: MemoryRegistry,
    /// Routes the registry holds (it is rebuilt past
    /// `ROUTES_PER_REGISTRY_MAX`).
    pub routes: u64,
    next_action: u64,
    /// The last heartbeat sequence number sent.
    pub health_seq: u64,
}

impl MemoryBench {
    /// A registry loaded with a fleet of `replicas` replicas.
    pub fn new(replicas: u32) -> MemoryBench {
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

    /// Rebuilds the registry when `more` routes would pass its bound.
    pub fn room_for(&mut self, more: u64) {
        if self.routes + more > ROUTES_PER_REGISTRY_MAX {
            self.registry = memory_registry(&self.runtime, &self.plan);
            self.routes = 0;
        }
    }

    /// A new action of one of the benched tenants, in turn.
    pub fn new_request(&mut self) -> RouteRequest {
        self.next_action += 1;
        let tenant = (self.next_action % u64::from(BENCHED_TENANTS)) as usize;
        RouteRequest {
            action: id(format!("a{}", self.next_action)),
            tenant: Some(self.plan.tenants[tenant].clone()),
            capability: self.plan.capabilities[0].clone(),
            topology: self.plan.topology(0, 0),
        }
    }

    /// Resolves `requests` one after another: the time they took and the
    /// routes.
    pub fn resolve(&mut self, requests: Vec<RouteRequest>) -> (Duration, Vec<RouteAssignment>) {
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

    /// Settles `assignments` as completed, one after another: the time
    /// they took.
    pub fn settle(&self, assignments: Vec<RouteAssignment>) -> Duration {
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

impl MemoryBench {
    /// Times `n` new-route resolves and their settlements: nanoseconds
    /// per resolve and per settlement.
    pub fn resolve_and_settle(&mut self, n: u32) -> (f64, f64) {
        self.room_for(u64::from(n));
        let requests = (0..n).map(|_| self.new_request()).collect();
        let (resolved, held) = self.resolve(requests);
        let settled = self.settle(held);
        let per = |d: Duration| d.as_nanos() as f64 / f64::from(n);
        (per(resolved), per(settled))
    }
}

/// Rounds of [`flat_side_by_side`].
pub const FLAT_ROUNDS: u32 = 9;

/// New-route resolves timed on each fleet a round of [`flat_side_by_side`].
pub const FLAT_BATCH: u32 = 20_000;

/// A new-route resolve on `large` replicas ÷ on 1,000 (AUTH-4), measured
/// side by side: both registries are built and kept, each is warmed once,
/// then every round times [`FLAT_BATCH`] resolves (and settles them) on
/// the small fleet and then on the large one; one ratio a round, in round
/// order. Both fleets are measured in one process with the same heap,
/// so the figure compares routing, not the allocator's history: a small
/// fleet built after a large one was dropped, or measured beside it,
/// resolves some 5 to 15 % slower than one built in a fresh process.
pub fn flat_side_by_side(
    small: &mut MemoryBench,
    large: &mut MemoryBench,
    rounds: u32,
) -> Vec<f64> {
    small.resolve_and_settle(1_000);
    large.resolve_and_settle(1_000);
    (0..rounds)
        .map(|_| {
            let (small_ns, _) = small.resolve_and_settle(FLAT_BATCH);
            let (large_ns, _) = large.resolve_and_settle(FLAT_BATCH);
            large_ns / small_ns
        })
        .collect()
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
