//! Goal: every AUTH rule holds on a real PostgreSQL server: two separately
//! permissioned pools (AUTH-1), writes the database itself refuses the data
//! role (AUTH-2), a data plane that refuses a wrong schema and holds no
//! control pool (AUTH-3), routing that reads only the rows it needs
//! (AUTH-4), status through the data role (AUTH-5).
#![cfg(feature = "postgres")]

mod postgres_common;

use std::time::Duration;

use connreg::contracts::{ReplicaLifecycle, Routing, Status};
use connreg::postgres::{PgDataPlane, PgRegistry, SCHEMA_VERSION, StartError};
use connreg::{ManualClock, RegistryConfig, Timestamp};
use postgres_common::{
    AUTH2_FORBIDDEN, FleetOptions, PgFixture, bulk_replicas, publish_fleet, refusal, request,
};
use sqlx::PgConnection;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_role_is_refused_every_catalog_admission_and_schema_write() {
    // spec: AUTH-2
    let fx = PgFixture::new().await;
    let (registry, _clock) = fx.registry_at_zero().await;
    publish_fleet(
        &registry,
        &FleetOptions {
            tenant_scope_limit: Some(5),
            ..FleetOptions::default()
        },
    )
    .await;
    let mut admin = fx.admin_conn().await;
    bulk_replicas(&mut admin, "t0-i0", 2, 4, 60_000).await;
    registry.route_resolve(request("a1", "t0")).await.unwrap();

    let mut data = fx.data_conn().await;
    for statement in AUTH2_FORBIDDEN {
        assert_eq!(
            refusal(&mut data, statement).await.as_deref(),
            Some("42501"),
            "the data role must be refused with insufficient_privilege: {statement}"
        );
    }
    // The data role still does its own work through the same privileges.
    registry.route_resolve(request("a2", "t0")).await.unwrap();
    // And the control role, which owns the schema, is not refused.
    let mut control = sqlx::Connection::connect_with(&fx.options().control.connect)
        .await
        .unwrap();
    assert_eq!(
        refusal(
            &mut control,
            "UPDATE connreg.admission_scopes SET scope_limit = 6"
        )
        .await,
        None
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_plane_refuses_to_start_on_another_schema_version() {
    // spec: AUTH-3
    let fx = PgFixture::new().await;
    let clock = ManualClock::new(Timestamp(0));

    // Nothing installed yet: no schema version at all.
    let refused = PgDataPlane::connect(fx.options().data, clock.clone(), RegistryConfig::default())
        .await
        .unwrap_err();
    assert_eq!(
        refused,
        StartError::SchemaMismatch {
            expected: SCHEMA_VERSION,
            found: None
        }
    );

    let (registry, _) = fx.registry_at_zero().await;
    registry.close().await;
    let plane = PgDataPlane::connect(fx.options().data, clock.clone(), RegistryConfig::default())
        .await
        .expect("the data plane starts on the expected schema");
    plane.close().await;

    // Tamper with the installed version.
    let mut admin = fx.admin_conn().await;
    sqlx::raw_sql("UPDATE connreg.schema_version SET version = 999")
        .execute(&mut admin)
        .await
        .unwrap();
    let refused = PgDataPlane::connect(fx.options().data, clock, RegistryConfig::default())
        .await
        .unwrap_err();
    assert_eq!(
        refused,
        StartError::SchemaMismatch {
            expected: SCHEMA_VERSION,
            found: Some(999)
        }
    );
    assert!(refused.to_string().contains("999"), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_plane_holds_no_control_connection() {
    // spec: AUTH-3
    let fx = PgFixture::new().await;
    let (registry, clock) = fx.registry_at_zero().await;
    publish_fleet(&registry, &FleetOptions::default()).await;
    registry.close().await;
    let mut admin = fx.admin_conn().await;
    bulk_replicas(&mut admin, "t0-i0", 3, 4, 60_000).await;
    // The closed registry's sessions end asynchronously on the server.
    for _ in 0..200 {
        if control_sessions(&mut admin, &fx).await == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(control_sessions(&mut admin, &fx).await, 0);

    let plane = PgDataPlane::connect(fx.options().data, clock, RegistryConfig::default())
        .await
        .unwrap();
    plane.route_resolve(request("a1", "t0")).await.unwrap();
    plane.status().await.unwrap();
    assert_eq!(control_sessions(&mut admin, &fx).await, 0);
    assert!(plane.pool_status().open >= 1);
}

/// Sessions on the test database as the control role or named as its pool.
async fn control_sessions(admin: &mut PgConnection, fx: &PgFixture) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity
         WHERE datname = $1 AND (usename = $2 OR application_name = 'connreg-control')",
    )
    .bind(fx.database_name())
    .bind(&fx.roles.control)
    .fetch_one(admin)
    .await
    .unwrap()
}

/// Sessions of this test's database by (application, role).
async fn sessions(admin: &mut PgConnection, database: &str) -> Vec<(String, String, i64)> {
    sqlx::query_as(
        "SELECT application_name, usename::text, count(*)
         FROM pg_stat_activity WHERE datname = $1 AND application_name LIKE 'connreg-%'
         GROUP BY 1, 2 ORDER BY 1",
    )
    .bind(database)
    .fetch_all(admin)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pools_are_named_sized_and_logged_in_as_their_roles() {
    // spec: AUTH-1
    let fx = PgFixture::new().await;
    let mut options = fx.options();
    options.control.min_connections = 2;
    options.control.max_connections = 2;
    options.data.min_connections = 3;
    options.data.max_connections = 3;
    let clock = ManualClock::new(Timestamp(0));
    let registry = PgRegistry::connect(options, clock, RegistryConfig::default())
        .await
        .unwrap();
    publish_fleet(&registry, &FleetOptions::default()).await;
    let mut admin = fx.admin_conn().await;
    bulk_replicas(&mut admin, "t0-i0", 4, 100, 60_000).await;

    // The pools open their minimum at start.
    let expected = vec![
        ("connreg-control".to_string(), fx.roles.control.clone(), 2),
        ("connreg-data".to_string(), fx.roles.data.clone(), 3),
    ];
    let mut seen = Vec::new();
    for _ in 0..100 {
        seen = sessions(&mut admin, fx.database_name()).await;
        if seen == expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(seen, expected);

    // Under load the data pool never opens more than its maximum.
    let mut load = tokio::task::JoinSet::new();
    for n in 0..32 {
        let registry = registry.clone();
        load.spawn(async move {
            registry
                .route_resolve(request(&format!("a{n}"), "t0"))
                .await
                .unwrap()
        });
    }
    let mut peak = 0;
    while !load.is_empty() {
        for (app, _, count) in sessions(&mut admin, fx.database_name()).await {
            if app == "connreg-data" {
                peak = peak.max(count);
            }
        }
        if let Some(done) = load.try_join_next() {
            done.unwrap();
        } else {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    assert_eq!(
        peak, 3,
        "32 concurrent resolves fill the data pool, and no more"
    );
    let status = registry.pool_status();
    assert_eq!((status.control.max, status.data.max), (2, 3));
    assert!(status.data.open <= 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_is_readable_through_the_data_role() {
    // spec: AUTH-5
    let fx = PgFixture::new().await;
    let (registry, clock) = fx.registry_at_zero().await;
    publish_fleet(&registry, &FleetOptions::default()).await;
    let mut admin = fx.admin_conn().await;
    bulk_replicas(&mut admin, "t0-i0", 3, 4, 60_000).await;
    registry.route_resolve(request("a1", "t0")).await.unwrap();
    registry.route_resolve(request("a2", "t0")).await.unwrap();
    registry
        .replica_drain("t0-i0-r2".try_into().unwrap())
        .await
        .unwrap();

    let plane = PgDataPlane::connect(fx.options().data, clock, RegistryConfig::default())
        .await
        .unwrap();
    let status = plane.status().await.unwrap();
    assert_eq!(status.revision.0, 1);
    assert_eq!(status.replicas_ready, 2);
    assert_eq!(status.replicas_draining, 1);
    assert_eq!(status.replicas_offline, 0);
    assert_eq!(status.active_assignments, 2);
    assert_eq!(status.assignments_total, 2);
    assert_eq!(status.open_circuits, 0);
    assert_eq!(status, registry.status().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routing_reads_only_the_tenants_replicas_on_a_large_fleet() {
    // spec: AUTH-4
    const TENANTS: usize = 40;
    const PER_INSTANCE: usize = 500;
    let fx = PgFixture::new().await;
    let (registry, _clock) = fx.registry_at_zero().await;
    publish_fleet(
        &registry,
        &FleetOptions {
            tenants: TENANTS,
            ..FleetOptions::default()
        },
    )
    .await;
    let mut admin = fx.admin_conn().await;
    // One small tenant and a large fleet of others: 39 × 500 + 10 replicas.
    bulk_replicas(&mut admin, "t0-i0", 10, 4, 60_000).await;
    for t in 1..TENANTS {
        bulk_replicas(&mut admin, &format!("t{t}-i0"), PER_INSTANCE, 4, 60_000).await;
    }
    sqlx::raw_sql("ANALYZE").execute(&mut admin).await.unwrap();
    let total: i64 = sqlx::query_scalar("SELECT count(*) FROM connreg.replicas")
        .fetch_one(&mut admin)
        .await
        .unwrap();
    assert!(total >= 19_000);

    // PostgreSQL's own count of the rows one resolve reads from the
    // replicas table: the small tenant's 10, and a few more for locking and
    // re-reading the chosen one, never the fleet's 19,500.
    let reads = registry
        .resolve_replica_reads(&request("a1", "t0"))
        .await
        .unwrap();
    assert_eq!(reads.outcome, "created");
    // The statistics do count: the candidates were read.
    assert!(reads.rows >= 10, "{reads:?}");
    assert!(reads.rows <= 10 + 4, "read {reads:?} for a tenant with 10");
    // A tenant with 500 replicas reads its own 500, not the fleet's.
    let reads = registry
        .resolve_replica_reads(&request("a2", "t7"))
        .await
        .unwrap();
    assert_eq!(reads.outcome, "created");
    assert!(
        reads.rows <= PER_INSTANCE as i64 + 4,
        "read {reads:?} for a tenant with {PER_INSTANCE}"
    );
    // And the resolve itself succeeds on that fleet.
    let routed = registry.route_resolve(request("a1", "t0")).await.unwrap();
    assert_eq!(routed.assignment.destination.instance.as_str(), "t0-i0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_role_for_both_pools_is_refused_unless_development_mode_is_named() {
    // spec: AUTH-1
    let fx = PgFixture::new().await;
    let clock = ManualClock::new(Timestamp(0));
    let mut same = fx.options();
    same.data = connreg::postgres::PoolOptions::data(same.control.connect.clone());
    let refused = PgRegistry::connect(same.clone(), clock.clone(), RegistryConfig::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, StartError::Options { reason } if reason.contains("AUTH-1")),
        "{refused}"
    );
    // Nothing was installed by the refused start.
    let mut admin = fx.admin_conn().await;
    let installed: bool =
        sqlx::query_scalar("SELECT to_regclass('connreg.schema_version') IS NOT NULL")
            .fetch_one(&mut admin)
            .await
            .unwrap();
    assert!(!installed, "a refused start installed the schema");

    // Named explicitly, the development mode starts and serves.
    same.single_role_development = true;
    let registry = PgRegistry::connect(same, clock, RegistryConfig::default())
        .await
        .expect("the single-role development mode starts");
    publish_fleet(&registry, &FleetOptions::default()).await;
    bulk_replicas(&mut admin, "t0-i0", 2, 4, 60_000).await;
    registry
        .route_resolve(request("dev-1", "t0"))
        .await
        .unwrap();

    // Claiming the mode with two roles is incoherent, and refused.
    let mut two = fx.options();
    two.single_role_development = true;
    let refused = PgRegistry::connect(
        two,
        ManualClock::new(Timestamp(0)),
        RegistryConfig::default(),
    )
    .await
    .unwrap_err();
    assert!(matches!(refused, StartError::Options { .. }), "{refused}");
}
