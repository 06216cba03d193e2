//! The mirror of the store the trace's snapshots are diffed against.

use std::collections::BTreeMap;

use connreg::{ActionId, ReplicaId, RouteRecord, ScopeId, StoreSnapshot};

use crate::trace::{LeaseRow, ReplicaRow, RouteStateRow, ScopeRow, Snapshot};

/// The store as the checkers last saw it, to emit only what changed. It is
/// kept from the store's change feed: each read lists the rows written
/// since the previous one (or every row, from a backend without a feed),
/// and a listed row is emitted only when it differs from the mirror's, so
/// the trace is the same whichever way the rows came.
#[derive(Default)]
pub(super) struct Mirror {
    revision: Option<connreg::Revision>,
    replicas: BTreeMap<ReplicaId, ReplicaRow>,
    scopes: BTreeMap<ScopeId, ScopeRow>,
    routes: BTreeMap<ActionId, RouteRecord>,
}

impl Mirror {
    pub(super) fn diff(&mut self, snap: StoreSnapshot) -> Option<Snapshot> {
        let mut out = Snapshot {
            revision: snap.revision,
            replicas: Vec::new(),
            scopes: Vec::new(),
            routes: Vec::new(),
            leases: Vec::new(),
            route_states: Vec::new(),
        };
        for r in &snap.replicas {
            let row = ReplicaRow::from(r);
            match self.replicas.get_mut(&row.id) {
                Some(old) if *old == row => {}
                Some(old) => {
                    match LeaseRow::of(old, &row) {
                        Some(lease) => out.leases.push(lease),
                        None => out.replicas.push(row.clone()),
                    }
                    *old = row;
                }
                None => {
                    self.replicas.insert(row.id.clone(), row.clone());
                    out.replicas.push(row);
                }
            }
        }
        for s in &snap.scopes {
            let row = ScopeRow::from(s);
            if self.scopes.get(&row.id) != Some(&row) {
                self.scopes.insert(row.id.clone(), row.clone());
                out.scopes.push(row);
            }
        }
        for r in snap.routes {
            match self.routes.get_mut(&r.assignment.identity.action) {
                Some(old) if *old == r => {}
                Some(old) => {
                    match RouteStateRow::of(old, &r) {
                        Some(state) => out.route_states.push(state),
                        None => out.routes.push(r.clone()),
                    }
                    *old = r;
                }
                None => {
                    self.routes
                        .insert(r.assignment.identity.action.clone(), r.clone());
                    out.routes.push(r);
                }
            }
        }
        let revision_changed = self.revision != Some(snap.revision);
        self.revision = Some(snap.revision);
        let empty = out.replicas.is_empty()
            && out.scopes.is_empty()
            && out.routes.is_empty()
            && out.leases.is_empty()
            && out.route_states.is_empty();
        if empty && !revision_changed {
            None
        } else {
            Some(out)
        }
    }
}
