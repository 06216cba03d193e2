//! Goal: the resolve, the settlement and the other writers of this backend
//! cannot wait for each other in a cycle (LOCK-1), replayed step by step
//! with sessions that hold rows at chosen moments.
//!
//! The layout: binding B1 (priority 1, scopes s-b1 with limit 1 and
//! s-tenant, one replica R1) and binding B2 (priority 2, scopes s-b2 and
//! s-tenant, replicas R2 and R3); action x is reserved on R3. Scope ids sort
//! as s-b1 < s-b2 < s-tenant, the order counters are locked in.
#![cfg(feature = "postgres")]

mod postgres_common;

use std::time::Duration;

use connreg::contracts::{CatalogAdmin, ReplicaLifecycle, Routing};
use connreg::plant::PgPlant;
use connreg::postgres::PgRegistry;
use connreg::{
    AdmissionScope, Binding, Change, Instance, ManualClock, Outcome, Publication, RegisterParams,
    ResolveKind, RouteAssignment, ScopeKind, SettleParams, Settled, Timestamp,
};
use postgres_common::{
    PgFixture, VERSION, fleet_publication, opaque, register_params, request, until_waiting,
};
use sqlx::PgConnection;

fn scope(id: &str, limit: u32) -> Change {
    Change::UpsertScope(AdmissionScope {
        id: id.try_into().unwrap(),
        tenant: "t0".try_into().unwrap(),
        kind: ScopeKind::Binding,
        limit,
    })
}

fn instance(id: &str) -> Change {
    Change::UpsertInstance(Instance {
        id: id.try_into().unwrap(),
        tenant: "t0".try_into().unwrap(),
        version: VERSION.try_into().unwrap(),
        config: opaque("config"),
        secret_provider: opaque("vault:kv/crm"),
        enabled: true,
    })
}

fn binding(id: &str, instance: &str, priority: u32, scopes: [&str; 2]) -> Change {
    Change::UpsertBinding(Binding {
        id: id.try_into().unwrap(),
        tenant: "t0".try_into().unwrap(),
        capability: postgres_common::CAPABILITY.try_into().unwrap(),
        instance: instance.try_into().unwrap(),
        priority,
        policy_revision: 1,
        credential: opaque("credential"),
        quota_policy: None,
        admission_scopes: scopes.iter().map(|s| (*s).try_into().unwrap()).collect(),
        enabled: true,
    })
}

fn register(id: &str, instance: &str, health_seq: u64) -> RegisterParams {
    register_params(id, instance, 2, health_seq, 600_000)
}

/// The layout above, with x reserved on R3.
async fn layout(fx: &PgFixture) -> (PgRegistry, RouteAssignment) {
    let registry = fx.registry(ManualClock::new(Timestamp(0))).await;
    // The fixture's type, definition and version, without its bindings.
    let mut changes: Vec<Change> = fleet_publication(&postgres_common::FleetOptions {
        tenants: 0,
        ..Default::default()
    })
    .changes;
    changes.extend([
        scope("s-b1", 1),
        scope("s-b2", 100),
        scope("s-tenant", 100),
        instance("i1"),
        instance("i2"),
        binding("b1", "i1", 1, ["s-b1", "s-tenant"]),
        binding("b2", "i2", 2, ["s-b2", "s-tenant"]),
    ]);
    registry
        .catalog_publish(Publication { changes })
        .await
        .expect("the layout publishes");
    for (id, instance) in [("r1", "i1"), ("r2", "i2"), ("r3", "i2")] {
        registry
            .replica_register(register(id, instance, 1))
            .await
            .unwrap();
    }
    // x goes to R3: R1 and R2 drained while it is decided, then back.
    registry
        .replica_drain("r1".try_into().unwrap())
        .await
        .unwrap();
    registry
        .replica_drain("r2".try_into().unwrap())
        .await
        .unwrap();
    let x = registry.route_resolve(request("x", "t0")).await.unwrap();
    assert_eq!(x.assignment.destination.replica.as_str(), "r3");
    registry
        .replica_register(register("r1", "i1", 2))
        .await
        .unwrap();
    registry
        .replica_register(register("r2", "i2", 2))
        .await
        .unwrap();
    (registry, x.assignment)
}

/// A session of the superuser with an open transaction.
async fn session(fx: &PgFixture) -> PgConnection {
    let mut conn = fx.admin_conn().await;
    sqlx::query("BEGIN").execute(&mut conn).await.unwrap();
    conn
}

async fn commit(mut conn: PgConnection) {
    sqlx::query("COMMIT").execute(&mut conn).await.unwrap();
}

/// The settlement of `assignment` as completed, on a task of its own.
fn settle_in_background(
    registry: &PgRegistry,
    assignment: RouteAssignment,
) -> tokio::task::JoinHandle<connreg::Result<Settled>> {
    let registry = registry.clone();
    tokio::spawn(async move {
        registry
            .route_settle(SettleParams {
                assignment,
                outcome: Outcome::Completed,
            })
            .await
    })
}

