//! The trace: one JSON object a line, every event of a run in order.
//!
//! The schema is documented in `sim/TRACE.md`. Every line is a [`Record`]:
//! the simulated time `t` in milliseconds and one [`Event`], tagged by
//! `ev`. The trace hash is the MD5 of the whole trace's bytes; two runs with
//! the same hash wrote byte-identical traces.

use std::io::Write;

use connreg::inspect::ScopeUsage;
use connreg::{
    ActionId, CapabilityId, FenceToken, InstanceId, Publication, Replica, ReplicaId, ReplicaSpec,
    ReplicaState, Revision, RouteRecord, ScopeId, TenantId, Timestamp,
};
use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};

use crate::counters::Counters;
use crate::scenario::Expect;
use crate::wire::{Request, Response};

/// The trace format's version, in every `start` event.
pub const TRACE_FORMAT: u32 = 4;

/// The formats `check-trace` and `explain` read: format 3 only added what
/// points a reader at evidence (violation context, provenance), never
/// evidence a check needs; format 4 writes some snapshot rows compactly,
/// which this reader expands.
pub const TRACE_FORMATS_READ: [u32; 3] = [2, 3, 4];

/// One reservation a call released, as its answer names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ReleasedRef {
    /// The action.
    pub action: ActionId,
    /// The reservation's fence.
    pub fence: FenceToken,
    /// The replica that got a unit back.
    pub replica: ReplicaId,
    /// The scopes that got a unit back.
    pub scopes: Vec<ScopeId>,
}

impl ReleasedRef {
    /// The reservation `a` holds.
    pub fn of(a: &connreg::RouteAssignment) -> ReleasedRef {
        ReleasedRef {
            action: a.identity.action.clone(),
            fence: a.reservation.fence,
            replica: a.destination.replica.clone(),
            scopes: a.reservation.scopes.iter().cloned().collect(),
        }
    }
}

/// One line of the trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Simulated milliseconds since the run started.
    pub t: u64,
    /// What happened.
    #[serde(flatten)]
    pub event: Event,
}

/// Everything a trace line can say.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "ev")]
pub enum Event {
    /// The first line: what ran, and what the checker must know.
    Start(Box<StartInfo>),
    /// The fleet published before any host starts.
    Setup {
        /// The publication.
        publication: Publication,
        /// The revision it made.
        revision: Revision,
        /// The replicas the fleet provisions.
        replicas: Vec<ReplicaSpec>,
    },
    /// A call sent.
    Rpc {
        /// The call's ID.
        id: u64,
        /// The calling host.
        from: String,
        /// The called host.
        to: String,
        /// The request.
        req: Request,
    },
    /// An answer, recorded by the answering host before it is sent.
    Reply {
        /// The call's ID.
        id: u64,
        /// The answering host.
        from: String,
        /// The calling host.
        to: String,
        /// The answer.
        resp: Response,
        /// True when a fault dropped the answer after it was computed (and,
        /// for a registry, after the store committed).
        lost: bool,
        /// The commit sequence of the call's transaction (offloaded calls
        /// that committed something); absent otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        commit: Option<u64>,
        /// For an answer read from a snapshot without locks (a held
        /// route's `existing` on PostgreSQL): the highest commit sequence
        /// the snapshot showed; absent otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        read_at: Option<u64>,
        /// With `read_at`: the sequences below it, among the last 256, the
        /// snapshot did not show (commits still in progress, rolled-back
        /// sequences); absent when none.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        read_unseen: Vec<u64>,
        /// True when the backend ran the call again after losing its
        /// connection (the first attempt may have committed); absent
        /// otherwise.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        retried: bool,
        /// The registry clock (ms) the call decided at; absent for replica
        /// answers.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        clock: Option<u64>,
        /// The reservations the call released: a settlement that released
        /// (its own), a maintenance that expired replicas (every one on
        /// them; in-memory backend only, where the list is exact); absent
        /// otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        released: Option<Vec<ReleasedRef>>,
    },
    /// The caller received the answer to call `id`. An answer recorded in
    /// a `reply` without a `delivered` line never reached its caller
    /// (dropped, partitioned, too late, its caller gone).
    Delivered {
        /// The call's ID.
        id: u64,
    },
    /// A call that failed in transport, as its caller saw it.
    RpcFailed {
        /// The call's ID.
        id: u64,
        /// The calling host.
        from: String,
        /// The called host.
        to: String,
        /// `timeout`, `refused`, `reset`, ...
        error: String,
    },
    /// A provider side effect, recorded by the replica that performed it.
    Ledger {
        /// The `execute` call that caused it.
        rpc: u64,
        /// The action.
        action: ActionId,
        /// The tenant on whose behalf it ran.
        tenant: TenantId,
        /// The instance (the provider account) it ran against.
        instance: InstanceId,
        /// The replica (the host) it ran on.
        replica: ReplicaId,
        /// The provider account: the instance whose credentials were used.
        account: InstanceId,
        /// The fence of the assignment it ran under.
        fence: FenceToken,
    },
    /// A dispatcher started an action.
    ActionStart {
        /// The dispatcher host.
        dispatcher: String,
        /// The action's number on that dispatcher.
        n: u64,
        /// The action ID.
        action: ActionId,
        /// The tenant.
        tenant: TenantId,
        /// The capability.
        capability: CapabilityId,
    },
    /// A dispatcher's action ended.
    ActionEnd {
        /// The dispatcher host.
        dispatcher: String,
        /// The action's number on that dispatcher.
        n: u64,
        /// The action ID.
        action: ActionId,
        /// `completed`, `outcome_unknown`, `cancelled`, or `failed:<kind>`.
        result: String,
    },
    /// A restarted dispatcher reconciled an action its crash left open.
    Reconciled {
        /// The dispatcher host.
        dispatcher: String,
        /// The action's number on that dispatcher.
        n: u64,
        /// The action ID.
        action: ActionId,
        /// `cancelled` or `outcome_unknown` (settled so), `nothing_held`
        /// (no route, or its reservation already released), or
        /// `failed:<error kind>`.
        result: String,
    },
    /// A fault took effect, or ended.
    Fault(FaultEvent),
    /// Every network fault is repaired; the liveness phase starts.
    Heal {
        /// Every surviving dispatcher's actions must have ended by then.
        deadline_ms: u64,
    },
    /// Every dispatcher is done but reservations are still held: the run
    /// goes on, without workload or faults, until every reservation has
    /// ended (PIN-8, `reservations_end`). The end-of-run checks of the
    /// workload run here.
    Drain {
        /// Every reservation must have ended by then: the scenario's hold,
        /// two maintenance intervals and a call timeout after the drain
        /// began.
        until_ms: u64,
    },
    /// What changed in the store since the previous snapshot.
    Snapshot(Snapshot),
    /// An invariant did not hold.
    Violation(Violation),
    /// The checkers ran over the events since the previous check.
    Check {
        /// Events checked.
        events: u64,
        /// Violations found.
        violations: u64,
    },
    /// The last line: counters and the verdict.
    End(EndInfo),
}

