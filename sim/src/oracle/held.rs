//! Decisions a concurrent backend made around rows other transactions
//! held: which replicas the reference must find held to agree.

use std::collections::BTreeSet;

use connreg::contracts::Routing;
use connreg::{ActionId, Maintained, MemoryRegistry, ReplicaId};

use super::rows::rows_named;
use super::{Answer, HELD_TRIES_MAX, Oracle, STALE_PLACE_READS_MAX, comparable};
use crate::backend::{poll_inline, respond_plainly};
use crate::wire::{Request, Response};

impl Oracle {
    /// The rows (as [`rows_named`] keys) calls of the current step other
    /// than `a` name.
    pub(super) fn named_by_others(&self, a: &Answer) -> BTreeSet<String> {
        let mine = rows_named(a, &self.routes);
        (self.step_touches.iter())
            .filter(|(row, n)| **n > mine.get(*row).copied().unwrap_or(0))
            .map(|(row, _)| row.clone())
            .collect()
    }

    /// The replicas whose rows `a` (a resolve or a maintenance call, on a
    /// concurrent backend) must find held to agree. Empty when the first
    /// try agrees or no held row explains the difference.
    pub(super) fn held_for(
        &self,
        a: &Answer,
        request: &Request,
    ) -> Result<BTreeSet<ReplicaId>, String> {
        if self.trace_ordered {
            return Ok(BTreeSet::new());
        }
        match (&a.recorded, request) {
            (Response::Resolve { result: Ok(r) }, Request::Resolve { .. }) => {
                self.held_for_resolve(a, request, &r.assignment.destination.replica)
            }
            (Response::Maintain { result: Ok(m) }, Request::Maintain { .. }) => {
                self.held_for_maintain(a, request, m)
            }
            _ => Ok(BTreeSet::new()),
        }
    }

    /// For a resolve the backend retried after a lost connection, when
    /// the reference has not made its route: the replicas to hold so that
    /// the reference picks the recorded one. The first attempt's decision
    /// committed unrecorded, having ranked by a snapshot that may predate
    /// the step (its call may have begun steps before); the recorded
    /// replica must still be one the reference can pick (eligible, with
    /// capacity), not necessarily its first choice. Empty when it is the
    /// first choice or cannot be picked at all.
    pub(super) fn held_for_retried(
        &self,
        a: &Answer,
        request: &Request,
    ) -> Result<BTreeSet<ReplicaId>, String> {
        let Response::Resolve { result: Ok(r) } = &a.recorded else {
            return Ok(BTreeSet::new());
        };
        let recorded = &r.assignment.destination.replica;
        if !a.retried
            || picks(&self.registry, request, &BTreeSet::new())?.as_ref() == Some(recorded)
        {
            return Ok(BTreeSet::new());
        }
        let held: BTreeSet<ReplicaId> = (self.replicas.iter())
            .filter(|r| *r != recorded)
            .cloned()
            .collect();
        Ok(
            if picks(&self.registry, request, &held)?.as_ref() == Some(recorded) {
                held
            } else {
                BTreeSet::new()
            },
        )
    }

    /// For a new route. While the reference picks another replica than
    /// the recorded one, and another call of the step names that replica
    /// (its row may have been held: ROUTE-6), the pick is held and the
    /// decision tried again, on a copy. When another call of the step
    /// changed the recorded replica ([`Oracle::stale_resolves`]), the
    /// decision is also tried on the reference at the earlier places of
    /// the step where that replica's rank moved (a snapshot read may have
    /// ranked it there), with the rows the step's other calls name held:
    /// if it picks the recorded replica at one, and that replica can still
    /// take the route now, the route goes to it.
    fn held_for_resolve(
        &self,
        a: &Answer,
        request: &Request,
        recorded: &ReplicaId,
    ) -> Result<BTreeSet<ReplicaId>, String> {
        let others = self.named_by_others(a);
        let skip = |picked: &ReplicaId| others.contains(&format!("replica:{picked}"));
        if let Some(held) = picks_after_skips(&self.registry, request, recorded, skip)? {
            return Ok(held);
        }
        if self.stale_ranked.contains(&a.id) {
            let held: BTreeSet<ReplicaId> = (self.replicas.iter())
                .filter(|r| *r != recorded)
                .cloned()
                .collect();
            if picks(&self.registry, request, &held)?.as_ref() == Some(recorded) {
                return Ok(held);
            }
        }
        // The snapshot may also predate the step (a call that waited out
        // a fault began in an earlier one): when another call of the step
        // changed the recorded replica, at most `HELD_TRIES_MAX` better
        // picks are passed over.
        if others.contains(&format!("replica:{recorded}"))
            && let Some(held) = picks_after_skips(&self.registry, request, recorded, |_| true)?
        {
            return Ok(held);
        }
        Ok(BTreeSet::new())
    }

