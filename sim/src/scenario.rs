//! Scenario files: the schema, strict parsing and validation.
//!
//! The schema is documented for authors in `scenarios/README.md`; the types
//! here are its single source. Parsing is strict: an unknown key, a value
//! of the wrong type or out of range, or a reference to something the
//! fleet does not declare is an error naming the file and the line.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use connreg::{CrossRegion, ScopeKind};
use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::counters::CounterBounds;
use crate::limits::{
    ACTIONS_PER_DISPATCHER_MAX, CHAOS_FAULTS_MAX, DB_STALL_MS_MAX, DISPATCHER_CONCURRENCY_MAX,
    DISPATCHERS_MAX, DUPLICATES_MAX, DURATION_MS_MAX, FLEET_RECORDS_MAX, LATENCY_MS_MAX,
    LIVENESS_MS_MAX, MIX_ENTRIES_MAX, READERS_MAX, REGISTRY_HOSTS_MAX, REPLICAS_MAX, RETRIES_MAX,
    SCHEDULE_ENTRIES_MAX, TICK_MS_MAX,
};

/// The standard scenario, built in: what `connreg-sim` runs with no
/// arguments.
pub const STANDARD_SCENARIO: &str = include_str!("../../scenarios/0001_steady_state.toml");

/// The standard scenario's path relative to the workspace root.
pub const STANDARD_SCENARIO_PATH: &str = "scenarios/0001_steady_state.toml";

/// A scenario file that could not be read or is invalid.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{file}: cannot read: {source}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a valid scenario.
    #[error("{file}:{line}: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// The 1-based line of the offending key or entry.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// One scenario: fleet, workload, faults, run length and expectations.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Name, summary and timing.
    pub scenario: Meta,
    /// Registry hosts and routing policy.
    #[serde(default)]
    pub registry: RegistrySettings,
    /// Heartbeats, leases and lease maintenance.
    #[serde(default)]
    pub lifecycle: Lifecycle,
    /// The records published at the start, and the replicas.
    pub fleet: Fleet,
    /// Dispatchers, readers and operators.
    pub workload: Workload,
    /// Faults scheduled at fixed times.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<Spanned<FaultSpec>>,
    /// Faults drawn from the seed.
    #[serde(default, skip_serializing_if = "Chaos::is_empty")]
    pub chaos: Chaos,
    /// Outcome counts the run must see.
    #[serde(default, skip_serializing_if = "Expect::is_empty")]
    pub expect: Expect,
    /// The file it was read from: its name and the SHA-256 of its bytes,
    /// recorded in the trace so a replay can tell an edited file.
    #[serde(skip)]
    pub source: Option<ScenarioSource>,
}

/// Where a scenario came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioSource {
    /// The file's name, without its directory (the trace stays the same
    /// wherever the checkout is).
    pub file: String,
    /// SHA-256 of the file's bytes, lower-case hex.
    pub sha256: String,
}

impl ScenarioSource {
    /// The source of `text`, read from `path`.
    pub fn of(path: &str, text: &str) -> ScenarioSource {
        use sha2::{Digest, Sha256};
        let file = Path::new(path)
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.to_string());
        let sha256 = Sha256::digest(text.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        ScenarioSource { file, sha256 }
    }
}

/// `[scenario]`: name, summary and timing.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    /// A short name, conventionally the file's slug.
    pub name: String,
    /// The one behaviour this scenario proves, in a sentence.
    pub summary: String,
    /// Length of the workload phase, in simulated milliseconds. Every
    /// scheduled fault ends by then; the faults heal at this time.
    pub duration_ms: u64,
    /// After the heal, every surviving dispatcher's actions must end within
    /// this many simulated milliseconds.
    pub liveness_ms: u64,
    /// Simulated time per step.
    #[serde(default = "default_tick_ms")]
    pub tick_ms: u64,
    /// One-way link latency range `[min, max]`, in milliseconds.
    #[serde(default = "default_latency_ms")]
    pub latency_ms: [u64; 2],
}

fn default_tick_ms() -> u64 {
    2
}
fn default_latency_ms() -> [u64; 2] {
    [1, 4]
}

/// `[registry]`: registry hosts and routing policy.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RegistrySettings {
    /// Registry hosts, all in front of one shared store.
    #[serde(default = "default_registry_hosts")]
    pub hosts: u32,
    /// Whether unknown outcomes count towards opening a circuit.
    #[serde(default = "yes")]
    pub circuit_enabled: bool,
    /// Consecutive unknown outcomes that open a replica's circuit.
    #[serde(default = "default_circuit_threshold")]
    pub circuit_threshold: u32,
}

impl Default for RegistrySettings {
    fn default() -> Self {
        RegistrySettings {
            hosts: default_registry_hosts(),
            circuit_enabled: true,
            circuit_threshold: default_circuit_threshold(),
        }
    }
}

fn default_registry_hosts() -> u32 {
    2
}
fn default_circuit_threshold() -> u32 {
    3
}
fn yes() -> bool {
    true
}

/// `[lifecycle]`: heartbeats, leases and lease maintenance.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Lifecycle {
    /// Interval between a replica's heartbeats.
    #[serde(default = "default_heartbeat_ms")]
    pub heartbeat_ms: u64,
    /// Lease each registration and heartbeat grants.
    #[serde(default = "default_lease_ttl_ms")]
    pub lease_ttl_ms: u64,
    /// Interval between lease maintenance rounds.
    #[serde(default = "default_maintenance_ms")]
    pub maintenance_ms: u64,
    /// Most replicas one maintenance call marks offline.
    #[serde(default = "default_maintenance_batch")]
    pub maintenance_batch: u32,
}

impl Default for Lifecycle {
    fn default() -> Self {
        Lifecycle {
            heartbeat_ms: default_heartbeat_ms(),
            lease_ttl_ms: default_lease_ttl_ms(),
            maintenance_ms: default_maintenance_ms(),
            maintenance_batch: default_maintenance_batch(),
        }
    }
}

fn default_heartbeat_ms() -> u64 {
    100
}
fn default_lease_ttl_ms() -> u64 {
    400
}
fn default_maintenance_ms() -> u64 {
    100
}
fn default_maintenance_batch() -> u32 {
    8
}

