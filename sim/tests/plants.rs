//! Goal: every planted bug is caught by the checkers within a bounded
//! number of seeds of the scenario that exercises it, and the same seeds
//! pass without the plant. A checker that catches nothing is a defect.

use connreg::plant::Plant;
use connreg_sim::{RunOptions, Scenario, run};

/// Seeds tried per plant before the test fails.
const SEEDS_MAX: u64 = 20;

/// The scenario that exercises each plant, and the invariant that must
/// catch it.
fn exercise(plant: Plant) -> (&'static str, &'static str) {
    match plant {
        // spec: PIN-4
        Plant::FailoverOnRetry => ("0004_replica_crash_mid_action.toml", "no_silent_failover"),
        // spec: ROUTE-3
        Plant::NoActionSerialization => {
            ("0002_duplicate_resolve_storm.toml", "one_route_per_action")
        }
        // spec: SETTLE-4
        Plant::DoubleRelease => ("0003_retry_after_lost_answer.toml", "idempotent_settlement"),
        // spec: SETTLE-2
        Plant::IgnoreFence => ("0005_draining_pinned_retries.toml", "idempotent_settlement"),
        // spec: CAT-3
        Plant::HeartbeatAdvancesRevision => ("0001_steady_state.toml", "revision_by_publication"),
        // spec: CAT-9
        Plant::MixedRevisionPages => (
            "0007_publications_during_paged_reads.toml",
            "page_single_revision",
        ),
        // spec: ROUTE-7, REC-8
        Plant::OverCapacity => (
            "0009_capacity_exhaustion_and_scopes.toml",
            "capacity_accounting",
        ),
        // spec: ROUTE-4
        Plant::CrossTenantReturn => (
            "0010_one_action_two_tenants.toml",
            "no_cross_tenant_disclosure",
        ),
    }
}

fn scenario(file: &str) -> Scenario {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios")
        .join(file);
    Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_plant_is_caught_within_twenty_seeds_and_the_same_seeds_pass_unplanted() {
    // spec: SIM-3
    for plant in Plant::ALL {
        let (file, invariant) = exercise(plant);
        let s = scenario(file);
        let mut caught = None;
        for seed in 1..=SEEDS_MAX {
            let opts = RunOptions {
                seed,
                plant: Some(plant),
                ..RunOptions::default()
            };
            let report = run(&s, &opts).unwrap_or_else(|e| panic!("{e}"));
            if !report.ok() {
                assert!(
                    report.violations.iter().any(|v| v.invariant == invariant),
                    "{} at seed {seed} broke other invariants than {invariant}: {:#?}",
                    plant.name(),
                    report.violations
                );
                caught = Some(seed);
                break;
            }
        }
        let caught = caught.unwrap_or_else(|| {
            panic!(
                "{} was not caught by {file} in {SEEDS_MAX} seeds",
                plant.name()
            )
        });
        for seed in 1..=caught {
            let opts = RunOptions {
                seed,
                ..RunOptions::default()
            };
            let report = run(&s, &opts).unwrap_or_else(|e| panic!("{e}"));
            assert!(
                report.ok(),
                "{file} seed {seed} fails without a plant: {:#?}",
                report.violations
            );
        }
        println!("{:<28} caught by {file} at seed {caught}", plant.name());
    }
}

#[test]
fn the_command_line_plants_nothing_unless_asked_for() {
    // spec: SIM-3 (a plant the CLI turned on by default would make every
    // verdict a lie: the seed that double-release fails passes without
    // `--plant`, and each trace records which plant ran)
    let dir = std::env::temp_dir().join(format!("connreg-sim-plants-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run_cli = |extra: &[&str]| {
        let path = dir.join("run.trace.jsonl");
        let mut args = vec![
            "run",
            "--scenario",
            "scenarios/0003_retry_after_lost_answer.toml",
            "--seed",
            "4",
            "--trace",
            path.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_connreg-sim"))
            .args(&args)
            .current_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
            .output()
            .expect("the connreg-sim binary runs");
        let text = std::fs::read_to_string(&path).unwrap();
        let start: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        (out.status.code(), start["plant"].clone())
    };
    let (code, plant) = run_cli(&[]);
    assert_eq!(code, Some(0), "the seed fails with no plant asked for");
    assert_eq!(plant, serde_json::Value::Null);
    let (code, plant) = run_cli(&["--plant", "double-release"]);
    assert_eq!(code, Some(1), "the planted bug was not caught");
    assert_eq!(plant, "double-release");
    std::fs::remove_dir_all(&dir).ok();
}
