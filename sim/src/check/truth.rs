//! `one_route_per_action` and `no_silent_failover` at the answers: each
//! action's route as first seen, and every later answer that carries it
//! compared with that (PIN-1: identity, destination and policy never
//! change).

use std::sync::Arc;

use connreg::{PolicySnapshot, RouteAssignment, RouteDestination, RouteIdentity};

use super::{Checker, invariant};

/// What an action's route is, as first seen: identity, destination and
/// policy never change (PIN-1).
#[derive(Debug, Clone)]
pub(super) struct Truth {
    pub(super) identity: RouteIdentity,
    pub(super) destination: Arc<RouteDestination>,
    pub(super) policy: Arc<PolicySnapshot>,
    pub(super) created: bool,
}

impl Truth {
    pub(super) fn of(a: &RouteAssignment, created: bool) -> Truth {
        Truth {
            identity: a.identity.clone(),
            destination: a.destination.clone(),
            policy: a.policy.clone(),
            created,
        }
    }

    pub(super) fn same(&self, a: &RouteAssignment) -> bool {
        self.identity == a.identity && self.destination == a.destination && self.policy == a.policy
    }
}

impl Checker {
    pub(super) fn learn_truth(&mut self, a: &RouteAssignment, created: bool, how: &str) {
        let action = a.identity.action.clone();
        match self.truth.get_mut(&action) {
            None => {
                self.route_lines.insert(action.clone(), self.line);
                self.truth.insert(action, Truth::of(a, created));
            }
            Some(truth) => {
                if created && truth.created {
                    self.violate(
                        invariant::ONE_ROUTE,
                        format!("a second route was created for {action}"),
                    );
                } else if !truth.same(a) {
                    let (inv, what) = if created {
                        (invariant::ONE_ROUTE, "a new route")
                    } else {
                        (invariant::NO_FAILOVER, "a retry")
                    };
                    let detail = format!(
                        "{what} ({how}) answered {action} on instance {}, replica {}; its route is instance {}, replica {}",
                        a.destination.instance,
                        a.destination.replica,
                        truth.destination.instance,
                        truth.destination.replica
                    );
                    self.violate(inv, detail);
                }
                if created && let Some(t) = self.truth.get_mut(&action) {
                    t.created = true;
                }
            }
        }
    }
}
