//! `lease_progress`: lease maintenance finishes its work, which no safety
//! check notices when it does not (LEASE-2). Two checks:
//!
//! - A maintenance answer with `more = false` says no expired replica is
//!   left: the snapshot after it must hold no replica, not offline, whose
//!   lease ended by the answer's clock (a heartbeat that renewed a lapsed
//!   lease shows its new end, so it is not counted).
//! - With `expect.offline_within_ms`, a replica whose lease ended is
//!   offline within that bound after the end, by the registry clock: a
//!   round that never comes is caught too.
//!
//! Incremental: the replicas not offline are kept ordered by lease end,
//! and each snapshot looks only at those whose bound has passed.

use std::collections::{BTreeMap, BTreeSet};

use connreg::{ReplicaId, ReplicaState, Timestamp};

use super::{Checker, invariant};
use crate::trace::ReplicaRow;

/// The replicas not offline, by lease end.
#[derive(Debug, Default)]
pub(super) struct LeaseProgress {
    due: BTreeSet<(Timestamp, ReplicaId)>,
    lease_of: BTreeMap<ReplicaId, Timestamp>,
    /// The registry clock of the last answer that said no expired replica
    /// is left, until the next snapshot judges it.
    none_left_at: Option<Timestamp>,
}

impl LeaseProgress {
    /// A replica's row as the store now has it.
    pub(super) fn stored(&mut self, row: &ReplicaRow) {
        if let Some(old) = self.lease_of.remove(&row.id) {
            self.due.remove(&(old, row.id.clone()));
        }
        if row.state != ReplicaState::Offline {
            self.lease_of.insert(row.id.clone(), row.lease_expires_at);
            self.due.insert((row.lease_expires_at, row.id.clone()));
        }
    }

    /// A maintenance answer said no expired replica is left at `now`.
    pub(super) fn none_left(&mut self, now: Timestamp) {
        self.none_left_at = Some(now);
    }

    /// How many replicas not offline had their lease end by `now`
    /// (`maintenance_drains`, once per drain).
    pub(super) fn ended_by(&self, now: Timestamp) -> u64 {
        self.due.iter().take_while(|(end, _)| *end <= now).count() as u64
    }

    /// The replicas whose lease ended more than `within_ms` before `now`,
    /// taken out (each lease is reported once).
    fn overdue(&mut self, now: Timestamp, within_ms: u64) -> Vec<(Timestamp, ReplicaId)> {
        let mut out = Vec::new();
        while let Some((end, _)) = self.due.first()
            && end.0.saturating_add(within_ms) < now.0
        {
            let Some((end, id)) = self.due.pop_first() else {
                break;
            };
            self.lease_of.remove(&id);
            out.push((end, id));
        }
        out
    }
}

impl Checker {
    /// The registry clock now.
    pub(super) fn registry_now(&self) -> Timestamp {
        Timestamp(
            (crate::world::CLOCK_START_MS + self.now_ms)
                .saturating_add_signed(self.clock_offset_ms),
        )
    }

    /// After a snapshot: a replica past its lease by more than the bound
    /// and still not offline is a violation.
    pub(super) fn check_lease_progress(&mut self) {
        if let Some(at) = self.lease_progress.none_left_at.take() {
            let left: Vec<(Timestamp, ReplicaId)> = self
                .lease_progress
                .due
                .iter()
                .take_while(|(end, _)| *end <= at)
                .cloned()
                .collect();
            if let Some((end, first)) = left.first() {
                self.violate(
                    invariant::LEASE_PROGRESS,
                    format!(
                        "lease maintenance answered more = false at {}, yet {} replicas whose \
                         lease had ended are not offline (first {first}, lease ended at {})",
                        at.0,
                        left.len(),
                        end.0
                    ),
                );
            }
        }
        let Some(within) = self.expect.offline_within_ms else {
            return;
        };
        let now = self.registry_now();
        for (end, id) in self.lease_progress.overdue(now, within) {
            let state = self
                .store_replicas
                .get(&id)
                .map(|r| format!("{:?}", r.state).to_lowercase())
                .unwrap_or_default();
            self.violate(
                invariant::LEASE_PROGRESS,
                format!(
                    "replica {id}'s lease ended at {} and it is still {state} at {} ({} ms later; \
                     expect.offline_within_ms = {within}): lease maintenance did not finish",
                    end.0,
                    now.0,
                    now.0.saturating_sub(end.0)
                ),
            );
        }
    }
}
