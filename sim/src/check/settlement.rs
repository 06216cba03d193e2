//! `idempotent_settlement` (SETTLE-2, SETTLE-4): a settlement succeeds
//! only for its action's current reservation, and a reservation is
//! released once.

use connreg::{Outcome, SettleParams, Settled};

use super::{Checker, invariant};

impl Checker {
    pub(super) fn on_settled(&mut self, params: &SettleParams, settled: &Settled) {
        let a = &params.assignment;
        let action = &a.identity.action;
        let fence = a.reservation.fence;
        if params.outcome == Outcome::LeaseExpired {
            self.counters.settled_lease_expired += 1;
        }
        if settled.released {
            self.counters.settle_released += 1;
            match params.outcome {
                Outcome::Completed => self.counters.settled_completed += 1,
                Outcome::OutcomeUnknown => self.counters.settled_outcome_unknown += 1,
                Outcome::Cancelled => self.counters.settled_cancelled += 1,
                Outcome::LeaseExpired => {}
            }
        } else {
            self.counters.settle_idempotent += 1;
        }
        match self.latest.get(action) {
            Some(latest) if latest == a => {}
            Some(latest) => {
                let detail = format!(
                    "a settlement of {action} with fence {} succeeded; the current reservation has fence {}",
                    fence.0, latest.reservation.fence.0
                );
                self.violate(invariant::IDEMPOTENT, detail);
            }
            None if self.ordered => self.violate(
                invariant::IDEMPOTENT,
                format!("a settlement of {action} succeeded for an assignment no registry issued"),
            ),
            None => {}
        }
        if settled.released {
            self.check_outcome(a, params.outcome);
            self.reservations.settled(fence);
        }
        if settled.released && !self.released.insert(fence) {
            self.violate(
                invariant::IDEMPOTENT,
                format!(
                    "the reservation of {action} with fence {} was released twice",
                    fence.0
                ),
            );
        }
    }
}
