//! `idempotent_settlement` (SETTLE-2, SETTLE-3, SETTLE-4): a settlement
//! succeeds only for its action's current reservation, releases it when it
//! is held, a reservation is released once, and the outcome its release
//! recorded stays recorded.

use connreg::{Outcome, RouteRecord, SettleParams, Settled};

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
            if self.not_released.len() < NOT_RELEASED_PENDING_MAX {
                self.not_released.push((action.clone(), fence));
            }
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
            if self.ordered {
                self.release_outcomes.entry(fence).or_insert(params.outcome);
            }
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

/// Most `released: false` answers kept between two snapshots for
/// [`Checker::check_not_released_held`]; past it the rest go unjudged.
pub(super) const NOT_RELEASED_PENDING_MAX: usize = 100_000;

impl Checker {
    /// SETTLE-3, SETTLE-4: a settlement answered `released: false` found
    /// its reservation released already. A reservation is held once and
    /// never again after its release (its fence is not reused), so one
    /// still stored as held after the step that answered so was held when
    /// the settlement ran, and should have been released by it.
    pub(super) fn check_not_released_held(&mut self) {
        for (action, fence) in std::mem::take(&mut self.not_released) {
            let held = self
                .store_routes
                .get(&action)
                .is_some_and(|r| r.reserved && r.assignment.reservation.fence == fence);
            if held {
                let detail = format!(
                    "a settlement of {action} with fence {} answered released: false, and the store still holds that reservation",
                    fence.0
                );
                self.violate(invariant::IDEMPOTENT, detail);
            }
        }
    }

    /// SETTLE-4: a released reservation's stored row keeps the outcome its
    /// release recorded. Judged against the row the previous snapshot
    /// stored (both released, one fence), and on commit-ordered traces
    /// against the outcome of the release that was answered: a settlement
    /// or a maintenance release.
    pub(super) fn check_outcome_kept(&mut self, r: &RouteRecord) {
        let action = &r.assignment.identity.action;
        let fence = r.assignment.reservation.fence;
        let name = |o: Option<Outcome>| o.map_or("none", Outcome::as_str);
        let before = self
            .store_routes
            .get(action)
            .filter(|old| !old.reserved && old.assignment.reservation.fence == fence);
        let detail = match before {
            Some(old) if old.last_settlement != r.last_settlement => Some(format!(
                "the released reservation of {action} with fence {} was stored as {}, now as {}: settling a released reservation changes nothing",
                fence.0,
                name(old.last_settlement),
                name(r.last_settlement)
            )),
            Some(_) => None,
            None => self
                .release_outcomes
                .get(&fence)
                .filter(|first| r.last_settlement != Some(**first))
                .map(|first| {
                    format!(
                        "the reservation of {action} with fence {} was released as {}, and the store records {}",
                        fence.0,
                        first.as_str(),
                        name(r.last_settlement)
                    )
                }),
        };
        if let Some(detail) = detail {
            self.violate(invariant::IDEMPOTENT, detail);
        }
    }
}
