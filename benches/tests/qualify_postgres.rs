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

/// The smoke contract as a durable one: a synchronous standby required.
fn smoke_requiring_a_synchronous_standby() -> std::path::PathBuf {
    let text = smoke_text()
        .replacen(
            "operations = 2000",
            "operations = 2000\npgbench_secs = 1",
            1,
        )
        .replacen(
            "[thresholds]",
            "[thresholds]\nsynchronous_standbys_min = 1",
            1,
        );
    contract_file("pg-smoke-durable", &text)
}

#[test]
fn a_durable_contract_passes_only_with_a_synchronous_standby() {
    // spec: SIM-6, SIM-4
    let contract = smoke_requiring_a_synchronous_standby();
    let run = qualify(&contract, &["--backend", "memory"]);
    assert_eq!(run.code, 2, "{}", run.said());
    assert!(run.stderr.contains("--backend postgres"), "{}", run.said());
    let cases = [
        (
            vec!["--backend", "postgres", "--no-pgbench"],
            "synchronous_standby_names is empty",
        ),
        (
            vec![
                "--backend",
                "postgres",
                "--no-pgbench",
                "--standby",
                "asynchronous",
            ],
            "synchronous_standby_names is empty",
        ),
    ];
    for (args, why) in cases {
        let run = qualify(&contract, &args);
        assert_eq!(run.code, 1, "{args:?}: {}", run.said());
        let report = run.report.as_ref().expect("a report");
        let t = common::threshold(report, "synchronous_standbys_min");
        assert_eq!(t["verdict"], "fail", "{t}");
        assert_eq!(t["measured"], 0.0, "{t}");
        assert!(run.stdout.contains(why), "{args:?}: {}", run.said());
        // Everything else held: the replication alone failed it.
        let others_pass = report["thresholds"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["name"] != "synchronous_standbys_min")
            .all(|t| t["verdict"] == "pass");
        assert!(others_pass, "{}", run.said());
    }

    let run = qualify(
        &contract,
        &[
            "--backend",
            "postgres",
            "--no-pgbench",
            "--standby",
            "synchronous",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.said());
    let report = run.report.as_ref().expect("a report");
    let server = &report["backend"]["server"];
    assert_eq!(server["source"], "local-pair", "{server}");
    assert_eq!(server["settings"]["synchronous_commit"], "remote_apply");
    let standbys = server["standbys"].as_array().expect("standbys listed");
    assert_eq!(standbys.len(), 1, "{server}");
    assert_eq!(standbys[0]["state"], "streaming", "{server}");
    assert_eq!(standbys[0]["sync_state"], "sync", "{server}");
    assert_eq!(
        common::threshold(report, "synchronous_standbys_min")["measured"],
        1.0
    );
}
