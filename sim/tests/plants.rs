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
fn plants_are_off_unless_asked_for() {
    // spec: SIM-3 (a normal run has no plant: the standard scenario passes)
    let report = run(&Scenario::standard(), &RunOptions::default()).unwrap();
    assert!(report.ok(), "{:#?}", report.violations);
}
