//! Reachability probes, in the spirit of Antithesis' `sometimes`
//! assertions: named paths a run may take, counted from its trace records
//! alone (so `check-trace` could count them from a trace file too).
//!
//! Three families:
//!
//! - `fault:<kind>`: a fault event of that kind (the trace's `fault` tag),
//!   `fault:db_cut:<mode>` for each cut mode, and `fault:answer_lost` for
//!   an answer a fault dropped after it was computed (`reply` with
//!   `lost`).
//! - `answer:<op>:<kind>`: an answer of that kind to that operation
//!   (`created`, `existing`, `reserved` resolves, `released` settlements,
//!   maintenance with `more`, continuation pages, ...), every domain error
//!   kind as `answer:<op>:error:<kind>`, `answer:<op>:refused` and a
//!   transport failure as `answer:<op>:rpc_failed`.
//! - `plant:<name>`: the situation a planted bug acts on arose, whether
//!   or not the bug is switched on (see [`Probes`] for each condition).
//!
//! The names are derived from the wire types by exhaustive matches
//! ([`fault_kind`], [`answer_kind`]): a new variant does not compile until
//! it has a probe name, and the catalogue ([`catalog`]) is built from the
//! same lists.

use std::collections::{BTreeMap, BTreeSet};

use connreg::{ActionId, FenceToken, HeartbeatOutcome, ReplicaId, ReplicaState, ResolveKind};

use crate::plant::{
    DRAINING_TRACKED, MAINTENANCE_PAGE, MAINTENANCE_SHRUNK_BATCH, OFFLINE_TRACKED, PlantedBug,
    STARVING_QUIET_MS,
};
use crate::trace::{Event, FaultEvent, Record};
use crate::wire::{Execution, Request, Response};

/// Every fault tag of the trace (`FaultEvent`), as [`fault_kind`] names it.
pub const FAULT_KINDS: [&str; 25] = [
    "crash",
    "restart",
    "partition",
    "repair",
    "hold",
    "release",
    "latency",
    "latency_restore",
    "loss",
    "loss_end",
    "lose_answers",
    "lose_answers_end",
    "db_cut",
    "db_stall",
    "db_terminate",
    "db_restart",
    "db_failover",
    "db_standby_detached",
    "db_fault_end",
    "clock_jump",
    "zone_silence",
    "zone_silence_end",
    "group_crash",
    "group_restart",
    "group_drain",
];

/// The modes of a `db_cut`.
pub const DB_CUT_MODES: [&str; 2] = ["all", "next_commit"];

/// Every operation of the wire (`Request::op`).
pub const OPS: [&str; 12] = [
    "resolve",
    "route_get",
    "settle",
    "register",
    "heartbeat",
    "drain",
    "maintain",
    "circuit_close",
    "publish",
    "page",
    "execute",
    "cancel",
];

/// The registry's error kinds (`connreg::Error::kind`).
pub const ERROR_KINDS: [&str; 11] = [
    "invalid_request",
    "limit_exceeded",
    "not_found",
    "stale_cursor",
    "invalid_cursor",
    "conflict",
    "no_eligible_binding",
    "no_capacity",
    "replica_unavailable",
    "fence_lost",
    "unavailable",
];

/// The successful answer kinds of each operation, as [`answer_kind`]
/// names them.
pub fn ok_kinds(op: &str) -> &'static [&'static str] {
    match op {
        "resolve" => &["created", "existing", "reserved"],
        "route_get" => &["found", "none"],
        "settle" => &["released", "not_released"],
        "heartbeat" => &["applied", "ignored"],
        "maintain" => &[
            "nothing_expired",
            "expired",
            "with_releases",
            "hold_expired",
            "more",
        ],
        "page" => &["first", "continuation", "last"],
        "execute" => &["completed", "unknown", "cancelled", "misdirected"],
        "cancel" => &["running", "not_running"],
        _ => &["ok"],
    }
}

