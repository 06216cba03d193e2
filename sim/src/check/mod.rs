//! Invariant checkers. They read trace records and nothing else, so the
//! same code checks a live run after every step and re-checks a trace file
//! afterwards (`connreg-sim check-trace`).
//!
//! This file holds the framework: the [`Checker`] state, the dispatch of
//! each record to the checks it concerns (with the short checks made right
//! at the record: a side effect's call, a reply's registry clock, a
//! maintenance's release count, a `route_get`'s tenant, a publication's
//! revision, a continuation page's revision), and the [`invariant`] table.
//! The other files:
//!
//! - `context`: where a violation broke (line, time, calls, actions,
//!   hosts), attached as it is found.
//! - `truth`: each action's route as first seen (`one_route_per_action`,
//!   `no_silent_failover` at the answers).
//! - `resolve`: what a resolve answer must agree with.
//! - `failover`: `dispatch_after_commit` and `no_silent_failover` at the
//!   replicas.
//! - `settlement`: `idempotent_settlement`.
//! - `truthful`: `settlement_truthful`, outcomes against the ledger and
//!   the cancel answers.
//! - `capacity`: the live reservations by the answers, compared with the
//!   store (`capacity_accounting`).
//! - `accounting`: the `capacity_accounting` checks at answers and
//!   snapshots.
//! - `snapshot`: the store's snapshot against what the answers said.
//! - `catalog`: the catalog model rebuilt from publications.
//! - `deferred`: checks that wait for the publication of their revision.
//! - `disclosure`: `no_cross_tenant_disclosure` in pages and conflicts.
//! - `pages`: `pages_list_all_once`, paged reads followed through their
//!   cursors.
//! - `eligible`: `route_eligibility`.
//! - `unavailable`: `no_spurious_unavailable`, the database fault windows.
//! - `orphan`: `no_orphan_reservation`, how actions ended.
//! - `leak`: `no_leaked_reservation`, reservations no caller will settle.
//! - `progress`: `lease_progress`, maintenance that finishes its work.
//! - `drain`: `maintenance_drains`, maintenance that drains in bounded
//!   calls.
//! - `publication`: `publication_progress`, publications that land, and
//!   the time faults excuse.
//! - `ends`: `reservations_end`, every reservation ends by the drain.
//! - `seen`: `evidence_consistent`, what callers and providers saw.
//! - `witness`: `lease_respected`, `monotonic_reads`, `commit_order` and
//!   `dispatch_by_holder`, what the trace proves of leases, reads, commit
//!   order and who holds a fence.
//! - `finish`: the end-of-run checks.
//! - `recheck`: re-checking a trace file.
//!
//! The invariants, each with the rules it protects (SIM-3):
//!
//! | invariant | rules | broken when |
//! |---|---|---|
//! | `one_route_per_action` | ROUTE-3, ROUTE-4, PIN-1, PIN-2, LEASE-3 | two routes are created for one action, answers disagree on an action's route, or a stored route changes |
//! | `no_silent_failover` | PIN-4, PIN-5 | a retry answers another destination, a side effect or dispatch or cancellation reaches another instance or replica than the route's |
//! | `dispatch_after_commit` | ROUTE-8 | a replica is dispatched an assignment no registry answered |
//! | `idempotent_settlement` | SETTLE-2, SETTLE-3, SETTLE-4 | a reservation is released twice, a settlement with a stale or altered assignment succeeds, a released reservation's recorded outcome changes (between snapshots, or from the outcome its answered release recorded), or a settlement answered `released: false` while the store still holds its reservation |
//! | `settlement_truthful` | PIN-7, SETTLE-5 | a settlement records `cancelled` for work in the ledger that no cancel stopped, or `completed` for work the ledger does not hold |
//! | `capacity_accounting` | ROUTE-7, SETTLE-3, REC-8 | a replica's active count or a scope's counter differs from the live reservations (by the store's rows, and by the answers), or exceeds its limit; the store frees a reservation no answer released; a maintenance answer miscounts its releases |
//! | `page_single_revision` | CAT-8, CAT-9 | a continuation page is read at another revision than its cursor's |
//! | `pages_list_all_once` | CAT-8 | a page lists a capability out of order or twice, or more entries than its limit; a continuation starts at or before the last capability of the page before; a paged read followed from its first page to its last at one revision (no filter) leaves out a capability its reader may see, or (internal readers) lists one it may not |
//! | `revision_by_publication` | CAT-1, CAT-3 | a revision appears that no publication made (one answered `unavailable`, a lost COMMIT reply, may have made it), or a publication skips one |
//! | `fence_unique` | ROUTE-7, SETTLE-2 | a fence is issued twice or held by two actions |
//! | `no_cross_tenant_disclosure` | ROUTE-4, CAT-5, CAT-7 | an answer carries another tenant's route, or a page lists what the reader may not call |
//! | `route_eligibility` | ROUTE-5, ROUTE-9, ROUTE-11, PIN-3 | a new route uses an ineligible binding chain, class, region, or (commit-ordered traces) a replica that is not ready or whose circuit is open; (commit-ordered traces) a pinned re-reservation goes to a replica that is offline, whose circuit is open or whose lease has ended |
//! | `circuit_closed_by_operator` | SETTLE-6 | an open circuit closes without an operator action |
//! | `circuit_follows_outcomes` | SETTLE-5 | (commit-ordered traces) a replica's stored circuit, open flag and consecutive-unknown count, differs from what its previous stored row and the settlements answered since make it under the run's circuit policy |
//! | `no_spurious_unavailable` | SIM-3 | a registry answers `unavailable` while no database fault is active or settling |
//! | `no_orphan_reservation` | ROUTE-8, SETTLE-1 | at the end, a reservation is held by an action every dispatcher ended |
//! | `no_leaked_reservation` | PIN-5, PIN-6 | after the heal, a reservation is held by no live action (a crashed dispatcher's, never reconciled) |
//! | `lease_progress` | LEASE-2 | a replica whose lease ended is not offline within `expect.offline_within_ms` (scenarios that set it) |
//! | `maintenance_drains` | LEASE-2 | a maintenance drain takes more than ceil(n / batch) + `MAINTENANCE_DRAIN_SLACK_CALLS` answered calls for the n replicas expired when it began, or (deterministic traces) a call handles fewer than `max` yet answers `more = true` |
//! | `publication_progress` | LOCK-4, CAT-3 | a publication is not committed within `expect.publish_within_ms` (default `PUBLISH_WITHIN_MS`) of its first attempt, not counting database fault windows, network faults between the operator and a registry host, and registry host crashes |
//! | `evidence_consistent` | PIN-5, PIN-7, SETTLE-1, EVID-4, EVID-5, EVID-7, EVID-8, EVID-9 | a host executes a fence after an answer it received showed it no longer held; a side effect starts after a `cancelled` settlement released its fence; one execute performs its side effect twice; a host settles `completed` with no `completed` execute answer for that fence, or `outcome_unknown` after one; `route_get` answers `reserved` with a fence whose release was answered before the read was sent |
//! | `reservations_end` | PIN-8, PIN-7 | once every dispatcher is done, a reservation is still held when the drain ends: the scenario's reservation hold, two maintenance intervals and a call timeout later |
//! | `liveness` | SIM-3 | a surviving dispatcher's action has not ended by the deadline after the heal |
//! | `lease_respected` | LEASE-1, LEASE-2, LEASE-4, EVID-1 | maintenance expires a replica whose lease, as its last applied heartbeat or registration set it, has not ended at the maintenance's clock, or (deterministic traces) answers `more = false` while a lease it should have ended remains |
//! | `monotonic_reads` | CAT-3, EVID-2 | a host is shown a first page at a revision below one it already received |
//! | `commit_order` | LOCK-1, EVID-3 | committing answers appear out of the store's commit order: new fences decrease along a deterministic trace, or commit sequences along a commit-ordered one |
//! | `dispatch_by_holder` | ROUTE-8, EVID-6 | a host executes or cancels a fence no answer it received carried |
//! | `expectation` | SIM-2 | a counter the scenario expects is out of bounds (a fault that never fired) |
//! | `oracle_agrees` | SIM-4, ROUTE-10, LOCK-5 | (PostgreSQL runs, `sim/src/oracle.rs`) an answer differs from the in-memory reference's, replayed in commit order at its recorded clock: a ranking (ROUTE-10) or a commit order (LOCK-5) the fleet's backend got wrong |
//! | `run` | SIM-1, SIM-5 | the run cannot go on (a trace that does not replay, a setup that fails); every failing run prints its reproduction command |

