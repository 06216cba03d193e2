//! The qualification report: what ran, where, the measured figures, each
//! threshold with its measured value and verdict, and the overall verdict.
//! Serialized as JSON (`--report FILE`) and summarized for humans.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::beside::PgbenchFacts;
use super::check::Checked;
use super::cleanup::CleanupFacts;
use super::contract::{BackendKind, Thresholds};
use super::dbcheck::DatabaseCheck;
use super::events::{ExpiryFacts, PublicationFacts};
use super::failover::FailoverFacts;
use super::provenance::{self, Provenance};
use super::server::ServerFacts;
use super::stats::LatencySummary;
use super::timeline::Timeline;
use super::workload::StopReason;

/// The report format's name and version.
pub const REPORT_FORMAT: &str = "connreg-qualify-report.v2";

/// Pass or fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Met.
    Pass,
    /// Not met.
    Fail,
}

impl Verdict {
    fn of(pass: bool) -> Verdict {
        if pass { Verdict::Pass } else { Verdict::Fail }
    }

    /// `PASS` or `FAIL`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
        }
    }
}

/// A whole report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// [`REPORT_FORMAT`].
    pub format: String,
    /// When, from which build, with which contract and seed.
    pub provenance: Provenance,
    /// How the run went as a whole.
    pub run: RunFacts,
    /// Which contract ran.
    pub environment: EnvironmentFacts,
    /// On which backend.
    pub backend: BackendFacts,
    /// On which machine.
    pub machine: MachineFacts,
    /// The fleet as built.
    pub fleet: FleetFacts,
    /// The load as asked.
    pub load: LoadFacts,
    /// What was measured, all trials pooled (counts added, time summed).
    pub measured: Measured,
    /// Each trial's figures and timeline.
    pub trials: Vec<TrialFacts>,
    /// Key figures over the trials: min, median, max.
    pub spread: BTreeMap<String, Spread>,
    /// The end-of-run invariant check.
    pub invariants: InvariantFacts,
    /// Every threshold, in contract order, then the invariant threshold.
    pub thresholds: Vec<ThresholdResult>,
    /// On PostgreSQL: pgbench beside the run, on the same server.
    pub pgbench: Option<PgbenchFacts>,
    /// On PostgreSQL: the removal of the run's rows.
    pub cleanup: Option<CleanupFacts>,
    /// Pass when every threshold passes.
    pub verdict: Verdict,
    /// With an `[expiry]`: every trial's zone expiry and lease
    /// maintenance, pooled (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry: Option<ExpiryFacts>,
    /// With `[publications]`: every trial's publications, pooled (absent
    /// otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publications: Option<PublicationFacts>,
    /// With a `[failover]`: what it did and what it cost (absent
    /// otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover: Option<FailoverFacts>,
}

/// How the run went as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFacts {
    /// What every identifier the run wrote starts with.
    pub prefix: String,
    /// False when the run was interrupted: its figures cover only part of
    /// the contract and its verdict is `fail`.
    pub complete: bool,
    /// Why it is incomplete, if it is.
    pub incomplete_reason: Option<String>,
}

/// Which contract ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvironmentFacts {
    /// Its name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// The file it came from.
    pub file: String,
}

/// The backend a run used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendFacts {
    /// `memory` or `postgres`.
    pub kind: BackendKind,
    /// For postgres: where the server came from (`url`, `local`, `docker`).
    pub server_source: Option<String>,
    /// For postgres: data-pool connections.
    pub data_connections: Option<u32>,
    /// For postgres: the server, its version and settings, the roles.
    pub server: Option<ServerFacts>,
}

/// The machine a run used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineFacts {
    /// Cores available to this process.
    pub cores: usize,
    /// Operating system.
    pub os: String,
    /// CPU architecture.
    pub arch: String,
    /// `release` or `debug`: debug figures are not qualification figures.
    pub build: String,
    /// The host name.
    pub host: String,
    /// The CPU model.
    pub cpu_model: String,
    /// Physical memory, in bytes, when known.
    pub memory_bytes: Option<u64>,
    /// The kernel release.
    pub kernel: String,
}

