//! Goal: a slip in the PostgreSQL backend's SQL that every invariant
//! passes (each answer it gives is one the rules allow) is caught by the
//! differential oracle on a PostgreSQL-tier run. Each SQL mutant whose
//! catalogue entry names `sim::oracle_agrees` is applied to the run's
//! database (`CONNREG_SQL_MUTANT`), and the run must fail on
//! `oracle_agrees` and nothing else; the same run without it is clean
//! (sim/tests/postgres.rs).

use std::process::Command;

use connreg::postgres::mutants::{SQL_MUTANT_VAR, SQL_MUTANTS};

/// The scenario each oracle-caught mutant runs: replicas tied on every
/// ranking term but the spread, and nothing else drawn.
const SCENARIO: &str = "0001_steady_state.toml";

#[test]
fn sql_mutants_no_invariant_sees_are_caught_by_the_oracle() {
    // spec: SIM-4, ROUTE-2
    let scenario = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios")
        .join(SCENARIO);
    let mutants: Vec<_> = SQL_MUTANTS
        .iter()
        .filter(|m| m.caught_by.contains(&"sim::oracle_agrees"))
        .collect();
    assert!(!mutants.is_empty(), "no mutant is left to the oracle");
    for mutant in mutants {
        let out = Command::new(env!("CARGO_BIN_EXE_connreg-sim"))
            .args(["run", "--seed", "1", "--backend", "postgres", "--scenario"])
            .arg(&scenario)
            .env(SQL_MUTANT_VAR, mutant.id)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}: the run did not fail on its violations\n{stdout}\n{stderr}",
            mutant.id
        );
        let named: Vec<&str> = stdout
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("- "))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        assert_eq!(
            named,
            ["oracle_agrees"],
            "{}: the oracle alone must catch it\n{stdout}",
            mutant.id
        );
        assert!(
            stdout.contains(&format!("{SQL_MUTANT_VAR}={}", mutant.id)),
            "{}: the reproduction command names the mutant\n{stdout}",
            mutant.id
        );
    }
}
