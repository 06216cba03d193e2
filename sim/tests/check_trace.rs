//! Goal: a trace alone is enough to re-check every invariant: re-checking
//! a run's trace reproduces its verdict and counters, and an edited trace
//! that breaks an invariant is caught.

use std::io::BufRead;

use connreg::plant::Plant;
use connreg_sim::{PlantedBug, RunOptions, RunReport, Scenario, TraceTarget, recheck, run};

fn scenario(file: &str) -> Scenario {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios")
        .join(file);
    Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn traced(file: &str, seed: u64, plant: Option<Plant>) -> (RunReport, Vec<u8>) {
    let opts = RunOptions {
        seed,
        plant: plant.map(PlantedBug::Store),
        trace: TraceTarget::Memory,
        ..RunOptions::default()
    };
    let mut report = run(&scenario(file), &opts).unwrap_or_else(|e| panic!("{e}"));
    let bytes = report.trace.take().unwrap();
    (report, bytes)
}

fn lines(bytes: &[u8]) -> impl Iterator<Item = std::io::Result<String>> + '_ {
    std::io::BufReader::new(bytes).lines()
}

#[test]
fn rechecking_a_passing_trace_agrees_with_the_run() {
    // spec: SIM-3
    let (report, bytes) = traced("0004_replica_crash_mid_action.toml", 2, None);
    assert!(report.ok());
    let verdict = recheck(lines(&bytes)).unwrap();
    assert!(
        verdict.ok(),
        "{:#?} {:?}",
        verdict.violations,
        verdict.mismatches
    );
    assert_eq!(verdict.recorded_ok, Some(true));
    assert_eq!(verdict.records, report.events);
    assert_eq!(verdict.counters, report.counters);
}

#[test]
fn rechecking_a_failing_trace_finds_the_same_violations() {
    // spec: SIM-3
    let (report, bytes) = traced(
        "0003_retry_after_lost_answer.toml",
        1,
        Some(Plant::DoubleRelease),
    );
    assert!(!report.ok());
    let verdict = recheck(lines(&bytes)).unwrap();
    assert_eq!(verdict.recorded_ok, Some(false));
    assert!(verdict.mismatches.is_empty(), "{:?}", verdict.mismatches);
    assert_eq!(verdict.violations.len() as u64, report.violation_count);
    assert!(
        verdict
            .violations
            .iter()
            .any(|v| v.invariant == "idempotent_settlement")
    );
}

#[test]
fn a_side_effect_moved_to_another_replica_in_the_trace_is_caught() {
    // spec: PIN-4 (the ledger check reads only the trace)
    let (_, bytes) = traced("0001_steady_state.toml", 1, None);
    let text = String::from_utf8(bytes).unwrap();
    let mut edited = String::new();
    let mut done = false;
    for line in text.lines() {
        if !done && line.contains("\"ev\":\"ledger\"") {
            let moved = if line.contains("\"replica\":\"r1\"") {
                line.replace("\"replica\":\"r1\"", "\"replica\":\"r2\"")
            } else {
                line.replace("\"replica\":\"r", "\"replica\":\"x")
            };
            assert_ne!(moved, line);
            edited.push_str(&moved);
            done = true;
        } else {
            edited.push_str(line);
        }
        edited.push('\n');
    }
    let verdict = recheck(lines(edited.as_bytes())).unwrap();
    assert!(!verdict.ok());
    assert!(
        verdict
            .violations
            .iter()
            .any(|v| v.invariant == "no_silent_failover")
    );
    assert!(
        !verdict.mismatches.is_empty(),
        "the recorded verdict said ok"
    );
}

#[test]
fn a_truncated_trace_is_reported() {
    let (_, bytes) = traced("0001_steady_state.toml", 1, None);
    let text = String::from_utf8(bytes).unwrap();
    let cut: String = text.lines().take(40).map(|l| format!("{l}\n")).collect();
    let verdict = recheck(lines(cut.as_bytes())).unwrap();
    assert_eq!(verdict.recorded_ok, None);
    assert!(!verdict.ok());
}
