//! The `connreg-sim` command line: run one seed, sweep many, list the
//! planted bugs, re-check a trace. Exit status: 0 when every invariant
//! held, 1 on a violation, 2 on bad input.

use std::io::BufRead;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use connreg_sim::{
    BackendKind, PlantedBug, RunOptions, RunReport, Scenario, TraceTarget, recheck, repro_command,
    resolve_scenario_path, run,
};

/// Deterministic simulation of a connector fleet around the registry.
#[derive(Parser)]
#[command(name = "connreg-sim", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run one seed of a scenario (the default: the standard scenario, seed 1).
    Run(RunArgs),
    /// Run a range of seeds of a scenario.
    Sweep(cli::sweep::SweepArgs),
    /// Shrink a failing seed's scenario to a smaller scenario file that
    /// breaks the same invariant.
    Shrink(cli::shrink::ShrinkArgs),
    /// List the planted bugs, each with the scenario that catches it at
    /// seed 1 and the invariant that reports it.
    Plants,
    /// Which scenarios reach each planted bug's code path: a Markdown
    /// table from a few seeds of every scenario a pattern matches.
    Probes(cli::probes::ProbesArgs),
    /// Re-check the invariants of a trace file from the trace alone.
    CheckTrace {
        /// The trace (JSON lines).
        file: std::path::PathBuf,
    },
    /// Replay a trace's registry calls against a fresh in-memory registry
    /// in commit order and require the answers the trace recorded (the
    /// differential oracle); exit 1 on the first differing call.
    Oracle {
        /// The trace (JSON lines).
        file: std::path::PathBuf,
        /// The scenario file the trace was made with; default: the file
        /// its `start` line names, under `scenarios/`.
        #[arg(long)]
        scenario: Option<String>,
    },
    /// Tell the story of a trace's failing actions, one line per event;
    /// `--html FILE` also draws it as a page.
    Explain(connreg_sim::explain::ExplainArgs),
}

#[derive(Clone, Copy, ValueEnum)]
enum BackendArg {
    Memory,
    Postgres,
}

impl From<BackendArg> for BackendKind {
    fn from(b: BackendArg) -> Self {
        match b {
            BackendArg::Memory => BackendKind::Memory,
            BackendArg::Postgres => BackendKind::Postgres,
        }
    }
}

#[derive(clap::Args, Default)]
struct RunArgs {
    /// Scenario file; default: the built-in standard scenario.
    #[arg(long)]
    scenario: Option<String>,
    /// The seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The backend.
    #[arg(long, value_enum, default_value = "memory")]
    backend: Option<BackendArg>,
    /// Write the trace (JSON lines) to this file.
    #[arg(long)]
    trace: Option<std::path::PathBuf>,
    /// Switch on a planted bug (see `connreg-sim plants`).
    #[arg(long)]
    plant: Option<String>,
    /// Draw fault probabilities and fleet shape from the seed.
    #[arg(long)]
    swarm: bool,
    /// Run again what this trace recorded (scenario, seed, plant, swarm,
    /// backend) and say whether the new trace is the same.
    #[arg(long, conflicts_with_all = ["seed", "plant", "swarm", "backend"])]
    replay: Option<std::path::PathBuf>,
}

/// Prints a line to stdout; a closed pipe (`| head`) is not an error.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

mod cli;

const OK: u8 = 0;
const VIOLATION: u8 = 1;
const BAD_INPUT: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.command.unwrap_or(Command::Run(RunArgs {
        seed: 1,
        ..RunArgs::default()
    })) {
        Command::Run(args) => run_one(args),
        Command::Sweep(args) => cli::sweep::sweep(args),
        Command::Shrink(args) => cli::shrink::shrink(args),
        Command::Probes(args) => cli::probes::probes(args),
        Command::Plants => {
            for p in PlantedBug::all() {
                say!(
                    "{:<30} {:<44} {:<26} {}",
                    p.name(),
                    p.scenario(),
                    p.invariant(),
                    p.description()
                );
            }
            OK
        }
        Command::CheckTrace { file } => check_trace(&file),
        Command::Oracle { file, scenario } => oracle(&file, scenario.as_deref()),
        Command::Explain(args) => {
            match connreg_sim::explain::explain(&args, &mut std::io::stdout().lock()) {
                Ok(()) => OK,
                Err(e) => {
                    eprintln!("connreg-sim: {e}");
                    BAD_INPUT
                }
            }
        }
    };
    ExitCode::from(code)
}

