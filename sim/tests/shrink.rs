//! Goal: shrink turns a red seed into a smaller scenario file that parses
//! with the normal parser, still breaks the same invariant when run, says
//! where it came from, and is the same file every time.

use std::path::PathBuf;
use std::process::{Command, Output};

use connreg_sim::shrink::{ShrinkOptions, Size, shrink};
use connreg_sim::{PlantedBug, RunOptions, Scenario, run};

fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_connreg-sim"))
        .args(args)
        .current_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."))
        .output()
        .expect("the connreg-sim binary runs")
}

fn workspace(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path)
}

#[test]
fn a_shrunk_plant_scenario_parses_fails_the_same_way_and_is_smaller() {
    let plant = PlantedBug::parse("double-release").unwrap();
    let scenario = Scenario::load(&workspace(&format!("scenarios/{}", plant.scenario()))).unwrap();
    let shrunk = shrink(
        &scenario,
        &ShrinkOptions {
            seed: 1,
            plant: Some(plant),
            swarm: false,
            budget_runs: 400,
        },
        |_| {},
    )
    .unwrap();
    assert_eq!(shrunk.invariant, plant.invariant());
    let parsed = Scenario::parse("shrunk.toml", &shrunk.text).unwrap();
    let report = run(
        &parsed,
        &RunOptions {
            seed: shrunk.seed,
            plant: Some(plant),
            ..RunOptions::default()
        },
    )
    .unwrap();
    assert!(
        report
            .violations
            .iter()
            .any(|v| v.invariant == plant.invariant()),
        "{:?}",
        report.violations
    );
    let (before, after) = (Size::of(&scenario), Size::of(&parsed));
    assert_eq!(after, shrunk.after);
    assert!(after.hosts <= before.hosts && after.actions <= before.actions);
    assert!(after.faults <= before.faults && after.duration_ms <= before.duration_ms);
    assert!(after.records <= before.records && after.operations <= before.operations);
    assert!(after != before, "nothing shrank: {after}");
    assert!(after.actions < before.actions, "{before} -> {after}");
}

