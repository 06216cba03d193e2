//! `circuit_follows_outcomes` (SETTLE-5): a replica's circuit is what its
//! settlements make it. Completed zeroes the consecutive-unknown count,
//! `outcome_unknown` adds one and opens the circuit at the threshold
//! (when the policy is on), cancelled and lease_expired touch neither.
//!
//! Judged on commit-ordered traces: from each stored row of a replica
//! (a snapshot), the releasing settlements answered until the next row,
//! applied in order by the rule, must give that row's circuit. A replica
//! whose circuit a call may have changed without an answer saying how (a
//! settlement answered `unavailable`, a `released: false` for a fence no
//! answer released, which a backend's retry after a lost COMMIT gives, an
//! operator's closing) is not judged until its next stored row.

use connreg::{Circuit, ReplicaId, SettleParams};

use super::{Checker, invariant};
use crate::trace::ReplicaRow;

/// One replica's circuit as the checker expects it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Track {
    expected: Circuit,
    /// Whether the circuit was open in the row or answer the expectation
    /// starts from.
    base_open: bool,
    /// False once a call may have changed it unseen.
    certain: bool,
}

impl Checker {
    /// A stored row: judged against the expectation, then the new base.
    pub(super) fn circuit_stored(&mut self, row: &ReplicaRow) {
        if !self.ordered || self.circuit_policy.is_none() {
            return;
        }
        let stored = Circuit {
            open: row.circuit_open,
            consecutive_unknown: row.consecutive_unknown,
        };
        // A circuit stored open, now stored closed, is
        // `circuit_closed_by_operator`'s to judge (SETTLE-6): only an
        // operator closes one.
        if let Some(t) = self.circuits.get(&row.id)
            && t.certain
            && t.expected != stored
            && (!t.base_open || stored.open)
            && !self.operator_closed.contains(&row.id)
        {
            let detail = format!(
                "replica {}'s circuit is stored {} with {} consecutive unknown outcomes; the settlements answered since its previous row make it {} with {}",
                row.id,
                if stored.open { "open" } else { "closed" },
                stored.consecutive_unknown,
                if t.expected.open { "open" } else { "closed" },
                t.expected.consecutive_unknown,
            );
            self.violate(invariant::CIRCUIT_COUNTS, detail);
        }
        self.circuits.insert(
            row.id.clone(),
            Track {
                expected: stored,
                base_open: stored.open,
                certain: true,
            },
        );
    }

    /// A settlement answered: a release moves the circuit by the rule; a
    /// `released: false` for a fence no answer released may hide a release
    /// the backend's own retry made.
    pub(super) fn circuit_settled(&mut self, params: &SettleParams, released: bool) {
        let Some(policy) = self.circuit_policy else {
            return;
        };
        let replica = &params.assignment.destination.replica;
        let fence = params.assignment.reservation.fence;
        let hidden = !released && !self.released.contains(&fence);
        if let Some(t) = self.circuits.get_mut(replica) {
            if released {
                t.expected = t.expected.after_settlement(params.outcome, policy);
            } else if hidden {
                t.certain = false;
            }
        }
    }

    /// A call that may have changed `replica`'s circuit without saying how.
    pub(super) fn circuit_unknown(&mut self, replica: &ReplicaId) {
        if let Some(t) = self.circuits.get_mut(replica) {
            t.certain = false;
        }
    }

    /// An answer that shows `replica`'s circuit as committed (a
    /// registration or a drain).
    pub(super) fn circuit_answered(&mut self, replica: &ReplicaId, circuit: Circuit) {
        if self.circuit_policy.is_some() {
            self.circuits.insert(
                replica.clone(),
                Track {
                    expected: circuit,
                    base_open: circuit.open,
                    certain: true,
                },
            );
        }
    }
}
