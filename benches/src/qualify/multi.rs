//! Many registry processes against one database (issue 10, item 6).
//!
//! With `processes = N` (or `--processes N`) each trial starts N workers:
//! this same binary as `connreg-qualify worker`, each a data-plane process
//! of its own (`PgDataPlane::connect`, its own pool of `clients`
//! connections) running `clients` clients on the fleet the driver built.
//! The handshake is on the workers' standard streams: a worker connects,
//! prints `ready`, and starts its warm-up when the driver writes `go`, so
//! every process measures the same span. Each writes its figures, its
//! timeline and every action it resolved to a JSON file
//! ([`WorkerResult`]); the driver adds them up (counts and latency
//! histograms exactly; a timeline point's percentiles are the slowest
//! process's), then checks the invariants over the whole database through
//! the control role: one route per action, unique fences, every replica's
//! and scope's counter equal to its live reservations, and every action
//! exactly as the worker that resolved it was told.
//!
//! The data role's URL reaches the workers in their environment
//! (`CONNREG_WORKER_DATA_URL`), never on a command line. Ctrl-C reaches a
//! terminal's whole process group; an interruption the driver alone
//! receives is passed on (`kill -INT`).

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::check::{Tracked, Violations};
use super::contract::{Contract, RunLength};
use super::limits::{WORKER_GRACE_MS, WORKER_READY_MS_MAX};
use super::stats::{Latency, OpTally, Operation, Tally};
use super::timeline::{PointFigures, Timeline, TimelinePoint};
use super::trial::TrialOutcome;
use super::workload::StopReason;

/// One operation's counts, for another process.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OpWire {
    /// Calls.
    pub count: u64,
    /// Calls that succeeded.
    pub ok: u64,
    /// The latency histogram's values and counts (µs).
    pub latency: Vec<(u64, u64)>,
}

/// A [`Tally`], for another process.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TallyWire {
    /// Per operation, in [`Operation::ALL`] order.
    pub ops: Vec<OpWire>,
    /// See [`Tally`].
    pub resolves_created: u64,
    /// See [`Tally`].
    pub resolves_existing: u64,
    /// See [`Tally`].
    pub resolves_reserved: u64,
    /// See [`Tally`].
    pub settlements_released: u64,
    /// See [`Tally`].
    pub heartbeats_ignored: u64,
    /// See [`Tally`].
    pub substitutions: u64,
    /// Errors: operation, kind, count.
    pub errors: Vec<(Operation, String, u64)>,
    /// Violations seen while running.
    pub violations: Violations,
}

impl TallyWire {
    /// `tally` for another process.
    pub fn of(tally: &Tally) -> TallyWire {
        TallyWire {
            ops: Operation::ALL
                .iter()
                .map(|op| {
                    let t = tally.op(*op);
                    OpWire {
                        count: t.count,
                        ok: t.ok,
                        latency: t.latency.to_wire(),
                    }
                })
                .collect(),
            resolves_created: tally.resolves_created,
            resolves_existing: tally.resolves_existing,
            resolves_reserved: tally.resolves_reserved,
            settlements_released: tally.settlements_released,
            heartbeats_ignored: tally.heartbeats_ignored,
            substitutions: tally.substitutions,
            errors: tally
                .errors
                .iter()
                .map(|((op, kind), n)| (*op, (*kind).to_string(), *n))
                .collect(),
            violations: tally.violations.clone(),
        }
    }

    /// The tally again. Error kinds are the registry's own few names; one
    /// not among `kinds` is kept as `other`.
    pub fn tally(&self, kinds: &[&'static str]) -> Tally {
        let mut t = Tally::default();
        for (i, o) in self.ops.iter().enumerate().take(t.ops.len()) {
            t.ops[i] = OpTally {
                count: o.count,
                ok: o.ok,
                latency: Latency::from_wire(&o.latency),
            };
        }
        t.resolves_created = self.resolves_created;
        t.resolves_existing = self.resolves_existing;
        t.resolves_reserved = self.resolves_reserved;
        t.settlements_released = self.settlements_released;
        t.heartbeats_ignored = self.heartbeats_ignored;
        t.substitutions = self.substitutions;
        for (op, kind, n) in &self.errors {
            let kind = kinds
                .iter()
                .find(|k| **k == kind)
                .copied()
                .unwrap_or("other");
            *t.errors.entry((*op, kind)).or_default() += n;
        }
        t.violations = self.violations.clone();
        t
    }
}

/// What one worker hands the driver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerResult {
    /// The worker, from 0.
    pub worker: u32,
    /// Its measured counts.
    pub tally: TallyWire,
    /// Every action it resolved as new.
    pub tracked: Vec<Tracked>,
    /// Its measured time, in milliseconds.
    pub elapsed_ms: f64,
    /// Why it ended.
    pub stopped_by: StopReason,
    /// Operations of its warm-up.
    pub warmup_operations: u64,
    /// Its figures over time.
    pub timeline: Timeline,
    /// Where its heartbeat sequence ended.
    pub next_heartbeat_seq: u64,
}

