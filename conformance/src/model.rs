//! Goal: random sequences of publications, resolves, settlements,
//! heartbeats, drains, registrations, clock moves, lease maintenance and
//! circuit closes give exactly the results a small reference model
//! predicts, with the invariants checked after every step and failures
//! shrunk to a minimal sequence (proptest-state-machine).
//!
//! The reference model predicts everything a backend must agree on: the
//! chosen replica (by the ROUTE-10 order and the stable route hash), every
//! result and error kind, every counter, state and circuit. It does not
//! predict fence values, only that they are fresh.
//!
//! Runs are reproducible: [`run`] first replays the checked-in
//! [`regressions`], then draws [`config`]'s cases from a fixed seed
//! ([`SEED_DEFAULT`]) unless `CONNREG_MODEL_SEED` names another seed or asks
//! for a `random` one. `docs/TESTING.md` gives the CI and nightly commands
//! and how a failure becomes a regression.
//!
//! [`StateMachineTest`] is synchronous and has no `self`; the backend's
//! [`Harness`] and a current-thread runtime reach it through a
//! thread-local that [`run_with`] sets for the duration of the run.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::marker::PhantomData;
use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;

use connreg::contracts::Operations;
use connreg::contracts::{ReplicaLifecycle, Routing};
use connreg::ordering::route_hash;
use connreg::request::CircuitCloseParams;
use connreg::*;
use proptest::prelude::*;
use proptest::strategy::Union;
use proptest::test_runner::{Config, RngSeed, TestRunner};
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest};

use crate::fixture::{self, FleetOptions, Setup};
use crate::{Harness, check};

mod regressions;

/// Cases per run unless `PROPTEST_CASES` says otherwise: modest, so the
/// PostgreSQL backend runs it quickly too.
pub const CASES_DEFAULT: u32 = 32;

/// The seed of every run unless `CONNREG_MODEL_SEED` (or proptest's own
/// `PROPTEST_RNG_SEED`) says otherwise, so CI draws the same cases every
/// time and a red build is a change, not luck. Changing it swaps every
/// case CI runs: do it on purpose, with a green run on both backends.
pub const SEED_DEFAULT: u64 = 1_618_033_988;

/// The environment variable that picks the seed: unset for
/// [`SEED_DEFAULT`], `random` for a fresh one from the operating system,
/// or a `u64` to replay a run.
pub const SEED_VAR: &str = "CONNREG_MODEL_SEED";

/// The `max` of every maintenance call: above the model's fleet (checked
/// when a run starts), so one call can take every expired replica and the
/// model predicts the whole batch.
pub const MAINTAIN_BATCH_MAX: u32 = 100;

const _: () = assert!(MAINTAIN_BATCH_MAX <= connreg::limits::LEASE_MAINTENANCE_BATCH_MAX);

/// Most transitions in one case.
pub const TRANSITIONS_MAX: usize = 30;

/// Action IDs the model draws from: few, so duplicates and retries happen.
pub const ACTIONS: usize = 5;

const TENANTS: [&str; 2] = ["t-acme", "t-globex"];
const CAPABILITIES: [&str; 2] = ["crm.contact.create", "crm.contact.read"];
const SCOPES: [&str; 3] = ["s-acme", "s-acme-crm", "s-globex"];
const INSTANCES: [&str; 2] = ["i-acme-crm", "i-globex-crm"];
const OUTCOMES: [Outcome; 4] = [
    Outcome::Completed,
    Outcome::OutcomeUnknown,
    Outcome::Cancelled,
    Outcome::LeaseExpired,
];
const ADVANCES_MS: [u64; 5] = [1_000, 10_000, 29_999, 30_000, 45_000];
const LEASE_TTL_MS: u64 = 30_000;
const CIRCUIT_THRESHOLD: u32 = 2;

/// One binding the model routes through.
#[derive(Debug, Clone, Copy)]
struct BindingShape {
    id: &'static str,
    tenant: usize,
    capability: usize,
    instance: usize,
    scopes: &'static [usize],
}

const BINDINGS: [BindingShape; 3] = [
    BindingShape {
        id: "b-acme-crm-create",
        tenant: 0,
        capability: 0,
        instance: 0,
        scopes: &[0, 1],
    },
    BindingShape {
        id: "b-acme-crm-read",
        tenant: 0,
        capability: 1,
        instance: 0,
        scopes: &[0],
    },
    BindingShape {
        id: "b-globex-crm-create",
        tenant: 1,
        capability: 0,
        instance: 1,
        scopes: &[2],
    },
];

/// The fleet the model runs on: two replicas per instance, capacity 2,
/// scope limits 3, circuit threshold 2.
pub fn model_options() -> FleetOptions {
    FleetOptions {
        replicas_per_instance: 2,
        replica_capacity: 2,
        scope_limit: 3,
        lease_ttl_ms: LEASE_TTL_MS,
        ..FleetOptions::default().with_circuit(true, CIRCUIT_THRESHOLD)
    }
}

fn action_id(a: usize) -> String {
    format!("act-{a}")
}

/// A replica as the model sees it.
#[derive(Clone, PartialEq, Eq)]
pub struct ModelReplica {
    id: ReplicaId,
    instance: String,
    region: Region,
    zone: Zone,
    capacity: u32,
    active: u32,
    state: ReplicaState,
    lease_expires_at: u64,
    health_seq: u64,
    unknown: u32,
    open: bool,
}

