//! Seed sweeps: many seeds of one scenario, run on worker threads and
//! reported in seed order, with the reports CI reads (JUnit, JSON).
//!
//! Each run is whole and single-threaded, exactly as `connreg-sim run`
//! does it: the worker threads only share out seeds. Results are handed
//! back in seed order, so a sweep with `jobs` workers reports what a
//! serial sweep reports, byte for byte, timing lines aside.
//!
//! A shard `I/N` takes the seeds whose offset in the range is `I - 1`
//! modulo `N`: the `N` shards of a range are disjoint and together cover
//! it, and each gets a fair share of slow and fast seeds.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;

use crate::limits::{
    SWEEP_JOBS_MAX, SWEEP_REORDER_WINDOW_SEEDS, SWEEP_SHARDS_MAX, SWEEP_WORKER_STACK_BYTES,
};
use crate::run::{RunError, RunOptions, run};
use crate::scenario::Scenario;
use crate::world::RunReport;

/// One shard of a seed range: `index` of `count`, 1-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// Which shard, 1..=count.
    pub index: u64,
    /// How many shards the range is split into.
    pub count: u64,
}

impl Shard {
    /// The whole range as one shard.
    pub const WHOLE: Shard = Shard { index: 1, count: 1 };

    /// Parses `I/N` (1 <= I <= N <= `SWEEP_SHARDS_MAX`).
    pub fn parse(text: &str) -> Result<Shard, String> {
        let bad = || format!("shard {text:?}: expected I/N with 1 <= I <= N, such as 1/2");
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let index: u64 = i.trim().parse().map_err(|_| bad())?;
        let count: u64 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index == 0 || index > count {
            return Err(bad());
        }
        if count > SWEEP_SHARDS_MAX {
            return Err(format!(
                "shard {text:?}: more than {SWEEP_SHARDS_MAX} shards"
            ));
        }
        Ok(Shard { index, count })
    }

    /// The seeds of `range` in this shard, ascending.
    pub fn seeds(self, range: Range<u64>) -> impl Iterator<Item = u64> {
        let start = range.start;
        range.filter(move |s| (s - start) % self.count == self.index - 1)
    }

    /// True when this is the whole range.
    pub fn is_whole(self) -> bool {
        self.count == 1
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Checks a `--jobs` value.
pub fn check_jobs(jobs: usize) -> Result<usize, String> {
    if jobs == 0 || jobs > SWEEP_JOBS_MAX {
        return Err(format!(
            "jobs {jobs}: expected 1 to {SWEEP_JOBS_MAX} worker threads"
        ));
    }
    Ok(jobs)
}

/// What one seed of a sweep found: what the reports need, without the
/// trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SeedOutcome {
    /// The seed.
    pub seed: u64,
    /// Violations found (more than recorded when past the run's limit).
    pub violations: u64,
    /// Each invariant that failed, once, in order of first violation.
    pub invariants: Vec<String>,
    /// The first violation: invariant, rules and what was seen.
    pub first: Option<FirstViolation>,
    /// MD5 of the trace.
    pub trace_hash: String,
    /// Trace lines.
    pub events: u64,
    /// The reachability probes the seed fired (`crate::probes`).
    pub probes: std::collections::BTreeSet<String>,
}

/// The first violation of a failing seed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FirstViolation {
    /// The invariant.
    pub invariant: String,
    /// The rules it protects.
    pub rules: String,
    /// What was seen.
    pub detail: String,
}

impl SeedOutcome {
    /// The outcome of one run's report.
    pub fn of(report: &RunReport) -> SeedOutcome {
        let mut invariants: Vec<String> = Vec::new();
        for v in &report.violations {
            if !invariants.contains(&v.invariant) {
                invariants.push(v.invariant.clone());
            }
        }
        SeedOutcome {
            seed: report.seed,
            violations: report.violation_count,
            invariants,
            first: report.violations.first().map(|v| FirstViolation {
                invariant: v.invariant.clone(),
                rules: v.rules.clone(),
                detail: v.detail.clone(),
            }),
            trace_hash: report.trace_hash.clone(),
            events: report.events,
            probes: report.probes.keys().cloned().collect(),
        }
    }

    /// True when every invariant held.
    pub fn ok(&self) -> bool {
        self.violations == 0
    }
}

/// What the consumer of a sweep wants next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Go on.
    Continue,
    /// Stop: run no further seed (fail-fast).
    Stop,
}