/// The `start` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartInfo {
    /// [`TRACE_FORMAT`].
    pub format: u32,
    /// The scenario's name.
    pub scenario: String,
    /// The seed.
    pub seed: u64,
    /// `memory` or `postgres`.
    pub backend: String,
    /// The planted bug, if any.
    pub plant: Option<String>,
    /// Whether fault probabilities and fleet shape were drawn from the seed.
    pub swarm: bool,
    /// True when the run is byte-deterministic (the in-memory backend):
    /// the trace order is the store's commit order, which the
    /// order-sensitive checks rely on.
    pub deterministic: bool,
    /// True when the registry answers are in the store's commit order: on
    /// the in-memory backend (emission order is commit order) and on
    /// PostgreSQL (answers ordered by their commit sequence within each
    /// step). The order-sensitive checks run only on such traces.
    #[serde(default)]
    pub commit_ordered: bool,
    /// The scenario's expectations.
    pub expect: Expect,
    /// The simulator's crate version.
    #[serde(default)]
    pub version: String,
    /// The git revision the simulator was built from, or `unknown`.
    #[serde(default)]
    pub revision: String,
    /// The scenario file's name (no directory); absent for a scenario that
    /// was not read from a file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario_file: Option<String>,
    /// SHA-256 of the scenario file's bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario_sha256: Option<String>,
    /// Every value `--swarm` drew, by scenario key; empty without it.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub swarm_draws: std::collections::BTreeMap<String, serde_json::Value>,
    /// The registry's circuit policy in the run (SETTLE-5;
    /// `circuit_follows_outcomes`). Absent in older traces, whose circuits
    /// are then not judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub circuit: Option<connreg::CircuitPolicy>,
}

/// The `end` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndInfo {
    /// Simulation steps taken.
    pub steps: u64,
    /// Violations found.
    pub violations: u64,
    /// `violation` lines the trace keeps: all of them, unless more than
    /// `limits::TRACE_VIOLATIONS_MAX` were found.
    #[serde(default)]
    pub violations_recorded: u64,
    /// Counters.
    pub counters: Counters,
    /// True when every invariant and expectation held.
    pub ok: bool,
}

