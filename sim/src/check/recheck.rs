//! Re-checking a trace file from its lines alone (`connreg-sim
//! check-trace`), and comparing the verdict with the one it recorded.

use super::Checker;
use crate::counters::Counters;
use crate::trace::{Event, Record, Violation};

/// The verdict of re-checking a trace file.
#[derive(Debug, Clone)]
pub struct Recheck {
    /// Records read.
    pub records: u64,
    /// Violations the re-check found.
    pub violations: Vec<Violation>,
    /// Counters the re-check computed.
    pub counters: Counters,
    /// The verdict the trace recorded, if it has an `end` line.
    pub recorded_ok: Option<bool>,
    /// Differences between the recorded and recomputed verdicts.
    pub mismatches: Vec<String>,
}

impl Recheck {
    /// True when the re-check found no violation and agrees with the
    /// recorded verdict.
    pub fn ok(&self) -> bool {
        self.violations.is_empty() && self.mismatches.is_empty()
    }
}

/// Refuses a trace whose first line is not a `start` of the format this
/// checker reads: an older trace lacks evidence the checks now require.
fn refuse_other_format(line: &str) -> Result<(), String> {
    let first: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("not a trace line: {e}"))?;
    if first["ev"] != "start" {
        return Err("a trace starts with its `start` line".into());
    }
    let format = first["format"].as_u64();
    let read = crate::trace::TRACE_FORMATS_READ;
    if !format.is_some_and(|f| read.iter().any(|r| u64::from(*r) == f)) {
        let seen = match &first["format"] {
            serde_json::Value::Null => "no format".to_string(),
            other => format!("format {other}"),
        };
        return Err(format!(
            "the trace is of {seen}; check-trace reads formats {} only (sim/TRACE.md: \
             answers name what they released and their registry clock, deliveries and the \
             dispatch of each side effect are recorded); make a new trace with \
             `connreg-sim run --trace FILE`",
            read.map(|r| r.to_string()).join(", ")
        ));
    }
    Ok(())
}

/// Re-checks a trace from its lines alone.
pub fn recheck(lines: impl Iterator<Item = std::io::Result<String>>) -> Result<Recheck, String> {
    let mut checker = Checker::new();
    let mut records = 0u64;
    let mut recorded_violations = 0u64;
    let mut recorded_end = None;
    let mut violations = Vec::new();
    for (i, line) in lines.enumerate() {
        let line = line.map_err(|e| format!("line {}: {e}", i + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        if records == 0 {
            refuse_other_format(&line).map_err(|e| format!("line {}: {e}", i + 1))?;
        }
        let record: Record =
            serde_json::from_str(&line).map_err(|e| format!("line {}: {e}", i + 1))?;
        records += 1;
        match &record.event {
            Event::Violation(_) => recorded_violations += 1,
            Event::End(end) => {
                checker.finish();
                recorded_end = Some(end.clone());
            }
            _ => checker.observe_at(i as u64 + 1, &record),
        }
        violations.extend(checker.take_found());
    }
    if records == 0 {
        return Err("the trace is empty: it has no start line".into());
    }
    let mut mismatches = Vec::new();
    if let Some(end) = &recorded_end {
        if end.counters != *checker.counters() {
            mismatches.push("the recorded counters differ from the recomputed ones".to_string());
        }
        if end.violations != checker.violations() {
            mismatches.push(format!(
                "the trace recorded {} violations, the re-check found {}",
                end.violations,
                checker.violations()
            ));
        }
    } else {
        mismatches.push("the trace has no end line (the run did not finish)".into());
    }
    let _ = recorded_violations;
    Ok(Recheck {
        records,
        violations,
        counters: checker.counters().clone(),
        recorded_ok: recorded_end.map(|e| e.ok),
        mismatches,
    })
}
