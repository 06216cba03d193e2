//! Goal: every planted bug of the catalogue (`connreg-sim plants`) is
//! caught at seed 1 of the scenario the catalogue names, by the invariant it
//! names, and the same seed passes without the plant. A checker that
//! catches nothing is a defect.

use connreg_sim::plant::OFFLINE_TRACKED;
use connreg_sim::{PlantedBug, RunOptions, Scenario, TraceTarget, run};

fn scenario(file: &str) -> Scenario {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios")
        .join(file);
    Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// Every plant of one half of the catalogue (`half` 0: the even places, 1:
/// the odd ones): the two halves run as two tests, on two threads.
fn plants_of_half_are_caught_at_seed_one_and_the_seed_passes_unplanted(half: usize) {
    let all = PlantedBug::all();
    assert!(all.len() >= 2, "the catalogue has plants on both halves");
    for plant in all.into_iter().skip(half).step_by(2) {
        let (file, invariant) = (plant.scenario(), plant.invariant());
        let s = scenario(file);
        let opts = RunOptions {
            seed: 1,
            plant: Some(plant),
            ..RunOptions::default()
        };
        let report = run(&s, &opts).unwrap_or_else(|e| panic!("{e}"));
        assert!(!report.ok(), "{} was not caught by {file}", plant.name());
        assert!(
            report.violations.iter().any(|v| v.invariant == invariant),
            "{} broke other invariants than {invariant}: {:#?}",
            plant.name(),
            report.violations
        );
        let unplanted = run(
            &s,
            &RunOptions {
                seed: 1,
                ..RunOptions::default()
            },
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            unplanted.ok(),
            "{file} seed 1 fails without a plant: {:#?}",
            unplanted.violations
        );
    }
}

#[test]
fn every_plant_at_an_even_place_is_caught_at_seed_one_of_its_scenario_and_the_seed_passes_unplanted()
 {
    // spec: SIM-3
    plants_of_half_are_caught_at_seed_one_and_the_seed_passes_unplanted(0);
}

#[test]
fn every_plant_at_an_odd_place_is_caught_at_seed_one_of_its_scenario_and_the_seed_passes_unplanted()
{
    // spec: SIM-3
    plants_of_half_are_caught_at_seed_one_and_the_seed_passes_unplanted(1);
}

#[test]
fn a_crashed_group_coming_back_catches_registration_that_closes_circuits() {
    // spec: SETTLE-6, LEASE-1
    // The replicas a group crash takes down come back with the circuits
    // their unknown outcomes opened; registering again must leave them
    // open. Past the first returns of the crowd, the plant closes them.
    let plant = PlantedBug::CircuitResetInCrowd;
    let s = scenario(plant.scenario());
    let report = run(
        &s,
        &RunOptions {
            seed: 1,
            plant: Some(plant),
            trace: TraceTarget::Memory,
            ..RunOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let trace = String::from_utf8(report.trace.clone().expect("the trace was kept")).unwrap();
    let mut crashed: Vec<String> = Vec::new();
    for line in trace.lines() {
        assert!(
            !line.contains(r#""op":"circuit_close""#),
            "an operator closed a circuit: {line}"
        );
        if line.contains(r#""fault":"group_crash""#) {
            let event: serde_json::Value = serde_json::from_str(line).unwrap();
            crashed.extend(
                event["replicas"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| r.as_str().unwrap().to_string()),
            );
        }
    }
    assert!(crashed.len() > OFFLINE_TRACKED, "{} crashed", crashed.len());
    assert!(report.violation_count > 0, "the plant was not caught");
    // Only a return while more than OFFLINE_TRACKED replicas are offline
    // closes a circuit.
    assert!(
        report.violation_count <= (crashed.len() - OFFLINE_TRACKED) as u64,
        "{} violations for {} crashed replicas",
        report.violation_count,
        crashed.len()
    );
    for v in &report.violations {
        assert_eq!(v.invariant, plant.invariant(), "{v:#?}");
        assert!(
            crashed
                .iter()
                .any(|r| v.detail.starts_with(&format!("replica {r}'s circuit"))),
            "not a crashed replica: {v:#?}"
        );
    }
}

#[test]
fn reconciliation_takes_no_outcome_of_another_fence() {
    // spec: PIN-7, PIN-3, SETTLE-1
    // Dispatcher 2 crashes while an action cancelled in round 0 runs its
    // second round on a fresh fence. Settling that fence with round 0's
    // `cancelled`, with no cancel sent, lies about work that ran: the
    // journal's evidence belongs to round 0's fence only.
    let plant = PlantedBug::ReconcileOtherFenceOutcome;
    let s = scenario(plant.scenario());
    let traced = |plant: Option<PlantedBug>| {
        let mut report = run(
            &s,
            &RunOptions {
                seed: 1,
                plant,
                trace: TraceTarget::Memory,
                ..RunOptions::default()
            },
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let trace = String::from_utf8(report.trace.take().expect("the trace was kept")).unwrap();
        (report, trace)
    };
    let (planted, _) = traced(Some(plant));
    assert!(!planted.ok(), "the plant was not caught");
    for v in &planted.violations {
        assert_eq!(v.invariant, plant.invariant(), "{v:#?}");
        assert!(v.detail.contains("dispatcher-2."), "{v:#?}");
    }
    let (clean, trace) = traced(None);
    assert!(clean.ok(), "{:#?}", clean.violations);
    let reconciled: Vec<serde_json::Value> = trace
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["ev"] == "reconciled")
        .collect();
    assert!(!reconciled.is_empty(), "dispatcher 2 reconciled nothing");
}

#[test]
fn the_command_line_plants_nothing_unless_asked_for() {
    // spec: SIM-3 (a plant the CLI turned on by default would make every
    // verdict a lie: the seed that double-release fails passes without
    // `--plant`, and each trace records which plant ran)
    let dir = std::env::temp_dir().join(format!("connreg-sim-plants-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run_cli = |extra: &[&str]| {
        let path = dir.join("run.trace.jsonl");
        let mut args = vec![
            "run",
            "--scenario",
            "scenarios/0003_retry_after_lost_answer.toml",
            "--seed",
            "4",
            "--trace",
            path.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_connreg-sim"))
            .args(&args)
            .current_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
            .output()
            .expect("the connreg-sim binary runs");
        let text = std::fs::read_to_string(&path).unwrap();
        let start: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        (out.status.code(), start["plant"].clone())
    };
    let (code, plant) = run_cli(&[]);
    assert_eq!(code, Some(0), "the seed fails with no plant asked for");
    assert_eq!(plant, serde_json::Value::Null);
    let (code, plant) = run_cli(&["--plant", "double-release"]);
    assert_eq!(code, Some(1), "the planted bug was not caught");
    assert_eq!(plant, "double-release");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_plant_without_a_scenario_runs_on_the_scenario_that_catches_it() {
    // spec: SIM-3 (`run --plant P` alone must not pass on a scenario that
    // cannot catch P)
    for plant in [
        "ignore-fence",
        "failover-on-retry",
        "reconcile-other-fence-outcome",
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_connreg-sim"))
            .args(["run", "--plant", plant])
            .current_dir(std::env::temp_dir())
            .output()
            .expect("the connreg-sim binary runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{plant}: {text}");
        let bug = PlantedBug::parse(plant).unwrap();
        assert!(text.contains(bug.scenario()), "{plant}: {text}");
    }
}

#[test]
fn plants_lists_each_plant_with_its_scenario_file_first() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_connreg-sim"))
        .arg("plants")
        .output()
        .expect("the connreg-sim binary runs");
    let text = String::from_utf8_lossy(&out.stdout);
    for plant in PlantedBug::all() {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(plant.name()))
            .unwrap_or_else(|| panic!("{} is not listed: {text}", plant.name()));
        let scenario = line.split_whitespace().nth(1).unwrap();
        assert_eq!(scenario, plant.scenario(), "{line}");
        assert!(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../scenarios")
                .join(scenario)
                .exists(),
            "{line}"
        );
    }
}
