//! Goal: the smoke contract runs and passes on the PostgreSQL backend, on
//! a real server from connreg-pgtest (SIM-4, SIM-6). Never skipped: without
//! a server the run exits 3 and this test fails with pgtest's message.

mod common;

use common::{qualify, smoke_path};

#[test]
fn smoke_contract_passes_on_postgres() {
    // spec: SIM-6, SIM-4
    let run = qualify(&smoke_path(), &["--backend", "postgres"]);
    assert_eq!(run.code, 0, "{}", run.said());
    let report = run.report.as_ref().expect("a report");
    assert_eq!(report["backend"]["kind"], "postgres");
    assert!(report["backend"]["server_source"].is_string());
    assert_eq!(report["verdict"], "pass");
    assert_eq!(report["invariants"]["violations"], 0, "{}", run.said());
    assert!(report["invariants"]["checked"]["routes"].as_u64().unwrap() > 0);
}