/// Every error kind `connreg::Error::kind` names, for
/// [`TallyWire::tally`].
pub const ERROR_KINDS: [&str; 11] = [
    "conflict",
    "fence_lost",
    "invalid_cursor",
    "invalid_request",
    "limit_exceeded",
    "no_capacity",
    "no_eligible_binding",
    "not_found",
    "replica_unavailable",
    "stale_cursor",
    "unavailable",
];

/// One trial as `processes` workers; `data_url` reaches them in their
/// environment.
#[allow(clippy::too_many_arguments)]
pub async fn run_trial(
    contract_file: &Path,
    contract: &Contract,
    data_url: &str,
    prefix: &str,
    trial: u32,
    processes: u32,
    heartbeat_seq: u64,
    drain: bool,
    scratch: &Path,
    interrupted: Arc<AtomicBool>,
) -> Result<TrialOutcome, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let mut workers: Vec<(Child, PathBuf)> = Vec::new();
    let kill_all = |workers: &mut Vec<(Child, PathBuf)>| {
        for (child, _) in workers.iter_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    };
    for worker in 0..processes {
        let result = scratch.join(format!("worker-{trial}-{worker}.json"));
        let _ = std::fs::remove_file(&result);
        let spawned = Command::new(&exe)
            .arg("worker")
            .arg("--env")
            .arg(contract_file)
            .args(["--prefix", prefix])
            .args(["--worker", &worker.to_string()])
            .args(["--workers", &processes.to_string()])
            .args(["--trial", &trial.to_string()])
            .args(["--heartbeat-seq", &heartbeat_seq.to_string()])
            .args(if drain { &["--drain"][..] } else { &[][..] })
            .arg("--result")
            .arg(&result)
            .env("CONNREG_WORKER_DATA_URL", data_url)
            .env_remove("CONNREG_DATA_URL")
            .env_remove("CONNREG_CONTROL_URL")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn();
        match spawned {
            Ok(child) => workers.push((child, result)),
            Err(e) => {
                kill_all(&mut workers);
                return Err(format!("cannot start worker {worker}: {e}"));
            }
        }
    }
    // Every worker connected and ready, then every one told to go.
    let mut readers = Vec::new();
    for (child, _) in workers.iter_mut() {
        let Some(stdout) = child.stdout.take() else {
            continue;
        };
        readers.push(tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            line
        }));
    }
    let ready = tokio::time::timeout(Duration::from_millis(WORKER_READY_MS_MAX), async {
        let mut lines = Vec::new();
        for r in readers {
            lines.push(r.await.unwrap_or_default());
        }
        lines
    })
    .await;
    match ready {
        Ok(lines) if lines.iter().all(|l| l.trim() == "ready") => {}
        Ok(_) => {
            kill_all(&mut workers);
            return Err("a worker ended before it was ready (its message is above)".into());
        }
        Err(_) => {
            kill_all(&mut workers);
            return Err(format!(
                "the workers were not ready within {WORKER_READY_MS_MAX} ms (WORKER_READY_MS_MAX)"
            ));
        }
    }
    for (child, _) in workers.iter_mut() {
        if let Some(stdin) = child.stdin.as_mut() {
            let _ = writeln!(stdin, "go");
            let _ = stdin.flush();
        }
    }
    let load = &contract.load;
    let bound_ms = load.warmup()
        + match load.length() {
            RunLength::DurationMs(ms) => ms,
            RunLength::Operations(_) => super::limits::DURATION_MS_MAX,
        }
        + WORKER_GRACE_MS;
    let deadline = Instant::now() + Duration::from_millis(bound_ms);
    let mut forwarded = false;
    loop {
        let mut running = 0;
        for (child, _) in workers.iter_mut() {
            if child.try_wait().map_err(|e| e.to_string())?.is_none() {
                running += 1;
            }
        }
        if running == 0 {
            break;
        }
        if interrupted.load(Ordering::Relaxed) && !forwarded {
            forwarded = true;
            for (child, _) in &workers {
                let _ = Command::new("kill")
                    .args(["-INT", &child.id().to_string()])
                    .status();
            }
        }
        if Instant::now() > deadline {
            kill_all(&mut workers);
            return Err(format!(
                "the workers did not finish within {bound_ms} ms (the trial, then WORKER_GRACE_MS)"
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut outcome = TrialOutcome {
        tally: Tally::default(),
        tracked: Vec::new(),
        elapsed: Duration::ZERO,
        stopped_by: match load.length() {
            RunLength::DurationMs(_) => StopReason::Duration,
            RunLength::Operations(_) => StopReason::Operations,
        },
        warmup_operations: 0,
        timeline: Timeline::default(),
        next_heartbeat_seq: heartbeat_seq,
    };
    let mut timelines = Vec::new();
    for (worker, (mut child, path)) in workers.into_iter().enumerate() {
        let status = child.wait().map_err(|e| e.to_string())?;
        let text = std::fs::read_to_string(&path).map_err(|e| {
            format!(
                "worker {worker} ({status}) left no result at {}: {e}",
                path.display()
            )
        })?;
        let r: WorkerResult = serde_json::from_str(&text)
            .map_err(|e| format!("worker {worker}'s result is unreadable: {e}"))?;
        let _ = std::fs::remove_file(&path);
        outcome.tally.merge(&r.tally.tally(&ERROR_KINDS));
        outcome.tracked.extend(r.tracked);
        outcome.elapsed = outcome
            .elapsed
            .max(Duration::from_secs_f64(r.elapsed_ms.max(0.0) / 1000.0));
        if matches!(
            r.stopped_by,
            StopReason::Interrupted | StopReason::ActionBudget
        ) && outcome.stopped_by != StopReason::Interrupted
        {
            outcome.stopped_by = r.stopped_by;
        }
        outcome.warmup_operations += r.warmup_operations;
        outcome.next_heartbeat_seq = outcome.next_heartbeat_seq.max(r.next_heartbeat_seq);
        timelines.push(r.timeline);
    }
    outcome.timeline = merge_timelines(&timelines);
    Ok(outcome)
}

/// The workers' timelines as one: point by point, counts and rates added,
/// percentiles the slowest worker's.
pub fn merge_timelines(timelines: &[Timeline]) -> Timeline {
    let mut merged = Timeline {
        interval_ms: timelines.first().map_or(0, |t| t.interval_ms),
        points: Vec::new(),
        truncated: timelines.iter().any(|t| t.truncated),
    };
    let len = timelines.iter().map(|t| t.points.len()).max().unwrap_or(0);
    for i in 0..len {
        let mut p = TimelinePoint {
            t_ms: 0.0,
            span_ms: 0.0,
            operations: 0,
            operations_per_s: 0.0,
            resolve_p99_ms: 0.0,
            by_operation: BTreeMap::new(),
            errors: BTreeMap::new(),
        };
        for q in timelines.iter().filter_map(|t| t.points.get(i)) {
            p.t_ms = p.t_ms.max(q.t_ms);
            p.span_ms = p.span_ms.max(q.span_ms);
            p.operations += q.operations;
            p.operations_per_s += q.operations_per_s;
            p.resolve_p99_ms = p.resolve_p99_ms.max(q.resolve_p99_ms);
            for (op, f) in &q.by_operation {
                let m: &mut PointFigures = p.by_operation.entry(op.clone()).or_default();
                m.count += f.count;
                m.per_s += f.per_s;
                m.errors += f.errors;
                m.p50_ms = m.p50_ms.max(f.p50_ms);
                m.p99_ms = m.p99_ms.max(f.p99_ms);
            }
            for (k, n) in &q.errors {
                *p.errors.entry(k.clone()).or_default() += n;
            }
        }
        merged.points.push(p);
    }
    merged
}

/// What `connreg-qualify worker` is told.
#[derive(Debug, Clone, clap::Args)]
pub struct WorkerArgs {
    /// The environment contract the driver runs.
    #[arg(long, value_name = "FILE")]
    pub env: PathBuf,
    /// The data role's URL (the driver passes it in the environment).
    #[arg(
        long,
        env = "CONNREG_WORKER_DATA_URL",
        value_name = "URL",
        hide_env_values = true
    )]
    pub data_url: String,
    /// The run prefix of the driver's fleet.
    #[arg(long)]
    pub prefix: String,
    /// This worker, from 0.
    #[arg(long)]
    pub worker: u32,
    /// Workers in all.
    #[arg(long)]
    pub workers: u32,
    /// The trial, from 0.
    #[arg(long)]
    pub trial: u32,
    /// The first heartbeat health sequence.
    #[arg(long)]
    pub heartbeat_seq: u64,
    /// Settle what is held after the measured run.
    #[arg(long)]
    pub drain: bool,
    /// Where to write the result (JSON).
    #[arg(long, value_name = "FILE")]
    pub result: PathBuf,
}

/// `connreg-qualify worker`: one data-plane process of a multi-process
/// trial. Exit 0 with a result written, 2 bad input, 3 anything else.
pub fn worker_main(args: &WorkerArgs) -> std::process::ExitCode {
    use std::process::ExitCode;
    let fail = |code: u8, e: String| {
        eprintln!("connreg-qualify worker {}: error: {e}", args.worker);
        ExitCode::from(code)
    };
    let contract = match Contract::load(&args.env) {
        Ok(c) => c,
        Err(e) => return fail(super::error::EXIT_BAD_INPUT, e.to_string()),
    };
    if args.workers == 0 || args.worker >= args.workers || args.prefix.is_empty() {
        return fail(
            super::error::EXIT_BAD_INPUT,
            "--worker must be below --workers, and --prefix must not be empty".into(),
        );
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(std::thread::available_parallelism().map_or(1, |n| n.get()))
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(super::error::EXIT_RUN_ERROR, e.to_string()),
    };
    match runtime.block_on(worker(args, &contract)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(super::error::EXIT_RUN_ERROR, e),
    }
}

async fn worker(args: &WorkerArgs, contract: &Contract) -> Result<(), String> {
    use connreg::postgres::{PgDataPlane, PoolOptions};
    use connreg::{ManualClock, Timestamp};

    use super::fleet::FleetPlan;
    use super::limits::PG_DATA_CONNECTIONS_MAX;
    use super::progress::ProgressMode;
    use super::trial::{self, Display};
    use super::workload::TrialParams;

    let mut pool =
        PoolOptions::data(PoolOptions::parse_url(&args.data_url).map_err(|e| e.to_string())?);
    pool.max_connections = contract.load.clients.clamp(1, PG_DATA_CONNECTIONS_MAX);
    let plane = PgDataPlane::connect(
        pool,
        ManualClock::new(Timestamp(super::run::CLOCK_START_MS)),
        contract.registry.config(),
    )
    .await
    .map_err(|e| format!("connect the data plane: {e}"))?;
    let interrupted = Arc::new(AtomicBool::new(false));
    let flag = interrupted.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            flag.store(true, Ordering::Relaxed);
        }
    });
    // The handshake: ready, then wait for the driver's go.
    println!("ready");
    let _ = std::io::stdout().flush();
    let go = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| e.to_string())?;
    if go.trim() != "go" {
        plane.close().await;
        return Err("the driver went away before the start".into());
    }
    let plan = Arc::new(FleetPlan::with_prefix(&contract.fleet, &args.prefix));
    let trials = contract.load.trials();
    let budget = contract.actions_budget() / u64::from(trials) / u64::from(args.workers);
    let params = TrialParams {
        start: Instant::now(),
        warmup_ms: contract.load.warmup(),
        trial: args.trial,
        action_tag: format!("w{}-r{}-", args.worker, args.trial),
        actions_budget: budget.max(1),
        heartbeat_seq: args.heartbeat_seq,
        probes: Vec::new(),
        drain: args.drain,
        interrupted,
        zone: None,
    };
    let display = Display {
        mode: ProgressMode::Lines,
        trial: args.trial + 1,
        trials,
        worker: Some(args.worker),
    };
    let outcome = trial::run(plane.clone(), plan, contract, params, display).await;
    plane.close().await;
    let outcome = outcome?;
    let result = WorkerResult {
        worker: args.worker,
        tally: TallyWire::of(&outcome.tally),
        tracked: outcome.tracked,
        elapsed_ms: outcome.elapsed.as_secs_f64() * 1000.0,
        stopped_by: outcome.stopped_by,
        warmup_operations: outcome.warmup_operations,
        timeline: outcome.timeline,
        next_heartbeat_seq: outcome.next_heartbeat_seq,
    };
    let text = serde_json::to_string(&result).map_err(|e| e.to_string())?;
    std::fs::write(&args.result, text)
        .map_err(|e| format!("cannot write {}: {e}", args.result.display()))
}
