//! Invariant checkers. They read trace records and nothing else, so the
//! same code checks a live run after every step and re-checks a trace file
//! afterwards (`connreg-sim check-trace`).
//!
//! - `context`: where a violation broke (line, time, calls, actions,
//!   hosts), attached as it is found.
//! - `capacity`: the live reservations by the answers, compared with the
//!   store (`capacity_accounting`).
//! - `catalog`: the catalog model rebuilt from publications.
//! - `unavailable`: `no_spurious_unavailable`, the database fault windows.
//! - `orphan`: `no_orphan_reservation`, how actions ended.
//! - `leak`: `no_leaked_reservation`, reservations no caller will settle.
//!
//! The other invariants still live here, over the shared state; they move
//! to a file each as they are changed.
//!
//! The invariants, each with the rules it protects (SIM-3):
//!
//! | invariant | rules | broken when |
//! |---|---|---|
//! | `one_route_per_action` | ROUTE-3, ROUTE-4, PIN-1, PIN-2, LEASE-3 | two routes are created for one action, answers disagree on an action's route, or a stored route changes |
//! | `no_silent_failover` | PIN-4, PIN-5 | a retry answers another destination, a side effect or dispatch or cancellation reaches another instance or replica than the route's |
//! | `dispatch_after_commit` | ROUTE-8 | a replica is dispatched an assignment no registry answered |
//! | `idempotent_settlement` | SETTLE-2, SETTLE-4 | a reservation is released twice, or a settlement with a stale or altered assignment succeeds |
//! | `capacity_accounting` | ROUTE-7, SETTLE-3, REC-8 | a replica's active count or a scope's counter differs from the live reservations (by the store's rows, and by the answers), or exceeds its limit; the store frees a reservation no answer released; a maintenance answer miscounts its releases |
//! | `page_single_revision` | CAT-8, CAT-9 | a continuation page is read at another revision than its cursor's |
//! | `revision_by_publication` | CAT-1, CAT-3 | a revision appears that no publication made, or a publication skips one |
//! | `fence_unique` | ROUTE-7, SETTLE-2 | a fence is issued twice or held by two actions |
//! | `no_cross_tenant_disclosure` | ROUTE-4, CAT-5, CAT-7 | an answer carries another tenant's route, or a page lists what the reader may not call |
//! | `route_eligibility` | ROUTE-5, ROUTE-9, ROUTE-11 | a new route uses an ineligible binding chain, class, region, or (commit-ordered traces) a replica that is not ready or whose circuit is open |
//! | `circuit_closed_by_operator` | SETTLE-6 | an open circuit closes without an operator action |
//! | `no_spurious_unavailable` | SIM-3 | a registry answers `unavailable` while no database fault is active or settling |
//! | `no_orphan_reservation` | ROUTE-8, SETTLE-1 | at the end, a reservation is held by an action every dispatcher ended |
//! | `no_leaked_reservation` | PIN-5, PIN-6 | after the heal, a reservation is held by no live action (a crashed dispatcher's, never reconciled) |
//! | `liveness` | SIM-3 | a surviving dispatcher's action has not ended by the deadline after the heal |
//! | `expectation` | SIM-2 | a counter the scenario expects is out of bounds (a fault that never fired) |

mod capacity;
mod catalog;
mod context;
mod leak;
mod orphan;
mod unavailable;

use std::collections::{BTreeMap, BTreeSet};

use connreg::catalog::{CatalogPage, Reader};
use connreg::{
    ActionId, CrossRegion, FenceToken, Outcome, PolicySnapshot, ReplicaId, ReplicaSpec,
    ReplicaState, ResolveKind, Resolved, Revision, RouteAssignment, RouteDestination,
    RouteIdentity, RouteRecord, RouteRequest, ScopeId, SettleParams, Settled,
};

use capacity::Reservations;
pub use catalog::CatalogModel;
use orphan::ActionFates;
use unavailable::DbFaultWindows;