    /// The step's committed new routes (`committed`, in commit order)
    /// whose decisions may have ranked stale: each went to a replica
    /// another call of the step changed (a reservation, a settlement), so
    /// its decision may have ranked that replica by a snapshot read before
    /// that call committed, and only locked it after (READ COMMITTED).
    pub(super) fn stale_resolves(&self, committed: &[Answer]) -> Vec<StaleResolve> {
        let mut out = Vec::new();
        for (index, a) in committed.iter().enumerate() {
            let Response::Resolve { result: Ok(r) } = &a.recorded else {
                continue;
            };
            let replica = r.assignment.destination.replica.clone();
            let row = format!("replica:{replica}");
            let others = self.named_by_others(a);
            if self.trace_ordered || !others.contains(&row) {
                continue;
            }
            let named = (self.replicas.iter())
                .filter(|r| **r != replica && others.contains(&format!("replica:{r}")))
                .cloned()
                .collect();
            out.push(StaleResolve {
                index,
                row,
                replica,
                named,
            });
        }
        out
    }

    /// At the step's place before `committed[place]`, notes each stale
    /// new route not yet replayed ([`StaleResolve`]) whose decision here,
    /// with the rows the step's other calls name held, picks its recorded
    /// replica. The places where such a replica's rank moved are read
    /// first: the step's start and either side of a commit naming it
    /// (`after`: the rows the commit before this place named); the others
    /// while half of [`STALE_PLACE_READS_MAX`] is left. Returns
    /// the rows `committed[place]` names, for the next place.
    pub(super) fn rank_at_place(
        &mut self,
        place: usize,
        after: BTreeSet<String>,
        stale: &[StaleResolve],
        committed: &[Answer],
    ) -> BTreeSet<String> {
        let c = &committed[place];
        let named: BTreeSet<String> = (rows_named(c, &self.routes).into_keys())
            .filter(|k| stale.iter().any(|s| s.row == *k))
            .collect();
        for s in stale.iter().filter(|s| s.index >= place) {
            // The places where the replica's rank moved come first; any
            // other place of the step is read while half the bound is left.
            let moved = after.contains(&s.row) || named.contains(&s.row);
            let bound = if moved {
                STALE_PLACE_READS_MAX
            } else {
                STALE_PLACE_READS_MAX / 2
            };
            if self.stale_reads >= bound || self.stale_ranked.contains(&committed[s.index].id) {
                continue;
            }
            self.stale_reads += 1;
            let request = self.renaming.request(&committed[s.index].request);
            if let Ok(Some(picked)) = picks(&self.registry, &request, &s.named)
                && picked == s.replica
            {
                self.stale_ranked.insert(committed[s.index].id);
            }
        }
        named
    }

