//! `connreg-sim sweep`: a range of seeds, on worker threads, with the
//! reports CI reads. Standard output is the same whatever `--jobs` is,
//! but for the one timing line; progress and estimates go to standard
//! error. Ctrl-C writes the partial reports and exits 130.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use connreg_sim::limits::{
    SWEEP_ESTIMATE_SAMPLE_SEEDS, SWEEP_ESTIMATE_SEEDS_MIN, SWEEP_FAILURES_PRINTED_MAX,
    SWEEP_NEVER_FIRED_PRINTED_MAX, SWEEP_PROGRESS_INTERVAL_S,
};
use connreg_sim::sweep::{
    CompletedSeed, Ended, FailureRecord, Flow, SeedOutcome, Shard, SweepInputs, SweepSummary,
    Timing, check_jobs, junit, sha256_hex, sweep_seeds,
};
use connreg_sim::{
    BackendKind, RunOptions, TraceTarget, parse_seed_range, repro_command, trace_file_name,
};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::{BAD_INPUT, BackendArg, OK, VIOLATION, load, plant};

/// Exit status of a sweep stopped by Ctrl-C (128 + SIGINT).
const INTERRUPTED: u8 = 130;

#[derive(clap::Args)]
pub(crate) struct SweepArgs {
    /// Scenario file.
    #[arg(long)]
    scenario: String,
    /// Seeds: A..B (B excluded) or A..=B.
    #[arg(long)]
    seeds: String,
    /// The backend.
    #[arg(long, value_enum, default_value = "memory")]
    backend: BackendArg,
    /// Switch on a planted bug.
    #[arg(long)]
    plant: Option<String>,
    /// Draw fault probabilities and fleet shape from each seed.
    #[arg(long)]
    swarm: bool,
    /// Worker threads, each running whole seeds one at a time (1 to 64).
    /// Results are reported in seed order whatever this is.
    #[arg(long, default_value_t = 1)]
    jobs: usize,
    /// Run only shard I of N of the seed range (1-based): the seeds whose
    /// offset in the range is I-1 modulo N. The N shards are disjoint and
    /// together cover the range.
    #[arg(long, default_value = "1/1")]
    shard: String,
    /// Write a JUnit XML report: one test case per seed.
    #[arg(long)]
    junit: Option<PathBuf>,
    /// Write a JSON summary: inputs, counts, every failure with its repro
    /// command, every seed's trace hash.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Stop at the first failing seed (in seed order).
    #[arg(long)]
    fail_fast: bool,
    /// Keep the trace of every failing seed in this folder (created if
    /// missing), as `seed-N.trace.jsonl`; a passing seed's is removed. A
    /// PostgreSQL run is not byte-deterministic, so its failing seed may
    /// not fail again: this keeps what it saw.
    #[arg(long)]
    keep_traces: Option<PathBuf>,
}

/// Prints a line to stdout; a closed pipe is not an error.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

