//! Goal: SQL mutants of the PostgreSQL backend are caught by the
//! simulator's PostgreSQL tier, not by the conformance suite alone. Each
//! catalogue entry `sim::INVARIANT@SCENARIO` is run here: the mutant is
//! applied to the run's database (`CONNREG_SQL_MUTANT`), and seeds 1 to
//! [`SEEDS_TRIED`] of the scenario are run until one fails: one must, naming
//! that invariant, and its reproduction command must name the mutant. A
//! PostgreSQL-tier run is not deterministic (the real server's timing
//! decides which transaction waits), so the race a mutant needs may miss
//! one seed; it is caught within a few. For `oracle_agrees` the differential oracle must
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

/// Seeds run per catalogue entry before it counts as missed.
const SEEDS_TRIED: u64 = 5;

/// Runs `scenario` on PostgreSQL with `mutant` applied, seeds 1 to
/// [`SEEDS_TRIED`], until a run fails: its stdout, or every run's output
/// when none did.
fn first_failing_run(mutant: &str, scenario: &std::path::Path) -> Result<String, String> {
    let mut outputs = String::new();
    for seed in 1..=SEEDS_TRIED {
        let out = Command::new(env!("CARGO_BIN_EXE_connreg-sim"))
            .args(["run", "--seed", &seed.to_string(), "--backend", "postgres"])
            .arg("--scenario")
            .arg(scenario)
            .env(SQL_MUTANT_VAR, mutant)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.code() == Some(1) {
            return Ok(stdout);
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        outputs.push_str(&format!(
            "seed {seed}: exit {:?}\n{stdout}\n{stderr}\n",
            out.status.code()
        ));
    }
    Err(outputs)
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
            runs += 1;
            let stdout = first_failing_run(mutant.id, &scenario).unwrap_or_else(|outputs| {
                panic!(
                    "{} on {file}: no run of seeds 1 to {SEEDS_TRIED} failed on its violations\n{outputs}",
                    mutant.id
                )
            });
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
