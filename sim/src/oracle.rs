//! The differential oracle (`connreg-sim oracle TRACE`, and the
//! `oracle_agrees` check of every PostgreSQL run): the trace's registry
//! calls replayed against a fresh in-memory registry, in commit order, each
//! at the registry clock it recorded, must get the answers the trace
//! recorded.
//!
//! What is compared:
//!
//! - **Setup publications** and **calls with a commit position** (every
//!   call of an in-memory trace, whose order is the commit order; on
//!   PostgreSQL, the answers that carry `reply.commit`): replayed in
//!   order on the registry, each answer compared.
//! - **Other calls without a position** on PostgreSQL (error answers,
//!   successes that wrote nothing): the call ran within its step,
//!   so it decided between two of the step's commits. It is tried at each
//!   place between them, on a copy of the registry (nothing it does is
//!   kept), and agrees when some place gives the recorded answer.
//! - **Reads** on PostgreSQL (a held route's lock-free `existing`, route
//!   lookups, catalog pages and revisions: each reads one snapshot and
//!   commits nothing) carry the highest commit their
//!   snapshot showed (`read_at`): each is compared after the step's
//!   commits up to that one and before the rest. A commit with a lower
//!   sequence may have been missing from the snapshot (its sequence taken,
//!   its COMMIT not yet done): the read names such sequences
//!   (`read_unseen`), and may then agree at a place before the first of
//!   them, counted (`read_earlier`). A snapshot
//!   past every commit made so far is a divergence, unless the step holds
//!   an answer whose commit went unrecorded (`unavailable`, retried). A
//!   retried call's read found its own first attempt's commit, whose
//!   sequence was lost with the reply: it is taken first at its place, and
//!   before any earlier read of the step that disagrees without it.
//! - **Fences** are compared up to renaming: the fence numbers of two
//!   backends need not be equal, so the oracle keeps a one-to-one map
//!   (built as answers name fences) and translates the fences the calls
//!   present. A fence that maps to two others is a divergence. Catalog
//!   page cursors are translated the same way.
//! - **Errors** are compared by kind, not message.
//!
//! - **Rows a concurrent call held**: on PostgreSQL a new route skips a
//!   replica whose row another transaction holds (ROUTE-6), and a
//!   maintenance batch leaves such a replica, or a hold whose rows are
//!   busy, to the next call (LEASE-2, PIN-8). When a resolve or a
//!   maintenance answer differs only by such rows, and another call of
//!   the same step names them, the reference decides again with those
//!   replicas held ([`MemoryRegistry::holding`]).
//! - **A backend's own retries**: a resolve answered `existing` where the
//!   reference creates the route, or re-reserves a released one, is the
//!   PostgreSQL backend's retry on a fresh connection after the first
//!   attempt's COMMIT reply was lost (ROUTE-3, PIN-3: the retry finds the
//!   reservation the first attempt committed); it is counted (`retried`)
//!   and compared as the reference's `created` or `reserved`, only for a
//!   call whose trace line says the backend retried it (`retried`). The
//!   first attempt ranked replicas by a snapshot that may predate the
//!   answer's step: such an answer agrees where the reference can pick
//!   its replica (eligible, with capacity; the other replicas held if it
//!   is not the first choice), and its route is made there.
//! - **`more` read before a concurrent renewal**: a maintenance batch
//!   passes over an expired replica whose row another call of the step
//!   holds (`SKIP LOCKED`), and its `more` reads a snapshot taken before
//!   that call's commit, which the commit order puts first (a heartbeat
//!   renewing the lease): `more = true` where the reference, after the
//!   renewal, finds nothing left. When that is the only difference and
//!   another call of the step names a replica, it is counted
//!   (`stale_more`) and agrees: `more = true` only asks for another call.
//!
//! - **`unavailable` answers** (a database fault: the call may or may not
//!   have committed) are counted and not compared; a writing call's is
//!   kept pending ([`UNKNOWN_CALLS_MAX`]). A later answer that disagrees is
//!   tried again (at its place, a read at its snapshot's, an answer
//!   searched within its step after the step's last commit) with the
//!   pending calls taken as committed just before it: with at most
//!   [`UNKNOWN_SUBSETS_CALLS_MAX`] pending, every combination, the
//!   fewest first (a retry's answer tells of its own call only, a
//!   maintenance batch or a capacity answer of several); with more, each
//!   alone and then all of them. The first that agrees is kept, the others stay
//!   pending (`unknown_committed`); a kept choice that a later answer
//!   refutes is revised (`backtrack`). A call may also have committed
//!   where it was answered, before commits that came after it (a
//!   publication, routes that moved the counts): when a later answer
//!   disagrees whatever is taken just before it, the step that answered
//!   the calls is replayed with them taken as committed at its end, each
//!   combination in turn (`unknown_where_answered`). Pending calls are taken as never committed once
//!   [`UNKNOWN_HORIZON_ANSWERS`] answers agreed after the last of them; a
//!   divergence after one says how many were skipped.