mod accounting;
mod capacity;
mod catalog;
mod circuit;
mod context;
mod deferred;
mod disclosure;
mod drain;
mod eligible;
mod ends;
mod failover;
mod finish;
mod leak;
mod orphan;
mod pages;
mod progress;
mod publication;
mod recheck;
mod resolve;
mod seen;
mod settlement;
mod snapshot;
mod truth;
mod truthful;
mod unavailable;
mod witness;

use std::collections::{BTreeMap, BTreeSet};

use connreg::{
    ActionId, FenceToken, Outcome, ReleaseReason, ReplicaId, ReplicaSpec, ReplicaState, Revision,
    RouteAssignment, RouteRecord, ScopeId,
};

use capacity::Reservations;
pub use catalog::CatalogModel;
use deferred::Deferred;
use orphan::ActionFates;
pub use recheck::{Recheck, recheck};
use truth::Truth;
use unavailable::DbFaultWindows;

use crate::counters::Counters;
use crate::scenario::{Expect, replica_host};
use crate::trace::{Event, FaultEvent, Record, ReplicaRow, ScopeRow, Violation};
use crate::wire::{Execution, Request, Response};

/// The invariants: (name, rules).
pub mod invariant {
    /// See the module table.
    pub const ONE_ROUTE: (&str, &str) = (
        "one_route_per_action",
        "ROUTE-3 ROUTE-4 PIN-1 PIN-2 LEASE-3",
    );
    /// See the module table.
    pub const NO_FAILOVER: (&str, &str) = ("no_silent_failover", "PIN-4 PIN-5");
    /// See the module table.
    pub const AFTER_COMMIT: (&str, &str) = ("dispatch_after_commit", "ROUTE-8");
    /// See the module table.
    pub const IDEMPOTENT: (&str, &str) = ("idempotent_settlement", "SETTLE-2 SETTLE-3 SETTLE-4");
    /// See the module table.
    pub const TRUTHFUL: (&str, &str) = ("settlement_truthful", "PIN-7 SETTLE-5");
    /// See the module table.
    pub const CAPACITY: (&str, &str) = ("capacity_accounting", "ROUTE-7 SETTLE-3 REC-8");
    /// See the module table.
    pub const ONE_REVISION: (&str, &str) = ("page_single_revision", "CAT-8 CAT-9");
    /// See the module table.
    pub const PAGES: (&str, &str) = ("pages_list_all_once", "CAT-8");
    /// See the module table.
    pub const REVISION: (&str, &str) = ("revision_by_publication", "CAT-1 CAT-3");
    /// See the module table.
    pub const FENCE: (&str, &str) = ("fence_unique", "ROUTE-7 SETTLE-2");
    /// See the module table.
    pub const TENANT: (&str, &str) = ("no_cross_tenant_disclosure", "ROUTE-4 CAT-5 CAT-7");
    /// See the module table.
    pub const ELIGIBLE: (&str, &str) = ("route_eligibility", "ROUTE-5 ROUTE-9 ROUTE-11 PIN-3");
    /// See the module table.
    pub const CIRCUIT: (&str, &str) = ("circuit_closed_by_operator", "SETTLE-6");
    /// A replica's circuit follows its answered settlements.
    pub const CIRCUIT_COUNTS: (&str, &str) = ("circuit_follows_outcomes", "SETTLE-5");
    /// See the module table.
    pub const SPURIOUS_UNAVAILABLE: (&str, &str) = ("no_spurious_unavailable", "SIM-3");
    /// See the module table.
    pub const ORPHAN: (&str, &str) = ("no_orphan_reservation", "ROUTE-8 SETTLE-1");
    /// See the module table.
    pub const LEAK: (&str, &str) = ("no_leaked_reservation", "PIN-7");
    /// See the module table.
    pub const LIVENESS: (&str, &str) = ("liveness", "SIM-3");
    /// See the module table.
    pub const LEASE_PROGRESS: (&str, &str) = ("lease_progress", "LEASE-2");
    /// See the module table.
    pub const MAINTENANCE_DRAINS: (&str, &str) = ("maintenance_drains", "LEASE-2");
    /// See the module table.
    pub const PUBLICATION_PROGRESS: (&str, &str) = ("publication_progress", "LOCK-4 CAT-3");
    /// See the module table.
    pub const RESERVATIONS_END: (&str, &str) = ("reservations_end", "PIN-8 PIN-7");
    /// See the module table.
    pub const EVIDENCE: (&str, &str) = (
        "evidence_consistent",
        "PIN-5 PIN-7 SETTLE-1 EVID-4 EVID-5 EVID-7 EVID-8 EVID-9",
    );
    /// See the module table.
    pub const LEASE: (&str, &str) = ("lease_respected", "LEASE-1 LEASE-2 LEASE-4 EVID-1");
    /// See the module table.
    pub const MONOTONIC_READS: (&str, &str) = ("monotonic_reads", "CAT-3 EVID-2");
    /// See the module table.
    pub const COMMIT_ORDER: (&str, &str) = ("commit_order", "LOCK-1 EVID-3");
    /// See the module table.
    pub const HOLDER: (&str, &str) = ("dispatch_by_holder", "ROUTE-8 EVID-6");
    /// See the module table.
    pub const EXPECTATION: (&str, &str) = ("expectation", "SIM-2");
    /// The harness itself failed (a malformed trace, a step budget).
    pub const RUN: (&str, &str) = ("run", "SIM-1");
}