/// A route as the model sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRoute {
    tenant: usize,
    capability: usize,
    replica: usize,
    scopes: Vec<usize>,
    attempts: u32,
    reserved: bool,
    last: Option<Outcome>,
}

/// The reference state.
#[derive(Clone)]
pub struct ModelState {
    now: u64,
    revision: u64,
    replicas: Vec<ModelReplica>,
    scope_limit: [u32; 3],
    scope_in_use: [u32; 3],
    lowered: BTreeSet<usize>,
    binding_enabled: [bool; 3],
    instance_enabled: [bool; 2],
    routes: BTreeMap<usize, ModelRoute>,
    /// The concrete operation of the last transition, for the backend.
    step: Step,
    /// What the backend must answer to `step`.
    expect: Expect,
}

impl fmt::Debug for ModelState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The initial state is always the same fleet: keep failure reports
        // short.
        write!(
            f,
            "ModelState(now={}, revision={})",
            self.now, self.revision
        )
    }
}

impl fmt::Debug for ModelReplica {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}[{:?} active={} lease={} seq={} unknown={} open={}]",
            self.id,
            self.state,
            self.active,
            self.lease_expires_at,
            self.health_seq,
            self.unknown,
            self.open
        )
    }
}

/// A publication the model can make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublishOp {
    /// Flip a binding's enabled flag.
    ToggleBinding(usize),
    /// Flip an instance's enabled flag.
    ToggleInstance(usize),
    /// Set a scope's limit (possibly below its use).
    SetScopeLimit(usize, u32),
}

/// Which copy of an assignment a settlement presents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Copy {
    /// The copy from `back` reservations ago (0 = the latest).
    Back(usize),
    /// The latest copy with its endpoint altered.
    Tampered,
}

/// One generated operation, in relative terms so shrinking keeps it valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    /// A publication.
    Publish(PublishOp),
    /// Resolve an action as a tenant for a capability.
    Resolve {
        /// Action index.
        action: usize,
        /// Tenant index.
        tenant: usize,
        /// Capability index.
        capability: usize,
    },
    /// Settle a copy of an action's assignment.
    Settle {
        /// Action index.
        action: usize,
        /// Outcome.
        outcome: Outcome,
        /// Which copy.
        copy: Copy,
    },
    /// Heartbeat a replica, newer or not.
    Heartbeat {
        /// Replica index.
        replica: usize,
        /// A newer sequence (applied) or the stored one (ignored).
        newer: bool,
    },
    /// Drain a replica.
    Drain {
        /// Replica index.
        replica: usize,
    },
    /// Register an offline replica again.
    Register {
        /// Replica index.
        replica: usize,
    },
    /// Move the clock forward.
    Advance {
        /// Milliseconds.
        ms: u64,
    },
    /// One lease maintenance call.
    Maintain,
    /// An operator closes a circuit.
    CircuitClose {
        /// Replica index.
        replica: usize,
    },
}

/// The concrete operation the backend runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Nothing (the initial state).
    Start,
    /// Publish these changes.
    Publish(Vec<Change>),
    /// Resolve.
    Resolve(usize, usize, usize),
    /// Settle copy index `copy` (or tampered) of an action's copies.
    Settle {
        /// Action index.
        action: usize,
        /// Index into the copies received, oldest first.
        copy: usize,
        /// Alter the endpoint.
        tampered: bool,
        /// Outcome.
        outcome: Outcome,
    },
    /// Heartbeat with exactly this sequence.
    Heartbeat(usize, u64),
    /// Drain.
    Drain(usize),
    /// Register with exactly this sequence.
    Register(usize, u64),
    /// Advance the clock.
    Advance(u64),
    /// Maintain with a batch of [`MAINTAIN_BATCH_MAX`], larger than the
    /// fleet.
    Maintain,
    /// Close a circuit.
    CircuitClose(usize),
}

/// What the backend must answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// Nothing to compare.
    Nothing,
    /// A publication at this revision.
    Revision(u64),
    /// A route of this kind on this replica at this attempt.
    Route(ResolveKind, usize, u32),
    /// One of these error kinds.
    Error(Vec<&'static str>),
    /// A settlement.
    Settled(bool),
    /// A heartbeat outcome.
    Heartbeat(HeartbeatOutcome),
    /// A replica in this state.
    Replica(ReplicaState),
    /// A maintenance batch.
    Maintained(BTreeSet<usize>, u32),
    /// A closed circuit.
    Closed,
}

impl ModelState {
    fn initial() -> ModelState {
        let fleet = fixture::Fleet::new(model_options());
        let replicas = fleet
            .replica_specs()
            .into_iter()
            .map(|s| ModelReplica {
                id: s.id,
                instance: s.instance.to_string(),
                region: s.region,
                zone: s.zone,
                capacity: s.capacity,
                active: 0,
                state: ReplicaState::Ready,
                lease_expires_at: fixture::CLOCK_START_MS + LEASE_TTL_MS,
                health_seq: 1,
                unknown: 0,
                open: false,
            })
            .collect();
        ModelState {
            now: fixture::CLOCK_START_MS,
            revision: 1,
            replicas,
            scope_limit: [3; 3],
            scope_in_use: [0; 3],
            lowered: BTreeSet::new(),
            binding_enabled: [true; 3],
            instance_enabled: [true; 2],
            routes: BTreeMap::new(),
            step: Step::Start,
            expect: Expect::Nothing,
        }
    }

