//! `no_spurious_unavailable` (SIM-3): a registry answers `unavailable` only
//! while a database fault is active, or within the settle window after it.
//!
//! `unavailable` means the store could not be reached or could not
//! finish. With a healthy database (and always on the in-memory backend)
//! that is a registry defect, not a fault to retry around. A database
//! fault's window runs from its start event (`db_cut`, `db_stall`,
//! `db_terminate`, `db_restart`) to its `db_fault_end` event, and the
//! answers are allowed until [`DB_FAULT_SETTLE_MS`] after the last window
//! ended: a connection the fault broke fails its next call and is replaced.

use crate::limits::DB_FAULT_SETTLE_MS;
use crate::trace::FaultEvent;

/// The database fault windows seen so far.
#[derive(Debug, Default)]
pub(super) struct DbFaultWindows {
    /// Windows started and not ended.
    active: u32,
    /// When the last window ended, in simulated milliseconds.
    last_end_ms: Option<u64>,
}

impl DbFaultWindows {
    /// Follows a fault event at time `t`; true when it was a database one.
    pub(super) fn on_fault(&mut self, f: &FaultEvent, t: u64) -> bool {
        match f {
            FaultEvent::DbCut { .. }
            | FaultEvent::DbStall { .. }
            | FaultEvent::DbTerminate { .. }
            | FaultEvent::DbRestart
            | FaultEvent::DbFailover { .. } => {
                self.active += 1;
                true
            }
            FaultEvent::DbFaultEnd { .. } => {
                self.active = self.active.saturating_sub(1);
                self.last_end_ms = Some(t);
                true
            }
            _ => false,
        }
    }

    /// True when an `unavailable` answer at time `t` is explained by a
    /// database fault.
    pub(super) fn allows_unavailable(&self, t: u64) -> bool {
        self.active > 0
            || self
                .last_end_ms
                .is_some_and(|end| t <= end.saturating_add(DB_FAULT_SETTLE_MS))
    }

    /// A violation detail for an `unavailable` answer to `op` at `t` that
    /// no database fault explains, or `None` when one does.
    pub(super) fn check(&self, op: &str, t: u64) -> Option<String> {
        if self.allows_unavailable(t) {
            return None;
        }
        let since = match self.last_end_ms {
            None => "no database fault happened".to_string(),
            Some(end) => format!(
                "the last database fault ended at {end} ms, more than {DB_FAULT_SETTLE_MS} ms before"
            ),
        };
        Some(format!(
            "a registry answered {op} with unavailable at {t} ms; {since}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unavailable_is_allowed_inside_a_window_and_its_settle_time_only() {
        let mut w = DbFaultWindows::default();
        assert!(w.check("resolve", 5).is_some());
        assert!(w.on_fault(&FaultEvent::DbRestart, 10));
        assert!(w.check("resolve", 50).is_none());
        assert!(w.on_fault(
            &FaultEvent::DbFaultEnd {
                kind: "db_restart".into()
            },
            100
        ));
        assert!(w.check("resolve", 100 + DB_FAULT_SETTLE_MS).is_none());
        assert!(w.check("resolve", 101 + DB_FAULT_SETTLE_MS).is_some());
    }
}
