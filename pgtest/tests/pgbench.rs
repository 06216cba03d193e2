//! Goal: a bench can run pgbench against a test database from what this
//! crate reports (binaries folder, host, port, superuser, password).

use std::process::Command;

use connreg_pgtest::{TestDatabase, bindir};

fn pgbench(database: &TestDatabase, args: &[&str]) {
    let server = database.server();
    let program = bindir()
        .expect("pgbench needs the PostgreSQL binaries (see CONNREG_PG_BINDIR)")
        .join("pgbench");
    let mut command = Command::new(program);
    command
        .args(["-h", server.host(), "-p", &server.port().to_string()])
        .args(["-U", server.superuser()])
        .args(args)
        .arg(database.database_name());
    if let Some(password) = server.password() {
        command.env("PGPASSWORD", password);
    }
    let output = command.output().expect("pgbench runs");
    assert!(
        output.status.success(),
        "pgbench {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn pgbench_initializes_and_runs_against_a_test_database() {
    let database = TestDatabase::create_blocking().expect("a test database");
    pgbench(&database, &["--initialize", "--quiet", "--scale=1"]);
    pgbench(
        &database,
        &["--client=4", "--transactions=25", "--no-vacuum"],
    );
}