/// `[fleet]`: the records published at the start, and the replicas.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Fleet {
    /// `[[fleet.types]]`.
    pub types: Vec<Spanned<TypeSpec>>,
    /// `[[fleet.versions]]`. Every capability a version names gets a
    /// capability definition.
    pub versions: Vec<Spanned<VersionSpec>>,
    /// `[[fleet.instances]]`.
    pub instances: Vec<Spanned<InstanceSpec>>,
    /// `[[fleet.scopes]]`.
    #[serde(default)]
    pub scopes: Vec<Spanned<ScopeSpec>>,
    /// `[[fleet.bindings]]`.
    pub bindings: Vec<Spanned<BindingSpec>>,
    /// `[[fleet.replicas]]`: one replica host each.
    pub replicas: Vec<Spanned<ReplicaEntry>>,
}

/// A connector type.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TypeSpec {
    /// Identifier.
    pub id: String,
    /// Whether enabled at the start.
    #[serde(default = "yes")]
    pub enabled: bool,
}

/// A connector version.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct VersionSpec {
    /// Identifier.
    pub id: String,
    /// Its connector type.
    #[serde(rename = "type")]
    pub connector_type: String,
    /// Capabilities it implements.
    pub capabilities: Vec<String>,
    /// Profiles it supports.
    #[serde(default)]
    pub profiles: Vec<String>,
    /// Active at the start.
    #[serde(default = "yes")]
    pub active: bool,
    /// Qualified at the start.
    #[serde(default = "yes")]
    pub qualified: bool,
}

/// A tenant's instance.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct InstanceSpec {
    /// Identifier (also the provider account in the ledger).
    pub id: String,
    /// The owning tenant.
    pub tenant: String,
    /// The installed version.
    pub version: String,
    /// Enabled at the start.
    #[serde(default = "yes")]
    pub enabled: bool,
}

/// An admission scope.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ScopeSpec {
    /// Identifier.
    pub id: String,
    /// The tenant whose bindings may use it.
    pub tenant: String,
    /// What it counts.
    #[serde(default = "default_scope_kind")]
    pub kind: ScopeKind,
    /// Most concurrent reservations.
    pub limit: u32,
}

fn default_scope_kind() -> ScopeKind {
    ScopeKind::Tenant
}

/// A capability binding.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BindingSpec {
    /// Identifier.
    pub id: String,
    /// The tenant; must own the instance.
    pub tenant: String,
    /// The capability made callable.
    pub capability: String,
    /// The instance serving it.
    pub instance: String,
    /// Lower is preferred.
    #[serde(default)]
    pub priority: u32,
    /// Admission scopes a route reserves.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Enabled at the start.
    #[serde(default = "yes")]
    pub enabled: bool,
}

/// A replica and its host.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicaEntry {
    /// Identifier; the host is `replica-<id>`.
    pub id: String,
    /// The instance it serves (it runs that instance's version).
    pub instance: String,
    /// Region.
    pub region: String,
    /// Zone.
    pub zone: String,
    /// Capacity class.
    #[serde(default = "default_class")]
    pub class: String,
    /// Most concurrent reservations.
    pub capacity: u32,
    /// Probability that the provider behind this replica leaves an
    /// execution's outcome unknown.
    #[serde(default)]
    pub unknown_ratio: f64,
}

fn default_class() -> String {
    "standard".into()
}

/// `[workload]`: dispatchers, readers and operators.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Dispatcher hosts.
    pub dispatchers: u32,
    /// Actions each dispatcher starts.
    pub actions: u32,
    /// Actions each dispatcher keeps in flight.
    #[serde(default = "one")]
    pub concurrency: u32,
    /// When dispatchers start their first action (replicas register at
    /// time 0 and need a few round trips).
    #[serde(default)]
    pub start_ms: u64,
    /// Gap before starting each action, `[min, max]` milliseconds.
    #[serde(default = "default_start_gap_ms")]
    pub start_gap_ms: [u64; 2],
    /// Provider execution time on a replica, `[min, max]` milliseconds.
    #[serde(default = "default_exec_ms")]
    pub exec_ms: [u64; 2],
    /// Timeout of one registry call.
    #[serde(default = "default_rpc_timeout_ms")]
    pub rpc_timeout_ms: u64,
    /// Timeout of one dispatch to a replica.
    #[serde(default = "default_dispatch_timeout_ms")]
    pub dispatch_timeout_ms: u64,
    /// First retry backoff; it doubles per retry up to eight times this.
    #[serde(default = "default_backoff_ms")]
    pub backoff_ms: u64,
    /// Probability that an action's first resolve goes out several times at
    /// once (a duplicate storm).
    #[serde(default)]
    pub duplicate_ratio: f64,
    /// Extra concurrent copies of a duplicated resolve.
    #[serde(default = "one")]
    pub duplicates: u32,
    /// Size of a pool of action IDs every dispatcher draws from; 0 for none.
    #[serde(default)]
    pub shared_pool: u32,
    /// Probability that an action takes its ID from the shared pool.
    #[serde(default)]
    pub shared_ratio: f64,
    /// Probability that a dispatcher cancels an action while it runs.
    #[serde(default)]
    pub cancel_ratio: f64,
    /// Probability that an action settled as unknown or cancelled is
    /// retried under the same ID (a pinned re-reservation).
    #[serde(default)]
    pub reconcile_ratio: f64,
    /// Probability that a settlement is sent twice.
    #[serde(default)]
    pub repeat_settle_ratio: f64,
    /// Probability that, after a re-reservation, the previous reservation's
    /// assignment is settled too (a stale settlement).
    #[serde(default)]
    pub stale_settle_ratio: f64,
    /// NoCapacity replies an action retries before it fails.
    #[serde(default = "default_capacity_retries")]
    pub capacity_retries: u32,
    /// ReplicaUnavailable replies an action retries before it fails.
    #[serde(default = "default_unavailable_retries")]
    pub unavailable_retries: u32,
    /// Failed dispatches an action retries before it settles as unknown.
    #[serde(default = "default_dispatch_retries")]
    pub dispatch_retries: u32,
    /// Interval of the administrator's catalog touches (re-publishing a
    /// definition); 0 for none.
    #[serde(default)]
    pub touch_every_ms: u64,
    /// `[[workload.mix]]`: what the dispatchers ask for.
    pub mix: Vec<Spanned<MixEntry>>,
    /// `[[workload.readers]]`: catalog readers.
    #[serde(default)]
    pub readers: Vec<Spanned<ReaderEntry>>,
    /// `[[workload.operations]]`: operator actions at fixed times.
    #[serde(default)]
    pub operations: Vec<Spanned<Operation>>,
}

