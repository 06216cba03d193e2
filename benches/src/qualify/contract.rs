//! Environment contracts: the TOML files in `benches/environments/`.
//!
//! A contract names an environment and says what it must sustain: the
//! fleet, the load, the operation mix and the thresholds (SIM-6). Parsing
//! is strict: unknown keys, missing keys, wrong types and values outside
//! their bounds (`super::limits`) are errors naming the file, the line and
//! the column of the offending key. The format is documented, key by key,
//! in `benches/README.md`.
//!
//! This file holds the contract, its required tables and their
//! validation; `events` holds the optional `[expiry]` and
//! `[publications]` tables (re-exported here).

mod events;

use std::fmt;
use std::io::Read;
use std::path::Path;

use connreg::limits::{
    CIRCUIT_THRESHOLD_MAX, LEASE_TTL_MS_MAX, REPLICA_CAPACITY_MAX, SCOPE_LIMIT_MAX,
};
use connreg::{CircuitPolicy, Region, RegistryConfig};
use serde::{Deserialize, Serialize};

pub use events::{Expiry, Failover, Publications};

use super::fleet::FleetShape;
use super::limits::{
    ACTIONS_MAX, BINDINGS_MAX, BINDINGS_PER_TENANT_CAPABILITY_MAX, CAPABILITIES_MAX, CLIENTS_MAX,
    CONTRACT_BYTES_MAX, DESCRIPTION_BYTES_MAX, DURATION_MS_MAX, DURATION_MS_MIN, INSTANCES_MAX,
    INSTANCES_PER_TENANT_MAX, MIX_WEIGHT_MAX, NAME_BYTES_MAX, OPERATIONS_MAX,
    OUTSTANDING_PER_CLIENT_MAX, PGBENCH_SECS_DEFAULT, PGBENCH_SECS_MAX, PROCESSES_MAX, REGIONS_MAX,
    REPLICAS_MAX, REPLICAS_PER_INSTANCE_MAX, SYNCHRONOUS_STANDBYS_MAX, TENANTS_MAX, TRIALS_MAX,
    WARMUP_MS_DEFAULT, WARMUP_MS_MAX, ZONES_PER_REGION_MAX,
};

/// Which registry backend a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// The in-memory backend, in this process.
    Memory,
    /// The PostgreSQL backend on a fresh database from `connreg-pgtest`.
    Postgres,
}

impl BackendKind {
    /// The backend's name as contracts and reports spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Memory => "memory",
            BackendKind::Postgres => "postgres",
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One environment contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Contract {
    /// The environment's name, such as `fleet-10k`.
    pub name: String,
    /// One or two sentences for operators.
    #[serde(default)]
    pub description: String,
    /// The backend, unless `--backend` says otherwise.
    pub backend: BackendKind,
    /// Seeds each client's choice of operations, tenants and topology.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// The fleet's shape.
    pub fleet: FleetShape,
    /// Registry configuration.
    #[serde(default)]
    pub registry: RegistrySettings,
    /// Concurrency and length of the run.
    pub load: Load,
    /// The operation mix.
    pub mix: Mix,
    /// What the run must achieve.
    pub thresholds: Thresholds,
    /// Optional: zones whose replicas stop heartbeating during each
    /// trial's measured run, and the lease maintenance that takes them
    /// offline.
    #[serde(default)]
    pub expiry: Option<Expiry>,
    /// Optional: an operator publishing catalog changes during each
    /// trial's measured run.
    #[serde(default)]
    pub publications: Option<Publications>,
    /// Optional (PostgreSQL, `--standby`): a failover of the database
    /// inside the first trial's measured run.
    #[serde(default)]
    pub failover: Option<Failover>,
}

fn default_seed() -> u64 {
    1
}

/// The registry's circuit policy for the run (SETTLE-5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistrySettings {
    /// Whether unknown outcomes count toward opening a circuit. Default true.
    #[serde(default = "default_true")]
    pub circuit_enabled: bool,
    /// Consecutive unknown outcomes that open a circuit. Default 3.
    #[serde(default = "default_circuit_threshold")]
    pub circuit_threshold: u32,
}

