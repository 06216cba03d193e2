//! Goal: the command line runs the standard scenario with no arguments,
//! exits 0 / 1 / 2 for ok / violation / bad input, and prints the one
//! command that reproduces a failing run.

use std::path::PathBuf;
use std::process::{Command, Output};

fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_connreg-sim"))
        .args(args)
        .current_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."))
        .output()
        .expect("the connreg-sim binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn no_arguments_runs_the_standard_scenario() {
    let out = sim(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(text.contains("scenario steady_state"), "{text}");
    assert!(text.contains("operations"), "{text}");
    assert!(text.contains("faults fired"), "{text}");
    assert!(text.contains("checks"), "{text}");
    assert!(text.contains("md5 "), "{text}");
}

#[test]
fn a_violation_exits_1_and_prints_the_repro_command() {
    // spec: SIM-5
    let out = sim(&[
        "run",
        "--scenario",
        "scenarios/0003_retry_after_lost_answer.toml",
        "--seed",
        "4",
        "--plant",
        "double-release",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = stdout(&out);
    let repro = text
        .lines()
        .find_map(|l| l.strip_prefix("reproduce: "))
        .unwrap_or_else(|| panic!("no reproduce line in {text}"));
    // Absolute paths: the command works from any directory.
    let root = std::fs::canonicalize(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")).unwrap();
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap();
    assert!(
        repro.starts_with("cargo run --manifest-path /")
            && repro.contains("/Cargo.toml -p connreg-sim --release -- run"),
        "{repro}"
    );
    assert!(
        repro.ends_with(&format!(
            "-- run --scenario {} --seed 4 --plant double-release --trace seed-4.trace.jsonl",
            root.join("scenarios/0003_retry_after_lost_answer.toml")
                .display()
        )),
        "{repro} ({})",
        manifest.display()
    );
    // The printed command, run from another directory, fails the same way.
    let args: Vec<&str> = repro
        .split_whitespace()
        .skip_while(|a| *a != "--")
        .skip(1)
        .filter(|a| !a.starts_with("seed-") && *a != "--trace")
        .collect();
    let again = Command::new(env!("CARGO_BIN_EXE_connreg-sim"))
        .args(&args)
        .current_dir(std::env::temp_dir())
        .output()
        .expect("the connreg-sim binary runs");
    assert_eq!(again.status.code(), Some(1));
    let hash = |t: &str| t.lines().find(|l| l.contains("md5")).map(str::to_string);
    assert_eq!(hash(&text), hash(&stdout(&again)));
}

#[test]
fn bad_input_exits_2() {
    let missing = sim(&["run", "--scenario", "scenarios/none.toml"]);
    assert_eq!(missing.status.code(), Some(2));
    let plant = sim(&["run", "--plant", "no-such-plant"]);
    assert_eq!(plant.status.code(), Some(2));
    let seeds = sim(&[
        "sweep",
        "--scenario",
        "scenarios/0001_steady_state.toml",
        "--seeds",
        "9..1",
    ]);
    assert_eq!(seeds.status.code(), Some(2));
    let flag = sim(&["run", "--no-such-flag"]);
    assert_eq!(flag.status.code(), Some(2));
    let database = sim(&[
        "run",
        "--scenario",
        "scenarios/0014_db_cut_mid_transaction.toml",
    ]);
    assert_eq!(database.status.code(), Some(2));
    let said = String::from_utf8_lossy(&database.stderr).to_string();
    assert!(said.contains("need --backend postgres"), "{said}");
}

#[test]
fn an_invalid_scenario_names_its_file_and_line() {
    let dir = std::env::temp_dir().join(format!("connreg-sim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.toml");
    let standard = connreg_sim::scenario::STANDARD_SCENARIO;
    let text = standard.replacen("[workload]\n", "[workload]\nretries = 3\n", 1);
    let line = text.lines().position(|l| l == "retries = 3").unwrap() + 1;
    std::fs::write(&path, text).unwrap();
    let out = sim(&["run", "--scenario", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("bad.toml:{line}:")), "{err}");
    assert!(err.contains("retries"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn sweep_summarizes_and_plants_lists_every_plant() {
    let out = sim(&[
        "sweep",
        "--scenario",
        "scenarios/0001_steady_state.toml",
        "--seeds",
        "1..=3",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(text.contains("3 passed, 0 failed"), "{text}");
    assert!(text.contains("seeds/minute"), "{text}");
    let plants = sim(&["plants"]);
    assert_eq!(plants.status.code(), Some(0));
    let listed = stdout(&plants);
    assert_eq!(listed.lines().count(), connreg_sim::PlantedBug::all().len());
    for plant in connreg_sim::PlantedBug::all() {
        let line = listed
            .lines()
            .find(|l| l.starts_with(plant.name()))
            .unwrap_or_else(|| panic!("{} is not listed", plant.name()));
        assert!(line.contains(plant.scenario()), "{line}");
    }
}

#[test]
fn check_trace_rechecks_a_written_trace() {
    let dir = std::env::temp_dir().join(format!("connreg-sim-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("run.trace.jsonl");
    let run = sim(&["run", "--seed", "3", "--trace", path.to_str().unwrap()]);
    assert_eq!(run.status.code(), Some(0));
    let check = sim(&["check-trace", path.to_str().unwrap()]);
    assert_eq!(check.status.code(), Some(0), "{}", stdout(&check));
    assert!(stdout(&check).contains("recorded verdict ok"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn two_processes_with_one_seed_write_byte_identical_trace_files() {
    // spec: SIM-1 (separate processes: no state shared through memory)
    let dir = std::env::temp_dir().join(format!("connreg-sim-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let scenario = "scenarios/0011_partition_with_lease_churn.toml";
    let write = |seed: &str, name: &str| {
        let path = dir.join(name);
        let out = sim(&[
            "run",
            "--scenario",
            scenario,
            "--seed",
            seed,
            "--trace",
            path.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
        std::fs::read(&path).unwrap()
    };
    let a = write("5", "a.trace.jsonl");
    let b = write("5", "b.trace.jsonl");
    let c = write("6", "c.trace.jsonl");
    assert!(!a.is_empty());
    assert!(a == b, "two processes with seed 5 wrote different traces");
    assert!(a != c, "seeds 5 and 6 wrote the same trace");
    std::fs::remove_dir_all(&dir).ok();
}
