//! Goal: no call of the PostgreSQL backend leaves a lock behind when it
//! answers with an error. Each test makes one contract method fail after it
//! has taken its locks, then looks at `pg_locks` from a second connection.
//!
//! The look happens on another thread while this test's (current-thread)
//! runtime is blocked, so nothing queued on the runtime can run in between:
//! a transaction that was only dropped, with its rollback left to a
//! background task, still holds its locks when the look happens. Only a
//! rollback the call itself awaited before answering passes.
#![cfg(feature = "postgres")]

mod postgres_common;

use std::collections::BTreeSet;

use connreg::contracts::{CatalogAdmin, CatalogRead, Operations, ReplicaLifecycle, Routing};
use connreg::postgres::PgRegistry;
use connreg::request::CircuitCloseParams;
use connreg::{
    Binding, CapabilityDefinition, CatalogQuery, Change, Error, HeartbeatParams, MaintainParams,
    ManualClock, Outcome, Publication, Reader, RegisterParams, SettleParams,
};
use postgres_common::{CAPABILITY, FleetOptions, PgFixture, opaque};
use postgres_common::{publish_fleet, request};
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection};

/// Every lock held in the test database by a session other than the
/// observer, read on a separate thread while the caller's runtime is
/// blocked.
fn locks_held_now(admin: &PgConnectOptions, database: &str) -> Vec<String> {
    let admin = admin.clone();
    let database = database.to_owned();
    #[allow(
        clippy::disallowed_methods,
        reason = "the observer must run while the test's runtime cannot"
    )]
    let observer = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("an observer runtime");
        runtime.block_on(async move {
            let mut conn = PgConnection::connect_with(&admin)
                .await
                .expect("the observer connects");
            sqlx::query_scalar::<_, String>(
                "SELECT a.application_name || ' ' || a.state || ': ' || l.locktype || ' '
                        || l.mode || COALESCE(' ' || l.relation::regclass::text, '')
                        || COALESCE(' ' || l.classid || '/' || l.objid, '')
                   FROM pg_locks l
                   JOIN pg_stat_activity a ON a.pid = l.pid
                  WHERE a.datname = $1 AND l.pid <> pg_backend_pid()
                    AND l.locktype <> 'virtualxid'
                  ORDER BY 1",
            )
            .bind(database)
            .fetch_all(&mut conn)
            .await
            .expect("pg_locks is readable")
        })
    });
    observer.join().expect("the observer thread")
}

/// A registry on a fresh database with one tenant, one instance and three
/// replicas of capacity 1, and the fixture to look at it.
async fn fleet() -> (PgFixture, PgRegistry, ManualClock) {
    let fx = PgFixture::new().await;
    let (registry, clock) = fx.registry_at_zero().await;
    publish_fleet(
        &registry,
        &FleetOptions {
            tenant_scope_limit: Some(10),
            ..FleetOptions::default()
        },
    )
    .await;
    for n in 0..3 {
        registry
            .replica_register(register_params(&format!("t0-i0-r{n}"), 1))
            .await
            .expect("the replica registers");
    }
    (fx, registry, clock)
}

fn register_params(id: &str, health_seq: u64) -> RegisterParams {
    postgres_common::register_params(id, "t0-i0", 1, health_seq, 30_000)
}

fn assert_no_locks(fx: &PgFixture, after: &str) {
    let held = locks_held_now(&fx.admin, fx.database_name());
    assert!(
        held.is_empty(),
        "after {after}, the failed call still holds locks: {held:#?}"
    );
}

#[tokio::test]
async fn settle_with_a_tampered_assignment_holds_no_lock_after_fence_lost() {
    // spec: SETTLE-2
    let (fx, registry, _clock) = fleet().await;
    let resolved = registry.route_resolve(request("a-1", "t0")).await.unwrap();
    let mut tampered = resolved.assignment.clone();
    tampered.reservation.fence.0 += 1;
    let answer = registry
        .route_settle(SettleParams {
            assignment: tampered,
            outcome: Outcome::Completed,
        })
        .await;
    assert_eq!(answer, Err(Error::FenceLost));
    assert_no_locks(&fx, "a settlement answered FenceLost");
}

