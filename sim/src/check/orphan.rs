//! `no_orphan_reservation` (ROUTE-8, SETTLE-1), checked at the end of a
//! run: every reservation still held in the store belongs to an action
//! that is still running or whose dispatcher crashed with it open.
//!
//! A dispatcher that ended an action has settled what it held, or holds
//! nothing (a typed error before any route, or a pinned retry refused
//! because the reservation was already released). A reservation left held
//! by an ended action is one its dispatcher never learnt of or gave up on:
//! typically a resolve that committed while its answer was lost (a lost
//! COMMIT reply, a dropped answer), which a correct dispatcher resolves by
//! retrying with the same action ID.

use std::collections::{BTreeMap, BTreeSet};

use connreg::{ActionId, FenceToken, RouteRecord};

/// Actions by how they ended, and the reservations their dispatchers owe a
/// settlement, learnt from the trace.
///
/// A reservation is *owed* when the resolve that made it was sent after the
/// action's last release was seen: a dispatcher waiting on that call is
/// responsible for it. A resolve sent earlier and delivered late (held by
/// the network, a duplicate of a burst) can re-reserve a route its action
/// already settled; no dispatcher is waiting for that answer, and the
/// contract cannot tell it from a retry (PIN-3), so it is not counted.
#[derive(Debug, Default)]
pub(super) struct ActionFates {
    /// Actions (by ID) some dispatcher ended.
    ended: BTreeSet<ActionId>,
    /// Actions (by ID) left open by a crashed dispatcher.
    abandoned: BTreeSet<ActionId>,
    /// The highest call ID sent when a release of the action was seen.
    released_at_call: BTreeMap<ActionId, u64>,
    /// Reservations made by resolves sent after their action's last release.
    owed: BTreeSet<FenceToken>,
    /// Actions with an `unavailable` resolve sent after their last release:
    /// it may have committed a reservation no answer carried.
    owed_unknown: BTreeSet<ActionId>,
    /// Resolve calls of each action that got no answer or `unavailable`.
    resolves_failed: BTreeMap<ActionId, u32>,
    /// Actions a dispatcher ended as failed after more failed resolves than
    /// a careful dispatcher retries (`RETRIES_MAX`): whatever a late one
    /// reserved, no caller knows of it, and the registry's hold ends it
    /// (PIN-8, `reservations_end`).
    gave_up: BTreeSet<ActionId>,
}

impl ActionFates {
    /// An action ended with `result`.
    pub(super) fn ended(&mut self, action: &ActionId, result: &str) {
        self.ended.insert(action.clone());
        let failed = self.resolves_failed.get(action).copied().unwrap_or(0);
        if result == "failed:unavailable" && failed > crate::limits::RETRIES_MAX {
            self.gave_up.insert(action.clone());
        }
    }

    /// A resolve call of `action` got no answer, or `unavailable`.
    pub(super) fn resolve_failed(&mut self, action: &ActionId) {
        *self.resolves_failed.entry(action.clone()).or_default() += 1;
    }

    /// An action was left open by its dispatcher's crash.
    pub(super) fn abandoned(&mut self, action: &ActionId) {
        self.abandoned.insert(action.clone());
    }

    /// A reservation of `action` was released; `last_call` is the highest
    /// call ID sent so far.
    pub(super) fn released(&mut self, action: &ActionId, last_call: u64) {
        self.released_at_call.insert(action.clone(), last_call);
    }

    fn after_release(&self, action: &ActionId, call: u64) -> bool {
        self.released_at_call
            .get(action)
            .is_none_or(|mark| call > *mark)
    }

    /// Resolve call `call` of `action` reserved `fence` (created or
    /// reserved).
    pub(super) fn reserved(&mut self, action: &ActionId, call: u64, fence: FenceToken) {
        if self.after_release(action, call) {
            self.owed.insert(fence);
        }
    }

    /// Resolve call `call` of `action` was answered `unavailable`.
    pub(super) fn unknown(&mut self, action: &ActionId, call: u64) {
        if self.after_release(action, call) {
            self.owed_unknown.insert(action.clone());
        }
    }

    /// True when a dispatcher was waiting for the call that made the
    /// reservation of route `r` (see [`ActionFates`]). `answered` tells
    /// whether an answer carried a fence.
    pub(super) fn owed(
        &self,
        action: &ActionId,
        r: &RouteRecord,
        answered: impl Fn(FenceToken) -> bool,
    ) -> bool {
        if self.gave_up.contains(action) {
            return false;
        }
        let fence = r.assignment.reservation.fence;
        self.owed.contains(&fence) || (!answered(fence) && self.owed_unknown.contains(action))
    }

    /// Details of the owed reservations held at the end by actions that
    /// ended and that no open (`open`) or abandoned action shares.
    /// `answered` tells whether an answer carried a fence.
    pub(super) fn orphans<'a>(
        &self,
        routes: &BTreeMap<ActionId, RouteRecord>,
        open: impl Iterator<Item = &'a ActionId>,
        answered: impl Fn(FenceToken) -> bool,
    ) -> Vec<String> {
        let open: BTreeSet<&ActionId> = open.collect();
        routes
            .iter()
            .filter(|(action, r)| {
                r.reserved
                    && self.owed(action, r, &answered)
                    && self.ended.contains(*action)
                    && !self.abandoned.contains(*action)
                    && !open.contains(action)
            })
            .map(|(action, r)| {
                format!(
                    "the reservation of {action} with fence {} on replica {} is still held, but every action with that ID ended",
                    r.assignment.reservation.fence.0, r.assignment.destination.replica
                )
            })
            .collect()
    }
}