fn load(path: Option<&str>) -> Result<Scenario, u8> {
    match path {
        None => Ok(Scenario::standard()),
        Some(p) => Scenario::load(&resolve_scenario_path(p)).map_err(|e| {
            eprintln!("connreg-sim: {e}");
            BAD_INPUT
        }),
    }
}

fn plant(name: Option<&str>) -> Result<Option<PlantedBug>, u8> {
    match name {
        None => Ok(None),
        Some(n) => PlantedBug::parse(n).map(Some).ok_or_else(|| {
            let names: Vec<&str> = PlantedBug::all().iter().map(|p| p.name()).collect();
            eprintln!(
                "connreg-sim: unknown plant {n:?}; one of {}",
                names.join(", ")
            );
            BAD_INPUT
        }),
    }
}

fn run_one(mut args: RunArgs) -> u8 {
    let replay = match args
        .replay
        .take()
        .map(|t| replay_into(&t, &mut args))
        .transpose()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("connreg-sim: {e}");
            return BAD_INPUT;
        }
    };
    let plant = match plant(args.plant.as_deref()) {
        Ok(p) => p,
        Err(code) => return code,
    };
    // A plant alone runs on the scenario that catches it.
    if args.scenario.is_none()
        && let Some(p) = plant
    {
        let path = resolve_scenario_path(&format!("scenarios/{}", p.scenario()));
        args.scenario = Some(path.display().to_string());
    }
    let scenario = match load(args.scenario.as_deref()) {
        Ok(s) => s,
        Err(code) => return code,
    };
    if let Some(r) = &replay {
        for w in r.warnings(&scenario) {
            eprintln!("connreg-sim: warning: {w}");
        }
    }
    let opts = RunOptions {
        seed: args.seed,
        backend: args.backend.map(BackendKind::from).unwrap_or_default(),
        plant,
        swarm: args.swarm,
        trace: args
            .trace
            .clone()
            .map(TraceTarget::File)
            .unwrap_or(TraceTarget::Hash),
    };
    let report = match run(&scenario, &opts) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("connreg-sim: {e}");
            return BAD_INPUT;
        }
    };
    let source = args.scenario.clone().unwrap_or_else(|| {
        format!(
            "built in: {}",
            connreg_sim::scenario::STANDARD_SCENARIO_PATH
        )
    });
    say!(
        "connreg-sim run: scenario {} ({source}), seed {}, backend {}{}{}",
        report.scenario,
        report.seed,
        opts.backend.name(),
        opts.plant
            .map(|p| format!(", plant {}", p.name()))
            .unwrap_or_default(),
        if opts.swarm { ", swarm" } else { "" },
    );
    summarize(&report);
    let c = &report.counters;
    if c.actions_completed == 0 {
        say!(
            "  no action completed: {} started, {} outcome unknown, {} cancelled, {} failed, {} abandoned",
            c.actions_started,
            c.actions_outcome_unknown,
            c.actions_cancelled,
            c.actions_failed,
            c.actions_abandoned
        );
    }
    if let Some(path) = &args.trace {
        say!("  trace written to {}", path.display());
    }
    if let Some(r) = &replay {
        say!("{}", r.verdict(&report));
    }
    if report.ok() {
        say!("ok");
        OK
    } else {
        print_violations(&report, args.trace.as_deref());
        say!(
            "reproduce: {}",
            repro_command(args.scenario.as_deref(), &opts)
        );
        VIOLATION
    }
}

fn summarize(r: &RunReport) {
    let c = &r.counters;
    say!(
        "  simulated {} ms in {} steps: {} operations, {} actions ({} completed, {} outcome unknown, {} cancelled, {} failed)",
        r.sim_ms,
        r.steps,
        r.operations,
        c.actions_started,
        c.actions_completed,
        c.actions_outcome_unknown,
        c.actions_cancelled,
        c.actions_failed
    );
    say!(
        "  faults fired {}; checks {}; violations {}",
        r.faults_fired,
        r.checks,
        r.violation_count
    );
    say!(
        "  trace {} events, {} bytes (largest step {} bytes at {} ms), md5 {}",
        r.events,
        r.trace_bytes,
        r.largest_step.bytes,
        r.largest_step.at_ms,
        r.trace_hash
    );
}

fn print_violations(r: &RunReport, trace: Option<&std::path::Path>) {
    say!("FAILED: {} violation(s)", r.violation_count);
    for line in connreg_sim::explain::report_lines(r, trace) {
        say!("{line}");
    }
}