#[tokio::test]
async fn settle_of_an_unknown_action_holds_no_lock_after_fence_lost() {
    // spec: SETTLE-2
    let (fx, registry, _clock) = fleet().await;
    let resolved = registry.route_resolve(request("a-1", "t0")).await.unwrap();
    let mut other = resolved.assignment.clone();
    other.identity.action = "a-never-resolved".try_into().unwrap();
    let answer = registry
        .route_settle(SettleParams {
            assignment: other,
            outcome: Outcome::Completed,
        })
        .await;
    assert_eq!(answer, Err(Error::FenceLost));
    assert_no_locks(&fx, "a settlement of an unknown action");
}

#[tokio::test]
async fn resolve_holds_no_lock_after_no_capacity() {
    // spec: ROUTE-6
    let (fx, registry, _clock) = fleet().await;
    for n in 0..3 {
        registry
            .route_resolve(request(&format!("fill-{n}"), "t0"))
            .await
            .unwrap();
    }
    let answer = registry.route_resolve(request("one-too-many", "t0")).await;
    assert_eq!(answer.map(|r| r.kind), Err(Error::NoCapacity));
    assert_no_locks(&fx, "a resolve answered NoCapacity");
}

#[tokio::test]
async fn heartbeat_of_an_offline_replica_holds_no_lock() {
    // spec: LEASE-1
    let (fx, registry, _clock) = fleet().await;
    let mut admin = fx.admin_conn().await;
    sqlx::query("UPDATE connreg.replicas SET state = 'offline' WHERE replica_id = 't0-i0-r0'")
        .execute(&mut admin)
        .await
        .unwrap();
    let answer = registry
        .replica_heartbeat(HeartbeatParams {
            replica: "t0-i0-r0".try_into().unwrap(),
            health_seq: 2,
            lease_ttl_ms: 30_000,
        })
        .await;
    assert_eq!(answer, Err(Error::ReplicaUnavailable));
    assert_no_locks(&fx, "a heartbeat answered ReplicaUnavailable");
}

#[tokio::test]
async fn heartbeat_past_the_sequence_bound_holds_no_lock() {
    // spec: LEASE-1
    let (fx, registry, _clock) = fleet().await;
    let answer = registry
        .replica_heartbeat(HeartbeatParams {
            replica: "t0-i0-r0".try_into().unwrap(),
            health_seq: u64::MAX,
            lease_ttl_ms: 30_000,
        })
        .await;
    assert!(
        matches!(
            answer,
            Err(Error::LimitExceeded { .. } | Error::InvalidRequest { .. })
        ),
        "{answer:?}"
    );
    assert_no_locks(&fx, "a heartbeat past the sequence bound");
}

#[tokio::test]
async fn register_with_another_identity_holds_no_lock_after_conflict() {
    // spec: LEASE-1, REC-5
    let (fx, registry, _clock) = fleet().await;
    let mut params = register_params("t0-i0-r0", 5);
    params.spec.endpoint = "https://elsewhere".into();
    let answer = registry.replica_register(params).await;
    assert!(matches!(answer, Err(Error::Conflict { .. })), "{answer:?}");
    assert_no_locks(&fx, "a registration answered Conflict");
}

#[tokio::test]
async fn register_for_an_unknown_instance_holds_no_lock_after_not_found() {
    // spec: LEASE-1
    let (fx, registry, _clock) = fleet().await;
    let mut params = register_params("t9-r0", 1);
    params.spec.instance = "t9-i-unknown".try_into().unwrap();
    let answer = registry.replica_register(params).await;
    assert!(matches!(answer, Err(Error::NotFound { .. })), "{answer:?}");
    assert_no_locks(&fx, "a registration answered NotFound");
}

