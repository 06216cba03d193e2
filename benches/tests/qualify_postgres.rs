//! Goal: the smoke contract runs and passes on the PostgreSQL backend, on
//! a real server from connreg-pgtest (SIM-4, SIM-6), with pgbench beside
//! it; `--durable` runs it on a cluster of its own with fsync=on, and the
//! report says which server ran. Never skipped: without a server the run
//! exits 3 and these tests fail with pgtest's message.

mod common;

use common::{contract_file, qualify, smoke_text};

fn smoke_with_short_pgbench() -> std::path::PathBuf {
    let text = smoke_text().replacen(
        "operations = 2000",
        "operations = 2000\npgbench_secs = 1",
        1,
    );
    contract_file("pg-smoke", &text)
}

#[test]
fn smoke_contract_passes_on_postgres() {
    // spec: SIM-6, SIM-4
    let run = qualify(&smoke_with_short_pgbench(), &["--backend", "postgres"]);
    assert_eq!(run.code, 0, "{}", run.said());
    let report = run.report.as_ref().expect("a report");
    assert_eq!(report["backend"]["kind"], "postgres");
    assert!(report["backend"]["server_source"].is_string());
    assert_eq!(report["backend"]["server"]["kind"], "throwaway");
    assert!(report["backend"]["server"]["version"].is_string());
    assert_eq!(report["verdict"], "pass");
    assert_eq!(report["invariants"]["violations"], 0, "{}", run.said());
    assert!(report["invariants"]["checked"]["routes"].as_u64().unwrap() > 0);
    let pgbench = &report["pgbench"];
    assert!(pgbench["tpcb_tps"].as_f64().unwrap() > 0.0, "{pgbench}");
    assert!(pgbench["tpcb_ratio"].as_f64().unwrap() > 0.0, "{pgbench}");
    assert!(run.stdout.contains("THROWAWAY"), "{}", run.said());
}

#[test]
fn durable_runs_on_a_cluster_of_its_own_with_fsync_on() {
    // spec: SIM-6
    let run = qualify(
        &smoke_with_short_pgbench(),
        &["--backend", "postgres", "--durable", "--no-pgbench"],
    );
    assert_eq!(run.code, 0, "{}", run.said());
    let report = run.report.as_ref().expect("a report");
    let server = &report["backend"]["server"];
    assert_eq!(server["source"], "local", "{server}");
    assert_eq!(server["settings"]["fsync"], "on", "{server}");
    assert_eq!(report["pgbench"]["skipped"], "--no-pgbench");
    assert_eq!(report["cleanup"]["rows_left"], 0);
}
