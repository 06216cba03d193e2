//! What the oracle's tests share: clean traces, the oracle on lines,
//! and edits that make a trace look like a concurrent backend's.

#![allow(dead_code)] // each test file uses some of these

use std::io::BufRead;

use connreg_sim::fleet::FleetPlan;
use connreg_sim::oracle::{OracleReport, check_lines};
use connreg_sim::{RunOptions, Scenario, TraceTarget, run};
pub(crate) fn scenario(file: &str) -> Scenario {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios")
        .join(file);
    Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// A clean in-memory trace of `file` at `seed`, as lines.
pub(crate) fn trace(file: &str, seed: u64) -> Vec<String> {
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

pub(crate) fn oracle(file: &str, lines: &[String]) -> Result<OracleReport, String> {
    let config = FleetPlan::of(&scenario(file)).unwrap().config;
    check_lines(lines.iter().cloned().map(Ok), config)
}

/// The 1-based line of the first reply whose JSON satisfies `pick`.
pub(crate) fn first_reply(lines: &[String], pick: impl Fn(&serde_json::Value) -> bool) -> usize {
    lines
        .iter()
        .position(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["ev"] == "reply" && pick(&v)
        })
        .expect("no such reply")
        + 1
}

/// Asserts that the oracle names the answer on line `at` (1-based) of
/// `lines` as the first divergence; `what` says which edit it was.
pub(crate) fn diverges_at(file: &str, lines: &[String], at: usize, what: &str) {
    let d = oracle(file, lines)
        .unwrap()
        .divergence
        .unwrap_or_else(|| panic!("{what}: agreed"));
    assert_eq!(d.line, at as u64, "{what}: {:?}", d.lines());
}

/// A recorded trace kept in `tests/traces/`, by line.
pub(crate) fn recorded(name: &str) -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/traces")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    text.lines().map(str::to_string).collect()
}

/// The oracle's report on `lines`, which it must agree with.
pub(crate) fn agrees(file: &str, lines: &[String]) -> OracleReport {
    let report = oracle(file, lines).unwrap();
    assert!(report.ok(), "{:?}", report.divergence.map(|d| d.lines()));
    report
}

pub(crate) fn parse(line: &str) -> serde_json::Value {
    serde_json::from_str(line).unwrap()
}

/// `lines` with the record on line `at` (1-based) changed by `edit`.
pub(crate) fn edited_at(
    lines: &[String],
    at: usize,
    edit: impl FnOnce(&mut serde_json::Value),
) -> Vec<String> {
    let mut out = lines.to_vec();
    let mut v = parse(&out[at - 1]);
    edit(&mut v);
    out[at - 1] = v.to_string();
    out
}

/// The reply on `line` as its caller sees it when the connection is lost
/// before the answer arrives: `unavailable`, with no commit position. The
/// position it carried is returned beside it.
pub(crate) fn answered_unavailable(line: &str) -> (serde_json::Value, Option<serde_json::Value>) {
    let mut reply = parse(line);
    reply["resp"]["result"] = serde_json::json!({"Err": {"kind": "unavailable", "message": "connection to the store lost"}});
    let commit = reply.as_object_mut().unwrap().remove("commit");
    (reply, commit)
}

/// `lines` as a concurrent backend would write them: not deterministic,
/// and every reply with its commit position (its place in the trace).
pub(crate) fn as_concurrent(lines: &[String]) -> Vec<String> {
    let mut commit = 0u64;
    lines
        .iter()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            if v["ev"] == "start" {
                v["deterministic"] = false.into();
            } else if v["ev"] == "reply" {
                commit += 1;
                v["commit"] = commit.into();
            }
            v.to_string()
        })
        .collect()
}

/// `lines` with the answer of line `at` (1-based) replaced by `answer`
/// and moved, with its request, beside the answer at index `beside`, at
/// that answer's time: one step.
pub(crate) fn moved_beside(
    lines: &[String],
    at: usize,
    mut answer: serde_json::Value,
    beside: usize,
) -> Vec<String> {
    let parse = |i: usize| -> serde_json::Value { serde_json::from_str(&lines[i]).unwrap() };
    let t = parse(beside)["t"].clone();
    let id = answer["id"].clone();
    let request = (0..at - 1)
        .find(|&i| {
            let v = parse(i);
            v["ev"] == "rpc" && v["id"] == id
        })
        .expect("the answer's request");
    answer["t"] = t.clone();
    let mut out = lines.to_vec();
    out.remove(at - 1);
    if request > beside {
        let mut moved = parse(request);
        moved["t"] = t;
        out.remove(request);
        out.insert(beside + 1, answer.to_string());
        out.insert(beside + 1, moved.to_string());
    } else {
        out.insert(beside + 1, answer.to_string());
    }
    out
}
