//! The model's transitions: the operations proptest generates, the
//! concrete step each becomes for the backend, the answer the model
//! predicts for it, and how each one changes the reference state.

use std::collections::BTreeSet;

use connreg::ordering::route_hash;
use connreg::*;

use crate::fixture;

#[cfg(doc)]
use super::MAINTAIN_BATCH_MAX;
use super::{
    BINDINGS, CIRCUIT_THRESHOLD, INSTANCES, LEASE_TTL_MS, ModelRoute, ModelState, SCOPES,
    action_id, model_options,
};

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

    pub(super) fn apply(mut self, t: &Transition) -> ModelState {
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
