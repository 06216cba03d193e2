//! `no_leaked_reservation`, checked at the end of a run that healed: no
//! reservation outlives every caller that could settle it.
//!
//! After the heal every surviving dispatcher has ended its actions, so a
//! reservation still held at the end belongs to an action still running
//! (the liveness check reports that one) or to nobody. A dispatcher that
//! crashed with actions open must, once restarted, find them and settle or
//! cancel them from their retained routes (PIN-5, PIN-6); a reservation
//! it left held is leaked: capacity no caller will ever give back.
//! `no_orphan_reservation` judges the actions that ended; this judges
//! every action, abandoned ones included.
//!
//! Like `no_orphan_reservation`, it counts the reservations some caller
//! was waiting for (*owed*, see `orphan`): a resolve sent before its
//! action's last release and delivered late re-reserves a route nobody
//! waits for, which the contract cannot tell from a retry (PIN-3); no
//! dispatcher can reconcile what it cannot know it holds.

use std::collections::{BTreeMap, BTreeSet};

use connreg::{ActionId, RouteRecord};

/// Details of the owed reservations (`owed`) held at the end by no open
/// action. `abandoned`: actions a crash left open; `reconciled`: those a
/// restarted dispatcher reconciled.
pub(super) fn leaked<'a>(
    routes: &BTreeMap<ActionId, RouteRecord>,
    owed: impl Fn(&ActionId, &RouteRecord) -> bool,
    open: impl Iterator<Item = &'a ActionId>,
    abandoned: &BTreeSet<ActionId>,
    reconciled: &BTreeSet<ActionId>,
) -> Vec<String> {
    let open: BTreeSet<&ActionId> = open.collect();
    routes
        .iter()
        .filter(|(action, r)| r.reserved && !open.contains(action) && owed(action, r))
        .map(|(action, r)| {
            let why = if reconciled.contains(action) {
                "; its dispatcher reconciled it and it was reserved again"
            } else if abandoned.contains(action) {
                "; its dispatcher crashed with it open and nobody reconciled it"
            } else {
                ""
            };
            format!(
                "after the heal, the reservation of {action} with fence {} on replica {} is held by no live action{why}",
                r.assignment.reservation.fence.0, r.assignment.destination.replica
            )
        })
        .collect()
}