impl MachineFacts {
    /// This machine and build.
    pub fn here() -> MachineFacts {
        MachineFacts {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            os: std::env::consts::OS.into(),
            arch: std::env::consts::ARCH.into(),
            build: if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            }
            .into(),
            host: provenance::host(),
            cpu_model: provenance::cpu_model(),
            memory_bytes: provenance::memory_bytes(),
            kernel: provenance::kernel(),
        }
    }
}

/// The fleet as built.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetFacts {
    /// Tenants.
    pub tenants: u64,
    /// Capabilities.
    pub capabilities: u64,
    /// Bindings.
    pub bindings: u64,
    /// Instances.
    pub instances: u64,
    /// Replicas.
    pub replicas: u64,
    /// Admission scopes.
    pub scopes: u64,
    /// The catalog revision after publication.
    pub catalog_revision: u64,
    /// Publication and registration time, in milliseconds.
    pub setup_ms: u64,
}

/// The load as asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadFacts {
    /// Concurrent clients.
    pub clients: u32,
    /// Duration asked, if the run was by duration.
    pub duration_ms: Option<u64>,
    /// Operations asked, if the run was by count.
    pub operations: Option<u64>,
    /// The budget of new actions.
    pub actions_max: u64,
    /// The seed.
    pub seed: u64,
    /// Unmeasured warm-up before each trial, in milliseconds.
    pub warmup_ms: u64,
    /// Trials asked.
    pub trials: u32,
    /// Registry processes (each with `clients` clients).
    pub processes: u32,
}

/// One trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialFacts {
    /// From 1.
    pub trial: u32,
    /// Its warm-up, in milliseconds (not in `measured`).
    pub warmup_ms: u64,
    /// Operations during the warm-up (not in `measured`).
    pub warmup_operations: u64,
    /// What it measured.
    pub measured: Measured,
    /// Its figures over time.
    pub timeline: Timeline,
    /// With an `[expiry]`: its zone expiry and lease maintenance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry: Option<ExpiryFacts>,
    /// With `[publications]`: its publications.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publications: Option<PublicationFacts>,
}

/// A figure over the trials.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Smallest.
    pub min: f64,
    /// Median (of an even count, the mean of the middle two).
    pub median: f64,
    /// Largest.
    pub max: f64,
}

impl Spread {
    /// Of `values`; all zero when there are none.
    pub fn of(values: &[f64]) -> Spread {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return Spread {
                min: 0.0,
                median: 0.0,
                max: 0.0,
            };
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Spread {
            min: v[0],
            median,
            max: v[n - 1],
        }
    }
}

/// The figures whose spread over trials a report gives.
pub const SPREAD_FIGURES: [&str; 8] = [
    "elapsed_ms",
    "operations_per_s",
    "resolves_per_s",
    "resolve_p50_ms",
    "resolve_p99_ms",
    "resolve_max_ms",
    "unexpected_error_rate",
    "no_capacity_rate",
];

fn figure(m: &Measured, name: &str) -> f64 {
    match name {
        "elapsed_ms" => m.elapsed_ms,
        "operations_per_s" => m.operations_per_s,
        "resolves_per_s" => m.resolves_per_s,
        "resolve_p50_ms" => m.resolve_latency.p50_ms,
        "resolve_p99_ms" => m.resolve_latency.p99_ms,
        "resolve_max_ms" => m.resolve_latency.max_ms,
        "unexpected_error_rate" => m.unexpected_error_rate,
        "no_capacity_rate" => m.no_capacity_rate,
        _ => f64::NAN,
    }
}

/// [`SPREAD_FIGURES`] over `trials`.
pub fn spread(trials: &[&Measured]) -> BTreeMap<String, Spread> {
    SPREAD_FIGURES
        .iter()
        .map(|name| {
            let values: Vec<f64> = trials.iter().map(|m| figure(m, name)).collect();
            (name.to_string(), Spread::of(&values))
        })
        .collect()
}

/// One operation's figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OperationFigures {
    /// Calls.
    pub count: u64,
    /// Calls that succeeded.
    pub ok: u64,
    /// Latency of all calls.
    pub latency: LatencySummary,
}

/// Errors of one kind from one operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorCount {
    /// The operation.
    pub operation: String,
    /// The error kind (`connreg::Error::kind`).
    pub kind: String,
    /// Whether it is a normal answer under load.
    pub expected: bool,
    /// How many.
    pub count: u64,
}

