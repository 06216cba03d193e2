//! The fault tables of a scenario: `[[faults]]`, scheduled at fixed times,
//! and `[chaos]`, drawn from the seed; which of them need PostgreSQL.

use serde::{Deserialize, Serialize};

use super::Scenario;

/// The kinds of scheduled fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// Crash `hosts`; restart them at `restart_ms` if given.
    Crash,
    /// Drop every message between `a` and `b` until `until_ms`; with
    /// `oneway`, only from `a` to `b`.
    Partition,
    /// Hold every message between `a` and `b` until `until_ms`, then
    /// deliver them all.
    Hold,
    /// Raise the latency between `a` and `b` to at most `max_ms` until
    /// `until_ms`.
    Latency,
    /// Break links at random with probability `rate` per message until
    /// `until_ms`.
    Loss,
    /// Drop the next `count` registry answers to `ops` after the store
    /// committed them (until `until_ms`).
    LoseAnswers,
    /// Jump the registry clock by `by_ms` (negative: backwards).
    ClockJump,
    /// PostgreSQL only: the database proxy closes the registry's
    /// connections, every open one now (`cut = "all"`) or the next one to
    /// commit, after its commit reached the server (`cut = "next_commit"`).
    DbCut,
    /// PostgreSQL only: the database proxy holds every byte for `stall_ms`
    /// real milliseconds.
    DbStall,
    /// PostgreSQL only: an administrator terminates the registry's
    /// database sessions (`pg_terminate_backend`).
    DbTerminate,
    /// PostgreSQL only: the server the run started is shut down
    /// immediately and started again (refused on a server given by URL).
    DbRestart,
    /// PostgreSQL only: the primary of the replicated pair the run started
    /// is stopped immediately, its standby is promoted, and the database
    /// proxy moves to it as a virtual IP would (`[registry]
    /// database_replication` says whether the standby was synchronous).
    /// Refused on a server given by URL; at most one a run.
    DbFailover,
    /// Every replica of `zone` stops heartbeating until `until_ms` (they
    /// keep serving what they are sent).
    ZoneSilence,
    /// A `fraction` of replica group `group`'s replicas crash, spread
    /// evenly over the group; they start again at `restart_ms` if given.
    GroupCrash,
    /// A `fraction` of replica group `group`'s replicas drain, spread
    /// evenly over the group.
    GroupDrain,
}

impl FaultKind {
    /// True for the faults that act on the database (PostgreSQL only).
    pub fn is_database(self) -> bool {
        matches!(
            self,
            FaultKind::DbCut
                | FaultKind::DbStall
                | FaultKind::DbTerminate
                | FaultKind::DbRestart
                | FaultKind::DbFailover
        )
    }

    /// The name scenario files and trace events use.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Crash => "crash",
            FaultKind::Partition => "partition",
            FaultKind::Hold => "hold",
            FaultKind::Latency => "latency",
            FaultKind::Loss => "loss",
            FaultKind::LoseAnswers => "lose_answers",
            FaultKind::ClockJump => "clock_jump",
            FaultKind::DbCut => "db_cut",
            FaultKind::DbStall => "db_stall",
            FaultKind::DbTerminate => "db_terminate",
            FaultKind::DbRestart => "db_restart",
            FaultKind::DbFailover => "db_failover",
            FaultKind::ZoneSilence => "zone_silence",
            FaultKind::GroupCrash => "group_crash",
            FaultKind::GroupDrain => "group_drain",
        }
    }
}

/// What a `db_cut` closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CutMode {
    /// Every open connection, at once: transactions in flight roll back.
    #[default]
    All,
    /// The next connection that commits, once its commit reached the
    /// server: committed, but the caller gets an error (commit unknown).
    NextCommit,
}

impl CutMode {
    /// The name scenario files and trace events use.
    pub fn name(self) -> &'static str {
        match self {
            CutMode::All => "all",
            CutMode::NextCommit => "next_commit",
        }
    }
}

