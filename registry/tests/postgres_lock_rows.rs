//! Goal: the protocol's lock rows (`connreg.protocol_locks`, unlogged since
//! migration 0017) still exclude after a crash or a promotion empties their
//! table: the first call that needs a row makes the table whole again and
//! locks it, lease maintenance makes it whole before it locks anything, and
//! the data role can do neither itself (AUTH-6).
//!
//! A crash leaves an unlogged table as `TRUNCATE` does (empty, its indexes
//! empty), which is how these tests empty it. The simulator's database
//! restarts and failovers (scenario 0018, the swarm's failovers) run the
//! same path on a real crash and a real promotion.
#![cfg(feature = "postgres")]

mod postgres_common;

use connreg::contracts::{ReplicaLifecycle, Routing};
use connreg::postgres::{LOCK_CLASS_ACTION, PROTOCOL_LOCK_SLOTS, PgRegistry, lock_slot};
use connreg::{MaintainParams, ManualClock, RegistryConfig, ResolveKind, Timestamp};
use postgres_common::{FleetOptions, PgFixture, bulk_replicas, publish_fleet, refusal, request};
use sqlx::PgConnection;

/// Every row the table holds when whole: two classes of slots.
const ROWS_WHOLE: i64 = 2 * PROTOCOL_LOCK_SLOTS as i64;

async fn rows(admin: &mut PgConnection) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM connreg.protocol_locks")
        .fetch_one(admin)
        .await
        .expect("the lock table is readable")
}

async fn empty_the_lock_table(admin: &mut PgConnection) {
    sqlx::raw_sql("TRUNCATE connreg.protocol_locks")
        .execute(&mut *admin)
        .await
        .expect("the admin empties the lock table");
    assert_eq!(rows(admin).await, 0);
}

/// A registry whose reservations are held for `hold_ms`, with one tenant
/// and eight ready replicas on long leases.
async fn fleet(fx: &PgFixture, hold_ms: u64) -> (PgRegistry, ManualClock) {
    let clock = ManualClock::new(Timestamp(0));
    let config = RegistryConfig {
        reservation_hold_ms: hold_ms,
        ..RegistryConfig::default()
    };
    let registry = PgRegistry::connect(fx.options(), clock.clone(), config)
        .await
        .expect("the registry starts");
    publish_fleet(&registry, &FleetOptions::default()).await;
    let mut admin = fx.admin_conn().await;
    bulk_replicas(&mut admin, "t0-i0", 8, 100, 600_000).await;
    (registry, clock)
}

#[tokio::test]
async fn the_lock_table_is_unlogged_and_whole_after_migrating() {
    // spec: LOCK-1
    let fx = PgFixture::new().await;
    let _registry = fx.registry_at_zero().await;
    let mut admin = fx.admin_conn().await;
    let persistence: String = sqlx::query_scalar(
        "SELECT relpersistence::text FROM pg_class WHERE oid = 'connreg.protocol_locks'::regclass",
    )
    .fetch_one(&mut admin)
    .await
    .unwrap();
    assert_eq!(persistence, "u", "a lock of a logged row is a WAL record");
    assert_eq!(rows(&mut admin).await, ROWS_WHOLE);
}

#[tokio::test]
async fn an_action_lock_excludes_after_its_table_was_emptied() {
    // spec: LOCK-1, ROUTE-3
    let fx = PgFixture::new().await;
    let _registry = fx.registry_at_zero().await;
    let mut admin = fx.admin_conn().await;
    empty_the_lock_table(&mut admin).await;

    let mut holder = fx.admin_conn().await;
    sqlx::raw_sql("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query("SELECT connreg.protocol_lock($1, 'held')")
        .bind(LOCK_CLASS_ACTION)
        .execute(&mut holder)
        .await
        .expect("the first lock after the table was emptied is taken");

    // A second session asking for the same action's lock waits for the
    // holder: here until its own short lock timeout.
    let mut waiter = fx.admin_conn().await;
    let refused = refusal(&mut waiter, &lock_within_300_ms("held")).await;
    assert_eq!(
        refused.as_deref(),
        Some("55P03"),
        "the action's lock must exclude while another session holds it"
    );
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut waiter)
        .await
        .unwrap();
    // Until the refill commits every lock waits for it, as the refill of a
    // session that finds the table empty waits for the first one.
    let refused = refusal(&mut waiter, &lock_within_300_ms("another")).await;
    assert_eq!(refused.as_deref(), Some("55P03"));
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut waiter)
        .await
        .unwrap();

    sqlx::raw_sql("COMMIT").execute(&mut holder).await.unwrap();
    assert_eq!(
        rows(&mut admin).await,
        ROWS_WHOLE,
        "one refill makes every row"
    );
    // Whole again, the table locks one action at a time.
    sqlx::raw_sql("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query("SELECT connreg.protocol_lock($1, 'held')")
        .bind(LOCK_CLASS_ACTION)
        .execute(&mut holder)
        .await
        .unwrap();
    let refused = refusal(&mut waiter, &lock_within_300_ms("held")).await;
    assert_eq!(refused.as_deref(), Some("55P03"));
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut waiter)
        .await
        .unwrap();
    let free = refusal(&mut waiter, &lock_within_300_ms("another")).await;
    assert_eq!(free, None, "an unrelated action's lock is free");
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut waiter)
        .await
        .unwrap();
    sqlx::raw_sql("COMMIT").execute(&mut holder).await.unwrap();
}

