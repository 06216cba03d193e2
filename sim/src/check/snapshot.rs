//! The store's snapshot against what the answers said: its catalog
//! revision against the publications answered (`revision_by_publication`), circuits that closed without an
//! operator (`circuit_closed_by_operator`), and each stored route's
//! destination, fence and reservation (`one_route_per_action`,
//! `fence_unique`, `capacity_accounting`).

use connreg::{Publication, ReplicaState, Revision, RouteRecord};

use super::{Checker, Truth, invariant};
use crate::trace::{ReplicaRow, Snapshot};

/// Publications answered `unavailable` the checker keeps between two
/// snapshots as possibly committed; past this many, later ones are not
/// kept (a revision they made is then reported).
pub(super) const PUBLICATIONS_UNKNOWN_MAX: usize = 64;

impl Checker {
    /// A publication answered `unavailable`: on PostgreSQL a lost COMMIT
    /// reply answers so after the publication committed (CAT-1 counts it:
    /// it succeeded, though its caller cannot know).
    pub(super) fn publication_unknown(&mut self, publication: &Publication) {
        if self.publications_unknown.len() < PUBLICATIONS_UNKNOWN_MAX {
            self.publications_unknown.push(publication.clone());
        }
    }

    /// Takes the revisions after the last published one up to `upto` as
    /// made by publications answered `unavailable`, in answer order, when
    /// there are enough of them; otherwise leaves the gap to be reported.
    pub(super) fn publications_unknown_committed(&mut self, upto: Revision) {
        let gap = upto.0.saturating_sub(self.max_published.0);
        if gap == 0 || gap > self.publications_unknown.len() as u64 {
            return;
        }
        for publication in self.publications_unknown.drain(..gap as usize) {
            let base = self
                .catalogs
                .get(&self.max_published)
                .cloned()
                .unwrap_or_default();
            self.max_published = Revision(self.max_published.0 + 1);
            self.catalogs
                .insert(self.max_published, base.apply(&publication));
        }
    }

    /// A publication answered with the revision `rev` it made.
    pub(super) fn on_published(&mut self, publication: &Publication, rev: Revision) {
        self.counters.publications += 1;
        // Revisions between the last answered one and this one were made
        // by publications whose answer was lost.
        self.publications_unknown_committed(Revision(rev.0.saturating_sub(1)));
        if rev.0 != self.max_published.0 + 1 {
            self.violate(
                invariant::REVISION,
                format!(
                    "a publication made revision {}, but the last publication made {}",
                    rev.0, self.max_published.0
                ),
            );
        }
        let base = self
            .catalogs
            .range(..rev)
            .next_back()
            .map(|(_, m)| m.clone())
            .unwrap_or_default();
        self.catalogs.insert(rev, base.apply(publication));
        self.max_published = self.max_published.max(rev);
        self.run_deferred(false);
    }

    pub(super) fn on_snapshot(&mut self, s: &Snapshot) {
        self.counters.snapshots += 1;
        // A publication answered `unavailable` has committed or never will
        // by the second snapshot after its answer (a cut COMMIT's failure
        // is forwarded after the server answered it; a connection cut
        // while its COMMIT was on the wire may finish a moment later).
        self.publications_unknown_committed(s.revision);
        let aged = self
            .publications_unknown_aged
            .min(self.publications_unknown.len());
        self.publications_unknown.drain(..aged);
        self.publications_unknown_aged = self.publications_unknown.len();
        self.run_deferred(true);
        if s.revision != self.max_published {
            self.violate(
                invariant::REVISION,
                format!(
                    "the store is at revision {}, but publications made {}",
                    s.revision.0, self.max_published.0
                ),
            );
            // Report a drift once, not after every step, and check what
            // follows against the last published catalog.
            let last = self
                .catalogs
                .range(..=s.revision)
                .next_back()
                .map(|(_, m)| m.clone())
                .unwrap_or_default();
            self.max_published = s.revision;
            self.catalogs.entry(s.revision).or_insert(last);
        }
        for row in &s.replicas {
            self.on_replica_row(row);
        }
        for lease in &s.leases {
            match self.store_replicas.get(&lease.id) {
                Some(previous) => {
                    let row = lease.apply(previous);
                    self.on_replica_row(&row);
                }
                None => self.run_failure(format!(
                    "a snapshot renews the lease of replica {}, which no earlier snapshot showed",
                    lease.id
                )),
            }
        }
        self.operator_closed.clear();
        for row in &s.scopes {
            self.store_counts.touch_scope(&row.id);
            self.store_scopes.insert(row.id.clone(), row.clone());
        }
        for r in &s.routes {
            self.on_route_row(r);
        }
        for state in &s.route_states {
            match self.store_routes.get(&state.action).and_then(|p| state.apply(p)) {
                Some(row) => self.on_route_row(&row),
                None => self.run_failure(format!(
                    "a snapshot changes the state of {}'s route with fence {}, which no earlier snapshot showed",
                    state.action, state.fence.0
                )),
            }
        }
        self.check_not_released_held();
        self.check_capacity();
        self.check_lease_progress();
    }