    fn binding_for(tenant: usize, capability: usize) -> Option<usize> {
        BINDINGS
            .iter()
            .position(|b| b.tenant == tenant && b.capability == capability)
    }

    fn lease_live(&self, r: &ModelReplica) -> bool {
        r.lease_expires_at > self.now
    }

    fn scopes_have_room(&self, scopes: &[usize]) -> bool {
        scopes
            .iter()
            .all(|s| self.scope_in_use[*s] < self.scope_limit[*s])
    }

    fn take(&mut self, replica: usize, scopes: &[usize]) {
        self.replicas[replica].active += 1;
        for s in scopes {
            self.scope_in_use[*s] += 1;
        }
    }

    fn give(&mut self, replica: usize, scopes: &[usize]) {
        self.replicas[replica].active -= 1;
        for s in scopes {
            self.scope_in_use[*s] -= 1;
        }
    }

    fn resolve(&mut self, action: usize, tenant: usize, capability: usize) -> Expect {
        if let Some(route) = self.routes.get(&action).cloned() {
            if route.tenant != tenant || route.capability != capability {
                return Expect::Error(vec!["conflict"]);
            }
            if route.reserved {
                return Expect::Route(ResolveKind::Existing, route.replica, route.attempts);
            }
            let r = &self.replicas[route.replica];
            let usable = matches!(r.state, ReplicaState::Ready | ReplicaState::Draining)
                && self.lease_live(r)
                && !r.open;
            if !usable {
                // PIN-4 allows either answer when the replica is gone.
                return Expect::Error(vec!["replica_unavailable", "no_capacity"]);
            }
            if r.active >= r.capacity || !self.scopes_have_room(&route.scopes) {
                return Expect::Error(vec!["no_capacity"]);
            }
            self.take(route.replica, &route.scopes);
            let stored = self.routes.get_mut(&action).expect("route");
            stored.attempts += 1;
            stored.reserved = true;
            return Expect::Route(ResolveKind::Reserved, route.replica, stored.attempts);
        }
        let Some(b) = Self::binding_for(tenant, capability) else {
            return Expect::Error(vec!["no_eligible_binding"]);
        };
        let shape = BINDINGS[b];
        if !self.binding_enabled[b] || !self.instance_enabled[shape.instance] {
            return Expect::Error(vec!["no_eligible_binding"]);
        }
        if !self.scopes_have_room(shape.scopes) {
            return Expect::Error(vec!["no_capacity"]);
        }
        let fleet_topology = fixture::Fleet::new(model_options()).topology();
        let act = fixture::action(&action_id(action));
        let best = self
            .replicas
            .iter()
            .enumerate()
            .filter(|(_, r)| {
                r.instance == INSTANCES[shape.instance]
                    && r.state == ReplicaState::Ready
                    && self.lease_live(r)
                    && r.active < r.capacity
                    && !r.open
            })
            .min_by_key(|(_, r)| {
                (
                    fleet_topology.preferred_region.as_ref() != Some(&r.region),
                    fleet_topology.preferred_zone.as_ref() != Some(&r.zone),
                    r.active,
                    route_hash(&act, &r.id),
                    r.id.clone(),
                )
            })
            .map(|(i, _)| i);
        let Some(replica) = best else {
            return Expect::Error(vec!["no_capacity"]);
        };
        self.take(replica, shape.scopes);
        self.routes.insert(
            action,
            ModelRoute {
                tenant,
                capability,
                replica,
                scopes: shape.scopes.to_vec(),
                attempts: 1,
                reserved: true,
                last: None,
            },
        );
        Expect::Route(ResolveKind::Created, replica, 1)
    }

    fn release(&mut self, action: usize, outcome: Outcome) {
        let route = self.routes.get(&action).cloned().expect("route");
        self.give(route.replica, &route.scopes);
        let r = &mut self.replicas[route.replica];
        match outcome {
            Outcome::Completed => r.unknown = 0,
            Outcome::OutcomeUnknown => {
                r.unknown += 1;
                if r.unknown >= CIRCUIT_THRESHOLD {
                    r.open = true;
                }
            }
            Outcome::Cancelled | Outcome::LeaseExpired => {}
        }
        let stored = self.routes.get_mut(&action).expect("route");
        stored.reserved = false;
        stored.last = Some(outcome);
    }