fn default_true() -> bool {
    true
}

fn default_circuit_threshold() -> u32 {
    3
}

impl Default for RegistrySettings {
    fn default() -> Self {
        RegistrySettings {
            circuit_enabled: true,
            circuit_threshold: default_circuit_threshold(),
        }
    }
}

impl RegistrySettings {
    /// The registry configuration these settings describe.
    pub fn config(&self) -> RegistryConfig {
        RegistryConfig {
            circuit: CircuitPolicy {
                enabled: self.circuit_enabled,
                threshold: self.circuit_threshold,
            },
            ..RegistryConfig::default()
        }
    }
}

/// Concurrency and length of a run. Exactly one of `duration_ms` and
/// `operations` is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Load {
    /// Concurrent clients, each issuing one operation at a time.
    pub clients: u32,
    /// Run for this long, in milliseconds.
    pub duration_ms: Option<u64>,
    /// Or run this many operations in all.
    pub operations: Option<u64>,
    /// Most reservations one client holds before it settles instead of
    /// resolving a new action. Default 16.
    #[serde(default = "default_outstanding")]
    pub outstanding_per_client_max: u32,
    /// Most new actions in the run; the run stops early when they are used
    /// up. Default and maximum [`ACTIONS_MAX`]. Trials share it equally.
    pub actions_max: Option<u64>,
    /// Unmeasured warm-up before each trial, in milliseconds: the same
    /// clients and mix, nothing counted. Default [`WARMUP_MS_DEFAULT`] for
    /// a run by duration, 0 for a run by operation count.
    pub warmup_ms: Option<u64>,
    /// Measured runs of the contract on one fleet, one after another;
    /// each threshold must hold in every one. Default 1.
    pub trials: Option<u32>,
    /// On PostgreSQL: registry processes, each running `clients` clients
    /// with a pool of its own (`--processes` overrides). Default 1.
    pub processes: Option<u32>,
    /// On PostgreSQL: seconds of each pgbench script beside the run.
    /// Default: the duration (at most [`PGBENCH_SECS_MAX`]), or
    /// [`PGBENCH_SECS_DEFAULT`] for a run by operation count.
    pub pgbench_secs: Option<u64>,
}

fn default_outstanding() -> u32 {
    16
}

/// How a run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunLength {
    /// After this many milliseconds.
    DurationMs(u64),
    /// After this many operations.
    Operations(u64),
}

impl Contract {
    /// The run's budget of new actions: the contract's `actions_max` (or
    /// [`ACTIONS_MAX`]), and no more than what a full inspection has room
    /// for beside the fleet's replicas and scopes.
    pub fn actions_budget(&self) -> u64 {
        let room = (connreg::inspect::INSPECT_ROWS_MAX as u64)
            .saturating_sub(self.fleet.replicas() + self.fleet.scopes());
        self.load.actions_budget().min(room)
    }
}

impl Load {
    /// How the run ends. Only valid on a validated contract.
    pub fn length(&self) -> RunLength {
        match (self.duration_ms, self.operations) {
            (Some(ms), _) => RunLength::DurationMs(ms),
            (None, Some(n)) => RunLength::Operations(n),
            (None, None) => RunLength::Operations(0),
        }
    }

    /// The run's budget of new actions.
    pub fn actions_budget(&self) -> u64 {
        self.actions_max.unwrap_or(ACTIONS_MAX)
    }

    /// The warm-up before each trial, in milliseconds.
    pub fn warmup(&self) -> u64 {
        self.warmup_ms.unwrap_or(match self.length() {
            RunLength::DurationMs(_) => WARMUP_MS_DEFAULT,
            RunLength::Operations(_) => 0,
        })
    }

