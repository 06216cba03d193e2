//! Goal: measurement an operator can trust (issue 10, items 4 and 5): the
//! warm-up is excluded and stated, a contract by duration that ends early
//! says why and fails, trials give min/median/max and each threshold holds
//! in every trial, and Ctrl-C ends a run with a report marked incomplete.
//! In-memory backend; no assertion depends on timing beyond "ended".

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{contract_file, qualify, scratch, smoke_text, threshold};

/// The smoke contract by duration instead of operation count.
fn by_duration(duration_ms: u64, extra_load: &str) -> String {
    smoke_text().replacen(
        "operations = 2000",
        &format!("duration_ms = {duration_ms}\n{extra_load}"),
        1,
    )
}

#[test]
fn a_duration_contract_ended_early_by_its_action_budget_fails_and_says_why() {
    // spec: SIM-6
    let env = contract_file(
        "early",
        &by_duration(30_000, "actions_max = 200\nwarmup_ms = 0"),
    );
    let run = qualify(&env, &[]);
    assert_eq!(run.code, 1, "{}", run.said());
    let report = run.report.as_ref().expect("a report");
    assert_eq!(report["measured"]["stopped_by"], "action_budget");
    let duration = threshold(report, "duration_ms_min");
    assert_eq!(duration["verdict"], "fail", "{duration}");
    assert_eq!(duration["limit"], 30_000.0);
    assert!(duration["measured"].as_f64().unwrap() < 30_000.0);
    assert!(run.stdout.contains("duration_ms_min"), "{}", run.said());
    assert!(
        run.stdout.contains("the new-action budget"),
        "{}",
        run.said()
    );
}

#[test]
fn the_warm_up_is_stated_and_not_counted() {
    // spec: SIM-6
    let env = contract_file("warm", &by_duration(300, "warmup_ms = 300"));
    let run = qualify(&env, &[]);
    assert_eq!(run.code, 0, "{}", run.said());
    let report = run.report.as_ref().expect("a report");
    assert_eq!(report["load"]["warmup_ms"], 300);
    let trial = &report["trials"][0];
    assert_eq!(trial["warmup_ms"], 300);
    assert!(trial["warmup_operations"].as_u64().unwrap() > 0, "{trial}");
    assert_eq!(
        trial["measured"]["operations"], report["measured"]["operations"],
        "one trial: pooled figures are the trial's"
    );
    let elapsed = report["measured"]["elapsed_ms"].as_f64().unwrap();
    assert!((300.0..5_000.0).contains(&elapsed), "measured {elapsed} ms");
    assert_eq!(threshold(report, "duration_ms_min")["verdict"], "pass");
}

#[test]
fn trials_give_a_spread_and_each_threshold_holds_in_every_trial() {
    // spec: SIM-6
    let text = smoke_text().replacen("operations = 2000", "operations = 400\ntrials = 3", 1);
    let env = contract_file("trials", &text);
    let run = qualify(&env, &[]);
    assert_eq!(run.code, 0, "{}", run.said());
    let report = run.report.as_ref().expect("a report");
    assert_eq!(report["trials"].as_array().unwrap().len(), 3);
    assert_eq!(report["measured"]["operations"], 1200, "pooled over trials");
    let s = &report["spread"]["resolves_per_s"];
    let (min, median, max) = (
        s["min"].as_f64().unwrap(),
        s["median"].as_f64().unwrap(),
        s["max"].as_f64().unwrap(),
    );
    assert!(min <= median && median <= max, "{s}");
    let floor = threshold(report, "resolves_per_s_min");
    assert_eq!(floor["per_trial"].as_array().unwrap().len(), 3);
    assert_eq!(floor["measured"].as_f64().unwrap(), min, "the worst trial");
    assert_eq!(report["invariants"]["violations"], 0, "{}", run.said());
}

#[test]
fn ctrl_c_ends_the_run_with_a_report_marked_incomplete() {
    // spec: SIM-6
    let env = contract_file("interrupt", &by_duration(600_000, "warmup_ms = 0"));
    let report_path = scratch("interrupt", "json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_connreg-qualify"))
        .arg("--env")
        .arg(&env)
        .arg("--report")
        .arg(&report_path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("connreg-qualify starts");
    std::thread::sleep(Duration::from_millis(1_500));
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "still running after Ctrl-C");
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().expect("output");
    let said = format!(
        "{status}\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(status.code(), Some(1), "{said}");
    let text = std::fs::read_to_string(&report_path).expect("a report");
    let report: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(report["run"]["complete"], false, "{said}");
    assert_eq!(report["measured"]["stopped_by"], "interrupted");
    assert_eq!(report["verdict"], "fail");
    assert!(report["measured"]["operations"].as_u64().unwrap() > 0);
    assert_eq!(report["invariants"]["violations"], 0, "{said}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("INCOMPLETE"),
        "{said}"
    );
}