/// The checkers' state: everything learnt from the trace so far.
#[derive(Debug, Default)]
pub struct Checker {
    /// The trace is byte-deterministic (the in-memory backend).
    deterministic: bool,
    /// The trace is in the store's commit order (`start.deterministic` or
    /// `start.commit_ordered`): the order-sensitive checks run.
    ordered: bool,
    expect: Expect,
    counters: Counters,
    violations: u64,
    found: Vec<Violation>,
    calls: BTreeMap<u64, (String, Request)>,
    truth: BTreeMap<ActionId, Truth>,
    issued: BTreeMap<FenceToken, ActionId>,
    /// Fences an `existing` answer carried first, their creating answer
    /// not yet seen (a lost COMMIT reply, or on PostgreSQL a lock-free
    /// read recorded before the answer of the commit it showed).
    issued_by_existing: BTreeSet<FenceToken>,
    latest: BTreeMap<ActionId, RouteAssignment>,
    answered: BTreeSet<FenceToken>,
    released: BTreeSet<FenceToken>,
    /// The outcome each answered release recorded, by fence (commit-ordered
    /// traces; SETTLE-4).
    release_outcomes: BTreeMap<FenceToken, Outcome>,
    /// Settlements answered `released: false` since the last snapshot
    /// (action, fence), judged by the next one.
    not_released: Vec<(ActionId, FenceToken)>,
    specs: BTreeMap<ReplicaId, ReplicaSpec>,
    store_replicas: BTreeMap<ReplicaId, ReplicaRow>,
    /// The stored routes, counted (`capacity_accounting`, `fence_unique`).
    store_counts: accounting::StoreCounts,
    /// The replicas not offline, by lease end (`lease_progress`).
    lease_progress: progress::LeaseProgress,
    /// The drain in progress (`maintenance_drains`).
    drains: drain::Drains,
    /// The publications in flight (`publication_progress`).
    publication_progress: publication::PublicationProgress,
    store_scopes: BTreeMap<ScopeId, ScopeRow>,
    store_routes: BTreeMap<ActionId, RouteRecord>,
    replica_model: BTreeMap<ReplicaId, (ReplicaState, bool)>,
    operator_closed: BTreeSet<ReplicaId>,
    /// The run's circuit policy (from the `start` line; SETTLE-5).
    circuit_policy: Option<connreg::CircuitPolicy>,
    /// Each replica's circuit as its last stored row and the settlements
    /// answered since make it (`circuit_follows_outcomes`).
    circuits: BTreeMap<ReplicaId, circuit::Track>,
    catalogs: BTreeMap<Revision, CatalogModel>,
    max_published: Revision,
    /// Publications answered `unavailable` and not yet settled by two
    /// snapshots, in answer order: each may have committed (a lost COMMIT reply), at
    /// most `snapshot::PUBLICATIONS_UNKNOWN_MAX`.
    publications_unknown: Vec<connreg::Publication>,
    /// How many of `publications_unknown`, from the front, were already
    /// kept at the last snapshot (dropped at the next one).
    publications_unknown_aged: usize,
    cursors: BTreeMap<String, Revision>,
    /// Paged reads followed through their cursors (`pages_list_all_once`),
    /// at most `pages::PAGED_READS_MAX`.
    paged: BTreeMap<String, pages::PagedRead>,
    open_actions: BTreeMap<(String, u64), ActionId>,
    deadline_ms: Option<u64>,
    /// When the drain must have ended every reservation (`reservations_end`).
    drain_until_ms: Option<u64>,
    /// Resolve calls sent and not yet failed at their caller.
    resolve_calls: BTreeSet<u64>,
    /// What hosts were told and providers did (`evidence_consistent`).
    seen: seen::Seen,
    /// Leases, reads, commit order and fences as the hosts saw them.
    witness: witness::Witness,
    deferred: Vec<Deferred>,
    db_faults: DbFaultWindows,
    fates: ActionFates,
    /// Actions a resolve of which was answered `unavailable`: it may have
    /// committed all the same (a lost COMMIT reply), so a reservation no
    /// answer carried is theirs to learn from the store.
    commit_unknown: BTreeSet<ActionId>,
    /// Fences a `created` or `reserved` answer carried.
    issued_by_answer: BTreeSet<FenceToken>,
    /// The highest call ID sent so far.
    last_call: u64,
    /// The reservations the answers say are live.
    reservations: Reservations,
    /// Actions (by ID) a dispatcher's crash left open.
    abandoned: BTreeSet<ActionId>,
    /// Actions (by ID) a restarted dispatcher reconciled.
    reconciled: BTreeSet<ActionId>,
    /// Calls answered so far, by ID: whether a fault dropped the answer.
    replied: BTreeMap<u64, bool>,
    /// Calls whose caller received the answer.
    delivered: BTreeSet<u64>,
    /// Calls whose caller got no answer.
    failed: BTreeSet<u64>,
    /// `execute` calls: (called host, action, fence).
    executes: BTreeMap<u64, (String, ActionId, FenceToken)>,
    /// Side effects and stopped executions (`settlement_truthful`).
    evidence: truthful::Evidence,
    /// The registry clock's offset from `CLOCK_START_MS + t` (clock jumps).
    clock_offset_ms: i64,
    /// The trace line of the record being checked (1-based).
    line: u64,
    /// The simulated time of the record being checked.
    now_ms: u64,
    /// Each action's first line (`action_start`).
    action_lines: BTreeMap<ActionId, u64>,
    /// The line of the first answer that carried each action's route.
    route_lines: BTreeMap<ActionId, u64>,
    /// The action of each call that names one, by call ID.
    call_action: BTreeMap<u64, ActionId>,
}

