//! `evidence_consistent` (PIN-5, PIN-7, SETTLE-1): what callers and
//! providers saw agrees with itself.
//!
//! - One `execute` performs its side effect at most once: a second ledger
//!   entry naming the same call is a provider that ran the work twice.
//! - A settlement claims only what its sender was told: `completed` only
//!   by a host that received a `completed` answer to an `execute` of that
//!   action and fence, and `outcome_unknown` never by one that did (the
//!   reconciliation of a restarted dispatcher is the same host, its journal
//!   carrying what it was told; an answer that reached it just before it
//!   crashed may never have been read, so after a crash `outcome_unknown`
//!   is allowed).
//! - A read sent after a release was answered sees it: `route_get` does
//!   not answer `reserved` with a fence whose release an answer reported
//!   before the read was sent (fences are never reserved twice: a retry
//!   takes a fresh one, PIN-3).
//! - A side effect runs under a held reservation (EVID-4): a host does not
//!   execute a fence after an answer it received reported that fence no
//!   longer held (its settlement, a maintenance's releases, a `route_get`
//!   showing it released). What a host was not told it cannot act on: an
//!   execute sent before a release, or by a host that never learnt of it
//!   (a lease that ended under a silenced zone), may run after it, and the
//!   release that ended the reservation bounds what the registry claims.
//! - A `cancelled` settlement is the fence's last word (EVID-9): with an
//!   action ID shared by several dispatchers, one may cancel while another
//!   holds the same fence from an `existing` answer; the replica keeps the
//!   cancellation and refuses that fence's later executes, so no side
//!   effect of a fence starts after a `cancelled` settlement released it.

use std::collections::{BTreeMap, BTreeSet};

use connreg::{ActionId, FenceToken, Outcome};

use super::{Checker, invariant};
use crate::wire::{Execution, Request, Response};

/// What one host was told of one fence by `execute` answers.
#[derive(Debug, Default, Clone, Copy)]
struct Told {
    /// An answer said `completed`.
    completed: bool,
    /// An answer said something else.
    other: bool,
    /// The host has not crashed since a `completed` answer reached it: an
    /// answer delivered just before a crash may never have been read, and
    /// only what the host journaled survives the crash.
    remembered: bool,
}

/// What the hosts were told and what the providers did, from the trace.
#[derive(Debug, Default)]
pub(super) struct Seen {
    /// `execute` calls with a side effect in the ledger.
    ledger_calls: BTreeSet<u64>,
    /// `execute` calls: their caller, action and fence.
    executes: BTreeMap<u64, (String, ActionId, FenceToken)>,
    /// `execute` answers not yet delivered.
    answers: BTreeMap<u64, Execution>,
    /// (host, action, fence) → what the `execute` answers it received said.
    told: BTreeMap<(String, ActionId, FenceToken), Told>,
    /// fence → the highest call ID sent when an answer reported its release.
    released_by_call: BTreeMap<FenceToken, u64>,
    /// Fences a `cancelled` settlement released.
    cancelled: BTreeSet<FenceToken>,
    /// Answers not yet delivered that report fences no longer held: call →
    /// (caller, fences).
    release_answers: BTreeMap<u64, (String, Vec<FenceToken>)>,
    /// (host, fence): an answer the host received reported the fence no
    /// longer held.
    known_released: BTreeSet<(String, FenceToken)>,
}

impl Checker {
    /// A call was sent.
    pub(super) fn seen_sent(&mut self, id: u64, from: &str, req: &Request) {
        match req {
            Request::Execute { assignment } => {
                let fence = assignment.reservation.fence;
                if self
                    .seen
                    .known_released
                    .contains(&(from.to_string(), fence))
                {
                    self.violate(
                        invariant::EVIDENCE,
                        format!(
                            "{from} executed {} with fence {} (call {id}) after an answer it received reported that fence released",
                            assignment.identity.action, fence.0
                        ),
                    );
                }
                self.seen.executes.insert(
                    id,
                    (
                        from.to_string(),
                        assignment.identity.action.clone(),
                        assignment.reservation.fence,
                    ),
                );
            }
            Request::Settle { params } => {
                let a = &params.assignment;
                let key = (
                    from.to_string(),
                    a.identity.action.clone(),
                    a.reservation.fence,
                );
                let told = self.seen.told.get(&key).copied().unwrap_or_default();
                let detail = match params.outcome {
                    Outcome::Completed if !told.completed => Some(format!(
                        "{from} settled {} (fence {}) as completed, but no answer to an execute of that fence it received said completed{}",
                        a.identity.action,
                        a.reservation.fence.0,
                        if told.other {
                            " (it was told otherwise)"
                        } else {
                            ""
                        }
                    )),
                    Outcome::OutcomeUnknown if told.completed && told.remembered => Some(format!(
                        "{from} settled {} (fence {}) as outcome_unknown, though an execute of that fence answered it completed",
                        a.identity.action, a.reservation.fence.0
                    )),
                    _ => None,
                };
                if let Some(detail) = detail {
                    self.violate(invariant::EVIDENCE, detail);
                }
            }
            _ => {}
        }
    }

