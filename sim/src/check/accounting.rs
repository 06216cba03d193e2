//! `capacity_accounting` (ROUTE-7, SETTLE-3, REC-8) as the checker applies
//! it: each reserving answer keeps the live reservations within the
//! replica's capacity and the scopes' limits, an answer names as released
//! exactly what it released, and a snapshot's counters match its routes
//! (where each fence is held once, `fence_unique`). The live reservations
//! by the answers are kept by `capacity`.

use std::collections::{BTreeMap, BTreeSet};

use connreg::{ActionId, FenceToken, ReplicaId, RouteAssignment, RouteRecord, ScopeId};

use super::{Checker, invariant};
use crate::wire::{Request, Response};

impl Checker {
    /// At the answer that reserved `a`: the live reservations by the
    /// answers stay within the replica's declared capacity and the scopes'
    /// limits, at every answer and not only at snapshots (an excess inside
    /// one step shows no snapshot).
    pub(super) fn check_admission(&mut self, a: &RouteAssignment) {
        let replica = &a.destination.replica;
        let scopes: Vec<&ScopeId> = a.reservation.scopes.iter().collect();
        let (on_replica, in_scopes) = self.reservations.held(replica, &scopes);
        let mut found = Vec::new();
        if let Some(spec) = self.specs.get(replica)
            && on_replica > spec.capacity
        {
            found.push(format!(
                "the reservation of {} (fence {}) makes {on_replica} live on replica {replica}, over its capacity {}",
                a.identity.action, a.reservation.fence.0, spec.capacity
            ));
        }
        for (scope, n) in scopes.iter().zip(in_scopes) {
            if let Some(limit) = self.admission_limit(a, scope)
                && n > limit
            {
                found.push(format!(
                    "the reservation of {} (fence {}) makes {n} live in scope {scope}, over its limit {limit}",
                    a.identity.action, a.reservation.fence.0
                ));
            }
        }
        for detail in found {
            self.violate(invariant::CAPACITY, detail);
        }
    }

    /// The most a resolve answered with `a` may have found as `scope`'s
    /// limit: the highest limit of the revisions from the one it read to
    /// the last one published, since a publication that commits while
    /// the resolve runs may change the row it locks. The last snapshot's
    /// row when no published revision names the scope.
    fn admission_limit(&self, a: &RouteAssignment, scope: &ScopeId) -> Option<u32> {
        let read = a.policy.catalog_revision;
        let below = self
            .catalogs
            .range(..=read)
            .next_back()
            .and_then(|(_, c)| c.scope_limit(scope));
        let after = self
            .catalogs
            .range(read..)
            .filter_map(|(_, c)| c.scope_limit(scope))
            .max();
        below
            .into_iter()
            .chain(after)
            .max()
            .or_else(|| self.store_scopes.get(scope).map(|row| row.limit))
    }

    /// Compares the reservations an answer names as released with what it
    /// did: a releasing settlement names exactly its own reservation, as
    /// the answers issued it; a maintenance names as many as it counts,
    /// and (ordered) exactly the live ones on the replicas it expired.
    pub(super) fn check_released(
        &mut self,
        req: &Request,
        resp: &Response,
        named: Option<&[crate::trace::ReleasedRef]>,
    ) {
        let detail = match (req, resp) {
            (Request::Settle { params }, Response::Settle { result: Ok(s) }) if s.released => {
                let a = &params.assignment;
                let own = crate::trace::ReleasedRef::of(a);
                let issued = self
                    .latest
                    .get(&a.identity.action)
                    .filter(|l| l.reservation.fence == a.reservation.fence)
                    .map(crate::trace::ReleasedRef::of);
                match named {
                    Some([one]) if *one == own && issued.as_ref().is_none_or(|i| i == one) => None,
                    _ => Some(format!(
                        "a settlement of {} released fence {}, but its answer names {named:?}",
                        a.identity.action, a.reservation.fence.0
                    )),
                }
            }
            (Request::Settle { .. }, _) => {
                named.map(|n| format!("a settlement that released nothing names {n:?} as released"))
            }
            (Request::Maintain { .. }, Response::Maintain { result: Ok(m) }) => match named {
                Some(n) if n.len() as u64 != u64::from(m.released) => Some(format!(
                    "lease maintenance reports {} reservations released, but names {}",
                    m.released,
                    n.len()
                )),
                Some(n) => {
                    // Hold releases (PIN-8) may be of any replica's.
                    let holds: BTreeSet<FenceToken> = m
                        .releases
                        .iter()
                        .filter(|r| r.reason == connreg::ReleaseReason::HoldExpired)
                        .map(|r| r.fence)
                        .collect();
                    let named: BTreeSet<FenceToken> = n
                        .iter()
                        .map(|r| r.fence)
                        .filter(|f| !holds.contains(f))
                        .collect();
                    let live = self.reservations.live_on(&m.expired);
                    (self.deterministic && named != live).then(|| {
                        format!(
                            "lease maintenance names fences {:?} as released; the answers leave {:?} live on the replicas it expired",
                            named.iter().map(|f| f.0).collect::<Vec<_>>(),
                            live.iter().map(|f| f.0).collect::<Vec<_>>()
                        )
                    })
                }
                None => None,
            },
            (Request::Maintain { .. }, _) => {
                named.map(|n| format!("a failed maintenance names {n:?} as released"))
            }
            (_, _) => named.map(|n| format!("a {} answer names {n:?} as released", req.op())),
        };
        if let Some(detail) = detail {
            self.violate(invariant::CAPACITY, detail);
        }
    }

