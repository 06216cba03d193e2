//! Shared by the PostgreSQL scenario tests: one seed of a scenario file on
//! a real server, every invariant and expectation required to hold.

use std::path::PathBuf;

use connreg_sim::{BackendKind, RunOptions, RunReport, Scenario, run};

/// Runs seed 1 of `file` (in scenarios/) on PostgreSQL; panics with the
/// violations and the reproduce command unless the run is clean.
pub(crate) fn run_on_postgres(file: &str) -> RunReport {
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
    report
}
