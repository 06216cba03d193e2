//! Goal: a dispatcher whose resolve went out as a burst ends no action
//! while a copy is outstanding, and settles as cancelled a route a copy
//! was answered after another copy was refused: the refused action leaves
//! no reservation behind (`scenarios/0026_late_created_after_refusal.toml`).

use std::collections::{BTreeMap, BTreeSet};

use connreg_sim::{RunOptions, Scenario, TraceTarget, run};
use serde_json::Value;

fn scenario() -> Scenario {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios/0026_late_created_after_refusal.toml");
    Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// The actions that ended refused with NoEligibleBinding although a copy
/// of their resolve was answered `created`, and that settled that route as
/// cancelled before they ended.
fn refused_then_settled(trace: &str) -> BTreeSet<String> {
    let mut resolves: BTreeMap<u64, String> = BTreeMap::new();
    let mut created: BTreeSet<String> = BTreeSet::new();
    let mut cancelled: BTreeSet<String> = BTreeSet::new();
    let mut found = BTreeSet::new();
    for line in trace.lines() {
        let e: Value = serde_json::from_str(line).unwrap();
        match e["ev"].as_str() {
            Some("rpc") if e["req"]["op"] == "resolve" => {
                let action = e["req"]["request"]["action"].as_str().unwrap();
                resolves.insert(e["id"].as_u64().unwrap(), action.to_string());
            }
            Some("rpc") if e["req"]["op"] == "settle" => {
                let p = &e["req"]["params"];
                if p["outcome"] == "cancelled" {
                    let action = p["assignment"]["identity"]["action"].as_str().unwrap();
                    cancelled.insert(action.to_string());
                }
            }
            Some("reply") if e["resp"]["result"]["Ok"]["kind"] == "created" => {
                if let Some(action) = resolves.get(&e["id"].as_u64().unwrap()) {
                    created.insert(action.clone());
                }
            }
            Some("action_end") if e["result"] == "failed:no_eligible_binding" => {
                let action = e["action"].as_str().unwrap().to_string();
                if created.contains(&action) && cancelled.contains(&action) {
                    found.insert(action);
                }
            }
            _ => {}
        }
    }
    found
}

#[test]
fn a_route_answered_after_a_refusal_is_settled_before_the_action_ends() {
    // spec: ROUTE-8, SETTLE-1, SIM-2 (the route a late copy was answered
    // exists; the dispatcher settles it rather than leave it held)
    let s = scenario();
    for seed in 1..=4 {
        let opts = RunOptions {
            seed,
            trace: TraceTarget::Memory,
            ..RunOptions::default()
        };
        let mut report = run(&s, &opts).unwrap_or_else(|e| panic!("{e}"));
        assert!(report.ok(), "seed {seed}: {:#?}", report.violations);
        let trace = String::from_utf8(report.trace.take().expect("kept in memory")).unwrap();
        let settled = refused_then_settled(&trace);
        assert!(
            !settled.is_empty(),
            "seed {seed}: no refused action had a late route to settle"
        );
        assert!(report.counters.settled_cancelled >= settled.len() as u64);
    }
}
