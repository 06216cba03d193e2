//! Settlement over the live state: settling a route's reservation, giving
//! back what a reservation took (also used when a lease expires), and the
//! operator's closing of a replica's circuit.

use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::limits::AUDIT_ENTRIES_MAX;
use crate::records::{Circuit, Outcome};
use crate::request::{AuditEntry, CircuitCloseParams, CircuitPolicy, SettleParams, Settled};

use super::feed::ChangeLog;
use super::{LiveState, Slot, StoredRoute};
use crate::memory::Behaviour;

impl LiveState {
    /// SETTLE-1..SETTLE-5.
    pub(crate) fn settle(
        &mut self,
        params: &SettleParams,
        policy: CircuitPolicy,
        behaviour: &Behaviour,
    ) -> Result<Settled> {
        let given = &params.assignment;
        let action = &given.identity.action;
        let Some(&n) = self.routes.get(action) else {
            return Err(Error::FenceLost);
        };
        let stored = &mut self.route_rows[n].route;
        if !stored.is(given, behaviour.ignore_fence) {
            return Err(Error::FenceLost);
        }
        if !stored.reserved && !behaviour.double_release {
            if behaviour.settle_rewrites_outcome {
                stored.last_settlement = Some(params.outcome);
                self.changes.route(n);
            }
            return Ok(Settled { released: false });
        }
        // The `settle-keeps-unknown` plant: the reservation stays held.
        if behaviour.settle_keeps_unknown && params.outcome == Outcome::OutcomeUnknown {
            return Ok(Settled { released: false });
        }
        self.holds.remove(&(stored.reserved_at, stored.fence));
        let slot = stored.slot;
        let count_before = self.groups[slot.group as usize][slot.index as usize]
            .replica
            .circuit
            .consecutive_unknown;
        Self::release_stored(
            stored,
            n,
            &mut self.groups,
            &mut self.scope_in_use,
            &mut self.changes,
            params.outcome,
            policy,
        );
        if behaviour.circuit_never_resets && params.outcome == Outcome::Completed {
            self.groups[slot.group as usize][slot.index as usize]
                .replica
                .circuit
                .consecutive_unknown = count_before;
        }
        Ok(Settled { released: true })
    }

    /// Gives back what `stored`'s reservation (the route numbered
    /// `number`) took and records the settlement, stamping the route, its
    /// replica and its scopes.
    pub(super) fn release_stored(
        stored: &mut StoredRoute,
        number: u32,
        groups: &mut [Vec<Slot>],
        scope_in_use: &mut [u32],
        changes: &mut ChangeLog,
        outcome: Outcome,
        policy: CircuitPolicy,
    ) {
        for &counter in &stored.fixed.counters {
            let n = &mut scope_in_use[counter as usize];
            *n = n.saturating_sub(1);
        }
        let slot = &mut groups[stored.slot.group as usize][stored.slot.index as usize];
        slot.replica.active = slot.replica.active.saturating_sub(1);
        slot.reserved.remove(&number);
        slot.replica.circuit = slot.replica.circuit.after_settlement(outcome, policy);
        stored.reserved = false;
        stored.last_settlement = Some(outcome);
        changes.scopes(&stored.fixed.counters);
        changes.replica(slot.number);
        changes.route(number);
    }

    /// SETTLE-6: only an operator closes a circuit, and it is audited.
    pub(crate) fn circuit_close(
        &mut self,
        params: &CircuitCloseParams,
        operator: &str,
        now: Timestamp,
    ) -> Result<AuditEntry> {
        let slot = self.slot_of_mut(&params.replica)?;
        if !slot.replica.circuit.open {
            return Err(Error::Conflict {
                reason: "the circuit is not open",
            });
        }
        slot.replica.circuit = Circuit::default();
        let number = slot.number;
        self.changes.replica(number);
        self.audit_seq += 1;
        let entry = AuditEntry {
            seq: self.audit_seq,
            at: now,
            operator: operator.to_owned(),
            action: "circuit_close".into(),
            replica: params.replica.clone(),
            reason: params.reason.clone(),
        };
        if self.audit.len() >= AUDIT_ENTRIES_MAX {
            self.audit.pop_front();
        }
        self.audit.push_back(entry.clone());
        Ok(entry)
    }
}