fn one() -> u32 {
    1
}
fn default_start_gap_ms() -> [u64; 2] {
    [5, 20]
}
fn default_exec_ms() -> [u64; 2] {
    [5, 20]
}
fn default_rpc_timeout_ms() -> u64 {
    50
}
fn default_dispatch_timeout_ms() -> u64 {
    100
}
fn default_backoff_ms() -> u64 {
    20
}
fn default_capacity_retries() -> u32 {
    2
}
fn default_unavailable_retries() -> u32 {
    3
}
fn default_dispatch_retries() -> u32 {
    4
}

/// One kind of request in the workload mix.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MixEntry {
    /// The verified tenant.
    pub tenant: String,
    /// The capability.
    pub capability: String,
    /// Relative weight.
    #[serde(default = "one")]
    pub weight: u32,
    /// Required capacity class.
    #[serde(default = "default_class")]
    pub class: String,
    /// Preferred region.
    #[serde(default)]
    pub region: Option<String>,
    /// Preferred zone.
    #[serde(default)]
    pub zone: Option<String>,
    /// Whether other regions are eligible.
    #[serde(default)]
    pub cross_region: CrossRegion,
}

/// A catalog reader.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ReaderEntry {
    /// `internal`, `internal-unbound`, `anonymous`, or a tenant ID.
    pub reader: String,
    /// Items per page.
    #[serde(default = "one")]
    pub page_items: u32,
    /// Gap between paging sessions.
    #[serde(default = "default_reader_every_ms")]
    pub every_ms: u64,
}

fn default_reader_every_ms() -> u64 {
    50
}

/// What an operator does at a scheduled time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OperationKind {
    /// Drain `replica`.
    Drain,
    /// Close `replica`'s circuit (an audited operator action).
    CircuitClose,
    /// Publish `binding` with `enabled`.
    SetBinding,
    /// Publish `instance` with `enabled`.
    SetInstance,
    /// Publish connector type `type` with `enabled`.
    SetType,
    /// Publish `version` with `active` and `qualified`.
    SetVersion,
    /// Re-publish `capability`'s definition (a revision bump).
    Touch,
}

/// `[[workload.operations]]`: one operator action.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Operation {
    /// When.
    pub at_ms: u64,
    /// What.
    pub op: OperationKind,
    /// For `drain` and `circuit_close`.
    #[serde(default)]
    pub replica: Option<String>,
    /// For `set_binding`.
    #[serde(default)]
    pub binding: Option<String>,
    /// For `set_instance`.
    #[serde(default)]
    pub instance: Option<String>,
    /// For `set_type`.
    #[serde(default, rename = "type")]
    pub connector_type: Option<String>,
    /// For `set_version`.
    #[serde(default)]
    pub version: Option<String>,
    /// For `touch`.
    #[serde(default)]
    pub capability: Option<String>,
    /// For `set_binding`, `set_instance`, `set_type`.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// For `set_version`.
    #[serde(default)]
    pub active: Option<bool>,
    /// For `set_version`.
    #[serde(default)]
    pub qualified: Option<bool>,
}

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
}

impl FaultKind {
    /// True for the faults that act on the database (PostgreSQL only).
    pub fn is_database(self) -> bool {
        matches!(
            self,
            FaultKind::DbCut | FaultKind::DbStall | FaultKind::DbTerminate | FaultKind::DbRestart
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
                == 0
            && !self.has_database_faults()
    }

    /// True when it draws database faults.
    pub fn has_database_faults(&self) -> bool {
        self.db_cuts + self.db_stalls + self.db_terminates + self.db_restarts > 0
    }
}

/// `[expect]`: outcome counts the run must see.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Lower bounds.
    #[serde(default, skip_serializing_if = "CounterBounds::is_empty")]
    pub at_least: CounterBounds,
    /// Upper bounds.
    #[serde(default, skip_serializing_if = "CounterBounds::is_empty")]
    pub at_most: CounterBounds,
}

impl Expect {
    /// True when no counter is bounded.
    pub fn is_empty(&self) -> bool {
        self.at_least.is_empty() && self.at_most.is_empty()
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
    /// Reads and validates a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            file: file.clone(),
            source,
        })?;
        Scenario::parse(&file, &text)
    }

    /// The built-in standard scenario.
    pub fn standard() -> Scenario {
        Scenario::parse(STANDARD_SCENARIO_PATH, STANDARD_SCENARIO)
            .unwrap_or_else(|e| panic!("the built-in standard scenario is invalid: {e}"))
    }

    /// Parses and validates scenario text; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Scenario, ScenarioError> {
        let mut scenario: Scenario = toml::from_str(text).map_err(|e| ScenarioError::Invalid {
            file: file.to_string(),
            line: e.span().map(|s| line_of(text, s.start)).unwrap_or(1),
            message: e.message().to_string(),
        })?;
        scenario
            .validate()
            .map_err(|(at, message)| ScenarioError::Invalid {
                file: file.to_string(),
                line: line_of(text, at.offset(text)),
                message,
            })?;
        scenario.source = Some(ScenarioSource::of(file, text));
        Ok(scenario)
    }

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

    /// Every host name of this scenario's world, in creation order.
    pub fn host_names(&self) -> Vec<String> {
        let mut names = Vec::new();
        names.extend((0..self.registry.hosts).map(registry_host));
        names.extend(
            self.fleet
                .replicas
                .iter()
                .map(|r| replica_host(&r.get_ref().id)),
        );
        names.extend((0..self.workload.dispatchers).map(dispatcher_host));
        names.extend((0..self.workload.readers.len()).map(reader_host));
        names.push(ADMIN_HOST.to_string());
        names.push(MAINTAINER_HOST.to_string());
        names
    }

    /// Checks everything the types alone do not. Errors carry where the
    /// fault is: a byte offset of the entry, or the key's path.
    fn validate(&self) -> Result<(), (At, String)> {
        let v = Validator { s: self };
        v.meta()?;
        v.fleet()?;
        v.workload()?;
        v.faults()?;
        v.chaos()?;
        crate::feasible::check(self).map_err(|(key, message)| (At::Key(key.into()), message))
    }
}

