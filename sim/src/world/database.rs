//! Database faults: what the world does when the schedule strikes the
//! database behind the store.

use super::World;
use crate::backend::Backend;
use crate::faults::Action;
use crate::scenario::{CutMode, FaultKind};
use crate::trace::FaultEvent;

impl<B: Backend> World<B> {
    /// Applies a database fault. Validation refuses them on a backend
    /// without a database, so `database` is there.
    pub(super) fn apply_database(&mut self, action: Action) {
        let Some(db) = self.database.as_ref() else {
            self.checker
                .run_failure("a database fault on a backend without a database".into());
            return;
        };
        let event = match action {
            Action::DbCut(CutMode::All) => FaultEvent::DbCut {
                mode: CutMode::All.name().into(),
                connections: db.cut_all() as u64,
            },
            Action::DbCut(CutMode::NextCommit) => {
                db.cut_next_commit();
                FaultEvent::DbCut {
                    mode: CutMode::NextCommit.name().into(),
                    connections: 0,
                }
            }
            Action::DbStall(ms) => {
                db.stall(ms);
                FaultEvent::DbStall { stall_ms: ms }
            }
            Action::DbTerminate => match db.terminate() {
                Ok(sessions) => FaultEvent::DbTerminate { sessions },
                Err(e) => {
                    self.checker
                        .run_failure(format!("db_terminate failed: {e}"));
                    FaultEvent::DbTerminate { sessions: 0 }
                }
            },
            Action::DbRestart => {
                if let Err(e) = db.restart() {
                    self.checker.run_failure(format!("db_restart failed: {e}"));
                }
                FaultEvent::DbRestart
            }
            Action::DbDetachStandby => {
                if let Err(e) = db.detach_standby() {
                    self.checker
                        .run_failure(format!("db_failover's detach_ms failed: {e}"));
                }
                FaultEvent::DbStandbyDetached
            }
            Action::DbFailover => match db.fail_over() {
                Ok(ms) => FaultEvent::DbFailover {
                    without_primary_ms: ms,
                },
                Err(e) => {
                    self.checker.run_failure(format!("db_failover failed: {e}"));
                    FaultEvent::DbFailover {
                        without_primary_ms: 0,
                    }
                }
            },
            Action::DbEnd(kind) => {
                // A commit cut's window lasts until the cut fired.
                if kind == FaultKind::DbCut && db.commit_cut_armed() {
                    self.armed_cut_ends += 1;
                    return;
                }
                FaultEvent::DbFaultEnd {
                    kind: kind.name().into(),
                }
            }
            _ => return,
        };
        self.fault(event);
    }

    /// Ends the `db_cut` windows whose commit cut has fired by now.
    pub(super) fn end_fired_cuts(&mut self) {
        let Some(db) = self.database.as_ref() else {
            return;
        };
        if self.armed_cut_ends == 0 || db.commit_cut_armed() {
            return;
        }
        for _ in 0..std::mem::take(&mut self.armed_cut_ends) {
            self.fault(FaultEvent::DbFaultEnd {
                kind: FaultKind::DbCut.name().into(),
            });
        }
    }
}
