//! `dispatch_after_commit` and `no_silent_failover` at the replicas: a
//! dispatch carries a reservation some registry answered and goes to its
//! route's replica, and a cancellation goes where the route is.

use super::{Checker, invariant};
use crate::scenario::replica_host;
use crate::wire::Request;

impl Checker {
    pub(super) fn on_request(&mut self, _from: &str, to: &str, req: &Request) {
        match req {
            Request::Execute { assignment } => {
                let action = &assignment.identity.action;
                let fence = assignment.reservation.fence;
                if !self.answered.contains(&fence) {
                    self.violate(
                        invariant::AFTER_COMMIT,
                        format!(
                            "{action} dispatched to {to} with fence {}, which no registry answered",
                            fence.0
                        ),
                    );
                }
                let target = replica_host(assignment.destination.replica.as_str());
                match self.truth.get(action) {
                    None => self.violate(
                        invariant::NO_FAILOVER,
                        format!("{action} dispatched to {to} with no route"),
                    ),
                    Some(truth) => {
                        if truth.destination != assignment.destination || to != target {
                            let detail = format!(
                                "{action} dispatched to {to} for replica {}; its route is replica {}",
                                assignment.destination.replica, truth.destination.replica
                            );
                            self.violate(invariant::NO_FAILOVER, detail);
                        }
                    }
                }
            }
            Request::Cancel { action, .. } => {
                if let Some(truth) = self.truth.get(action) {
                    let target = replica_host(truth.destination.replica.as_str());
                    if to != target {
                        self.violate(
                            invariant::NO_FAILOVER,
                            format!(
                                "cancellation of {action} sent to {to}; its route is on {target}"
                            ),
                        );
                    }
                }
            }
            _ => {}
        }
    }
}