/// What was measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// Wall-clock time of the measured run, in milliseconds.
    pub elapsed_ms: f64,
    /// Why it ended.
    pub stopped_by: StopReason,
    /// Operations of every kind.
    pub operations: u64,
    /// Operations per second.
    pub operations_per_s: f64,
    /// Successful resolves, new and duplicate.
    pub resolves_ok: u64,
    /// Successful resolves per second.
    pub resolves_per_s: f64,
    /// Latency of every resolve call.
    pub resolve_latency: LatencySummary,
    /// Figures per operation.
    pub by_operation: BTreeMap<String, OperationFigures>,
    /// Resolves that created a route.
    pub resolves_created: u64,
    /// Duplicate resolves answered with the held route.
    pub resolves_existing: u64,
    /// Settlements that released a reservation.
    pub settlements_released: u64,
    /// Heartbeats ignored as out of order.
    pub heartbeats_ignored: u64,
    /// Mix picks replaced by another operation.
    pub mix_substitutions: u64,
    /// Errors by operation and kind.
    pub errors: Vec<ErrorCount>,
    /// Errors that are not normal answers.
    pub unexpected_errors: u64,
    /// Unexpected errors per operation.
    pub unexpected_error_rate: f64,
    /// Share of new resolves answered `no_capacity`.
    pub no_capacity_rate: f64,
    /// Latency by operation as a distribution: `[quantile, ms]` at each
    /// of `stats::DISTRIBUTION_QUANTILES` (operations without calls are
    /// left out).
    #[serde(default)]
    pub latency_distribution: BTreeMap<String, Vec<[f64; 2]>>,
}

impl Measured {
    /// Nothing measured: the figures of a run interrupted before its first
    /// trial.
    pub fn empty() -> Measured {
        Measured {
            elapsed_ms: 0.0,
            stopped_by: StopReason::Interrupted,
            operations: 0,
            operations_per_s: 0.0,
            resolves_ok: 0,
            resolves_per_s: 0.0,
            resolve_latency: LatencySummary::default(),
            by_operation: BTreeMap::new(),
            resolves_created: 0,
            resolves_existing: 0,
            settlements_released: 0,
            heartbeats_ignored: 0,
            mix_substitutions: 0,
            errors: Vec::new(),
            unexpected_errors: 0,
            unexpected_error_rate: 0.0,
            no_capacity_rate: 0.0,
            latency_distribution: BTreeMap::new(),
        }
    }
}

/// The invariant check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvariantFacts {
    /// What the end check read.
    pub checked: Checked,
    /// Violations, during the run and at the end.
    pub violations: u64,
    /// Violations by kind.
    pub by_kind: BTreeMap<String, u64>,
    /// The first violations, described.
    pub details: Vec<String>,
    /// On PostgreSQL: the whole-database checks the server computed.
    pub database: Option<DatabaseCheck>,
}

/// Whether a threshold is a floor or a ceiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Bound {
    /// The measured value must be at least the limit.
    #[serde(rename = ">=")]
    AtLeast,
    /// The measured value must be at most the limit.
    #[serde(rename = "<=")]
    AtMost,
}

/// One threshold, measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThresholdResult {
    /// The contract key, such as `resolves_per_s_min`.
    pub name: String,
    /// Floor or ceiling.
    pub bound: Bound,
    /// The contract's limit.
    pub limit: f64,
    /// The measured value: over trials, the worst one (the smallest for a
    /// floor, the largest for a ceiling).
    pub measured: f64,
    /// Each trial's value, in trial order.
    #[serde(default)]
    pub per_trial: Vec<f64>,
    /// Whether it was met.
    pub verdict: Verdict,
}

impl ThresholdResult {
    /// A threshold weighed in each trial: `values` in trial order, the
    /// worst one measured (no trial: 0).
    pub fn over_trials(name: &str, bound: Bound, limit: f64, values: Vec<f64>) -> ThresholdResult {
        let worst = match bound {
            Bound::AtLeast => values.iter().copied().fold(f64::INFINITY, f64::min),
            Bound::AtMost => values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        };
        let worst = if values.is_empty() { 0.0 } else { worst };
        let mut r = ThresholdResult::new(name, bound, limit, worst);
        r.per_trial = values;
        r
    }