impl Checker {
    /// A checker that has seen nothing.
    pub fn new() -> Checker {
        Checker::default()
    }

    /// The counters so far.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Violations found so far.
    pub fn violations(&self) -> u64 {
        self.violations
    }

    /// Takes the violations found since the last call.
    pub fn take_found(&mut self) -> Vec<Violation> {
        std::mem::take(&mut self.found)
    }

    fn violate(&mut self, (invariant, rules): (&str, &str), detail: String) {
        self.violations += 1;
        self.found.push(Violation {
            invariant: invariant.to_string(),
            rules: rules.to_string(),
            detail,
            at_ms: self.now_ms,
            ..Violation::default()
        });
    }

    /// Reports a harness failure as a violation.
    pub fn run_failure(&mut self, detail: String) {
        self.violate(invariant::RUN, detail);
    }

    /// Checks one record, the trace's next line. Verdict records
    /// (`violation`, `check`, `end`) are the checkers' own output and are
    /// skipped.
    pub fn observe(&mut self, record: &Record) {
        self.observe_at(self.line + 1, record);
    }

    /// Checks one record, found at trace line `line` (1-based); the
    /// violations it causes point at that line.
    pub fn observe_at(&mut self, line: u64, record: &Record) {
        self.line = line;
        self.now_ms = record.t;
        let before = self.found.len();
        match &record.event {
            Event::ActionStart { action, .. } => {
                self.action_lines.entry(action.clone()).or_insert(line);
            }
            Event::Rpc { id, req, .. } => {
                if let Some(action) = req.action() {
                    self.call_action.insert(*id, action.clone());
                }
            }
            _ => {}
        }
        self.publication_progress.excuses.advance(record.t);
        self.observe_event(record);
        self.check_publications_overdue(record.t);
        if self.found.len() > before {
            let event = context::of_event(&record.event, &self.call_action);
            let mut found = std::mem::take(&mut self.found);
            for v in &mut found[before..] {
                context::annotate(v, Some(line), &event, &self.action_lines, &self.route_lines);
            }
            self.found = found;
        }
    }