    /// For a maintenance batch: maintenance skips a held row rather than
    /// wait for it (LEASE-2: `SKIP LOCKED` on the expired replicas; PIN-8:
    /// `NOWAIT` on a hold's action lock, replica, counters and route),
    /// leaving it to the next call and taking the next one due. While the
    /// reference expires a replica, or releases a hold, that the recorded
    /// answer did not, and another call of the step names that replica
    /// (for a hold: its replica, its action or one of its scopes), that
    /// replica is held and the batch tried again, on a copy.
    fn held_for_maintain(
        &self,
        a: &Answer,
        request: &Request,
        recorded: &Maintained,
    ) -> Result<BTreeSet<ReplicaId>, String> {
        let mut held = BTreeSet::new();
        let others = self.named_by_others(a);
        let by_others = |row: String| others.contains(&row);
        for _ in 0..HELD_TRIES_MAX {
            let fork = self
                .registry
                .fork()
                .map_err(|e| format!("copying the reference: {e}"))?
                .holding(held.clone());
            let replayed = poll_inline(respond_plainly(fork, request.clone()));
            if self
                .renaming
                .agree(&comparable(&a.recorded), &comparable(&replayed))
                .is_ok()
            {
                return Ok(held);
            }
            let Response::Maintain { result: Ok(would) } = replayed else {
                break;
            };
            let before = held.len();
            for r in would
                .expired
                .iter()
                .filter(|r| !recorded.expired.contains(r))
            {
                if by_others(format!("replica:{r}")) {
                    held.insert(r.clone());
                }
            }
            let released =
                |action: &ActionId| recorded.releases.iter().any(|r| r.action == *action);
            for r in would.releases.iter().filter(|r| !released(&r.action)) {
                if by_others(format!("replica:{}", r.replica))
                    || by_others(format!("action:{}", r.action))
                    || r.scopes.iter().any(|s| by_others(format!("scope:{s}")))
                {
                    held.insert(r.replica.clone());
                }
            }
            if held.len() == before {
                break;
            }
        }
        Ok(BTreeSet::new())
    }
}

/// A new route of the step whose decision may have ranked stale.
pub(super) struct StaleResolve {
    /// Its place among the step's commits.
    index: usize,
    /// Its recorded replica, and that replica's row key.
    replica: ReplicaId,
    pub(super) row: String,
    /// The other replicas the step's other calls name.
    named: BTreeSet<ReplicaId>,
}

/// The replica a resolve of `request` goes to on `registry` whose `held`
/// replicas are busy, changing nothing; `None` when it is refused. A new
/// route's pick is read in place ([`MemoryRegistry::new_route_target`]);
/// anything else is resolved on a copy.
fn picks(
    registry: &MemoryRegistry,
    request: &Request,
    held: &BTreeSet<ReplicaId>,
) -> Result<Option<ReplicaId>, String> {
    if let Request::Resolve { request: r } = request
        && let Some(tenant) = &r.tenant
    {
        let route = poll_inline(registry.route_get(tenant.clone(), r.action.clone()));
        if let Ok(None) = route {
            let held = registry.clone().holding(held.clone());
            match held.new_route_target(r) {
                Ok(Some(replica)) => return Ok(Some(replica)),
                Err(_) => return Ok(None),
                Ok(None) => {}
            }
        }
    }
    let fork = registry
        .fork()
        .map_err(|e| format!("copying the reference: {e}"))?
        .holding(held.clone());
    Ok(match poll_inline(respond_plainly(fork, request.clone())) {
        Response::Resolve { result: Ok(r) } => Some(r.assignment.destination.replica.clone()),
        _ => None,
    })
}

/// The replicas held, at most [`HELD_TRIES_MAX`], after which a new route
/// of `request` on `registry` goes to `recorded`: each pick `skip` allows
/// is held and the decision tried again. `None` when no such set is found.
fn picks_after_skips(
    registry: &MemoryRegistry,
    request: &Request,
    recorded: &ReplicaId,
    skip: impl Fn(&ReplicaId) -> bool,
) -> Result<Option<BTreeSet<ReplicaId>>, String> {
    let mut held = BTreeSet::new();
    for _ in 0..HELD_TRIES_MAX {
        let Some(picked) = picks(registry, request, &held)? else {
            break;
        };
        if picked == *recorded {
            return Ok(Some(held));
        }
        if !skip(&picked) {
            break;
        }
        held.insert(picked);
    }
    Ok(None)
}