mod backtrack;
mod file;
mod held;
mod rows;
mod snapshot;
mod unknown;

pub use backtrack::{DECISION_RECORDS_MAX, DECISIONS_OPEN_MAX, REVISIONS_MAX};
pub use file::{check_lines, config_of, repro};
use rows::{RouteRows, rows_named};
use std::collections::{BTreeMap, BTreeSet};

use connreg::{ManualClock, MemoryRegistry, RegistryConfig, ReplicaId, Timestamp};
use serde_json::Value;

use crate::backend::{poll_inline, respond_plainly};
use crate::trace::{Event, Record, StartInfo};
use crate::wire::{Request, Response};
use crate::world::CLOCK_START_MS;

/// The invariant a divergence breaks, with the rules a differential check
/// protects: every answer a backend gives is one the reference gives.
pub const ORACLE_AGREES: (&str, &str) = ("oracle_agrees", "SIM-4");

/// Most answers one step may hold without a commit position before the
/// oracle refuses to search their places (the search tries each at every
/// place between the step's commits).
pub const UNPLACED_PER_STEP_MAX: usize = 4_096;

/// The first call whose answer the reference does not give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    /// Trace line (1-based) of the answer.
    pub line: u64,
    /// The call's ID (`rpc.id`); 0 for a setup publication.
    pub id: u64,
    /// The operation.
    pub op: String,
    /// The request, as JSON.
    pub request: String,
    /// The recorded answer, as JSON.
    pub recorded: String,
    /// The reference's answer, as JSON (at the place nearest the recorded
    /// one for a call searched among places).
    pub replayed: String,
    /// Why they differ.
    pub detail: String,
}

/// What the oracle did.
#[derive(Debug, Clone, Default)]
pub struct OracleReport {
    /// Answers replayed in commit order and compared.
    pub ordered: u64,
    /// Answers without a commit position, placed by searching their step.
    pub placed: u64,
    /// Lock-free reads placed by the snapshot they read (`read_at`).
    pub positioned: u64,
    /// Lock-free reads that agree only at an earlier place of their step:
    /// a commit with a lower sequence than the highest their snapshot
    /// showed had not committed yet when it was taken.
    pub read_earlier: u64,
    /// `unavailable` answers skipped (commit unknown).
    pub unknown: u64,
    /// Times an answer agreed only once `unavailable` writing calls before
    /// it (all, or one of them) were taken as committed.
    pub unknown_committed: u64,
    /// Of those, calls taken as committed where they were answered (at
    /// the end of their own step), before the commits that came between
    /// them and the answer that needed them.
    pub unknown_where_answered: u64,
    /// Resolves answered `existing` where the reference creates the route or
    /// re-reserves a released one:
    /// the backend's own retry after a lost COMMIT reply found what its
    /// first attempt committed.
    pub retried: u64,
    /// Maintenance answers whose `more = true` read a replica another call
    /// of the step renewed in the meantime, where the reference says
    /// `false`.
    pub stale_more: u64,
    /// Times a choice among pending `unavailable` calls (which of them
    /// committed) was revised: a later answer disagreed with it, and the
    /// trace was replayed from the choice with the next one.
    pub revised: u64,
    /// Fences renamed (distinct fences seen in answers).
    pub fences: u64,
    /// The first divergence, if any.
    pub divergence: Option<Divergence>,
    /// The trace's `start` line.
    pub start: Option<StartInfo>,
}

