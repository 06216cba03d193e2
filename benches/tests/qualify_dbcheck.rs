//! Goal: the whole-database checks the server computes through the
//! control role (issue 10, item 6) find nothing in an untouched database
//! and find a replica count, an admission counter and a fence tampered
//! with, without reading rows into the client. Never skipped.

use connreg::contracts::Routing;
use connreg::postgres::PgRegistry;
use connreg::postgres::testing::TestRegistry;
use connreg::{
    ActionId, ManualClock, Outcome, RegistryConfig, RouteRequest, SettleParams, Timestamp,
};
use connreg_benches::qualify::check::{ViolationKind, Violations};
use connreg_benches::qualify::dbcheck::check_database;
use connreg_benches::qualify::fleet::{self, Admission, FleetPlan, FleetShape};
use sqlx::Connection;

fn shape() -> FleetShape {
    FleetShape {
        tenants: 2,
        capabilities: 1,
        bindings_per_tenant_capability: 1,
        instances_per_tenant: 1,
        replicas_per_instance: 3,
        regions: vec!["eu-west".into()],
        zones_per_region: 1,
        replica_capacity: 4,
        lease_ttl_ms: 60_000,
        admission: Admission {
            tenant_limit: Some(10),
            binding_limit: None,
        },
    }
}

/// A fresh database with the fleet of [`shape`] built in it.
async fn fleet_database() -> (TestRegistry, PgRegistry, FleetPlan) {
    let test = TestRegistry::create().await.expect("a test database");
    let registry = PgRegistry::connect(
        test.options(),
        ManualClock::new(Timestamp(1_000_000)),
        RegistryConfig::default(),
    )
    .await
    .expect("a registry");
    let plan = FleetPlan::with_prefix(&shape(), "db-");
    fleet::build(&registry, &plan).await.expect("the fleet");
    (test, registry, plan)
}

#[tokio::test]
async fn the_server_counts_find_tampered_replicas_counters_and_fences() {
    // spec: SIM-6, ROUTE-7
    let (test, registry, plan) = fleet_database().await;
    let control = test.options().control.connect;
    for n in 0..3 {
        registry
            .route_resolve(RouteRequest {
                action: ActionId::new(format!("db-a{n}")).unwrap(),
                tenant: Some(plan.tenants[0].clone()),
                capability: plan.capabilities[0].clone(),
                topology: plan.topology(0, 0),
            })
            .await
            .expect("a route");
    }

    let mut clean = Violations::default();
    let counted = check_database(&control, &mut clean).await.expect("checks");
    assert_eq!(clean.total(), 0, "{:?}", clean.details());
    assert_eq!(counted.assignments, 3);
    assert_eq!(counted.replicas, 6);

    let mut conn = test.control_connection().await.expect("control");
    for statement in [
        // A replica counting one reservation too few (never below 0).
        "UPDATE connreg.replicas SET active = active - 1 WHERE active > 0 \
         AND replica_id = (SELECT min(replica_id) FROM connreg.replicas WHERE active > 0)",
        "UPDATE connreg.admission_counters SET in_use = in_use + 1",
        // Two assignments sharing a fence.
        "UPDATE connreg.assignments SET fence = (SELECT min(fence) FROM connreg.assignments) \
         WHERE action_id = 'db-a2'",
    ] {
        sqlx::query(statement)
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
    conn.close().await.unwrap();
    let mut found = Violations::default();
    let counted = check_database(&control, &mut found).await.expect("checks");
    assert_eq!(counted.replicas_mismatched, 1, "{counted:?}");
    assert_eq!(counted.counters_mismatched, 2, "{counted:?}");
    assert_eq!(counted.reused_fences, 1, "{counted:?}");
    for kind in [
        ViolationKind::ReplicaAccounting,
        ViolationKind::ScopeAccounting,
        ViolationKind::FenceReused,
    ] {
        assert_eq!(found.counts().get(&kind), Some(&1), "{:?}", found.details());
    }
    registry.close().await;
}

#[tokio::test]
async fn the_server_counts_find_a_route_whose_snapshot_is_gone() {
    // spec: SIM-6, REC-8
    let (test, registry, plan) = fleet_database().await;
    let control = test.options().control.connect;
    for n in 0..2 {
        let resolved = registry
            .route_resolve(RouteRequest {
                action: ActionId::new(format!("db-a{n}")).unwrap(),
                tenant: Some(plan.tenants[1].clone()),
                capability: plan.capabilities[0].clone(),
                topology: plan.topology(1, 0),
            })
            .await
            .expect("a route");
        let done = registry
            .route_settle(SettleParams {
                assignment: resolved.assignment,
                outcome: Outcome::Completed,
            })
            .await
            .expect("a settlement");
        assert!(done.released);
    }
    let mut clean = Violations::default();
    check_database(&control, &mut clean).await.expect("checks");
    assert_eq!(clean.total(), 0, "{:?}", clean.details());

    // A settled route pointing at a snapshot that does not exist: nothing
    // else counts it, so only the snapshot check can.
    let mut conn = test.control_connection().await.expect("control");
    sqlx::query(
        "UPDATE connreg.assignments \
         SET snapshot_id = (SELECT max(snapshot_id) + 1000 FROM connreg.route_snapshots) \
         WHERE action_id = 'db-a1'",
    )
    .execute(&mut conn)
    .await
    .expect("the tampering");
    conn.close().await.unwrap();
    let mut found = Violations::default();
    let counted = check_database(&control, &mut found).await.expect("checks");
    assert_eq!(counted.routes_without_snapshot, 1, "{counted:?}");
    assert_eq!(counted.replicas_mismatched, 0, "{counted:?}");
    assert_eq!(
        found.counts().get(&ViolationKind::RouteChanged),
        Some(&1),
        "{:?}",
        found.details()
    );
    assert_eq!(found.total(), 1, "{:?}", found.details());
    registry.close().await;
}