use crate::counters::Counters;
use crate::scenario::{Expect, replica_host};
use crate::trace::{Event, FaultEvent, Record, ReplicaRow, ScopeRow, Snapshot, Violation};
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
    pub const IDEMPOTENT: (&str, &str) = ("idempotent_settlement", "SETTLE-2 SETTLE-4");
    /// See the module table.
    pub const CAPACITY: (&str, &str) = ("capacity_accounting", "ROUTE-7 SETTLE-3 REC-8");
    /// See the module table.
    pub const ONE_REVISION: (&str, &str) = ("page_single_revision", "CAT-8 CAT-9");
    /// See the module table.
    pub const REVISION: (&str, &str) = ("revision_by_publication", "CAT-1 CAT-3");
    /// See the module table.
    pub const FENCE: (&str, &str) = ("fence_unique", "ROUTE-7 SETTLE-2");
    /// See the module table.
    pub const TENANT: (&str, &str) = ("no_cross_tenant_disclosure", "ROUTE-4 CAT-5 CAT-7");
    /// See the module table.
    pub const ELIGIBLE: (&str, &str) = ("route_eligibility", "ROUTE-5 ROUTE-9 ROUTE-11");
    /// See the module table.
    pub const CIRCUIT: (&str, &str) = ("circuit_closed_by_operator", "SETTLE-6");
    /// See the module table.
    pub const SPURIOUS_UNAVAILABLE: (&str, &str) = ("no_spurious_unavailable", "SIM-3");
    /// See the module table.
    pub const ORPHAN: (&str, &str) = ("no_orphan_reservation", "ROUTE-8 SETTLE-1");
    /// See the module table.
    pub const LEAK: (&str, &str) = ("no_leaked_reservation", "PIN-7");
    /// See the module table.
    pub const LIVENESS: (&str, &str) = ("liveness", "SIM-3");
    /// See the module table.
    pub const EXPECTATION: (&str, &str) = ("expectation", "SIM-2");
    /// The harness itself failed (a malformed trace, a step budget).
    pub const RUN: (&str, &str) = ("run", "SIM-1");
}

/// What an action's route is, as first seen: identity, destination and
/// policy never change (PIN-1).
#[derive(Debug, Clone)]
struct Truth {
    identity: RouteIdentity,
    destination: RouteDestination,
    policy: PolicySnapshot,
    created: bool,
}

impl Truth {
    fn of(a: &RouteAssignment, created: bool) -> Truth {
        Truth {
            identity: a.identity.clone(),
            destination: a.destination.clone(),
            policy: a.policy.clone(),
            created,
        }
    }

    fn same(&self, a: &RouteAssignment) -> bool {
        self.identity == a.identity && self.destination == a.destination && self.policy == a.policy
    }
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
    latest: BTreeMap<ActionId, RouteAssignment>,
    answered: BTreeSet<FenceToken>,
    released: BTreeSet<FenceToken>,
    specs: BTreeMap<ReplicaId, ReplicaSpec>,
    store_replicas: BTreeMap<ReplicaId, ReplicaRow>,
    store_scopes: BTreeMap<ScopeId, ScopeRow>,
    store_routes: BTreeMap<ActionId, RouteRecord>,
    replica_model: BTreeMap<ReplicaId, (ReplicaState, bool)>,
    operator_closed: BTreeSet<ReplicaId>,
    catalogs: BTreeMap<Revision, CatalogModel>,
    max_published: Revision,
    cursors: BTreeMap<String, Revision>,
    open_actions: BTreeMap<(String, u64), ActionId>,
    deadline_ms: Option<u64>,
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

/// A check that waits for the publication of the revision it read.
#[derive(Debug)]
enum Deferred {
    Page(Reader, CatalogPage),
    Route(Box<(RouteRequest, RouteAssignment)>),
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
        self.observe_event(record);
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
            }
            Event::Setup {
                publication,
                revision,
                replicas,
            } => {
                self.catalogs
                    .insert(*revision, CatalogModel::default().apply(publication));
                self.max_published = *revision;
                for r in replicas {
                    self.specs.insert(r.id.clone(), r.clone());
                }
            }
            Event::Rpc { id, from, to, req } => {
                self.last_call = self.last_call.max(*id);
                if let Request::Execute { assignment } = req {
                    let key = (
                        to.clone(),
                        assignment.identity.action.clone(),
                        assignment.reservation.fence,
                    );
                    self.executes.insert(*id, key);
                }
                self.on_request(from, to, req);
                self.calls.insert(*id, (from.clone(), req.clone()));
            }
            Event::Reply {
                id,
                from,
                resp,
                lost,
                clock,
                released,
                ..
            } => {
                let Some((_, req)) = self.calls.remove(id) else {
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
                self.on_reply(&req, resp, *lost, t);
                self.follow_fates(*id, &req, resp);
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
                self.fates.ended(action);
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
            Event::Snapshot(s) => self.on_snapshot(s),
            Event::Violation(_) | Event::Check { .. } | Event::End(_) => {}
        }
    }

