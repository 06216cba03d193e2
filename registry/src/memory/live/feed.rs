//! The change feed of the live state: every write stamps the rows it
//! wrote with the next change number, and a read of the feed lists the
//! rows stamped after a cursor, through a log ordered by stamp, without
//! visiting the rows that did not change.
//!
//! Stamped rows: a replica (registration, heartbeat, drain, maintenance,
//! a reservation taken or released, a circuit opened or closed), a route
//! (created, reserved again, settled, released by maintenance) and an
//! admission scope (its counter moved, or a publication wrote it). Rows
//! are never deleted, so the feed has no deletions to report.
//!
//! Each kind of row is numbered densely in the order rows are first
//! written (a replica's registration, a route's creation, a scope's
//! counter), so the log names a row by its number: a write is one push,
//! with no search for the row's earlier entry.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{Error, Result};
use crate::inspect::{ChangeCursor, INSPECT_ROWS_MAX, ScopeUsage, StoreChanges, StoreSnapshot};
use crate::request::{Change, Publication};

use super::LiveState;
use crate::memory::catalog::CatalogState;

/// Entries a [`Stamps`] log holds before it is first compacted; past it,
/// a compaction runs once the log holds more than twice the entries the
/// last one kept.
const STAMP_LOG_COMPACT_MIN: usize = 1024;

/// The stamps of one kind of row, in stamp order: (stamp, row number).
///
/// A row stamped again leaves its older entry in the log, which the next
/// compaction drops: it keeps each row's last entry, found by one scan
/// from the end with a bit per row. A compaction runs when the log has
/// doubled since the last one kept its entries, so the log stays within
/// about twice the rows written, and a write costs O(1), amortized.
#[derive(Debug, Clone, Default)]
struct Stamps {
    /// (stamp, row) in stamp order; a row may appear more than once, its
    /// last entry holding its last stamp.
    log: Vec<(u64, u32)>,
    /// Rows numbered so far: one more than the largest number logged.
    rows: u32,
    /// Entries the last compaction kept.
    kept: usize,
}

impl Stamps {
    fn stamp(&mut self, row: u32, stamp: u64) {
        self.rows = self.rows.max(row + 1);
        self.log.push((stamp, row));
        if self.log.len() >= STAMP_LOG_COMPACT_MIN && self.log.len() > 2 * self.kept {
            self.compact();
        }
    }

    /// Keeps each row's last entry only.
    fn compact(&mut self) {
        let mut seen = vec![false; self.rows as usize];
        let mut kept: Vec<(u64, u32)> = Vec::with_capacity(self.log.len().min(self.rows as usize));
        for &(stamp, row) in self.log.iter().rev() {
            let seen = &mut seen[row as usize];
            if !*seen {
                *seen = true;
                kept.push((stamp, row));
            }
        }
        kept.reverse();
        self.kept = kept.len();
        self.log = kept;
    }

    /// The rows stamped after `after`, in stamp order; a row stamped
    /// more than once since may be listed more than once.
    fn since(&self, after: u64) -> impl Iterator<Item = u32> + '_ {
        let from = self.log.partition_point(|(stamp, _)| *stamp <= after);
        self.log[from..].iter().map(|&(_, row)| row)
    }
}

/// Which rows were written when (see the module documentation).
#[derive(Debug, Default, Clone)]
pub(crate) struct ChangeLog {
    /// The last stamp handed out (0: nothing written yet).
    last: u64,
    /// By replica number (`Slot::number`).
    replicas: Stamps,
    /// By scope counter.
    scopes: Stamps,
    /// By route number (the route's place in `LiveState::route_rows`).
    routes: Stamps,
}

impl ChangeLog {
    fn next(&mut self) -> u64 {
        self.last += 1;
        self.last
    }

    /// The replica numbered `replica` was written.
    pub(super) fn replica(&mut self, replica: u32) {
        let stamp = self.next();
        self.replicas.stamp(replica, stamp);
    }

    /// The scope counted by `counter` was written.
    pub(super) fn scope(&mut self, counter: u32) {
        let stamp = self.next();
        self.scopes.stamp(counter, stamp);
    }

    /// The scopes counted by `counters` moved.
    pub(super) fn scopes(&mut self, counters: &[u32]) {
        for &counter in counters {
            self.scope(counter);
        }
    }

    /// The route numbered `route` was written.
    pub(super) fn route(&mut self, route: u32) {
        let stamp = self.next();
        self.routes.stamp(route, stamp);
    }
}

impl LiveState {
    /// A publication was applied: the scopes it wrote changed.
    pub(crate) fn published(&mut self, publication: &Publication) {
        for change in &publication.changes {
            if let Change::UpsertScope(scope) = change {
                let counter = self.counter_of(&scope.id);
                self.changes.scope(counter);
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
        let replicas: BTreeMap<_, _> = self
            .changes
            .replicas
            .since(after)
            .map(|n| &self.slot(self.replica_at[n as usize]).replica)
            .map(|r| (&r.spec.id, r))
            .collect();
        let scopes: BTreeSet<_> = self
            .changes
            .scopes
            .since(after)
            .map(|counter| &self.scope_ids[counter as usize])
            .collect();
        let routes: BTreeMap<_, _> = self
            .changes
            .routes
            .since(after)
            .map(|n| {
                let row = &self.route_rows[n];
                (&row.action, &row.route)
            })
            .collect();
        if replicas.len() + scopes.len() + routes.len() > INSPECT_ROWS_MAX {
            return Err(Error::limit("inspected rows", INSPECT_ROWS_MAX));
        }
        Ok(StoreChanges {
            snapshot: StoreSnapshot {
                revision: catalog.revision,
                replicas: replicas.into_values().cloned().collect(),
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
                    .map(|(action, route)| route.record(action))
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

    use super::{STAMP_LOG_COMPACT_MIN, Stamps};

    /// The rows after each stamp, as a map of every row's last stamp
    /// lists them.
    fn model_since(last: &BTreeMap<u32, u64>, after: u64) -> BTreeSet<u32> {
        last.iter()
            .filter(|(_, s)| **s > after)
            .map(|(k, _)| *k)
            .collect()
    }

    #[test]
    fn the_rows_after_a_stamp_are_those_whose_last_stamp_is_later_across_compactions() {
        let mut stamps = Stamps::default();
        let mut last = BTreeMap::new();
        // A few hot rows stamped over and over among many cold ones, so the
        // log compacts several times.
        let mut x: u64 = 7;
        let writes = (STAMP_LOG_COMPACT_MIN * 8) as u64;
        for stamp in 1..=writes {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let row = if x >> 60 < 12 {
                (x >> 33) as u32 % 16
            } else {
                (x >> 33) as u32 % 5_000
            };
            stamps.stamp(row, stamp);
            last.insert(row, stamp);
            assert!(
                stamps.log.len() <= 2 * last.len() + STAMP_LOG_COMPACT_MIN,
                "the log stays within twice its rows: {} entries, {} rows",
                stamps.log.len(),
                last.len()
            );
            if stamp % 997 == 0 {
                for after in [0, stamp / 2, stamp - 10, stamp - 1, stamp] {
                    let got: BTreeSet<u32> = stamps.since(after).collect();
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