    fn observe_event(&mut self, record: &Record) {
        let t = record.t;
        match &record.event {
            Event::Start(info) => {
                self.deterministic = info.deterministic;
                self.ordered = info.deterministic || info.commit_ordered;
                self.expect = info.expect.clone();
                self.circuit_policy = info.circuit;
            }
            Event::Setup {
                publication,
                revision,
                replicas,
            } => {
                // A large fleet is set up in several publications.
                let base = self
                    .catalogs
                    .get(&self.max_published)
                    .cloned()
                    .unwrap_or_default();
                self.catalogs.insert(*revision, base.apply(publication));
                self.max_published = *revision;
                for r in replicas {
                    self.drains.capacity_max = self.drains.capacity_max.max(r.capacity);
                    self.specs.insert(r.id.clone(), r.clone());
                }
            }
            Event::Rpc { id, from, to, req } => {
                self.last_call = self.last_call.max(*id);
                if let Request::Resolve { .. } = req {
                    self.resolve_calls.insert(*id);
                }
                if let Request::Execute { assignment } = req {
                    let key = (
                        to.clone(),
                        assignment.identity.action.clone(),
                        assignment.reservation.fence,
                    );
                    self.executes.insert(*id, key);
                }
                match req {
                    Request::Publish { publication } => self.publication_sent(from, publication, t),
                    Request::Maintain { .. } => self.drains.sent(*id),
                    _ => {}
                }
                self.on_request(from, to, req);
                self.seen_sent(*id, from, req);
                self.witness_sent(*id, from, req);
                self.calls.insert(*id, (from.clone(), req.clone()));
            }
            Event::Reply {
                id,
                from,
                resp,
                lost,
                clock,
                released,
                commit,
                ..
            } => {
                let Some((caller, req)) = self.calls.remove(id) else {
                    self.violate(
                        invariant::RUN,
                        format!("reply {id} from {from} to no request"),
                    );
                    return;
                };
                self.replied.insert(*id, *lost);
                if let Some(clock) = clock {
                    let expected = (crate::world::CLOCK_START_MS + t)
                        .saturating_add_signed(self.clock_offset_ms);
                    if *clock != expected {
                        self.violate(
                            invariant::RUN,
                            format!("reply {id} from {from} decided at registry clock {clock}, but the clock read {expected} at {t} ms"),
                        );
                    }
                }
                self.check_released(&req, resp, released.as_deref());
                self.seen_replied(*id, &caller, &req, resp);
                self.witness_replied(*id, &caller, &req, resp, *clock, *commit);
                self.on_reply(&req, resp, *lost, t);
                self.follow_fates(*id, &req, resp);
                match (&req, resp) {
                    (Request::Publish { publication }, Response::Publish { result }) => self
                        .publication_answered(
                            &caller,
                            publication,
                            result.as_ref().err().map(|e| e.kind.as_str()),
                            t,
                        ),
                    (Request::Maintain { params }, Response::Maintain { result: Ok(m) }) => {
                        self.drain_answered(params.max, m, *lost, t)
                    }
                    (Request::Maintain { .. }, _) => self.drains.interrupted(),
                    _ => {}
                }
            }
            Event::Delivered { id } => {
                let detail = match self.replied.get(id) {
                    None if self.deterministic => {
                        Some(format!("call {id} delivered an answer no host recorded"))
                    }
                    Some(true) => Some(format!(
                        "the answer to call {id} is marked lost, yet its caller received it"
                    )),
                    _ if self.failed.contains(id) => Some(format!(
                        "call {id} failed at its caller, yet its caller received the answer"
                    )),
                    _ => None,
                };
                if let Some(detail) = detail {
                    self.violate(invariant::RUN, detail);
                }
                self.delivered.insert(*id);
                self.drains.ended(*id, false);
                self.seen_delivered(*id);
                self.witness_delivered(*id);
            }
            Event::RpcFailed { id, .. } => {
                self.counters.rpc_failures += 1;
                if self.delivered.contains(id) {
                    self.violate(
                        invariant::RUN,
                        format!("call {id} delivered its answer, yet its caller reports no answer"),
                    );
                }
                self.failed.insert(*id);
                self.drains.ended(*id, true);
                if self.resolve_calls.remove(id)
                    && let Some(action) = self.call_action.get(id)
                {
                    self.fates.resolve_failed(&action.clone());
                }
            }
            Event::Ledger {
                rpc,
                action,
                tenant,
                instance,
                replica,
                account,
                fence,
            } => {
                self.counters.executions += 1;
                self.evidence.ran(action, *fence, *rpc);
                self.seen_ledger(*rpc, action, *fence);
                let caused = self.executes.get(rpc).is_some_and(|(to, a, f)| {
                    *to == replica_host(replica.as_str()) && a == action && f == fence
                });
                if !caused {
                    self.violate(
                        invariant::NO_FAILOVER,
                        format!("side effect of {action} (fence {}) on {replica} names call {rpc}, which did not dispatch it there", fence.0),
                    );
                }
                match self.truth.get(action) {
                    None => self.violate(
                        invariant::NO_FAILOVER,
                        format!("side effect of {action} on {replica} with no route"),
                    ),
                    Some(truth) => {
                        let d = &truth.destination;
                        if &d.instance != instance
                            || &d.replica != replica
                            || account != instance
                            || &truth.identity.tenant != tenant
                        {
                            let detail = format!(
                                "side effect of {action} (fence {}) ran on instance {instance}, replica {replica}, account {account}; its route is instance {}, replica {}",
                                fence.0, d.instance, d.replica
                            );
                            self.violate(invariant::NO_FAILOVER, detail);
                        }
                    }
                }
            }
            Event::ActionStart {
                dispatcher,
                n,
                action,
                ..
            } => {
                self.counters.actions_started += 1;
                self.open_actions
                    .insert((dispatcher.clone(), *n), action.clone());
            }
            Event::ActionEnd {
                dispatcher,
                n,
                action,
                result,
            } => {
                self.counters.actions_ended += 1;
                match result.as_str() {
                    "completed" => self.counters.actions_completed += 1,
                    "outcome_unknown" => self.counters.actions_outcome_unknown += 1,
                    "cancelled" => self.counters.actions_cancelled += 1,
                    _ => self.counters.actions_failed += 1,
                }
                self.open_actions.remove(&(dispatcher.clone(), *n));
                self.fates.ended(action, result);
                if let Some(deadline) = self.deadline_ms
                    && t > deadline
                {
                    self.violate(
                        invariant::LIVENESS,
                        format!("{dispatcher} action {action} ended at {t} ms, after the deadline {deadline} ms"),
                    );
                }
            }
            Event::Reconciled { action, .. } => {
                self.counters.actions_reconciled += 1;
                self.reconciled.insert(action.clone());
            }
            Event::Fault(f) => self.on_fault(f, t),
            Event::Heal { deadline_ms } => self.deadline_ms = Some(*deadline_ms),
            Event::Drain { until_ms } => {
                // The workload's end-of-run checks judge the store as the
                // workload left it; the drain only lets holds end.
                self.finish_workload();
                self.drain_until_ms = Some(*until_ms);
            }
            Event::Snapshot(s) => self.on_snapshot(s),
            Event::Violation(_) | Event::Check { .. } | Event::End(_) => {}
        }
    }

