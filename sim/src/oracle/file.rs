//! The oracle over a trace file: its lines, the configuration of the run
//! that wrote it, and the command that makes it again.

use connreg::RegistryConfig;

use super::{Oracle, OracleReport};
use crate::trace::{Record, StartInfo};

/// The oracle over a trace's lines, with `config` the run's registry
/// configuration.
pub fn check_lines(
    lines: impl Iterator<Item = std::io::Result<String>>,
    config: RegistryConfig,
) -> Result<OracleReport, String> {
    let mut oracle = Oracle::new(config)?;
    for (i, line) in lines.enumerate() {
        let line = line.map_err(|e| format!("line {}: {e}", i + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let record: Record =
            serde_json::from_str(&line).map_err(|e| format!("line {}: {e}", i + 1))?;
        oracle.observe(i as u64 + 1, &record);
        if oracle.diverged() {
            break;
        }
    }
    oracle.finish()
}

/// The registry configuration of the run a trace recorded: its scenario
/// (`scenario`, else the file its `start` line names under `scenarios/`),
/// with the swarm draws redone when the run drew them. Returns the
/// configuration and warnings (a scenario file that changed since).
pub fn config_of(
    start: &StartInfo,
    scenario: Option<&str>,
) -> Result<(RegistryConfig, Vec<String>), String> {
    let recorded = crate::replay::Recorded {
        start: start.clone(),
        trace_hash: String::new(),
    };
    let scenario = match recorded.scenario_path(scenario)? {
        Some(path) => crate::Scenario::load(&path).map_err(|e| e.to_string())?,
        None => crate::Scenario::standard(),
    };
    let warnings = recorded
        .warnings(&scenario)
        .into_iter()
        .filter(|w| w.contains("scenario file"))
        .collect();
    let scenario = if start.swarm {
        crate::swarm::draw_recorded(&scenario, start.seed, start.backend == "postgres").0
    } else {
        scenario
    };
    let plan = crate::fleet::FleetPlan::of(&scenario)?;
    Ok((plan.config, warnings))
}

/// The command that makes the trace `start` describes again (SIM-5).
pub fn repro(start: &StartInfo, scenario: Option<&str>) -> String {
    let recorded = crate::replay::Recorded {
        start: start.clone(),
        trace_hash: String::new(),
    };
    let path = recorded.scenario_path(scenario).ok().flatten();
    let opts = crate::RunOptions {
        seed: start.seed,
        backend: if start.backend == "postgres" {
            crate::BackendKind::Postgres
        } else {
            crate::BackendKind::Memory
        },
        plant: start.plant.as_deref().and_then(crate::PlantedBug::parse),
        swarm: start.swarm,
        trace: crate::TraceTarget::Hash,
    };
    crate::repro_command(
        path.as_ref().map(|p| p.display().to_string()).as_deref(),
        &opts,
    )
}
