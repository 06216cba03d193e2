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

// Progress checkers: publications land (`publication_progress`) and lease
// maintenance drains in bounded calls (`maintenance_drains`).

use connreg_sim::check::invariant;
use connreg_sim::{PlantedBug, Recheck, RunOptions, RunReport, TraceTarget, recheck, run};
use serde_json::{Value, json};

fn scenario_file(file: &str) -> Scenario {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios")
        .join(file);
    Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn run_seed_one(file: &str, plant: Option<PlantedBug>, trace: bool) -> RunReport {
    let opts = RunOptions {
        seed: 1,
        plant,
        trace: if trace {
            TraceTarget::Memory
        } else {
            RunOptions::default().trace
        },
        ..RunOptions::default()
    };
    run(&scenario_file(file), &opts).unwrap_or_else(|e| panic!("{e}"))
}

fn count(report: &RunReport, (name, _): (&str, &str)) -> usize {
    report
        .violations
        .iter()
        .filter(|v| v.invariant == name)
        .count()
}

/// The trace of a passing run, one JSON value a line.
fn clean_trace(file: &str) -> Vec<Value> {
    let mut report = run_seed_one(file, None, true);
    assert!(report.ok(), "{file}: {:#?}", report.violations);
    String::from_utf8(report.trace.take().expect("the trace was kept"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn recheck_lines(lines: &[Value]) -> Recheck {
    let text: Vec<std::io::Result<String>> = lines
        .iter()
        .map(|v| Ok(serde_json::to_string(v).unwrap()))
        .collect();
    recheck(text.into_iter()).unwrap_or_else(|e| panic!("{e}"))
}

fn only(verdict: &Recheck, (name, _): (&str, &str)) {
    assert!(!verdict.violations.is_empty(), "{name} caught nothing");
    let others: Vec<_> = verdict
        .violations
        .iter()
        .filter(|v| v.invariant != name)
        .collect();
    assert!(others.is_empty(), "other checkers than {name}: {others:#?}");
}

#[test]
fn a_publication_starved_by_routing_is_caught_by_publication_progress() {
    // spec: LOCK-4
    let plant = PlantedBug::PublicationStarves;
    assert_eq!(plant.scenario(), "0023_hot_tenant.toml");
    let report = run_seed_one(plant.scenario(), Some(plant), false);
    assert!(
        count(&report, invariant::PUBLICATION_PROGRESS) > 0,
        "{:#?}",
        report.violations
    );
    // The plant answers nothing wrong: the only symptom is the delay.
    let others: Vec<_> = report
        .violations
        .iter()
        .filter(|v| v.invariant != invariant::PUBLICATION_PROGRESS.0)
        .collect();
    assert!(others.is_empty(), "{others:#?}");
    let clean = run_seed_one(plant.scenario(), None, false);
    assert!(clean.ok(), "{:#?}", clean.violations);
}

#[test]
fn a_shrinking_maintenance_batch_is_caught_by_maintenance_drains() {
    // spec: LEASE-2
    let plant = PlantedBug::MaintenanceBatchShrinks;
    assert_eq!(plant.scenario(), "0022_mass_expiry.toml");
    let report = run_seed_one(plant.scenario(), Some(plant), false);
    assert!(
        report.violations.iter().any(|v| {
            v.invariant == invariant::MAINTENANCE_DRAINS.0 && v.detail.contains("ceil(n / batch)")
        }),
        "the call bound did not catch it: {:#?}",
        report.violations
    );
    assert!(
        report.violations.iter().any(|v| {
            v.invariant == invariant::MAINTENANCE_DRAINS.0
                && v.detail
                    .contains("handled 32 expired replicas of a batch of 1000")
        }),
        "the short batch was not caught: {:#?}",
        report.violations
    );
    let clean = run_seed_one(plant.scenario(), None, false);
    assert!(clean.ok(), "{:#?}", clean.violations);
}

#[test]
fn clean_scenarios_pass_the_progress_checkers() {
    // spec: LOCK-4, LEASE-2
    for file in [
        "0001_steady_state.toml",
        "0004_replica_crash_mid_action.toml",
        "0007_publications_during_paged_reads.toml",
        "0011_partition_with_lease_churn.toml",
        "0013_registry_host_crash_restart.toml",
    ] {
        let report = run_seed_one(file, None, false);
        assert_eq!(count(&report, invariant::PUBLICATION_PROGRESS), 0, "{file}");
        assert_eq!(count(&report, invariant::MAINTENANCE_DRAINS), 0, "{file}");
        assert!(report.ok(), "{file}: {:#?}", report.violations);
    }
}

/// 0001's trace with its bound on publications set to 100 ms and a first
/// attempt of its first publication, lost on the way, sent at 100 ms: the
/// answer that commits it (at 254 ms) comes 154 ms after the first attempt.
fn late_publication(lines: &mut Vec<Value>) -> usize {
    let start = lines.iter().position(|v| v["ev"] == "start").unwrap();
    lines[start]["expect"]["publish_within_ms"] = json!(100);
    let first = lines
        .iter()
        .position(|v| v["ev"] == "rpc" && v["req"]["op"] == "publish")
        .expect("0001 publishes");
    assert!(lines[first]["t"].as_u64().unwrap() > 200);
    let at = lines
        .iter()
        .position(|v| v["t"].as_u64().unwrap() >= 100)
        .unwrap();
    let attempt = json!({
        "t": 100, "ev": "rpc", "id": 0, "from": "admin", "to": "registry-1",
        "req": lines[first]["req"].clone(),
    });
    lines.insert(at, attempt);
    at
}

#[test]
fn a_late_publication_in_a_trace_is_caught_by_publication_progress() {
    // spec: LOCK-4
    let mut lines = clean_trace("0001_steady_state.toml");
    late_publication(&mut lines);
    let verdict = recheck_lines(&lines);
    only(&verdict, invariant::PUBLICATION_PROGRESS);
    assert!(
        verdict.violations[0]
            .detail
            .contains("first sent at 100 ms"),
        "{:#?}",
        verdict.violations
    );
}

#[test]
fn a_publication_delayed_by_a_database_fault_or_a_partition_is_excused() {
    // spec: LOCK-4 (only the time a fault explains is excused)
    let mut lines = clean_trace("0001_steady_state.toml");
    let at = late_publication(&mut lines);
    lines.insert(
        at,
        json!({"t": 100, "ev": "fault", "fault": "db_terminate", "sessions": 3}),
    );
    lines.insert(
        at + 1,
        json!({"t": 100, "ev": "fault", "fault": "db_fault_end", "kind": "db_terminate"}),
    );
    let verdict = recheck_lines(&lines);
    assert_eq!(verdict.violations.len(), 0, "{:#?}", verdict.violations);

    let mut lines = clean_trace("0001_steady_state.toml");
    let at = late_publication(&mut lines);
    let repair = lines
        .iter()
        .position(|v| v["t"].as_u64().unwrap() >= 200)
        .unwrap();
    lines.insert(
        repair,
        json!({"t": 200, "ev": "fault", "fault": "repair", "a": ["admin"], "b": ["registry-*"], "oneway": false}),
    );
    lines.insert(
        at,
        json!({"t": 100, "ev": "fault", "fault": "partition", "a": ["admin"], "b": ["registry-*"], "oneway": false}),
    );
    let verdict = recheck_lines(&lines);
    assert_eq!(verdict.violations.len(), 0, "{:#?}", verdict.violations);
}

#[test]
fn a_slow_drain_in_a_trace_is_caught_by_maintenance_drains() {
    // spec: LEASE-2
    // 0004's maintenance expires r1 once; the edit has that answer and
    // every later one say `more = true`, a drain that never ends.
    let mut lines = clean_trace("0004_replica_crash_mid_action.toml");
    let maintained = |v: &Value| {
        v["ev"] == "reply" && v["resp"]["op"] == "maintain" && v["resp"]["result"]["Ok"].is_object()
    };
    let first = lines
        .iter()
        .position(|v| {
            maintained(v)
                && v["resp"]["result"]["Ok"]["expired"]
                    .as_array()
                    .is_some_and(|e| !e.is_empty())
        })
        .expect("0004 expires a replica");
    let mut edited = 0;
    for v in lines.iter_mut().skip(first) {
        if maintained(v) {
            v["resp"]["result"]["Ok"]["more"] = json!(true);
            edited += 1;
        }
    }
    assert!(edited > 4, "only {edited} maintenance answers to edit");
    let verdict = recheck_lines(&lines);
    only(&verdict, invariant::MAINTENANCE_DRAINS);
    assert!(
        verdict
            .violations
            .iter()
            .any(|v| v.detail.contains("ceil(n / batch)")),
        "{:#?}",
        verdict.violations
    );
}

#[test]
fn a_publication_answered_unavailable_with_no_fault_never_lands() {
    // spec: LOCK-4 (on PostgreSQL a publication starved of the catalog lock
    // is answered unavailable; the operator does not retry an answer)
    let mut lines = clean_trace("0001_steady_state.toml");
    let i = lines
        .iter()
        .position(|v| v["ev"] == "reply" && v["resp"]["op"] == "publish")
        .expect("0001 publishes");
    lines[i]["resp"]["result"] =
        json!({"Err": {"kind": "unavailable", "message": "the catalog stayed busy"}});
    let verdict = recheck_lines(&lines);
    assert!(
        verdict.violations.iter().any(|v| {
            v.invariant == invariant::PUBLICATION_PROGRESS.0 && v.detail.contains("never lands")
        }),
        "{:#?}",
        verdict.violations
    );
}

#[test]
fn a_publication_bound_outside_its_limits_is_refused_naming_the_key() {
    // spec: LOCK-4
    let bound = connreg_sim::limits::PUBLISH_WITHIN_MS;
    for within in [0, bound + 1] {
        let text = format!("{STANDARD_SCENARIO}\n[expect]\npublish_within_ms = {within}\n");
        let err = refusal(&text);
        assert!(err.contains("expect.publish_within_ms"), "{err}");
    }
    let ok = format!("{STANDARD_SCENARIO}\n[expect]\npublish_within_ms = {bound}\n");
    Scenario::parse("s.toml", &ok).unwrap_or_else(|e| panic!("{e}"));
}

// Every reservation ends (`reservations_end`, PIN-8).

#[test]
fn a_reservation_nobody_waits_for_is_released_by_the_hold_and_caught_without_it() {
    // spec: PIN-8, PIN-7
    let plant = PlantedBug::Store(connreg::plant::Plant::HoldNeverExpires);
    assert_eq!(plant.scenario(), "0034_resolve_after_caller_gave_up.toml");
    let lines = clean_trace(plant.scenario());
    let drains: Vec<&Value> = lines.iter().filter(|l| l["ev"] == "drain").collect();
    assert_eq!(drains.len(), 1, "the run drained once");
    let hold_releases = lines
        .iter()
        .filter(|l| l["ev"] == "reply" && l["resp"]["op"] == "maintain")
        .flat_map(|l| {
            l["resp"]["result"]["Ok"]["releases"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|r| r["reason"] == "hold_expired")
        .count();
    assert!(
        hold_releases >= 1,
        "the hold released what nobody waits for"
    );
    let end = lines.last().unwrap();
    assert!(
        end["counters"]["holds_expired"].as_u64().unwrap() >= 1,
        "{end}"
    );

    let report = run_seed_one(plant.scenario(), Some(plant), true);
    assert!(
        count(&report, invariant::RESERVATIONS_END) > 0,
        "{:#?}",
        report.violations
    );
    let text = String::from_utf8(report.trace.clone().expect("the trace was kept")).unwrap();
    let planted: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let verdict = recheck_lines(&planted);
    assert!(
        verdict
            .violations
            .iter()
            .any(|v| v.invariant == invariant::RESERVATIONS_END.0),
        "check-trace sees it too: {:#?}",
        verdict.violations
    );
}

// Every action ends (`liveness`, SIM-3).

#[test]
fn an_action_waiting_forever_for_a_lost_answer_is_caught_by_liveness() {
    // spec: SIM-3, SETTLE-4
    let plant = PlantedBug::SettleWaitsForever;
    assert_eq!(plant.scenario(), "0003_retry_after_lost_answer.toml");
    let report = run_seed_one(plant.scenario(), Some(plant), false);
    assert!(
        count(&report, invariant::LIVENESS) > 0,
        "{:#?}",
        report.violations
    );
    assert!(
        report.violations.iter().all(
            |v| v.invariant == invariant::LIVENESS.0 || v.invariant == invariant::EXPECTATION.0
        ),
        "only the actions that never end, and the counts they leave short: {:#?}",
        report.violations
    );
    let clean = run_seed_one(plant.scenario(), None, false);
    assert!(clean.ok(), "{:#?}", clean.violations);
}