    /// Compares the counters of the replicas and scopes touched since the
    /// last comparison (a row or a reservation on them changed) with the
    /// stored routes and with the answers. Incremental: a world of tens of
    /// thousands of routes is not recounted after every step.
    pub(super) fn check_capacity(&mut self) {
        let (mut replicas, mut scopes) = self.store_counts.take_touched();
        let (by_answers, in_scopes) = self.reservations.take_touched();
        replicas.extend(by_answers);
        scopes.extend(in_scopes);
        let mut found = Vec::new();
        for id in &replicas {
            let Some(row) = self.store_replicas.get(id) else {
                continue;
            };
            let live = self.store_counts.on_replica(id);
            if row.active != live {
                found.push(format!(
                    "replica {id} counts {} active, but {live} reservations are live on it",
                    row.active
                ));
            }
            if row.active > row.capacity || live > row.capacity {
                found.push(format!(
                    "replica {id} holds {live} reservations over its capacity {}",
                    row.capacity
                ));
            }
        }
        for id in &scopes {
            let Some(row) = self.store_scopes.get(id) else {
                continue;
            };
            let live = self.store_counts.in_scope(id);
            if row.in_use != live {
                found.push(format!(
                    "scope {id} counts {} in use, but {live} reservations are live in it",
                    row.in_use
                ));
            }
            if row.in_use > row.limit || live > row.limit {
                found.push(format!(
                    "scope {id} holds {live} reservations over its limit {}",
                    row.limit
                ));
            }
        }
        if self.ordered {
            found.extend(self.reservations.counts(
                &self.store_replicas,
                &self.store_scopes,
                &replicas,
                &scopes,
            ));
        }
        for detail in found {
            self.violate(invariant::CAPACITY, detail);
        }
    }
}

/// The stored routes, counted: reserved ones by replica and by scope, and
/// every route's fence. Kept as rows arrive, so a comparison costs what
/// changed, not the store's size.
#[derive(Debug, Default)]
pub(super) struct StoreCounts {
    per_replica: BTreeMap<ReplicaId, u32>,
    per_scope: BTreeMap<ScopeId, u32>,
    fences: BTreeMap<FenceToken, ActionId>,
    touched_replicas: BTreeSet<ReplicaId>,
    touched_scopes: BTreeSet<ScopeId>,
}

impl StoreCounts {
    /// The stored route of an action is now `new` (it was `old`). Returns
    /// the other action whose stored route holds the same fence, if any.
    pub(super) fn route(
        &mut self,
        old: Option<&RouteRecord>,
        new: &RouteRecord,
    ) -> Option<ActionId> {
        let action = &new.assignment.identity.action;
        if let Some(old) = old {
            self.count(old, false);
            let fence = old.assignment.reservation.fence;
            if self.fences.get(&fence) == Some(action) {
                self.fences.remove(&fence);
            }
        }
        self.count(new, true);
        match self.fences.get(&new.assignment.reservation.fence) {
            Some(other) if other != action => Some(other.clone()),
            Some(_) => None,
            None => {
                self.fences
                    .insert(new.assignment.reservation.fence, action.clone());
                None
            }
        }
    }

    fn count(&mut self, r: &RouteRecord, add: bool) {
        let a = &r.assignment;
        self.touched_replicas.insert(a.destination.replica.clone());
        self.touched_scopes
            .extend(a.reservation.scopes.iter().cloned());
        if !r.reserved {
            return;
        }
        let step = |n: &mut u32| {
            if add {
                *n += 1
            } else {
                *n = n.saturating_sub(1)
            }
        };
        step(
            self.per_replica
                .entry(a.destination.replica.clone())
                .or_default(),
        );
        for s in &a.reservation.scopes {
            step(self.per_scope.entry(s.clone()).or_default());
        }
    }

    /// A replica's row changed: compare it at the next check.
    pub(super) fn touch_replica(&mut self, id: &ReplicaId) {
        self.touched_replicas.insert(id.clone());
    }

    /// A scope's row changed: compare it at the next check.
    pub(super) fn touch_scope(&mut self, id: &ScopeId) {
        self.touched_scopes.insert(id.clone());
    }

    fn take_touched(&mut self) -> (BTreeSet<ReplicaId>, BTreeSet<ScopeId>) {
        (
            std::mem::take(&mut self.touched_replicas),
            std::mem::take(&mut self.touched_scopes),
        )
    }

    fn on_replica(&self, id: &ReplicaId) -> u32 {
        self.per_replica.get(id).copied().unwrap_or(0)
    }

    fn in_scope(&self, id: &ScopeId) -> u32 {
        self.per_scope.get(id).copied().unwrap_or(0)
    }
}