    /// Seconds of each pgbench script beside the run.
    pub fn pgbench_secs(&self) -> u64 {
        self.pgbench_secs.unwrap_or(match self.length() {
            RunLength::DurationMs(ms) => ms.div_ceil(1000).clamp(1, PGBENCH_SECS_MAX),
            RunLength::Operations(_) => PGBENCH_SECS_DEFAULT,
        })
    }

    /// Registry processes, at least 1.
    pub fn processes(&self) -> u32 {
        self.processes.unwrap_or(1).max(1)
    }

    /// Trials, at least 1.
    pub fn trials(&self) -> u32 {
        self.trials.unwrap_or(1).max(1)
    }
}

/// Relative weights of the operations each client picks from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mix {
    /// Resolve a new action (ROUTE-5..ROUTE-10).
    pub resolve_new: u32,
    /// Resolve an action the client holds again (ROUTE-4, PIN-2).
    pub resolve_duplicate: u32,
    /// Settle a reservation the client holds (SETTLE-1..SETTLE-3).
    pub settle: u32,
    /// Heartbeat a random replica (LEASE-1).
    pub heartbeat: u32,
    /// Read a tenant's first catalog page (CAT-5, CAT-8).
    pub catalog_page: u32,
    /// Outcomes of settlements. Default: all `completed`.
    #[serde(default)]
    pub settle_outcomes: OutcomeMix,
}

/// Relative weights of settlement outcomes (SETTLE-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutcomeMix {
    /// `completed`.
    #[serde(default)]
    pub completed: u32,
    /// `outcome_unknown`: counts toward opening the replica's circuit.
    #[serde(default)]
    pub outcome_unknown: u32,
    /// `cancelled`.
    #[serde(default)]
    pub cancelled: u32,
    /// `lease_expired`.
    #[serde(default)]
    pub lease_expired: u32,
}

impl Default for OutcomeMix {
    fn default() -> Self {
        OutcomeMix {
            completed: 1,
            outcome_unknown: 0,
            cancelled: 0,
            lease_expired: 0,
        }
    }
}

/// What the run must achieve. Zero invariant violations is always required
/// and needs no key.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Thresholds {
    /// Fewest successful resolves (new and duplicate) per second.
    pub resolves_per_s_min: f64,
    /// Highest 99th percentile latency of a resolve call, in milliseconds.
    pub resolve_p99_ms_max: f64,
    /// Highest share of operations that fail with an unexpected error
    /// (anything but `no_capacity` on a new resolve), from 0 to 1.
    pub unexpected_error_rate_max: f64,
    /// Optional: highest median latency of a resolve call, in milliseconds.
    pub resolve_p50_ms_max: Option<f64>,
    /// Optional: highest share of new resolves answered `no_capacity`,
    /// from 0 to 1.
    pub no_capacity_rate_max: Option<f64>,
    /// Optional (PostgreSQL): fewest connected standbys every commit waits
    /// for (`synchronous_commit` `on` or `remote_apply`,
    /// `synchronous_standby_names` naming them, streaming as `sync` or
    /// `quorum`), from 1 to
    /// `SYNCHRONOUS_STANDBYS_MAX`. A durable contract sets it to 1: with
    /// none, a failover can lose answered routes.
    #[serde(default)]
    pub synchronous_standbys_min: Option<u32>,
}

/// A contract that cannot be used: where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: {message}")]
pub struct ContractError {
    /// The contract file.
    pub file: String,
    /// The 1-based line of the offending key (1 when there is none).
    pub line: usize,
    /// The 1-based column of the offending key.
    pub column: usize,
    /// What is wrong, in lowercase.
    pub message: String,
}

/// A semantic error: the dotted key at fault and the message.
type Invalid = (String, String);

fn invalid<T>(key: &str, message: impl Into<String>) -> Result<T, Invalid> {
    Err((key.to_string(), message.into()))
}

