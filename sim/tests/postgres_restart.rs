//! Goal: an immediate restart of the PostgreSQL server under load keeps
//! every committed decision and every invariant (SIM-4). Alone in its test
//! binary: the restart ends every session of the test process's server.

mod common;

#[test]
fn db_server_restart_on_postgres() {
    // spec: SIM-4
    let report = common::run_on_postgres("0018_db_server_restart.toml");
    assert_eq!(report.counters.db_restarts, 1);
}