#[test]
fn shrink_writes_the_same_file_every_time_with_its_provenance() {
    let dir = std::env::temp_dir().join(format!("connreg-sim-shrink-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut files = Vec::new();
    for n in 0..2 {
        let out = dir.join(format!("min{n}.toml"));
        let o = sim(&[
            "shrink",
            "--scenario",
            "scenarios/0003_retry_after_lost_answer.toml",
            "--seed",
            "1",
            "--plant",
            "double-release",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let text = std::fs::read_to_string(&out).unwrap();
        files.push(text.replace(&format!("min{n}.toml"), "min.toml"));
        // The file runs as it says and fails.
        let seed = text
            .lines()
            .find_map(|l| l.split("--seed ").nth(1))
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap()
            .to_string();
        let again = sim(&[
            "run",
            "--scenario",
            out.to_str().unwrap(),
            "--seed",
            &seed,
            "--plant",
            "double-release",
        ]);
        assert_eq!(again.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&again.stdout).contains("idempotent_settlement"));
    }
    assert_eq!(files[0], files[1]);
    let header: Vec<&str> = files[0]
        .lines()
        .take_while(|l| l.starts_with('#'))
        .collect();
    let header = header.join("\n");
    assert!(
        header.contains("scenarios/0003_retry_after_lost_answer.toml"),
        "{header}"
    );
    assert!(header.contains("sha256 "), "{header}");
    assert!(header.contains("seed 1, plant double-release"), "{header}");
    assert!(
        header.contains("Breaks `idempotent_settlement` at seed"),
        "{header}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_seed_that_passes_has_nothing_to_shrink() {
    let out =
        std::env::temp_dir().join(format!("connreg-sim-noshrink-{}.toml", std::process::id()));
    let o = sim(&[
        "shrink",
        "--scenario",
        "scenarios/0001_steady_state.toml",
        "--seed",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("nothing to shrink"));
    assert!(!out.exists());
    let budget = sim(&[
        "shrink",
        "--scenario",
        "scenarios/0001_steady_state.toml",
        "--seed",
        "1",
        "--budget",
        "0",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(budget.status.code(), Some(2));
}

/// Shrinks `plant` at seed 1 of its home scenario.
fn shrink_plant(plant: PlantedBug) -> (Scenario, connreg_sim::shrink::Shrunk) {
    let path = workspace(&format!("scenarios/{}", plant.scenario()));
    let scenario = Scenario::load(&path).unwrap();
    let shrunk = shrink(
        &scenario,
        &ShrinkOptions {
            seed: 1,
            plant: Some(plant),
            swarm: false,
            budget_runs: 400,
        },
        |_| {},
    )
    .unwrap_or_else(|e| panic!("{}: {e}", plant.name()));
    (scenario, shrunk)
}

#[test]
fn plants_shrink_to_a_few_actions_and_a_shorter_file() {
    // spec: SIM-5
    // The bound: at most 10% of the actions, or at most 3. Three plants of
    // three scenarios here (a debug build shrinks some thirty times slower
    // than a release one); every plant's figures, from
    // `connreg-sim shrink` in a release build, are in scenarios/README.md.
    for name in [
        "no-action-serialization",
        "spurious-unavailable",
        "maintain-overcount",
    ] {
        let plant = PlantedBug::parse(name).unwrap();
        let home = plant.scenario();
        let (scenario, shrunk) = shrink_plant(plant);
        let (before, after) = (Size::of(&scenario), shrunk.after);
        assert!(
            after.actions <= 3 || after.actions * 10 <= before.actions,
            "{}: {before} -> {after}",
            plant.name()
        );
        let original = std::fs::read_to_string(workspace(&format!("scenarios/{home}"))).unwrap();
        assert!(
            shrunk.text.lines().count() < original.lines().count(),
            "{}: the shrunk file has {} lines, the original {}",
            plant.name(),
            shrunk.text.lines().count(),
            original.lines().count()
        );
    }
}

#[test]
fn an_action_kept_alone_keeps_its_plan() {
    // spec: SIM-1
    // `workload.only_actions` draws every action and runs the listed ones:
    // the kept action makes the same request as in the full run (its start
    // may come earlier: no other action holds a concurrency slot).
    let path = workspace("scenarios/0001_steady_state.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let full = Scenario::parse("full.toml", &text).unwrap();
    let only = text.replacen(
        "[workload]\n",
        "[workload]\nonly_actions = [\"dispatcher-1:3\"]\n",
        1,
    );
    let only = Scenario::parse("only.toml", &only).unwrap();
    let opts = RunOptions {
        seed: 3,
        trace: connreg_sim::run::TraceTarget::Memory,
        ..RunOptions::default()
    };
    let starts = |s: &Scenario| -> Vec<String> {
        let trace = run(s, &opts).unwrap().trace.unwrap();
        String::from_utf8(trace)
            .unwrap()
            .lines()
            .filter(|l| l.contains("\"action_start\""))
            .map(|l| {
                l.split_once(",\"ev\"")
                    .map_or(l, |(_, rest)| rest)
                    .to_string()
            })
            .collect()
    };
    let (all, kept) = (starts(&full), starts(&only));
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(all.contains(&kept[0]), "{} not in {all:#?}", kept[0]);
    assert!(
        kept[0].contains("\"dispatcher\":\"dispatcher-1\""),
        "{}",
        kept[0]
    );
}

#[test]
fn only_actions_entries_are_checked() {
    // spec: SIM-2
    let text = std::fs::read_to_string(workspace("scenarios/0001_steady_state.toml")).unwrap();
    for (entry, says) in [
        ("d1:1", "is not of the form"),
        ("dispatcher-99:1", "names a dispatcher past"),
        ("dispatcher-0:0", "each dispatcher starts actions 1 to"),
        ("dispatcher-0:9999", "each dispatcher starts actions 1 to"),
    ] {
        let bad = text.replacen(
            "[workload]\n",
            &format!("[workload]\nonly_actions = [\"{entry}\"]\n"),
            1,
        );
        let e = Scenario::parse("bad.toml", &bad).unwrap_err().to_string();
        assert!(e.contains(says), "{entry}: {e}");
        assert!(e.contains("only_actions"), "{entry}: {e}");
    }
    let twice = text.replacen(
        "[workload]\n",
        "[workload]\nonly_actions = [\"dispatcher-0:1\", \"dispatcher-0:1\"]\n",
        1,
    );
    let e = Scenario::parse("twice.toml", &twice)
        .unwrap_err()
        .to_string();
    assert!(e.contains("listed twice"), "{e}");
}
