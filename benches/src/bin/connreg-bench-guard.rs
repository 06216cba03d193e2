//! `connreg-bench-guard`: the regression guard CI runs. A short run of the
//! targets bench's in-memory figures, each a ratio of two timings taken
//! side by side in this process, judged against the figures recorded in
//! `benches/README.md` ("Regression guard"): one more than 30 % worse
//! fails the run (exit 1).
//!
//! ```sh
//! cargo run --release -p connreg-benches --bin connreg-bench-guard
//! ```
//!
//! Figures (each the median over `--rounds` rounds, the timings of a round
//! taken one after another):
//!
//! - `memory_flat_100k_vs_1k`: a new-route resolve on a fleet of
//!   `--large` replicas ÷ on 1,000 (AUTH-4: routing does not grow with
//!   unrelated replicas);
//! - `memory_resolve_vs_reference`: a new-route resolve on 1,000 replicas
//!   ÷ one reference operation (an insert into and an eviction from an
//!   ordered map of 10,000 keys), which stands for the machine's speed;
//! - `memory_settle_vs_reference`: a completed settlement ÷ the same.
//!
//! Exit codes: 0 every figure within bounds, 1 one is not, 2 bad input (an
//! option, or a README without the recorded figures).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use connreg_benches::guard::{self, TOLERANCE_DEFAULT};
use connreg_benches::memory_fleet::MemoryBench;

/// Most rounds a run may ask for.
const ROUNDS_MAX: u32 = 101;
/// Most resolves a round may ask for.
const BATCH_MAX: u32 = 100_000;
/// Largest fleet a run may ask for (as the targets bench's largest).
const LARGE_MAX: u32 = 100_000;
/// Keys the reference map holds.
const REFERENCE_KEYS: usize = 10_000;
/// Reference operations a round times for each resolve it times.
const REFERENCE_PER_RESOLVE: u32 = 10;

/// The regression guard: in-memory figures as ratios against the recorded
/// ones.
#[derive(Debug, Parser)]
#[command(name = "connreg-bench-guard", version)]
struct Cli {
    /// The README whose "Regression guard" section records the figures.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))]
    readme: PathBuf,
    /// Rounds; each figure is the median over them (1 to 101).
    #[arg(long, default_value_t = 7)]
    rounds: u32,
    /// Resolves timed on each fleet a round (1 to 100,000).
    #[arg(long, default_value_t = 20_000)]
    batch: u32,
    /// The large fleet, in replicas (1,000 to 100,000).
    #[arg(long, default_value_t = 100_000)]
    large: u32,
    /// How much worse than recorded a figure may be (0 to 10).
    #[arg(long, default_value_t = TOLERANCE_DEFAULT)]
    tolerance: f64,
}

/// A fixed amount of ordered-map work: the machine's speed, measured
/// beside the registry's.
struct Reference {
    map: BTreeMap<u64, u64>,
    next: u64,
}

impl Reference {
    fn new() -> Reference {
        let mut r = Reference {
            map: BTreeMap::new(),
            next: 0,
        };
        for _ in 0..REFERENCE_KEYS {
            r.op();
        }
        r
    }

    fn op(&mut self) {
        self.next += 1;
        let key = self.next.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.map.insert(key, self.next);
        if self.map.len() > REFERENCE_KEYS {
            black_box(self.map.pop_first());
        }
    }

    fn time(&mut self, n: u32) -> Duration {
        let started = Instant::now();
        for _ in 0..n {
            self.op();
        }
        started.elapsed()
    }
}

fn bad(reason: String) -> ExitCode {
    eprintln!("connreg-bench-guard: error: {reason}");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.rounds == 0 || cli.rounds > ROUNDS_MAX {
        return bad(format!("--rounds {} must be 1 to {ROUNDS_MAX}", cli.rounds));
    }
    if cli.batch == 0 || cli.batch > BATCH_MAX {
        return bad(format!("--batch {} must be 1 to {BATCH_MAX}", cli.batch));
    }
    if cli.large < 1_000 || cli.large > LARGE_MAX {
        return bad(format!(
            "--large {} must be 1,000 to {LARGE_MAX}",
            cli.large
        ));
    }
    if !(0.0..=10.0).contains(&cli.tolerance) {
        return bad(format!("--tolerance {} must be 0 to 10", cli.tolerance));
    }
    let recorded = match std::fs::read_to_string(&cli.readme)
        .map_err(|e| e.to_string())
        .and_then(|text| guard::recorded(&text))
    {
        Ok(r) => r,
        Err(e) => return bad(format!("{}: {e}", cli.readme.display())),
    };

    eprintln!(
        "connreg-bench-guard: fleets of 1,000 and {} replicas, {} rounds of {} resolves",
        cli.large, cli.rounds, cli.batch
    );
    let mut small = MemoryBench::new(1_000);
    let mut large = MemoryBench::new(cli.large);
    let mut reference = Reference::new();
    // Warm both fleets' caches and the allocator once, unmeasured.
    small.resolve_and_settle(cli.batch.min(1_000));
    large.resolve_and_settle(cli.batch.min(1_000));
    let mut figures: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for _ in 0..cli.rounds {
        let (resolve_small, settle_small) = small.resolve_and_settle(cli.batch);
        let (resolve_large, _) = large.resolve_and_settle(cli.batch);
        let n = cli.batch * REFERENCE_PER_RESOLVE;
        let reference_ns = reference.time(n).as_nanos() as f64 / f64::from(n);
        let mut put = |name, v: f64| figures.entry(name).or_default().push(v);
        put("memory_flat_100k_vs_1k", resolve_large / resolve_small);
        put("memory_resolve_vs_reference", resolve_small / reference_ns);
        put("memory_settle_vs_reference", settle_small / reference_ns);
    }

    let mut failed = Vec::new();
    for (name, values) in &mut figures {
        let measured = guard::median(values);
        match recorded.get(*name) {
            None => println!("GUARD {name} measured={measured:.3} recorded=none ok=no-record"),
            Some(r) => {
                let ok = guard::holds(measured, *r, cli.tolerance);
                println!(
                    "GUARD {name} measured={measured:.3} recorded={} limit={:.3} ok={}",
                    r.value,
                    guard::limit(*r, cli.tolerance),
                    if ok { "yes" } else { "no" }
                );
                if !ok {
                    failed.push(*name);
                }
            }
        }
    }
    for name in recorded.keys() {
        if !figures.contains_key(name.as_str()) {
            return bad(format!(
                "the README records {name}, which this guard does not measure"
            ));
        }
    }
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "connreg-bench-guard: {} more than {:.0} % worse than recorded in {}: {}",
            if failed.len() == 1 {
                "a figure is"
            } else {
                "figures are"
            },
            cli.tolerance * 100.0,
            cli.readme.display(),
            failed.join(", ")
        );
        ExitCode::from(1)
    }
}
