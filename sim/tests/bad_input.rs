//! Goal: bad input is refused with exit status 2 and a message that points
//! at what is wrong: the line of the offending key in a scenario file, the
//! format of a trace, an empty trace.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use connreg_sim::scenario::STANDARD_SCENARIO;

fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_connreg-sim"))
        .args(args)
        .current_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."))
        .output()
        .expect("the connreg-sim binary runs")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("connreg-sim-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `text` as a scenario file, runs it, and returns the exit status
/// and stderr.
fn run_scenario(dir: &Path, text: &str) -> (Option<i32>, String) {
    let path = dir.join("bad.toml");
    std::fs::write(&path, text).unwrap();
    let out = sim(&["run", "--scenario", path.to_str().unwrap()]);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn line_of(text: &str, line: &str) -> usize {
    text.lines()
        .position(|l| l == line)
        .unwrap_or_else(|| panic!("{line:?} is not in the scenario"))
        + 1
}

#[test]
fn a_range_error_names_the_line_of_its_key() {
    let dir = scratch("range");
    for (key, bad) in [
        ("duration_ms = 700", "duration_ms = 0"),
        ("tick_ms = 2", "tick_ms = 500"),
        ("hosts = 2", "hosts = 99"),
        ("maintenance_batch = 8", "maintenance_batch = 0"),
    ] {
        let text = STANDARD_SCENARIO.replacen(key, bad, 1);
        let (code, err) = run_scenario(&dir, &text);
        assert_eq!(code, Some(2), "{bad}: {err}");
        let line = line_of(&text, bad);
        assert!(err.contains(&format!("bad.toml:{line}:")), "{bad}: {err}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_range_error_in_an_entry_names_the_line_of_its_key() {
    let dir = scratch("entry-range");
    let text = STANDARD_SCENARIO.replacen("capacity = ", "capacity = 100000 # ", 1);
    let bad = text
        .lines()
        .find(|l| l.starts_with("capacity = 100000"))
        .unwrap()
        .to_string();
    let (code, err) = run_scenario(&dir, &text);
    assert_eq!(code, Some(2), "{err}");
    let line = line_of(&text, &bad);
    assert!(err.contains(&format!("bad.toml:{line}:")), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_scope_limit_of_zero_is_refused_as_bad_input() {
    let dir = scratch("scope-zero");
    let text = STANDARD_SCENARIO.replacen("limit = 8", "limit = 0", 1);
    let (code, err) = run_scenario(&dir, &text);
    assert_eq!(code, Some(2), "{err}");
    let line = line_of(&text, "limit = 0");
    assert!(err.contains(&format!("bad.toml:{line}:")), "{err}");
    assert!(err.contains("limit"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn check_trace_refuses_an_unknown_format_as_bad_input() {
    let dir = scratch("format");
    let path = dir.join("future.trace.jsonl");
    for start in [
        r#"{"t":0,"ev":"start","format":99}"#,
        r#"{"t":0,"ev":"start","format":"3"}"#,
        r#"{"t":0,"ev":"start"}"#,
    ] {
        std::fs::write(
            &path,
            format!("{start}\n{{\"t\":0,\"ev\":\"heal\",\"deadline_ms\":5}}\n"),
        )
        .unwrap();
        let out = sim(&["check-trace", path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{start}: {err}");
        assert!(err.contains("format"), "{start}: {err}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn check_trace_refuses_an_empty_file_as_bad_input() {
    let dir = scratch("empty");
    let path = dir.join("empty.trace.jsonl");
    for text in ["", "\n\n"] {
        std::fs::write(&path, text).unwrap();
        let out = sim(&["check-trace", path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text:?}: {err}");
        assert!(err.contains("empty"), "{text:?}: {err}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// The standard scenario at a 50 ms tick, long enough for its workload at
/// that tick, with `lines` added at the top of `[workload]`.
fn at_fifty_ms_tick(lines: &[&str]) -> String {
    let text = STANDARD_SCENARIO
        .replacen("tick_ms = 2", "tick_ms = 50", 1)
        .replacen("duration_ms = 700", "duration_ms = 3000", 1)
        .replacen("liveness_ms = 1000", "liveness_ms = 20000", 1);
    text.replacen(
        "[workload]\n",
        &format!("[workload]\n{}\n", lines.join("\n")),
        1,
    )
}

#[test]
fn a_timeout_below_the_shortest_round_trip_is_refused_naming_its_line_and_the_bound() {
    // spec: SIM-2 (a scenario none of whose calls can be answered in time
    // drives nothing: it is bad input)
    // At a 50 ms tick and links of 1 to 4 ms a call is answered 150 ms
    // after it is sent at the earliest (sim/src/feasible.rs).
    let dir = scratch("hopeless-timeout");
    for (bad, also) in [
        ("rpc_timeout_ms = 101", "dispatch_timeout_ms = 150"),
        ("rpc_timeout_ms = 149", "dispatch_timeout_ms = 150"),
        ("dispatch_timeout_ms = 149", "rpc_timeout_ms = 150"),
    ] {
        let text = at_fifty_ms_tick(&[also, bad]);
        let (code, err) = run_scenario(&dir, &text);
        assert_eq!(code, Some(2), "{bad}: {err}");
        let line = line_of(&text, bad);
        assert!(err.contains(&format!("bad.toml:{line}:")), "{bad}: {err}");
        let key = bad.split(" = ").next().unwrap();
        assert!(err.contains(&format!("workload.{key}")), "{bad}: {err}");
        assert!(err.contains("150 ms"), "{bad}: the bound is named: {err}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_smallest_accepted_timeouts_lose_no_call_of_a_fault_free_run() {
    // spec: SIM-2 (the bound is the shortest round trip, not a guess: at
    // it, every call of a fault-free run is answered in time)
    let dir = scratch("smallest-timeout");
    let text = at_fifty_ms_tick(&["rpc_timeout_ms = 150", "dispatch_timeout_ms = 150"]);
    // The standard scenario's expectations hold: every action completes
    // and `rpc_failures` is at most 0.
    let (code, err) = run_scenario(&dir, &text);
    assert_eq!(code, Some(0), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
