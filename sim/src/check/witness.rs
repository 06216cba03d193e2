//! What the trace itself proves about order, leases, reads and fences, as
//! the hosts saw them (EVID-1, EVID-2, EVID-3, EVID-6):
//!
//! - `lease_respected`: maintenance expires a replica only when its lease
//!   has ended at the maintenance's clock, the lease being what the last
//!   applied heartbeat (its clock plus the TTL it sent) or registration
//!   (the lease its answer carries) set; on deterministic traces, a call
//!   that answers `more = false` leaves no replica whose lease had ended.
//! - `monotonic_reads`: a host that received a page or a publication's
//!   answer at revision R is never shown a first page at a revision below
//!   R (continuation pages are at their cursor's revision, CAT-9).
//! - `commit_order`: the trace's committing answers are in the order the
//!   store committed them, as the store's own evidence shows: the fences of
//!   new reservations increase along a deterministic (in-memory) trace,
//!   where fences are taken in commit order; the `commit` sequence
//!   increases along a commit-ordered (PostgreSQL) one.
//! - `dispatch_by_holder`: a host executes or cancels a fence only after
//!   an answer it received (a resolve, a copy of one, a `route_get`)
//!   carried that fence: `dispatch_after_commit` asks that some answer
//!   carried it (and reports a fence none did), this asks that the sender
//!   is who was told.

use std::collections::{BTreeMap, BTreeSet};

use connreg::{FenceToken, HeartbeatOutcome, ReplicaId, Revision};

use super::{Checker, invariant};
use crate::wire::{Request, Response};

/// The state of these checks.
#[derive(Debug, Default)]
pub(super) struct Witness {
    /// Each replica's lease end (registry clock, ms) as the answers set it;
    /// an offline replica has none.
    lease_end: BTreeMap<ReplicaId, u64>,
    /// The highest revision each host has received.
    seen_revision: BTreeMap<String, Revision>,
    /// First-page reads in flight: call → the revision their sender had
    /// already received when it sent them.
    read_floor: BTreeMap<u64, Revision>,
    /// Answers not yet delivered that carry a revision: call → (caller,
    /// revision).
    revision_answers: BTreeMap<u64, (String, Revision)>,
    /// Answers not yet delivered that carry a fence: call → (caller,
    /// fence).
    fence_answers: BTreeMap<u64, (String, FenceToken)>,
    /// (host, fence) pairs an answer the host received carried.
    told: BTreeSet<(String, FenceToken)>,
    /// The last new reservation's fence along the trace (deterministic
    /// traces) and its call.
    last_fence: Option<(FenceToken, u64)>,
    /// The last commit sequence along the trace (commit-ordered traces)
    /// and its call.
    last_commit: Option<(u64, u64)>,
}

impl Checker {
    /// A call was sent (after `calls` recorded it).
    pub(super) fn witness_sent(&mut self, id: u64, from: &str, req: &Request) {
        match req {
            Request::Page { query } if query.cursor.is_none() => {
                if let Some(&floor) = self.witness.seen_revision.get(from) {
                    self.witness.read_floor.insert(id, floor);
                }
            }
            Request::Execute { assignment } => {
                let fence = assignment.reservation.fence;
                // A fence no registry answered is `dispatch_after_commit`'s.
                if self.answered.contains(&fence)
                    && !self.witness.told.contains(&(from.to_string(), fence))
                {
                    self.violate(
                        invariant::HOLDER,
                        format!(
                            "{from} executed {} with fence {}, which no answer it received carried",
                            assignment.identity.action, fence.0
                        ),
                    );
                }
            }
            Request::Cancel { action, fence }
                if self.answered.contains(fence)
                    && !self.witness.told.contains(&(from.to_string(), *fence)) =>
            {
                self.violate(
                    invariant::HOLDER,
                    format!(
                        "{from} cancelled {action} with fence {}, which no answer it received carried",
                        fence.0
                    ),
                );
            }
            _ => {}
        }
    }