impl OracleReport {
    /// True when every compared answer agreed.
    pub fn ok(&self) -> bool {
        self.divergence.is_none()
    }
}

/// One answer waiting for its step to end.
#[derive(Debug, Clone)]
struct Answer {
    line: u64,
    id: u64,
    request: Request,
    recorded: Response,
    clock: Option<u64>,
    commit: Option<u64>,
    /// The highest commit the snapshot of a lock-free read showed.
    read_at: Option<u64>,
    /// With `read_at`: the sequences below it the snapshot did not show.
    read_unseen: Vec<u64>,
    /// The backend ran the call again after losing its connection.
    retried: bool,
}

/// The one-to-one renaming between the trace's values and the
/// reference's: fences (numbers) and page cursors (strings).
#[derive(Debug, Default, Clone)]
struct Renaming {
    /// By the trace's value (as JSON text), the reference's.
    to_reference: BTreeMap<String, Value>,
    /// By the reference's value (as JSON text), the trace's.
    to_trace: BTreeMap<String, Value>,
}

/// Keys whose values are renamed: fence numbers and page cursors, and the
/// operator identity an audit entry records (each backend's own: the
/// in-memory embedding's name, the PostgreSQL control role).
fn renamed_key(key: &str) -> bool {
    matches!(key, "fence" | "next" | "cursor" | "operator")
}

impl Renaming {
    /// `request` with the trace's fences and cursors replaced by the
    /// reference's (values never seen in an answer are kept).
    fn request(&self, request: &Request) -> Request {
        let Ok(mut v) = serde_json::to_value(request) else {
            return request.clone();
        };
        self.rewrite(&mut v);
        serde_json::from_value(v).unwrap_or_else(|_| request.clone())
    }

    fn rewrite(&self, v: &mut Value) {
        match v {
            Value::Object(map) => {
                for (k, child) in map.iter_mut() {
                    if renamed_key(k) && !child.is_null() {
                        if let Some(r) = self.to_reference.get(&child.to_string()) {
                            *child = r.clone();
                        }
                    } else {
                        self.rewrite(child);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|c| self.rewrite(c)),
            _ => {}
        }
    }

    /// Compares a recorded answer with the reference's: equal up to the
    /// renaming, extended by the new pairs this answer names. Returns the
    /// extended renaming, or where they differ.
    fn agree(&self, recorded: &Value, replayed: &Value) -> Result<Renaming, String> {
        let mut next = self.clone();
        next.walk(recorded, replayed, "")?;
        Ok(next)
    }

    fn walk(&mut self, a: &Value, b: &Value, path: &str) -> Result<(), String> {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                for (k, va) in x {
                    let vb = y.get(k).unwrap_or(&Value::Null);
                    let here = format!("{path}.{k}");
                    if renamed_key(k) && !va.is_null() && !vb.is_null() {
                        self.pair(va, vb, &here)?;
                    } else {
                        self.walk(va, vb, &here)?;
                    }
                }
                if let Some(k) = y.keys().find(|k| !x.contains_key(*k)) {
                    return Err(format!("{path}.{k}: absent from the recorded answer"));
                }
                Ok(())
            }
            (Value::Array(x), Value::Array(y)) => {
                if x.len() != y.len() {
                    return Err(format!(
                        "{path}: {} items recorded, {} replayed",
                        x.len(),
                        y.len()
                    ));
                }
                for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                    self.walk(va, vb, &format!("{path}[{i}]"))?;
                }
                Ok(())
            }
            _ if a == b => Ok(()),
            _ => Err(format!("{path}: recorded {a}, replayed {b}")),
        }
    }

    fn pair(&mut self, a: &Value, b: &Value, path: &str) -> Result<(), String> {
        match (
            self.to_reference.get(&a.to_string()),
            self.to_trace.get(&b.to_string()),
        ) {
            (Some(x), _) if x != b => Err(format!(
                "{path}: recorded {a} (the reference's {x} until now), replayed {b}"
            )),
            (_, Some(y)) if y != a => Err(format!(
                "{path}: recorded {a}, replayed {b} (which stood for the recorded {y} until now)"
            )),
            _ => {
                self.to_reference.insert(a.to_string(), b.clone());
                self.to_trace.insert(b.to_string(), a.clone());
                Ok(())
            }
        }
    }
}

