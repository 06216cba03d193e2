//! Goal: SQL mutants of the PostgreSQL backend are caught by the
//! simulator's PostgreSQL tier, not by the conformance suite alone. Each
//! catalogue entry `sim::INVARIANT@SCENARIO` is run here: the mutant is
//! applied to the run's database (`CONNREG_SQL_MUTANT`), seed 1 of the
//! scenario must fail naming that invariant, and the reproduction command
//! must name the mutant. For `oracle_agrees` the differential oracle must
//! be the only one to object: the slip gives answers every invariant
//! allows. The same runs without a mutant are clean (sim/tests/postgres.rs).

use std::process::Command;

use connreg::postgres::mutants::{SQL_MUTANT_VAR, SQL_MUTANTS};

/// The violations a run printed: the invariant of each `  - ` line.
fn named(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("  - "))
        .filter_map(|l| l.split_whitespace().next())
        .collect()
}

#[test]
fn sql_mutants_are_caught_by_the_postgres_tier() {
    // spec: SIM-4, ROUTE-2, SETTLE-5
    let mut runs = 0;
    for mutant in SQL_MUTANTS {
        for entry in mutant.caught_by {
            let Some(sim) = entry.strip_prefix("sim::") else {
                continue;
            };
            let (invariant, file) = sim
                .split_once('@')
                .unwrap_or_else(|| panic!("{}: {entry} is not sim::INVARIANT@SCENARIO", mutant.id));
            let scenario = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../scenarios")
                .join(file);
            let out = Command::new(env!("CARGO_BIN_EXE_connreg-sim"))
                .args(["run", "--seed", "1", "--backend", "postgres", "--scenario"])
                .arg(&scenario)
                .env(SQL_MUTANT_VAR, mutant.id)
                .output()
                .unwrap();
            runs += 1;
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(1),
                "{} on {file}: the run did not fail on its violations\n{stdout}\n{stderr}",
                mutant.id
            );
            let seen = named(&stdout);
            if invariant == "oracle_agrees" {
                assert!(
                    seen.iter().all(|i| *i == "oracle_agrees") && !seen.is_empty(),
                    "{} on {file}: the oracle alone must catch it\n{stdout}",
                    mutant.id
                );
            } else {
                assert!(
                    seen.contains(&invariant),
                    "{} on {file}: {invariant} did not catch it\n{stdout}",
                    mutant.id
                );
            }
            assert!(
                stdout.contains(&format!("{SQL_MUTANT_VAR}={}", mutant.id)),
                "{}: the reproduction command names the mutant\n{stdout}",
                mutant.id
            );
        }
    }
    assert!(
        runs >= 2,
        "the catalogue leaves {runs} mutants to the simulator"
    );
}