fn check_range<T: PartialOrd + fmt::Display + Copy>(
    key: &str,
    value: T,
    min: T,
    max: T,
    max_name: &str,
) -> Result<(), Invalid> {
    if value < min {
        return invalid(
            key,
            format!("{key} = {value} is below its minimum of {min}"),
        );
    }
    if value > max {
        return invalid(
            key,
            format!("{key} = {value} exceeds its limit of {max} ({max_name})"),
        );
    }
    Ok(())
}

fn check_weight(key: &str, value: u32) -> Result<(), Invalid> {
    check_range(key, value, 0, MIX_WEIGHT_MAX, "MIX_WEIGHT_MAX")
}

fn check_share(key: &str, value: f64) -> Result<(), Invalid> {
    if !value.is_finite() || !(0.0..=1.0).contains(&value) {
        return invalid(key, format!("{key} = {value} must be a share from 0 to 1"));
    }
    Ok(())
}

fn check_positive(key: &str, value: f64) -> Result<(), Invalid> {
    if !value.is_finite() || value <= 0.0 {
        return invalid(
            key,
            format!("{key} = {value} must be a finite number above 0"),
        );
    }
    Ok(())
}

impl Contract {
    /// Reads and validates a contract file.
    pub fn load(path: &Path) -> Result<Contract, ContractError> {
        let file = path.display().to_string();
        let at_start = |message: String| ContractError {
            file: file.clone(),
            line: 1,
            column: 1,
            message,
        };
        let handle =
            std::fs::File::open(path).map_err(|e| at_start(format!("cannot read: {e}")))?;
        let mut text = String::new();
        handle
            .take(CONTRACT_BYTES_MAX as u64 + 1)
            .read_to_string(&mut text)
            .map_err(|e| at_start(format!("cannot read: {e}")))?;
        if text.len() > CONTRACT_BYTES_MAX {
            return Err(at_start(format!(
                "file exceeds its limit of {CONTRACT_BYTES_MAX} bytes (CONTRACT_BYTES_MAX)"
            )));
        }
        Contract::parse(&file, &text)
    }