/// A fault event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "fault")]
pub enum FaultEvent {
    /// Hosts crashed.
    Crash {
        /// The hosts.
        hosts: Vec<String>,
    },
    /// Hosts restarted.
    Restart {
        /// The hosts.
        hosts: Vec<String>,
    },
    /// Messages between `a` and `b` (only from `a` to `b` when `oneway`)
    /// are dropped.
    Partition {
        /// One side.
        a: Vec<String>,
        /// The other side.
        b: Vec<String>,
        /// Only one direction.
        oneway: bool,
    },
    /// A partition ended.
    Repair {
        /// One side.
        a: Vec<String>,
        /// The other side.
        b: Vec<String>,
        /// Only one direction.
        oneway: bool,
    },
    /// Messages between `a` and `b` are held.
    Hold {
        /// One side.
        a: Vec<String>,
        /// The other side.
        b: Vec<String>,
    },
    /// Held messages are delivered.
    Release {
        /// One side.
        a: Vec<String>,
        /// The other side.
        b: Vec<String>,
    },
    /// Latency between `a` and `b` raised.
    Latency {
        /// One side.
        a: Vec<String>,
        /// The other side.
        b: Vec<String>,
        /// The new maximum, in milliseconds.
        max_ms: u64,
    },
    /// Latency between `a` and `b` restored.
    LatencyRestore {
        /// One side.
        a: Vec<String>,
        /// The other side.
        b: Vec<String>,
    },
    /// Random message loss on.
    Loss {
        /// Probability per message of breaking its link.
        rate: f64,
    },
    /// Random message loss off.
    LossEnd,
    /// Registry answers to `ops` will be dropped after commit.
    LoseAnswers {
        /// The operations.
        ops: Vec<String>,
        /// How many answers.
        count: u32,
    },
    /// The `lose_answers` window ended.
    LoseAnswersEnd,
    /// The database proxy closed connections: every open one (`mode`
    /// `all`), or the next one that commits, after the commit reached the
    /// server (`mode` `next_commit`).
    DbCut {
        /// `all` or `next_commit`.
        mode: String,
        /// Connections closed (`all`); 0 for `next_commit`, which is armed.
        connections: u64,
    },
    /// The database proxy holds every byte for `stall_ms` real milliseconds.
    DbStall {
        /// How long, in real milliseconds.
        stall_ms: u64,
    },
    /// The registry's database sessions were terminated by an administrator.
    DbTerminate {
        /// Sessions terminated.
        sessions: u64,
    },
    /// The database server was shut down immediately and started again.
    DbRestart,
    /// The primary was stopped immediately, its standby promoted, and the
    /// database proxy moved to it.
    DbFailover {
        /// Real milliseconds without a primary (stop and promotion).
        without_primary_ms: u64,
    },
    /// The standby was cut off from the primary's WAL (a `db_failover`'s
    /// `detach_ms`); commits from now on are on the primary only.
    DbStandbyDetached,
    /// A database fault's window ended; `unavailable` answers are allowed
    /// for the settle window after it (see `sim/TRACE.md`).
    DbFaultEnd {
        /// `db_cut`, `db_stall`, `db_terminate`, `db_restart` or
        /// `db_failover`.
        kind: String,
    },
    /// The registry clock jumped.
    ClockJump {
        /// By how much.
        by_ms: i64,
        /// The registry clock after the jump.
        clock: Timestamp,
    },
    /// A zone's replicas stopped heartbeating.
    ZoneSilence {
        /// The zone.
        zone: String,
    },
    /// A zone's replicas heartbeat again.
    ZoneSilenceEnd {
        /// The zone.
        zone: String,
    },
    /// Replicas of a group crashed.
    GroupCrash {
        /// The group.
        group: String,
        /// The replicas.
        replicas: Vec<String>,
    },
    /// Crashed replicas of a group started again.
    GroupRestart {
        /// The group.
        group: String,
        /// The replicas.
        replicas: Vec<String>,
    },
    /// Replicas of a group drained.
    GroupDrain {
        /// The group.
        group: String,
        /// The replicas.
        replicas: Vec<String>,
    },
}

/// One replica as the checkers need it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaRow {
    /// Identifier.
    pub id: ReplicaId,
    /// Lifecycle state.
    pub state: ReplicaState,
    /// Live reservations, as stored.
    pub active: u32,
    /// Capacity.
    pub capacity: u32,
    /// Circuit open.
    pub circuit_open: bool,
    /// Consecutive unknown outcomes.
    pub consecutive_unknown: u32,
    /// Lease end.
    pub lease_expires_at: Timestamp,
    /// Health sequence.
    pub health_seq: u64,
}