/// The answer as the oracle compares it: errors by kind only.
fn comparable(r: &Response) -> Value {
    let mut v = serde_json::to_value(r).unwrap_or(Value::Null);
    if let Some(result) = v.get_mut("result")
        && let Some(err) = result.get_mut("Err")
        && let Some(obj) = err.as_object_mut()
    {
        obj.remove("message");
    }
    v
}

/// Most writing calls answered `unavailable` the oracle keeps pending
/// until a later answer decides whether they committed.
pub const UNKNOWN_CALLS_MAX: usize = 64;

/// Most pending calls whose every combination the oracle tries against
/// an answer that disagrees (2^6 - 1 = 63 replays of them at most); with
/// more pending, each alone and then all of them.
pub const UNKNOWN_SUBSETS_CALLS_MAX: usize = 6;

/// Answers that agree after the last `unavailable` one before the pending
/// calls are taken as never committed: a commit whose reply was lost
/// shows in the next few answers that touch what it wrote.
pub const UNKNOWN_HORIZON_ANSWERS: u32 = 256;

/// Most replicas one replayed decision may skip as held by concurrent
/// calls before the oracle stops looking for the recorded pick.
pub const HELD_TRIES_MAX: usize = 16;

/// Most earlier places, in one step, at which the oracle reads what a new
/// route's decision would have picked (for decisions that may have
/// ranked by a snapshot read before a concurrent commit).
pub const STALE_PLACE_READS_MAX: usize = 4096;

/// True when a recorded resolve answer says `existing` and the
/// reference's says `created`: what a backend's own retry answers after
/// its first attempt committed and the COMMIT's reply was lost.
fn retried_after_lost_commit(recorded: &Value, replayed: &Value) -> bool {
    let kind = &replayed["result"]["Ok"]["kind"];
    recorded["op"] == "resolve"
        && recorded["result"]["Ok"]["kind"] == "existing"
        && (kind == "created" || kind == "reserved")
}

/// True when a maintenance answer says `more` where the reference,
/// otherwise agreeing, says nothing is left.
fn more_read_before_a_renewal(recorded: &Value, replayed: &Value) -> bool {
    recorded["op"] == "maintain"
        && recorded["result"]["Ok"]["more"] == true
        && replayed["result"]["Ok"]["more"] == false
}

