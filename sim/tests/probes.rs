//! Goal: a sweep can tell that the fault or code path it relies on never
//! fired. Reachability probes fire when their path is taken and not
//! otherwise; they are counted from the trace records alone; a probe a
//! scenario requires (`[expect] reach`) that no seed fired fails the
//! sweep with a clear message; unknown probe names are refused; the
//! probe output is deterministic.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use connreg_sim::probes::{self, of_records};
use connreg_sim::trace::Record;
use connreg_sim::{PlantedBug, RunOptions, Scenario, TraceTarget, run};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn load(file: &str) -> Scenario {
    Scenario::load(&root().join("scenarios").join(file)).unwrap_or_else(|e| panic!("{e}"))
}

fn probes_of(s: &Scenario, seed: u64, plant: Option<PlantedBug>) -> BTreeMap<String, u64> {
    let opts = RunOptions {
        seed,
        plant,
        ..RunOptions::default()
    };
    run(s, &opts).unwrap_or_else(|e| panic!("{e}")).probes
}

fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_connreg-sim"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("the connreg-sim binary runs")
}

fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("connreg-sim-probes-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A copy of the steady-state scenario (no faults) requiring `reach`.
fn steady_requiring(dir: &Path, reach: &[&str]) -> PathBuf {
    let text = std::fs::read_to_string(root().join("scenarios/0001_steady_state.toml")).unwrap();
    let list: Vec<String> = reach.iter().map(|n| format!("{n:?}")).collect();
    let text = format!("{text}\n[expect]\nreach = [{}]\n", list.join(", "));
    let path = dir.join("0001_steady_state.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_fault_free_scenario_fires_no_fault_probe_and_a_faulted_one_fires_its_fault() {
    // spec: SIM-2
    let steady = load("0001_steady_state.toml");
    for seed in 1..=3 {
        let fired = probes_of(&steady, seed, None);
        let faults: Vec<&String> = fired.keys().filter(|n| n.starts_with("fault:")).collect();
        assert!(faults.is_empty(), "seed {seed}: {faults:?}");
        assert!(fired.contains_key("answer:resolve:created"), "{fired:?}");
    }
    let lost = load("0003_retry_after_lost_answer.toml");
    let fired = probes_of(&lost, 1, None);
    for name in ["fault:lose_answers", "fault:answer_lost"] {
        assert!(fired.contains_key(name), "{name}: {fired:?}");
    }
    assert!(!fired.contains_key("fault:crash"), "{fired:?}");
}

#[test]
fn a_plant_probe_fires_where_its_situation_arises_whether_or_not_the_plant_is_on() {
    // spec: SIM-2, SIM-3
    let name = probes::plant_probe(PlantedBug::NoReconciliation);
    let crashes = load("0021_dispatcher_crash_reconciliation.toml");
    assert!(probes_of(&crashes, 1, None).contains_key(&name));
    assert!(probes_of(&crashes, 1, Some(PlantedBug::NoReconciliation)).contains_key(&name));
    // No dispatcher crashes in the steady state: the path is not taken.
    let steady = load("0001_steady_state.toml");
    assert!(!probes_of(&steady, 1, None).contains_key(&name));
    assert!(!probes_of(&steady, 1, Some(PlantedBug::NoReconciliation)).contains_key(&name));
}

#[test]
fn probes_are_counted_from_the_trace_records_alone() {
    // spec: SIM-3 (check-trace can count them from a trace file)
    let s = load("0005_draining_pinned_retries.toml");
    let opts = RunOptions {
        seed: 2,
        trace: TraceTarget::Memory,
        ..RunOptions::default()
    };
    let report = run(&s, &opts).unwrap();
    let bytes = report.trace.clone().expect("trace kept in memory");
    let records: Vec<Record> = String::from_utf8(bytes)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(of_records(&records), report.probes);
    assert!(!report.probes.is_empty());
}

#[test]
fn every_probe_that_fires_is_in_the_catalogue() {
    // spec: SIM-2
    let catalog = probes::catalog();
    for file in [
        "0002_duplicate_resolve_storm.toml",
        "0004_replica_crash_mid_action.toml",
        "0007_publications_during_paged_reads.toml",
        "0011_partition_with_lease_churn.toml",
    ] {
        for name in probes_of(&load(file), 1, None).keys() {
            assert!(
                catalog.contains(name),
                "{file}: {name} not in the catalogue"
            );
        }
    }
}

#[test]
fn a_required_probe_that_never_fires_fails_the_sweep_with_a_clear_message() {
    // spec: SIM-2, SIM-5
    let dir = scratch("unreached");
    // Before: the copy requires only what it reaches, and passes.
    let reached = steady_requiring(&dir, &["answer:resolve:created"]);
    let out = sim(&[
        "sweep",
        "--scenario",
        reached.to_str().unwrap(),
        "--seeds",
        "1..3",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("reach: 1 required, 1 fired"), "{text}");
    // After: it requires a crash it never has, and the sweep fails.
    let unreached = steady_requiring(&dir, &["answer:resolve:created", "fault:crash"]);
    let (junit, json) = (dir.join("r.xml"), dir.join("r.json"));
    let out = sim(&[
        "sweep",
        "--scenario",
        unreached.to_str().unwrap(),
        "--seeds",
        "1..3",
        "--junit",
        junit.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "FAILED: required probe(s) never fired over 2 seed(s): fault:crash ([expect] reach)"
        ),
        "{text}"
    );
    assert!(text.contains("2 passed, 0 failed"), "{text}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let cases: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    let names: Vec<&str> = cases.iter().map(|n| n.attribute("name").unwrap()).collect();
    assert_eq!(
        names,
        [
            "seed 1",
            "seed 2",
            "reach answer:resolve:created",
            "reach fault:crash"
        ]
    );
    let failing: Vec<&str> = cases
        .iter()
        .filter(|n| n.children().any(|c| c.has_tag_name("failure")))
        .map(|n| n.attribute("name").unwrap())
        .collect();
    assert_eq!(failing, ["reach fault:crash"]);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(
        summary["reach"]["missing"],
        serde_json::json!(["fault:crash"])
    );
    assert_eq!(summary["reach"]["fired"]["answer:resolve:created"], 2);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn an_unknown_probe_name_is_refused_with_its_line_and_the_valid_names() {
    // spec: SIM-2
    let text = std::fs::read_to_string(root().join("scenarios/0001_steady_state.toml")).unwrap();
    let text = format!("{text}\n[expect]\nreach = [\n  \"fault:crash\",\n  \"fault:meteor\",\n]\n");
    let line = text.lines().count() - 1;
    let err = Scenario::parse("copy.toml", &text).unwrap_err().to_string();
    assert!(err.contains("copy.toml"), "{err}");
    assert!(err.contains(&line.to_string()), "line {line}: {err}");
    assert!(err.contains("unknown probe \"fault:meteor\""), "{err}");
    assert!(
        err.contains("answer:resolve:created") && err.contains("plant:double-release"),
        "{err}"
    );
    let twice = format!(
        "{}\n[expect]\nreach = [\"fault:crash\", \"fault:crash\"]\n",
        std::fs::read_to_string(root().join("scenarios/0001_steady_state.toml")).unwrap()
    );
    let err = Scenario::parse("twice.toml", &twice)
        .unwrap_err()
        .to_string();
    assert!(err.contains("twice"), "{err}");
}

#[test]
fn probe_output_is_deterministic() {
    // spec: SIM-1
    let s = load("0011_partition_with_lease_churn.toml");
    assert_eq!(probes_of(&s, 4, None), probes_of(&s, 4, None));
    let args = [
        "sweep",
        "--scenario",
        "scenarios/0004_replica_crash_mid_action.toml",
        "--seeds",
        "1..4",
    ];
    let strip = |o: Output| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| !l.trim_start().starts_with("took "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let (a, b) = (strip(sim(&args)), strip(sim(&args)));
    assert!(a.contains("probes: "), "{a}");
    assert_eq!(a, b);
}