impl From<&Replica> for ReplicaRow {
    fn from(r: &Replica) -> Self {
        ReplicaRow {
            id: r.spec.id.clone(),
            state: r.state,
            active: r.active,
            capacity: r.spec.capacity,
            circuit_open: r.circuit.open,
            consecutive_unknown: r.circuit.consecutive_unknown,
            lease_expires_at: r.lease_expires_at,
            health_seq: r.health_seq,
        }
    }
}

/// One admission scope as the checkers need it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScopeRow {
    /// Identifier.
    pub id: ScopeId,
    /// Reservations counted, as stored.
    pub in_use: u32,
    /// Limit.
    pub limit: u32,
}

impl From<&ScopeUsage> for ScopeRow {
    fn from(s: &ScopeUsage) -> Self {
        ScopeRow {
            id: s.scope.id.clone(),
            in_use: s.in_use,
            limit: s.scope.limit,
        }
    }
}

/// A replica row whose only change since the previous snapshot is its
/// lease: an applied heartbeat. Every other column is as the replica's
/// previous row showed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRow {
    /// Identifier.
    pub id: ReplicaId,
    /// Lease end.
    pub lease_expires_at: Timestamp,
    /// Health sequence.
    pub health_seq: u64,
}

impl LeaseRow {
    /// `row` as its lease columns, if nothing else differs from `previous`.
    pub fn of(previous: &ReplicaRow, row: &ReplicaRow) -> Option<LeaseRow> {
        let same_rest = previous.id == row.id
            && previous.state == row.state
            && previous.active == row.active
            && previous.capacity == row.capacity
            && previous.circuit_open == row.circuit_open
            && previous.consecutive_unknown == row.consecutive_unknown;
        same_rest.then(|| LeaseRow {
            id: row.id.clone(),
            lease_expires_at: row.lease_expires_at,
            health_seq: row.health_seq,
        })
    }

    /// The full row: `previous` with this lease.
    pub fn apply(&self, previous: &ReplicaRow) -> ReplicaRow {
        ReplicaRow {
            lease_expires_at: self.lease_expires_at,
            health_seq: self.health_seq,
            ..previous.clone()
        }
    }
}

/// A route row whose assignment is the one the route's previous row
/// carried: only whether the reservation is held and the last settlement
/// changed (a settlement, or maintenance releasing it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteStateRow {
    /// The action.
    pub action: ActionId,
    /// The assignment's fence, as in the previous row.
    pub fence: FenceToken,
    /// Whether the reservation is held.
    pub reserved: bool,
    /// The last settlement's outcome, if any.
    pub last_settlement: Option<connreg::Outcome>,
}

impl RouteStateRow {
    /// `row` as its state columns, if its assignment is `previous`'s.
    pub fn of(previous: &RouteRecord, row: &RouteRecord) -> Option<RouteStateRow> {
        (previous.assignment == row.assignment).then(|| RouteStateRow {
            action: row.assignment.identity.action.clone(),
            fence: row.assignment.reservation.fence,
            reserved: row.reserved,
            last_settlement: row.last_settlement,
        })
    }

    /// The full row: `previous` with this state, or `None` when `previous`
    /// holds another fence (the compact row does not belong to it).
    pub fn apply(&self, previous: &RouteRecord) -> Option<RouteRecord> {
        (previous.assignment.reservation.fence == self.fence
            && previous.assignment.identity.action == self.action)
            .then(|| RouteRecord {
                assignment: previous.assignment.clone(),
                reserved: self.reserved,
                last_settlement: self.last_settlement,
            })
    }
}

/// The rows that changed since the previous snapshot (all rows in the
/// first one). Rows are never deleted from the store. A row that changed
/// in the columns a heartbeat or a release touch, and in nothing else, is
/// written compactly (`leases`, `route_states`): a fleet renews thousands
/// of leases a second, and a full route row is ten times its state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The catalog revision.
    pub revision: Revision,
    /// Changed replicas, in full.
    pub replicas: Vec<ReplicaRow>,
    /// Changed scopes.
    pub scopes: Vec<ScopeRow>,
    /// Changed routes, in full.
    pub routes: Vec<RouteRecord>,
    /// Replicas whose only change is their lease.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leases: Vec<LeaseRow>,
    /// Routes whose only change is their reservation's state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub route_states: Vec<RouteStateRow>,
}