fn json(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// True for a call the registry answers (not a replica's work).
fn registry_call(r: &Request) -> bool {
    !matches!(r, Request::Execute { .. } | Request::Cancel { .. })
}

/// The differential oracle over one trace, fed record by record.
pub struct Oracle {
    registry: MemoryRegistry,
    clock: ManualClock,
    /// Every call's place is its trace place (an in-memory trace).
    trace_ordered: bool,
    calls: BTreeMap<u64, Request>,
    step: Vec<Answer>,
    step_t: Option<u64>,
    renaming: Renaming,
    report: OracleReport,
    /// Records seen: the first must be the `start` line.
    records: u64,
    /// How many of the current step's answers name each row (see
    /// [`rows_named`]): the rows concurrent calls may have held.
    step_touches: BTreeMap<String, u32>,
    /// Maintenance calls answered `unavailable` since the last one that
    /// agreed, each with its clock: they may have committed (a failover
    /// keeps a commit whose answer was lost), which only a later
    /// maintenance answer tells.
    /// Each with its call's ID, its clock and the request as renamed.
    unknown_calls: Vec<(u64, Option<u64>, Request)>,
    /// Answers agreed since the last call joined `unknown_calls`.
    unknown_since: u32,
    /// Each action's route as the last resolve answer showed it.
    routes: BTreeMap<String, RouteRows>,
    /// Every replica a registration answered for.
    replicas: BTreeSet<ReplicaId>,
    /// The current step's new routes (by call id) whose decisions may
    /// have ranked by a snapshot read at an earlier place of the step
    /// ([`Oracle::stale_resolves`]), and that pick their recorded replica at
    /// one of those places.
    stale_ranked: BTreeSet<u64>,
    /// Reads of earlier places in the current step (at most
    /// [`STALE_PLACE_READS_MAX`]).
    stale_reads: usize,
    /// The highest commit sequence recorded so far.
    highest_commit: u64,
    /// True once some commit may have gone unrecorded (an `unavailable`
    /// answer, a retried call).
    unrecorded_commits: bool,
    error: Option<String>,
    /// Choices not to take again among pending `unavailable` calls, by the
    /// trace line of the answer they were taken for (see `backtrack`).
    excluded: BTreeMap<u64, BTreeSet<u64>>,
    /// The oracle as it was before the record being taken in, kept while
    /// a choice among pending calls may be made for it.
    checkpoint: Option<backtrack::Checkpoint>,
    /// The latest choice among pending calls that another could replace.
    decision: Option<backtrack::Decision>,
}

impl std::fmt::Debug for Oracle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oracle")
            .field("report", &self.report)
            .finish_non_exhaustive()
    }
}

impl Oracle {
    /// An oracle whose reference is a fresh in-memory registry configured
    /// as the run's (`config`: the scenario's, see
    /// [`crate::fleet::FleetPlan`]).
    pub fn new(config: RegistryConfig) -> Result<Oracle, String> {
        let clock = ManualClock::new(Timestamp(CLOCK_START_MS));
        let registry = MemoryRegistry::new(clock.clone(), config)
            .map_err(|e| format!("registry configuration: {e}"))?;
        Ok(Oracle {
            registry,
            clock,
            trace_ordered: true,
            calls: BTreeMap::new(),
            step: Vec::new(),
            step_t: None,
            renaming: Renaming::default(),
            report: OracleReport::default(),
            records: 0,
            step_touches: BTreeMap::new(),
            unknown_calls: Vec::new(),
            unknown_since: 0,
            routes: BTreeMap::new(),
            replicas: BTreeSet::new(),
            stale_ranked: BTreeSet::new(),
            stale_reads: 0,
            highest_commit: 0,
            unrecorded_commits: false,
            error: None,
            excluded: BTreeMap::new(),
            checkpoint: None,
            decision: None,
        })
    }

    /// True once a divergence was found (later records are not compared).
    pub fn diverged(&self) -> bool {
        self.report.divergence.is_some()
    }

    /// Takes in one record, at trace line `line` (1-based).
    pub fn observe(&mut self, line: u64, record: &Record) {
        if self.diverged() || self.error.is_some() {
            return;
        }
        self.take_checkpoint(Some((line, record)));
        self.remember(line, record);
        self.take_in(line, record);
        self.checkpoint = None;
        if self.diverged() {
            self.revise();
        }
    }

