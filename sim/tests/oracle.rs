//! Goal: the differential oracle replays a trace's registry calls against
//! a fresh in-memory registry and agrees with every clean trace of the
//! in-memory backend (its own reference), and names the line of an answer
//! edited to one the reference does not give.

use std::io::BufRead;

use connreg_sim::fleet::FleetPlan;
use connreg_sim::oracle::{OracleReport, check_lines};
use connreg_sim::{RunOptions, Scenario, TraceTarget, run};

fn scenario(file: &str) -> Scenario {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios")
        .join(file);
    Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// A clean in-memory trace of `file` at `seed`, as lines.
fn trace(file: &str, seed: u64) -> Vec<String> {
    let opts = RunOptions {
        seed,
        trace: TraceTarget::Memory,
        ..RunOptions::default()
    };
    let mut report = run(&scenario(file), &opts).unwrap_or_else(|e| panic!("{e}"));
    assert!(report.ok(), "{file} seed {seed}: {:#?}", report.violations);
    let bytes = report.trace.take().unwrap();
    std::io::BufReader::new(&bytes[..])
        .lines()
        .map(Result::unwrap)
        .collect()
}

fn oracle(file: &str, lines: &[String]) -> Result<OracleReport, String> {
    let config = FleetPlan::of(&scenario(file)).unwrap().config;
    check_lines(lines.iter().cloned().map(Ok), config)
}

/// The 1-based line of the first reply whose JSON satisfies `pick`.
fn first_reply(lines: &[String], pick: impl Fn(&serde_json::Value) -> bool) -> usize {
    lines
        .iter()
        .position(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["ev"] == "reply" && pick(&v)
        })
        .expect("no such reply")
        + 1
}

#[test]
fn the_oracle_agrees_with_clean_in_memory_traces() {
    // spec: SIM-4
    for file in [
        "0001_steady_state.toml",
        "0004_replica_crash_mid_action.toml",
        "0007_publications_during_paged_reads.toml",
        "0009_capacity_exhaustion_and_scopes.toml",
        "0029_late_created_after_refusal.toml",
    ] {
        for seed in [1, 2] {
            let report = oracle(file, &trace(file, seed)).unwrap();
            assert!(
                report.ok(),
                "{file} seed {seed}: {:?}",
                report.divergence.map(|d| d.lines())
            );
            assert!(report.ordered > 0, "{file} seed {seed}: nothing replayed");
        }
    }
}

#[test]
fn an_answer_the_reference_does_not_give_is_named_by_its_line() {
    // spec: SIM-4
    let file = "0009_capacity_exhaustion_and_scopes.toml";
    let clean = trace(file, 1);

    // A settlement that released, recorded as one that found nothing held.
    let mut edited = clean.clone();
    let at = first_reply(&edited, |v| v["resp"]["result"]["Ok"]["released"] == true);
    edited[at - 1] = edited[at - 1].replace(r#""released":true}"#, r#""released":false}"#);
    let d = oracle(file, &edited)
        .unwrap()
        .divergence
        .expect("not caught");
    assert_eq!(d.line, at as u64, "{:?}", d.lines());
    assert_eq!(d.op, "settle");

    // A resolve that created a route, recorded as `no_capacity`.
    let mut edited = clean.clone();
    let at = first_reply(&edited, |v| {
        v["resp"]["op"] == "resolve" && v["resp"]["result"]["Ok"].is_object()
    });
    let mut v: serde_json::Value = serde_json::from_str(&edited[at - 1]).unwrap();
    v["resp"]["result"] =
        serde_json::json!({"Err": {"kind": "no_capacity", "message": "no capacity"}});
    edited[at - 1] = v.to_string();
    let d = oracle(file, &edited)
        .unwrap()
        .divergence
        .expect("not caught");
    assert_eq!(d.line, at as u64, "{:?}", d.lines());
    assert_eq!(d.op, "resolve");
    assert!(d.recorded.contains("no_capacity"), "{}", d.recorded);
}

#[test]
fn a_trace_not_in_commit_order_is_refused() {
    // spec: SIM-4
    let file = "0001_steady_state.toml";
    let mut lines = trace(file, 1);
    lines[0] = lines[0]
        .replace(r#""deterministic":true"#, r#""deterministic":false"#)
        .replace(r#""commit_ordered":true"#, r#""commit_ordered":false"#);
    let e = oracle(file, &lines).unwrap_err();
    assert!(e.contains("commit-ordered"), "{e}");
}