/// An invariant that did not hold, and where in the trace it broke.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// The invariant, such as `one_route_per_action`.
    pub invariant: String,
    /// The rule catalogue IDs it protects.
    pub rules: String,
    /// What was seen.
    pub detail: String,
    /// Simulated time of the event that broke it, in milliseconds.
    #[serde(default)]
    pub at_ms: u64,
    /// Trace lines (1-based) of the events that break it: the event seen
    /// when the check failed first, then the start and first route answer
    /// of each action involved.
    #[serde(default)]
    pub lines: Vec<u64>,
    /// The calls involved (`rpc.id`).
    #[serde(default)]
    pub rpcs: Vec<u64>,
    /// The actions involved.
    #[serde(default)]
    pub actions: Vec<String>,
    /// The hosts involved.
    #[serde(default)]
    pub hosts: Vec<String>,
}

/// Where the trace's bytes go besides the hash.
#[derive(Debug, Default)]
pub enum Sink {
    /// Only hashed.
    #[default]
    Hash,
    /// Kept in memory too (tests compare whole traces).
    Memory(Vec<u8>),
    /// Written to a file.
    File(std::io::BufWriter<std::fs::File>),
}

/// The trace being written: hashes and stores every line, and queues the
/// records for the checkers.
#[derive(Debug, Default)]
pub struct TraceWriter {
    sink: Sink,
    hasher: Md5,
    pending: Vec<Record>,
    line: Vec<u8>,
    events: u64,
    bytes: u64,
    now_ms: u64,
    error: Option<String>,
}

impl TraceWriter {
    /// A writer into `sink`.
    pub fn new(sink: Sink) -> TraceWriter {
        TraceWriter {
            sink,
            ..TraceWriter::default()
        }
    }

    /// Sets the time stamped on the following events.
    pub fn set_now(&mut self, ms: u64) {
        self.now_ms = ms;
    }

    /// The time stamped on events.
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// Appends one event.
    pub fn emit(&mut self, event: Event) {
        let record = Record {
            t: self.now_ms,
            event,
        };
        self.line.clear();
        if let Err(e) = serde_json::to_writer(&mut self.line, &record) {
            self.error
                .get_or_insert_with(|| format!("trace encoding: {e}"));
            return;
        }
        self.line.push(b'\n');
        self.hasher.update(&self.line);
        match &mut self.sink {
            Sink::Hash => {}
            Sink::Memory(bytes) => bytes.extend_from_slice(&self.line),
            Sink::File(f) => {
                if let Err(e) = f.write_all(&self.line) {
                    self.error
                        .get_or_insert_with(|| format!("trace write: {e}"));
                }
            }
        }
        self.events += 1;
        self.bytes += self.line.len() as u64;
        self.pending.push(record);
    }

    /// Takes the records emitted since the last call.
    pub fn take_pending(&mut self) -> Vec<Record> {
        std::mem::take(&mut self.pending)
    }

    /// Takes the records emitted since the last call, with the trace line
    /// (1-based) of the first one; the others follow it line by line.
    pub fn take_pending_numbered(&mut self) -> (u64, Vec<Record>) {
        let pending = std::mem::take(&mut self.pending);
        (self.events + 1 - pending.len() as u64, pending)
    }

    /// Events written so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Flushes the sink and returns the hash, the bytes kept in memory (if
    /// any) and the first write error (if any).
    pub fn finish(self) -> (String, Option<Vec<u8>>, Option<String>) {
        let mut error = self.error;
        let bytes = match self.sink {
            Sink::Hash => None,
            Sink::Memory(bytes) => Some(bytes),
            Sink::File(mut f) => {
                if let Err(e) = f.flush() {
                    error.get_or_insert_with(|| format!("trace write: {e}"));
                }
                None
            }
        };
        let hash = self.hasher.finalize();
        let hex = hash.iter().map(|b| format!("{b:02x}")).collect();
        (hex, bytes, error)
    }
}

/// Hashes trace bytes the way [`TraceWriter`] does.
pub fn hash_bytes(bytes: &[u8]) -> String {
    Md5::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_json() {
        let records = vec![
            Record {
                t: 3,
                event: Event::Fault(FaultEvent::Crash {
                    hosts: vec!["replica-r1".into()],
                }),
            },
            Record {
                t: 4,
                event: Event::Check {
                    events: 2,
                    violations: 0,
                },
            },
            Record {
                t: 5,
                event: Event::Fault(FaultEvent::LossEnd),
            },
        ];
        for r in records {
            let line = serde_json::to_string(&r).unwrap();
            assert!(line.starts_with("{\"t\":"), "{line}");
            let back: Record = serde_json::from_str(&line).unwrap();
            assert_eq!(back, r);
        }
    }
}
