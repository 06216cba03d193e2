//! Goal: prove the suite's checks can fail. Each planted bug of the
//! in-memory backend (`connreg::plant`) must make the conformance tests,
//! invariant checkers and model test that guard against it report a
//! violation.

use std::collections::BTreeSet;
use std::future::Future;
use std::panic::AssertUnwindSafe;

use connreg::contracts::{ReplicaLifecycle, Routing};
use connreg::plant::Plant;
use connreg::{MaintainParams, Outcome};
use connreg_conformance::fixture::{self, FleetOptions, acme, crm_create, globex};
use connreg_conformance::memory::PlantedHarness;
use connreg_conformance::{catalog, check, hold, lease, model, pin, race, route, run, settle};

/// True when the async check panics (fails) on a fresh runtime.
fn fails<F: Future>(test: F) -> bool {
    std::panic::catch_unwind(AssertUnwindSafe(|| run::block_on(test))).is_err()
}

/// True when the model test finds a disagreement within a fixed-seed run.
fn model_fails(plant: Plant) -> bool {
    model::run_with(PlantedHarness(plant), model::seeded(256, 7)).is_err()
}

const fn planted(plant: Plant) -> PlantedHarness {
    PlantedHarness(plant)
}

// spec: SETTLE-4, SETTLE-3
#[test]
fn double_release_is_caught() {
    let h = planted(Plant::DoubleRelease);
    assert!(fails(settle::settling_again_changes_nothing(&h)));
    assert!(model_fails(Plant::DoubleRelease));
    // The capacity checker reports it directly.
    let violations = run::block_on(async {
        let s = fixture::open(&h, FleetOptions::default()).await;
        let a = s.resolve_acme("a1").await;
        s.resolve_acme("a2").await;
        s.settle(&a, Outcome::Completed).await.unwrap();
        s.settle(&a, Outcome::Completed).await.unwrap();
        check::all(&s.inspect().await)
    });
    assert!(
        violations
            .iter()
            .any(|v| v.invariant == "replica active count equals live reservations"),
        "{violations:?}"
    );
}

// spec: SETTLE-2
#[test]
fn ignored_fence_is_caught() {
    let h = planted(Plant::IgnoreFence);
    assert!(fails(
        settle::settlement_of_a_different_assignment_is_fence_lost(&h)
    ));
    assert!(fails(
        settle::stale_copy_after_a_pinned_retry_is_fence_lost(&h)
    ));
    assert!(model_fails(Plant::IgnoreFence));
}

// spec: ROUTE-6, ROUTE-9, REC-8
#[test]
fn over_capacity_is_caught() {
    let h = planted(Plant::OverCapacity);
    assert!(fails(route::full_fleet_answers_no_capacity(&h)));
    assert!(fails(race::racing_resolves_never_exceed_capacity(&h)));
    assert!(model_fails(Plant::OverCapacity));
    let violations = run::block_on(async {
        let options = FleetOptions {
            replicas_per_instance: 1,
            replica_capacity: 1,
            ..FleetOptions::default()
        };
        let s = fixture::open(&h, options).await;
        s.resolve_acme("a1").await;
        s.resolve_acme("a2").await;
        check::all(&s.inspect().await)
    });
    assert!(
        violations
            .iter()
            .any(|v| v.invariant == "replica active count within capacity"),
        "{violations:?}"
    );
}

// spec: ROUTE-4
#[test]
fn cross_tenant_return_is_caught() {
    let h = planted(Plant::CrossTenantReturn);
    assert!(fails(route::resolve_with_other_tenant_returns_conflict(&h)));
    assert!(model_fails(Plant::CrossTenantReturn));
}

// spec: PIN-4, LEASE-3
#[test]
fn failover_on_retry_is_caught() {
    let h = planted(Plant::FailoverOnRetry);
    assert!(fails(
        pin::retry_with_offline_replica_fails_without_failover(&h)
    ));
    assert!(fails(pin::retry_with_open_circuit_fails_without_failover(
        &h
    )));
    assert!(model_fails(Plant::FailoverOnRetry));
    let violations = run::block_on(async {
        let s = fixture::open(&h, FleetOptions::default()).await;
        let a = s.resolve_acme("a1").await;
        s.settle(&a, Outcome::Completed).await.unwrap();
        s.store
            .replica_drain(a.destination.replica.clone())
            .await
            .unwrap();
        let before = s.inspect().await;
        s.clock.advance_ms(s.fleet.options.lease_ttl_ms);
        // Everything expired but a fresh replica: the plant moves there.
        let mut spare = s.fleet.replica_spec("i-acme-crm", 9);
        spare.id = fixture::replica("i-acme-crm-spare");
        s.register(spare, 1).await;
        let _ = s.resolve("a1", &acme(), &crm_create()).await;
        check::no_failover(&before, &s.inspect().await)
    });
    assert!(
        violations
            .iter()
            .any(|v| v.invariant == "no silent failover"),
        "{violations:?}"
    );
}

