//! `capacity_accounting` against the answers: the reservations callers
//! were told about, and the store compared with them.
//!
//! A reservation is live from the `created` or `reserved` answer that
//! carried it until a `settle` answer with `released: true` or a
//! `maintain` answer that expired its replica (lease maintenance releases
//! every reservation on a replica it marks offline). The store must agree:
//! a route row is reserved exactly when its reservation is live, a
//! replica's `active` and a scope's `in_use` count exactly the live
//! reservations on them, and a `maintain` answer's `released` counts
//! exactly the live reservations on the replicas it expired. A store that
//! frees a reservation no answer released, or a maintenance answer that
//! miscounts, is a violation even when its own rows agree with each other.
//!
//! Calls whose commit is unknown (an `unavailable` answer, on PostgreSQL)
//! widen what is allowed, never more than they could have done: a resolve
//! may have reserved (the store shows it first), a settle may have
//! released its own reservation, a maintenance may have released the
//! reservations of replicas the store shows offline.

use std::collections::{BTreeMap, BTreeSet};

use connreg::{ActionId, FenceToken, ReplicaId, RouteAssignment, RouteRecord, ScopeId};

use crate::trace::{ReplicaRow, ScopeRow};

/// Where a live reservation holds capacity.
#[derive(Debug, Clone)]
struct Held {
    replica: ReplicaId,
    scopes: BTreeSet<ScopeId>,
}

/// The reservations the answers say are live.
#[derive(Debug, Default)]
pub(super) struct Reservations {
    live: BTreeMap<FenceToken, Held>,
    /// `live` by replica and counted by scope, kept as `live` changes.
    per_replica: BTreeMap<ReplicaId, BTreeSet<FenceToken>>,
    per_scope: BTreeMap<ScopeId, u32>,
    /// The part of those counts that is also in `maybe_released`.
    uncertain_per_replica: BTreeMap<ReplicaId, u32>,
    uncertain_per_scope: BTreeMap<ScopeId, u32>,
    /// Replicas and scopes whose count changed since the last comparison.
    touched_replicas: BTreeSet<ReplicaId>,
    touched_scopes: BTreeSet<ScopeId>,
    /// Released by an answer (or by the store, reported or allowed).
    ended: BTreeSet<FenceToken>,
    /// Settled by a call answered `unavailable`: it may have committed.
    maybe_released: BTreeSet<FenceToken>,
    /// Actions a resolve of which was answered `unavailable` and whose
    /// reservation no answer or snapshot has shown yet.
    unseen: BTreeSet<ActionId>,
    /// A `maintain` call was answered `unavailable`: it may have
    /// committed.
    maintain_unknown: bool,
}

/// What a `maintain` answer released, by the answers.
pub(super) struct MaintainCount {
    /// The fences it must have released.
    pub(super) fences: Vec<FenceToken>,
    /// The fewest releases it may report.
    pub(super) min: u64,
    /// The most releases it may report.
    pub(super) max: u64,
}

impl Reservations {
    /// Makes `fence` live, held as `held`.
    fn add(&mut self, fence: FenceToken, held: Held) {
        self.take(fence);
        self.per_replica
            .entry(held.replica.clone())
            .or_default()
            .insert(fence);
        self.touched_replicas.insert(held.replica.clone());
        for s in &held.scopes {
            *self.per_scope.entry(s.clone()).or_default() += 1;
            self.touched_scopes.insert(s.clone());
        }
        if self.maybe_released.contains(&fence) {
            self.uncertain(&held, true);
        }
        self.live.insert(fence, held);
    }

    /// Ends `fence` if it is live.
    fn take(&mut self, fence: FenceToken) -> Option<Held> {
        let held = self.live.remove(&fence)?;
        if let Some(fences) = self.per_replica.get_mut(&held.replica) {
            fences.remove(&fence);
        }
        self.touched_replicas.insert(held.replica.clone());
        for s in &held.scopes {
            if let Some(n) = self.per_scope.get_mut(s) {
                *n -= 1;
            }
            self.touched_scopes.insert(s.clone());
        }
        if self.maybe_released.contains(&fence) {
            self.uncertain(&held, false);
        }
        Some(held)
    }

    /// Counts a live reservation in `maybe_released` (`more`) or stops
    /// counting it.
    fn uncertain(&mut self, held: &Held, more: bool) {
        let step = |n: &mut u32| {
            if more {
                *n += 1;
            } else {
                *n -= 1;
            }
        };
        step(
            self.uncertain_per_replica
                .entry(held.replica.clone())
                .or_default(),
        );
        for s in &held.scopes {
            step(self.uncertain_per_scope.entry(s.clone()).or_default());
        }
    }

    /// The replicas and scopes whose live count changed since the last
    /// call.
    pub(super) fn take_touched(&mut self) -> (BTreeSet<ReplicaId>, BTreeSet<ScopeId>) {
        (
            std::mem::take(&mut self.touched_replicas),
            std::mem::take(&mut self.touched_scopes),
        )
    }

    /// True when an answer or the store has shown this fence.
    pub(super) fn known(&self, fence: FenceToken) -> bool {
        self.live.contains_key(&fence) || self.ended.contains(&fence)
    }

