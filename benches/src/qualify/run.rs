//! One qualification, start to end: open the backend, build the fleet,
//! warm up, run the clients, check the store, weigh the thresholds.
//!
//! The registry's own time is a [`ManualClock`] that stands still for the
//! whole run (LEASE-4): no lease ends while the run measures, unless the
//! contract has an `[expiry]`, whose zones' leases run out when each
//! trial's expiry moves the clock (`super::events`).
//! Wall-clock time is used only to time calls and to end runs by duration.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use connreg::contracts::Registry;
use connreg::{CatalogQuery, Inspect, ManualClock, MemoryRegistry, Reader, Timestamp};

use super::beside::{self, PgbenchFacts};
use super::check::{Expect, Violations, check_store};
use super::cleanup::{self, CleanupFacts};
use super::contract::{BackendKind, Contract, RunLength};
use super::error::QualifyError;
use super::failover::{self, FailoverTarget};
use super::fleet::{self, FleetPlan, RegisterFailure};
use super::progress::ProgressMode;
use super::provenance::{self, Provenance};
use super::report::{
    BackendFacts, EnvironmentFacts, ErrorCount, FleetFacts, InvariantFacts, LoadFacts,
    MachineFacts, Measured, OperationFigures, REPORT_FORMAT, Report, RunFacts, TrialFacts,
    evaluate_trials, overall, spread,
};
use super::report::{Bound, ThresholdResult};
use super::server::{self, OpenError, PgTarget};
use super::stats::Latency;
use super::stats::{Operation, Tally};
use super::trial::{self, Display, TrialOutcome};
use super::workload::{StopReason, TrialParams};
use super::{dbcheck, events, multi};
use connreg::RegisterParams;

/// Where the registry's clock stands: far from zero, like the fixtures'.
pub const CLOCK_START_MS: u64 = 1_000_000;

/// The first heartbeat health sequence of a run: registration used 1.
pub const FIRST_HEARTBEAT_SEQ: u64 = 2;

/// What a PostgreSQL run hands the trials and the end check.
#[derive(Debug, Clone)]
struct PgSide<'a> {
    /// The data role's URL, for worker processes.
    data_url: &'a str,
    /// The control role's options, for the whole-database checks.
    control: &'a connreg::postgres::PgConnectOptions,
    /// With a `[failover]`: the pair behind the pools' proxy.
    failover: Option<FailoverTarget>,
}

/// How to run a contract, besides the contract itself.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The backend.
    pub backend: BackendKind,
    /// On PostgreSQL: which server.
    pub target: PgTarget,
    /// The contract's file, as the report names it.
    pub file: String,
    /// SHA-256 of the contract file's bytes.
    pub contract_sha256: String,
    /// What every identifier the run writes starts with.
    pub prefix: String,
    /// Set (by Ctrl-C) to end the run early; the report is then marked
    /// incomplete.
    pub interrupted: Arc<AtomicBool>,
    /// How progress is shown while a trial measures.
    pub progress: ProgressMode,
    /// On PostgreSQL: run pgbench beside the registry after the trials.
    pub pgbench: bool,
    /// Registry processes; above 1 each trial runs in worker processes
    /// (`super::multi`), PostgreSQL only.
    pub processes: u32,
    /// The contract file, for the workers.
    pub contract_path: std::path::PathBuf,
}

impl RunOptions {
    /// Options for `backend` with a throwaway PostgreSQL database, a fresh
    /// run prefix and no interruption: what tests and benches use.
    pub fn new(backend: BackendKind, file: &str) -> RunOptions {
        RunOptions {
            backend,
            target: PgTarget::Throwaway { durable: false },
            file: file.into(),
            contract_sha256: String::new(),
            prefix: provenance::run_prefix(),
            interrupted: Arc::new(AtomicBool::new(false)),
            progress: ProgressMode::Silent,
            pgbench: true,
            processes: 1,
            contract_path: std::path::PathBuf::from(file),
        }
    }
}