// spec: ROUTE-3
#[test]
fn unserialized_resolves_are_caught() {
    let h = planted(Plant::NoActionSerialization);
    // The race is real, so give it a few chances; one is almost always
    // enough.
    let caught = (0..10).any(|_| {
        fails(race::racing_resolves_of_one_action_create_one_assignment(
            &h,
        ))
    });
    assert!(caught, "32 racing resolves never overlapped in 10 runs");
    let violations = run::block_on(async {
        let options = FleetOptions {
            replica_capacity: 100,
            ..FleetOptions::default()
        };
        let s = fixture::open(&h, options).await;
        for round in 0..20 {
            let results = race::race(race::RACERS, |_| {
                let store = s.store.clone();
                let request = s
                    .fleet
                    .request(&format!("raced-{round}"), &acme(), &crm_create());
                async move { store.route_resolve(request).await }
            })
            .await;
            let fences: BTreeSet<_> = results
                .into_iter()
                .map(|r| r.unwrap().assignment.reservation.fence)
                .collect();
            let v = check::all(&s.inspect().await);
            if fences.len() > 1 || !v.is_empty() {
                return v;
            }
        }
        Vec::new()
    });
    assert!(
        !violations.is_empty(),
        "the checkers see the double reservation"
    );
}

// spec: CAT-3
#[test]
fn heartbeat_advancing_the_revision_is_caught() {
    let h = planted(Plant::HeartbeatAdvancesRevision);
    assert!(fails(catalog::replica_churn_does_not_advance_the_revision(
        &h
    )));
    assert!(model_fails(Plant::HeartbeatAdvancesRevision));
}

// spec: CAT-9, CAT-4
#[test]
fn mixed_revision_pages_are_caught() {
    let h = planted(Plant::MixedRevisionPages);
    assert!(fails(catalog::cursor_after_a_publication_is_stale(&h)));
    assert!(fails(
        race::publications_racing_paginated_reads_never_mix_revisions(&h)
    ));
}

// spec: SETTLE-3, SETTLE-4
#[test]
fn an_unknown_outcome_left_held_is_caught() {
    let h = planted(Plant::SettleKeepsUnknown);
    assert!(fails(settle::settlement_accepts_each_of_the_four_outcomes(
        &h
    )));
}

// spec: CAT-8
#[test]
fn a_continuation_page_that_skips_a_capability_is_caught() {
    let h = planted(Plant::PageSkipsNext);
    assert!(fails(catalog::pages_are_ordered_and_bounded_by_items(&h)));
    assert!(!fails(catalog::pages_are_ordered_and_bounded_by_items(
        &connreg_conformance::memory::MemoryHarness
    )));
}

// spec: LEASE-1, EVID-1
#[test]
fn a_heartbeat_that_keeps_the_old_lease_is_caught() {
    let h = planted(Plant::HeartbeatKeepsLease);
    assert!(fails(lease::heartbeat_advances_sequence_and_lease(&h)));
    let clean = connreg_conformance::memory::MemoryHarness;
    assert!(!fails(lease::heartbeat_advances_sequence_and_lease(&clean)));
}

// spec: CAT-9, EVID-2
#[test]
fn reads_from_a_standby_a_publication_behind_are_caught() {
    let h = planted(Plant::StaleStandbyReads);
    assert!(fails(catalog::cursor_after_a_publication_is_stale(&h)));
    assert!(fails(catalog::each_broken_link_hides_the_capability(&h)));
    let clean = connreg_conformance::memory::MemoryHarness;
    assert!(!fails(catalog::cursor_after_a_publication_is_stale(&clean)));
    assert!(!fails(catalog::each_broken_link_hides_the_capability(
        &clean
    )));
}

// spec: PIN-3, EVID-3
#[test]
fn fences_out_of_commit_order_are_caught() {
    let h = planted(Plant::FencesOutOfOrder);
    assert!(fails(hold::a_reservation_is_released_once_its_hold_passes(
        &h
    )));
    let clean = connreg_conformance::memory::MemoryHarness;
    assert!(!fails(
        hold::a_reservation_is_released_once_its_hold_passes(&clean)
    ));
}

// spec: PIN-5, EVID-8
#[test]
fn a_route_read_that_misses_its_release_is_caught() {
    let h = planted(Plant::RouteGetIgnoresRelease);
    assert!(fails(settle::settlement_accepts_each_of_the_four_outcomes(
        &h
    )));
    assert!(fails(pin::cancellation_reads_the_same_assignment(&h)));
    let clean = connreg_conformance::memory::MemoryHarness;
    assert!(!fails(pin::cancellation_reads_the_same_assignment(&clean)));
}

/// The unplanted backend passes the same checks, so the failures above
/// come from the plants.
#[test]
fn the_same_checks_pass_without_a_plant() {
    let h = connreg_conformance::memory::MemoryHarness;
    assert!(!fails(settle::settling_again_changes_nothing(&h)));
    assert!(!fails(
        settle::settlement_accepts_each_of_the_four_outcomes(&h)
    ));
    assert!(!fails(route::resolve_with_other_tenant_returns_conflict(
        &h
    )));
    assert!(!fails(
        pin::retry_with_offline_replica_fails_without_failover(&h)
    ));
    assert!(model::run_with(h, model::seeded(64, 7)).is_ok());
    let clean = run::block_on(async {
        let s = fixture::open(&h, FleetOptions::default()).await;
        let a = s.resolve_acme("a1").await;
        s.settle(&a, Outcome::Completed).await.unwrap();
        s.resolve("g1", &globex(), &crm_create()).await.unwrap();
        s.clock.advance_ms(s.fleet.options.lease_ttl_ms);
        s.store
            .lease_maintain(MaintainParams { max: 100 })
            .await
            .unwrap();
        check::all(&s.inspect().await)
    });
    assert!(clean.is_empty(), "{clean:?}");
}