    fn apply(mut self, t: &Transition) -> ModelState {
        let (step, expect) = match *t {
            Transition::Publish(op) => {
                let fleet = fixture::Fleet::new(model_options());
                let change = match op {
                    PublishOp::ToggleBinding(b) => {
                        self.binding_enabled[b] = !self.binding_enabled[b];
                        let mut binding = fleet.binding(BINDINGS[b].id);
                        binding.enabled = self.binding_enabled[b];
                        Change::UpsertBinding(binding)
                    }
                    PublishOp::ToggleInstance(i) => {
                        self.instance_enabled[i] = !self.instance_enabled[i];
                        let mut instance = fleet.instance(INSTANCES[i]);
                        instance.enabled = self.instance_enabled[i];
                        Change::UpsertInstance(instance)
                    }
                    PublishOp::SetScopeLimit(s, limit) => {
                        self.scope_limit[s] = limit;
                        let mut scope = fleet.scope(SCOPES[s]);
                        scope.limit = limit;
                        Change::UpsertScope(scope)
                    }
                };
                self.revision += 1;
                (Step::Publish(vec![change]), Expect::Revision(self.revision))
            }
            Transition::Resolve {
                action,
                tenant,
                capability,
            } => (
                Step::Resolve(action, tenant, capability),
                self.resolve(action, tenant, capability),
            ),
            Transition::Settle {
                action,
                outcome,
                copy,
            } => {
                let route = self.routes.get(&action).cloned().expect("precondition");
                let latest = route.attempts as usize - 1;
                let (index, tampered) = match copy {
                    Copy::Back(back) => (latest - back.min(latest), false),
                    Copy::Tampered => (latest, true),
                };
                let expect = if tampered || index != latest {
                    Expect::Error(vec!["fence_lost"])
                } else if route.reserved {
                    self.release(action, outcome);
                    Expect::Settled(true)
                } else {
                    Expect::Settled(false)
                };
                (
                    Step::Settle {
                        action,
                        copy: index,
                        tampered,
                        outcome,
                    },
                    expect,
                )
            }
            Transition::Heartbeat { replica, newer } => {
                let now = self.now;
                let r = &mut self.replicas[replica];
                let seq = if newer {
                    r.health_seq + 1
                } else {
                    r.health_seq
                };
                let expect = if r.state == ReplicaState::Offline {
                    Expect::Error(vec!["replica_unavailable"])
                } else if newer {
                    r.health_seq = seq;
                    r.lease_expires_at = now + LEASE_TTL_MS;
                    Expect::Heartbeat(HeartbeatOutcome::Applied)
                } else {
                    Expect::Heartbeat(HeartbeatOutcome::Ignored)
                };
                (Step::Heartbeat(replica, seq), expect)
            }
            Transition::Drain { replica } => {
                let r = &mut self.replicas[replica];
                if r.state == ReplicaState::Ready {
                    r.state = ReplicaState::Draining;
                }
                (Step::Drain(replica), Expect::Replica(r.state))
            }
            Transition::Register { replica } => {
                let now = self.now;
                let r = &mut self.replicas[replica];
                r.health_seq += 1;
                r.state = ReplicaState::Ready;
                r.lease_expires_at = now + LEASE_TTL_MS;
                (
                    Step::Register(replica, r.health_seq),
                    Expect::Replica(ReplicaState::Ready),
                )
            }
            Transition::Advance { ms } => {
                self.now += ms;
                (Step::Advance(ms), Expect::Nothing)
            }
            Transition::Maintain => {
                // spec: LEASE-2
                // The model's calls are sequential: when maintenance runs,
                // no other transaction holds a replica, so one call must
                // take every expired replica, up to its batch bound
                // (MAINTAIN_BATCH_MAX, above the fleet). Skipping a locked
                // replica is only for concurrent holders, and `more`
                // reports those; here `more` must be false.
                let expired: BTreeSet<usize> = self
                    .replicas
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.state != ReplicaState::Offline && !self.lease_live(r))
                    .map(|(i, _)| i)
                    .collect();
                let mut released = 0;
                for i in &expired {
                    self.replicas[*i].state = ReplicaState::Offline;
                    let held: Vec<usize> = self
                        .routes
                        .iter()
                        .filter(|(_, r)| r.reserved && r.replica == *i)
                        .map(|(a, _)| *a)
                        .collect();
                    for a in held {
                        self.release(a, Outcome::LeaseExpired);
                        released += 1;
                    }
                }
                (Step::Maintain, Expect::Maintained(expired, released))
            }
            Transition::CircuitClose { replica } => {
                let r = &mut self.replicas[replica];
                let expect = if r.open {
                    r.open = false;
                    r.unknown = 0;
                    Expect::Closed
                } else {
                    Expect::Error(vec!["conflict"])
                };
                (Step::CircuitClose(replica), expect)
            }
        };
        // A lowered limit is tolerated until use falls back within it.
        for s in 0..SCOPES.len() {
            if self.scope_in_use[s] > self.scope_limit[s] {
                if matches!(t, Transition::Publish(PublishOp::SetScopeLimit(x, _)) if *x == s) {
                    self.lowered.insert(s);
                }
            } else {
                self.lowered.remove(&s);
            }
        }
        self.step = step;
        self.expect = expect;
        self
    }
}

/// The reference state machine.
#[derive(Debug, Clone, Copy)]
pub struct Model;

impl ReferenceStateMachine for Model {
    type State = ModelState;
    type Transition = Transition;

    fn init_state() -> BoxedStrategy<ModelState> {
        Just(ModelState::initial()).boxed()
    }

