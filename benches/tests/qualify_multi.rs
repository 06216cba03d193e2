//! Goal: many registry processes against one database (issue 10, item 6):
//! `--processes 2` runs the trial in two worker processes of this binary,
//! each with its own pool, adds up their figures and checks the whole
//! database through the control role afterwards. Never skipped.

mod common;

use common::{contract_file, qualify, threshold};

#[test]
fn two_worker_processes_share_one_database_and_every_invariant_holds() {
    // spec: SIM-6, SIM-4
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("environments/multi-process.toml"),
    )
    .unwrap()
    .replacen("duration_ms = 3000", "duration_ms = 1000", 1)
    .replacen("warmup_ms = 1000", "warmup_ms = 300", 1)
    .replacen("processes = 2", "processes = 1", 1);
    let env = contract_file("multi", &text);
    let run = qualify(&env, &["--processes", "2", "--no-pgbench"]);
    assert_eq!(run.code, 0, "{}", run.said());
    let report = run.report.as_ref().expect("a report");
    assert_eq!(report["load"]["processes"], 2, "--processes overrides");
    assert_eq!(report["invariants"]["violations"], 0, "{}", run.said());
    let routes = report["invariants"]["checked"]["routes"].as_u64().unwrap();
    assert!(routes > 0);
    assert_eq!(report["invariants"]["checked"]["foreign_routes"], 0);
    assert!(report["measured"]["operations"].as_u64().unwrap() > 0);
    assert!(
        !report["trials"][0]["timeline"]["points"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(
        run.stderr.contains("worker 0") && run.stderr.contains("worker 1"),
        "{}",
        run.said()
    );
    assert_eq!(threshold(report, "duration_ms_min")["verdict"], "pass");
    assert_eq!(report["cleanup"]["rows_left"], 0);
}

#[test]
fn many_processes_on_the_memory_backend_is_bad_input() {
    // spec: SIM-6
    let run = qualify(
        &common::smoke_path(),
        &["--backend", "memory", "--processes", "2"],
    );
    assert_eq!(run.code, 2, "{}", run.said());
    assert!(run.stderr.contains("memory backend"), "{}", run.said());
}