/// True for the operations a registry host answers (with domain errors).
fn registry_op(op: &str) -> bool {
    !matches!(op, "execute" | "cancel")
}

/// The probe name of a fault event's kind: its tag in the trace.
pub fn fault_kind(f: &FaultEvent) -> &'static str {
    match f {
        FaultEvent::Crash { .. } => "crash",
        FaultEvent::Restart { .. } => "restart",
        FaultEvent::Partition { .. } => "partition",
        FaultEvent::Repair { .. } => "repair",
        FaultEvent::Hold { .. } => "hold",
        FaultEvent::Release { .. } => "release",
        FaultEvent::Latency { .. } => "latency",
        FaultEvent::LatencyRestore { .. } => "latency_restore",
        FaultEvent::Loss { .. } => "loss",
        FaultEvent::LossEnd => "loss_end",
        FaultEvent::LoseAnswers { .. } => "lose_answers",
        FaultEvent::LoseAnswersEnd => "lose_answers_end",
        FaultEvent::DbCut { .. } => "db_cut",
        FaultEvent::DbStall { .. } => "db_stall",
        FaultEvent::DbTerminate { .. } => "db_terminate",
        FaultEvent::DbRestart => "db_restart",
        FaultEvent::DbFailover { .. } => "db_failover",
        FaultEvent::DbStandbyDetached => "db_standby_detached",
        FaultEvent::DbFaultEnd { .. } => "db_fault_end",
        FaultEvent::ClockJump { .. } => "clock_jump",
        FaultEvent::ZoneSilence { .. } => "zone_silence",
        FaultEvent::ZoneSilenceEnd { .. } => "zone_silence_end",
        FaultEvent::GroupCrash { .. } => "group_crash",
        FaultEvent::GroupRestart { .. } => "group_restart",
        FaultEvent::GroupDrain { .. } => "group_drain",
    }
}

/// The answer kinds of one answer (`page` needs whether the request had a
/// cursor): `created`, `error:<kind>`, `refused`, ... An answer may be of
/// more than one kind (a maintenance that expired replicas, released
/// reservations and has more).
pub fn answer_kind(resp: &Response, continuation: bool) -> Vec<String> {
    fn err<T>(r: &Result<T, crate::wire::WireError>) -> Option<String> {
        r.as_ref().err().map(|e| format!("error:{}", e.kind))
    }
    let one = |s: &str| vec![s.to_string()];
    match resp {
        Response::Resolve { result } => match result {
            Ok(r) => one(match r.kind {
                ResolveKind::Created => "created",
                ResolveKind::Existing => "existing",
                ResolveKind::Reserved => "reserved",
            }),
            Err(_) => err(result).into_iter().collect(),
        },
        Response::RouteGet { result } => match result {
            Ok(Some(_)) => one("found"),
            Ok(None) => one("none"),
            Err(_) => err(result).into_iter().collect(),
        },
        Response::Settle { result } => match result {
            Ok(s) if s.released => one("released"),
            Ok(_) => one("not_released"),
            Err(_) => err(result).into_iter().collect(),
        },
        Response::Heartbeat { result } => match result {
            Ok(HeartbeatOutcome::Applied) => one("applied"),
            Ok(HeartbeatOutcome::Ignored) => one("ignored"),
            Err(_) => err(result).into_iter().collect(),
        },
        Response::Maintain { result } => match result {
            Ok(m) => {
                let mut kinds = Vec::new();
                kinds.push(if m.expired.is_empty() {
                    "nothing_expired"
                } else {
                    "expired"
                });
                if m.released > 0 || !m.releases.is_empty() {
                    kinds.push("with_releases");
                }
                if m.releases
                    .iter()
                    .any(|r| r.reason == connreg::ReleaseReason::HoldExpired)
                {
                    kinds.push("hold_expired");
                }
                if m.more {
                    kinds.push("more");
                }
                kinds.into_iter().map(str::to_string).collect()
            }
            Err(_) => err(result).into_iter().collect(),
        },
        Response::Page { result } => match result {
            Ok(p) => {
                let mut kinds = vec![if continuation {
                    "continuation"
                } else {
                    "first"
                }];
                if p.next.is_none() {
                    kinds.push("last");
                }
                kinds.into_iter().map(str::to_string).collect()
            }
            Err(_) => err(result).into_iter().collect(),
        },
        Response::Register { result } => ok_or(err(result)),
        Response::Drain { result } => ok_or(err(result)),
        Response::CircuitClose { result } => ok_or(err(result)),
        Response::Publish { result } => ok_or(err(result)),
        Response::Execute { execution } => one(match execution {
            Execution::Completed => "completed",
            Execution::Unknown => "unknown",
            Execution::Cancelled => "cancelled",
            Execution::Misdirected => "misdirected",
        }),
        Response::Cancel { running } => one(if *running { "running" } else { "not_running" }),
        Response::Refused { .. } => one("refused"),
    }
}