    /// End-of-run checks: orphaned reservations, liveness and
    /// expectations.
    pub fn finish(&mut self) {
        if self.drain_until_ms.is_none() {
            self.finish_workload();
        }
        let before = self.found.len();
        self.check_reservations_end();
        self.check_expectations();
        self.annotate_since(before);
    }

    /// The end-of-run checks of the workload: orphaned and leaked
    /// reservations, liveness and expectations.
    fn finish_workload(&mut self) {
        let before = self.found.len();
        self.finish_checks();
        self.annotate_since(before);
    }

    fn annotate_since(&mut self, before: usize) {
        let mut found = std::mem::take(&mut self.found);
        for v in &mut found[before..] {
            let none = context::EventContext::default();
            context::annotate(v, None, &none, &self.action_lines, &self.route_lines);
        }
        self.found = found;
    }

    fn on_reply(&mut self, req: &Request, resp: &Response, lost: bool, t: u64) {
        if lost {
            self.counters.answers_lost += 1;
        }
        if resp.error_kind() == Some("unavailable") {
            if let Some(detail) = self.db_faults.check(req.op(), t) {
                self.violate(invariant::SPURIOUS_UNAVAILABLE, detail);
            }
            match req {
                Request::Resolve { request } => {
                    self.commit_unknown.insert(request.action.clone());
                    self.reservations.resolve_unknown(&request.action);
                }
                Request::Settle { params } => {
                    self.circuit_unknown(&params.assignment.destination.replica);
                    self.reservations
                        .settle_unknown(params.assignment.reservation.fence)
                }
                Request::Maintain { .. } => self.reservations.maintain_unknown(),
                Request::Publish { publication } => self.publication_unknown(publication),
                _ => {}
            }
        }
        if let Some(kind) = resp.error_kind() {
            match kind {
                "conflict" => self.counters.conflict += 1,
                "no_eligible_binding" => self.counters.no_eligible_binding += 1,
                "no_capacity" => self.counters.no_capacity += 1,
                "replica_unavailable" => self.counters.replica_unavailable += 1,
                "fence_lost" => self.counters.fence_lost += 1,
                "stale_cursor" => self.counters.stale_cursor += 1,
                "unavailable" => self.counters.unavailable += 1,
                _ => {}
            }
        }
        match (req, resp) {
            (Request::Resolve { request }, Response::Resolve { result }) => match result {
                Ok(resolved) => self.on_resolved(request, resolved, lost),
                Err(e) if e.kind == "conflict" => self.on_conflict(request, &e.message),
                Err(_) => {}
            },
            (
                Request::RouteGet { tenant, action },
                Response::RouteGet {
                    result: Ok(Some(r)),
                },
            ) => {
                let a = &r.assignment;
                if &a.identity.tenant != tenant {
                    self.violate(
                        invariant::TENANT,
                        format!(
                            "route_get of {action} by {tenant} answered {}'s route",
                            a.identity.tenant
                        ),
                    );
                } else {
                    self.learn_truth(a, false, "route_get");
                }
            }
            (Request::Settle { params }, Response::Settle { result: Ok(s) }) => {
                self.circuit_settled(params, s.released);
                self.on_settled(params, s)
            }
            (Request::Register { .. }, Response::Register { result: Ok(r) })
            | (Request::Drain { .. }, Response::Drain { result: Ok(r) }) => {
                if matches!(req, Request::Register { .. }) {
                    self.counters.registrations += 1;
                } else {
                    self.counters.drains += 1;
                }
                self.replica_model
                    .insert(r.spec.id.clone(), (r.state, r.circuit.open));
                self.circuit_answered(&r.spec.id, r.circuit);
            }
            (Request::Heartbeat { .. }, Response::Heartbeat { result: Ok(h) }) => match h {
                connreg::HeartbeatOutcome::Applied => self.counters.heartbeats += 1,
                connreg::HeartbeatOutcome::Ignored => self.counters.heartbeats_ignored += 1,
            },
            (Request::Maintain { .. }, Response::Maintain { result: Ok(m) }) => {
                if !m.more {
                    self.lease_progress.none_left(self.registry_now());
                }
                self.counters.lease_expired += u64::from(m.released);
                self.counters.replicas_expired += m.expired.len() as u64;
                // PIN-8: reservations past their hold, on any replica.
                let holds: Vec<FenceToken> = m
                    .releases
                    .iter()
                    .filter(|r| r.reason == ReleaseReason::HoldExpired)
                    .map(|r| r.fence)
                    .collect();
                self.counters.holds_expired += holds.len() as u64;
                for f in &holds {
                    self.reservations.settled(*f);
                }
                let count = self.reservations.maintained(&m.expired);
                if self.ordered {
                    for r in &m.releases {
                        self.release_outcomes
                            .entry(r.fence)
                            .or_insert(Outcome::LeaseExpired);
                    }
                    self.released.extend(holds.iter().copied());
                    let reported = u64::from(m.released).saturating_sub(holds.len() as u64);
                    if reported < count.min || reported > count.max {
                        let expired: Vec<&str> = m.expired.iter().map(|r| r.as_str()).collect();
                        let detail = format!(
                            "lease maintenance expired [{}] and reports {reported} reservations released, but the answers leave {} live on them",
                            expired.join(", "),
                            count.fences.len()
                        );
                        self.violate(invariant::CAPACITY, detail);
                    }
                    self.released.extend(count.fences);
                }
                for r in &m.expired {
                    let circuit = self.replica_model.get(r).map(|m| m.1).unwrap_or(false);
                    self.replica_model
                        .insert(r.clone(), (ReplicaState::Offline, circuit));
                    if !self.ordered {
                        // A settlement racing this batch may be recorded
                        // after it yet have committed before it; the next
                        // snapshot tells which released what.
                        continue;
                    }
                    let fences: Vec<FenceToken> = self
                        .store_routes
                        .values()
                        .filter(|x| x.reserved && &x.assignment.destination.replica == r)
                        .map(|x| x.assignment.reservation.fence)
                        .collect();
                    self.released.extend(fences);
                }
            }
            (Request::CircuitClose { .. }, Response::CircuitClose { result: Ok(entry) }) => {
                self.counters.circuits_closed += 1;
                self.operator_closed.insert(entry.replica.clone());
                self.circuit_unknown(&entry.replica);
                if let Some(m) = self.replica_model.get_mut(&entry.replica) {
                    m.1 = false;
                }
            }
            (Request::Publish { publication }, Response::Publish { result: Ok(rev) }) => {
                self.on_published(publication, *rev)
            }
            (Request::Page { query }, Response::Page { result: Ok(page) }) => {
                self.counters.pages += 1;
                if let Some(cursor) = &query.cursor {
                    self.counters.page_continuations += 1;
                    if let Some(at) = self.cursors.get(cursor).copied()
                        && at != page.revision
                    {
                        self.violate(
                            invariant::ONE_REVISION,
                            format!(
                                "a continuation of a page read at revision {} returned entries at revision {} without StaleCursor",
                                at.0, page.revision.0
                            ),
                        );
                    }
                }
                let listing = self.follow_pages(query, page);
                if self.awaits_publication(page.revision) {
                    self.deferred
                        .push(Deferred::Page(query.reader.clone(), page.clone(), listing));
                } else {
                    self.check_page(&query.reader, page, listing.as_ref());
                }
                if let Some(next) = &page.next {
                    self.cursors.insert(next.clone(), page.revision);
                }
            }
            (Request::Execute { .. }, Response::Execute { execution })
                if *execution == Execution::Misdirected =>
            {
                self.counters.misdirected += 1;
            }
            (Request::Cancel { action, fence }, Response::Cancel { running: true }) => {
                self.counters.cancels += 1;
                self.evidence.stopped(action, *fence);
            }
            _ => {}
        }
    }

