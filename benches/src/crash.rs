//! The end-of-run check of `connreg-crash`: the store, read once the load
//! and the faults are over, against every answer the clients got.
//!
//! The check is a pure function of a [`StoreSnapshot`] and the recorded
//! [`ActionRecord`]s, so it can be shown to catch a tampered store without
//! a server (`benches/tests/crash_check.rs`). It finds:
//!
//! - `lost`: an answered action with no stored route, or whose stored route
//!   differs from the last answer (identity, destination, policy, fence);
//! - `duplicated`: an action stored twice, or answered two different routes;
//! - counter mismatches: a replica's active count or an admission scope's
//!   counter that differs from the reserved assignments counting in it;
//! - `held after settle`: an action whose settlement was acknowledged that
//!   still holds its reservation.

use std::collections::BTreeMap;

use connreg::{ActionId, ReplicaId, RouteAssignment, RouteRecord, ScopeId, StoreSnapshot};

/// Violations described in [`Verdict::details`]; the rest are only counted.
pub const DETAILS_MAX: usize = 20;

/// What the clients were told about one action.
#[derive(Debug, Default, Clone)]
pub struct ActionRecord {
    /// Every resolve answer, in order.
    pub answers: Vec<RouteAssignment>,
    /// A settlement of it was answered.
    pub settle_acked: bool,
    /// Its calls ran out of attempts or failed otherwise.
    pub abandoned: bool,
}

/// What the check found.
#[derive(Debug, Default)]
pub struct Verdict {
    /// Answered actions with no stored route, or a stored route that differs
    /// from the last answer.
    pub lost: u64,
    /// Actions stored more than once, or answered different routes.
    pub duplicated: u64,
    /// Replicas and scopes whose counter differs from the reserved
    /// assignments counting in them.
    pub counter_mismatches: u64,
    /// Actions whose acknowledged settlement left the reservation held.
    pub held_after_settle: u64,
    /// The first [`DETAILS_MAX`] violations, one line each.
    pub details: Vec<String>,
}

impl Verdict {
    /// Violations of every kind; the run passes when this is zero.
    pub fn total(&self) -> u64 {
        self.lost + self.duplicated + self.counter_mismatches + self.held_after_settle
    }

    fn note(&mut self, detail: impl FnOnce() -> String) {
        if self.details.len() < DETAILS_MAX {
            self.details.push(detail());
        }
    }
}

/// The same route: identity, destination and policy (the reservation's
/// fence changes only with a new reservation).
fn same_route(a: &RouteAssignment, b: &RouteAssignment) -> bool {
    a.identity == b.identity && a.destination == b.destination && a.policy == b.policy
}

/// Checks `snapshot` against the answers recorded in `actions`.
pub fn check(actions: &BTreeMap<ActionId, ActionRecord>, snapshot: &StoreSnapshot) -> Verdict {
    let mut verdict = Verdict::default();
    let mut stored: BTreeMap<&ActionId, Vec<&RouteRecord>> = BTreeMap::new();
    let mut on_replica: BTreeMap<&ReplicaId, u64> = BTreeMap::new();
    let mut on_scope: BTreeMap<&ScopeId, u64> = BTreeMap::new();
    for route in &snapshot.routes {
        stored
            .entry(&route.assignment.identity.action)
            .or_default()
            .push(route);
        if route.reserved {
            *on_replica
                .entry(&route.assignment.destination.replica)
                .or_default() += 1;
            for scope in &route.assignment.reservation.scopes {
                *on_scope.entry(scope).or_default() += 1;
            }
        }
    }
    for (action, routes) in &stored {
        if routes.len() > 1 {
            verdict.duplicated += 1;
            verdict.note(|| format!("{action}: {} stored routes", routes.len()));
        }
    }
    for (action, record) in actions {
        let Some(last) = record.answers.last() else {
            continue;
        };
        if record.answers.iter().any(|a| !same_route(a, last)) {
            verdict.duplicated += 1;
            verdict.note(|| format!("{action}: answered different routes"));
        }
        let Some(route) = stored.get(action).and_then(|routes| routes.first()) else {
            verdict.lost += 1;
            verdict.note(|| format!("{action}: answered, but no route stored"));
            continue;
        };
        if !same_route(&route.assignment, last)
            || route.assignment.reservation.fence != last.reservation.fence
        {
            verdict.lost += 1;
            verdict.note(|| format!("{action}: the stored route differs from the answer"));
        }
        if record.settle_acked && route.reserved {
            verdict.held_after_settle += 1;
            verdict.note(|| format!("{action}: settled, yet its reservation is held"));
        }
    }
    for replica in &snapshot.replicas {
        let expected = on_replica.get(&replica.spec.id).copied().unwrap_or(0);
        if u64::from(replica.active) != expected {
            verdict.counter_mismatches += 1;
            verdict.note(|| {
                format!(
                    "replica {}: active {} but {expected} reserved assignments",
                    replica.spec.id, replica.active
                )
            });
        }
    }
    for usage in &snapshot.scopes {
        let expected = on_scope.get(&usage.scope.id).copied().unwrap_or(0);
        if u64::from(usage.in_use) != expected {
            verdict.counter_mismatches += 1;
            verdict.note(|| {
                format!(
                    "scope {}: in use {} but {expected} reserved assignments",
                    usage.scope.id, usage.in_use
                )
            });
        }
    }
    verdict
}