    /// Call `id` of `caller` was answered `resp` at registry clock `clock`,
    /// with commit sequence `commit`.
    pub(super) fn witness_replied(
        &mut self,
        id: u64,
        caller: &str,
        req: &Request,
        resp: &Response,
        clock: Option<u64>,
        commit: Option<u64>,
    ) {
        self.check_commit_order(id, resp, commit);
        match (req, resp) {
            (Request::Resolve { .. }, Response::Resolve { result: Ok(r) }) => {
                if r.kind == connreg::ResolveKind::Reserved
                    && let Some(now) = clock
                {
                    self.check_pinned_eligible(&r.assignment, now);
                }
                let fence = r.assignment.reservation.fence;
                self.witness
                    .fence_answers
                    .insert(id, (caller.to_string(), fence));
            }
            (
                Request::RouteGet { .. },
                Response::RouteGet {
                    result: Ok(Some(r)),
                },
            ) => {
                let fence = r.assignment.reservation.fence;
                self.witness
                    .fence_answers
                    .insert(id, (caller.to_string(), fence));
            }
            (Request::Page { .. }, Response::Page { result: Ok(page) }) => {
                if let Some(floor) = self.witness.read_floor.remove(&id)
                    && page.revision < floor
                {
                    self.violate(
                        invariant::MONOTONIC_READS,
                        format!(
                            "{caller} was shown a page at revision {} (call {id}), after it had received revision {}",
                            page.revision.0, floor.0
                        ),
                    );
                }
                self.witness
                    .revision_answers
                    .insert(id, (caller.to_string(), page.revision));
            }
            (Request::Publish { .. }, Response::Publish { result: Ok(rev) }) => {
                self.witness
                    .revision_answers
                    .insert(id, (caller.to_string(), *rev));
            }
            (Request::Register { .. }, Response::Register { result: Ok(r) }) => {
                self.witness
                    .lease_end
                    .insert(r.spec.id.clone(), r.lease_expires_at.0);
            }
            (
                Request::Heartbeat { params },
                Response::Heartbeat {
                    result: Ok(HeartbeatOutcome::Applied),
                },
            ) => {
                if let Some(clock) = clock {
                    let end = clock.saturating_add(params.lease_ttl_ms);
                    self.witness.lease_end.insert(params.replica.clone(), end);
                }
            }
            (Request::Maintain { .. }, Response::Maintain { result: Ok(m) }) => {
                let Some(now) = clock else { return };
                for r in &m.expired {
                    if let Some(end) = self.witness.lease_end.remove(r)
                        && end > now
                    {
                        self.violate(
                            invariant::LEASE,
                            format!(
                                "lease maintenance at clock {now} expired {r}, whose lease runs to {end} (its last applied heartbeat or registration)"
                            ),
                        );
                    }
                }
                if self.deterministic && !m.more {
                    let left: Vec<&str> = self
                        .witness
                        .lease_end
                        .iter()
                        .filter(|(_, end)| **end <= now)
                        .map(|(r, _)| r.as_str())
                        .take(3)
                        .collect();
                    if !left.is_empty() {
                        self.violate(
                            invariant::LEASE,
                            format!(
                                "lease maintenance at clock {now} answered more = false, yet the leases of [{}] had ended",
                                left.join(", ")
                            ),
                        );
                    }
                }
            }
            _ => {}
        }
    }

    /// A replica's lease end as the answers set it (`lease_respected`).
    pub(super) fn witness_lease_end(&self, replica: &ReplicaId) -> Option<u64> {
        self.witness.lease_end.get(replica).copied()
    }

    /// The answer to call `id` reached its caller.
    pub(super) fn witness_delivered(&mut self, id: u64) {
        if let Some((host, fence)) = self.witness.fence_answers.remove(&id) {
            self.witness.told.insert((host, fence));
        }
        if let Some((host, rev)) = self.witness.revision_answers.remove(&id) {
            let seen = self.witness.seen_revision.entry(host).or_default();
            *seen = (*seen).max(rev);
        }
    }

    /// `commit_order`: committing answers appear as the store committed
    /// them.
    fn check_commit_order(&mut self, id: u64, resp: &Response, commit: Option<u64>) {
        if let Some(seq) = commit {
            if let Some((last, by)) = self.witness.last_commit
                && seq <= last
            {
                self.violate(
                    invariant::COMMIT_ORDER,
                    format!(
                        "the answer to call {id} committed at sequence {seq}, yet the trace puts it after call {by}'s sequence {last}"
                    ),
                );
            }
            self.witness.last_commit = Some((seq, id));
        }
        if !self.deterministic {
            return;
        }
        let Response::Resolve { result: Ok(r) } = resp else {
            return;
        };
        if r.kind == connreg::ResolveKind::Existing {
            return;
        }
        let fence = r.assignment.reservation.fence;
        if let Some((last, by)) = self.witness.last_fence
            && fence <= last
        {
            self.violate(
                invariant::COMMIT_ORDER,
                format!(
                    "call {id} was answered a new reservation with fence {}, yet the trace puts it after call {by}'s fence {}, which the store took later",
                    fence.0, last.0
                ),
            );
        }
        self.witness.last_fence = Some((fence, id));
    }
}
