//! Shrinking a failing scenario: from a red seed to the smallest scenario
//! file that still breaks the same invariant.
//!
//! The search is greedy delta debugging over each dimension of a scenario,
//! in a fixed order: the expectations, scheduled faults, operator
//! operations, readers, dispatchers, actions per dispatcher, which actions
//! run (`workload.only_actions`: the others are drawn but not run, so the
//! kept ones keep their plans), replicas, registry hosts, each fault's
//! window (a later start, an earlier end, the whole window earlier), the
//! workload phase's length, fleet records, concurrency and the workload's
//! random knobs. The file written states only what differs from the
//! defaults. A candidate is kept when it parses as a
//! scenario file and one of its runs breaks the target invariant (the
//! first one the original run broke); the seeds tried per candidate are
//! the one the current scenario last failed at, the given seed and the
//! ones after it, `SHRINK_SEEDS_PER_CANDIDATE` in all. Passes repeat
//! until a whole round keeps nothing or the run budget is spent.
//!
//! Before the search, swarm mode and chaos are resolved into the explicit
//! scenario they stand for at the seed: the swarm draw becomes the fleet
//! shape and knobs it drew, and the chaos faults become scheduled faults
//! at the times and on the hosts the seed drew, so single faults can be
//! removed. Both are exact: the resolved scenario makes the same run.
//!
//! Everything is deterministic: the same scenario, seed, plant and budget
//! give the same file.

use serde::Serialize;

use crate::limits::SHRINK_SEEDS_PER_CANDIDATE;
use crate::plant::PlantedBug;
use crate::run::{BackendKind, RunOptions, TraceTarget, run};
use crate::scenario::{Chaos, Expect, FaultSpec, Scenario};

mod chaos;
mod file;

use chaos::resolve_chaos;
pub use file::{to_minimal_toml, to_toml};

/// How to shrink.
#[derive(Debug, Clone)]
pub struct ShrinkOptions {
    /// The failing seed.
    pub seed: u64,
    /// The planted bug the failing run had switched on.
    pub plant: Option<PlantedBug>,
    /// The failing run was a swarm run.
    pub swarm: bool,
    /// Most runs to spend.
    pub budget_runs: u64,
}

/// Why a scenario could not be shrunk.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShrinkError {
    /// The scenario cannot be shrunk as given (database faults, a run that
    /// cannot start).
    #[error("{0}")]
    Input(String),
    /// The seed does not fail: there is nothing to shrink.
    #[error("seed {seed} of scenario {scenario} breaks no invariant: nothing to shrink")]
    NotFailing {
        /// The scenario's name.
        scenario: String,
        /// The seed.
        seed: u64,
    },
}

/// How big a scenario is, in the dimensions a shrink reduces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Size {
    /// Hosts in the world: registry hosts, replicas, dispatchers, readers,
    /// the administrator and the maintainer.
    pub hosts: u64,
    /// Actions the dispatchers run (dispatchers times actions each, or
    /// the `workload.only_actions` listed).
    pub actions: u64,
    /// Scheduled faults plus the faults chaos draws (a loss-of-answers
    /// ratio counts as one).
    pub faults: u64,
    /// Operator operations.
    pub operations: u64,
    /// Fleet records: types, versions, instances, scopes, bindings,
    /// replicas, and the workload's mix entries.
    pub records: u64,
    /// Length of the workload phase, in simulated milliseconds.
    pub duration_ms: u64,
}

impl Size {
    /// The size of `s`.
    pub fn of(s: &Scenario) -> Size {
        let f = &s.fleet;
        let c = &s.chaos;
        let chaos = u64::from(
            c.replica_crashes
                + c.registry_crashes
                + c.partitions
                + c.holds
                + c.loss_windows
                + c.clock_jumps
                + c.db_cuts
                + c.db_stalls
                + c.db_terminates
                + c.db_restarts,
        ) + u64::from(c.lose_answer_ratio > 0.0);
        Size {
            hosts: s.host_names().len() as u64,
            actions: s.workload.actions_run(),
            faults: s.faults.len() as u64 + chaos,
            operations: s.workload.operations.len() as u64,
            records: (f.types.len()
                + f.versions.len()
                + f.instances.len()
                + f.scopes.len()
                + f.bindings.len()
                + f.replicas.len()
                + s.workload.mix.len()) as u64,
            duration_ms: s.scenario.duration_ms,
        }
    }
}