/// A transaction left open that takes `action`'s lock, waiting at most
/// 300 ms for it.
fn lock_within_300_ms(action: &str) -> String {
    format!(
        "BEGIN; SET LOCAL lock_timeout = '300ms'; \
         SELECT connreg.protocol_lock({LOCK_CLASS_ACTION}, '{action}')"
    )
}

#[tokio::test]
async fn a_resolve_and_maintenance_each_refill_an_emptied_table() {
    // spec: LEASE-2, PIN-8, LOCK-1
    let fx = PgFixture::new().await;
    let (registry, clock) = fleet(&fx, 1_000).await;
    let mut admin = fx.admin_conn().await;

    empty_the_lock_table(&mut admin).await;
    let held = registry
        .route_resolve(request("a-held", "t0"))
        .await
        .unwrap();
    assert_eq!(held.kind, ResolveKind::Created);
    assert_eq!(rows(&mut admin).await, ROWS_WHOLE, "the resolve refilled");

    // Emptied again, as a crash would leave it with the reservation held:
    // maintenance, the first call after it, refills before it locks, and
    // releases the reservation past its hold under the action's lock.
    empty_the_lock_table(&mut admin).await;
    clock.set(Timestamp(5_000));
    let maintained = registry
        .lease_maintain(MaintainParams { max: 10 })
        .await
        .unwrap();
    assert_eq!(maintained.released, 1, "{maintained:?}");
    assert_eq!(maintained.releases.len(), 1, "{maintained:?}");
    assert_eq!(maintained.releases[0].action.as_str(), "a-held");
    assert!(!maintained.more, "{maintained:?}");
    assert_eq!(rows(&mut admin).await, ROWS_WHOLE, "maintenance refilled");
}

#[tokio::test]
async fn the_data_role_can_neither_refill_nor_insert_lock_rows() {
    // spec: AUTH-6
    let fx = PgFixture::new().await;
    let _registry = fx.registry_at_zero().await;
    let mut data = fx.data_conn().await;
    for statement in [
        "SELECT connreg.protocol_locks_refill()",
        "INSERT INTO connreg.protocol_locks VALUES (1668182530, 0) ON CONFLICT DO NOTHING",
        "SELECT connreg.protocol_lock(1668182530, 'a')",
    ] {
        assert_eq!(
            refusal(&mut data, statement).await.as_deref(),
            Some("42501"),
            "{statement}"
        );
    }
}

#[tokio::test]
async fn maintenance_never_releases_a_hold_whose_lock_row_is_missing() {
    // spec: PIN-8, LOCK-1
    let fx = PgFixture::new().await;
    let (registry, clock) = fleet(&fx, 1_000).await;
    let mut admin = fx.admin_conn().await;
    let held = registry
        .route_resolve(request("a-held", "t0"))
        .await
        .unwrap();
    assert_eq!(held.kind, ResolveKind::Created);

    // One row gone while the rest stay (no refill at maintenance's start):
    // the reservation is skipped as a busy one is, not released unlocked.
    sqlx::query("DELETE FROM connreg.protocol_locks WHERE lock_class = $1 AND slot = $2")
        .bind(LOCK_CLASS_ACTION)
        .bind(lock_slot("a-held"))
        .execute(&mut admin)
        .await
        .unwrap();
    clock.set(Timestamp(5_000));
    let maintained = registry
        .lease_maintain(MaintainParams { max: 10 })
        .await
        .unwrap();
    assert_eq!(maintained.released, 0, "{maintained:?}");
    assert!(maintained.more, "the skipped hold is left for another call");

    // The next call that locks the action makes its row again (a held
    // route's `existing` answer locks nothing); then maintenance can.
    sqlx::query("SELECT connreg.protocol_lock($1, 'a-held')")
        .bind(LOCK_CLASS_ACTION)
        .execute(&mut admin)
        .await
        .unwrap();
    assert_eq!(rows(&mut admin).await, ROWS_WHOLE);
    let maintained = registry
        .lease_maintain(MaintainParams { max: 10 })
        .await
        .unwrap();
    assert_eq!(maintained.released, 1, "{maintained:?}");
    assert!(!maintained.more, "{maintained:?}");
}