fn ok_or(e: Option<String>) -> Vec<String> {
    vec![e.unwrap_or_else(|| "ok".to_string())]
}

/// Every probe name, sorted: every fault kind, every answer kind of every
/// operation, every planted bug's path.
pub fn catalog() -> BTreeSet<String> {
    let mut all = BTreeSet::new();
    for k in FAULT_KINDS {
        all.insert(format!("fault:{k}"));
    }
    for m in DB_CUT_MODES {
        all.insert(format!("fault:db_cut:{m}"));
    }
    all.insert("fault:answer_lost".to_string());
    for op in OPS {
        for k in ok_kinds(op) {
            all.insert(format!("answer:{op}:{k}"));
        }
        all.insert(format!("answer:{op}:refused"));
        all.insert(format!("answer:{op}:rpc_failed"));
        if registry_op(op) {
            for e in ERROR_KINDS {
                all.insert(format!("answer:{op}:error:{e}"));
            }
        }
    }
    for p in PlantedBug::all() {
        all.insert(plant_probe(p));
    }
    all
}

/// The probe of a planted bug's code path.
pub fn plant_probe(p: PlantedBug) -> String {
    format!("plant:{}", p.name())
}

/// True when `name` is a probe of the catalogue.
pub fn known(name: &str) -> bool {
    catalog().contains(name)
}

/// One call as the probes need it.
#[derive(Debug, Clone)]
struct Call {
    op: &'static str,
    to_registry: bool,
    continuation: bool,
    /// The action and fence of an `execute` on its replica host.
    execute: Option<(String, ActionId, FenceToken)>,
    /// The action of a resolve.
    resolve: Option<ActionId>,
    open: bool,
}

/// A replica's row as the probes need it.
#[derive(Debug, Clone, Copy)]
struct Row {
    state: ReplicaState,
    active: u32,
    circuit_open: bool,
    consecutive_unknown: u32,
}

/// A route as its resolve answers showed it.
#[derive(Debug, Clone)]
struct Route {
    tenant: connreg::TenantId,
    replica: ReplicaId,
    fence: FenceToken,
}