impl std::fmt::Display for Size {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "hosts {}, actions {}, faults {}, operations {}, records {}, duration {} ms",
            self.hosts, self.actions, self.faults, self.operations, self.records, self.duration_ms
        )
    }
}

/// What a shrink found.
#[derive(Debug, Clone)]
pub struct Shrunk {
    /// The smallest failing scenario found.
    pub scenario: Scenario,
    /// Its scenario file text, without a header.
    pub text: String,
    /// The seed it fails at.
    pub seed: u64,
    /// The invariant it breaks (the original run's first).
    pub invariant: String,
    /// Size of the scenario as given (swarm and chaos unresolved).
    pub before: Size,
    /// Size of the shrunk scenario.
    pub after: Size,
    /// Runs spent.
    pub runs: u64,
    /// Candidates kept.
    pub steps: u64,
    /// True when the budget ran out before a round kept nothing.
    pub budget_spent: bool,
}

/// A progress report: runs spent, what was kept, the size now.
#[derive(Debug, Clone)]
pub struct Progress<'a> {
    /// Runs spent so far.
    pub runs: u64,
    /// What the kept candidate changed.
    pub kept: &'a str,
    /// The size now.
    pub size: Size,
}

struct Search<'a> {
    opts: &'a ShrinkOptions,
    /// Most runs; the last check goes past it by the seeds it tries.
    budget: u64,
    target: String,
    seed: u64,
    runs: u64,
    spent: bool,
}

impl Search<'_> {
    /// Writes and reads `candidate` back as a scenario file; `None` when it
    /// is not a valid one.
    fn reparse(candidate: &Scenario) -> Option<(Scenario, String)> {
        let text = to_toml(candidate).ok()?;
        let parsed = Scenario::parse("shrink candidate", &text).ok()?;
        Some((parsed, text))
    }

    /// The seed at which `s` breaks the target invariant, if one of the
    /// seeds tried does.
    fn fails(&mut self, s: &Scenario) -> Option<u64> {
        let mut seeds = vec![self.seed];
        let mut next = self.opts.seed;
        while (seeds.len() as u64) < SHRINK_SEEDS_PER_CANDIDATE {
            if !seeds.contains(&next) {
                seeds.push(next);
            }
            next = next.wrapping_add(1);
        }
        for seed in seeds {
            if self.runs >= self.budget {
                self.spent = true;
                return None;
            }
            self.runs += 1;
            let report = run(
                s,
                &RunOptions {
                    seed,
                    backend: BackendKind::Memory,
                    plant: self.opts.plant,
                    swarm: false,
                    trace: TraceTarget::Hash,
                },
            );
            if let Ok(r) = report
                && r.violations.iter().any(|v| v.invariant == self.target)
            {
                return Some(seed);
            }
        }
        None
    }
}

type Candidates = Vec<(String, Scenario)>;

/// Removes chunks of a list: halves, quarters, ... single entries.
fn chunks<T: Clone>(
    what: &str,
    s: &Scenario,
    list: impl Fn(&Scenario) -> &Vec<T>,
    set: impl Fn(&mut Scenario, Vec<T>),
) -> Candidates {
    let items = list(s);
    let n = items.len();
    let mut out = Vec::new();
    let mut size = n;
    let mut sizes = Vec::new();
    while size >= 1 {
        if !sizes.contains(&size) {
            sizes.push(size);
        }
        if size == 1 {
            break;
        }
        size = size.div_ceil(2);
    }
    for size in sizes {
        let mut start = 0;
        while start < n {
            let end = (start + size).min(n);
            let mut kept = items[..start].to_vec();
            kept.extend_from_slice(&items[end..]);
            let mut c = s.clone();
            set(&mut c, kept);
            let label = if end - start == 1 {
                format!("removed {what} {}", start + 1)
            } else {
                format!("removed {what} {}..{}", start + 1, end)
            };
            out.push((label, c));
            start = end;
        }
    }
    out
}