    /// End-of-run checks: orphaned reservations, liveness and
    /// expectations.
    pub fn finish(&mut self) {
        let before = self.found.len();
        self.finish_checks();
        let mut found = std::mem::take(&mut self.found);
        for v in &mut found[before..] {
            let none = context::EventContext::default();
            context::annotate(v, None, &none, &self.action_lines, &self.route_lines);
        }
        self.found = found;
    }

    fn finish_checks(&mut self) {
        self.run_deferred(true);
        let carried = |f: FenceToken| self.issued_by_answer.contains(&f);
        let orphans = self
            .fates
            .orphans(&self.store_routes, self.open_actions.values(), carried);
        for detail in orphans {
            self.violate(invariant::ORPHAN, detail);
        }
        if self.deadline_ms.is_some() {
            let carried = |f: FenceToken| self.issued_by_answer.contains(&f);
            let leaks = leak::leaked(
                &self.store_routes,
                |action, r| self.fates.owed(action, r, carried),
                self.open_actions.values(),
                &self.abandoned,
                &self.reconciled,
            );
            for detail in leaks {
                self.violate(invariant::LEAK, detail);
            }
        }
        let open: Vec<((String, u64), ActionId)> =
            std::mem::take(&mut self.open_actions).into_iter().collect();
        for ((dispatcher, _), action) in open {
            let deadline = self
                .deadline_ms
                .map(|d| format!("{d} ms"))
                .unwrap_or_else(|| "the end of the run".into());
            self.violate(
                invariant::LIVENESS,
                format!("{dispatcher} action {action} had not ended by {deadline}"),
            );
        }
        let counters = self.counters.pairs();
        let value = |name: &str| counters.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
        for (name, min) in self.expect.at_least.pairs() {
            let v = value(name).unwrap_or(0);
            if v < min {
                self.violate(
                    invariant::EXPECTATION,
                    format!("expected at least {min} {name}, saw {v}"),
                );
            }
        }
        for (name, max) in self.expect.at_most.pairs() {
            let v = value(name).unwrap_or(0);
            if v > max {
                self.violate(
                    invariant::EXPECTATION,
                    format!("expected at most {max} {name}, saw {v}"),
                );
            }
        }
    }

    fn on_request(&mut self, _from: &str, to: &str, req: &Request) {
        match req {
            Request::Execute { assignment } => {
                let action = &assignment.identity.action;
                let fence = assignment.reservation.fence;
                if !self.answered.contains(&fence) {
                    self.violate(
                        invariant::AFTER_COMMIT,
                        format!(
                            "{action} dispatched to {to} with fence {}, which no registry answered",
                            fence.0
                        ),
                    );
                }
                let target = replica_host(assignment.destination.replica.as_str());
                match self.truth.get(action) {
                    None => self.violate(
                        invariant::NO_FAILOVER,
                        format!("{action} dispatched to {to} with no route"),
                    ),
                    Some(truth) => {
                        if truth.destination != assignment.destination || to != target {
                            let detail = format!(
                                "{action} dispatched to {to} for replica {}; its route is replica {}",
                                assignment.destination.replica, truth.destination.replica
                            );
                            self.violate(invariant::NO_FAILOVER, detail);
                        }
                    }
                }
            }
            Request::Cancel { action, .. } => {
                if let Some(truth) = self.truth.get(action) {
                    let target = replica_host(truth.destination.replica.as_str());
                    if to != target {
                        self.violate(
                            invariant::NO_FAILOVER,
                            format!(
                                "cancellation of {action} sent to {to}; its route is on {target}"
                            ),
                        );
                    }
                }
            }
            _ => {}
        }
    }