    /// Call `id` was answered `resp` (recorded by the answering host).
    pub(super) fn seen_replied(&mut self, id: u64, caller: &str, req: &Request, resp: &Response) {
        let gone: Vec<FenceToken> = match (req, resp) {
            // Settled, now or before: the fence is no longer held.
            (Request::Settle { params }, Response::Settle { result: Ok(_) }) => {
                vec![params.assignment.reservation.fence]
            }
            (Request::Maintain { .. }, Response::Maintain { result: Ok(m) }) => {
                m.releases.iter().map(|r| r.fence).collect()
            }
            (
                Request::RouteGet { .. },
                Response::RouteGet {
                    result: Ok(Some(route)),
                },
            ) if !route.reserved => vec![route.assignment.reservation.fence],
            _ => Vec::new(),
        };
        if !gone.is_empty() {
            self.seen
                .release_answers
                .insert(id, (caller.to_string(), gone));
        }
        match (req, resp) {
            (Request::Execute { .. }, Response::Execute { execution }) => {
                self.seen.answers.insert(id, *execution);
            }
            (Request::Settle { params }, Response::Settle { result: Ok(s) }) if s.released => {
                let last = self.last_call;
                let fence = params.assignment.reservation.fence;
                self.seen.released_by_call.insert(fence, last);
                if params.outcome == Outcome::Cancelled {
                    self.seen.cancelled.insert(fence);
                }
            }
            (Request::Maintain { .. }, Response::Maintain { result: Ok(m) }) => {
                let last = self.last_call;
                for r in &m.releases {
                    self.seen.released_by_call.insert(r.fence, last);
                }
            }
            (
                Request::RouteGet { .. },
                Response::RouteGet {
                    result: Ok(Some(route)),
                },
            ) if route.reserved => {
                let a = &route.assignment;
                let fence = a.reservation.fence;
                if let Some(&mark) = self.seen.released_by_call.get(&fence)
                    && id > mark
                {
                    self.violate(
                        invariant::EVIDENCE,
                        format!(
                            "route_get (call {id}) answered {} reserved with fence {}, whose release was answered before the call was sent",
                            a.identity.action, fence.0
                        ),
                    );
                }
            }
            _ => {}
        }
    }

    /// The answer to call `id` reached its caller.
    pub(super) fn seen_delivered(&mut self, id: u64) {
        if let Some((host, fences)) = self.seen.release_answers.remove(&id) {
            for f in fences {
                self.seen.known_released.insert((host.clone(), f));
            }
        }
        let Some(execution) = self.seen.answers.remove(&id) else {
            return;
        };
        if let Some(key) = self.seen.executes.get(&id).cloned() {
            let told = self.seen.told.entry(key).or_default();
            if execution == Execution::Completed {
                told.completed = true;
                told.remembered = true;
            } else {
                told.other = true;
            }
        }
    }

    /// `hosts` crashed: what they were told and did not journal is gone.
    pub(super) fn seen_crashed(&mut self, hosts: &[String]) {
        for ((host, _, _), told) in self.seen.told.iter_mut() {
            if hosts.contains(host) {
                told.remembered = false;
            }
        }
    }

    /// A side effect caused by `execute` call `rpc`.
    pub(super) fn seen_ledger(&mut self, rpc: u64, action: &ActionId, fence: FenceToken) {
        if self.seen.cancelled.contains(&fence) {
            self.violate(
                invariant::EVIDENCE,
                format!(
                    "the execute of {action} (fence {}, call {rpc}) performed its side effect after a cancelled settlement released that fence",
                    fence.0
                ),
            );
        }
        if !self.seen.ledger_calls.insert(rpc) {
            self.violate(
                invariant::EVIDENCE,
                format!(
                    "the execute of {action} (fence {}, call {rpc}) performed its side effect twice",
                    fence.0
                ),
            );
        }
    }
}
