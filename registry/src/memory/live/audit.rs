//! Reading the live state whole: the operator audit trail by page, the
//! status counts of replicas and assignments, and the bounded snapshot
//! that inspection returns.

use crate::error::{Error, Result};
use crate::inspect::{INSPECT_ROWS_MAX, ScopeUsage, StoreSnapshot};
use crate::records::{ReplicaState, Revision};
use crate::request::{AuditEntry, AuditPage, AuditQuery, StatusReport};

use super::LiveState;
use crate::memory::catalog::CatalogState;

impl LiveState {
    /// AUTH-7: the kept audit entries after `query.after`, oldest first.
    pub(crate) fn audit_page(&self, query: &AuditQuery) -> AuditPage {
        let after = query.after.unwrap_or(0);
        let limit = query.limit as usize;
        let mut entries: Vec<AuditEntry> = self
            .audit
            .iter()
            .filter(|e| e.seq > after)
            .take(limit + 1)
            .cloned()
            .collect();
        let more = entries.len() > limit;
        entries.truncate(limit);
        AuditPage {
            next_after: if more {
                entries.last().map(|e| e.seq)
            } else {
                None
            },
            entries,
        }
    }

    pub(crate) fn status(&self, revision: Revision) -> StatusReport {
        let mut s = StatusReport {
            revision,
            ..StatusReport::default()
        };
        for r in self.groups.iter().flatten().map(|s| &s.replica) {
            match r.state {
                ReplicaState::Ready => s.replicas_ready += 1,
                ReplicaState::Draining => s.replicas_draining += 1,
                ReplicaState::Offline => s.replicas_offline += 1,
            }
            if r.circuit.open {
                s.open_circuits += 1;
            }
        }
        s.active_assignments = self
            .groups
            .iter()
            .flatten()
            .map(|s| s.reserved.len() as u64)
            .sum();
        s.assignments_total = self.routes.len() as u64;
        s
    }

    pub(crate) fn snapshot(&self, catalog: &CatalogState) -> Result<StoreSnapshot> {
        let rows = self.slot_of.len() + self.routes.len() + catalog.scopes.len();
        if rows > INSPECT_ROWS_MAX {
            return Err(Error::limit("inspected rows", INSPECT_ROWS_MAX));
        }
        Ok(StoreSnapshot {
            revision: catalog.revision,
            replicas: self
                .slot_of
                .values()
                .map(|&at| self.slot(at).replica.clone())
                .collect(),
            scopes: catalog
                .scopes
                .values()
                .map(|s| ScopeUsage {
                    scope: s.clone(),
                    in_use: self.in_use(&s.id),
                })
                .collect(),
            routes: self
                .routes
                .sorted()
                .into_iter()
                .map(|(action, &n)| self.route_rows[n].route.record(action))
                .collect(),
        })
    }
}