    /// Parses and validates contract text; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Contract, ContractError> {
        let contract: Contract = toml::from_str(text).map_err(|e| {
            let (line, column) = e
                .span()
                .map_or((1, 1), |span| line_and_column(text, span.start));
            ContractError {
                file: file.to_string(),
                line,
                column,
                message: e.message().trim_end().to_string(),
            }
        })?;
        contract.validate().map_err(|(key, message)| {
            let (line, column) = key_position(text, &key);
            ContractError {
                file: file.to_string(),
                line,
                column,
                message,
            }
        })?;
        Ok(contract)
    }

    /// Checks everything the types alone do not.
    fn validate(&self) -> Result<(), Invalid> {
        self.validate_meta()?;
        self.validate_fleet()?;
        self.validate_load()?;
        self.validate_mix()?;
        self.validate_thresholds()?;
        self.validate_expiry()?;
        self.validate_publications()?;
        self.validate_failover()
    }

    fn validate_meta(&self) -> Result<(), Invalid> {
        let name = &self.name;
        if name.is_empty()
            || name.len() > NAME_BYTES_MAX
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        {
            return invalid(
                "name",
                format!(
                    "name {name:?} must be 1 to {NAME_BYTES_MAX} bytes of [A-Za-z0-9._-] (NAME_BYTES_MAX)"
                ),
            );
        }
        if self.description.len() > DESCRIPTION_BYTES_MAX {
            return invalid(
                "description",
                format!(
                    "description exceeds its limit of {DESCRIPTION_BYTES_MAX} bytes (DESCRIPTION_BYTES_MAX)"
                ),
            );
        }
        let circuit = self.registry.circuit_threshold;
        check_range(
            "registry.circuit_threshold",
            circuit,
            1,
            CIRCUIT_THRESHOLD_MAX,
            "connreg::limits::CIRCUIT_THRESHOLD_MAX",
        )
    }

    fn validate_fleet(&self) -> Result<(), Invalid> {
        let f = &self.fleet;
        check_range("fleet.tenants", f.tenants, 1, TENANTS_MAX, "TENANTS_MAX")?;
        check_range(
            "fleet.capabilities",
            f.capabilities,
            1,
            CAPABILITIES_MAX,
            "CAPABILITIES_MAX",
        )?;
        check_range(
            "fleet.bindings_per_tenant_capability",
            f.bindings_per_tenant_capability,
            1,
            BINDINGS_PER_TENANT_CAPABILITY_MAX,
            "BINDINGS_PER_TENANT_CAPABILITY_MAX",
        )?;
        check_range(
            "fleet.instances_per_tenant",
            f.instances_per_tenant,
            1,
            INSTANCES_PER_TENANT_MAX,
            "INSTANCES_PER_TENANT_MAX",
        )?;
        check_range(
            "fleet.replicas_per_instance",
            f.replicas_per_instance,
            1,
            REPLICAS_PER_INSTANCE_MAX,
            "REPLICAS_PER_INSTANCE_MAX",
        )?;
        check_range(
            "fleet.zones_per_region",
            f.zones_per_region,
            1,
            ZONES_PER_REGION_MAX,
            "ZONES_PER_REGION_MAX",
        )?;
        check_range(
            "fleet.replica_capacity",
            f.replica_capacity,
            1,
            REPLICA_CAPACITY_MAX,
            "connreg::limits::REPLICA_CAPACITY_MAX",
        )?;
        check_range(
            "fleet.lease_ttl_ms",
            f.lease_ttl_ms,
            1,
            LEASE_TTL_MS_MAX,
            "connreg::limits::LEASE_TTL_MS_MAX",
        )?;
        if f.regions.is_empty() || f.regions.len() > REGIONS_MAX {
            return invalid(
                "fleet.regions",
                format!("fleet.regions must list 1 to {REGIONS_MAX} regions (REGIONS_MAX)"),
            );
        }
        for (i, r) in f.regions.iter().enumerate() {
            if let Err(e) = Region::new(r.clone()) {
                return invalid("fleet.regions", format!("fleet.regions[{i}]: {e}"));
            }
            if f.regions[..i].contains(r) {
                return invalid(
                    "fleet.regions",
                    format!("fleet.regions[{i}]: region {r:?} is listed twice"),
                );
            }
            // Zone names are `<region>-z<k>`; they must stay valid ids.
            if let Err(e) = connreg::Zone::new(format!("{r}-z{}", f.zones_per_region)) {
                return invalid(
                    "fleet.regions",
                    format!("fleet.regions[{i}]: zone name: {e}"),
                );
            }
        }
        if let Some(limit) = f.admission.tenant_limit {
            check_range(
                "fleet.admission.tenant_limit",
                limit,
                1,
                SCOPE_LIMIT_MAX,
                "connreg::limits::SCOPE_LIMIT_MAX",
            )?;
        }
        if let Some(limit) = f.admission.binding_limit {
            check_range(
                "fleet.admission.binding_limit",
                limit,
                1,
                SCOPE_LIMIT_MAX,
                "connreg::limits::SCOPE_LIMIT_MAX",
            )?;
        }
        if f.instances() > INSTANCES_MAX {
            return invalid(
                "fleet.instances_per_tenant",
                format!(
                    "a fleet of {} instances exceeds its limit of {INSTANCES_MAX} (INSTANCES_MAX)",
                    f.instances()
                ),
            );
        }
        if f.bindings() > BINDINGS_MAX {
            return invalid(
                "fleet.bindings_per_tenant_capability",
                format!(
                    "a fleet of {} bindings exceeds its limit of {BINDINGS_MAX} (BINDINGS_MAX)",
                    f.bindings()
                ),
            );
        }
        if f.replicas() > REPLICAS_MAX {
            return invalid(
                "fleet.replicas_per_instance",
                format!(
                    "a fleet of {} replicas exceeds its limit of {REPLICAS_MAX} (REPLICAS_MAX)",
                    f.replicas()
                ),
            );
        }
        Ok(())
    }

    fn validate_load(&self) -> Result<(), Invalid> {
        let l = &self.load;
        check_range("load.clients", l.clients, 1, CLIENTS_MAX, "CLIENTS_MAX")?;
        match (l.duration_ms, l.operations) {
            (Some(_), Some(_)) => {
                return invalid(
                    "load.operations",
                    "give load.duration_ms or load.operations, not both",
                );
            }
            (None, None) => {
                return invalid("load", "give load.duration_ms or load.operations");
            }
            (Some(ms), None) => check_range(
                "load.duration_ms",
                ms,
                DURATION_MS_MIN,
                DURATION_MS_MAX,
                "DURATION_MS_MAX",
            )?,
            (None, Some(n)) => {
                check_range("load.operations", n, 1, OPERATIONS_MAX, "OPERATIONS_MAX")?
            }
        }
        check_range(
            "load.outstanding_per_client_max",
            l.outstanding_per_client_max,
            1,
            OUTSTANDING_PER_CLIENT_MAX,
            "OUTSTANDING_PER_CLIENT_MAX",
        )?;
        if let Some(n) = l.actions_max {
            check_range("load.actions_max", n, 1, ACTIONS_MAX, "ACTIONS_MAX")?;
        }
        if let Some(n) = l.processes {
            check_range("load.processes", n, 1, PROCESSES_MAX, "PROCESSES_MAX")?;
        }
        if let Some(secs) = l.pgbench_secs {
            check_range(
                "load.pgbench_secs",
                secs,
                1,
                PGBENCH_SECS_MAX,
                "PGBENCH_SECS_MAX",
            )?;
        }
        if let Some(ms) = l.warmup_ms {
            check_range("load.warmup_ms", ms, 0, WARMUP_MS_MAX, "WARMUP_MS_MAX")?;
        }
        if let Some(n) = l.trials {
            check_range("load.trials", n, 1, TRIALS_MAX, "TRIALS_MAX")?;
            if l.actions_budget() < u64::from(n) {
                return invalid(
                    "load.trials",
                    format!(
                        "load.trials = {n} exceeds the budget of new actions ({}): trials share it",
                        l.actions_budget()
                    ),
                );
            }
        }
        Ok(())
    }

    fn validate_mix(&self) -> Result<(), Invalid> {
        let m = &self.mix;
        for (key, w) in [
            ("mix.resolve_new", m.resolve_new),
            ("mix.resolve_duplicate", m.resolve_duplicate),
            ("mix.settle", m.settle),
            ("mix.heartbeat", m.heartbeat),
            ("mix.catalog_page", m.catalog_page),
        ] {
            check_weight(key, w)?;
        }
        if m.resolve_new == 0 {
            return invalid(
                "mix.resolve_new",
                "mix.resolve_new must be above 0: every other resolve needs a route first",
            );
        }
        let o = &m.settle_outcomes;
        for (key, w) in [
            ("mix.settle_outcomes.completed", o.completed),
            ("mix.settle_outcomes.outcome_unknown", o.outcome_unknown),
            ("mix.settle_outcomes.cancelled", o.cancelled),
            ("mix.settle_outcomes.lease_expired", o.lease_expired),
        ] {
            check_weight(key, w)?;
        }
        if o.completed + o.outcome_unknown + o.cancelled + o.lease_expired == 0 {
            return invalid(
                "mix.settle_outcomes",
                "mix.settle_outcomes must give at least one outcome a weight above 0",
            );
        }
        Ok(())
    }

    fn validate_thresholds(&self) -> Result<(), Invalid> {
        let t = &self.thresholds;
        if !t.resolves_per_s_min.is_finite() || t.resolves_per_s_min < 0.0 {
            return invalid(
                "thresholds.resolves_per_s_min",
                format!(
                    "thresholds.resolves_per_s_min = {} must be a finite number, 0 or above",
                    t.resolves_per_s_min
                ),
            );
        }
        check_positive("thresholds.resolve_p99_ms_max", t.resolve_p99_ms_max)?;
        if let Some(v) = t.resolve_p50_ms_max {
            check_positive("thresholds.resolve_p50_ms_max", v)?;
        }
        check_share(
            "thresholds.unexpected_error_rate_max",
            t.unexpected_error_rate_max,
        )?;
        if let Some(v) = t.no_capacity_rate_max {
            check_share("thresholds.no_capacity_rate_max", v)?;
        }
        if let Some(n) = t.synchronous_standbys_min
            && (n == 0 || n > SYNCHRONOUS_STANDBYS_MAX)
        {
            return invalid(
                "thresholds.synchronous_standbys_min",
                format!(
                    "thresholds.synchronous_standbys_min = {n} must be 1 to \
                     {SYNCHRONOUS_STANDBYS_MAX} (leave it out to not judge replication)"
                ),
            );
        }
        Ok(())
    }
}