    /// True when an answer (or the store) has ended this reservation:
    /// released by a settlement or by maintenance.
    pub(super) fn has_ended(&self, fence: FenceToken) -> bool {
        self.ended.contains(&fence)
    }

    /// A `created` or `reserved` answer (or the first answer to carry a
    /// reservation whose creating answer was lost) carried `a`.
    pub(super) fn reserve(&mut self, a: &RouteAssignment) {
        let fence = a.reservation.fence;
        self.unseen.remove(&a.identity.action);
        if self.ended.contains(&fence) {
            return;
        }
        self.add(
            fence,
            Held {
                replica: a.destination.replica.clone(),
                scopes: a.reservation.scopes.clone(),
            },
        );
    }

    /// A resolve of `action` was answered `unavailable`.
    pub(super) fn resolve_unknown(&mut self, action: &ActionId) {
        self.unseen.insert(action.clone());
    }

    /// A `settle` answer released `fence`.
    pub(super) fn settled(&mut self, fence: FenceToken) {
        self.take(fence);
        self.ended.insert(fence);
    }

    /// A settlement of `fence` was answered `unavailable`.
    pub(super) fn settle_unknown(&mut self, fence: FenceToken) {
        if self.maybe_released.insert(fence)
            && let Some(held) = self.live.get(&fence).cloned()
        {
            self.uncertain(&held, true);
        }
    }

    /// A `maintain` call was answered `unavailable`.
    pub(super) fn maintain_unknown(&mut self) {
        self.maintain_unknown = true;
    }

    /// The live reservations on `replica`, and in each of `scopes`, not
    /// counting those a settlement of unknown commit may have released.
    pub(super) fn held(&self, replica: &ReplicaId, scopes: &[&ScopeId]) -> (u32, Vec<u32>) {
        let on_replica = self.per_replica.get(replica).map_or(0, |f| f.len() as u32)
            - self
                .uncertain_per_replica
                .get(replica)
                .copied()
                .unwrap_or(0);
        let in_scopes = scopes
            .iter()
            .map(|s| {
                self.per_scope.get(*s).copied().unwrap_or(0)
                    - self.uncertain_per_scope.get(*s).copied().unwrap_or(0)
            })
            .collect();
        (on_replica, in_scopes)
    }

    /// The live reservations on `replicas`.
    pub(super) fn live_on(&self, replicas: &[ReplicaId]) -> BTreeSet<FenceToken> {
        replicas
            .iter()
            .filter_map(|r| self.per_replica.get(r))
            .flatten()
            .copied()
            .collect()
    }

    /// A `maintain` answer expired `expired`: every live reservation on
    /// them is released.
    pub(super) fn maintained(&mut self, expired: &[ReplicaId]) -> MaintainCount {
        let fences: Vec<FenceToken> = self.live_on(expired).into_iter().collect();
        let uncertain = fences
            .iter()
            .filter(|f| self.maybe_released.contains(f))
            .count() as u64;
        for f in &fences {
            self.settled(*f);
        }
        let n = fences.len() as u64;
        MaintainCount {
            fences,
            min: n - uncertain,
            max: n + self.unseen.len() as u64,
        }
    }

    /// Compares one stored route row with the answers; `offline`: its
    /// replica is offline in the store. Returns what disagrees.
    pub(super) fn stored(&mut self, r: &RouteRecord, offline: bool) -> Option<String> {
        let a = &r.assignment;
        let fence = a.reservation.fence;
        let action = &a.identity.action;
        self.unseen.remove(action);
        if r.reserved {
            if self.ended.contains(&fence) {
                return Some(format!(
                    "the store holds the reservation of {action} with fence {} again, after an answer released it",
                    fence.0
                ));
            }
            if !self.live.contains_key(&fence) {
                // A reservation no answer carried: `one_route_per_action`
                // judges it; it holds capacity all the same.
                self.reserve(a);
            }
            return None;
        }
        self.take(fence)?;
        self.ended.insert(fence);
        let allowed = self.maybe_released.contains(&fence) || (self.maintain_unknown && offline);
        (!allowed).then(|| {
            format!(
                "the store released the reservation of {action} with fence {} on replica {}, but no settle or maintenance answer released it",
                fence.0, a.destination.replica
            )
        })
    }

    /// Compares the stored counters with the live reservations.
    pub(super) fn counts(
        &self,
        replicas: &BTreeMap<ReplicaId, ReplicaRow>,
        scopes: &BTreeMap<ScopeId, ScopeRow>,
        touched_replicas: &BTreeSet<ReplicaId>,
        touched_scopes: &BTreeSet<ScopeId>,
    ) -> Vec<String> {
        let mut found = Vec::new();
        for id in touched_replicas {
            let Some(row) = replicas.get(id) else {
                continue;
            };
            let live = self.per_replica.get(id).map_or(0, |f| f.len() as u32);
            if row.active != live {
                found.push(format!(
                    "replica {id} counts {} active, but the answers leave {live} reservations live on it",
                    row.active
                ));
            }
        }
        for id in touched_scopes {
            let Some(row) = scopes.get(id) else {
                continue;
            };
            let live = self.per_scope.get(id).copied().unwrap_or(0);
            if row.in_use != live {
                found.push(format!(
                    "scope {id} counts {} in use, but the answers leave {live} reservations live in it",
                    row.in_use
                ));
            }
        }
        found
    }
}