    fn new(name: &str, bound: Bound, limit: f64, measured: f64) -> ThresholdResult {
        let pass = match bound {
            Bound::AtLeast => measured >= limit,
            Bound::AtMost => measured <= limit,
        };
        ThresholdResult {
            name: name.into(),
            bound,
            limit,
            measured,
            per_trial: vec![measured],
            verdict: Verdict::of(pass),
        }
    }
}

/// Every threshold of `t` against the figures, then zero violations.
pub fn evaluate(t: &Thresholds, m: &Measured, violations: u64) -> Vec<ThresholdResult> {
    let mut out = vec![
        ThresholdResult::new(
            "resolves_per_s_min",
            Bound::AtLeast,
            t.resolves_per_s_min,
            m.resolves_per_s,
        ),
        ThresholdResult::new(
            "resolve_p99_ms_max",
            Bound::AtMost,
            t.resolve_p99_ms_max,
            m.resolve_latency.p99_ms,
        ),
    ];
    if let Some(limit) = t.resolve_p50_ms_max {
        out.push(ThresholdResult::new(
            "resolve_p50_ms_max",
            Bound::AtMost,
            limit,
            m.resolve_latency.p50_ms,
        ));
    }
    out.push(ThresholdResult::new(
        "unexpected_error_rate_max",
        Bound::AtMost,
        t.unexpected_error_rate_max,
        m.unexpected_error_rate,
    ));
    if let Some(limit) = t.no_capacity_rate_max {
        out.push(ThresholdResult::new(
            "no_capacity_rate_max",
            Bound::AtMost,
            limit,
            m.no_capacity_rate,
        ));
    }
    out.push(ThresholdResult::new(
        "invariant_violations_max",
        Bound::AtMost,
        0.0,
        violations as f64,
    ));
    out
}

/// The verdict rule over trials: every threshold of `t` is weighed in each
/// trial, and holds only if it holds in every one, so its `measured` is
/// the worst trial's value. A contract by duration adds `duration_ms_min`:
/// each trial must have measured for the whole duration (one that ended
/// early, on the new-action budget or an interruption, fails it). Zero
/// invariant violations, over the whole run, closes the list. Without
/// trials (interrupted before the first), every figure is 0.
pub fn evaluate_trials(
    t: &Thresholds,
    duration_ms: Option<u64>,
    trials: &[&Measured],
    violations: u64,
) -> Vec<ThresholdResult> {
    let empty = Measured::empty();
    let trials: Vec<&Measured> = if trials.is_empty() {
        vec![&empty]
    } else {
        trials.to_vec()
    };
    let each: Vec<Vec<ThresholdResult>> =
        trials.iter().map(|m| evaluate(t, m, violations)).collect();
    let mut out: Vec<ThresholdResult> = Vec::new();
    for (i, first) in each[0].iter().enumerate() {
        let values: Vec<f64> = each.iter().map(|r| r[i].measured).collect();
        let worst = match first.bound {
            Bound::AtLeast => values.iter().copied().fold(f64::INFINITY, f64::min),
            Bound::AtMost => values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        };
        let mut r = ThresholdResult::new(&first.name, first.bound, first.limit, worst);
        r.per_trial = values;
        out.push(r);
    }
    if let Some(ms) = duration_ms {
        let values: Vec<f64> = trials.iter().map(|m| m.elapsed_ms).collect();
        let worst = values.iter().copied().fold(f64::INFINITY, f64::min);
        let mut r = ThresholdResult::new("duration_ms_min", Bound::AtLeast, ms as f64, worst);
        r.per_trial = values;
        // Before the invariant threshold, which stays last.
        let at = out.len().saturating_sub(1);
        out.insert(at, r);
    }
    out
}

/// Pass when every threshold passes.
pub fn overall(thresholds: &[ThresholdResult]) -> Verdict {
    Verdict::of(thresholds.iter().all(|t| t.verdict == Verdict::Pass))
}