    fn transitions(state: &ModelState) -> BoxedStrategy<Transition> {
        let replicas = state.replicas.len();
        let mut options: Vec<(u32, BoxedStrategy<Transition>)> = vec![
            (
                30,
                (0..ACTIONS, 0..TENANTS.len(), 0..CAPABILITIES.len())
                    // New actions, duplicates and other tenants' or other
                    // capabilities' requests for assigned actions alike.
                    .prop_map(|(action, tenant, capability)| Transition::Resolve {
                        action,
                        tenant,
                        capability,
                    })
                    .boxed(),
            ),
            (
                10,
                (0..replicas, any::<bool>())
                    .prop_map(|(replica, newer)| Transition::Heartbeat { replica, newer })
                    .boxed(),
            ),
            (
                8,
                proptest::sample::select(ADVANCES_MS.to_vec())
                    .prop_map(|ms| Transition::Advance { ms })
                    .boxed(),
            ),
            (7, Just(Transition::Maintain).boxed()),
            (
                10,
                prop_oneof![
                    (0..BINDINGS.len()).prop_map(PublishOp::ToggleBinding),
                    (0..INSTANCES.len()).prop_map(PublishOp::ToggleInstance),
                    (0..SCOPES.len(), 0..=3u32).prop_map(|(s, l)| PublishOp::SetScopeLimit(s, l)),
                ]
                .prop_map(Transition::Publish)
                .boxed(),
            ),
            (
                4,
                (0..replicas)
                    .prop_map(|replica| Transition::Drain { replica })
                    .boxed(),
            ),
            (
                3,
                (0..replicas)
                    .prop_map(|replica| Transition::CircuitClose { replica })
                    .boxed(),
            ),
        ];
        let routed: Vec<usize> = state.routes.keys().copied().collect();
        if !routed.is_empty() {
            // Retries of routed actions by their own tenant and capability,
            // so re-reservations (and stale copies) are common.
            let retries: Vec<Transition> = state
                .routes
                .iter()
                .map(|(action, r)| Transition::Resolve {
                    action: *action,
                    tenant: r.tenant,
                    capability: r.capability,
                })
                .collect();
            options.push((20, proptest::sample::select(retries).boxed()));
            let copy = prop_oneof![
                5 => Just(Copy::Back(0)),
                3 => (1..3usize).prop_map(Copy::Back),
                1 => Just(Copy::Tampered),
            ];
            options.push((
                25,
                (
                    proptest::sample::select(routed),
                    proptest::sample::select(OUTCOMES.to_vec()),
                    copy,
                )
                    .prop_map(|(action, outcome, copy)| Transition::Settle {
                        action,
                        outcome,
                        copy,
                    })
                    .boxed(),
            ));
        }
        let offline: Vec<usize> = state
            .replicas
            .iter()
            .enumerate()
            .filter(|(_, r)| r.state == ReplicaState::Offline)
            .map(|(i, _)| i)
            .collect();
        if !offline.is_empty() {
            options.push((
                6,
                proptest::sample::select(offline)
                    .prop_map(|replica| Transition::Register { replica })
                    .boxed(),
            ));
        }
        Union::new_weighted(options).boxed()
    }

    fn preconditions(state: &ModelState, t: &Transition) -> bool {
        match t {
            // A retry whose creating resolve was shrunk away is simply a
            // first resolve, so resolves need no precondition.
            Transition::Settle { action, .. } => state.routes.contains_key(action),
            Transition::Register { replica } => {
                state.replicas[*replica].state == ReplicaState::Offline
            }
            _ => true,
        }
    }

    fn apply(state: ModelState, t: &Transition) -> ModelState {
        state.apply(t)
    }
}

/// What the model test needs from the outside: the backend and a runtime.
struct Context<H: Harness> {
    harness: H,
    runtime: tokio::runtime::Runtime,
}

thread_local! {
    static CONTEXT: RefCell<Option<Rc<dyn Any>>> = const { RefCell::new(None) };
}

fn context<H: Harness>() -> Rc<Context<H>> {
    let any = CONTEXT
        .with(|c| c.borrow().clone())
        .expect("model::run sets the context");
    any.downcast::<Context<H>>()
        .unwrap_or_else(|_| panic!("the context holds another harness"))
}

/// Clears the thread-local context when the run ends, even by panic.
struct ContextGuard;

impl Drop for ContextGuard {
    fn drop(&mut self) {
        CONTEXT.with(|c| c.borrow_mut().take());
    }
}

/// The backend side of the model test.
pub struct Sut<H: Harness> {
    ctx: Rc<Context<H>>,
    setup: Setup<H::Store>,
    /// Every assignment copy received per action, oldest first.
    copies: BTreeMap<usize, Vec<RouteAssignment>>,
    /// The first destination seen per action: it must never change.
    destinations: BTreeMap<usize, RouteDestination>,
    /// Every fence ever handed out.
    fences: BTreeSet<FenceToken>,
    /// The last revision seen: it must never go down.
    revision: std::cell::Cell<Revision>,
}

/// The state machine test of a backend.
pub struct ModelTest<H>(PhantomData<H>);

fn kind_of<T: fmt::Debug>(result: &Result<T>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(e) => e.kind(),
    }
}