/// How a sweep ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Every seed ran.
    Complete,
    /// The consumer stopped it.
    Stopped,
    /// `interrupt` was set (Ctrl-C): what completed was handed over.
    Interrupted,
}

/// Runs `seeds` of `scenario` with `base`'s options (its seed replaced),
/// on `jobs` worker threads, handing each seed's result to `consume` in
/// seed order on the caller's thread (`jobs` 0: on the caller's thread
/// alone, where an interrupt waits for the run in progress). `interrupt`, when set, stops the sweep at once: results
/// already in hand are handed over (still in seed order, possibly with
/// gaps) and runs still going are abandoned with their threads.
pub fn sweep_seeds(
    scenario: &Scenario,
    base: &RunOptions,
    seeds: &[u64],
    jobs: usize,
    interrupt: &AtomicBool,
    mut consume: impl FnMut(u64, Result<RunReport, RunError>) -> Flow,
) -> Ended {
    let consume: &mut Consume<'_> = &mut consume;
    if jobs == 0 {
        serial(scenario, base, seeds, interrupt, consume)
    } else {
        parallel(scenario, base, seeds, jobs, interrupt, consume)
    }
}

type Consume<'a> = dyn FnMut(u64, Result<RunReport, RunError>) -> Flow + 'a;

/// Serial, on the caller's thread (also the fallback when no worker
/// thread can be started).
fn serial(
    scenario: &Scenario,
    base: &RunOptions,
    seeds: &[u64],
    interrupt: &AtomicBool,
    consume: &mut Consume<'_>,
) -> Ended {
    for &seed in seeds {
        if interrupt.load(Ordering::SeqCst) {
            return Ended::Interrupted;
        }
        let opts = RunOptions {
            seed,
            ..base.clone()
        };
        if consume(seed, run(scenario, &opts)) == Flow::Stop {
            return Ended::Stopped;
        }
    }
    Ended::Complete
}

type Done = (usize, Result<RunReport, RunError>);