    fn on_fault(&mut self, f: &FaultEvent, t: u64) {
        self.db_faults.on_fault(f, t);
        self.publication_progress.excuses.on_fault(f, t);
        match f {
            FaultEvent::Crash { hosts } => {
                self.counters.crashes += hosts.len() as u64;
                self.seen_crashed(hosts);
                for host in hosts {
                    let gone: Vec<(String, u64)> = self
                        .open_actions
                        .keys()
                        .filter(|(d, _)| d == host)
                        .cloned()
                        .collect();
                    for key in gone {
                        if let Some(action) = self.open_actions.remove(&key) {
                            self.fates.abandoned(&action);
                            self.abandoned.insert(action);
                        }
                        self.counters.actions_abandoned += 1;
                    }
                }
            }
            FaultEvent::Restart { hosts } => self.counters.restarts += hosts.len() as u64,
            FaultEvent::Partition { .. } => self.counters.partitions += 1,
            FaultEvent::Hold { .. } => self.counters.holds += 1,
            FaultEvent::Latency { .. } => self.counters.latency_spikes += 1,
            FaultEvent::Loss { .. } => self.counters.loss_windows += 1,
            FaultEvent::ClockJump { clock, .. } => {
                self.counters.clock_jumps += 1;
                self.clock_offset_ms = i64::try_from(clock.0).unwrap_or(i64::MAX)
                    - i64::try_from(crate::world::CLOCK_START_MS + t).unwrap_or(i64::MAX);
            }
            FaultEvent::DbCut { .. } => self.counters.db_cuts += 1,
            FaultEvent::DbStall { .. } => self.counters.db_stalls += 1,
            FaultEvent::DbTerminate { .. } => self.counters.db_terminates += 1,
            FaultEvent::DbRestart => self.counters.db_restarts += 1,
            FaultEvent::DbFailover { .. } => self.counters.db_failovers += 1,
            FaultEvent::DbStandbyDetached => {}
            FaultEvent::ZoneSilence { .. } => self.counters.zone_silences += 1,
            FaultEvent::GroupCrash { replicas, .. } => {
                self.counters.group_crashes += replicas.len() as u64
            }
            FaultEvent::GroupDrain { replicas, .. } => {
                self.counters.group_drains += replicas.len() as u64
            }
            FaultEvent::ZoneSilenceEnd { .. }
            | FaultEvent::GroupRestart { .. }
            | FaultEvent::DbFaultEnd { .. }
            | FaultEvent::Repair { .. }
            | FaultEvent::Release { .. }
            | FaultEvent::LatencyRestore { .. }
            | FaultEvent::LossEnd
            | FaultEvent::LoseAnswers { .. }
            | FaultEvent::LoseAnswersEnd => {}
        }
    }
}