impl<H: Harness> Sut<H> {
    fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.ctx.runtime.block_on(f)
    }

    fn expect_error<T: fmt::Debug>(&self, result: &Result<T>, expect: &Expect, step: &Step) {
        match expect {
            Expect::Error(kinds) => assert!(
                kinds.contains(&kind_of(result)),
                "{step:?}: expected one of {kinds:?}, got {result:?}"
            ),
            _ => assert!(
                result.is_ok(),
                "{step:?}: expected {expect:?}, got {result:?}"
            ),
        }
    }

    fn run_step(&mut self, state: &ModelState) {
        let step = state.step.clone();
        let expect = &state.expect;
        let fleet = self.setup.fleet.clone();
        match &step {
            Step::Start => {}
            Step::Publish(changes) => {
                let result = self.block_on(self.setup.publish(changes.clone()));
                assert_eq!(
                    result,
                    match expect {
                        Expect::Revision(r) => Ok(Revision(*r)),
                        other => panic!("publish expects a revision, not {other:?}"),
                    },
                    "{step:?}"
                );
            }
            Step::Resolve(action, tenant, capability) => {
                let request = fleet.request(
                    &action_id(*action),
                    &TenantId::new(TENANTS[*tenant]).expect("id"),
                    &fixture::cap(CAPABILITIES[*capability]),
                );
                let result = self.block_on(self.setup.store.route_resolve(request));
                self.expect_error(&result, expect, &step);
                if let (Ok(resolved), Expect::Route(kind, replica, attempt)) = (&result, expect) {
                    let a = &resolved.assignment;
                    assert_eq!(resolved.kind, *kind, "{step:?}");
                    assert_eq!(
                        a.destination.replica, state.replicas[*replica].id,
                        "{step:?}"
                    );
                    assert_eq!(a.reservation.attempt, *attempt, "{step:?}");
                    let first = self
                        .destinations
                        .entry(*action)
                        .or_insert_with(|| a.destination.clone());
                    assert_eq!(&a.destination, first, "{step:?}: no silent failover");
                    let copies = self.copies.entry(*action).or_default();
                    if *kind == ResolveKind::Existing {
                        assert_eq!(copies.last(), Some(a), "{step:?}: the same assignment");
                    } else {
                        assert!(
                            self.fences.insert(a.reservation.fence),
                            "{step:?}: fence {:?} reused",
                            a.reservation.fence
                        );
                        copies.push(a.clone());
                    }
                }
            }
            Step::Settle {
                action,
                copy,
                tampered,
                outcome,
            } => {
                let mut assignment = self.copies[action][*copy].clone();
                if *tampered {
                    assignment.destination.endpoint =
                        format!("{}/tampered", assignment.destination.endpoint).into();
                }
                let result = self.block_on(self.setup.settle(&assignment, *outcome));
                self.expect_error(&result, expect, &step);
                if let (Ok(settled), Expect::Settled(released)) = (&result, expect) {
                    assert_eq!(settled.released, *released, "{step:?}");
                }
            }
            Step::Heartbeat(replica, seq) => {
                let result = self.block_on(self.setup.store.replica_heartbeat(HeartbeatParams {
                    replica: state.replicas[*replica].id.clone(),
                    health_seq: *seq,
                    lease_ttl_ms: LEASE_TTL_MS,
                }));
                self.expect_error(&result, expect, &step);
                if let (Ok(outcome), Expect::Heartbeat(expected)) = (&result, expect) {
                    assert_eq!(outcome, expected, "{step:?}");
                }
            }
            Step::Drain(replica) => {
                let result = self.block_on(
                    self.setup
                        .store
                        .replica_drain(state.replicas[*replica].id.clone()),
                );
                match (&result, expect) {
                    (Ok(r), Expect::Replica(s)) => assert_eq!(r.state, *s, "{step:?}"),
                    other => panic!("{step:?}: {other:?}"),
                }
            }
            Step::Register(replica, seq) => {
                let spec = fleet
                    .replica_specs()
                    .into_iter()
                    .find(|s| s.id == state.replicas[*replica].id)
                    .expect("spec");
                let result = self.block_on(
                    self.setup
                        .store
                        .replica_register(fleet.register_params(spec, *seq)),
                );
                match (&result, expect) {
                    (Ok(r), Expect::Replica(s)) => assert_eq!(r.state, *s, "{step:?}"),
                    other => panic!("{step:?}: {other:?}"),
                }
            }
            Step::Advance(ms) => self.setup.clock.advance_ms(*ms),
            Step::Maintain => {
                // spec: LEASE-2
                // Nothing else holds a replica in a sequential run, so a
                // backend that skips locked replicas (FOR UPDATE SKIP
                // LOCKED) still takes every expired one in this call; one
                // left for `more` means a lock outlived the call that took
                // it.
                let result = self.block_on(self.setup.store.lease_maintain(MaintainParams {
                    max: MAINTAIN_BATCH_MAX,
                }));
                match (&result, expect) {
                    (Ok(m), Expect::Maintained(expired, released)) => {
                        let got: BTreeSet<&ReplicaId> = m.expired.iter().collect();
                        let want: BTreeSet<&ReplicaId> =
                            expired.iter().map(|i| &state.replicas[*i].id).collect();
                        assert_eq!(got, want, "{step:?}: every expired replica, no other");
                        assert_eq!(m.expired.len(), want.len(), "{step:?}: each once");
                        assert_eq!(m.released, *released, "{step:?}");
                        assert!(
                            !m.more,
                            "{step:?}: nothing left over (no replica is held in a sequential run)"
                        );
                    }
                    other => panic!("{step:?}: {other:?}"),
                }
            }
            Step::CircuitClose(replica) => {
                let result = self.block_on(self.setup.store.circuit_close(CircuitCloseParams {
                    replica: state.replicas[*replica].id.clone(),
                    reason: "model test".into(),
                }));
                self.expect_error(&result, expect, &step);
            }
        }
    }

    fn check(&self, state: &ModelState) {
        let snap = self.block_on(self.setup.store.inspect()).expect("inspect");
        let step = &state.step;
        assert!(
            snap.revision >= self.revision.get(),
            "{step:?}: revision went down"
        );
        self.revision.set(snap.revision);
        assert_eq!(
            snap.revision,
            Revision(state.revision),
            "{step:?}: revision"
        );
        let lowered: BTreeSet<ScopeId> = state
            .lowered
            .iter()
            .map(|s| fixture::scope(SCOPES[*s]))
            .collect();
        let mut violations = check::capacity(&snap, &lowered);
        violations.extend(check::routes(&snap));
        check::assert_clean(&violations, &format!("after {step:?}"));

        assert_eq!(snap.replicas.len(), state.replicas.len(), "{step:?}");
        for m in &state.replicas {
            let r = snap
                .replicas
                .iter()
                .find(|r| r.spec.id == m.id)
                .unwrap_or_else(|| panic!("{step:?}: {} missing", m.id));
            let got = (
                r.active,
                r.state,
                r.lease_expires_at,
                r.health_seq,
                r.circuit.consecutive_unknown,
                r.circuit.open,
            );
            let want = (
                m.active,
                m.state,
                Timestamp(m.lease_expires_at),
                m.health_seq,
                m.unknown,
                m.open,
            );
            assert_eq!(got, want, "{step:?}: replica {}", m.id);
        }
        for (i, id) in SCOPES.iter().enumerate() {
            let u = snap
                .scopes
                .iter()
                .find(|u| u.scope.id.as_str() == *id)
                .expect("scope");
            assert_eq!(
                (u.in_use, u.scope.limit),
                (state.scope_in_use[i], state.scope_limit[i]),
                "{step:?}: scope {id}"
            );
        }
        assert_eq!(
            snap.routes.len(),
            state.routes.len(),
            "{step:?}: one route per action"
        );
        for (action, m) in &state.routes {
            let id = action_id(*action);
            let r = snap
                .routes
                .iter()
                .find(|r| r.assignment.identity.action.as_str() == id)
                .unwrap_or_else(|| panic!("{step:?}: route {id} missing"));
            assert_eq!(
                (
                    r.reserved,
                    r.last_settlement,
                    r.assignment.reservation.attempt,
                    &r.assignment.destination.replica,
                ),
                (
                    m.reserved,
                    m.last,
                    m.attempts,
                    &state.replicas[m.replica].id
                ),
                "{step:?}: route {id}"
            );
            assert_eq!(
                Some(&r.assignment.destination),
                self.destinations.get(action),
                "{step:?}: route {id} moved"
            );
            assert_eq!(
                self.copies.get(action).and_then(|c| c.last()),
                Some(&r.assignment),
                "{step:?}: route {id} differs from its latest copy"
            );
        }
    }
}