    fn take_in(&mut self, line: u64, record: &Record) {
        self.records += 1;
        match &record.event {
            Event::Start(start) => {
                // The in-memory backend runs inline: its trace order is its
                // commit order, call for call.
                self.trace_ordered = start.deterministic;
                if !start.deterministic && !start.commit_ordered {
                    self.error = Some(
                        "the trace is not commit-ordered (`start.commit_ordered` is false): \
                         its answers cannot be replayed in commit order; make a new trace"
                            .into(),
                    );
                }
                self.report.start = Some((**start).clone());
            }
            _ if self.records == 1 => {
                self.error = Some("a trace starts with its `start` line".into());
            }
            Event::Setup {
                publication,
                revision,
                ..
            } => {
                self.flush();
                self.clock.set(Timestamp(CLOCK_START_MS));
                let request = Request::Publish {
                    publication: publication.clone(),
                };
                let recorded = Response::Publish {
                    result: Ok(*revision),
                };
                let answer = Answer {
                    line,
                    id: 0,
                    request,
                    recorded,
                    clock: Some(CLOCK_START_MS),
                    commit: None,
                    read_at: None,
                    read_unseen: Vec::new(),
                    retried: false,
                };
                self.replay_ordered(&answer);
            }
            Event::Rpc { id, req, .. } if registry_call(req) => {
                self.calls.insert(*id, req.clone());
            }
            Event::Reply {
                id,
                resp,
                commit,
                read_at,
                read_unseen,
                retried,
                clock,
                ..
            } => {
                let Some(request) = self.calls.remove(id) else {
                    return;
                };
                if matches!(resp, Response::Refused { .. }) {
                    return;
                }
                if let Response::Resolve { result: Ok(r) } = resp {
                    let rows = RouteRows {
                        replica: r.assignment.destination.replica.to_string(),
                        scopes: (r.assignment.reservation.scopes.iter())
                            .map(|s| s.to_string())
                            .collect(),
                    };
                    let action = r.assignment.identity.action.to_string();
                    self.routes.insert(action, rows);
                }
                if let (Request::Register { params }, Response::Register { result: Ok(_) }) =
                    (&request, resp)
                {
                    self.replicas.insert(params.spec.id.clone());
                }
                let answer = Answer {
                    line,
                    id: *id,
                    request,
                    recorded: resp.clone(),
                    clock: *clock,
                    commit: *commit,
                    read_at: *read_at,
                    read_unseen: read_unseen.clone(),
                    retried: *retried,
                };
                if self.trace_ordered {
                    self.replay_ordered(&answer);
                } else {
                    if self.step_t != Some(record.t) {
                        self.flush();
                        self.step_t = Some(record.t);
                    }
                    self.step.push(answer);
                }
            }
            Event::Snapshot(_) | Event::Check { .. } | Event::End(_) => self.flush(),
            _ => {}
        }
    }

    /// The verdict, once every record is in; an error when the trace
    /// cannot be judged (not commit-ordered, no `start` line).
    pub fn finish(mut self) -> Result<OracleReport, String> {
        self.take_checkpoint(None);
        self.flush();
        self.checkpoint = None;
        if self.diverged() && self.revise() && !self.diverged() {
            // Replayed with another choice up to the last record: the
            // step still open is the revised oracle's to finish.
            return self.finish();
        }
        if let Some(e) = self.error {
            return Err(e);
        }
        if self.records == 0 {
            return Err("the trace is empty: it has no start line".into());
        }
        self.report.fences = self.renaming.to_reference.len() as u64;
        Ok(self.report)
    }

    /// Sets the reference's clock to the call's recorded one.
    fn set_clock(&self, a: &Answer) {
        if let Some(ms) = a.clock {
            self.clock.set(Timestamp(ms));
        }
    }

    fn unknown(a: &Answer) -> bool {
        a.recorded.error_kind() == Some("unavailable")
    }