    /// One stored replica row, full.
    fn on_replica_row(&mut self, row: &ReplicaRow) {
        let was_open = self
            .store_replicas
            .get(&row.id)
            .map(|r| r.circuit_open)
            .unwrap_or(false);
        if was_open && !row.circuit_open && !self.operator_closed.contains(&row.id) {
            self.violate(
                invariant::CIRCUIT,
                format!(
                    "replica {}'s circuit closed without an operator action",
                    row.id
                ),
            );
        }
        if !was_open && row.circuit_open {
            self.counters.circuits_opened += 1;
        }
        self.circuit_stored(row);
        self.replica_model
            .insert(row.id.clone(), (row.state, row.circuit_open));
        self.lease_progress.stored(row);
        self.store_counts.touch_replica(&row.id);
        self.store_replicas.insert(row.id.clone(), row.clone());
    }

    /// One stored route row, full.
    fn on_route_row(&mut self, r: &RouteRecord) {
        let a = &r.assignment;
        let action = &a.identity.action;
        let fence = a.reservation.fence;
        match self.truth.get(action) {
            Some(truth) if !truth.same(a) => {
                let detail = format!(
                    "the stored route of {action} is instance {}, replica {}; it was instance {}, replica {}",
                    a.destination.instance,
                    a.destination.replica,
                    truth.destination.instance,
                    truth.destination.replica
                );
                self.violate(invariant::ONE_ROUTE, detail);
            }
            Some(_) => {}
            None => {
                self.truth.insert(action.clone(), Truth::of(a, false));
            }
        }
        match self.issued.get(&fence) {
            Some(other) if other != action => {
                let detail = format!(
                    "the stored route of {action} holds fence {}, issued to {other}",
                    fence.0
                );
                self.violate(invariant::FENCE, detail);
            }
            Some(_) => {}
            None if self.ordered && !self.commit_unknown.contains(action) => self.violate(
                invariant::ONE_ROUTE,
                format!(
                    "the stored route of {action} holds fence {}, which no answer carried",
                    fence.0
                ),
            ),
            None => {
                // Not ordered, or a resolve whose COMMIT reply was
                // lost: the store is the first to show this fence.
                self.issued.insert(fence, action.clone());
                if self
                    .latest
                    .get(action)
                    .is_none_or(|l| l.reservation.fence < fence)
                {
                    self.latest.insert(action.clone(), a.clone());
                }
            }
        }
        if !r.reserved {
            self.check_outcome_kept(r);
            self.released.insert(fence);
            let was_reserved = self
                .store_routes
                .get(action)
                .is_none_or(|old| old.reserved || old.assignment.reservation.fence != fence);
            if was_reserved {
                self.fates.released(action, self.last_call);
            }
        }
        let offline = self
            .store_replicas
            .get(&a.destination.replica)
            .is_some_and(|row| row.state == ReplicaState::Offline);
        if let Some(detail) = self.reservations.stored(r, offline)
            && self.ordered
        {
            self.violate(invariant::CAPACITY, detail);
        }
        if let Some(other) = self.store_counts.route(self.store_routes.get(action), r) {
            self.violate(
                invariant::FENCE,
                format!(
                    "stored routes of {action} and {other} hold fence {}",
                    fence.0
                ),
            );
        }
        self.store_routes.insert(action.clone(), r.clone());
    }
}