/// Fills `args` from what the trace at `path` recorded.
fn replay_into(
    path: &std::path::Path,
    args: &mut RunArgs,
) -> Result<connreg_sim::replay::Recorded, String> {
    let r = connreg_sim::replay::recorded(path)?;
    args.seed = r.start.seed;
    args.plant = r.start.plant.clone();
    args.swarm = r.start.swarm;
    args.backend = Some(match r.start.backend.as_str() {
        "postgres" => BackendArg::Postgres,
        _ => BackendArg::Memory,
    });
    args.scenario = r
        .scenario_path(args.scenario.as_deref())?
        .map(|p| p.display().to_string());
    Ok(r)
}

/// The reachability probes of a trace file, counted from its records as
/// a run counts them: one line, and the scenario's required probes that
/// this trace did not fire (a sweep judges them over all its seeds).
fn trace_probes(path: &std::path::Path) {
    use connreg_sim::trace::{Event, Record};
    let Ok(file) = std::fs::File::open(path) else {
        return;
    };
    let mut probes = connreg_sim::probes::Probes::new();
    let mut required: Vec<String> = Vec::new();
    for line in std::io::BufReader::new(file).lines().map_while(Result::ok) {
        let Ok(record) = serde_json::from_str::<Record>(&line) else {
            continue;
        };
        if let Event::Start(info) = &record.event {
            required = info.expect.reach.clone();
        }
        probes.observe(&record);
    }
    let fired = probes.hits();
    say!(
        "  probes: {} of {} fired (`connreg-sim sweep` lists them)",
        fired.len(),
        connreg_sim::probes::catalog().len()
    );
    let missing: Vec<&String> = required
        .iter()
        .filter(|n| !fired.contains_key(*n))
        .collect();
    if !required.is_empty() {
        say!(
            "  reach: {} required, not fired in this trace: {}",
            required.len(),
            if missing.is_empty() {
                "none".to_string()
            } else {
                missing
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        );
    }
}

fn oracle(path: &std::path::Path, scenario: Option<&str>) -> u8 {
    use connreg_sim::oracle;
    let bad = |e: String| {
        eprintln!("connreg-sim: {}: {e}", path.display());
        BAD_INPUT
    };
    let recorded = match connreg_sim::replay::recorded(path) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("connreg-sim: {e}");
            return BAD_INPUT;
        }
    };
    let (config, warnings) = match oracle::config_of(&recorded.start, scenario) {
        Ok(c) => c,
        Err(e) => return bad(e),
    };
    for w in warnings {
        eprintln!("connreg-sim: warning: {w}");
    }
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) => return bad(e.to_string()),
    };
    let report = match oracle::check_lines(std::io::BufReader::new(file).lines(), config) {
        Ok(r) => r,
        Err(e) => return bad(e),
    };
    say!(
        "connreg-sim oracle: {} answers replayed in commit order, {} placed within their step, {} lock-free reads placed by their snapshot ({} of them earlier in their step), {} found by a retry after a lost commit, {} maintenance `more` read before a renewal, {} `unavailable` skipped ({} found committed by a later answer, {} of them where answered, {} such choices revised), {} fences renamed: {}",
        report.ordered,
        report.placed,
        report.positioned,
        report.read_earlier,
        report.retried,
        report.stale_more,
        report.unknown,
        report.unknown_committed,
        report.unknown_where_answered,
        report.revised,
        report.fences,
        if report.ok() {
            "the reference agrees"
        } else {
            "DIVERGED"
        }
    );
    match &report.divergence {
        None => OK,
        Some(d) => {
            for l in d.lines() {
                say!("{l}");
            }
            say!("reproduce: {}", oracle::repro(&recorded.start, scenario));
            VIOLATION
        }
    }
}

fn check_trace(path: &std::path::Path) -> u8 {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("connreg-sim: {}: {e}", path.display());
            return BAD_INPUT;
        }
    };
    let verdict = match recheck(std::io::BufReader::new(file).lines()) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("connreg-sim: {}: {e}", path.display());
            return BAD_INPUT;
        }
    };
    say!(
        "connreg-sim check-trace: {} records, {} violation(s) found, recorded verdict {}",
        verdict.records,
        verdict.violations.len(),
        match verdict.recorded_ok {
            Some(true) => "ok",
            Some(false) => "failed",
            None => "missing",
        }
    );
    let max = connreg_sim::limits::VIOLATIONS_PRINTED_MAX;
    for v in verdict.violations.iter().take(max) {
        say!("  - {}", connreg_sim::explain::violation_line(v));
    }
    if verdict.violations.len() > max {
        say!(
            "  … {} more; `connreg-sim explain {}` tells their story",
            verdict.violations.len() - max,
            path.display()
        );
    }
    for m in &verdict.mismatches {
        say!("  ! {m}");
    }
    trace_probes(path);
    if verdict.ok() { OK } else { VIOLATION }
}