impl<H: Harness> StateMachineTest for ModelTest<H> {
    type SystemUnderTest = Sut<H>;
    type Reference = Model;

    fn init_test(_state: &ModelState) -> Sut<H> {
        let ctx = context::<H>();
        let setup = ctx
            .runtime
            .block_on(fixture::open(&ctx.harness, model_options()));
        Sut {
            ctx,
            setup,
            copies: BTreeMap::new(),
            destinations: BTreeMap::new(),
            fences: BTreeSet::new(),
            revision: std::cell::Cell::new(Revision(0)),
        }
    }

    fn apply(mut sut: Sut<H>, state: &ModelState, _t: Transition) -> Sut<H> {
        sut.run_step(state);
        sut
    }

    fn check_invariants(sut: &Sut<H>, state: &ModelState) {
        sut.check(state);
    }

    fn teardown(sut: Sut<H>, _state: ModelState) {
        // A backend may spawn cleanup when its store drops: give it the
        // runtime's context.
        let ctx = sut.ctx.clone();
        let _entered = ctx.runtime.enter();
        drop(sut);
    }
}

/// A checked-in sequence of transitions that once made a backend disagree
/// with the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Regression {
    /// The name a failure repeats.
    pub name: &'static str,
    /// The transitions, applied in order from the initial fleet.
    pub transitions: Vec<Transition>,
}

/// The checked-in regression sequences (`conformance/src/model/regressions.rs`),
/// which [`run_with`] replays before any random case.
pub fn regressions() -> Vec<Regression> {
    regressions::list()
}

/// The default configuration: [`CASES_DEFAULT`] cases unless
/// `PROPTEST_CASES` is set; the seed [`SEED_VAR`] picks, else the one
/// `PROPTEST_RNG_SEED` gives, else [`SEED_DEFAULT`]; no failure files (the
/// regressions are checked in as Rust: [`regressions`]).
///
/// # Panics
///
/// When [`SEED_VAR`] is set to neither `random` nor a `u64`.
pub fn config() -> Config {
    let mut config = Config::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = CASES_DEFAULT;
    }
    config.rng_seed = match std::env::var_os(SEED_VAR) {
        Some(value) => parse_seed(&value.to_string_lossy()).unwrap_or_else(|e| panic!("{e}")),
        // Config::default has read PROPTEST_RNG_SEED.
        None if std::env::var_os("PROPTEST_RNG_SEED").is_some() => config.rng_seed,
        None => RngSeed::Fixed(SEED_DEFAULT),
    };
    config.failure_persistence = None;
    config
}

