//! `maintenance_drains` (LEASE-2): after leases end, maintenance drains
//! them in bounded calls. A drain opens at the first maintenance answer
//! that expires a replica or says `more`, and closes at the answer that
//! says `more = false`. With n the replicas whose lease had ended when it
//! opened (by the store's rows, registry clock) and `batch` the `max` the
//! calls pass, it takes at most ceil(n / batch) answered calls plus
//! [`MAINTENANCE_DRAIN_SLACK_CALLS`]: a registry that answers `more = true`
//! to calls that keep leaving work is caught at the call past the bound.
//!
//! A call that handles fewer than `max` replicas while it answers
//! `more = true` is caught at once on a deterministic trace (the in-memory
//! store), unless its releases came near the
//! `LEASE_MAINTENANCE_RESERVATIONS_MAX` bound (the batch stops before a
//! replica whose reservations would pass it); such a call does not count
//! towards the bound either. On PostgreSQL a batch skips the replica rows
//! another transaction holds (`SKIP LOCKED`), so a short batch is allowed
//! and only the call bound applies.
//!
//! Excused, and only these: a maintenance call that fails or is answered
//! with an error or whose answer is lost ends the maintainer's round, so
//! the drain is closed and the next answer opens a new one counted afresh.
//! That the drain left no expired replica behind is `lease_progress`'s
//! check at the closing answer.
//!
//! Incremental: n is counted once per drain from the ordered lease ends
//! `lease_progress` keeps; each answer costs O(1).

use std::collections::BTreeSet;

use connreg::Maintained;
use connreg::limits::LEASE_MAINTENANCE_RESERVATIONS_MAX;

use super::{Checker, invariant};
use crate::limits::MAINTENANCE_DRAIN_SLACK_CALLS;

/// One drain in progress.
#[derive(Debug)]
struct Drain {
    opened_ms: u64,
    n: u64,
    batch: u32,
    bound: u64,
    calls: u64,
    reported: bool,
}

/// The drain in progress and the maintenance calls not finished.
#[derive(Debug, Default)]
pub(super) struct Drains {
    open: Option<Drain>,
    /// Maintenance calls sent and neither delivered nor failed.
    calls: BTreeSet<u64>,
    /// The largest capacity of a replica so far.
    pub(super) capacity_max: u32,
}

impl Drains {
    /// A maintenance call was sent.
    pub(super) fn sent(&mut self, id: u64) {
        self.calls.insert(id);
    }

    /// Call `id` ended at its caller; when it was a maintenance call that
    /// failed, the maintainer's round ended with it.
    pub(super) fn ended(&mut self, id: u64, failed: bool) {
        if self.calls.remove(&id) && failed {
            self.open = None;
        }
    }

    /// The maintainer's round ended early: the drain is excused.
    pub(super) fn interrupted(&mut self) {
        self.open = None;
    }
}

impl Checker {
    /// A maintenance answer `m` to a call passing `max`, at `t`.
    pub(super) fn drain_answered(&mut self, max: u32, m: &Maintained, lost: bool, t: u64) {
        let near_cap = u64::from(m.released) + u64::from(self.drains.capacity_max)
            > u64::from(LEASE_MAINTENANCE_RESERVATIONS_MAX);
        let handled = m.expired.len() as u64;
        // Reservations past their hold (PIN-8) are a reason for `more` too.
        let holds = m
            .releases
            .iter()
            .any(|r| r.reason == connreg::ReleaseReason::HoldExpired);
        if m.more && handled < u64::from(max) && !near_cap && !holds && self.deterministic {
            self.violate(
                invariant::MAINTENANCE_DRAINS,
                format!(
                    "lease maintenance handled {handled} expired replicas of a batch of {max} \
                     and answered more = true ({} reservations released, far from the bound \
                     of {LEASE_MAINTENANCE_RESERVATIONS_MAX})",
                    m.released
                ),
            );
        }
        if self.drains.open.is_none() && (handled > 0 || m.more) {
            let now = self.registry_now();
            let ended = self.lease_progress.ended_by(now);
            let n = ended.max(handled + u64::from(m.more));
            let batch = max.max(1);
            self.drains.open = Some(Drain {
                opened_ms: t,
                n,
                batch,
                bound: n.div_ceil(u64::from(batch)) + MAINTENANCE_DRAIN_SLACK_CALLS,
                calls: 0,
                reported: false,
            });
        }
        let mut over = None;
        if let Some(d) = &mut self.drains.open {
            if !near_cap {
                d.calls += 1;
            }
            if d.calls > d.bound && !d.reported {
                d.reported = true;
                over = Some(format!(
                    "a lease maintenance drain opened at {} ms with {} replicas expired and a \
                     batch of {} is still answering more = {} at its call {} ({handled} handled \
                     by this one): the bound is ceil(n / batch) + {MAINTENANCE_DRAIN_SLACK_CALLS} \
                     = {} calls",
                    d.opened_ms, d.n, d.batch, m.more, d.calls, d.bound
                ));
            }
        }
        if let Some(detail) = over {
            self.violate(invariant::MAINTENANCE_DRAINS, detail);
        }
        if !m.more || lost {
            self.drains.open = None;
        }
    }
}
