//! Running a scenario: options, backends, seed sweeps and the repro
//! command (SIM-5).

use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use connreg::{ManualClock, MemoryRegistry, Timestamp};

use crate::backend::Store;
use crate::fleet::FleetPlan;
use crate::plant::PlantedBug;
use crate::scenario::Scenario;
use crate::trace::Sink;
use crate::world::{CLOCK_START_MS, RunReport, WorldParams, simulate};

/// Which backend the shared store is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendKind {
    /// The deterministic in-memory backend.
    #[default]
    Memory,
    /// A real PostgreSQL server (seeded, not byte-deterministic).
    Postgres,
}

impl BackendKind {
    /// The CLI's name.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Memory => "memory",
            BackendKind::Postgres => "postgres",
        }
    }
}

/// Where the trace goes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum TraceTarget {
    /// Only hashed.
    #[default]
    Hash,
    /// Kept in the report.
    Memory,
    /// Written to a file.
    File(PathBuf),
    /// Written to [`trace_file_name`] of the run's seed in this folder (a
    /// sweep's `--keep-traces`).
    Folder(PathBuf),
}

/// The file a seed's trace is written to in a [`TraceTarget::Folder`].
pub fn trace_file_name(seed: u64) -> String {
    format!("seed-{seed}.trace.jsonl")
}

/// How to run a scenario.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// The seed.
    pub seed: u64,
    /// The backend.
    pub backend: BackendKind,
    /// A planted bug (those in the store: in-memory backend only).
    pub plant: Option<PlantedBug>,
    /// Draw fault probabilities and fleet shape from the seed.
    pub swarm: bool,
    /// Where the trace goes.
    pub trace: TraceTarget,
}

/// A run that could not start: bad input, not an invariant violation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The scenario cannot be run as given.
    #[error("{0}")]
    Input(String),
    /// The backend could not be provided.
    #[error("backend: {0}")]
    Backend(String),
}

fn trace_file(path: &std::path::Path) -> Result<std::io::BufWriter<std::fs::File>, RunError> {
    let file = std::fs::File::create(path)
        .map_err(|e| RunError::Input(format!("{}: {e}", path.display())))?;
    Ok(std::io::BufWriter::new(file))
}

/// Runs `scenario` once.
pub fn run(scenario: &Scenario, opts: &RunOptions) -> Result<RunReport, RunError> {
    let postgres = opts.backend == BackendKind::Postgres;
    if !postgres && scenario.has_database_faults() {
        return Err(RunError::Input(format!(
            "scenario {}: database faults (db_cut, db_stall, db_terminate, db_restart, db_failover) need --backend postgres",
            scenario.scenario.name
        )));
    }
    let (scenario, swarm_draws) = if opts.swarm {
        let (drawn, draws) = crate::swarm::draw_recorded(scenario, opts.seed, postgres);
        // A draw is a scenario like any other: one the loader would refuse
        // is refused here, before it runs, not found broken mid-run.
        drawn.validate_made().map_err(|e| {
            RunError::Input(format!(
                "scenario {}: swarm seed {} drew a scenario that is not valid: {e}",
                scenario.scenario.name, opts.seed
            ))
        })?;
        (drawn, draws)
    } else {
        (scenario.clone(), Default::default())
    };
    let sink = match &opts.trace {
        TraceTarget::Hash => Sink::Hash,
        TraceTarget::Memory => Sink::Memory(Vec::new()),
        TraceTarget::File(path) => Sink::File(trace_file(path)?),
        TraceTarget::Folder(dir) => Sink::File(trace_file(&dir.join(trace_file_name(opts.seed)))?),
    };
    let params = WorldParams {
        seed: opts.seed,
        backend: opts.backend.name().to_string(),
        plant: opts.plant,
        swarm: opts.swarm,
        swarm_draws,
        sink,
        offload_wait: Duration::from_secs(30),
        database: None,
    };
    let plan = FleetPlan::of(&scenario).map_err(RunError::Input)?;
    let clock = ManualClock::new(Timestamp(CLOCK_START_MS));
    match opts.backend {
        BackendKind::Memory => {
            let mut registry = MemoryRegistry::new(clock.clone(), plan.config.clone())
                .map_err(|e| RunError::Input(format!("registry configuration: {e}")))?;
            if let Some(p) = opts.plant.and_then(PlantedBug::store) {
                registry = registry.with_plant(p);
            }
            simulate(Rc::new(scenario), Store::inline(registry), clock, params)
                .map_err(RunError::Input)
        }
        BackendKind::Postgres => {
            if opts.plant.and_then(PlantedBug::store).is_some() {
                return Err(RunError::Input(
                    "plants in the store exist only in the in-memory backend".into(),
                ));
            }
            crate::postgres::run(Rc::new(scenario), &plan, clock, params)
        }
    }
}