/// Reads a [`SEED_VAR`] value: `random` or a `u64`.
fn parse_seed(value: &str) -> std::result::Result<RngSeed, String> {
    let value = value.trim();
    if value.eq_ignore_ascii_case("random") {
        return Ok(RngSeed::Random);
    }
    value
        .parse::<u64>()
        .map(RngSeed::Fixed)
        .map_err(|_| format!("{SEED_VAR} must be `random` or a u64, not {value:?}"))
}

/// A fresh seed from the operating system's random source, which keys
/// std's `RandomState` (no extra dependency for test code).
fn seed_from_os() -> u64 {
    RandomState::new().hash_one(std::process::id())
}

/// The name of the running test target: Cargo names its binary
/// `<target>-<hash>`.
fn test_target() -> String {
    std::env::args_os()
        .next()
        .and_then(|path| {
            let stem = std::path::Path::new(&path)
                .file_stem()?
                .to_string_lossy()
                .into_owned();
            stem.rsplit_once('-').map(|(name, _)| name.to_string())
        })
        .unwrap_or_else(|| "<backend>".to_string())
}

/// The command that runs exactly these cases again.
fn rerun_command(seed: u64, cases: u32) -> String {
    format!(
        "{SEED_VAR}={seed} PROPTEST_CASES={cases} \
         cargo test -p connreg-conformance --test {} model -- --nocapture",
        test_target()
    )
}

/// The text of a panic's payload.
fn panic_text(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// Replays one regression through the steps a random case takes
/// ([`StateMachineTest::test_sequential`]): the model's transition, the
/// backend's step with its comparisons, and every check after it.
fn replay<H: Harness>(regression: &Regression) -> std::result::Result<(), String> {
    let transitions = &regression.transitions;
    // How many transitions have started: names the one that failed.
    let started = Cell::new(0usize);
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
        let mut state = ModelState::initial();
        let mut sut = ModelTest::<H>::init_test(&state);
        ModelTest::<H>::check_invariants(&sut, &state);
        for t in transitions {
            started.set(started.get() + 1);
            assert!(
                Model::preconditions(&state, t),
                "the model does not allow this transition here: fix the regression"
            );
            state = Model::apply(state, t);
            sut = ModelTest::<H>::apply(sut, &state, t.clone());
            ModelTest::<H>::check_invariants(&sut, &state);
        }
        ModelTest::<H>::teardown(sut, state);
    }));
    outcome.map_err(|payload| {
        let why = panic_text(payload.as_ref());
        match started.get() {
            0 => format!("before its first transition: {why}"),
            n => format!(
                "at transition {n} of {} ({:?}): {why}",
                transitions.len(),
                transitions[n - 1]
            ),
        }
    })
}

/// Runs the model test against `harness` with [`config`].
pub fn run<H: Harness>(harness: H) -> std::result::Result<(), String> {
    run_with(harness, config())
}

/// Runs the model test against `harness` with a given configuration: every
/// [`regressions`] sequence first, then `config.cases` random cases. A
/// random seed is drawn here and printed, so every run names its seed.
pub fn run_with<H: Harness>(harness: H, config: Config) -> std::result::Result<(), String> {
    let (seed, drawn) = match config.rng_seed {
        RngSeed::Fixed(seed) => (seed, "given"),
        RngSeed::Random => (seed_from_os(), "random"),
    };
    let config = Config {
        rng_seed: RngSeed::Fixed(seed),
        ..config
    };
    let regressions = regressions();
    eprintln!(
        "model: checked-in regressions: {}, then random cases: {} from {drawn} seed {seed} \
         ({SEED_VAR}={seed})",
        regressions.len(),
        config.cases
    );
    let rerun = rerun_command(seed, config.cases);
    let fleet = ModelState::initial().replicas.len();
    if fleet as u64 > u64::from(MAINTAIN_BATCH_MAX) {
        return Err(format!(
            "the model's {fleet} replicas exceed MAINTAIN_BATCH_MAX ({MAINTAIN_BATCH_MAX})"
        ));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    let ctx: Rc<dyn Any> = Rc::new(Context { harness, runtime });
    CONTEXT.with(|c| *c.borrow_mut() = Some(ctx));
    let _guard = ContextGuard;
    for regression in &regressions {
        replay::<H>(regression).map_err(|e| {
            format!(
                "regression `{}` (conformance/src/model/regressions.rs): the backend \
                 disagrees with the reference model {e}\nrun it again: {rerun}",
                regression.name
            )
        })?;
    }
    let mut runner = TestRunner::new(config.clone());
    let strategy = Model::sequential_strategy(1..=TRANSITIONS_MAX);
    runner
        .run(&strategy, |(initial, transitions, seen)| {
            ModelTest::<H>::test_sequential(config.clone(), initial, transitions, seen);
            Ok(())
        })
        .map_err(|e| {
            format!(
                "the backend disagrees with the reference model (seed {seed}, {} cases): \
                 {e}\nrun it again: {rerun}\nkeep it: add the transitions of the minimal \
                 failing input to conformance/src/model/regressions.rs (docs/TESTING.md)",
                config.cases
            )
        })
}

/// A fixed-seed configuration with `cases` cases, for reproducible runs.
pub fn seeded(cases: u32, seed: u64) -> Config {
    Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        ..config()
    }
}
