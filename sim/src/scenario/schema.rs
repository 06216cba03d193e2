//! The scenario schema: one type per table of a scenario file (the run's
//! name and timing, the registry, leases, the fleet, the workload and the
//! expected counts). The fault tables are in `faults`.

use std::path::Path;

use connreg::{CrossRegion, ScopeKind};
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::{Chaos, FaultSpec, Generated};
use crate::counters::CounterBounds;

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
    /// The records the tenant groups generate (filled when parsed).
    #[serde(skip)]
    pub generated: Generated,
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
    /// PostgreSQL with a `db_failover`: how the standby replicates,
    /// `synchronous` (a commit returns once the standby applied it) or
    /// `asynchronous` (it may lag, and a failover may lose commits a
    /// caller was answered).
    #[serde(default)]
    pub database_replication: DatabaseReplication,
    /// How long the registry holds a reservation before lease maintenance
    /// releases it (PIN-8), in milliseconds. By default the longest a
    /// careful dispatcher can hold one (`crate::hold::careful_hold_ms`);
    /// shorter is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_hold_ms: Option<u64>,
}

/// `[registry] database_replication`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DatabaseReplication {
    /// The standby is synchronous, with `remote_apply`.
    #[default]
    Synchronous,
    /// The standby streams asynchronously.
    Asynchronous,
}

impl Default for RegistrySettings {
    fn default() -> Self {
        RegistrySettings {
            hosts: default_registry_hosts(),
            circuit_enabled: true,
            circuit_threshold: default_circuit_threshold(),
            database_replication: DatabaseReplication::default(),
            reservation_hold_ms: None,
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
    #[serde(default)]
    pub instances: Vec<Spanned<InstanceSpec>>,
    /// `[[fleet.scopes]]`.
    #[serde(default)]
    pub scopes: Vec<Spanned<ScopeSpec>>,
    /// `[[fleet.bindings]]`.
    #[serde(default)]
    pub bindings: Vec<Spanned<BindingSpec>>,
    /// `[[fleet.replicas]]`: one replica host each.
    #[serde(default)]
    pub replicas: Vec<Spanned<ReplicaEntry>>,
    /// `[[fleet.tenant_groups]]`: generated tenants, each with its
    /// instances, scope and bindings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tenant_groups: Vec<Spanned<TenantGroup>>,
    /// `[[fleet.replica_groups]]`: many replicas, simulated together.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replica_groups: Vec<Spanned<ReplicaGroup>>,
}

/// Generated tenants: `count` tenants named by `pattern`, each with
/// `instances` instances of `version`, an optional tenant scope, and one
/// binding per capability and instance. The records are named after the
/// tenant: instances `<tenant>-i<k>`, the scope `<tenant>-scope`, bindings
/// `<tenant>-b<c>-<k>` (capability `c` of the list, instance `k`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TenantGroup {
    /// The group's name, which mix entries, readers and replica groups
    /// refer to.
    pub name: String,
    /// How many tenants.
    pub count: u32,
    /// Tenant IDs: `{i}` is the tenant's number, zero-padded to the width
    /// of `count - 1`. Default `<name>-{i}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// The version every instance installs.
    pub version: String,
    /// Instances per tenant.
    #[serde(default = "one")]
    pub instances: u32,
    /// Capabilities bound; every capability of `version` when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
    /// The limit of each tenant's admission scope, which all its bindings
    /// reserve; no scope when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope_limit: Option<u32>,
}

/// Where a group's replicas run: they are spread over these placements
/// in turn.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Placement {
    /// Region.
    pub region: String,
    /// Zone.
    pub zone: String,
}

/// Many replicas described once: `count` replicas named `<name>-<i>`
/// (zero-padded), simulated by one host (`fleet-<name>`, a port each)
/// that runs each replica's heartbeats and executions as its own host
/// would.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicaGroup {
    /// The group's name.
    pub name: String,
    /// How many replicas.
    pub count: u32,
    /// The instance they all serve; or `tenants`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// A tenant group whose instances the replicas serve, in turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenants: Option<String>,
    /// Placements, taken in turn.
    pub spread: Vec<Placement>,
    /// Capacity class.
    #[serde(default = "default_class")]
    pub class: String,
    /// Most concurrent reservations of each replica.
    pub capacity: u32,
    /// Interval between a replica's heartbeats; `lifecycle.heartbeat_ms`
    /// when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_ms: Option<u64>,
    /// Each heartbeat interval is drawn from `[heartbeat_ms - jitter,
    /// heartbeat_ms]`, so a group does not beat in lockstep.
    #[serde(default)]
    pub heartbeat_jitter_ms: u64,
    /// Probability that the provider behind a replica leaves an
    /// execution's outcome unknown.
    #[serde(default)]
    pub unknown_ratio: f64,
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
    /// The actions that run, as `"dispatcher-<i>:<n>"` (the `n`th action
    /// dispatcher `i` starts, from 1); empty for all. The others are still
    /// drawn and their start gaps still waited, so the listed ones keep
    /// their plans: a shrink uses it to keep one action of many.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub only_actions: Vec<String>,
    /// `[[workload.mix]]`: what the dispatchers ask for.
    pub mix: Vec<Spanned<MixEntry>>,
    /// `[[workload.readers]]`: catalog readers.
    #[serde(default)]
    pub readers: Vec<Spanned<ReaderEntry>>,
    /// `[[workload.operations]]`: operator actions at fixed times.
    #[serde(default)]
    pub operations: Vec<Spanned<Operation>>,
}

