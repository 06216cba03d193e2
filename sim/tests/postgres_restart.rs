//! Goal: an immediate restart of the PostgreSQL server under load keeps
//! every committed decision and every invariant (SIM-4), and restarts only
//! the run's own server: other runs of the process (a sweep's other jobs,
//! other tests) keep their sessions.

use sqlx::{Connection, PgConnection};

mod common;

#[test]
fn db_server_restart_on_postgres() {
    // spec: SIM-4
    let report = common::run_on_postgres("0018_db_server_restart.toml");
    assert_eq!(report.counters.db_restarts, 1);
}

#[test]
fn a_restart_leaves_the_process_shared_server_and_its_sessions_alone() {
    // spec: SIM-4
    let server = connreg_pgtest::server().unwrap_or_else(|e| panic!("{e}"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let session = |conn: &mut PgConnection| {
        runtime.block_on(
            sqlx::query_scalar::<_, String>(
                "SELECT pg_backend_pid() || ' ' || pg_postmaster_start_time()",
            )
            .fetch_one(conn),
        )
    };
    let mut conn = runtime
        .block_on(PgConnection::connect(server.url()))
        .unwrap();
    let before = session(&mut conn).unwrap();
    let report = common::run_on_postgres("0018_db_server_restart.toml");
    assert_eq!(report.counters.db_restarts, 1);
    let after = session(&mut conn).map_err(|e| e.to_string());
    assert_eq!(
        after,
        Ok(before),
        "the shared server's session did not survive the run's restart"
    );
}
