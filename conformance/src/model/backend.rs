//! The backend side of the model test: the store under test and the
//! runtime it runs on, each step run against it, and the comparison of its
//! answers and state with what the reference model predicts.

use std::any::Any;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::Arc;

use connreg::contracts::Operations;
use connreg::contracts::{ReplicaLifecycle, Routing};
use connreg::request::CircuitCloseParams;
use connreg::*;
use proptest_state_machine::StateMachineTest;

use crate::fixture::{self, Setup};
use crate::{Harness, check};

use super::{
    CAPABILITIES, Expect, LEASE_TTL_MS, MAINTAIN_BATCH_MAX, Model, ModelState, SCOPES, Step,
    TENANTS, Transition, action_id, model_options,
};

/// What the model test needs from the outside: the backend and a runtime.
pub(super) struct Context<H: Harness> {
    pub(super) harness: H,
    pub(super) runtime: tokio::runtime::Runtime,
}

thread_local! {
    pub(super) static CONTEXT: RefCell<Option<Rc<dyn Any>>> = const { RefCell::new(None) };
}

fn context<H: Harness>() -> Rc<Context<H>> {
    let any = CONTEXT
        .with(|c| c.borrow().clone())
        .expect("model::run sets the context");
    any.downcast::<Context<H>>()
        .unwrap_or_else(|_| panic!("the context holds another harness"))
}

/// Clears the thread-local context when the run ends, even by panic.
pub(super) struct ContextGuard;

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
    destinations: BTreeMap<usize, Arc<RouteDestination>>,
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
                    Arc::make_mut(&mut assignment.destination).endpoint =
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