    /// Replays one answer at the registry's current place, keeping what it
    /// does; a different answer is the divergence.
    fn replay_ordered(&mut self, a: &Answer) {
        if Self::unknown(a) {
            self.note_unknown(a);
            return;
        }
        self.set_clock(a);
        let request = self.renaming.request(&a.request);
        // The reference as it stands, for deciding the unknown calls
        // before this one should this one disagree.
        let before = if self.unknown_calls.is_empty() {
            None
        } else {
            self.registry.fork().ok()
        };
        let held = match self.held_for(a, &request) {
            Ok(h) => h,
            Err(e) => {
                self.error = Some(e);
                return;
            }
        };
        let registry = self.registry.clone().holding(held);
        let replayed = poll_inline(respond_plainly(registry, request.clone()));
        self.report.ordered += 1;
        let recorded = comparable(&a.recorded);
        let mut replayed_value = comparable(&replayed);
        if a.retried && retried_after_lost_commit(&recorded, &replayed_value) {
            // The backend retried the call on a fresh connection after its
            // COMMIT's reply was lost: the retry found the route the first
            // attempt made or re-reserved (ROUTE-3, PIN-3), the decision
            // the reference makes now.
            replayed_value["result"]["Ok"]["kind"] = Value::from("existing");
            self.report.retried += 1;
        }
        if !self.trace_ordered
            && more_read_before_a_renewal(&recorded, &replayed_value)
            && self
                .named_by_others(a)
                .iter()
                .any(|row| row.starts_with("replica:"))
        {
            // The batch passed over a replica another call of the step
            // held, and read `more` before that call renewed its lease.
            replayed_value["result"]["Ok"]["more"] = Value::from(true);
            self.report.stale_more += 1;
        }
        match self.renaming.agree(&recorded, &replayed_value) {
            Ok(next) => {
                self.renaming = next;
                self.unknown_agreed();
            }
            Err(detail) => {
                if let Some(before) = before
                    && let Some(registry) = self.committed_unknown_calls(a, &request, &before)
                {
                    self.registry = registry;
                    return;
                }
                self.diverge(a, &replayed, detail)
            }
        }
    }

    /// What `a` answers at the registry's current place, on a copy when it
    /// may write.
    fn try_here(&self, a: &Answer) -> Result<Response, String> {
        self.set_clock(a);
        let request = self.renaming.request(&a.request);
        let target = if request.mutates() {
            self.registry
                .fork()
                .map_err(|e| format!("copying the reference: {e}"))?
        } else {
            self.registry.clone()
        };
        let target = target.holding(self.held_for_retried(a, &request)?);
        Ok(poll_inline(respond_plainly(target, request)))
    }