/// The registry host with index `i`.
pub fn registry_host(i: u32) -> String {
    format!("registry-{i}")
}
/// The dispatcher host with index `i`.
pub fn dispatcher_host(i: u32) -> String {
    format!("dispatcher-{i}")
}
/// The catalog reader host with index `i`.
pub fn reader_host(i: usize) -> String {
    format!("reader-{i}")
}
/// The host of replica `id`.
pub fn replica_host(id: &str) -> String {
    format!("replica-{id}")
}
/// The catalog administrator and operator host.
pub const ADMIN_HOST: &str = "admin";
/// The lease maintenance host.
pub const MAINTAINER_HOST: &str = "maintainer";

/// Expands host selectors (`name` or `prefix*`) against `hosts`, in host
/// order, without duplicates.
pub fn select_hosts(selectors: &[String], hosts: &[String]) -> Vec<String> {
    hosts
        .iter()
        .filter(|h| selectors.iter().any(|s| selector_matches(s, h)))
        .cloned()
        .collect()
}

fn selector_matches(selector: &str, host: &str) -> bool {
    match selector.strip_suffix('*') {
        Some(prefix) => host.starts_with(prefix),
        None => selector == host,
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    let offset = offset.min(text.len());
    text.as_bytes()[..offset]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// Where a validation error is: the line it names is the key's own when
/// the file spells the key, else its entry's or table's.
#[derive(Debug, Clone, PartialEq, Eq)]
enum At {
    /// A byte offset (an entry's start).
    Offset(usize),
    /// A key path, dot separated, array entries by index
    /// (`fleet.scopes.0.limit`).
    Key(String),
    /// The key the check's `what` names (`scenario.duration_ms`).
    Named,
}

impl From<usize> for At {
    fn from(offset: usize) -> At {
        At::Offset(offset)
    }
}

impl At {
    /// `what` for [`At::Named`].
    fn or_named(self, what: &str) -> At {
        match self {
            At::Named => At::Key(what.to_string()),
            at => at,
        }
    }

    /// The byte offset in `text`: a key's value, or the deepest table or
    /// entry of its path the file spells, or 0.
    fn offset(&self, text: &str) -> usize {
        match self {
            At::Offset(o) => *o,
            At::Named => 0,
            At::Key(path) => key_offset(text, path).unwrap_or(0),
        }
    }
}

/// The offset of the value at `path` in `text`, or of the deepest part of
/// the path that `text` spells.
fn key_offset(text: &str, path: &str) -> Option<usize> {
    use toml::de::{DeTable, DeValue};
    let doc = DeTable::parse(text).ok()?;
    let mut found = None;
    let mut here: &DeTable<'_> = doc.get_ref();
    let mut segments = path.split('.').peekable();
    while let Some(seg) = segments.next() {
        let (_, value) = here.iter().find(|(k, _)| k.get_ref() == seg)?;
        found = Some(value.span().start);
        let mut value = value;
        if let (DeValue::Array(items), Some(index)) = (
            value.get_ref(),
            segments.peek().and_then(|s| s.parse::<usize>().ok()),
        ) {
            segments.next();
            value = items.get(index)?;
            found = Some(value.span().start);
        }
        match value.get_ref() {
            DeValue::Table(t) => here = t,
            _ => break,
        }
    }
    found
}

struct Validator<'a> {
    s: &'a Scenario,
}

type Check = Result<(), (At, String)>;

fn fail<T>(at: impl Into<At>, message: impl fmt::Display) -> Result<T, (At, String)> {
    Err((at.into(), message.to_string()))
}

fn ensure(cond: bool, at: impl Into<At>, message: impl FnOnce() -> String) -> Check {
    if cond {
        Ok(())
    } else {
        Err((at.into(), message()))
    }
}

fn id_ok<T>(at: usize, what: &str, value: &str, make: fn(String) -> connreg::Result<T>) -> Check {
    match make(value.to_string()) {
        Ok(_) => Ok(()),
        Err(e) => fail(at, format!("{what} {value:?}: {e}")),
    }
}

fn ratio_ok(at: impl Into<At>, what: &str, v: f64) -> Check {
    let at = at.into().or_named(what);
    ensure((0.0..=1.0).contains(&v), at, || {
        format!("{what} must be between 0 and 1, got {v}")
    })
}

fn range_ok(at: impl Into<At>, what: &str, r: [u64; 2], max: u64) -> Check {
    let at = at.into().or_named(what);
    ensure(r[0] <= r[1], at.clone(), || {
        format!("{what} must be [min, max] with min <= max")
    })?;
    ensure(r[1] <= max, at, || {
        format!("{what} exceeds its limit of {max}")
    })
}

fn bounded(at: impl Into<At>, what: &str, v: u64, min: u64, max: u64) -> Check {
    let at = at.into().or_named(what);
    ensure(v >= min && v <= max, at, || {
        format!("{what} must be between {min} and {max}, got {v}")
    })
}

impl Validator<'_> {
    fn meta(&self) -> Check {
        let m = &self.s.scenario;
        bounded(
            At::Named,
            "scenario.duration_ms",
            m.duration_ms,
            1,
            DURATION_MS_MAX,
        )?;
        bounded(
            At::Named,
            "scenario.liveness_ms",
            m.liveness_ms,
            1,
            LIVENESS_MS_MAX,
        )?;
        bounded(At::Named, "scenario.tick_ms", m.tick_ms, 1, TICK_MS_MAX)?;
        range_ok(
            At::Named,
            "scenario.latency_ms",
            m.latency_ms,
            LATENCY_MS_MAX,
        )?;
        let r = &self.s.registry;
        bounded(
            At::Named,
            "registry.hosts",
            r.hosts.into(),
            1,
            REGISTRY_HOSTS_MAX.into(),
        )?;
        bounded(
            At::Named,
            "registry.circuit_threshold",
            r.circuit_threshold.into(),
            1,
            connreg::limits::CIRCUIT_THRESHOLD_MAX.into(),
        )?;
        let l = &self.s.lifecycle;
        bounded(
            At::Named,
            "lifecycle.heartbeat_ms",
            l.heartbeat_ms,
            1,
            DURATION_MS_MAX,
        )?;
        bounded(
            At::Named,
            "lifecycle.lease_ttl_ms",
            l.lease_ttl_ms,
            1,
            connreg::limits::LEASE_TTL_MS_MAX,
        )?;
        bounded(
            At::Named,
            "lifecycle.maintenance_ms",
            l.maintenance_ms,
            1,
            DURATION_MS_MAX,
        )?;
        bounded(
            At::Named,
            "lifecycle.maintenance_batch",
            l.maintenance_batch.into(),
            1,
            connreg::limits::LEASE_MAINTENANCE_BATCH_MAX.into(),
        )
    }

    fn fleet(&self) -> Check {
        let f = &self.s.fleet;
        for (what, n) in [
            ("fleet.types", f.types.len()),
            ("fleet.versions", f.versions.len()),
            ("fleet.instances", f.instances.len()),
            ("fleet.scopes", f.scopes.len()),
            ("fleet.bindings", f.bindings.len()),
        ] {
            ensure(n <= FLEET_RECORDS_MAX, 0, || {
                format!("{what} has {n} entries, more than {FLEET_RECORDS_MAX}")
            })?;
        }
        ensure(
            !f.replicas.is_empty() && f.replicas.len() <= REPLICAS_MAX,
            0,
            || format!("fleet.replicas must have 1 to {REPLICAS_MAX} entries"),
        )?;
        let mut seen = BTreeSet::new();
        let mut types = BTreeSet::new();
        for t in &f.types {
            let at = t.span().start;
            id_ok(at, "type", &t.get_ref().id, connreg::ConnectorTypeId::new)?;
            ensure(types.insert(t.get_ref().id.clone()), at, || {
                format!("duplicate type {:?}", t.get_ref().id)
            })?;
        }
        let mut versions: BTreeMap<&str, &VersionSpec> = BTreeMap::new();
        for v in &f.versions {
            let at = v.span().start;
            let v = v.get_ref();
            id_ok(at, "version", &v.id, connreg::VersionId::new)?;
            ensure(types.contains(&v.connector_type), at, || {
                format!(
                    "version {:?} names unknown type {:?}",
                    v.id, v.connector_type
                )
            })?;
            ensure(!v.capabilities.is_empty(), at, || {
                format!("version {:?} implements no capability", v.id)
            })?;
            ensure(
                v.capabilities.len() <= connreg::limits::VERSION_CAPABILITIES_MAX,
                at,
                || format!("version {:?} has too many capabilities", v.id),
            )?;
            for c in &v.capabilities {
                id_ok(at, "capability", c, connreg::CapabilityId::new)?;
            }
            for p in &v.profiles {
                id_ok(at, "profile", p, connreg::ProfileId::new)?;
            }
            ensure(versions.insert(&v.id, v).is_none(), at, || {
                format!("duplicate version {:?}", v.id)
            })?;
        }
        let mut instances: BTreeMap<&str, &InstanceSpec> = BTreeMap::new();
        for i in &f.instances {
            let at = i.span().start;
            let i = i.get_ref();
            id_ok(at, "instance", &i.id, connreg::InstanceId::new)?;
            id_ok(at, "tenant", &i.tenant, connreg::TenantId::new)?;
            ensure(versions.contains_key(i.version.as_str()), at, || {
                format!("instance {:?} names unknown version {:?}", i.id, i.version)
            })?;
            ensure(instances.insert(&i.id, i).is_none(), at, || {
                format!("duplicate instance {:?}", i.id)
            })?;
        }
        let mut scopes: BTreeMap<&str, &ScopeSpec> = BTreeMap::new();
        for (i, s) in f.scopes.iter().enumerate() {
            let at = s.span().start;
            let s = s.get_ref();
            id_ok(at, "scope", &s.id, connreg::ScopeId::new)?;
            id_ok(at, "tenant", &s.tenant, connreg::TenantId::new)?;
            // A limit of 0 admits nothing: every route through the scope
            // fails, which is a scenario mistake, not a behaviour to prove.
            ensure(
                s.limit >= 1 && s.limit <= connreg::limits::SCOPE_LIMIT_MAX,
                At::Key(format!("fleet.scopes.{i}.limit")),
                || {
                    format!(
                        "scope {:?} limit must be 1 to {}, got {}",
                        s.id,
                        connreg::limits::SCOPE_LIMIT_MAX,
                        s.limit
                    )
                },
            )?;
            ensure(scopes.insert(&s.id, s).is_none(), at, || {
                format!("duplicate scope {:?}", s.id)
            })?;
        }
        for b in &f.bindings {
            let at = b.span().start;
            let b = b.get_ref();
            id_ok(at, "binding", &b.id, connreg::BindingId::new)?;
            ensure(seen.insert(b.id.clone()), at, || {
                format!("duplicate binding {:?}", b.id)
            })?;
            let Some(instance) = instances.get(b.instance.as_str()) else {
                return fail(
                    at,
                    format!("binding {:?} names unknown instance {:?}", b.id, b.instance),
                );
            };
            ensure(instance.tenant == b.tenant, at, || {
                format!(
                    "binding {:?}: tenant {:?} does not own instance {:?}",
                    b.id, b.tenant, b.instance
                )
            })?;
            let declared = versions
                .values()
                .any(|v| v.capabilities.contains(&b.capability));
            ensure(declared, at, || {
                format!(
                    "binding {:?} names capability {:?}, which no version implements",
                    b.id, b.capability
                )
            })?;
            ensure(
                b.scopes.len() <= connreg::limits::BINDING_SCOPES_MAX,
                at,
                || format!("binding {:?} has too many scopes", b.id),
            )?;
            for s in &b.scopes {
                let Some(scope) = scopes.get(s.as_str()) else {
                    return fail(at, format!("binding {:?} names unknown scope {s:?}", b.id));
                };
                ensure(scope.tenant == b.tenant, at, || {
                    format!("binding {:?}: scope {s:?} belongs to another tenant", b.id)
                })?;
            }
        }
        let mut replicas = BTreeSet::new();
        for (i, r) in f.replicas.iter().enumerate() {
            let at = r.span().start;
            let r = r.get_ref();
            id_ok(at, "replica", &r.id, connreg::ReplicaId::new)?;
            id_ok(at, "region", &r.region, connreg::Region::new)?;
            id_ok(at, "zone", &r.zone, connreg::Zone::new)?;
            id_ok(at, "class", &r.class, connreg::CapacityClass::new)?;
            ensure(instances.contains_key(r.instance.as_str()), at, || {
                format!("replica {:?} names unknown instance {:?}", r.id, r.instance)
            })?;
            ensure(
                r.capacity >= 1 && r.capacity <= connreg::limits::REPLICA_CAPACITY_MAX,
                At::Key(format!("fleet.replicas.{i}.capacity")),
                || {
                    format!(
                        "replica {:?} capacity must be 1 to {}",
                        r.id,
                        connreg::limits::REPLICA_CAPACITY_MAX
                    )
                },
            )?;
            ratio_ok(
                At::Key(format!("fleet.replicas.{i}.unknown_ratio")),
                "unknown_ratio",
                r.unknown_ratio,
            )?;
            ensure(replicas.insert(r.id.clone()), at, || {
                format!("duplicate replica {:?}", r.id)
            })?;
        }
        Ok(())
    }

    fn workload(&self) -> Check {
        let w = &self.s.workload;
        let f = &self.s.fleet;
        bounded(
            At::Named,
            "workload.dispatchers",
            w.dispatchers.into(),
            1,
            DISPATCHERS_MAX.into(),
        )?;
        bounded(
            At::Named,
            "workload.actions",
            w.actions.into(),
            1,
            ACTIONS_PER_DISPATCHER_MAX.into(),
        )?;
        bounded(
            At::Named,
            "workload.concurrency",
            w.concurrency.into(),
            1,
            DISPATCHER_CONCURRENCY_MAX.into(),
        )?;
        bounded(
            At::Named,
            "workload.start_ms",
            w.start_ms,
            0,
            self.s.scenario.duration_ms,
        )?;
        range_ok(
            At::Named,
            "workload.start_gap_ms",
            w.start_gap_ms,
            DURATION_MS_MAX,
        )?;
        range_ok(At::Named, "workload.exec_ms", w.exec_ms, DURATION_MS_MAX)?;
        bounded(
            At::Named,
            "workload.rpc_timeout_ms",
            w.rpc_timeout_ms,
            1,
            DURATION_MS_MAX,
        )?;
        bounded(
            At::Named,
            "workload.dispatch_timeout_ms",
            w.dispatch_timeout_ms,
            1,
            DURATION_MS_MAX,
        )?;
        bounded(
            At::Named,
            "workload.backoff_ms",
            w.backoff_ms,
            1,
            DURATION_MS_MAX,
        )?;
        bounded(
            At::Named,
            "workload.duplicates",
            w.duplicates.into(),
            1,
            DUPLICATES_MAX.into(),
        )?;
        bounded(
            At::Named,
            "workload.shared_pool",
            w.shared_pool.into(),
            0,
            1_000_000,
        )?;
        for (what, r) in [
            ("workload.duplicate_ratio", w.duplicate_ratio),
            ("workload.shared_ratio", w.shared_ratio),
            ("workload.cancel_ratio", w.cancel_ratio),
            ("workload.reconcile_ratio", w.reconcile_ratio),
            ("workload.repeat_settle_ratio", w.repeat_settle_ratio),
            ("workload.stale_settle_ratio", w.stale_settle_ratio),
        ] {
            ratio_ok(At::Named, what, r)?;
        }
        ensure(w.shared_ratio == 0.0 || w.shared_pool > 0, 0, || {
            "workload.shared_ratio needs workload.shared_pool > 0".into()
        })?;
        for (what, n) in [
            ("workload.capacity_retries", w.capacity_retries),
            ("workload.unavailable_retries", w.unavailable_retries),
            ("workload.dispatch_retries", w.dispatch_retries),
        ] {
            bounded(At::Named, what, n.into(), 0, RETRIES_MAX.into())?;
        }
        ensure(
            !w.mix.is_empty() && w.mix.len() <= MIX_ENTRIES_MAX,
            0,
            || format!("workload.mix must have 1 to {MIX_ENTRIES_MAX} entries"),
        )?;
        let tenants: BTreeSet<&str> = f
            .instances
            .iter()
            .map(|i| i.get_ref().tenant.as_str())
            .collect();
        for m in &w.mix {
            let at = m.span().start;
            let m = m.get_ref();
            id_ok(at, "tenant", &m.tenant, connreg::TenantId::new)?;
            id_ok(at, "capability", &m.capability, connreg::CapabilityId::new)?;
            id_ok(at, "class", &m.class, connreg::CapacityClass::new)?;
            if let Some(r) = &m.region {
                id_ok(at, "region", r, connreg::Region::new)?;
            }
            if let Some(z) = &m.zone {
                id_ok(at, "zone", z, connreg::Zone::new)?;
            }
            ensure(m.weight >= 1, at, || "mix weight must be at least 1".into())?;
            ensure(
                m.cross_region == CrossRegion::Allowed || m.region.is_some(),
                at,
                || "cross_region = \"forbidden\" needs a region".into(),
            )?;
        }
        ensure(w.readers.len() <= READERS_MAX, 0, || {
            format!("workload.readers has more than {READERS_MAX} entries")
        })?;
        for (i, r) in w.readers.iter().enumerate() {
            let at = r.span().start;
            let r = r.get_ref();
            if !matches!(
                r.reader.as_str(),
                "internal" | "internal-unbound" | "anonymous"
            ) {
                id_ok(at, "reader tenant", &r.reader, connreg::TenantId::new)?;
                ensure(tenants.contains(r.reader.as_str()), at, || {
                    format!("reader {:?} is no tenant of the fleet", r.reader)
                })?;
            }
            bounded(
                At::Key(format!("workload.readers.{i}.page_items")),
                "page_items",
                r.page_items.into(),
                1,
                connreg::limits::PAGE_ITEMS_MAX.into(),
            )?;
            bounded(
                At::Key(format!("workload.readers.{i}.every_ms")),
                "every_ms",
                r.every_ms,
                1,
                DURATION_MS_MAX,
            )?;
        }
        ensure(w.operations.len() <= SCHEDULE_ENTRIES_MAX, 0, || {
            format!("workload.operations has more than {SCHEDULE_ENTRIES_MAX} entries")
        })?;
        for o in &w.operations {
            self.operation(o.span().start, o.get_ref())?;
        }
        Ok(())
    }

    fn operation(&self, at: usize, o: &Operation) -> Check {
        let f = &self.s.fleet;
        ensure(o.at_ms <= self.s.scenario.duration_ms, at, || {
            "operation at_ms is after scenario.duration_ms".into()
        })?;
        let has = |name: &str, present: bool| -> Check {
            ensure(present, at, || {
                format!("operation {:?} needs `{name}`", o.op)
            })
        };
        let allowed: &[&str] = match o.op {
            OperationKind::Drain | OperationKind::CircuitClose => {
                let r = o.replica.as_deref().unwrap_or_default();
                has("replica", o.replica.is_some())?;
                ensure(f.replicas.iter().any(|x| x.get_ref().id == r), at, || {
                    format!("unknown replica {r:?}")
                })?;
                &["replica"]
            }
            OperationKind::SetBinding => {
                let b = o.binding.as_deref().unwrap_or_default();
                has("binding", o.binding.is_some())?;
                has("enabled", o.enabled.is_some())?;
                ensure(f.bindings.iter().any(|x| x.get_ref().id == b), at, || {
                    format!("unknown binding {b:?}")
                })?;
                &["binding", "enabled"]
            }
            OperationKind::SetInstance => {
                let i = o.instance.as_deref().unwrap_or_default();
                has("instance", o.instance.is_some())?;
                has("enabled", o.enabled.is_some())?;
                ensure(f.instances.iter().any(|x| x.get_ref().id == i), at, || {
                    format!("unknown instance {i:?}")
                })?;
                &["instance", "enabled"]
            }
            OperationKind::SetType => {
                let t = o.connector_type.as_deref().unwrap_or_default();
                has("type", o.connector_type.is_some())?;
                has("enabled", o.enabled.is_some())?;
                ensure(f.types.iter().any(|x| x.get_ref().id == t), at, || {
                    format!("unknown type {t:?}")
                })?;
                &["type", "enabled"]
            }
            OperationKind::SetVersion => {
                let v = o.version.as_deref().unwrap_or_default();
                has("version", o.version.is_some())?;
                has("active", o.active.is_some())?;
                has("qualified", o.qualified.is_some())?;
                ensure(f.versions.iter().any(|x| x.get_ref().id == v), at, || {
                    format!("unknown version {v:?}")
                })?;
                &["version", "active", "qualified"]
            }
            OperationKind::Touch => {
                let c = o.capability.as_deref().unwrap_or_default();
                has("capability", o.capability.is_some())?;
                let known = f
                    .versions
                    .iter()
                    .any(|v| v.get_ref().capabilities.iter().any(|x| x == c));
                ensure(known, at, || format!("unknown capability {c:?}"))?;
                &["capability"]
            }
        };
        let present = [
            ("replica", o.replica.is_some()),
            ("binding", o.binding.is_some()),
            ("instance", o.instance.is_some()),
            ("type", o.connector_type.is_some()),
            ("version", o.version.is_some()),
            ("capability", o.capability.is_some()),
            ("enabled", o.enabled.is_some()),
            ("active", o.active.is_some()),
            ("qualified", o.qualified.is_some()),
        ];
        for (name, is) in present {
            ensure(!is || allowed.contains(&name), at, || {
                format!("operation {:?} does not take `{name}`", o.op)
            })?;
        }
        Ok(())
    }

    fn faults(&self) -> Check {
        let hosts = self.s.host_names();
        let duration = self.s.scenario.duration_ms;
        ensure(self.s.faults.len() <= SCHEDULE_ENTRIES_MAX, 0, || {
            format!("faults has more than {SCHEDULE_ENTRIES_MAX} entries")
        })?;
        for (i, f) in self.s.faults.iter().enumerate() {
            let at = f.span().start;
            let key = |name: &str| At::Key(format!("faults.{i}.{name}"));
            let f = f.get_ref();
            ensure(f.at_ms <= duration, at, || {
                "fault at_ms is after scenario.duration_ms".into()
            })?;
            let needs_until = matches!(
                f.kind,
                FaultKind::Partition | FaultKind::Hold | FaultKind::Latency | FaultKind::Loss
            );
            if needs_until {
                ensure(f.until_ms.is_some(), at, || {
                    format!("fault {:?} needs until_ms", f.kind)
                })?;
            }
            if let Some(until) = f.until_ms {
                ensure(until > f.at_ms && until <= duration, at, || {
                    "until_ms must be after at_ms and at most scenario.duration_ms".into()
                })?;
            }
            let sel = |list: &[String], side: &str| -> Check {
                ensure(!list.is_empty(), at, || {
                    format!("fault {:?} needs `{side}`", f.kind)
                })?;
                for s in list {
                    ensure(
                        !select_hosts(std::slice::from_ref(s), &hosts).is_empty(),
                        at,
                        || format!("host selector {s:?} matches no host"),
                    )?;
                }
                Ok(())
            };
            let allowed: &[&str] = match f.kind {
                FaultKind::Crash => {
                    sel(&f.hosts, "hosts")?;
                    if let Some(r) = f.restart_ms {
                        ensure(r > f.at_ms, at, || "restart_ms must be after at_ms".into())?;
                    }
                    &["hosts", "restart_ms"]
                }
                FaultKind::Partition => {
                    sel(&f.a, "a")?;
                    sel(&f.b, "b")?;
                    &["a", "b", "oneway", "until_ms"]
                }
                FaultKind::Hold => {
                    sel(&f.a, "a")?;
                    sel(&f.b, "b")?;
                    &["a", "b", "until_ms"]
                }
                FaultKind::Latency => {
                    sel(&f.a, "a")?;
                    sel(&f.b, "b")?;
                    let m = f.max_ms.unwrap_or(0);
                    ensure(f.max_ms.is_some(), at, || "latency needs max_ms".into())?;
                    bounded(
                        key("max_ms"),
                        "max_ms",
                        m,
                        self.s.scenario.latency_ms[0],
                        LATENCY_MS_MAX,
                    )?;
                    &["a", "b", "max_ms", "until_ms"]
                }
                FaultKind::Loss => {
                    let r = f.rate.unwrap_or(-1.0);
                    ratio_ok(key("rate"), "rate", r)?;
                    &["rate", "until_ms"]
                }
                FaultKind::LoseAnswers => {
                    ensure(!f.ops.is_empty(), at, || "lose_answers needs ops".into())?;
                    for op in &f.ops {
                        ensure(REGISTRY_OPS.contains(&op.as_str()), at, || {
                            format!("unknown op {op:?}; one of {}", REGISTRY_OPS.join(", "))
                        })?;
                    }
                    let c = f.count.unwrap_or(0);
                    bounded(key("count"), "count", c.into(), 1, 10_000)?;
                    &["ops", "count", "until_ms"]
                }
                FaultKind::ClockJump => {
                    let by = f.by_ms.unwrap_or(0);
                    ensure(by != 0, at, || "clock_jump needs a non-zero by_ms".into())?;
                    ensure(by.unsigned_abs() <= DURATION_MS_MAX, at, || {
                        format!("by_ms exceeds {DURATION_MS_MAX}")
                    })?;
                    &["by_ms"]
                }
                FaultKind::DbCut => &["cut", "until_ms"],
                FaultKind::DbStall => {
                    ensure(f.stall_ms.is_some(), at, || {
                        "db_stall needs stall_ms".into()
                    })?;
                    bounded(
                        key("stall_ms"),
                        "stall_ms",
                        f.stall_ms.unwrap_or(0),
                        1,
                        DB_STALL_MS_MAX,
                    )?;
                    &["stall_ms", "until_ms"]
                }
                FaultKind::DbTerminate | FaultKind::DbRestart => &["until_ms"],
            };
            let present = [
                ("until_ms", f.until_ms.is_some()),
                ("hosts", !f.hosts.is_empty()),
                ("restart_ms", f.restart_ms.is_some()),
                ("a", !f.a.is_empty()),
                ("b", !f.b.is_empty()),
                ("oneway", f.oneway),
                ("max_ms", f.max_ms.is_some()),
                ("rate", f.rate.is_some()),
                ("ops", !f.ops.is_empty()),
                ("count", f.count.is_some()),
                ("by_ms", f.by_ms.is_some()),
                ("cut", f.cut.is_some()),
                ("stall_ms", f.stall_ms.is_some()),
            ];
            for (name, is) in present {
                ensure(!is || allowed.contains(&name), at, || {
                    format!("fault {:?} does not take `{name}`", f.kind)
                })?;
            }
        }
        Ok(())
    }

    fn chaos(&self) -> Check {
        let c = &self.s.chaos;
        ratio_ok(At::Named, "chaos.lose_answer_ratio", c.lose_answer_ratio)?;
        for (what, n) in [
            ("chaos.replica_crashes", c.replica_crashes),
            ("chaos.registry_crashes", c.registry_crashes),
            ("chaos.partitions", c.partitions),
            ("chaos.holds", c.holds),
            ("chaos.loss_windows", c.loss_windows),
            ("chaos.clock_jumps", c.clock_jumps),
            ("chaos.db_cuts", c.db_cuts),
            ("chaos.db_stalls", c.db_stalls),
            ("chaos.db_terminates", c.db_terminates),
            ("chaos.db_restarts", c.db_restarts),
        ] {
            bounded(At::Named, what, n.into(), 0, CHAOS_FAULTS_MAX.into())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standard_scenario_parses() {
        let s = Scenario::standard();
        assert_eq!(s.scenario.name, "steady_state");
    }

    #[test]
    fn an_unknown_key_names_the_file_and_line() {
        let text = STANDARD_SCENARIO.replacen("[workload]\n", "[workload]\nbogus = 1\n", 1);
        let line = text.lines().position(|l| l == "bogus = 1").unwrap() + 1;
        let err = Scenario::parse("x.toml", &text).unwrap_err();
        match err {
            ScenarioError::Invalid {
                file,
                line: l,
                message,
            } => {
                assert_eq!(file, "x.toml");
                assert_eq!(l, line);
                assert!(message.contains("bogus"), "{message}");
            }
            other => panic!("{other}"),
        }
    }

    #[test]
    fn a_dangling_reference_names_the_entry_line() {
        let text = format!(
            "{STANDARD_SCENARIO}\n[[fleet.replicas]]\nid = \"zz\"\ninstance = \"nope\"\nregion = \"eu\"\nzone = \"eu-a\"\ncapacity = 1\n"
        );
        let line = text
            .lines()
            .collect::<Vec<_>>()
            .iter()
            .rposition(|l| *l == "[[fleet.replicas]]")
            .unwrap()
            + 1;
        let err = Scenario::parse("y.toml", &text).unwrap_err();
        match err {
            ScenarioError::Invalid {
                line: l, message, ..
            } => {
                assert_eq!(l, line, "{message}");
                assert!(message.contains("nope"), "{message}");
            }
            other => panic!("{other}"),
        }
    }

    #[test]
    fn selectors_match_names_and_prefixes() {
        let hosts = vec![
            "registry-0".to_string(),
            "registry-1".into(),
            "admin".into(),
        ];
        assert_eq!(select_hosts(&["registry-*".into()], &hosts).len(), 2);
        assert_eq!(
            select_hosts(&["admin".into()], &hosts),
            vec!["admin".to_string()]
        );
        assert!(select_hosts(&["nope".into()], &hosts).is_empty());
    }
}
