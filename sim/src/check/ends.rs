//! `reservations_end` (PIN-8): every reservation ends. When the workload
//! is done and reservations are still held, the run goes on without
//! workload or faults (a `drain` event names its end: the scenario's hold,
//! two maintenance intervals and a call timeout after it began). By then
//! every reservation was settled, released by maintenance with its
//! replica's lease, or released because its hold ended, whoever held it:
//! a resolve that committed after its caller stopped waiting included.
//! One still held at the drain's end is held for good.

use super::{Checker, invariant};

impl Checker {
    /// Reservations the store holds, by its rows.
    pub fn held_reservations(&self) -> usize {
        self.store_routes.values().filter(|r| r.reserved).count()
    }

    /// At the drain's end: every reservation still held is a violation.
    pub(super) fn check_reservations_end(&mut self) {
        let Some(until) = self.drain_until_ms else {
            return;
        };
        let held: Vec<String> = self
            .store_routes
            .values()
            .filter(|r| r.reserved)
            .map(|r| {
                let a = &r.assignment;
                format!(
                    "the reservation of {} with fence {} on replica {} is still held when the \
                     drain ends ({until} ms), past the registry's hold: nothing ever released it",
                    a.identity.action, a.reservation.fence.0, a.destination.replica
                )
            })
            .collect();
        for detail in held {
            self.violate(invariant::RESERVATIONS_END, detail);
        }
    }
}
