//! Goal: an immediate restart of the PostgreSQL server under load keeps
//! every committed decision and every invariant (SIM-4). Alone in its test
//! binary: the restart ends every session of the test process's server.

use std::path::PathBuf;

use connreg_sim::{BackendKind, RunOptions, Scenario, run};

#[test]
fn db_server_restart_on_postgres() {
    // spec: SIM-4
    let file = "0018_db_server_restart.toml";
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios")
        .join(file);
    let scenario = Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let opts = RunOptions {
        seed: 1,
        backend: BackendKind::Postgres,
        ..RunOptions::default()
    };
    let report = run(&scenario, &opts).unwrap_or_else(|e| panic!("{file}: {e}"));
    assert!(
        report.ok(),
        "{file} on PostgreSQL: {:#?}\nreproduce: {}",
        report.violations,
        connreg_sim::repro_command(Some(&format!("scenarios/{file}")), &opts)
    );
    assert_eq!(report.counters.db_restarts, 1);
}