fn number(v: f64) -> String {
    if v == 0.0 || v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

impl Report {
    /// A short summary for humans.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let m = &self.measured;
        let f = &self.fleet;
        let _ = writeln!(
            s,
            "connreg-qualify: {} ({}) on {}{}",
            self.environment.name,
            self.environment.file,
            self.backend.kind,
            self.backend
                .server_source
                .as_ref()
                .map_or(String::new(), |src| format!(" (server: {src})")),
        );
        if let Some(server) = &self.backend.server {
            let _ = writeln!(s, "SERVER:     {}", server.banner());
            let _ = writeln!(
                s,
                "            roles {} (control, {} connections) and {} (data, {} connections); schema {}{}",
                server.control_role,
                server.control_connections,
                server.data_role,
                server.data_connections,
                server.schema_version,
                if server.migrated {
                    ", migrated by this run"
                } else {
                    ""
                }
            );
        }
        if !self.run.complete {
            let _ = writeln!(
                s,
                "INCOMPLETE: {}",
                self.run
                    .incomplete_reason
                    .as_deref()
                    .unwrap_or("the run did not finish")
            );
        }
        let p = &self.provenance;
        let _ = writeln!(
            s,
            "provenance: {} .. {}, git {}{}, contract sha256 {}, seed {}, prefix {}",
            p.started_utc,
            p.ended_utc,
            p.git_revision,
            if p.git_dirty == "true" {
                " (dirty)"
            } else {
                ""
            },
            &p.contract_sha256[..p.contract_sha256.len().min(16)],
            p.seed,
            p.run_prefix
        );
        let _ = writeln!(
            s,
            "machine:    {} ({}), {} cores, {} GiB, {} {} {}, {} build",
            self.machine.host,
            self.machine.cpu_model,
            self.machine.cores,
            self.machine
                .memory_bytes
                .map_or("?".to_string(), |b| format!(
                    "{:.1}",
                    b as f64 / (1u64 << 30) as f64
                )),
            self.machine.os,
            self.machine.kernel,
            self.machine.arch,
            self.machine.build
        );
        let _ = writeln!(
            s,
            "fleet:      {} tenants, {} capabilities, {} bindings, {} instances, {} replicas, {} scopes (set up in {} ms)",
            f.tenants, f.capabilities, f.bindings, f.instances, f.replicas, f.scopes, f.setup_ms
        );
        let _ = writeln!(
            s,
            "run:        {}{} clients, {} trial(s), warm-up {} ms each; {} operations measured in {:.2} s (stopped by {}), {} ops/s",
            if self.load.processes > 1 {
                format!("{} processes x ", self.load.processes)
            } else {
                String::new()
            },
            self.load.clients,
            self.load.trials,
            self.load.warmup_ms,
            m.operations,
            m.elapsed_ms / 1000.0,
            match m.stopped_by {
                StopReason::Duration => "duration",
                StopReason::Operations => "operation count",
                StopReason::ActionBudget => "the new-action budget",
                StopReason::Interrupted => "an interruption",
            },
            number(m.operations_per_s),
        );
        let _ = writeln!(
            s,
            "resolves:   {} ok ({} created, {} duplicate) = {}/s; latency p50 {} ms, p99 {} ms, max {} ms",
            m.resolves_ok,
            m.resolves_created,
            m.resolves_existing,
            number(m.resolves_per_s),
            number(m.resolve_latency.p50_ms),
            number(m.resolve_latency.p99_ms),
            number(m.resolve_latency.max_ms),
        );
        let errors = if m.errors.is_empty() {
            "none".to_string()
        } else {
            m.errors
                .iter()
                .map(|e| {
                    format!(
                        "{}/{} {}{}",
                        e.operation,
                        e.kind,
                        e.count,
                        if e.expected { " (expected)" } else { "" }
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            s,
            "errors:     {errors}; unexpected rate {}",
            number(m.unexpected_error_rate)
        );
        let i = &self.invariants;
        if let Some(e) = &self.expiry {
            let _ = writeln!(
                s,
                "expiry:     {} replicas ({:.1}% of the fleet, zones {}) over {} trial(s): {} offline, {} left online, {} others offline; {} reservations released; {} maintenance calls of at most {} ({} failed), largest {} ms; {} replicas/s, {} released/s; all offline within {} ms in every trial: {}",
                e.replicas,
                e.replica_share * 100.0,
                e.zones.join(","),
                self.trials.len(),
                e.offline,
                e.left_online,
                e.others_offline,
                e.released,
                e.calls,
                e.batch,
                e.errors,
                number(e.largest_call_ms),
                number(e.replicas_per_s),
                number(e.released_per_s),
                e.offline_within_ms_max,
                if e.all_offline_within_bound {
                    "yes"
                } else {
                    "no"
                },
            );
        }
        if let Some(p) = &self.publications {
            let _ = writeln!(
                s,
                "publish:    {} publications every {} ms ({} ok, {} failed, {} changes); latency p50 {} ms, p99 {} ms, max {} ms",
                p.publications,
                p.interval_ms,
                p.ok,
                p.failures,
                p.changes,
                number(p.latency.p50_ms),
                number(p.latency.p99_ms),
                number(p.latency.max_ms),
            );
        }
        if let Some(f) = &self.failover {
            let _ = writeln!(
                s,
                "failover:   {} replication; {}",
                f.replication,
                if f.happened {
                    format!(
                        "at {} ms, {} ms without a primary, {} connections cut, {} calls answered unavailable, {} answered routes lost",
                        number(f.at_ms),
                        number(f.without_primary_ms),
                        f.connections_cut,
                        f.unavailable_calls,
                        f.lost_routes
                    )
                } else {
                    format!(
                        "did not happen ({})",
                        f.error.as_deref().unwrap_or("the run ended first")
                    )
                }
            );
        }
        let _ = writeln!(
            s,
            "invariants: {} replicas, {} scopes, {} routes checked; {} violations",
            i.checked.replicas, i.checked.scopes, i.checked.routes, i.violations
        );
        if let Some(d) = &i.database {
            let _ = writeln!(
                s,
                "database:   {} assignments, {} replicas, {} counters counted by the server; {} duplicate actions, {} reused fences, {} replicas and {} counters off, {} without their snapshot",
                d.assignments,
                d.replicas,
                d.counters,
                d.duplicate_actions,
                d.reused_fences,
                d.replicas_mismatched,
                d.counters_mismatched,
                d.routes_without_snapshot
            );
        }
        for d in &i.details {
            let _ = writeln!(s, "  - {d}");
        }
        let _ = writeln!(s, "thresholds:");
        for t in &self.thresholds {
            let _ = writeln!(
                s,
                "  {} {:<26} measured {:>12}  limit {} {}",
                t.verdict.as_str(),
                t.name,
                number(t.measured),
                match t.bound {
                    Bound::AtLeast => ">=",
                    Bound::AtMost => "<=",
                },
                number(t.limit),
            );
            if t.name == "synchronous_standbys_min"
                && t.verdict == Verdict::Fail
                && let Some(gap) = self
                    .backend
                    .server
                    .as_ref()
                    .and_then(|s| s.replication_gap())
            {
                let _ = writeln!(s, "       {gap}");
            }
        }
        if let Some(p) = &self.pgbench {
            match (&p.skipped, p.tpcb_tps, p.select_only_tps) {
                (None, Some(tpcb), Some(select_only)) => {
                    let _ = writeln!(
                        s,
                        "pgbench:    TPC-B scale {} {} tps (resolves/s ratio {:.2}), select-only {} tps (ratio {:.3}); {} clients, {} s each",
                        p.scale,
                        number(tpcb),
                        p.tpcb_ratio.unwrap_or(0.0),
                        number(select_only),
                        p.select_only_ratio.unwrap_or(0.0),
                        p.clients,
                        p.secs
                    );
                }
                (reason, _, _) => {
                    let _ = writeln!(
                        s,
                        "pgbench:    skipped: {}",
                        reason.as_deref().unwrap_or("no figures")
                    );
                }
            }
        }
        if let Some(c) = &self.cleanup {
            let _ = writeln!(
                s,
                "cleanup:    {} rows with prefix {} removed, {} left{}",
                c.rows_removed,
                c.prefix,
                c.rows_left,
                c.error
                    .as_ref()
                    .map_or(String::new(), |e| format!(" (failed: {e})"))
            );
        }
        let _ = write!(s, "verdict: {}", self.verdict.as_str());
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_floor_passes_at_its_limit_and_a_ceiling_fails_above_it() {
        // spec: SIM-6
        assert_eq!(
            ThresholdResult::new("a", Bound::AtLeast, 10.0, 10.0).verdict,
            Verdict::Pass
        );
        assert_eq!(
            ThresholdResult::new("b", Bound::AtMost, 0.0, 1.0).verdict,
            Verdict::Fail
        );
        let results = vec![
            ThresholdResult::new("a", Bound::AtLeast, 1.0, 2.0),
            ThresholdResult::new("b", Bound::AtMost, 1.0, 2.0),
        ];
        assert_eq!(overall(&results), Verdict::Fail);
    }
}