/// `[[faults]]`: one scheduled fault.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    /// When it starts.
    pub at_ms: u64,
    /// What.
    pub kind: FaultKind,
    /// When it ends (partition, hold, latency, loss, lose_answers).
    #[serde(default)]
    pub until_ms: Option<u64>,
    /// For `crash`: host names; `name*` matches a prefix.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// For `crash`: when the hosts restart.
    #[serde(default)]
    pub restart_ms: Option<u64>,
    /// One side of a link fault.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub a: Vec<String>,
    /// The other side of a link fault.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub b: Vec<String>,
    /// For `partition`: only from `a` to `b`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub oneway: bool,
    /// For `latency`.
    #[serde(default)]
    pub max_ms: Option<u64>,
    /// For `loss`.
    #[serde(default)]
    pub rate: Option<f64>,
    /// For `lose_answers`: which operations (`resolve`, `settle`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ops: Vec<String>,
    /// For `lose_answers`: how many answers.
    #[serde(default)]
    pub count: Option<u32>,
    /// For `clock_jump`.
    #[serde(default)]
    pub by_ms: Option<i64>,
    /// For `db_cut`: what to close (default `all`).
    #[serde(default)]
    pub cut: Option<CutMode>,
    /// For `db_stall`: how long the proxy holds bytes, in real
    /// milliseconds.
    #[serde(default)]
    pub stall_ms: Option<u64>,
    /// For `zone_silence`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// For `group_crash` and `group_drain`: the replica group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// For `group_crash` and `group_drain`: the share of the group, above
    /// 0 and at most 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fraction: Option<f64>,
    /// For `db_failover` with `[registry] database_replication =
    /// "asynchronous"`: the standby is cut off from the primary's WAL at
    /// this time, before the failover at `at_ms`, so the commits in
    /// between are lost with the primary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detach_ms: Option<u64>,
}

/// `[chaos]`: faults drawn from the seed, on top of the scheduled ones.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Chaos {
    /// Probability that a registry drops a committed answer.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub lose_answer_ratio: f64,
    /// Random replica crashes, each restarted after 100..600 ms.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replica_crashes: u32,
    /// Random registry host crashes, each restarted after 50..300 ms.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub registry_crashes: u32,
    /// Random partitions between a dispatcher or replica and a registry.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub partitions: u32,
    /// Random holds between a dispatcher and a registry.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub holds: u32,
    /// Random message loss windows.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub loss_windows: u32,
    /// Random forward clock jumps of up to two lease lengths.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub clock_jumps: u32,
    /// PostgreSQL only: random `db_cut`s (half of them `next_commit`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub db_cuts: u32,
    /// PostgreSQL only: random `db_stall`s of 50..500 real milliseconds.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub db_stalls: u32,
    /// PostgreSQL only: random `db_terminate`s.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub db_terminates: u32,
    /// PostgreSQL only: random `db_restart`s (seconds of real time each).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub db_restarts: u32,
    /// PostgreSQL only: a random `db_failover` (0 or 1).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub db_failovers: u32,
    /// Random zones silenced for one to three lease lengths.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub zone_silences: u32,
    /// Random crashes of a tenth to a half of a replica group, restarted
    /// after one to three lease lengths.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub group_crashes: u32,
    /// Random drains of a tenth to a third of a replica group.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub group_drains: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}
fn is_zero_f64(r: &f64) -> bool {
    *r == 0.0
}

impl Chaos {
    /// True when it draws nothing.
    pub fn is_empty(&self) -> bool {
        self.lose_answer_ratio == 0.0
            && self.replica_crashes
                + self.registry_crashes
                + self.partitions
                + self.holds
                + self.loss_windows
                + self.clock_jumps
                + self.zone_silences
                + self.group_crashes
                + self.group_drains
                == 0
            && !self.has_database_faults()
    }

    /// True when it draws database faults.
    pub fn has_database_faults(&self) -> bool {
        self.db_cuts + self.db_stalls + self.db_terminates + self.db_restarts + self.db_failovers
            > 0
    }
}

/// The operations a registry answers, as `lose_answers` names them.
pub const REGISTRY_OPS: &[&str] = &[
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
];

impl Scenario {
    /// True when a fault acts on the database (scheduled or drawn): the
    /// scenario runs on PostgreSQL only.
    pub fn has_database_faults(&self) -> bool {
        self.faults.iter().any(|f| f.get_ref().kind.is_database())
            || self.chaos.has_database_faults()
    }

    /// True when a `db_restart` is scheduled or drawn: the run needs a
    /// server it started itself.
    pub fn restarts_database(&self) -> bool {
        self.faults
            .iter()
            .any(|f| f.get_ref().kind == FaultKind::DbRestart)
            || self.chaos.db_restarts > 0
    }

    /// True when a `db_failover` is scheduled or drawn: the run needs a
    /// primary and a standby it started itself.
    pub fn fails_over_database(&self) -> bool {
        self.faults
            .iter()
            .any(|f| f.get_ref().kind == FaultKind::DbFailover)
            || self.chaos.db_failovers > 0
    }
}