pub(crate) fn sweep(args: SweepArgs) -> u8 {
    // Installed first, so an early Ctrl-C is seen. A second Ctrl-C exits
    // at once, without reports.
    let interrupt = Arc::new(AtomicBool::new(false));
    let presses = Arc::new(AtomicU32::new(0));
    {
        let (interrupt, presses) = (interrupt.clone(), presses.clone());
        let _ = ctrlc::set_handler(move || {
            if presses.fetch_add(1, Ordering::SeqCst) > 0 {
                std::process::exit(i32::from(INTERRUPTED));
            }
            interrupt.store(true, Ordering::SeqCst);
        });
    }
    let scenario = match load(Some(&args.scenario)) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let plant = match plant(args.plant.as_deref()) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let bad = |e: String| {
        eprintln!("connreg-sim: {e}");
        BAD_INPUT
    };
    let range = match parse_seed_range(&args.seeds) {
        Ok(s) => s,
        Err(e) => return bad(e),
    };
    let shard = match Shard::parse(&args.shard) {
        Ok(s) => s,
        Err(e) => return bad(e),
    };
    let jobs = match check_jobs(args.jobs) {
        Ok(j) => j,
        Err(e) => return bad(e),
    };
    let path = connreg_sim::resolve_scenario_path(&args.scenario);
    let sha256 = match std::fs::read(&path) {
        Ok(bytes) => sha256_hex(&bytes),
        Err(e) => return bad(format!("{}: {e}", path.display())),
    };
    let seeds: Vec<u64> = shard.seeds(range.clone()).collect();
    let total = seeds.len() as u64;
    let backend = BackendKind::from(args.backend);
    let base = RunOptions {
        seed: 0,
        backend,
        plant,
        swarm: args.swarm,
        trace: match &args.keep_traces {
            Some(dir) => TraceTarget::Folder(dir.clone()),
            None => TraceTarget::Hash,
        },
    };
    if let Some(dir) = &args.keep_traces
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        return bad(format!("--keep-traces {}: {e}", dir.display()));
    }
    let repro = |seed: u64| {
        repro_command(
            Some(&args.scenario),
            &RunOptions {
                seed,
                ..base.clone()
            },
        )
    };

    let bar = ProgressBar::new(total);
    let terminal = std::io::stderr().is_terminal();
    if terminal {
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} seeds, {per_sec}, eta {eta} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
    } else {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    // Measures the sweep (seeds per minute, progress, the estimate), never
    // the simulation: each run takes its time from its seed alone.
    #[allow(clippy::disallowed_methods)]
    let started = Instant::now(); // determinism-ok: sweep timing only
    let mut last_progress = started;
    let progress_every = Duration::from_secs(SWEEP_PROGRESS_INTERVAL_S);
    let mut outcomes: Vec<SeedOutcome> = Vec::new();
    let mut failed = 0u64;
    let mut input_error: Option<String> = None;
    let ended = sweep_seeds(
        &scenario,
        &base,
        &seeds,
        jobs,
        &interrupt,
        |seed, result| {
            let report = match result {
                Ok(r) => r,
                Err(e) => {
                    input_error = Some(format!("seed {seed}: {e}"));
                    return Flow::Stop;
                }
            };
            let outcome = SeedOutcome::of(&report);
            let ok = outcome.ok();
            if ok && let Some(dir) = &args.keep_traces {
                let path = dir.join(trace_file_name(seed));
                if let Err(e) = std::fs::remove_file(&path) {
                    eprintln!("connreg-sim sweep: {}: {e}", path.display());
                }
            }
            if !ok {
                failed += 1;
                bar.set_message(format!("{failed} failed"));
            }
            outcomes.push(outcome);
            bar.inc(1);
            let done = outcomes.len() as u64;
            #[allow(clippy::disallowed_methods)]
            let now = Instant::now(); // determinism-ok: sweep timing only
            let secs = now.duration_since(started).as_secs_f64();
            if total > SWEEP_ESTIMATE_SEEDS_MIN && done == SWEEP_ESTIMATE_SAMPLE_SEEDS {
                let estimate = secs / done as f64 * total as f64;
                eprintln!(
                    "connreg-sim sweep: {total} seeds; the first {done} took {secs:.1} s with {jobs} job(s): about {} in all",
                    duration_words(estimate)
                );
            }
            if !terminal && now.duration_since(last_progress) >= progress_every {
                last_progress = now;
                let left = secs / done as f64 * (total - done) as f64;
                eprintln!(
                    "connreg-sim sweep: {done}/{total} seeds, {failed} failed, {secs:.0} s, about {} left",
                    duration_words(left)
                );
            }
            if !ok && args.fail_fast {
                Flow::Stop
            } else {
                Flow::Continue
            }
        },
    );
    bar.finish_and_clear();
    if let Some(e) = input_error {
        return bad(e);
    }
    let secs = started.elapsed().as_secs_f64();
    let done = outcomes.len() as u64;
    let per_minute = if secs > 0.0 {
        done as f64 * 60.0 / secs
    } else {
        0.0
    };
    let reach =
        connreg_sim::probes::Reach::of(outcomes.iter().map(|o| &o.probes), &scenario.expect.reach);
    let summary = SweepSummary {
        inputs: SweepInputs {
            scenario: args.scenario.clone(),
            name: scenario.scenario.name.clone(),
            sha256,
            seeds: args.seeds.clone(),
            shard: shard.to_string(),
            backend: backend.name().to_string(),
            plant: plant.map(|p| p.name().to_string()),
            swarm: args.swarm,
        },
        seeds_total: total,
        seeds_completed: done,
        passed: done - failed,
        failed,
        ended: match ended {
            Ended::Complete => "complete",
            Ended::Stopped => "fail_fast",
            Ended::Interrupted => "interrupted",
        }
        .to_string(),
        failures: outcomes
            .iter()
            .filter_map(|o| {
                let first = o.first.as_ref()?;
                Some(FailureRecord {
                    seed: o.seed,
                    invariant: first.invariant.clone(),
                    invariants: o.invariants.clone(),
                    violations: o.violations,
                    detail: first.detail.clone(),
                    trace_hash: o.trace_hash.clone(),
                    repro: repro(o.seed),
                })
            })
            .collect(),
        completed: outcomes
            .iter()
            .map(|o| CompletedSeed {
                seed: o.seed,
                ok: o.ok(),
                trace_hash: o.trace_hash.clone(),
            })
            .collect(),
        reach: reach.clone(),
        timing: Timing {
            jobs,
            seconds: secs,
            seeds_per_minute: per_minute,
        },
    };

    say!(
        "connreg-sim sweep: scenario {} ({}), seeds {}..{}{} ({total} seeds), backend {}{}{}",
        scenario.scenario.name,
        args.scenario,
        range.start,
        range.end,
        if shard.is_whole() {
            String::new()
        } else {
            format!(" shard {shard}")
        },
        backend.name(),
        plant
            .map(|p| format!(", plant {}", p.name()))
            .unwrap_or_default(),
        if args.swarm { ", swarm" } else { "" },
    );
    match ended {
        Ended::Complete => {}
        Ended::Stopped => {
            say!("  stopped at the first failing seed (--fail-fast) after {done} of {total} seeds")
        }
        Ended::Interrupted => say!("  interrupted: {done} of {total} seeds completed"),
    }
    say!("  {} passed, {} failed", done - failed, failed);
    say!("  took {secs:.1} s with {jobs} job(s): {per_minute:.0} seeds/minute");
    let failures: Vec<&SeedOutcome> = outcomes.iter().filter(|o| !o.ok()).collect();
    for o in failures.iter().take(SWEEP_FAILURES_PRINTED_MAX) {
        let first = o
            .first
            .as_ref()
            .map(|v| format!("{}: {}", v.invariant, v.detail))
            .unwrap_or_default();
        say!(
            "  seed {}: {} violation(s); first: {first}",
            o.seed,
            o.violations
        );
        say!("    reproduce: {}", repro(o.seed));
        if let Some(dir) = &args.keep_traces {
            say!("    trace: {}", dir.join(trace_file_name(o.seed)).display());
        }
    }
    if failures.len() > SWEEP_FAILURES_PRINTED_MAX {
        let rest = &failures[SWEEP_FAILURES_PRINTED_MAX..];
        match &args.json {
            Some(json) => say!(
                "  and {} more failing seeds, every one with its repro command in {}",
                rest.len(),
                json.display()
            ),
            None => {
                say!("  and {} more failing seeds:", rest.len());
                for chunk in rest.chunks(20) {
                    let list: Vec<String> = chunk.iter().map(|o| o.seed.to_string()).collect();
                    say!("    {}", list.join(" "));
                }
            }
        }
    }
    print_reach(&reach, done);
    let unreached = reach.missing_message(done);
    if let Some(message) = &unreached {
        say!("  FAILED: {message}");
    }

    let mut write_failed = false;
    if let Some(file) = &args.json {
        let text = serde_json::to_string_pretty(&summary).unwrap_or_default() + "\n";
        if let Err(e) = std::fs::write(file, text) {
            eprintln!("connreg-sim: {}: {e}", file.display());
            write_failed = true;
        } else {
            say!("  summary written to {}", file.display());
        }
    }
    if let Some(file) = &args.junit {
        let text = junit(&summary, &outcomes, repro);
        if let Err(e) = std::fs::write(file, text) {
            eprintln!("connreg-sim: {}: {e}", file.display());
            write_failed = true;
        } else {
            say!("  JUnit report written to {}", file.display());
        }
    }
    if ended == Ended::Interrupted {
        return INTERRUPTED;
    }
    if write_failed {
        return BAD_INPUT;
    }
    if failed > 0 || unreached.is_some() {
        VIOLATION
    } else {
        OK
    }
}

