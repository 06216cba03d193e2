//! Goal: a scenario that cannot make progress by construction (a call
//! that cannot be answered within its timeout, a lease that lapses before
//! its renewal) is refused as bad input naming the keys at fault, and `run`
//! says so when no action completed.

use std::path::PathBuf;
use std::process::{Command, Output};

use connreg_sim::scenario::STANDARD_SCENARIO;
use connreg_sim::{Scenario, ScenarioError};

fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_connreg-sim"))
        .args(args)
        .current_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."))
        .output()
        .expect("the connreg-sim binary runs")
}

/// `text` with the line `key = value` set in `[table]`.
fn with(text: &str, table: &str, line: &str) -> String {
    let header = format!("[{table}]");
    let key = line.split(" = ").next().unwrap();
    let mut kept: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with(&format!("{key} = ")))
        .collect();
    let at = kept.iter().position(|l| *l == header).unwrap();
    kept.insert(at + 1, line);
    kept.join("\n") + "\n"
}

fn refusal(text: &str) -> String {
    match Scenario::parse("s.toml", text) {
        Ok(_) => panic!("accepted a scenario that cannot make progress"),
        Err(e @ ScenarioError::Invalid { .. }) => e.to_string(),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn an_rpc_timeout_not_above_two_ticks_is_refused_naming_the_keys() {
    // A call is answered two steps after it is sent at the earliest (the
    // request arrives at the next step, the answer at the one after).
    for timeout in ["50", "100"] {
        let text = with(STANDARD_SCENARIO, "scenario", "tick_ms = 50");
        let text = with(&text, "workload", &format!("rpc_timeout_ms = {timeout}"));
        let err = refusal(&text);
        assert!(err.contains("workload.rpc_timeout_ms"), "{err}");
        assert!(err.contains("scenario.tick_ms"), "{err}");
    }
    let ok = with(STANDARD_SCENARIO, "scenario", "tick_ms = 50");
    let ok = with(&ok, "workload", "rpc_timeout_ms = 150");
    let ok = with(&ok, "workload", "dispatch_timeout_ms = 200");
    Scenario::parse("s.toml", &ok).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn an_rpc_timeout_not_above_the_shortest_round_trip_is_refused() {
    let text = with(STANDARD_SCENARIO, "scenario", "latency_ms = [30, 40]");
    let err = refusal(&with(&text, "workload", "rpc_timeout_ms = 60"));
    assert!(err.contains("workload.rpc_timeout_ms"), "{err}");
    assert!(err.contains("scenario.latency_ms"), "{err}");
}

#[test]
fn a_dispatch_timeout_not_above_the_shortest_execution_is_refused() {
    let text = with(STANDARD_SCENARIO, "workload", "exec_ms = [100, 200]");
    let err = refusal(&with(&text, "workload", "dispatch_timeout_ms = 100"));
    assert!(err.contains("workload.dispatch_timeout_ms"), "{err}");
    assert!(err.contains("workload.exec_ms"), "{err}");
}

#[test]
fn a_lease_not_longer_than_the_heartbeat_interval_is_refused() {
    let text = with(STANDARD_SCENARIO, "lifecycle", "heartbeat_ms = 400");
    let text = with(&text, "lifecycle", "lease_ttl_ms = 400");
    let err = refusal(&text);
    assert!(err.contains("lifecycle.lease_ttl_ms"), "{err}");
    assert!(err.contains("lifecycle.heartbeat_ms"), "{err}");
}

#[test]
fn the_cli_refuses_a_scenario_that_cannot_make_progress_as_bad_input() {
    let dir = std::env::temp_dir().join(format!("connreg-sim-progress-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("stuck.toml");
    let text = with(STANDARD_SCENARIO, "scenario", "tick_ms = 50");
    let text = with(&text, "workload", "rpc_timeout_ms = 50");
    std::fs::write(&path, text).unwrap();
    let out = sim(&["run", "--scenario", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("stuck.toml:"), "{err}");
    assert!(err.contains("workload.rpc_timeout_ms"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn run_says_when_no_action_completed() {
    // Every binding of the standard fleet disabled: every resolve answers
    // NoEligibleBinding, every action fails, every invariant holds.
    let text = STANDARD_SCENARIO.replace(
        "[[fleet.bindings]]\n",
        "[[fleet.bindings]]\nenabled = false\n",
    );
    let dir = std::env::temp_dir().join(format!("connreg-sim-nothing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("nothing.toml");
    std::fs::write(&path, text).unwrap();
    let out = sim(&["run", "--scenario", path.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("no action completed"), "{said}");
    let healthy = sim(&["run"]);
    let said = String::from_utf8_lossy(&healthy.stdout);
    assert!(!said.contains("no action completed"), "{said}");
    std::fs::remove_dir_all(&dir).ok();
}
