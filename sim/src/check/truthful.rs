//! `settlement_truthful` (PIN-7, SETTLE-5): the outcome a settlement
//! records agrees with the provider's evidence.
//!
//! The evidence is the trace's own: a `ledger` entry is a side effect that
//! ran for an action and fence, and a `cancel` answered `running: true`
//! stopped the execution of that action and fence. A settlement that
//! releases a reservation (the only one whose outcome the registry
//! records, SETTLE-4) fails when it records
//!
//! - `cancelled` for a fence whose side effect is in the ledger, when no
//!   cancel of that action and fence answered that it stopped it;
//! - `completed` for a fence with no side effect in the ledger.
//!
//! `outcome_unknown` and `lease_expired` claim nothing and always pass.
//! The evidence is what the trace holds before the settlement's answer:
//! a dispatcher decides its outcome from an `execute` answer, which
//! follows the execution's ledger entry and any cancel that stopped it.

use std::collections::{BTreeMap, BTreeSet};

use connreg::{ActionId, FenceToken, Outcome, RouteAssignment};

use super::{Checker, invariant};

/// What the provider's side says happened to each action and fence.
#[derive(Debug, Default)]
pub(super) struct Evidence {
    /// Side effects in the ledger: (action, fence) → the first `execute`
    /// call that caused one.
    ran: BTreeMap<(ActionId, FenceToken), u64>,
    /// (action, fence) a cancel answered `running: true` for.
    stopped: BTreeSet<(ActionId, FenceToken)>,
}

impl Evidence {
    /// A `ledger` entry.
    pub(super) fn ran(&mut self, action: &ActionId, fence: FenceToken, rpc: u64) {
        self.ran.entry((action.clone(), fence)).or_insert(rpc);
    }

    /// A `cancel` answered `running: true`.
    pub(super) fn stopped(&mut self, action: &ActionId, fence: FenceToken) {
        self.stopped.insert((action.clone(), fence));
    }
}

impl Checker {
    /// Judges the outcome a releasing settlement recorded.
    pub(super) fn check_outcome(&mut self, assignment: &RouteAssignment, outcome: Outcome) {
        let action = &assignment.identity.action;
        let fence = assignment.reservation.fence;
        let key = (action.clone(), fence);
        let ran = self.evidence.ran.get(&key).copied();
        let detail = match (outcome, ran) {
            (Outcome::Cancelled, Some(rpc)) if !self.evidence.stopped.contains(&key) => {
                format!(
                    "a settlement of {action} (fence {}) recorded cancelled, but its side effect is in the ledger (call {rpc}) and no cancel answered that it stopped it",
                    fence.0
                )
            }
            (Outcome::Completed, None) => format!(
                "a settlement of {action} (fence {}) recorded completed, but no side effect of that fence is in the ledger",
                fence.0
            ),
            _ => return,
        };
        self.violate(invariant::TRUTHFUL, detail);
    }
}