/// Worker threads share out seeds by index; the caller's thread hands the
/// results over in index order. No worker starts a seed more than
/// `SWEEP_REORDER_WINDOW_SEEDS` past the first one not yet handed over,
/// so the results held for reordering stay bounded.
fn parallel(
    scenario: &Scenario,
    base: &RunOptions,
    seeds: &[u64],
    jobs: usize,
    interrupt: &AtomicBool,
    consume: &mut Consume<'_>,
) -> Ended {
    let scenario = Arc::new(scenario.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let (work_tx, work_rx) = mpsc::channel::<(usize, u64)>();
    let work_rx = Arc::new(Mutex::new(work_rx));
    let (done_tx, done_rx) = mpsc::channel::<Done>();
    let mut workers = 0;
    for w in 0..jobs.min(seeds.len()) {
        let (scenario, base, stop) = (scenario.clone(), base.clone(), stop.clone());
        let (work_rx, done_tx) = (work_rx.clone(), done_tx.clone());
        // Threads across seeds, never inside a run: each run stays on one
        // thread from start to end. Not joined: an interrupted sweep
        // leaves its runs behind and the process exits.
        let spawned = std::thread::Builder::new()
            .name(format!("sweep-{w}"))
            .stack_size(SWEEP_WORKER_STACK_BYTES)
            .spawn(move || {
                loop {
                    let next = work_rx.lock().map(|rx| rx.recv());
                    let Ok(Ok((index, seed))) = next else { return };
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let opts = RunOptions {
                        seed,
                        ..base.clone()
                    };
                    let result = run(&scenario, &opts);
                    if done_tx.send((index, result)).is_err() {
                        return;
                    }
                }
            });
        if spawned.is_ok() {
            workers += 1;
        }
    }
    drop(done_tx);
    if workers == 0 {
        // No thread could be started: run serially rather than not at all.
        return serial(&scenario, base, seeds, interrupt, consume);
    }
    let mut next = 0usize;
    let mut handed = 0usize;
    let mut pending: BTreeMap<usize, Result<RunReport, RunError>> = BTreeMap::new();
    let finish = |stop: &AtomicBool, ended: Ended| {
        stop.store(true, Ordering::SeqCst);
        ended
    };
    loop {
        while next < seeds.len() && next < handed + SWEEP_REORDER_WINDOW_SEEDS {
            if work_tx.send((next, seeds[next])).is_err() {
                break;
            }
            next += 1;
        }
        if handed == seeds.len() {
            return finish(&stop, Ended::Complete);
        }
        if interrupt.load(Ordering::SeqCst) {
            stop.store(true, Ordering::SeqCst);
            while let Ok((i, r)) = done_rx.try_recv() {
                pending.insert(i, r);
            }
            for (i, r) in pending {
                consume(seeds[i], r);
            }
            return Ended::Interrupted;
        }
        match done_rx.recv_timeout(Duration::from_millis(100)) {
            Ok((i, r)) => {
                pending.insert(i, r);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                // Every worker is gone (a run panicked on its thread): run
                // the rest here, where a panic shows.
                return serial(&scenario, base, &seeds[handed..], interrupt, consume);
            }
        }
        while let Some(r) = pending.remove(&handed) {
            let seed = seeds[handed];
            handed += 1;
            if consume(seed, r) == Flow::Stop {
                return finish(&stop, Ended::Stopped);
            }
        }
    }
}

/// SHA-256 of `bytes`, lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .fold(String::with_capacity(64), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// What a sweep report says about its inputs.
#[derive(Debug, Clone, Serialize)]
pub struct SweepInputs {
    /// The scenario path as given.
    pub scenario: String,
    /// The scenario's name.
    pub name: String,
    /// SHA-256 of the scenario file.
    pub sha256: String,
    /// The seed range as given (`A..B` or `A..=B`).
    pub seeds: String,
    /// The shard, `I/N`.
    pub shard: String,
    /// `memory` or `postgres`.
    pub backend: String,
    /// The planted bug, if any.
    pub plant: Option<String>,
    /// Swarm mode.
    pub swarm: bool,
}

/// One failing seed in the JSON summary.
#[derive(Debug, Clone, Serialize)]
pub struct FailureRecord {
    /// The seed.
    pub seed: u64,
    /// The first violation's invariant.
    pub invariant: String,
    /// Every invariant that failed.
    pub invariants: Vec<String>,
    /// Violations found.
    pub violations: u64,
    /// The first violation, in words.
    pub detail: String,
    /// MD5 of the trace.
    pub trace_hash: String,
    /// The command that reproduces it.
    pub repro: String,
}

/// The JSON summary of a sweep (`--json`). Everything but `timing` is the
/// same whatever `--jobs` was.
#[derive(Debug, Clone, Serialize)]
pub struct SweepSummary {
    /// What was swept.
    pub inputs: SweepInputs,
    /// Seeds in this sweep (this shard's).
    pub seeds_total: u64,
    /// Seeds that ran to the end.
    pub seeds_completed: u64,
    /// Seeds where every invariant held.
    pub passed: u64,
    /// Seeds with a violation.
    pub failed: u64,
    /// `complete`, `fail_fast` or `interrupted`.
    pub ended: String,
    /// Every failing seed, in seed order.
    pub failures: Vec<FailureRecord>,
    /// Every seed that ran, in seed order, with its trace hash.
    pub completed: Vec<CompletedSeed>,
    /// Which probes fired over the seeds (how many seeds fired each),
    /// which never did, and the required ones that never did.
    pub reach: crate::probes::Reach,
    /// Wall time: differs from run to run.
    pub timing: Timing,
}

/// One seed that ran.
#[derive(Debug, Clone, Serialize)]
pub struct CompletedSeed {
    /// The seed.
    pub seed: u64,
    /// True when every invariant held.
    pub ok: bool,
    /// MD5 of the trace.
    pub trace_hash: String,
}

/// How long a sweep took.
#[derive(Debug, Clone, Serialize)]
pub struct Timing {
    /// Worker threads.
    pub jobs: usize,
    /// Wall seconds.
    pub seconds: f64,
    /// Seeds per wall minute.
    pub seeds_per_minute: f64,
}

/// Escapes text for XML attribute values and character data.
pub fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 allows tab, newline, carriage return and nothing
            // else below 0x20.
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// The JUnit XML of a sweep: one `<testcase>` per completed seed, named
/// `seed N`; a failing one carries a `<failure>` with the invariant and
/// the repro command. Then one `<testcase>` per probe the scenario
/// requires (`[expect] reach`), named `reach PROBE`, failing when no seed
/// fired it.
pub fn junit(
    summary: &SweepSummary,
    outcomes: &[SeedOutcome],
    repro: impl Fn(u64) -> String,
) -> String {
    let i = &summary.inputs;
    let suite = if i.shard == "1/1" {
        format!("connreg-sim sweep {}", i.name)
    } else {
        format!("connreg-sim sweep {} shard {}", i.name, i.shard)
    };
    let tests = outcomes.len() + summary.reach.required.len();
    let failures = summary.failed + summary.reach.missing.len() as u64;
    let mut x = String::new();
    x.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        x,
        "<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" time=\"{:.3}\">",
        xml_escape(&suite),
        tests,
        failures,
        summary.timing.seconds
    );
    let _ = writeln!(
        x,
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"0\" time=\"{:.3}\">",
        xml_escape(&suite),
        tests,
        failures,
        summary.timing.seconds
    );
    x.push_str("    <properties>\n");
    for (name, value) in [
        ("scenario", i.scenario.as_str()),
        ("scenario_sha256", i.sha256.as_str()),
        ("seeds", i.seeds.as_str()),
        ("shard", i.shard.as_str()),
        ("backend", i.backend.as_str()),
        ("plant", i.plant.as_deref().unwrap_or("")),
        ("swarm", if i.swarm { "true" } else { "false" }),
        ("ended", summary.ended.as_str()),
    ] {
        let _ = writeln!(
            x,
            "      <property name=\"{name}\" value=\"{}\"/>",
            xml_escape(value)
        );
    }
    x.push_str("    </properties>\n");
    let class = xml_escape(&format!("connreg-sim.{}", i.name));
    for o in outcomes {
        match &o.first {
            None => {
                let _ = writeln!(
                    x,
                    "    <testcase classname=\"{class}\" name=\"seed {}\"/>",
                    o.seed
                );
            }
            Some(first) => {
                let message = format!(
                    "{} violation(s), first {}: {}; reproduce: {}",
                    o.violations,
                    first.invariant,
                    first.detail,
                    repro(o.seed)
                );
                let body = format!(
                    "invariants: {}\nfirst: {} [{}]: {}\ntrace md5: {}\nreproduce: {}\n",
                    o.invariants.join(", "),
                    first.invariant,
                    first.rules,
                    first.detail,
                    o.trace_hash,
                    repro(o.seed)
                );
                let _ = writeln!(
                    x,
                    "    <testcase classname=\"{class}\" name=\"seed {}\">\n      <failure type=\"{}\" message=\"{}\">{}</failure>\n    </testcase>",
                    o.seed,
                    xml_escape(&first.invariant),
                    xml_escape(&message),
                    xml_escape(&body)
                );
            }
        }
    }
    for probe in &summary.reach.required {
        let fired = summary.reach.fired.get(probe).copied().unwrap_or(0);
        if fired > 0 {
            let _ = writeln!(
                x,
                "    <testcase classname=\"{class}\" name=\"reach {}\"><system-out>fired in {fired} of {} seed(s)</system-out></testcase>",
                xml_escape(probe),
                outcomes.len()
            );
        } else {
            let message = format!(
                "required probe {probe} never fired over {} seed(s) ([expect] reach)",
                outcomes.len()
            );
            let _ = writeln!(
                x,
                "    <testcase classname=\"{class}\" name=\"reach {}\">\n      <failure type=\"unreached\" message=\"{}\"/>\n    </testcase>",
                xml_escape(probe),
                xml_escape(&message)
            );
        }
    }
    x.push_str("  </testsuite>\n</testsuites>\n");
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_split_a_range_disjointly_and_completely() {
        for (range, n) in [(1..100u64, 2u64), (5..6, 3), (0..1000, 7), (10..21, 11)] {
            let mut seen: Vec<u64> = Vec::new();
            for i in 1..=n {
                let shard = Shard { index: i, count: n };
                seen.extend(shard.seeds(range.clone()));
            }
            seen.sort_unstable();
            assert_eq!(seen, range.collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_shard_outside_its_count_is_refused() {
        assert!(Shard::parse("3/2").is_err());
        assert!(Shard::parse("0/2").is_err());
        assert!(Shard::parse("1/0").is_err());
        assert!(Shard::parse("1-2").is_err());
        assert!(Shard::parse(&format!("1/{}", SWEEP_SHARDS_MAX + 1)).is_err());
        assert_eq!(Shard::parse("2/2"), Ok(Shard { index: 2, count: 2 }));
    }

    #[test]
    fn jobs_are_bounded() {
        assert!(check_jobs(0).is_err());
        assert!(check_jobs(SWEEP_JOBS_MAX + 1).is_err());
        assert_eq!(check_jobs(2), Ok(2));
    }

    #[test]
    fn xml_escaping_covers_markup_quotes_and_control_characters() {
        assert_eq!(
            xml_escape("a<b>&\"c\"'\u{1}\n"),
            "a&lt;b&gt;&amp;&quot;c&quot;&apos;\\u{1}\n"
        );
    }
}