#[tokio::test]
async fn circuit_close_of_a_closed_circuit_holds_no_lock_after_conflict() {
    // spec: SETTLE-6
    let (fx, registry, _clock) = fleet().await;
    let answer = registry
        .circuit_close(CircuitCloseParams {
            replica: "t0-i0-r0".try_into().unwrap(),
            reason: "test".into(),
        })
        .await;
    assert!(matches!(answer, Err(Error::Conflict { .. })), "{answer:?}");
    assert_no_locks(&fx, "a circuit close answered Conflict");
}

#[tokio::test]
async fn drain_and_maintenance_hold_no_lock_after_bad_input() {
    // spec: LEASE-1, LEASE-2
    let (fx, registry, _clock) = fleet().await;
    let answer = registry
        .replica_drain("t0-i0-r-unknown".try_into().unwrap())
        .await;
    assert!(matches!(answer, Err(Error::NotFound { .. })), "{answer:?}");
    assert_no_locks(&fx, "a drain answered NotFound");
    let answer = registry.lease_maintain(MaintainParams { max: 0 }).await;
    assert!(answer.is_err(), "{answer:?}");
    assert_no_locks(&fx, "maintenance refused its bound");
}

#[tokio::test]
async fn failed_publication_holds_no_catalog_lock() {
    // spec: CAT-2, CAT-4
    let (fx, registry, _clock) = fleet().await;
    let answer = registry
        .catalog_publish(Publication {
            changes: vec![Change::UpsertBinding(Binding {
                id: "t0-b-broken".try_into().unwrap(),
                tenant: "t0".try_into().unwrap(),
                capability: CAPABILITY.try_into().unwrap(),
                instance: "t0-i-missing".try_into().unwrap(),
                priority: 1,
                policy_revision: 1,
                credential: opaque("credential"),
                quota_policy: None,
                admission_scopes: BTreeSet::new(),
                enabled: true,
            })],
        })
        .await;
    assert!(answer.is_err(), "{answer:?}");
    assert_no_locks(&fx, "a failed publication");
}

#[tokio::test]
async fn stale_cursor_holds_no_catalog_lock() {
    // spec: CAT-9
    let (fx, registry, _clock) = fleet().await;
    let definitions = ["crm.a", "crm.b"].map(|id| {
        Change::UpsertDefinition(CapabilityDefinition {
            id: id.try_into().unwrap(),
            summary: "more".into(),
            schema: "{}".into(),
            active: true,
        })
    });
    registry
        .catalog_publish(Publication {
            changes: definitions.to_vec(),
        })
        .await
        .unwrap();
    let query = CatalogQuery {
        page_items: Some(1),
        ..CatalogQuery::first_page(Reader::Internal {
            include_unbound: true,
        })
    };
    let page = registry.catalog_page(query.clone()).await.unwrap();
    assert!(page.next.is_some(), "one item a page leaves a second page");
    publish_fleet(&registry, &FleetOptions::default()).await;
    let answer = registry
        .catalog_page(CatalogQuery {
            cursor: page.next.clone(),
            ..query
        })
        .await;
    assert!(matches!(answer, Err(Error::StaleCursor)), "{answer:?}");
    assert_no_locks(&fx, "a page answered StaleCursor");
}

#[tokio::test]
async fn observer_sees_a_lock_that_is_really_held() {
    // The check above must be able to fail: a transaction left open holds
    // its locks, and the observer reports them.
    let (fx, registry, clock) = fleet().await;
    let _ = (registry, clock);
    let mut holder = fx.data_conn().await;
    // The data role can take row locks only through its functions: a drain
    // inside a transaction left open holds the replica's row.
    sqlx::raw_sql("BEGIN; SELECT connreg.data_replica_drain('t0-i0-r0')")
        .execute(&mut holder)
        .await
        .unwrap();
    let held = locks_held_now(&fx.admin, fx.database_name());
    assert!(!held.is_empty(), "the observer missed an open transaction");
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut holder)
        .await
        .unwrap();
    assert!(locks_held_now(&fx.admin, fx.database_name()).is_empty());
}