/// Counts probes over one run's trace records, in order.
///
/// The planted bugs' paths (each fires whether or not the bug is on):
///
/// - `failover-on-retry`: a resolve of an action with a route is answered
///   `replica_unavailable`, or with a route on another replica.
/// - `no-action-serialization`: a resolve of an action reaches a registry
///   while another resolve of it is unanswered.
/// - `double-release`, `settle-rewrites-outcome`: a settlement names a
///   reservation an answer already released.
/// - `circuit-never-resets`: a `completed` settlement names a replica
///   whose stored row counts unknown outcomes.
/// - `settle-keeps-unknown`: an `outcome_unknown` settlement names a
///   reservation no answer released.
/// - `ignore-fence`: a settlement names a fence other than the action's
///   route's, or is answered `fence_lost`.
/// - `heartbeat-advances-revision`, `heartbeat-keeps-lease`: a heartbeat
///   is applied.
/// - `mixed-revision-pages`: a page is answered `stale_cursor`, or a
///   continuation is answered at another revision than its cursor's page.
/// - `page-skips-next`: a continuation page is answered with entries.
/// - `over-capacity`: a resolve is answered `no_capacity`, or a replica
///   row shows as many reservations as its capacity, or a scope row its
///   limit.
/// - `cross-tenant-return`: a resolve names a tenant other than the one
///   the action's route belongs to, or is answered `conflict`.
/// - `spurious-unavailable`: a resolve reaches a registry host.
/// - `commit-reply-lost-as-failure`: a resolve fails in transport or is
///   answered `unavailable`.
/// - `silent-release`: a heartbeat reaches a registry for a replica whose
///   row holds a reservation.
/// - `maintain-overcount`: a maintenance expires a replica.
/// - `no-reconciliation`: a dispatcher crashes with actions open.
/// - `reconcile-other-fence-outcome`: a dispatcher crashes with an action
///   open whose route has a fence other than the one the action last
///   settled (a retry's fresh reservation, PIN-3).
/// - `maintain-page-stops-early`: a maintenance answer expires at least
///   [`MAINTENANCE_PAGE`] replicas (the plant answers a full page; without
///   it more are expired at once).
/// - `drain-lost-in-crowd`: a drain reaches a registry, or is answered,
///   while at least [`DRAINING_TRACKED`] other replicas are draining (as
///   rows and drain answers show them).
/// - `circuit-reset-in-crowd`: a replica offline with its circuit open
///   registers again while more than [`OFFLINE_TRACKED`] rows are offline.
/// - `shared-stop-signal`: an `execute` reaches a replica while another
///   `execute` of the same action and fence there is unanswered.
/// - `publication-starves`: a publication reaches a registry host that a
///   resolve reached less than [`STARVING_QUIET_MS`] before.
/// - `hold-never-expires`: a resolve reserves after its caller stopped
///   waiting for it (the call failed at its caller first), or every
///   dispatcher is done with reservations still held (a `drain`): only the
///   registry's hold can end what nobody knows of.
/// - `cancel-forgotten`: an `execute` is sent to a replica after a cancel
///   of the same action and fence was sent to it.
/// - `settle-waits-forever`: a settlement gets no answer (it fails at its
///   caller).
/// - `maintenance-batch-shrinks`: a maintenance answer expires at least
///   [`MAINTENANCE_SHRUNK_BATCH`] replicas (the plant answers that many;
///   without it more are expired at once).
#[derive(Debug, Default)]
pub struct Probes {
    hits: BTreeMap<String, u64>,
    calls: BTreeMap<u64, Call>,
    open_resolves: BTreeMap<ActionId, u32>,
    open_executes: BTreeMap<(String, ActionId, FenceToken), u32>,
    /// Cancels sent: (replica host, action, fence).
    cancels_sent: BTreeSet<(String, ActionId, FenceToken)>,
    routes: BTreeMap<ActionId, Route>,
    released: BTreeSet<(ActionId, FenceToken)>,
    rows: BTreeMap<ReplicaId, Row>,
    page_revisions: BTreeMap<String, connreg::Revision>,
    call_cursor: BTreeMap<u64, String>,
    open_actions: BTreeMap<String, BTreeMap<u64, ActionId>>,
    /// The fence of each action's last settlement sent.
    settled_fence: BTreeMap<ActionId, FenceToken>,
    /// Resolve calls their caller stopped waiting for, not yet answered.
    resolves_given_up: BTreeSet<u64>,
    /// The time of the record being counted.
    now_ms: u64,
    /// When a resolve last reached each registry host.
    last_resolve_ms: BTreeMap<String, u64>,
}

impl Probes {
    /// No probe fired yet.
    pub fn new() -> Probes {
        Probes::default()
    }

    /// Counts of the probes that fired.
    pub fn hits(&self) -> &BTreeMap<String, u64> {
        &self.hits
    }

