//! `capacity_accounting` (ROUTE-7, SETTLE-3, REC-8) as the checker applies
//! it: each reserving answer keeps the live reservations within the
//! replica's capacity and the scopes' limits, an answer names as released
//! exactly what it released, and a snapshot's counters match its routes
//! (where each fence is held once, `fence_unique`). The live reservations
//! by the answers are kept by `capacity`.

use std::collections::{BTreeMap, BTreeSet};

use connreg::{ActionId, FenceToken, ReplicaId, RouteAssignment, ScopeId};

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
            if let Some(row) = self.store_scopes.get(*scope)
                && n > row.limit
            {
                found.push(format!(
                    "the reservation of {} (fence {}) makes {n} live in scope {scope}, over its limit {}",
                    a.identity.action, a.reservation.fence.0, row.limit
                ));
            }
        }
        for detail in found {
            self.violate(invariant::CAPACITY, detail);
        }
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
                    let named: BTreeSet<FenceToken> = n.iter().map(|r| r.fence).collect();
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

    pub(super) fn check_capacity(&mut self) {
        let mut per_replica: BTreeMap<&ReplicaId, u32> = BTreeMap::new();
        let mut per_scope: BTreeMap<&ScopeId, u32> = BTreeMap::new();
        let mut fences: BTreeMap<FenceToken, &ActionId> = BTreeMap::new();
        let mut found = Vec::new();
        for r in self.store_routes.values() {
            let a = &r.assignment;
            if let Some(other) = fences.insert(a.reservation.fence, &a.identity.action) {
                found.push((
                    invariant::FENCE,
                    format!(
                        "stored routes of {} and {other} hold fence {}",
                        a.identity.action, a.reservation.fence.0
                    ),
                ));
            }
            if r.reserved {
                *per_replica.entry(&a.destination.replica).or_default() += 1;
                for s in &a.reservation.scopes {
                    *per_scope.entry(s).or_default() += 1;
                }
            }
        }
        for (id, row) in &self.store_replicas {
            let live = per_replica.get(id).copied().unwrap_or(0);
            if row.active != live {
                found.push((
                    invariant::CAPACITY,
                    format!(
                        "replica {id} counts {} active, but {live} reservations are live on it",
                        row.active
                    ),
                ));
            }
            if row.active > row.capacity || live > row.capacity {
                found.push((
                    invariant::CAPACITY,
                    format!(
                        "replica {id} holds {live} reservations over its capacity {}",
                        row.capacity
                    ),
                ));
            }
        }
        for (id, row) in &self.store_scopes {
            let live = per_scope.get(id).copied().unwrap_or(0);
            if row.in_use != live {
                found.push((
                    invariant::CAPACITY,
                    format!(
                        "scope {id} counts {} in use, but {live} reservations are live in it",
                        row.in_use
                    ),
                ));
            }
            if row.in_use > row.limit || live > row.limit {
                found.push((
                    invariant::CAPACITY,
                    format!(
                        "scope {id} holds {live} reservations over its limit {}",
                        row.limit
                    ),
                ));
            }
        }
        if self.ordered {
            let counts = self
                .reservations
                .counts(&self.store_replicas, &self.store_scopes);
            found.extend(counts.into_iter().map(|d| (invariant::CAPACITY, d)));
        }
        for (inv, detail) in found {
            self.violate(inv, detail);
        }
    }
}