/// 1-based line and column of byte `offset` in `text`.
fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text.as_bytes()[..offset];
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let line_start = before
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |p| p + 1);
    (line, offset - line_start + 1)
}

/// Where the dotted `key` is written in `text`: its value's line and
/// column, or the closest enclosing table's, or the start of the file.
fn key_position(text: &str, key: &str) -> (usize, usize) {
    let Ok(root) = toml::de::DeTable::parse(text) else {
        return (1, 1);
    };
    let mut span = None;
    let mut table = root.get_ref();
    for part in key.split('.') {
        let Some((k, v)) = table.iter().find(|(k, _)| *k.get_ref() == part) else {
            break;
        };
        // The key's own position reads best for a scalar; a table's key
        // (`[fleet]`) is its header.
        span = Some(k.span());
        match v.get_ref() {
            toml::de::DeValue::Table(inner) => table = inner,
            _ => break,
        }
    }
    span.map_or((1, 1), |s| line_and_column(text, s.start))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMOKE: &str = include_str!("../../environments/smoke.toml");

    #[test]
    fn the_smoke_contract_parses() {
        // spec: SIM-6
        let c = Contract::parse("smoke.toml", SMOKE).expect("smoke parses");
        assert_eq!(c.name, "smoke");
        assert_eq!(c.backend, BackendKind::Memory);
    }

    #[test]
    fn an_unknown_key_names_its_line() {
        // spec: SIM-6
        let text = SMOKE.replacen("[load]\n", "[load]\nbogus = 1\n", 1);
        let line = text.lines().position(|l| l == "bogus = 1").unwrap() + 1;
        let e = Contract::parse("x.toml", &text).unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("x.toml", line), "{e}");
        assert!(e.message.contains("bogus"), "{e}");
    }

    #[test]
    fn a_value_past_its_limit_names_the_key_and_the_limit() {
        // spec: SIM-6
        let text = SMOKE.replacen(
            "replicas_per_instance = 4",
            "replicas_per_instance = 5000",
            1,
        );
        let line = text
            .lines()
            .position(|l| l.starts_with("replicas_per_instance"))
            .unwrap()
            + 1;
        let e = Contract::parse("x.toml", &text).unwrap_err();
        assert_eq!(e.line, line, "{e}");
        assert!(e.message.contains("REPLICAS_PER_INSTANCE_MAX"), "{e}");
    }

    #[test]
    fn both_duration_and_operations_is_an_error() {
        // spec: SIM-6
        let text = SMOKE.replacen("[load]\n", "[load]\nduration_ms = 1000\n", 1);
        let e = Contract::parse("x.toml", &text).unwrap_err();
        assert!(e.message.contains("not both"), "{e}");
    }

    #[test]
    fn line_and_column_count_from_one() {
        assert_eq!(line_and_column("a\nbc\n", 0), (1, 1));
        assert_eq!(line_and_column("a\nbc\n", 3), (2, 2));
    }
}