/// Runs `contract` as `options` say; `progress` hears one line per phase.
pub async fn qualify(
    contract: &Contract,
    options: &RunOptions,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<Report, QualifyError> {
    let started_utc = provenance::now_utc();
    let clock = ManualClock::new(Timestamp(CLOCK_START_MS));
    // Clones share one time: an [expiry] moves the registry's clock.
    let clock_handle = clock.clone();
    let config = contract.registry.config();
    let backend = options.backend;
    let mut report = match backend {
        BackendKind::Memory => {
            let registry =
                MemoryRegistry::new(clock, config).map_err(|e| QualifyError::Backend {
                    backend,
                    reason: e.to_string(),
                })?;
            let facts = BackendFacts {
                kind: backend,
                server_source: None,
                data_connections: None,
                server: None,
            };
            run_on(
                registry,
                clock_handle,
                facts,
                contract,
                options,
                None,
                progress,
            )
            .await?
        }
        BackendKind::Postgres => {
            progress(&match &options.target {
                PgTarget::Operator { control_url, .. } => format!(
                    "connecting to the operator's server {}",
                    provenance::redact_url(control_url)
                ),
                PgTarget::Throwaway { durable: true } => {
                    "starting a throwaway cluster with fsync=on".to_string()
                }
                PgTarget::Throwaway { durable: false } => {
                    "opening a fresh PostgreSQL database (connreg-pgtest)".to_string()
                }
                PgTarget::Pair {
                    ha: server::Ha::AutoFailover,
                    ..
                } => "starting a pg_auto_failover formation: a monitor, a primary (fsync=on) and a synchronous secondary".to_string(),
                PgTarget::Pair {
                    ha: server::Ha::Pair(replication),
                    ..
                } => format!(
                    "starting a throwaway primary with fsync=on and a {} standby",
                    replication.as_str()
                ),
            });
            let opened = server::open(&options.target, clock, config, contract.load.clients)
                .await
                .map_err(|e| match e {
                    OpenError::Options(reason) => QualifyError::Options { reason },
                    OpenError::Unavailable(reason) => QualifyError::Backend { backend, reason },
                })?;
            progress(&format!("server: {}", opened.facts.banner()));
            let facts = BackendFacts {
                kind: backend,
                server_source: Some(opened.facts.source.clone()),
                data_connections: Some(opened.facts.data_connections),
                server: Some(opened.facts.clone()),
            };
            let mut result = run_on(
                opened.registry.clone(),
                clock_handle,
                facts,
                contract,
                options,
                Some(PgSide {
                    data_url: &opened.data_url,
                    control: &opened.control,
                    failover: opened.failover.clone(),
                }),
                progress,
            )
            .await;
            opened.registry.close().await;
            if let Ok(report) = &mut result {
                let resolves = report
                    .spread
                    .get("resolves_per_s")
                    .map_or(0.0, |s| s.median);
                report.pgbench = Some(if !options.pgbench {
                    PgbenchFacts::skipped("--no-pgbench", resolves)
                } else if options.interrupted.load(Ordering::Relaxed) {
                    PgbenchFacts::skipped("the run was interrupted", resolves)
                } else {
                    match &opened.pgbench {
                        Err(reason) => PgbenchFacts::skipped(reason.clone(), resolves),
                        Ok(pgbench) => {
                            // After a failover, on the promoted server.
                            let pgbench = match &opened.failover {
                                Some(f) => match f.primary_port() {
                                    Ok(port) => pgbench.with_port(port),
                                    Err(_) => pgbench.clone(),
                                },
                                None => pgbench.clone(),
                            };
                            // Every process's clients: the registry's whole load.
                            let clients = contract.load.clients.min(opened.facts.data_connections)
                                * options.processes;
                            let secs = contract.load.pgbench_secs();
                            progress(&format!(
                                "pgbench beside the run: TPC-B scale {clients} and select-only, \
                                 {clients} clients, {secs} s each"
                            ));
                            tokio::task::spawn_blocking(move || {
                                beside::run(&pgbench, clients, secs, resolves)
                            })
                            .await
                            .unwrap_or_else(|e| {
                                PgbenchFacts::skipped(format!("pgbench task failed: {e}"), resolves)
                            })
                        }
                    }
                });
            }
            drop(opened.pgbench_guard);
            // Removes the run's rows whatever happened, even after a
            // failed setup.
            progress(&format!("removing the rows of run {}", options.prefix));
            let removed = cleanup::remove_run(&opened.control, &options.prefix).await;
            match result {
                Ok(mut report) => {
                    report.cleanup = Some(removed);
                    report
                }
                Err(e) => {
                    if let Some(reason) = cleanup_problem(&removed) {
                        progress(&reason);
                    }
                    return Err(e);
                }
            }
        }
    };
    if let Some(reason) = report.cleanup.as_ref().and_then(cleanup_problem) {
        // Rows left behind are a failure of the run, not of the registry.
        return Err(QualifyError::Run { reason });
    }
    report.provenance.started_utc = started_utc;
    report.provenance.ended_utc = provenance::now_utc();
    Ok(report)
}

fn cleanup_problem(c: &CleanupFacts) -> Option<String> {
    match (&c.error, c.rows_left) {
        (Some(e), _) => Some(format!(
            "removing the rows of run {} failed: {e}; remove them by their prefix (benches/README.md)",
            c.prefix
        )),
        (None, 0) => None,
        (None, n) => Some(format!(
            "{n} rows with the run prefix {} are still in the database",
            c.prefix
        )),
    }
}

async fn run_on<R>(
    registry: R,
    clock: ManualClock,
    backend: BackendFacts,
    contract: &Contract,
    options: &RunOptions,
    pg: Option<PgSide<'_>>,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<Report, QualifyError>
where
    R: Registry + Inspect + Clone + 'static,
{
    let file = options.file.as_str();
    if options.processes > 1 && (contract.expiry.is_some() || contract.publications.is_some()) {
        return Err(QualifyError::Options {
            reason: format!(
                "{file}: [expiry] and [publications] run in one registry process; drop --processes"
            ),
        });
    }
    let mut plan = FleetPlan::with_prefix(&contract.fleet, &options.prefix);
    if let (Some(e), Some(lease)) = (&contract.expiry, contract.survivor_lease_ms()) {
        plan = plan.with_expiry(&e.zones, lease);
    }
    let plan = Arc::new(plan);
    progress(&format!(
        "setting up {} replicas and {} bindings on {}",
        plan.replicas.len(),
        contract.fleet.bindings(),
        backend.kind
    ));
    let setup_started = Instant::now();
    let published_at = fleet::build(&registry, &plan).await?;
    let setup_ms = setup_started.elapsed().as_millis() as u64;

    // Unmeasured: one catalog read per client opens the connections the
    // clients will use, so connection setup does not count as latency.
    let mut warm = tokio::task::JoinSet::new();
    for t in 0..contract.load.clients as usize {
        let registry = registry.clone();
        let tenant = plan.tenants[t % plan.tenants.len()].clone();
        warm.spawn(async move {
            let _ = registry
                .catalog_page(CatalogQuery::first_page(Reader::Tenant(tenant)))
                .await;
        });
    }
    while warm.join_next().await.is_some() {}

    let load = &contract.load;
    let trials = load.trials();
    let warmup_ms = load.warmup();
    let budget = contract.actions_budget() / u64::from(trials);
    let mut outcomes: Vec<TrialOutcome> = Vec::new();
    let mut heartbeat_seq = FIRST_HEARTBEAT_SEQ;
    let mut expiries: Vec<events::ExpiryFacts> = Vec::new();
    let mut publications: Vec<events::PublicationFacts> = Vec::new();
    let mut publication_latency = Latency::default();
    let mut publisher = contract
        .publications
        .as_ref()
        .map(|_| events::Publisher::new(&plan));
    let mut published_last = published_at;
    let mut failed_over: Option<failover::FailoverFacts> = None;
    for trial in 0..trials {
        if options.interrupted.load(Ordering::Relaxed) {
            break;
        }
        if contract.expiry.is_some() && trial > 0 {
            // Unmeasured: the last trial's expired replicas serve again.
            progress(&format!(
                "registering the {} expired replicas again",
                plan.expiring.len()
            ));
            heartbeat_seq = reregister(&registry, &plan, heartbeat_seq).await?;
        }
        progress(&format!(
            "trial {}/{trials}: {} clients, warm-up {:.1} s, then {}",
            trial + 1,
            load.clients,
            warmup_ms as f64 / 1000.0,
            match load.length() {
                RunLength::DurationMs(ms) => format!("{:.1} s measured", ms as f64 / 1000.0),
                RunLength::Operations(n) => format!("{n} operations measured"),
            }
        ));
        let start = Instant::now();
        let measure_from = start + std::time::Duration::from_millis(warmup_ms);
        let zone = contract
            .expiry
            .as_ref()
            .map(|_| Arc::new(events::ZoneState::default()));
        let expiry_task = contract.expiry.clone().zip(zone.clone()).map(|(e, z)| {
            tokio::spawn(events::expire(
                registry.clone(),
                plan.clone(),
                e,
                z,
                clock.clone(),
                measure_from,
                options.interrupted.clone(),
            ))
        });
        let clients_done = Arc::new(AtomicBool::new(false));
        let publication_task = contract
            .publications
            .zip(publisher.take())
            .map(|(p, publisher)| {
                let until =
                    measure_from + std::time::Duration::from_millis(load.duration_ms.unwrap_or(0));
                tokio::spawn(events::publish(
                    registry.clone(),
                    publisher,
                    p,
                    measure_from,
                    until,
                    clients_done.clone(),
                    options.interrupted.clone(),
                ))
            });
        // The pair fails over once, in the first (and only) trial.
        let failover_task = contract
            .failover
            .zip(pg.as_ref().and_then(|p| p.failover.clone()))
            .filter(|_| trial == 0)
            .map(|(f, target)| {
                tokio::spawn(failover::fail_over_at(
                    target,
                    f,
                    measure_from,
                    options.interrupted.clone(),
                ))
            });
        let params = TrialParams {
            start,
            warmup_ms,
            trial,
            action_tag: format!("r{trial}-"),
            actions_budget: budget,
            heartbeat_seq,
            probes: Vec::new(),
            drain: trial + 1 < trials,
            interrupted: options.interrupted.clone(),
            zone,
        };
        let display = Display {
            mode: options.progress,
            trial: trial + 1,
            trials,
            worker: None,
        };
        let outcome = match pg
            .as_ref()
            .map(|p| p.data_url)
            .filter(|_| options.processes > 1)
        {
            None => trial::run(registry.clone(), plan.clone(), contract, params, display).await,
            Some(url) => {
                let scratch =
                    std::env::temp_dir().join(format!("connreg-qualify-{}", options.prefix));
                std::fs::create_dir_all(&scratch).map_err(|e| QualifyError::Run {
                    reason: format!("cannot create {}: {e}", scratch.display()),
                })?;
                progress(&format!(
                    "trial {}: {} worker processes",
                    trial + 1,
                    options.processes
                ));
                let outcome = multi::run_trial(
                    &options.contract_path,
                    contract,
                    url,
                    &options.prefix,
                    trial,
                    options.processes,
                    params.heartbeat_seq,
                    params.drain,
                    &scratch,
                    options.interrupted.clone(),
                )
                .await;
                let _ = std::fs::remove_dir_all(&scratch);
                outcome
            }
        }
        .map_err(|reason| QualifyError::Run { reason })?;
        let mut outcome = outcome;
        clients_done.store(true, Ordering::Relaxed);
        heartbeat_seq = outcome.next_heartbeat_seq;
        if let Some(task) = expiry_task {
            let expired = task.await.map_err(|e| QualifyError::Run {
                reason: format!("the lease expiry task failed: {e}"),
            })?;
            // Reservations still held that maintenance released were
            // released as lease_expired: the end check holds the store to it.
            for t in &mut outcome.tracked {
                if let Expect::Reserved(a) = &t.expect
                    && expired.released.contains(&t.action)
                {
                    t.expect = Expect::Released(a.clone(), connreg::Outcome::LeaseExpired);
                }
            }
            let f = &expired.facts;
            progress(&format!(
                "trial {}: {} of {} expired replicas offline in {:.0} ms ({} maintenance calls, the largest {:.1} ms), {} reservations released",
                trial + 1,
                f.offline,
                f.replicas,
                f.offline_ms,
                f.calls,
                f.largest_call_ms,
                f.released
            ));
            expiries.push(expired.facts);
        }
        if let Some(task) = publication_task {
            let published = task.await.map_err(|e| QualifyError::Run {
                reason: format!("the publication task failed: {e}"),
            })?;
            if let Some(r) = published.revision {
                published_last = published_last.max(r);
            }
            progress(&format!(
                "trial {}: {} publications, {} failed, p99 {:.1} ms",
                trial + 1,
                published.facts.publications,
                published.facts.failures,
                published.facts.latency.p99_ms
            ));
            publication_latency.merge(&published.latency);
            publications.push(published.facts);
            publisher = Some(published.publisher);
        }
        if let Some(task) = failover_task {
            let mut facts = task.await.map_err(|e| QualifyError::Run {
                reason: format!("the failover task failed: {e}"),
            })?;
            facts.unavailable_calls = outcome
                .tally
                .errors
                .iter()
                .filter(|((_, kind), _)| *kind == "unavailable")
                .map(|(_, n)| n)
                .sum();
            progress(&match &facts.error {
                None if facts.happened => format!(
                    "trial {}: failed over at {:.0} ms, {:.0} ms without a primary, {} connections cut, {} calls answered unavailable",
                    trial + 1,
                    facts.at_ms,
                    facts.without_primary_ms,
                    facts.connections_cut,
                    facts.unavailable_calls
                ),
                None => format!("trial {}: the run ended before the failover", trial + 1),
                Some(reason) => format!("trial {}: the failover failed: {reason}", trial + 1),
            });
            failed_over = Some(facts);
        }
        outcomes.push(outcome);
    }

    progress("checking invariants over a full inspection");
    let inspect_failed = |e: connreg::Error| QualifyError::Run {
        reason: format!("the end inspection failed: {e}"),
    };
    let snapshot = registry.inspect().await.map_err(inspect_failed)?;
    let status = registry.status().await.map_err(inspect_failed)?;
    let mut violations = Violations::default();
    let mut pooled = Tally::default();
    let mut tracked = Vec::new();
    for o in &mut outcomes {
        violations.merge(&o.tally.violations);
        pooled.merge(&o.tally);
        tracked.append(&mut o.tracked);
    }
    let checked = check_store(
        &snapshot,
        &status,
        published_last,
        &options.prefix,
        &tracked,
        &mut violations,
    );
    let database = match &pg {
        None => None,
        Some(p) => {
            progress("checking the whole database through the control role");
            Some(
                dbcheck::check_database(p.control, &mut violations)
                    .await
                    .map_err(|reason| QualifyError::Run { reason })?,
            )
        }
    };

    let trial_facts: Vec<TrialFacts> = outcomes
        .iter()
        .enumerate()
        .map(|(i, o)| TrialFacts {
            trial: i as u32 + 1,
            warmup_ms,
            warmup_operations: o.warmup_operations,
            measured: measure(
                &o.tally,
                o.elapsed.as_secs_f64(),
                o.stopped_by,
                failed_over.is_some(),
            ),
            timeline: o.timeline.clone(),
            expiry: expiries.get(i).cloned(),
            publications: publications.get(i).cloned(),
        })
        .collect();
    let stopped_by = outcomes
        .iter()
        .map(|o| o.stopped_by)
        .find(|r| matches!(r, StopReason::Interrupted | StopReason::ActionBudget))
        .or_else(|| outcomes.last().map(|o| o.stopped_by))
        .unwrap_or(StopReason::Interrupted);
    let pooled_secs: f64 = outcomes.iter().map(|o| o.elapsed.as_secs_f64()).sum();
    let measured = measure(&pooled, pooled_secs, stopped_by, failed_over.is_some());
    let per_trial: Vec<&Measured> = trial_facts.iter().map(|t| &t.measured).collect();
    let mut thresholds = evaluate_trials(
        &contract.thresholds,
        load.duration_ms,
        &per_trial,
        violations.total(),
    );
    events_thresholds(contract, &expiries, &publications, &mut thresholds);
    if let Some(facts) = &mut failed_over {
        facts.count_lost(&violations);
    }
    failover_thresholds(contract, failed_over.as_ref(), &mut thresholds);
    if let Some(min) = contract.thresholds.synchronous_standbys_min {
        // Replication as the server stood when the run began; before the
        // invariant threshold, which stays last.
        let standbys = backend
            .server
            .as_ref()
            .map_or(0, |s| s.synchronous_standbys());
        let at = thresholds.len().saturating_sub(1);
        thresholds.insert(
            at,
            ThresholdResult::over_trials(
                "synchronous_standbys_min",
                Bound::AtLeast,
                f64::from(min),
                vec![f64::from(standbys)],
            ),
        );
    }
    let complete = stopped_by != StopReason::Interrupted && outcomes.len() == trials as usize;
    let verdict = if complete {
        overall(&thresholds)
    } else {
        super::report::Verdict::Fail
    };
    let spread = spread(&per_trial);
    let (git_revision, git_dirty) = provenance::git();
    let f = &contract.fleet;
    Ok(Report {
        format: REPORT_FORMAT.into(),
        provenance: Provenance {
            started_utc: String::new(),
            ended_utc: String::new(),
            git_revision,
            git_dirty,
            crate_version: env!("CARGO_PKG_VERSION").into(),
            contract_sha256: options.contract_sha256.clone(),
            seed: contract.seed,
            run_prefix: options.prefix.clone(),
            command_line: provenance::command_line(),
        },
        run: RunFacts {
            prefix: options.prefix.clone(),
            complete,
            incomplete_reason: (!complete).then(|| {
                "interrupted (Ctrl-C): the figures cover only the part that ran".to_string()
            }),
        },
        environment: EnvironmentFacts {
            name: contract.name.clone(),
            description: contract.description.clone(),
            file: file.into(),
        },
        backend,
        machine: MachineFacts::here(),
        fleet: FleetFacts {
            tenants: u64::from(f.tenants),
            capabilities: u64::from(f.capabilities),
            bindings: f.bindings(),
            instances: f.instances(),
            replicas: f.replicas(),
            scopes: f.scopes(),
            catalog_revision: published_at.0,
            setup_ms,
        },
        load: LoadFacts {
            clients: contract.load.clients,
            duration_ms: contract.load.duration_ms,
            operations: contract.load.operations,
            actions_max: contract.actions_budget(),
            seed: contract.seed,
            warmup_ms,
            trials,
            processes: options.processes,
        },
        trials: trial_facts,
        spread,
        measured,
        invariants: InvariantFacts {
            checked,
            violations: violations.total(),
            by_kind: violations
                .counts()
                .iter()
                .map(|(k, n)| (k.as_str().to_string(), *n))
                .collect(),
            details: violations.details().to_vec(),
            database,
        },
        thresholds,
        pgbench: None,
        cleanup: None,
        verdict,
        expiry: events::ExpiryFacts::pool(&expiries),
        publications: events::PublicationFacts::pool(&publications, &publication_latency),
        failover: failed_over,
    })
}

/// The thresholds of a `[failover]`, before the invariant threshold
/// (which stays last): it happened, no answered route was lost, and the
/// time without a primary when the contract bounds it.
fn failover_thresholds(
    contract: &Contract,
    facts: Option<&failover::FailoverFacts>,
    thresholds: &mut Vec<ThresholdResult>,
) {
    let Some(f) = &contract.failover else {
        return;
    };
    let happened = facts.is_some_and(|f| f.happened);
    let mut add = vec![
        ThresholdResult::over_trials(
            "failovers_min",
            Bound::AtLeast,
            1.0,
            vec![if happened { 1.0 } else { 0.0 }],
        ),
        ThresholdResult::over_trials(
            "failover_lost_routes_max",
            Bound::AtMost,
            0.0,
            vec![facts.map_or(0.0, |f| f.lost_routes as f64)],
        ),
    ];
    if let Some(limit) = f.without_primary_ms_max {
        add.push(ThresholdResult::over_trials(
            "failover_without_primary_ms_max",
            Bound::AtMost,
            limit as f64,
            vec![facts.map_or(f64::INFINITY, |f| f.without_primary_ms)],
        ));
    }
    let at = thresholds.len().saturating_sub(1);
    thresholds.splice(at..at, add);
}

/// The thresholds of `[expiry]` and `[publications]`, weighed in every
/// trial, before the invariant threshold (which stays last).
fn events_thresholds(
    contract: &Contract,
    expiries: &[events::ExpiryFacts],
    publications: &[events::PublicationFacts],
    thresholds: &mut Vec<ThresholdResult>,
) {
    let mut add = Vec::new();
    if let Some(e) = &contract.expiry {
        add.push(ThresholdResult::over_trials(
            "expiry_left_online_max",
            Bound::AtMost,
            0.0,
            expiries
                .iter()
                .map(|f| (f.left_online + f.others_offline) as f64)
                .collect(),
        ));
        add.push(ThresholdResult::over_trials(
            "expiry_offline_within_ms_max",
            Bound::AtMost,
            e.offline_within_ms_max as f64,
            expiries.iter().map(|f| f.offline_ms).collect(),
        ));
    }
    if let Some(p) = &contract.publications {
        add.push(ThresholdResult::over_trials(
            "publication_failures_max",
            Bound::AtMost,
            p.failures_max as f64,
            publications.iter().map(|f| f.failures as f64).collect(),
        ));
        add.push(ThresholdResult::over_trials(
            "publications_min",
            Bound::AtLeast,
            1.0,
            publications.iter().map(|f| f.ok as f64).collect(),
        ));
        if let Some(limit) = p.p99_ms_max {
            add.push(ThresholdResult::over_trials(
                "publication_p99_ms_max",
                Bound::AtMost,
                limit,
                publications.iter().map(|f| f.latency.p99_ms).collect(),
            ));
        }
    }
    let at = thresholds.len().saturating_sub(1);
    thresholds.splice(at..at, add);
}

/// Registers the expiring replicas again after a trial's expiry, at most
/// [`REGISTER_CONCURRENCY`](super::limits::REGISTER_CONCURRENCY) at a
/// time, with health sequences from `seq`; returns the next sequence.
async fn reregister<R>(registry: &R, plan: &FleetPlan, seq: u64) -> Result<u64, QualifyError>
where
    R: Registry + Clone + 'static,
{
    let params: Vec<RegisterParams> = plan
        .replicas
        .iter()
        .filter(|r| plan.expiring.contains(&r.id))
        .enumerate()
        .map(|(i, spec)| RegisterParams {
            health_seq: seq + i as u64,
            lease_ttl_ms: plan.lease_ms(&spec.id),
            spec: spec.clone(),
        })
        .collect();
    let next = seq + params.len() as u64;
    fleet::register_all(registry, params)
        .await
        .map_err(|failure| QualifyError::Run {
            reason: match failure {
                RegisterFailure::Refused { replica, source } => {
                    format!("registering expired replica {replica} again: {source}")
                }
                RegisterFailure::Task(e) => format!("a registration task failed: {e}"),
            },
        })?;
    Ok(next)
}

/// The figures of a merged tally over `secs` seconds.
/// The figures of `tally`; with `failed_over`, calls that answered
/// `unavailable` are expected (the calls the failover cut; the report's
/// failover section counts them).
fn measure(tally: &Tally, secs: f64, stopped_by: StopReason, failed_over: bool) -> Measured {
    let secs = secs.max(1e-9);
    let operations = tally.operations();
    let resolves_ok = tally.op(Operation::ResolveNew).ok + tally.op(Operation::ResolveDuplicate).ok;
    let new = tally.op(Operation::ResolveNew).count;
    let no_capacity = tally
        .errors
        .get(&(Operation::ResolveNew, "no_capacity"))
        .copied()
        .unwrap_or(0);
    let expected =
        |op: Operation, kind: &str| op.expects(kind) || (failed_over && kind == "unavailable");
    let unexpected = tally
        .errors
        .iter()
        .filter(|((op, kind), _)| !expected(*op, kind))
        .map(|(_, n)| n)
        .sum();
    let share = |n: u64, of: u64| if of == 0 { 0.0 } else { n as f64 / of as f64 };
    Measured {
        elapsed_ms: secs * 1000.0,
        stopped_by,
        operations,
        operations_per_s: operations as f64 / secs,
        resolves_ok,
        resolves_per_s: resolves_ok as f64 / secs,
        resolve_latency: tally.resolve_latency().summary(),
        by_operation: Operation::ALL
            .iter()
            .map(|op| {
                let t = tally.op(*op);
                (
                    op.as_str().to_string(),
                    OperationFigures {
                        count: t.count,
                        ok: t.ok,
                        latency: t.latency.summary(),
                    },
                )
            })
            .collect(),
        resolves_created: tally.resolves_created,
        resolves_existing: tally.resolves_existing,
        settlements_released: tally.settlements_released,
        heartbeats_ignored: tally.heartbeats_ignored,
        mix_substitutions: tally.substitutions,
        errors: tally
            .errors
            .iter()
            .map(|((op, kind), n)| ErrorCount {
                operation: op.as_str().into(),
                kind: (*kind).into(),
                expected: expected(*op, kind),
                count: *n,
            })
            .collect(),
        unexpected_errors: unexpected,
        unexpected_error_rate: share(unexpected, operations),
        no_capacity_rate: share(no_capacity, new),
        latency_distribution: Operation::ALL
            .iter()
            .filter(|op| tally.op(**op).count > 0)
            .map(|op| {
                (
                    op.as_str().to_string(),
                    tally.op(*op).latency.distribution(),
                )
            })
            .collect(),
    }
}
