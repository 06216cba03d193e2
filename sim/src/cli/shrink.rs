//! `connreg-sim shrink`: a failing seed's scenario, shrunk to a smaller
//! scenario file that breaks the same invariant (`connreg_sim::shrink`).
//! Progress goes to standard error; the file and a summary to standard
//! output. The file is the same for the same inputs.

use std::path::PathBuf;
use std::time::Instant;

use connreg_sim::limits::{SHRINK_RUNS_DEFAULT, SHRINK_RUNS_MAX, SHRINK_SEEDS_PER_CANDIDATE};
use connreg_sim::shrink::{ShrinkError, ShrinkOptions, shrink as search};
use connreg_sim::sweep::sha256_hex;
use connreg_sim::{RunOptions, repro_command, resolve_scenario_path};

use crate::{BAD_INPUT, OK, load, plant};

#[derive(clap::Args)]
pub(crate) struct ShrinkArgs {
    /// The failing scenario file.
    #[arg(long)]
    scenario: String,
    /// The failing seed.
    #[arg(long)]
    seed: u64,
    /// The planted bug the failing run had switched on.
    #[arg(long)]
    plant: Option<String>,
    /// The failing run was a swarm run.
    #[arg(long)]
    swarm: bool,
    /// Where to write the shrunk scenario file.
    #[arg(long)]
    out: PathBuf,
    /// Most runs to spend (each candidate costs up to 4).
    #[arg(long, default_value_t = SHRINK_RUNS_DEFAULT)]
    budget: u64,
}

/// Prints a line to stdout; a closed pipe is not an error.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

pub(crate) fn shrink(args: ShrinkArgs) -> u8 {
    let bad = |e: String| {
        eprintln!("connreg-sim: {e}");
        BAD_INPUT
    };
    if args.budget == 0 || args.budget > SHRINK_RUNS_MAX {
        return bad(format!(
            "budget {}: expected 1 to {SHRINK_RUNS_MAX} runs",
            args.budget
        ));
    }
    let scenario = match load(Some(&args.scenario)) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let plant = match plant(args.plant.as_deref()) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let path = resolve_scenario_path(&args.scenario);
    let sha256 = match std::fs::read(&path) {
        Ok(bytes) => sha256_hex(&bytes),
        Err(e) => return bad(format!("{}: {e}", path.display())),
    };
    let opts = ShrinkOptions {
        seed: args.seed,
        plant,
        swarm: args.swarm,
        budget_runs: args.budget,
    };
    // Times the shrink for its summary line, never a run.
    #[allow(clippy::disallowed_methods)]
    let started = Instant::now(); // determinism-ok: shrink timing only
    let budget = args.budget;
    let found = search(&scenario, &opts, |p| {
        eprintln!(
            "connreg-sim shrink: run {}/{budget}: {}; now {}",
            p.runs, p.kept, p.size
        );
    });
    let shrunk = match found {
        Ok(s) => s,
        Err(e @ ShrinkError::NotFailing { .. }) => return bad(e.to_string()),
        Err(e) => return bad(e.to_string()),
    };
    let secs = started.elapsed().as_secs_f64();
    let out = args.out.display().to_string();
    let run_opts = |scenario: Option<&str>, seed: u64, swarm: bool| {
        repro_command(
            scenario,
            &RunOptions {
                seed,
                plant,
                swarm,
                ..RunOptions::default()
            },
        )
    };
    let mut header = String::new();
    header.push_str(&format!(
        "# Shrunk by `connreg-sim shrink` from {} (sha256 {sha256}),\n",
        args.scenario
    ));
    header.push_str(&format!(
        "# seed {}{}{}: {} runs, {} steps kept{}.\n",
        args.seed,
        plant
            .map(|p| format!(", plant {}", p.name()))
            .unwrap_or_default(),
        if args.swarm { ", swarm" } else { "" },
        shrunk.runs,
        shrunk.steps,
        if shrunk.budget_spent {
            " (budget spent: it may shrink further)"
        } else {
            ""
        },
    ));
    header.push_str(&format!(
        "# Breaks `{}` at seed {}:\n#   {}\n",
        shrunk.invariant,
        shrunk.seed,
        run_opts(Some(&out), shrunk.seed, false)
    ));
    header.push_str(&format!(
        "# Before: {}\n# After:  {}\n\n",
        shrunk.before, shrunk.after
    ));
    if let Err(e) = std::fs::write(&args.out, header + &shrunk.text) {
        return bad(format!("{out}: {e}"));
    }
    say!(
        "connreg-sim shrink: scenario {} ({}), seed {}{}{}: breaks {}",
        scenario.scenario.name,
        args.scenario,
        args.seed,
        plant
            .map(|p| format!(", plant {}", p.name()))
            .unwrap_or_default(),
        if args.swarm { ", swarm" } else { "" },
        shrunk.invariant
    );
    say!("  before: {}", shrunk.before);
    say!("  after:  {}", shrunk.after);
    say!(
        "  {} runs ({} seeds per candidate at most), {} steps kept, {secs:.1} s{}",
        shrunk.runs,
        SHRINK_SEEDS_PER_CANDIDATE,
        shrunk.steps,
        if shrunk.budget_spent {
            "; budget spent, raise --budget to shrink further"
        } else {
            ""
        }
    );
    say!(
        "  written to {out}; it breaks {} at seed {}",
        shrunk.invariant,
        shrunk.seed
    );
    say!("reproduce: {}", run_opts(Some(&out), shrunk.seed, false));
    OK
}