    /// What `no_orphan_reservation` learns from an answer to call `call`.
    fn follow_fates(&mut self, call: u64, req: &Request, resp: &Response) {
        match (req, resp) {
            (Request::Resolve { request }, Response::Resolve { result: Ok(r) }) => {
                // An `existing` answer is the first to carry a reservation
                // whose creating answer was lost with its COMMIT reply.
                let fence = r.assignment.reservation.fence;
                if self.issued_by_answer.insert(fence) || r.kind != ResolveKind::Existing {
                    self.fates.reserved(&request.action, call, fence);
                }
            }
            (Request::Resolve { request }, Response::Resolve { result: Err(e) })
                if e.kind == "unavailable" =>
            {
                self.fates.unknown(&request.action, call);
            }
            (Request::Settle { params }, Response::Settle { result: Ok(s) }) if s.released => {
                self.fates
                    .released(&params.assignment.identity.action, self.last_call);
            }
            _ => {}
        }
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
                Request::Settle { params } => self
                    .reservations
                    .settle_unknown(params.assignment.reservation.fence),
                Request::Maintain { .. } => self.reservations.maintain_unknown(),
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
            }
            (Request::Heartbeat { .. }, Response::Heartbeat { result: Ok(h) }) => match h {
                connreg::HeartbeatOutcome::Applied => self.counters.heartbeats += 1,
                connreg::HeartbeatOutcome::Ignored => self.counters.heartbeats_ignored += 1,
            },
            (Request::Maintain { .. }, Response::Maintain { result: Ok(m) }) => {
                self.counters.lease_expired += u64::from(m.released);
                self.counters.replicas_expired += m.expired.len() as u64;
                let count = self.reservations.maintained(&m.expired);
                if self.ordered {
                    let reported = u64::from(m.released);
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
                if let Some(m) = self.replica_model.get_mut(&entry.replica) {
                    m.1 = false;
                }
            }
            (Request::Publish { publication }, Response::Publish { result: Ok(rev) }) => {
                self.counters.publications += 1;
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
                    .range(..*rev)
                    .next_back()
                    .map(|(_, m)| m.clone())
                    .unwrap_or_default();
                self.catalogs.insert(*rev, base.apply(publication));
                self.max_published = self.max_published.max(*rev);
                self.run_deferred(false);
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
                if self.awaits_publication(page.revision) {
                    self.deferred
                        .push(Deferred::Page(query.reader.clone(), page.clone()));
                } else {
                    self.check_page(&query.reader, page);
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
            (Request::Cancel { .. }, Response::Cancel { running: true }) => {
                self.counters.cancels += 1;
            }
            _ => {}
        }
    }

    /// At the answer that reserved `a`: the live reservations by the
    /// answers stay within the replica's declared capacity and the scopes'
    /// limits, at every answer and not only at snapshots (an excess inside
    /// one step shows no snapshot).
    fn check_admission(&mut self, a: &RouteAssignment) {
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
    fn check_released(
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

    fn learn_truth(&mut self, a: &RouteAssignment, created: bool, how: &str) {
        let action = a.identity.action.clone();
        match self.truth.get_mut(&action) {
            None => {
                self.route_lines.insert(action.clone(), self.line);
                self.truth.insert(action, Truth::of(a, created));
            }
            Some(truth) => {
                if created && truth.created {
                    self.violate(
                        invariant::ONE_ROUTE,
                        format!("a second route was created for {action}"),
                    );
                } else if !truth.same(a) {
                    let (inv, what) = if created {
                        (invariant::ONE_ROUTE, "a new route")
                    } else {
                        (invariant::NO_FAILOVER, "a retry")
                    };
                    let detail = format!(
                        "{what} ({how}) answered {action} on instance {}, replica {}; its route is instance {}, replica {}",
                        a.destination.instance,
                        a.destination.replica,
                        truth.destination.instance,
                        truth.destination.replica
                    );
                    self.violate(inv, detail);
                }
                if created && let Some(t) = self.truth.get_mut(&action) {
                    t.created = true;
                }
            }
        }
    }

    fn on_resolved(&mut self, request: &RouteRequest, resolved: &Resolved, lost: bool) {
        let a = &resolved.assignment;
        let action = &a.identity.action;
        match resolved.kind {
            ResolveKind::Created => self.counters.resolve_created += 1,
            ResolveKind::Existing => self.counters.resolve_existing += 1,
            ResolveKind::Reserved => self.counters.resolve_reserved += 1,
        }
        if request.tenant.as_ref() != Some(&a.identity.tenant) {
            self.violate(
                invariant::TENANT,
                format!(
                    "a resolve of {} by {} answered {}'s route",
                    request.action,
                    request
                        .tenant
                        .as_ref()
                        .map_or("no tenant".to_string(), |t| t.to_string()),
                    a.identity.tenant
                ),
            );
            return;
        }
        if &request.action != action || request.capability != a.identity.capability {
            self.violate(
                invariant::ONE_ROUTE,
                format!(
                    "a resolve of {} for {} answered {action} for {}",
                    request.action, request.capability, a.identity.capability
                ),
            );
            return;
        }
        let fence = a.reservation.fence;
        let how = match resolved.kind {
            ResolveKind::Created => "created",
            ResolveKind::Existing => "existing",
            ResolveKind::Reserved => "reserved",
        };
        if resolved.kind == ResolveKind::Existing
            && (!self.deterministic || self.commit_unknown.contains(action))
            && !self.issued.contains_key(&fence)
            && self
                .latest
                .get(action)
                .is_none_or(|l| l.reservation.fence < fence)
        {
            // The reservation of a resolve whose COMMIT reply was lost: an
            // earlier call answered `unavailable`, or (on a real database)
            // the registry tried the call again on a new connection and
            // found the route its first attempt committed. This answer is
            // the first to carry it; the store must agree (snapshots).
            self.issued.insert(fence, action.clone());
            if self
                .latest
                .get(action)
                .is_none_or(|l| l.reservation.fence < fence)
            {
                self.latest.insert(action.clone(), a.clone());
            }
        }
        if self.ordered
            && resolved.kind == ResolveKind::Existing
            && self.reservations.has_ended(fence)
        {
            // LOCK-5: an answer after a release in commit order cannot
            // still carry the released reservation (maintenance included).
            self.violate(
                invariant::CAPACITY,
                format!(
                    "an existing answer for {action} carries fence {}, which a release earlier in commit order ended",
                    fence.0
                ),
            );
        }
        if self.ordered
            && resolved.kind == ResolveKind::Existing
            && let Some(latest) = self.latest.get(action)
            && latest != a
        {
            self.violate(
                invariant::ONE_ROUTE,
                format!("an existing answer for {action} carries fence {}, but its current reservation has fence {}", fence.0, latest.reservation.fence.0),
            );
        }
        self.learn_truth(a, resolved.kind == ResolveKind::Created, how);
        match resolved.kind {
            ResolveKind::Created | ResolveKind::Reserved => {
                if let Some(other) = self.issued.insert(fence, action.clone()) {
                    self.violate(
                        invariant::FENCE,
                        format!(
                            "fence {} was issued to {action} and before to {other}",
                            fence.0
                        ),
                    );
                }
                let newer = self
                    .latest
                    .get(action)
                    .is_none_or(|l| l.reservation.fence <= fence);
                if newer {
                    self.latest.insert(action.clone(), a.clone());
                }
                self.reservations.reserve(a);
                if self.ordered {
                    self.check_admission(a);
                }
            }
            ResolveKind::Existing => {
                if !self.reservations.known(fence) {
                    // The first answer to carry a reservation whose
                    // creating answer was lost with its COMMIT reply.
                    self.reservations.reserve(a);
                }
                if let Some(other) = self.issued.get(&fence)
                    && other != action
                {
                    let detail =
                        format!("fence {} answered for {action} belongs to {other}", fence.0);
                    self.violate(invariant::FENCE, detail);
                }
            }
        }
        if !lost {
            self.answered.insert(fence);
        }
        if resolved.kind == ResolveKind::Reserved
            && self
                .replica_model
                .get(&a.destination.replica)
                .is_some_and(|(state, _)| *state == ReplicaState::Draining)
        {
            self.counters.pinned_on_draining += 1;
        }
        if resolved.kind == ResolveKind::Created {
            let topo = &request.topology;
            if topo.preferred_zone.as_ref() == Some(&a.destination.zone) {
                self.counters.routes_preferred_zone += 1;
            }
            if topo
                .preferred_region
                .as_ref()
                .is_some_and(|r| r != &a.destination.region)
            {
                self.counters.routes_other_region += 1;
            }
            if self.awaits_publication(a.policy.catalog_revision) {
                self.deferred
                    .push(Deferred::Route(Box::new((request.clone(), a.clone()))));
            } else {
                self.check_eligible(request, a);
            }
        }
    }

    /// True when an answer read at `revision` may be checked only once the
    /// publication that made it is in the trace: on a real database a
    /// reader's answer can be recorded just before the publisher's. Commit
    /// order does not help here: reads take no commit sequence, so a page
    /// read right after a publication committed can come back, and keep its
    /// place, ahead of the publication's own answer.
    fn awaits_publication(&self, revision: Revision) -> bool {
        !self.deterministic
            && revision > self.max_published
            && !self.catalogs.contains_key(&revision)
    }

    /// Runs the checks that waited for a publication: those whose revision
    /// is known now, or all of them when `all` (every answer committed so
    /// far is in the trace: at a snapshot and at the end).
    fn run_deferred(&mut self, all: bool) {
        let waiting = std::mem::take(&mut self.deferred);
        for d in waiting {
            let revision = match &d {
                Deferred::Page(_, page) => page.revision,
                Deferred::Route(r) => r.1.policy.catalog_revision,
            };
            if !all && !self.catalogs.contains_key(&revision) {
                self.deferred.push(d);
                continue;
            }
            match d {
                Deferred::Page(reader, page) => self.check_page(&reader, &page),
                Deferred::Route(r) => self.check_eligible(&r.0, &r.1),
            }
        }
    }

    fn check_page(&mut self, reader: &Reader, page: &CatalogPage) {
        let Some(model) = self.catalogs.get(&page.revision) else {
            self.violate(
                invariant::REVISION,
                format!(
                    "a page carries revision {}, which no publication made",
                    page.revision.0
                ),
            );
            return;
        };
        match reader {
            Reader::Tenant(tenant) => {
                let hidden: Vec<String> = page
                    .entries
                    .iter()
                    .filter(|e| !model.tenant_sees(tenant, &e.capability))
                    .map(|e| e.capability.to_string())
                    .collect();
                if !hidden.is_empty() {
                    self.violate(
                        invariant::TENANT,
                        format!(
                            "a page for {tenant} at revision {} lists {hidden:?}, which it cannot call",
                            page.revision.0
                        ),
                    );
                }
            }
            Reader::Anonymous => {
                if !page.entries.is_empty() {
                    self.violate(
                        invariant::TENANT,
                        format!("an anonymous page lists {} entries", page.entries.len()),
                    );
                }
            }
            Reader::Internal { .. } => {}
        }
    }

    fn check_eligible(&mut self, request: &RouteRequest, a: &RouteAssignment) {
        let action = &a.identity.action;
        let mut refusals = Vec::new();
        match self.catalogs.get(&a.policy.catalog_revision) {
            None => refusals.push(format!(
                "it read revision {}, which no publication made",
                a.policy.catalog_revision.0
            )),
            Some(model) => refusals.extend(model.route_refusal(a)),
        }
        let topo = &request.topology;
        if a.policy.capacity_class != topo.capacity_class {
            refusals.push("its policy snapshot has another capacity class".into());
        }
        if let Some(spec) = self.specs.get(&a.destination.replica) {
            if spec.capacity_class != topo.capacity_class {
                refusals.push(format!(
                    "replica {} has class {}",
                    spec.id, spec.capacity_class
                ));
            }
            if spec.instance != a.destination.instance {
                refusals.push(format!("replica {} serves another instance", spec.id));
            }
        }
        if topo.cross_region == CrossRegion::Forbidden
            && topo.preferred_region.as_ref() != Some(&a.destination.region)
        {
            refusals.push(format!(
                "it is in region {} and cross-region routes are forbidden",
                a.destination.region
            ));
        }
        if self.ordered
            && let Some((state, open)) = self.replica_model.get(&a.destination.replica)
        {
            if *state != ReplicaState::Ready {
                refusals.push(format!(
                    "replica {} is {}",
                    a.destination.replica,
                    state.as_str()
                ));
            }
            if *open {
                refusals.push(format!(
                    "replica {}'s circuit is open",
                    a.destination.replica
                ));
            }
        }
        for why in refusals {
            self.violate(
                invariant::ELIGIBLE,
                format!(
                    "the new route of {action} on replica {}: {why}",
                    a.destination.replica
                ),
            );
        }
    }

    fn on_conflict(&mut self, request: &RouteRequest, message: &str) {
        // ROUTE-4: the answer reveals nothing of the other assignment.
        if let Some(truth) = self.truth.get(&request.action) {
            let d = &truth.destination;
            let leaks = [
                truth.identity.tenant.as_str(),
                d.instance.as_str(),
                d.replica.as_str(),
                d.binding.as_str(),
                d.endpoint.as_str(),
            ];
            if request.tenant.as_ref() != Some(&truth.identity.tenant)
                && leaks.iter().any(|s| message.contains(s))
            {
                self.violate(
                    invariant::TENANT,
                    format!(
                        "a conflict answer for {} reveals the other assignment: {message:?}",
                        request.action
                    ),
                );
            }
        }
    }

    fn on_settled(&mut self, params: &SettleParams, settled: &Settled) {
        let a = &params.assignment;
        let action = &a.identity.action;
        let fence = a.reservation.fence;
        if params.outcome == Outcome::LeaseExpired {
            self.counters.settled_lease_expired += 1;
        }
        if settled.released {
            self.counters.settle_released += 1;
            match params.outcome {
                Outcome::Completed => self.counters.settled_completed += 1,
                Outcome::OutcomeUnknown => self.counters.settled_outcome_unknown += 1,
                Outcome::Cancelled => self.counters.settled_cancelled += 1,
                Outcome::LeaseExpired => {}
            }
        } else {
            self.counters.settle_idempotent += 1;
        }
        match self.latest.get(action) {
            Some(latest) if latest == a => {}
            Some(latest) => {
                let detail = format!(
                    "a settlement of {action} with fence {} succeeded; the current reservation has fence {}",
                    fence.0, latest.reservation.fence.0
                );
                self.violate(invariant::IDEMPOTENT, detail);
            }
            None if self.ordered => self.violate(
                invariant::IDEMPOTENT,
                format!("a settlement of {action} succeeded for an assignment no registry issued"),
            ),
            None => {}
        }
        if settled.released {
            self.reservations.settled(fence);
        }
        if settled.released && !self.released.insert(fence) {
            self.violate(
                invariant::IDEMPOTENT,
                format!(
                    "the reservation of {action} with fence {} was released twice",
                    fence.0
                ),
            );
        }
    }

    fn on_fault(&mut self, f: &FaultEvent, t: u64) {
        self.db_faults.on_fault(f, t);
        match f {
            FaultEvent::Crash { hosts } => {
                self.counters.crashes += hosts.len() as u64;
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
            FaultEvent::DbFaultEnd { .. }
            | FaultEvent::Repair { .. }
            | FaultEvent::Release { .. }
            | FaultEvent::LatencyRestore { .. }
            | FaultEvent::LossEnd
            | FaultEvent::LoseAnswers { .. }
            | FaultEvent::LoseAnswersEnd => {}
        }
    }

    fn on_snapshot(&mut self, s: &Snapshot) {
        self.counters.snapshots += 1;
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
            self.replica_model
                .insert(row.id.clone(), (row.state, row.circuit_open));
            self.store_replicas.insert(row.id.clone(), row.clone());
        }
        self.operator_closed.clear();
        for row in &s.scopes {
            self.store_scopes.insert(row.id.clone(), row.clone());
        }
        for r in &s.routes {
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
            self.store_routes.insert(action.clone(), r.clone());
        }
        self.check_capacity();
    }

    fn check_capacity(&mut self) {
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

/// The verdict of re-checking a trace file.
#[derive(Debug, Clone)]
pub struct Recheck {
    /// Records read.
    pub records: u64,
    /// Violations the re-check found.
    pub violations: Vec<Violation>,
    /// Counters the re-check computed.
    pub counters: Counters,
    /// The verdict the trace recorded, if it has an `end` line.
    pub recorded_ok: Option<bool>,
    /// Differences between the recorded and recomputed verdicts.
    pub mismatches: Vec<String>,
}

impl Recheck {
    /// True when the re-check found no violation and agrees with the
    /// recorded verdict.
    pub fn ok(&self) -> bool {
        self.violations.is_empty() && self.mismatches.is_empty()
    }
}

/// Refuses a trace whose first line is not a `start` of the format this
/// checker reads: an older trace lacks evidence the checks now require.
fn refuse_other_format(line: &str) -> Result<(), String> {
    let first: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("not a trace line: {e}"))?;
    if first["ev"] != "start" {
        return Err("a trace starts with its `start` line".into());
    }
    let format = first["format"].as_u64();
    let read = crate::trace::TRACE_FORMATS_READ;
    if !format.is_some_and(|f| read.iter().any(|r| u64::from(*r) == f)) {
        let seen = match &first["format"] {
            serde_json::Value::Null => "no format".to_string(),
            other => format!("format {other}"),
        };
        return Err(format!(
            "the trace is of {seen}; check-trace reads formats {} and {} only (sim/TRACE.md: \
             answers name what they released and their registry clock, deliveries and the \
             dispatch of each side effect are recorded); make a new trace with \
             `connreg-sim run --trace FILE`",
            read[0], read[1]
        ));
    }
    Ok(())
}

/// Re-checks a trace from its lines alone.
pub fn recheck(lines: impl Iterator<Item = std::io::Result<String>>) -> Result<Recheck, String> {
    let mut checker = Checker::new();
    let mut records = 0u64;
    let mut recorded_violations = 0u64;
    let mut recorded_end = None;
    let mut violations = Vec::new();
    for (i, line) in lines.enumerate() {
        let line = line.map_err(|e| format!("line {}: {e}", i + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        if records == 0 {
            refuse_other_format(&line).map_err(|e| format!("line {}: {e}", i + 1))?;
        }
        let record: Record =
            serde_json::from_str(&line).map_err(|e| format!("line {}: {e}", i + 1))?;
        records += 1;
        match &record.event {
            Event::Violation(_) => recorded_violations += 1,
            Event::End(end) => {
                checker.finish();
                recorded_end = Some(end.clone());
            }
            _ => checker.observe_at(i as u64 + 1, &record),
        }
        violations.extend(checker.take_found());
    }
    if records == 0 {
        return Err("the trace is empty: it has no start line".into());
    }
    let mut mismatches = Vec::new();
    if let Some(end) = &recorded_end {
        if end.counters != *checker.counters() {
            mismatches.push("the recorded counters differ from the recomputed ones".to_string());
        }
        if end.violations != checker.violations() {
            mismatches.push(format!(
                "the trace recorded {} violations, the re-check found {}",
                end.violations,
                checker.violations()
            ));
        }
    } else {
        mismatches.push("the trace has no end line (the run did not finish)".into());
    }
    let _ = recorded_violations;
    Ok(Recheck {
        records,
        violations,
        counters: checker.counters().clone(),
        recorded_ok: recorded_end.map(|e| e.ok),
        mismatches,
    })
}