/// The command that reproduces a run (SIM-5), from any directory: cargo
/// finds the workspace by its absolute manifest path, and the scenario
/// file is named by its absolute path. `scenario` is the path the user
/// gave, or `None` for the built-in standard scenario.
pub fn repro_command(scenario: Option<&str>, opts: &RunOptions) -> String {
    let workspace = workspace_root();
    let mut cmd = String::new();
    // The SQL mutant the run's database got, if any (docs/TESTING.md).
    #[cfg(feature = "postgres")]
    if opts.backend == BackendKind::Postgres
        && let Ok(id) = std::env::var(connreg::postgres::mutants::SQL_MUTANT_VAR)
    {
        cmd.push_str(&format!(
            "{}={} ",
            connreg::postgres::mutants::SQL_MUTANT_VAR,
            shell_word(&id)
        ));
    }
    cmd.push_str(&format!(
        "cargo run --manifest-path {} -p connreg-sim --release -- run",
        shell_word(&workspace.join("Cargo.toml").display().to_string())
    ));
    if let Some(path) = scenario {
        let path = absolute(&resolve_scenario_path(path));
        cmd.push_str(&format!(
            " --scenario {}",
            shell_word(&path.display().to_string())
        ));
    }
    cmd.push_str(&format!(" --seed {}", opts.seed));
    if opts.backend != BackendKind::Memory {
        cmd.push_str(&format!(" --backend {}", opts.backend.name()));
    }
    if let Some(p) = opts.plant {
        cmd.push_str(&format!(" --plant {}", p.name()));
    }
    if opts.swarm {
        cmd.push_str(" --swarm");
    }
    cmd.push_str(&format!(" --trace seed-{}.trace.jsonl", opts.seed));
    cmd
}

/// The workspace root this simulator was built from.
fn workspace_root() -> PathBuf {
    let sim = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    sim.parent().map(PathBuf::from).unwrap_or(sim)
}

/// `path` made absolute, symbolic links and `..` resolved when it exists.
fn absolute(path: &std::path::Path) -> PathBuf {
    std::fs::canonicalize(path)
        .or_else(|_| std::path::absolute(path))
        .unwrap_or_else(|_| path.to_path_buf())
}

/// `s` as one shell word: as is when it needs no quoting, else in single
/// quotes.
pub fn shell_word(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+=:".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Parses `A..B` (B excluded) or `A..=B` (B included).
pub fn parse_seed_range(text: &str) -> Result<std::ops::Range<u64>, String> {
    let bad = || format!("seeds {text:?}: expected A..B or A..=B");
    let (a, b, inclusive) = if let Some((a, b)) = text.split_once("..=") {
        (a, b, true)
    } else if let Some((a, b)) = text.split_once("..") {
        (a, b, false)
    } else {
        return Err(bad());
    };
    let a: u64 = a.trim().parse().map_err(|_| bad())?;
    let b: u64 = b.trim().parse().map_err(|_| bad())?;
    let end = if inclusive {
        b.checked_add(1).ok_or_else(bad)?
    } else {
        b
    };
    if end <= a {
        return Err(format!("seeds {text:?}: the range is empty"));
    }
    if end - a > crate::limits::SWEEP_SEEDS_MAX {
        return Err(format!(
            "seeds {text:?}: more than {} seeds",
            crate::limits::SWEEP_SEEDS_MAX
        ));
    }
    Ok(a..end)
}

/// Finds a scenario path: as given, or relative to the workspace root
/// (so `scenarios/...` works from any directory of the workspace).
pub fn resolve_scenario_path(given: &str) -> PathBuf {
    let direct = PathBuf::from(given);
    if direct.exists() {
        return direct;
    }
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(given);
    if workspace.exists() {
        workspace
    } else {
        direct
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_ranges_follow_rust_syntax() {
        assert_eq!(parse_seed_range("1..4").unwrap(), 1..4);
        assert_eq!(parse_seed_range("1..=4").unwrap(), 1..5);
        assert!(parse_seed_range("4..1").is_err());
        assert!(parse_seed_range("x").is_err());
    }

    #[test]
    fn the_repro_command_names_every_option() {
        let opts = RunOptions {
            seed: 7,
            plant: Some(PlantedBug::Store(connreg::plant::Plant::DoubleRelease)),
            swarm: true,
            ..RunOptions::default()
        };
        let cmd = repro_command(Some("scenarios/0001_steady_state.toml"), &opts);
        let root = std::fs::canonicalize(workspace_root()).unwrap();
        let scenario = root.join("scenarios/0001_steady_state.toml");
        assert_eq!(
            cmd,
            format!(
                "cargo run --manifest-path {} -p connreg-sim --release -- run --scenario {} --seed 7 --plant double-release --swarm --trace seed-7.trace.jsonl",
                workspace_root().join("Cargo.toml").display(),
                scenario.display()
            )
        );
    }
}
