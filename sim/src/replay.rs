//! `connreg-sim run --replay TRACE`: runs again what a trace recorded
//! (scenario, seed, plant, swarm, backend, from its `start` line) and says
//! whether the new trace is the same, byte for byte.
//!
//! A replay can only reproduce a trace when the scenario file and the code
//! are those it was made with, so it warns when the scenario file's
//! SHA-256 or the simulator's revision differ from the ones the trace
//! records.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use crate::run::resolve_scenario_path;
use crate::trace::{Record, StartInfo, hash_bytes};
use crate::world::RunReport;

/// What a trace recorded about the run that made it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Its `start` line.
    pub start: StartInfo,
    /// The trace hash (MD5 of the file).
    pub trace_hash: String,
}

/// Reads the `start` line and the hash of the trace at `path`.
pub fn recorded(path: &Path) -> Result<Recorded, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let first = bytes
        .lines()
        .map_while(Result::ok)
        .find(|l| !l.trim().is_empty())
        .ok_or_else(|| format!("{}: the trace is empty", path.display()))?;
    let record: Record =
        serde_json::from_str(&first).map_err(|e| format!("{}: line 1: {e}", path.display()))?;
    let crate::trace::Event::Start(start) = record.event else {
        return Err(format!(
            "{}: a trace starts with its `start` line",
            path.display()
        ));
    };
    Ok(Recorded {
        start: *start,
        trace_hash: hash_bytes(&bytes),
    })
}

impl Recorded {
    /// The scenario file to replay: `given`, else the recorded file name
    /// under the workspace's `scenarios/`; `None` for the built-in one.
    pub fn scenario_path(&self, given: Option<&str>) -> Result<Option<PathBuf>, String> {
        if let Some(g) = given {
            return Ok(Some(resolve_scenario_path(g)));
        }
        let Some(file) = &self.start.scenario_file else {
            return Ok(None);
        };
        let path = resolve_scenario_path(&format!("scenarios/{file}"));
        if path.exists() {
            Ok(Some(path))
        } else {
            Err(format!(
                "the trace was made with scenario file {file}, which is not in scenarios/; pass it with --scenario"
            ))
        }
    }

    /// Warnings for what differs from the run that made the trace: the
    /// scenario file's bytes, the simulator's revision.
    pub fn warnings(&self, scenario: &crate::Scenario) -> Vec<String> {
        let mut out = Vec::new();
        let now = scenario.source.as_ref().map(|s| s.sha256.as_str());
        if let (Some(then), Some(now)) = (self.start.scenario_sha256.as_deref(), now)
            && then != now
        {
            out.push(format!(
                "the scenario file differs from the one the trace was made with (sha256 {now}, the trace has {then}): the replay may not reproduce it"
            ));
        }
        let revision = env!("CONNREG_SIM_REVISION");
        if !self.start.revision.is_empty() && self.start.revision != revision {
            out.push(format!(
                "the trace was made by revision {}, this is {revision}: the replay may differ",
                self.start.revision
            ));
        }
        out
    }

    /// Whether the replay wrote the same trace.
    pub fn verdict(&self, report: &RunReport) -> String {
        if report.trace_hash == self.trace_hash {
            "replay: the new trace is identical to the recorded one, byte for byte".to_string()
        } else {
            format!(
                "replay: the new trace differs from the recorded one (md5 {} vs {})",
                report.trace_hash, self.trace_hash
            )
        }
    }
}
