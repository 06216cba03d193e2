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

use std::collections::BTreeSet;
use std::hash::Hash;

use crate::error::{Error, Result};
use crate::id::{ActionId, ReplicaId, ScopeId};
use crate::inspect::{ChangeCursor, INSPECT_ROWS_MAX, ScopeUsage, StoreChanges, StoreSnapshot};
use crate::request::{Change, Publication};

use super::LiveState;
use crate::memory::catalog::CatalogState;
use crate::memory::lookup::LookupMap;

/// Emptied entries a [`Stamps`] log keeps before it is compacted, at the
/// least; past it, a compaction runs once they outnumber the live ones.
const STAMP_LOG_EMPTIES_MIN: usize = 1024;

/// Every key of one kind of row with its last stamp, in stamp order.
///
/// The log is appended to: a key stamped again empties its old entry and
/// gets a new one at the end, so a write is one hash lookup and one push,
/// and a read of the keys after a stamp is one binary search and a scan of
/// what follows. Emptied entries are dropped once they outnumber the live
/// ones (and [`STAMP_LOG_EMPTIES_MIN`]), so the log stays within about
/// twice the keys and compaction costs O(1) per write, amortized.
#[derive(Debug, Clone)]
struct Stamps<K> {
    /// key → the index of its entry in `log`: searched on every write,
    /// never listed.
    at: LookupMap<K, usize>,
    /// (stamp, key) in stamp order; `None` where the key was stamped again.
    log: Vec<(u64, Option<K>)>,
    /// Entries of `log` that are `None`.
    empties: usize,
}

impl<K> Default for Stamps<K> {
    fn default() -> Self {
        Stamps {
            at: LookupMap::default(),
            log: Vec::new(),
            empties: 0,
        }
    }
}

impl<K: Ord + Hash + Clone> Stamps<K> {
    fn stamp(&mut self, key: &K, stamp: u64) {
        let next = self.log.len();
        match self.at.get_mut(key) {
            Some(at) => {
                let key = self.log[*at]
                    .1
                    .take()
                    .unwrap_or_else(|| unreachable!("a key's entry is never empty"));
                *at = next;
                self.empties += 1;
                self.log.push((stamp, Some(key)));
            }
            None => {
                self.at.insert(key.clone(), next);
                self.log.push((stamp, Some(key.clone())));
            }
        }
        if self.empties >= STAMP_LOG_EMPTIES_MIN && self.empties * 2 > self.log.len() {
            self.compact();
        }
    }

    /// Drops the emptied entries and points every key at its new place.
    fn compact(&mut self) {
        self.log.retain(|(_, k)| k.is_some());
        self.empties = 0;
        for (i, (_, key)) in self.log.iter().enumerate() {
            let key = key
                .as_ref()
                .unwrap_or_else(|| unreachable!("empty entries were dropped"));
            *self
                .at
                .get_mut(key)
                .unwrap_or_else(|| unreachable!("every logged key is indexed")) = i;
        }
    }

    /// The keys stamped after `after`, in key order.
    fn since(&self, after: u64) -> BTreeSet<&K> {
        let from = self.log.partition_point(|(stamp, _)| *stamp <= after);
        self.log[from..]
            .iter()
            .filter_map(|(_, k)| k.as_ref())
            .collect()
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

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::{STAMP_LOG_EMPTIES_MIN, Stamps};

    /// The keys after each stamp, as a map of every key's last stamp
    /// lists them.
    fn model_since(last: &BTreeMap<u32, u64>, after: u64) -> BTreeSet<u32> {
        last.iter()
            .filter(|(_, s)| **s > after)
            .map(|(k, _)| *k)
            .collect()
    }

    #[test]
    fn the_keys_after_a_stamp_are_those_whose_last_stamp_is_later_across_compactions() {
        let mut stamps = Stamps::default();
        let mut last = BTreeMap::new();
        // A few hot keys stamped over and over among many cold ones, so the
        // log compacts several times.
        let mut x: u64 = 7;
        let writes = (STAMP_LOG_EMPTIES_MIN * 8) as u64;
        for stamp in 1..=writes {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let key = if x >> 60 < 12 {
                (x >> 33) as u32 % 16
            } else {
                (x >> 33) as u32 % 5_000
            };
            stamps.stamp(&key, stamp);
            last.insert(key, stamp);
            assert!(
                stamps.log.len() <= 2 * last.len() + STAMP_LOG_EMPTIES_MIN,
                "the log stays within twice its keys: {} entries, {} keys",
                stamps.log.len(),
                last.len()
            );
            if stamp % 997 == 0 {
                for after in [0, stamp / 2, stamp - 10, stamp - 1, stamp] {
                    let got: BTreeSet<u32> = stamps.since(after).into_iter().copied().collect();
                    assert_eq!(
                        got,
                        model_since(&last, after),
                        "after {after} at stamp {stamp}"
                    );
                }
            }
        }
        assert!(
            stamps.log.len() < writes as usize / 2,
            "the log was compacted: {} entries after {writes} writes",
            stamps.log.len()
        );
    }
}