/// Smaller values of a number, smallest first.
fn smaller(v: u64, min: u64) -> Vec<u64> {
    let mut out = Vec::new();
    if v <= min {
        return out;
    }
    for c in [
        min,
        min + (v - min) / 4,
        min + (v - min) / 2,
        v - (v - min) / 4,
        v - 1,
    ] {
        if c >= min && c < v && !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

fn number(
    what: &str,
    s: &Scenario,
    get: impl Fn(&Scenario) -> u64,
    min: u64,
    set: impl Fn(&mut Scenario, u64),
) -> Candidates {
    smaller(get(s), min)
        .into_iter()
        .map(|v| {
            let mut c = s.clone();
            set(&mut c, v);
            (format!("{what} {} -> {v}", get(s)), c)
        })
        .collect()
}

/// The earliest workload phase end that every scheduled entry fits in.
fn duration_floor(s: &Scenario) -> u64 {
    let mut floor = s.workload.start_ms.max(1);
    for f in &s.faults {
        let f = f.get_ref();
        floor = floor.max(f.at_ms).max(f.until_ms.unwrap_or(0));
    }
    for o in &s.workload.operations {
        floor = floor.max(o.get_ref().at_ms);
    }
    floor
}

fn knobs(s: &Scenario) -> Candidates {
    let mut out = Vec::new();
    let w = &s.workload;
    type Zero = fn(&mut Scenario);
    let ratios: [(&str, f64, Zero); 6] = [
        ("duplicate_ratio", w.duplicate_ratio, |c| {
            c.workload.duplicate_ratio = 0.0
        }),
        ("shared_ratio", w.shared_ratio, |c| {
            c.workload.shared_ratio = 0.0;
            c.workload.shared_pool = 0;
        }),
        ("cancel_ratio", w.cancel_ratio, |c| {
            c.workload.cancel_ratio = 0.0
        }),
        ("reconcile_ratio", w.reconcile_ratio, |c| {
            c.workload.reconcile_ratio = 0.0
        }),
        ("repeat_settle_ratio", w.repeat_settle_ratio, |c| {
            c.workload.repeat_settle_ratio = 0.0
        }),
        ("stale_settle_ratio", w.stale_settle_ratio, |c| {
            c.workload.stale_settle_ratio = 0.0
        }),
    ];
    for (name, v, zero) in ratios {
        if v > 0.0 {
            let mut c = s.clone();
            zero(&mut c);
            out.push((format!("workload.{name} {v} -> 0"), c));
        }
    }
    if w.touch_every_ms > 0 {
        let mut c = s.clone();
        c.workload.touch_every_ms = 0;
        out.push(("workload.touch_every_ms -> 0".to_string(), c));
    }
    if s.chaos.lose_answer_ratio > 0.0 {
        let mut c = s.clone();
        c.chaos.lose_answer_ratio = 0.0;
        out.push(("chaos.lose_answer_ratio -> 0".to_string(), c));
    }
    for (i, r) in s.fleet.replicas.iter().enumerate() {
        if r.get_ref().unknown_ratio > 0.0 {
            let mut c = s.clone();
            c.fleet.replicas[i].get_mut().unknown_ratio = 0.0;
            out.push((format!("replica {} unknown_ratio -> 0", r.get_ref().id), c));
        }
    }
    out
}

/// Candidates that keep fewer of the actions (`workload.only_actions`):
/// halves, quarters, ... single actions out; never none.
fn only_actions(s: &Scenario) -> Candidates {
    let w = &s.workload;
    let all: Vec<String> = if w.only_actions.is_empty() {
        (0..w.dispatchers)
            .flat_map(|i| (1..=w.actions).map(move |n| format!("dispatcher-{i}:{n}")))
            .collect()
    } else {
        w.only_actions.clone()
    };
    if all.len() <= 1 {
        return Vec::new();
    }
    let mut base = s.clone();
    base.workload.only_actions = all;
    chunks(
        "action",
        &base,
        |s| &s.workload.only_actions,
        |s, v| s.workload.only_actions = v,
    )
    .into_iter()
    .filter(|(_, c)| !c.workload.only_actions.is_empty())
    .collect()
}

/// Candidates that narrow each scheduled fault: a later start, an earlier
/// end (or restart), and the whole window earlier.
fn windows(s: &Scenario) -> Candidates {
    let mut out = Vec::new();
    for (i, f) in s.faults.iter().enumerate() {
        let f = f.get_ref();
        let end = f.until_ms.or(f.restart_ms);
        let mut push = |label: String, change: &dyn Fn(&mut FaultSpec)| {
            let mut c = s.clone();
            change(c.faults[i].get_mut());
            out.push((format!("fault {} {label}", i + 1), c));
        };
        if let Some(end) = end
            && end > f.at_ms + 1
        {
            let mid = f.at_ms + (end - f.at_ms) / 2;
            push(format!("ends at {mid} ms, not {end}"), &|f| {
                if f.until_ms.is_some() {
                    f.until_ms = Some(mid);
                } else {
                    f.restart_ms = Some(mid);
                }
            });
            push(format!("starts at {mid} ms, not {}", f.at_ms), &|f| {
                f.at_ms = mid;
            });
        }
        if f.at_ms > 1 {
            let shift = f.at_ms / 2;
            push(format!("starts {shift} ms earlier"), &|f| {
                f.at_ms -= shift;
                f.until_ms = f.until_ms.map(|u| u - shift);
                f.restart_ms = f.restart_ms.map(|r| r - shift);
            });
        }
    }
    out
}

/// Every candidate of one pass, from the current scenario.
fn pass(name: &str, s: &Scenario, target: &str) -> Candidates {
    match name {
        "expect" => {
            if target == crate::check::invariant::EXPECTATION.0 || s.expect == Expect::default() {
                Vec::new()
            } else {
                let mut c = s.clone();
                c.expect = Expect::default();
                vec![("removed the expectations".to_string(), c)]
            }
        }
        "chaos" => {
            let c = &s.chaos;
            let mut out = Vec::new();
            for (what, n, set) in [
                (
                    "replica_crashes",
                    c.replica_crashes,
                    (|c: &mut Chaos, v| c.replica_crashes = v) as fn(&mut Chaos, u32),
                ),
                ("registry_crashes", c.registry_crashes, |c, v| {
                    c.registry_crashes = v
                }),
                ("partitions", c.partitions, |c, v| c.partitions = v),
                ("holds", c.holds, |c, v| c.holds = v),
                ("loss_windows", c.loss_windows, |c, v| c.loss_windows = v),
                ("clock_jumps", c.clock_jumps, |c, v| c.clock_jumps = v),
            ] {
                for v in smaller(n.into(), 0) {
                    let mut x = s.clone();
                    set(&mut x.chaos, u32::try_from(v).unwrap_or(0));
                    out.push((format!("chaos.{what} {n} -> {v}"), x));
                }
            }
            out
        }
        "faults" => chunks("fault", s, |s| &s.faults, |s, v| s.faults = v),
        "windows" => windows(s),
        "only" => only_actions(s),
        "operations" => chunks(
            "operation",
            s,
            |s| &s.workload.operations,
            |s, v| s.workload.operations = v,
        ),
        "readers" => chunks(
            "reader",
            s,
            |s| &s.workload.readers,
            |s, v| s.workload.readers = v,
        ),
        "dispatchers" => number(
            "dispatchers",
            s,
            |s| s.workload.dispatchers.into(),
            1,
            |s, v| s.workload.dispatchers = u32::try_from(v).unwrap_or(1),
        ),
        "actions" => number(
            "actions per dispatcher",
            s,
            |s| s.workload.actions.into(),
            1,
            |s, v| s.workload.actions = u32::try_from(v).unwrap_or(1),
        ),
        "concurrency" => number(
            "concurrency",
            s,
            |s| s.workload.concurrency.into(),
            1,
            |s, v| s.workload.concurrency = u32::try_from(v).unwrap_or(1),
        ),
        "replicas" => chunks(
            "replica",
            s,
            |s| &s.fleet.replicas,
            |s, v| s.fleet.replicas = v,
        ),
        "registry" => number(
            "registry hosts",
            s,
            |s| s.registry.hosts.into(),
            1,
            |s, v| s.registry.hosts = u32::try_from(v).unwrap_or(1),
        ),
        "duration" => {
            let floor = duration_floor(s);
            number(
                "duration_ms",
                s,
                |s| s.scenario.duration_ms,
                floor,
                |s, v| s.scenario.duration_ms = v,
            )
        }
        "records" => {
            let mut out = chunks(
                "binding",
                s,
                |s| &s.fleet.bindings,
                |s, v| s.fleet.bindings = v,
            );
            out.extend(chunks(
                "mix entry",
                s,
                |s| &s.workload.mix,
                |s, v| s.workload.mix = v,
            ));
            out.extend(chunks(
                "scope",
                s,
                |s| &s.fleet.scopes,
                |s, v| s.fleet.scopes = v,
            ));
            out.extend(chunks(
                "instance",
                s,
                |s| &s.fleet.instances,
                |s, v| s.fleet.instances = v,
            ));
            out.extend(chunks(
                "version",
                s,
                |s| &s.fleet.versions,
                |s, v| s.fleet.versions = v,
            ));
            out.extend(chunks(
                "type",
                s,
                |s| &s.fleet.types,
                |s, v| s.fleet.types = v,
            ));
            out
        }
        "knobs" => knobs(s),
        _ => Vec::new(),
    }
}

/// The passes, in the order each round runs them.
const PASSES: &[&str] = &[
    "expect",
    "chaos",
    "faults",
    "operations",
    "readers",
    "dispatchers",
    "actions",
    "only",
    "replicas",
    "registry",
    "windows",
    "duration",
    "records",
    "concurrency",
    "knobs",
];

/// Shrinks `scenario`, which fails at `opts.seed`, to a smaller scenario
/// that still breaks the same invariant. `progress` hears of every
/// candidate kept.
pub fn shrink(
    scenario: &Scenario,
    opts: &ShrinkOptions,
    mut progress: impl FnMut(Progress<'_>),
) -> Result<Shrunk, ShrinkError> {
    if scenario.has_database_faults() {
        return Err(ShrinkError::Input(format!(
            "scenario {}: database faults run on PostgreSQL only, which is not deterministic; shrink runs on the in-memory backend",
            scenario.scenario.name
        )));
    }
    let before = Size::of(scenario);
    let first = run(
        scenario,
        &RunOptions {
            seed: opts.seed,
            backend: BackendKind::Memory,
            plant: opts.plant,
            swarm: opts.swarm,
            trace: TraceTarget::Hash,
        },
    )
    .map_err(|e| ShrinkError::Input(e.to_string()))?;
    let Some(target) = first.violations.first().map(|v| v.invariant.clone()) else {
        return Err(ShrinkError::NotFailing {
            scenario: scenario.scenario.name.clone(),
            seed: opts.seed,
        });
    };
    let mut search = Search {
        opts,
        budget: opts.budget_runs,
        target,
        seed: opts.seed,
        runs: 1,
        spent: false,
    };
    let mut steps = 0u64;
    // The swarm draw, as the explicit scenario it stands for.
    let start = if opts.swarm {
        crate::swarm::draw(scenario, opts.seed, false)
    } else {
        scenario.clone()
    };
    let Some((mut current, mut text)) = Search::reparse(&start) else {
        return Err(ShrinkError::Input(format!(
            "scenario {}: cannot be written back as a scenario file",
            scenario.scenario.name
        )));
    };
    if opts.swarm {
        match search.fails(&current) {
            Some(seed) => search.seed = seed,
            None => {
                return Err(ShrinkError::Input(
                    "the swarm draw, written out, does not fail the same way".into(),
                ));
            }
        }
    }
    // Chaos, as the scheduled faults the seed drew.
    if let Some(resolved) = resolve_chaos(&current, search.seed)
        && let Some((parsed, t)) = Search::reparse(&resolved)
        && let Some(seed) = search.fails(&parsed)
    {
        search.seed = seed;
        current = parsed;
        text = t;
        steps += 1;
        progress(Progress {
            runs: search.runs,
            kept: "resolved chaos into scheduled faults",
            size: Size::of(&current),
        });
    }
    'rounds: loop {
        let mut kept_any = false;
        for name in PASSES {
            'pass: loop {
                for (label, candidate) in pass(name, &current, &search.target) {
                    if search.spent {
                        break 'rounds;
                    }
                    let Some((parsed, t)) = Search::reparse(&candidate) else {
                        continue;
                    };
                    if let Some(seed) = search.fails(&parsed) {
                        search.seed = seed;
                        current = parsed;
                        text = t;
                        steps += 1;
                        kept_any = true;
                        progress(Progress {
                            runs: search.runs,
                            kept: &label,
                            size: Size::of(&current),
                        });
                        continue 'pass;
                    }
                }
                break;
            }
        }
        if !kept_any {
            break;
        }
    }
    // Named for what it is, and run once more as written.
    let mut named = current.clone();
    named.scenario.name = format!("{}_shrunk", scenario.scenario.name);
    named.scenario.summary = format!(
        "shrunk from scenario {} at seed {}: breaks {}",
        scenario.scenario.name, opts.seed, search.target
    );
    let budget_spent = search.spent;
    search.budget = u64::MAX;
    if let Some((parsed, t)) = Search::reparse(&named)
        && let Some(seed) = search.fails(&parsed)
    {
        search.seed = seed;
        current = parsed;
        text = t;
    }
    // The file states only what differs from the defaults.
    let text = to_minimal_toml(&current).unwrap_or(text);
    Ok(Shrunk {
        after: Size::of(&current),
        scenario: current,
        text,
        seed: search.seed,
        invariant: search.target,
        before,
        runs: search.runs,
        steps,
        budget_spent,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_file_round_trips_through_the_serializer() {
        for path in crate::scenario::shipped_files() {
            let s = Scenario::load(&path).unwrap();
            let text = to_toml(&s).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let back = Scenario::parse("round trip", &text)
                .unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()));
            assert_eq!(
                to_toml(&back).unwrap(),
                text,
                "{} does not round-trip",
                path.display()
            );
            assert_eq!(Size::of(&back), Size::of(&s));
        }
    }

    #[test]
    fn the_minimal_file_reads_back_as_the_same_scenario_and_states_less() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
        for name in [
            "0001_steady_state.toml",
            "0002_duplicate_resolve_storm.toml",
            "0011_partition_with_lease_churn.toml",
            "0024_many_tenants.toml",
        ] {
            let path = dir.join(name);
            let s = Scenario::load(&path).unwrap();
            let minimal = to_minimal_toml(&s).unwrap();
            let back = Scenario::parse("minimal", &minimal)
                .unwrap_or_else(|e| panic!("{name}: {e}\n{minimal}"));
            assert_eq!(to_toml(&back).unwrap(), to_toml(&s).unwrap(), "{name}");
            let full = to_toml(&s).unwrap();
            assert!(
                minimal.lines().count() < full.lines().count(),
                "{name}: {} lines, the full file {}",
                minimal.lines().count(),
                full.lines().count()
            );
            // Defaults are not stated.
            assert!(!minimal.contains("stale_settle_ratio = 0.0"), "{name}");
        }
    }

    #[test]
    fn smaller_numbers_are_smaller_and_distinct() {
        assert_eq!(smaller(1, 1), Vec::<u64>::new());
        assert_eq!(smaller(2, 1), vec![1]);
        assert_eq!(smaller(9, 1), vec![1, 3, 5, 7, 8]);
    }

    #[test]
    fn resolved_chaos_makes_the_same_run() {
        let text = format!(
            "{}\n[chaos]\nreplica_crashes = 2\nregistry_crashes = 1\npartitions = 2\nholds = 1\nloss_windows = 1\nclock_jumps = 1\n",
            crate::scenario::STANDARD_SCENARIO
        );
        let s = Scenario::parse("chaos.toml", &text).unwrap();
        for seed in 1..=3 {
            let resolved = resolve_chaos(&s, seed).expect("chaos to resolve");
            let (resolved, _) = Search::reparse(&resolved).expect("resolved chaos is valid");
            assert!(resolved.chaos.is_empty());
            assert_eq!(Size::of(&resolved).faults, Size::of(&s).faults);
            let opts = RunOptions {
                seed,
                trace: crate::run::TraceTarget::Memory,
                ..RunOptions::default()
            };
            let a = run(&s, &opts).unwrap();
            let b = run(&resolved, &opts).unwrap();
            assert_eq!(a.faults_fired, b.faults_fired, "seed {seed}");
            assert_eq!(a.counters, b.counters, "seed {seed}");
            // The start line names the scenario's source and its hash,
            // which differ; every event after it is the same.
            let events = |trace: Option<Vec<u8>>| {
                let trace = trace.expect("the trace is kept in memory");
                let start = trace
                    .iter()
                    .position(|&b| b == b'\n')
                    .expect("a start line");
                trace[start + 1..].to_vec()
            };
            assert_eq!(a.events, b.events, "seed {seed}");
            assert!(
                events(a.trace) == events(b.trace),
                "seed {seed}: the runs differ"
            );
        }
    }
}