/// A resolve of `action` for tenant t0, on a task of its own.
fn resolve_in_background(
    registry: &PgRegistry,
    action: &'static str,
) -> tokio::task::JoinHandle<connreg::Result<connreg::Resolved>> {
    let registry = registry.clone();
    tokio::spawn(async move { registry.route_resolve(request(action, "t0")).await })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn abandoned_binding_releases_its_locks_so_no_settle_deadlocks() {
    // spec: LOCK-1, LOCK-2, SETTLE-3, ROUTE-6
    let fx = PgFixture::new().await;
    let (registry, x) = layout(&fx).await;
    let mut admin = fx.admin_conn().await;

    // W holds s-b2, X takes s-b1's last unit, Y holds R2.
    let mut w = session(&fx).await;
    sqlx::query("SELECT 1 FROM connreg.admission_counters WHERE scope_id = 's-b2' FOR UPDATE")
        .execute(&mut w)
        .await
        .unwrap();
    let mut x_session = session(&fx).await;
    sqlx::query(
        "UPDATE connreg.admission_counters SET in_use = in_use + 1 WHERE scope_id = 's-b1'",
    )
    .execute(&mut x_session)
    .await
    .unwrap();
    let mut y = session(&fx).await;
    sqlx::query("SELECT 1 FROM connreg.replicas WHERE replica_id = 'r2' FOR UPDATE")
        .execute(&mut y)
        .await
        .unwrap();

    // The settlement of x: action lock, R3, then waits for s-b2.
    let settling = settle_in_background(&registry, x);
    until_waiting(&mut admin, 1).await;
    // A new action: B1 is best; it waits for s-b1.
    let resolving = resolve_in_background(&registry, "n");
    until_waiting(&mut admin, 2).await;
    // X commits: B1 has no room left; the resolve moves on to B2.
    commit(x_session).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    // W commits: the settlement gets s-b2 and goes on to s-tenant.
    commit(w).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Y commits: R2 is free again.
    commit(y).await;

    let settled = settling.await.unwrap();
    let resolved = resolving.await.unwrap();
    assert_eq!(
        settled,
        Ok(Settled { released: true }),
        "the settlement of x"
    );
    let resolved = resolved.expect("the new action is routed through B2");
    assert_eq!(resolved.kind, ResolveKind::Created);
    assert_eq!(resolved.assignment.destination.binding.as_str(), "b2");
    let deadlocks: i64 = sqlx::query_scalar(
        "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()",
    )
    .fetch_one(&mut admin)
    .await
    .unwrap();
    assert_eq!(deadlocks, 0, "PostgreSQL broke a lock cycle");
}

/// A pinned retry that finds its replica held waits for it holding
/// nothing, then decides again, while a settlement of another action on
/// that replica runs beside it. Returns the two answers.
async fn pinned_retry_beside_a_settlement()
-> (connreg::Result<connreg::Resolved>, connreg::Result<Settled>) {
    let fx = PgFixture::new().await;
    let (registry, x) = layout(&fx).await;
    let mut admin = fx.admin_conn().await;
    // y on R3 too, released: its next resolve is a pinned retry.
    registry
        .replica_drain("r1".try_into().unwrap())
        .await
        .unwrap();
    registry
        .replica_drain("r2".try_into().unwrap())
        .await
        .unwrap();
    let y = registry.route_resolve(request("y", "t0")).await.unwrap();
    assert_eq!(y.assignment.destination.replica.as_str(), "r3");
    registry
        .route_settle(SettleParams {
            assignment: y.assignment,
            outcome: Outcome::Completed,
        })
        .await
        .unwrap();

    // Z holds R3.
    let mut z = session(&fx).await;
    sqlx::query("SELECT 1 FROM connreg.replicas WHERE replica_id = 'r3' FOR UPDATE")
        .execute(&mut z)
        .await
        .unwrap();
    // The retry of y: counters, then R3 without waiting (held): the next
    // round waits for R3 holding nothing.
    let retrying = resolve_in_background(&registry, "y");
    until_waiting(&mut admin, 1).await;
    // The settlement of x on R3 queues behind it.
    let settling = settle_in_background(&registry, x);
    until_waiting(&mut admin, 2).await;
    commit(z).await;
    (retrying.await.unwrap(), settling.await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pinned_retry_and_settlement_on_one_replica_take_turns() {
    // spec: LOCK-1, PIN-3, SETTLE-3
    let (retried, settled) = pinned_retry_beside_a_settlement().await;
    assert_eq!(retried.map(|r| r.kind), Ok(ResolveKind::Reserved));
    assert_eq!(settled, Ok(Settled { released: true }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn settlement_against_the_lock_order_is_caught() {
    // spec: LOCK-1
    // Two settlements on R3, x's in order (replica, then counters) and y's
    // planted against it (counters, then replica). x's waits for R3 first;
    // when R3 is free it holds R3 and waits for the counters y's holds,
    // while y's waits for R3: a cycle, ended by PostgreSQL's deadlock check
    // or a lock timeout. Both cannot be released.
    let fx = PgFixture::new().await;
    let (registry, x) = layout(&fx).await;
    let planted = fx
        .registry(ManualClock::new(Timestamp(0)))
        .await
        .with_plant(PgPlant::SettleLocksCountersFirst)
        .await
        .expect("the plant installs");
    let mut admin = fx.admin_conn().await;
    for r in ["r1", "r2"] {
        registry.replica_drain(r.try_into().unwrap()).await.unwrap();
    }
    let y = registry.route_resolve(request("y", "t0")).await.unwrap();
    assert_eq!(y.assignment.destination.replica.as_str(), "r3");

    let mut z = session(&fx).await;
    sqlx::query("SELECT 1 FROM connreg.replicas WHERE replica_id = 'r3' FOR UPDATE")
        .execute(&mut z)
        .await
        .unwrap();
    let in_order = settle_in_background(&registry, x);
    until_waiting(&mut admin, 1).await;
    let against = settle_in_background(&planted, y.assignment);
    until_waiting(&mut admin, 2).await;
    commit(z).await;
    let (in_order, against) = (in_order.await.unwrap(), against.await.unwrap());
    let released = Ok(Settled { released: true });
    assert!(
        in_order != released || against != released,
        "the planted lock order went unnoticed: {in_order:?}, {against:?}"
    );
}