    /// Takes the counts.
    pub fn into_hits(self) -> BTreeMap<String, u64> {
        self.hits
    }

    fn fire(&mut self, name: String) {
        *self.hits.entry(name).or_insert(0) += 1;
    }

    fn plant(&mut self, p: PlantedBug) {
        self.fire(plant_probe(p));
    }

    /// Counts the probes of every record of `records`.
    pub fn observe_all<'a>(&mut self, records: impl IntoIterator<Item = &'a Record>) {
        for r in records {
            self.observe(r);
        }
    }

    /// Counts the probes one record fires.
    pub fn observe(&mut self, record: &Record) {
        use connreg::plant::Plant;
        self.now_ms = record.t;
        match &record.event {
            Event::Fault(f) => {
                self.fire(format!("fault:{}", fault_kind(f)));
                match f {
                    FaultEvent::DbCut { mode, .. } => self.fire(format!("fault:db_cut:{mode}")),
                    FaultEvent::Crash { hosts } => {
                        let open = hosts.iter().any(|h| {
                            self.open_actions
                                .get(h)
                                .is_some_and(|open| !open.is_empty())
                        });
                        if open {
                            self.plant(PlantedBug::NoReconciliation);
                        }
                        let moved_on = hosts
                            .iter()
                            .filter_map(|h| self.open_actions.get(h))
                            .flat_map(|open| open.values())
                            .any(|a| {
                                self.settled_fence.get(a).is_some_and(|settled| {
                                    self.routes.get(a).is_some_and(|r| r.fence != *settled)
                                })
                            });
                        if moved_on {
                            self.plant(PlantedBug::ReconcileOtherFenceOutcome);
                        }
                    }
                    _ => {}
                }
            }
            Event::ActionStart {
                dispatcher,
                n,
                action,
                ..
            } => {
                self.open_actions
                    .entry(dispatcher.clone())
                    .or_default()
                    .insert(*n, action.clone());
            }
            Event::Drain { .. } => self.plant(PlantedBug::Store(Plant::HoldNeverExpires)),
            Event::ActionEnd { dispatcher, n, .. } | Event::Reconciled { dispatcher, n, .. } => {
                if let Some(open) = self.open_actions.get_mut(dispatcher) {
                    open.remove(n);
                }
            }
            Event::Snapshot(s) => {
                for r in &s.replicas {
                    self.rows.insert(
                        r.id.clone(),
                        Row {
                            state: r.state,
                            active: r.active,
                            circuit_open: r.circuit_open,
                            consecutive_unknown: r.consecutive_unknown,
                        },
                    );
                    if r.capacity > 0 && r.active >= r.capacity {
                        self.plant(PlantedBug::Store(Plant::OverCapacity));
                    }
                }
                if s.scopes
                    .iter()
                    .any(|sc| sc.limit > 0 && sc.in_use >= sc.limit)
                {
                    self.plant(PlantedBug::Store(Plant::OverCapacity));
                }
            }
            Event::Rpc { id, to, req, .. } => self.rpc(*id, to, req),
            Event::Reply {
                id,
                resp,
                lost,
                released,
                ..
            } => {
                if *lost {
                    self.fire("fault:answer_lost".to_string());
                }
                for r in released.iter().flatten() {
                    self.released.insert((r.action.clone(), r.fence));
                }
                if self.resolves_given_up.remove(id)
                    && matches!(resp, Response::Resolve { result: Ok(_) })
                {
                    self.plant(PlantedBug::Store(Plant::HoldNeverExpires));
                }
                self.reply(*id, resp);
            }
            Event::RpcFailed { id, .. } => {
                let op = self.close(*id);
                if let Some(op) = op {
                    self.fire(format!("answer:{op}:rpc_failed"));
                    if op == "settle" {
                        self.plant(PlantedBug::SettleWaitsForever);
                    }
                    if op == "resolve" {
                        self.plant(PlantedBug::CommitReplyLostAsFailure);
                        self.resolves_given_up.insert(*id);
                    }
                }
            }
            _ => {}
        }
    }

    /// Marks call `id` answered (or failed): its op, the first time.
    fn close(&mut self, id: u64) -> Option<&'static str> {
        let call = self.calls.get_mut(&id)?;
        let first = call.open;
        call.open = false;
        let call = call.clone();
        if first {
            if let Some(a) = &call.resolve
                && let Some(n) = self.open_resolves.get_mut(a)
            {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.open_resolves.remove(a);
                }
            }
            if let Some(key) = &call.execute
                && let Some(n) = self.open_executes.get_mut(key)
            {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.open_executes.remove(key);
                }
            }
        }
        Some(call.op)
    }

    fn rpc(&mut self, id: u64, to: &str, req: &Request) {
        use connreg::plant::Plant;
        let to_registry = to.starts_with("registry-");
        let mut call = Call {
            op: req.op(),
            to_registry,
            continuation: false,
            execute: None,
            resolve: None,
            open: true,
        };
        match req {
            Request::Publish { .. }
                if to_registry
                    && self
                        .last_resolve_ms
                        .get(to)
                        .is_some_and(|&t| self.now_ms < t + STARVING_QUIET_MS) =>
            {
                self.plant(PlantedBug::PublicationStarves);
            }
            Request::Resolve { request } if to_registry => {
                self.last_resolve_ms.insert(to.to_string(), self.now_ms);
                self.plant(PlantedBug::SpuriousUnavailable);
                let n = self
                    .open_resolves
                    .entry(request.action.clone())
                    .or_insert(0);
                *n += 1;
                let racing = *n > 1;
                call.resolve = Some(request.action.clone());
                if racing {
                    self.plant(PlantedBug::Store(Plant::NoActionSerialization));
                }
                if let (Some(tenant), Some(route)) =
                    (&request.tenant, self.routes.get(&request.action))
                    && *tenant != route.tenant
                {
                    self.plant(PlantedBug::Store(Plant::CrossTenantReturn));
                }
            }
            Request::Settle { params } if to_registry => {
                let a = &params.assignment;
                let key = (a.identity.action.clone(), a.reservation.fence);
                if self.released.contains(&key) {
                    self.plant(PlantedBug::Store(Plant::DoubleRelease));
                    self.plant(PlantedBug::Store(Plant::SettleRewritesOutcome));
                }
                if let Some(route) = self.routes.get(&a.identity.action)
                    && route.fence != a.reservation.fence
                {
                    self.plant(PlantedBug::Store(Plant::IgnoreFence));
                }
                if params.outcome == connreg::Outcome::Completed
                    && (self.rows.get(&a.destination.replica))
                        .is_some_and(|r| r.consecutive_unknown > 0)
                {
                    self.plant(PlantedBug::Store(Plant::CircuitNeverResets));
                }
                if params.outcome == connreg::Outcome::OutcomeUnknown {
                    // An execute whose outcome is unknown: what a dispatcher
                    // retries or settles.
                    self.plant(PlantedBug::ExecuteAfterSettle);
                    self.plant(PlantedBug::UnknownSettledCompleted);
                    if !self.released.contains(&key) {
                        self.plant(PlantedBug::Store(Plant::SettleKeepsUnknown));
                    }
                }
                self.settled_fence.insert(key.0, key.1);
            }
            Request::Heartbeat { params }
                if to_registry && self.rows.get(&params.replica).is_some_and(|r| r.active > 0) =>
            {
                self.plant(PlantedBug::SilentRelease);
            }
            Request::Drain { .. } if to_registry => {
                let draining = self
                    .rows
                    .values()
                    .filter(|r| r.state == ReplicaState::Draining)
                    .count();
                if draining >= DRAINING_TRACKED {
                    self.plant(PlantedBug::DrainLostInCrowd);
                }
            }
            Request::Register { params } if to_registry => {
                let mine = self
                    .rows
                    .get(&params.spec.id)
                    .is_some_and(|r| r.state == ReplicaState::Offline && r.circuit_open);
                if mine {
                    let offline = self
                        .rows
                        .values()
                        .filter(|r| r.state == ReplicaState::Offline)
                        .count();
                    if offline > OFFLINE_TRACKED {
                        self.plant(PlantedBug::CircuitResetInCrowd);
                    }
                }
            }
            Request::Page { query } => {
                if let Some(c) = &query.cursor {
                    call.continuation = true;
                    self.call_cursor.insert(id, c.clone());
                }
            }
            Request::Execute { assignment } => {
                let key = (
                    to.to_string(),
                    assignment.identity.action.clone(),
                    assignment.reservation.fence,
                );
                let n = self.open_executes.entry(key.clone()).or_insert(0);
                *n += 1;
                if *n > 1 {
                    self.plant(PlantedBug::SharedStopSignal);
                }
                if self.cancels_sent.contains(&key) {
                    self.plant(PlantedBug::CancelForgotten);
                }
                self.plant(PlantedBug::ExecuteRunsTwice);
                call.execute = Some(key);
            }
            Request::Cancel { action, fence } => {
                self.cancels_sent
                    .insert((to.to_string(), action.clone(), *fence));
            }
            _ => {}
        }
        self.calls.insert(id, call);
    }

    fn reply(&mut self, id: u64, resp: &Response) {
        use connreg::plant::Plant;
        let continuation = self.calls.get(&id).is_some_and(|c| c.continuation);
        let to_registry = self.calls.get(&id).is_some_and(|c| c.to_registry);
        let op = match self.close(id) {
            Some(op) => op,
            None => return,
        };
        for kind in answer_kind(resp, continuation) {
            self.fire(format!("answer:{op}:{kind}"));
        }
        let kind = resp.error_kind();
        match resp {
            Response::Resolve { result } => {
                match kind {
                    Some("replica_unavailable") => {
                        self.plant(PlantedBug::Store(Plant::FailoverOnRetry))
                    }
                    Some("no_capacity") => self.plant(PlantedBug::Store(Plant::OverCapacity)),
                    Some("conflict") => self.plant(PlantedBug::Store(Plant::CrossTenantReturn)),
                    Some("unavailable") => self.plant(PlantedBug::CommitReplyLostAsFailure),
                    _ => {}
                }
                if let Ok(r) = result {
                    let a = &r.assignment;
                    if r.kind == ResolveKind::Created {
                        self.plant(PlantedBug::Store(Plant::FencesOutOfOrder));
                    }
                    if self.routes.contains_key(&a.identity.action) {
                        // An action ID resolved again (shared, or reused).
                        self.plant(PlantedBug::SharedJournalByAction);
                    }
                    let moved = self
                        .routes
                        .get(&a.identity.action)
                        .is_some_and(|route| route.replica != a.destination.replica);
                    if moved {
                        self.plant(PlantedBug::Store(Plant::FailoverOnRetry));
                    }
                    self.routes.insert(
                        a.identity.action.clone(),
                        Route {
                            tenant: a.identity.tenant.clone(),
                            replica: a.destination.replica.clone(),
                            fence: a.reservation.fence,
                        },
                    );
                }
            }
            Response::Drain { result: Ok(r) } if to_registry => {
                // The store applies drains one by one within a step, before
                // the step's snapshot: count the drains answered so far.
                let before = self
                    .rows
                    .iter()
                    .filter(|(id, row)| **id != r.spec.id && row.state == ReplicaState::Draining)
                    .count();
                if before >= DRAINING_TRACKED {
                    self.plant(PlantedBug::DrainLostInCrowd);
                }
                let row = self.rows.entry(r.spec.id.clone()).or_insert(Row {
                    state: r.state,
                    active: r.active,
                    circuit_open: r.circuit.open,
                    consecutive_unknown: r.circuit.consecutive_unknown,
                });
                row.state = ReplicaState::Draining;
            }
            Response::RouteGet {
                result: Ok(Some(_)),
            } => {
                self.plant(PlantedBug::Store(Plant::RouteGetIgnoresRelease));
            }
            Response::Settle { .. } if kind == Some("fence_lost") => {
                self.plant(PlantedBug::Store(Plant::IgnoreFence));
            }
            Response::Heartbeat {
                result: Ok(HeartbeatOutcome::Applied),
            } => {
                self.plant(PlantedBug::Store(Plant::HeartbeatAdvancesRevision));
                self.plant(PlantedBug::Store(Plant::HeartbeatKeepsLease));
            }
            Response::Maintain { result: Ok(m) } if to_registry => {
                if !m.expired.is_empty() {
                    self.plant(PlantedBug::MaintainOvercount);
                }
                if m.expired.len() >= MAINTENANCE_PAGE as usize {
                    self.plant(PlantedBug::MaintainPageStopsEarly);
                }
                if m.expired.len() >= MAINTENANCE_SHRUNK_BATCH as usize {
                    self.plant(PlantedBug::MaintenanceBatchShrinks);
                }
            }
            Response::Page { result } => {
                let cursor = self.call_cursor.remove(&id);
                match result {
                    Err(e) if e.kind == "stale_cursor" => {
                        self.plant(PlantedBug::Store(Plant::MixedRevisionPages))
                    }
                    Ok(p) => {
                        if cursor.is_none() && p.revision.0 >= 2 {
                            self.plant(PlantedBug::Store(Plant::StaleStandbyReads));
                        }
                        if cursor.is_some() && !p.entries.is_empty() {
                            self.plant(PlantedBug::Store(Plant::PageSkipsNext));
                        }
                        if let Some(c) = cursor
                            && self
                                .page_revisions
                                .get(&c)
                                .is_some_and(|r| *r != p.revision)
                        {
                            self.plant(PlantedBug::Store(Plant::MixedRevisionPages));
                        }
                        if let Some(next) = &p.next {
                            self.page_revisions.insert(next.clone(), p.revision);
                        }
                    }
                    Err(_) => {}
                }
            }
            _ => {}
        }
    }
}