/// An `only_actions` entry: the dispatcher's index and the action's
/// number, or `None` when it is not of the form `dispatcher-<i>:<n>`.
pub(super) fn only_action(entry: &str) -> Option<(u32, u32)> {
    let (host, n) = entry.strip_prefix("dispatcher-")?.split_once(':')?;
    Some((host.parse().ok()?, n.parse().ok()?))
}

impl Workload {
    /// Whether action `n` (from 1) of dispatcher `index` runs.
    pub fn runs(&self, index: u32, n: u32) -> bool {
        self.only_actions.is_empty()
            || self
                .only_actions
                .iter()
                .any(|e| only_action(e) == Some((index, n)))
    }

    /// How many actions run.
    pub fn actions_run(&self) -> u64 {
        if self.only_actions.is_empty() {
            u64::from(self.dispatchers) * u64::from(self.actions)
        } else {
            self.only_actions.len() as u64
        }
    }
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
    /// The verified tenant; or `tenants`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    /// A tenant group: each action asks as one of its tenants, drawn
    /// uniformly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenants: Option<String>,
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
    /// `internal`, `internal-unbound`, `anonymous`, or a tenant ID; or
    /// `tenants`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reader: String,
    /// A tenant group: each paging session reads as one of its tenants,
    /// drawn uniformly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenants: Option<String>,
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
    /// Publish `scope` with `limit`.
    SetScope,
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
    /// For `set_scope`.
    #[serde(default)]
    pub scope: Option<String>,
    /// For `set_scope`.
    #[serde(default)]
    pub limit: Option<u32>,
    /// Repeat the operation at this interval until `until_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every_ms: Option<u64>,
    /// The last time a repeated operation may run (default
    /// `scenario.duration_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_ms: Option<u64>,
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

impl Operation {
    /// The times it runs: `at_ms`, then every `every_ms` until `until_ms`
    /// (default `duration_ms`).
    pub fn times(&self, duration_ms: u64) -> usize {
        match self.every_ms {
            Some(every) if every > 0 => {
                let until = self.until_ms.unwrap_or(duration_ms);
                (until.saturating_sub(self.at_ms) / every) as usize + 1
            }
            _ => 1,
        }
    }

    /// The operation at each of its times, in order.
    pub fn expand(&self, duration_ms: u64) -> Vec<Operation> {
        let every = self.every_ms.unwrap_or(0);
        (0..self.times(duration_ms) as u64)
            .map(|k| Operation {
                at_ms: self.at_ms + k * every,
                every_ms: None,
                until_ms: None,
                ..self.clone()
            })
            .collect()
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
    /// A replica whose lease ended is offline within this many
    /// milliseconds (registry clock) after the end: the bound lease
    /// maintenance must keep (`lease_progress`). Unchecked when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offline_within_ms: Option<u64>,
    /// Reachability probes (`crate::probes`) a sweep of the scenario must
    /// fire at least once over its seeds: the faults and paths the
    /// scenario exists to exercise (`fault:db_cut:next_commit`,
    /// `answer:maintain:more`, `plant:maintain-page-stops-early`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reach: Vec<String>,
    /// A publication commits within this many milliseconds (simulated)
    /// of the operator's first attempt, not counting the time a database
    /// fault, a network fault between the operator and a registry host or
    /// a registry host crash excuses (`publication_progress`). Defaults to
    /// [`crate::limits::PUBLISH_WITHIN_MS`] when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish_within_ms: Option<u64>,
}

impl Expect {
    /// True when nothing is expected.
    pub fn is_empty(&self) -> bool {
        self.at_least.is_empty()
            && self.at_most.is_empty()
            && self.offline_within_ms.is_none()
            && self.reach.is_empty()
            && self.publish_within_ms.is_none()
    }
}
