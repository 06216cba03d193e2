//! Goal: a dispatcher whose resolve went out as a burst ends no action with
//! a typed error while a copy is outstanding; a route a copy was answered
//! after another call was refused becomes the action's route, dispatched
//! and settled, so the refused action leaves no reservation behind
//! (`scenarios/0029_late_created_after_refusal.toml`).

use std::collections::{BTreeMap, BTreeSet};

use connreg_sim::{RunOptions, Scenario, TraceTarget, run};
use serde_json::Value;

fn scenario() -> Scenario {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios/0029_late_created_after_refusal.toml");
    Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn run_traced(s: &Scenario, seed: u64) -> (connreg_sim::RunReport, String) {
    let opts = RunOptions {
        seed,
        trace: TraceTarget::Memory,
        ..RunOptions::default()
    };
    let mut report = run(s, &opts).unwrap_or_else(|e| panic!("{e}"));
    let trace = String::from_utf8(report.trace.take().expect("kept in memory")).unwrap();
    (report, trace)
}

/// The actions a resolve answer received refused with NoEligibleBinding
/// while another resolve of the same burst was answered `created`, and
/// that ended with an outcome (the late route dispatched and settled)
/// rather than failed.
fn refused_then_taken(trace: &str) -> BTreeSet<String> {
    let mut resolves: BTreeMap<u64, String> = BTreeMap::new();
    let mut refused: BTreeSet<String> = BTreeSet::new();
    let mut created: BTreeSet<String> = BTreeSet::new();
    let mut found = BTreeSet::new();
    for line in trace.lines() {
        let e: Value = serde_json::from_str(line).unwrap();
        match e["ev"].as_str() {
            Some("rpc") if e["req"]["op"] == "resolve" => {
                let action = e["req"]["request"]["action"].as_str().unwrap();
                resolves.insert(e["id"].as_u64().unwrap(), action.to_string());
            }
            Some("reply") if e["resp"]["op"] == "resolve" => {
                let Some(action) = resolves.get(&e["id"].as_u64().unwrap()) else {
                    continue;
                };
                let result = &e["resp"]["result"];
                if result["Err"]["kind"] == "no_eligible_binding" && e["lost"] == false {
                    refused.insert(action.clone());
                }
                if result["Ok"]["kind"] == "created" {
                    created.insert(action.clone());
                }
            }
            Some("action_end") => {
                let action = e["action"].as_str().unwrap().to_string();
                let ended = e["result"].as_str().unwrap();
                if !ended.starts_with("failed:")
                    && refused.contains(&action)
                    && created.contains(&action)
                {
                    found.insert(action);
                }
            }
            _ => {}
        }
    }
    found
}

#[test]
fn a_route_answered_after_a_refusal_is_dispatched_and_settled() {
    // spec: ROUTE-8, PIN-7, SETTLE-1 (the route a late copy was answered
    // exists; the action takes it rather than end and leave it held)
    let s = scenario();
    // Each of these seeds left refused actions' late routes held before
    // the dispatcher waited for its copies (`no_orphan_reservation`).
    let mut taken = 0;
    for seed in 1..=6 {
        let (report, trace) = run_traced(&s, seed);
        assert!(report.ok(), "seed {seed}: {:#?}", report.violations);
        taken += refused_then_taken(&trace).len();
    }
    assert!(taken > 0, "no refused action took a late route");
}