    /// Replays the step's answers: those with a commit position in their
    /// order, each of the others at every place between them until one
    /// agrees.
    fn flush(&mut self) {
        let step = std::mem::take(&mut self.step);
        self.step_t = None;
        self.stale_ranked.clear();
        self.stale_reads = 0;
        if step.is_empty() || self.diverged() {
            return;
        }
        self.step_touches.clear();
        for a in &step {
            for (row, n) in rows_named(a, &self.routes) {
                *self.step_touches.entry(row).or_default() += n;
            }
        }
        let unrecorded = step.iter().any(|a| a.retried || Self::unknown(a));
        let (committed, rest): (Vec<Answer>, Vec<Answer>) =
            step.into_iter().partition(|a| a.commit.is_some());
        // An `unavailable` answer is never compared, whether or not its
        // snapshot's place was read before the connection was lost.
        let (positioned, mut unplaced): (Vec<Answer>, Vec<Answer>) = rest
            .into_iter()
            .partition(|a| a.read_at.is_some() && !Self::unknown(a));
        let Some(mut reads) = self.snapshot_reads(positioned, &committed, unrecorded) else {
            return;
        };
        let stale = self.stale_resolves(&committed);
        let mut after: BTreeSet<String> = stale.iter().map(|s| s.row.clone()).collect();
        // The step's writing calls answered `unavailable`, by the line of
        // the first: where each was answered is a place it may have
        // committed at.
        let mut lost = Vec::new();
        let mut lost_line = None;
        unplaced.retain(|a| {
            let unknown = Self::unknown(a);
            if unknown {
                self.note_unknown(a);
                if a.request.mutates() {
                    lost.push(a.id);
                    lost_line.get_or_insert(a.line);
                }
            }
            !unknown
        });
        if unplaced.len() > UNPLACED_PER_STEP_MAX {
            self.error = Some(format!(
                "a step holds {} answers without a commit position, past UNPLACED_PER_STEP_MAX ({UNPLACED_PER_STEP_MAX})",
                unplaced.len()
            ));
            return;
        }
        // The answer each unplaced call gets at each place, the last kept
        // for the report.
        let mut last: BTreeMap<usize, Response> = BTreeMap::new();
        let mut open: Vec<usize> = (0..unplaced.len()).collect();
        for place in 0..=committed.len() {
            let mut still = Vec::new();
            for i in open {
                let a = &unplaced[i];
                match self.compare_here(a) {
                    Ok(snapshot::Compared::Agrees { next, keep }) => {
                        self.accept(a, next, keep);
                        self.report.placed += 1;
                    }
                    Ok(snapshot::Compared::Differs { replayed, .. }) => {
                        last.insert(i, *replayed);
                        still.push(i);
                    }
                    Err(e) => {
                        self.error = Some(e);
                        return;
                    }
                }
            }
            open = still;
            if !self.read_snapshots_at(place, &mut reads) {
                return;
            }
            if let Some(c) = committed.get(place) {
                if !stale.is_empty() {
                    after = self.rank_at_place(place, after, &stale, &committed);
                }
                if !self.retried_reads_before(c, place, &mut reads) {
                    return;
                }
                self.replay_ordered(c);
                if self.diverged() {
                    return;
                }
            }
        }
        if let Some(line) = lost_line {
            self.commit_where_answered(line, &lost);
        }
        // Pending `unavailable` calls taken as committed for one answer
        // change what the step's other answers see: each is compared again
        // before its own turn at them.
        open.retain(|&i| {
            let a = &unplaced[i];
            if let Ok(snapshot::Compared::Agrees { next, keep }) = self.compare_here(a) {
                self.accept(a, next, keep);
                self.report.placed += 1;
                return false;
            }
            !self.agrees_with_unknowns(a)
        });
        if let Some(&i) = open.first() {
            let a = &unplaced[i];
            let replayed = last.remove(&i).unwrap_or(Response::Refused {
                reason: "not replayed".into(),
            });
            let detail = match self
                .renaming
                .agree(&comparable(&a.recorded), &comparable(&replayed))
            {
                Err(d) => format!(
                    "no place among the step's {} commits gives the recorded answer; after the last: {d}",
                    committed.len()
                ),
                Ok(_) => "no place gives the recorded answer".into(),
            };
            self.diverge(a, &replayed, detail);
        }
    }

    fn diverge(&mut self, a: &Answer, replayed: &Response, detail: String) {
        let detail = if self.report.unknown > 0 {
            format!(
                "{detail} ({} `unavailable` answers before it were taken as not committed)",
                self.report.unknown
            )
        } else {
            detail
        };
        self.report.divergence = Some(Divergence {
            line: a.line,
            id: a.id,
            op: a.request.op().to_string(),
            request: json(&a.request),
            recorded: json(&a.recorded),
            replayed: json(replayed),
            detail,
        });
    }
}

impl Divergence {
    /// The divergence as lines for a person: where, the call, both
    /// answers, why.
    pub fn lines(&self) -> Vec<String> {
        vec![
            format!(
                "the first differing call: trace line {}, call {} ({})",
                self.line, self.id, self.op
            ),
            format!("  request:   {}", self.request),
            format!("  recorded:  {}", self.recorded),
            format!("  reference: {}", self.replayed),
            format!("  {}", self.detail),
        ]
    }
}