/// The probes of a whole trace.
pub fn of_records<'a>(records: impl IntoIterator<Item = &'a Record>) -> BTreeMap<String, u64> {
    let mut p = Probes::new();
    p.observe_all(records);
    p.into_hits()
}

/// How many seeds fired each probe of the catalogue (0 for the ones that
/// never did), and the required ones that never fired.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Reach {
    /// Seeds that fired each probe, for every probe that fired.
    pub fired: BTreeMap<String, u64>,
    /// Every probe of the catalogue that no seed fired.
    pub never: Vec<String>,
    /// The probes the scenario requires (`[expect] reach`).
    pub required: Vec<String>,
    /// The required probes no seed fired.
    pub missing: Vec<String>,
}

impl Reach {
    /// The reach of the seeds whose fired probes are `per_seed`.
    pub fn of<'a>(
        per_seed: impl IntoIterator<Item = &'a BTreeSet<String>>,
        required: &[String],
    ) -> Reach {
        let mut fired: BTreeMap<String, u64> = BTreeMap::new();
        for seed in per_seed {
            for name in seed {
                *fired.entry(name.clone()).or_insert(0) += 1;
            }
        }
        let never = catalog()
            .into_iter()
            .filter(|n| !fired.contains_key(n))
            .collect();
        let missing = required
            .iter()
            .filter(|n| !fired.contains_key(*n))
            .cloned()
            .collect();
        Reach {
            fired,
            never,
            required: required.to_vec(),
            missing,
        }
    }

    /// The sweep's failure message when a required probe never fired.
    pub fn missing_message(&self, seeds: u64) -> Option<String> {
        (!self.missing.is_empty()).then(|| {
            format!(
                "required probe(s) never fired over {seeds} seed(s): {} ([expect] reach)",
                self.missing.join(", ")
            )
        })
    }
}

#[cfg(test)]
mod tests;