/// The probes part of the text output: how many seeds fired each probe
/// that fired, the ones that never did, and the required ones. Names are
/// grouped by what precedes their last `:`, one group a line.
fn print_reach(reach: &connreg_sim::probes::Reach, seeds: u64) {
    let total = reach.fired.len() + reach.never.len();
    say!(
        "  probes: {} of {total} fired over {seeds} seed(s) (seeds that fired each):",
        reach.fired.len()
    );
    for line in grouped(
        reach
            .fired
            .iter()
            .map(|(n, c)| (n.as_str(), format!(" {c}"))),
    ) {
        say!("    {line}");
    }
    let shown = reach.never.len().min(SWEEP_NEVER_FIRED_PRINTED_MAX);
    say!("  never fired ({}):", reach.never.len());
    for line in grouped(
        reach.never[..shown]
            .iter()
            .map(|n| (n.as_str(), String::new())),
    ) {
        say!("    {line}");
    }
    if shown < reach.never.len() {
        say!("    and {} more", reach.never.len() - shown);
    }
    if !reach.required.is_empty() {
        say!(
            "  reach: {} required, {} fired",
            reach.required.len(),
            reach.required.len() - reach.missing.len()
        );
    }
}

/// `answer:resolve: created 3, existing 1`: one line a group of names
/// with the same prefix (up to the last `:`), each name's last part with
/// its suffix; groups in prefix order.
fn grouped<'a>(items: impl Iterator<Item = (&'a str, String)>) -> Vec<String> {
    let mut groups: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
    for (name, suffix) in items {
        let (prefix, last) = name.rsplit_once(':').unwrap_or(("", name));
        groups
            .entry(prefix)
            .or_default()
            .push(format!("{last}{suffix}"));
    }
    groups
        .into_iter()
        .map(|(prefix, items)| format!("{prefix}: {}", items.join(", ")))
        .collect()
}

/// "40 s", "3 min", "2.5 h".
fn duration_words(secs: f64) -> String {
    if secs < 120.0 {
        format!("{secs:.0} s")
    } else if secs < 7_200.0 {
        format!("{:.0} min", secs / 60.0)
    } else {
        format!("{:.1} h", secs / 3_600.0)
    }
}
