//! The change feed of the live state: every write stamps the rows it
//! wrote with the next change number, and a read of the feed lists the
//! rows stamped after a cursor, through an index ordered by stamp, without
//! visiting the rows that did not change.
//!
//! Stamped rows: a replica (registration, heartbeat, drain, maintenance,
//! a reservation taken or released, a circuit opened or closed), a route
//! (created, reserved again, settled, released by maintenance) and an
//! admission scope (its counter moved, or a publication wrote it). Rows
//! are never deleted, so the feed has no deletions to report.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{Error, Result};
use crate::id::{ActionId, ReplicaId, ScopeId};
use crate::inspect::{ChangeCursor, INSPECT_ROWS_MAX, ScopeUsage, StoreChanges, StoreSnapshot};
use crate::request::{Change, Publication};

use super::LiveState;
use crate::memory::catalog::CatalogState;

/// The last stamp of each key of one kind of row, and the keys by stamp.
#[derive(Debug, Clone)]
struct Stamps<K> {
    /// key → its last stamp.
    last: BTreeMap<K, u64>,
    /// stamp → the key it was last given to.
    keys: BTreeMap<u64, K>,
}

impl<K> Default for Stamps<K> {
    fn default() -> Self {
        Stamps {
            last: BTreeMap::new(),
            keys: BTreeMap::new(),
        }
    }
}

impl<K: Ord + Clone> Stamps<K> {
    fn stamp(&mut self, key: &K, stamp: u64) {
        match self.last.get_mut(key) {
            Some(old) => {
                let key = self
                    .keys
                    .remove(old)
                    .unwrap_or_else(|| unreachable!("every stamped key is indexed by stamp"));
                *old = stamp;
                self.keys.insert(stamp, key);
            }
            None => {
                self.last.insert(key.clone(), stamp);
                self.keys.insert(stamp, key.clone());
            }
        }
    }

    /// The keys stamped after `after`, in key order.
    fn since(&self, after: u64) -> BTreeSet<&K> {
        self.keys.range(after + 1..).map(|(_, k)| k).collect()
    }
}

/// Which rows were written when (see the module documentation).
#[derive(Debug, Default, Clone)]
pub(crate) struct ChangeLog {
    /// The last stamp handed out (0: nothing written yet).
    last: u64,
    replicas: Stamps<ReplicaId>,
    scopes: Stamps<ScopeId>,
    routes: Stamps<ActionId>,
}

impl ChangeLog {
    fn next(&mut self) -> u64 {
        self.last += 1;
        self.last
    }

    /// `replica`'s row was written.
    pub(super) fn replica(&mut self, replica: &ReplicaId) {
        let stamp = self.next();
        self.replicas.stamp(replica, stamp);
    }

    /// `scope`'s row (its counter or its record) was written.
    pub(super) fn scope(&mut self, scope: &ScopeId) {
        let stamp = self.next();
        self.scopes.stamp(scope, stamp);
    }

    /// The counters of `scopes` moved.
    pub(super) fn scopes<'a>(&mut self, scopes: impl IntoIterator<Item = &'a ScopeId>) {
        for scope in scopes {
            self.scope(scope);
        }
    }

    /// `action`'s route was written.
    pub(super) fn route(&mut self, action: &ActionId) {
        let stamp = self.next();
        self.routes.stamp(action, stamp);
    }
}

impl LiveState {
    /// A publication was applied: the scopes it wrote changed.
    pub(crate) fn published(&mut self, publication: &Publication) {
        for change in &publication.changes {
            if let Change::UpsertScope(scope) = change {
                self.changes.scope(&scope.id);
            }
        }
    }

    /// The rows written after `cursor`, in their current state; the whole
    /// store without a cursor, or with one this store did not hand out.
    pub(crate) fn changes_since(
        &self,
        catalog: &CatalogState,
        cursor: Option<ChangeCursor>,
    ) -> Result<StoreChanges> {
        let now = ChangeCursor(self.changes.last);
        let after = match cursor {
            Some(ChangeCursor(after)) if after <= self.changes.last => after,
            _ => {
                return Ok(StoreChanges {
                    snapshot: self.snapshot(catalog)?,
                    complete: true,
                    cursor: now,
                });
            }
        };
        let replicas = self.changes.replicas.since(after);
        let scopes = self.changes.scopes.since(after);
        let routes = self.changes.routes.since(after);
        if replicas.len() + scopes.len() + routes.len() > INSPECT_ROWS_MAX {
            return Err(Error::limit("inspected rows", INSPECT_ROWS_MAX));
        }
        Ok(StoreChanges {
            snapshot: StoreSnapshot {
                revision: catalog.revision,
                replicas: replicas
                    .into_iter()
                    .filter_map(|id| self.replica(id).cloned())
                    .collect(),
                scopes: scopes
                    .into_iter()
                    .filter_map(|id| catalog.scopes.get(id))
                    .map(|s| ScopeUsage {
                        scope: s.clone(),
                        in_use: self.in_use(&s.id),
                    })
                    .collect(),
                routes: routes
                    .into_iter()
                    .filter_map(|action| Some(self.routes.get(action)?.record(action)))
                    .collect(),
            },
            complete: false,
            cursor: now,
        })
    }
}
