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
