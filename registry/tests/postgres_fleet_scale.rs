//! Goal: the PostgreSQL backend keeps its bounds at fleet scale and under
//! contention.
//!
//! * Lease maintenance releases at most a fixed number of reservations per
//!   call, however many an expired fleet holds, so every call finishes
//!   within the data role's statement timeout and the fleet drains in a
//!   predictable number of calls (LEASE-2, LOCK-6).
//! * No resolve holds a replica row while it waits for an admission
//!   counter, so a heartbeat of that replica is never held up by a counter
//!   someone else holds (LOCK-3).
//! * A resolve that observes commit order never answers a route as held
//!   while an uncommitted maintenance is releasing it (LOCK-5).
//! * Publications land while a full data pool resolves for one tenant
//!   (LOCK-4, LOCK-6).
//! * The data role cannot take the locks the data-plane functions rely
//!   on, and a session that switched its own timeouts off still gets
//!   bounded waits (AUTH-6, LOCK-6).
//!
//! Large fleets are seeded with set-based SQL as the admin, in the shape the
//! decision writes (one snapshot per replica, held routes pointing at it,
//! replica and scope counts to match), not by thousands of calls.
#![cfg(feature = "postgres")]

mod postgres_common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use connreg::contracts::{CatalogAdmin, ReplicaLifecycle, Routing, Status};
use connreg::limits::LEASE_MAINTENANCE_BATCH_MAX;
use connreg::postgres::{PgRegistry, observe_commit};
use connreg::{
    Binding, Change, Error, HeartbeatOutcome, HeartbeatParams, MaintainParams, ManualClock,
    Outcome, Publication, ResolveKind, SettleParams,
};
use postgres_common::{
    CAPABILITY, CLASS, FleetOptions, PgFixture, VERSION, bulk_replicas, opaque, publish_fleet,
    register_params, request,
};
use sqlx::PgConnection;

/// Most reservations one lease maintenance call releases.
const RESERVATIONS_MAX: u64 = connreg::limits::LEASE_MAINTENANCE_RESERVATIONS_MAX as u64;

/// The fixture fleet's only instance and binding, and its tenant's scope.
const INSTANCE: &str = "t0-i0";
const BINDING: &str = "t0-b0";
const SCOPE: &str = "t0-s";

/// Turns a hang into a failure; never a statement about speed.
const HANG_BOUND: Duration = Duration::from_secs(60);

/// Polls of the lock observers, 5 ms apart.
const POLLS_MAX: u32 = 1_000;

/// Where every seeded replica's lease ends.
const SEEDED_LEASE_END_MS: i64 = 1;
/// Where the clock stands when maintenance runs over a seeded fleet.
const AFTER_SEEDED_LEASES_MS: u64 = 1_000;

/// Awaits `call`, failing the test if it does not answer within
/// [`HANG_BOUND`].
async fn bounded<F: std::future::Future>(what: &str, call: F) -> F::Output {
    tokio::time::timeout(HANG_BOUND, call)
        .await
        .unwrap_or_else(|_| panic!("{what} did not answer within {HANG_BOUND:?}"))
}

// ---------------------------------------------------------------------------
// Seeding an expired fleet
// ---------------------------------------------------------------------------

/// Seeds `replicas` ready replicas of the fixture instance, each with
/// capacity `routes_per_replica` and full: one route snapshot per replica,
/// `routes_per_replica` held routes on it (fences from the store's own
/// sequence, attempt 1, the tenant scope), and the replicas' `active` and
/// the scope's counter set to match. Every lease ends at
/// [`SEEDED_LEASE_END_MS`]. Runs as the admin, in one transaction.
async fn seed_held_reservations(
    admin: &mut PgConnection,
    replicas: usize,
    routes_per_replica: u32,
) {
    sqlx::query("BEGIN").execute(&mut *admin).await.unwrap();
    bulk_replicas(
        &mut *admin,
        INSTANCE,
        replicas,
        routes_per_replica,
        SEEDED_LEASE_END_MS,
    )
    .await;
    // The snapshot a decision would write for the fleet's binding on each
    // replica at the current catalog revision.
    sqlx::query(
        "INSERT INTO connreg.route_snapshots (
             tenant_id, capability_id, binding_id, instance_id, version_id, type_id,
             replica_id, endpoint, peer_identity, region, zone, catalog_revision,
             binding_priority, policy_revision, credential_ref, credential_revision,
             secret_provider_ref, secret_provider_revision, quota_policy_ref,
             quota_policy_revision, capacity_class, scopes)
         SELECT 't0', $1, $2, r.instance_id, $3, 'crm', r.replica_id, r.endpoint,
                r.peer_identity, r.region, r.zone, cs.revision, 1, 1, 'credential', 1,
                'vault:kv/crm', 1, NULL, NULL, $4, ARRAY[$6]::text[]
           FROM connreg.replicas r, connreg.catalog_state cs
          WHERE r.instance_id = $5
          ORDER BY r.replica_id",
    )
    .bind(CAPABILITY)
    .bind(BINDING)
    .bind(VERSION)
    .bind(CLASS)
    .bind(INSTANCE)
    .bind(SCOPE)
    .execute(&mut *admin)
    .await
    .expect("the route snapshots insert");
    sqlx::query(
        "INSERT INTO connreg.assignments (snapshot_id, fence, attempt, reserved, action_id,
                                          last_settlement)
         SELECT s.snapshot_id, nextval('connreg.fence_tokens'), 1, true,
                'held-' || s.replica_id || '-' || k, NULL
           FROM connreg.route_snapshots s, generate_series(1, $1) AS k
          WHERE s.binding_id = $2
          ORDER BY s.replica_id, k",
    )
    .bind(i64::from(routes_per_replica))
    .bind(BINDING)
    .execute(&mut *admin)
    .await
    .expect("the held routes insert");
    sqlx::query("UPDATE connreg.replicas SET active = $1 WHERE instance_id = $2")
        .bind(i64::from(routes_per_replica))
        .bind(INSTANCE)
        .execute(&mut *admin)
        .await
        .unwrap();
    sqlx::query("UPDATE connreg.admission_counters SET in_use = in_use + $1 WHERE scope_id = $2")
        .bind(replicas as i64 * i64::from(routes_per_replica))
        .bind(SCOPE)
        .execute(&mut *admin)
        .await
        .unwrap();
    sqlx::query("COMMIT").execute(&mut *admin).await.unwrap();
    // A store that grew to this size has been analyzed by autovacuum; the
    // test does not wait for autovacuum's schedule.
    sqlx::raw_sql(
        "ANALYZE connreg.replicas; ANALYZE connreg.route_snapshots;
         ANALYZE connreg.assignments; ANALYZE connreg.admission_counters",
    )
    .execute(&mut *admin)
    .await
    .unwrap();
}

/// A registry whose fleet (tenant scope limit 1,000,000, so the counter
/// moves with every release) has `replicas` full replicas of
/// `routes_per_replica` reservations each, all leases ended; the clock
/// stands after them.
async fn expired_fleet(
    replicas: usize,
    routes_per_replica: u32,
) -> (PgFixture, PgRegistry, ManualClock) {
    let fx = PgFixture::new().await;
    let (registry, clock) = fx.registry_at_zero().await;
    publish_fleet(
        &registry,
        &FleetOptions {
            tenant_scope_limit: Some(1_000_000),
            ..FleetOptions::default()
        },
    )
    .await;
    let mut admin = fx.admin_conn().await;
    seed_held_reservations(&mut admin, replicas, routes_per_replica).await;
    clock.advance_ms(AFTER_SEEDED_LEASES_MS);
    (fx, registry, clock)
}

/// What one maintenance call answered.
#[derive(Debug)]
struct Batch {
    expired: Vec<String>,
    released: u64,
    more: bool,
}

/// Lease maintenance with the largest batch, called until it reports no
/// more expired replicas, at most `calls_max` times. Every call must
/// answer, and release at most [`RESERVATIONS_MAX`].
async fn maintain_until_done(registry: &PgRegistry, calls_max: usize) -> Vec<Batch> {
    let mut batches = Vec::new();
    for call in 1..=calls_max {
        let maintained = bounded(
            "lease maintenance",
            registry.lease_maintain(MaintainParams {
                max: LEASE_MAINTENANCE_BATCH_MAX,
            }),
        )
        .await
        .unwrap_or_else(|e| {
            panic!("maintenance call {call} answered {e:?} (earlier calls: {batches:?})")
        });
        let batch = Batch {
            expired: maintained.expired.iter().map(|r| r.to_string()).collect(),
            released: u64::from(maintained.released),
            more: maintained.more,
        };
        assert_eq!(
            maintained.releases.len() as u64,
            batch.released,
            "call {call} names every reservation it released"
        );
        assert!(
            batch.released <= RESERVATIONS_MAX,
            "call {call} released {} reservations, more than {RESERVATIONS_MAX} \
             (expired {} replicas)",
            batch.released,
            batch.expired.len()
        );
        batches.push(batch);
        if !maintained.more {
            return batches;
        }
    }
    panic!("maintenance still reported more after {calls_max} calls: {batches:?}");
}

/// The end state of a drained fleet, read by SQL as the admin and through
/// Status: every replica offline with nothing active, the scope's counter
/// at zero, no reservation held, `total` released in all.
async fn assert_fleet_drained(fx: &PgFixture, registry: &PgRegistry, replicas: usize, total: u64) {
    let mut admin = fx.admin_conn().await;
    let (not_offline, active, held, expired_routes): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM connreg.replicas WHERE state <> 'offline'),
                (SELECT coalesce(sum(active), 0)::bigint FROM connreg.replicas),
                (SELECT count(*) FROM connreg.assignments WHERE reserved),
                (SELECT count(*) FROM connreg.assignments
                  WHERE last_settlement = 'lease_expired')",
    )
    .fetch_one(&mut admin)
    .await
    .unwrap();
    assert_eq!(not_offline, 0, "replicas left online");
    assert_eq!(active, 0, "replicas still count active reservations");
    assert_eq!(held, 0, "reservations still held");
    assert_eq!(
        expired_routes as u64, total,
        "routes released as lease_expired"
    );
    let in_use: i64 =
        sqlx::query_scalar("SELECT in_use FROM connreg.admission_counters WHERE scope_id = $1")
            .bind(SCOPE)
            .fetch_one(&mut admin)
            .await
            .unwrap();
    assert_eq!(in_use, 0, "the tenant scope still counts reservations");
    let status = registry.status().await.expect("status answers");
    assert_eq!(
        status.active_assignments, 0,
        "Status reports held reservations"
    );
    assert_eq!(status.replicas_offline, replicas as u64);
    assert_eq!(status.replicas_ready, 0);
}

#[tokio::test]
async fn maintenance_with_the_largest_batch_finishes_over_20000_reservations() {
    // spec: LEASE-2, LOCK-6
    // 1,000 expired replicas of 20 reservations each: the largest batch
    // would take every replica at once, 20,000 releases in one statement.
    const REPLICAS: usize = 1_000;
    const ROUTES: u32 = 20;
    let (fx, registry, _clock) = expired_fleet(REPLICAS, ROUTES).await;

    let batches = maintain_until_done(&registry, REPLICAS + 1).await;

    let first = &batches[0];
    assert_eq!(
        first.released, RESERVATIONS_MAX,
        "the first call fills its reservation bound exactly (500 replicas of 20)"
    );
    assert!(first.more, "expired replicas remain after the first call");
    // Leases all end together, so the order is the replica id's (bytes).
    let mut ids: Vec<String> = (0..REPLICAS).map(|n| format!("{INSTANCE}-r{n}")).collect();
    ids.sort();
    let fitting = (RESERVATIONS_MAX / u64::from(ROUTES)) as usize;
    assert_eq!(
        first.expired,
        ids[..fitting],
        "the first call takes replicas in lease then id order"
    );
    let released: Vec<u64> = batches.iter().map(|b| b.released).collect();
    assert_eq!(released, [RESERVATIONS_MAX, RESERVATIONS_MAX]);
    assert_fleet_drained(
        &fx,
        &registry,
        REPLICAS,
        u64::from(ROUTES) * REPLICAS as u64,
    )
    .await;
}

#[tokio::test]
async fn maintenance_over_200000_reservations_finishes_in_bounded_batches() {
    // spec: LEASE-2, LOCK-6
    // 1,000 expired replicas of 200 reservations each: 50 replicas fill
    // one call's bound, so 20 calls drain the fleet.
    const REPLICAS: usize = 1_000;
    const ROUTES: u32 = 200;
    let (fx, registry, _clock) = expired_fleet(REPLICAS, ROUTES).await;

    let batches = maintain_until_done(&registry, REPLICAS + 1).await;

    let released: Vec<u64> = batches.iter().map(|b| b.released).collect();
    assert_eq!(batches.len(), 20, "calls to drain 200,000: {released:?}");
    assert!(
        released.iter().all(|&r| r == RESERVATIONS_MAX),
        "every call fills its bound: {released:?}"
    );
    assert!(batches.iter().all(|b| b.expired.len() == 50));
    let expired: BTreeSet<&String> = batches.iter().flat_map(|b| &b.expired).collect();
    assert_eq!(expired.len(), REPLICAS, "each replica expires exactly once");
    assert_fleet_drained(
        &fx,
        &registry,
        REPLICAS,
        u64::from(ROUTES) * REPLICAS as u64,
    )
    .await;
}

#[tokio::test]
async fn maintenance_of_replicas_holding_10000_each_takes_one_replica_per_call() {
    // spec: LEASE-2, LOCK-6
    // A full replica of the largest capacity is a call's whole bound; the
    // next one would pass it. Leases end in the reverse of id order here,
    // so lease order, not id order, decides which goes first.
    const REPLICAS: usize = 5;
    let (fx, registry, _clock) =
        expired_fleet(REPLICAS, connreg::limits::REPLICA_CAPACITY_MAX).await;
    let mut admin = fx.admin_conn().await;
    sqlx::query(
        "UPDATE connreg.replicas
            SET lease_expires_at_ms = 100 - split_part(replica_id, '-r', 2)::bigint",
    )
    .execute(&mut admin)
    .await
    .unwrap();

    let batches = maintain_until_done(&registry, REPLICAS + 1).await;

    let expired: Vec<Vec<String>> = batches.iter().map(|b| b.expired.clone()).collect();
    let one_each: Vec<Vec<String>> = (0..REPLICAS)
        .rev()
        .map(|n| vec![format!("{INSTANCE}-r{n}")])
        .collect();
    assert_eq!(
        expired, one_each,
        "one replica a call, earliest lease first"
    );
    assert!(batches.iter().all(|b| b.released == RESERVATIONS_MAX));
    let more: Vec<bool> = batches.iter().map(|b| b.more).collect();
    assert_eq!(more, [true, true, true, true, false]);
    assert_fleet_drained(&fx, &registry, REPLICAS, RESERVATIONS_MAX * REPLICAS as u64).await;
}

// ---------------------------------------------------------------------------
// Row locks held by a waiting resolve
// ---------------------------------------------------------------------------

const R0: &str = "t0-i0-r0";

/// A registry with tenant t0 (scope limit 100) and one replica, r0, of
/// capacity 4 with a long lease.
async fn one_replica_fleet() -> (PgFixture, PgRegistry, ManualClock) {
    let fx = PgFixture::new().await;
    let (registry, clock) = fx.registry_at_zero().await;
    publish_fleet(
        &registry,
        &FleetOptions {
            tenant_scope_limit: Some(100),
            ..FleetOptions::default()
        },
    )
    .await;
    registry
        .replica_register(register_params(R0, INSTANCE, 4, 1, 600_000))
        .await
        .expect("r0 registers");
    (fx, registry, clock)
}

/// An admin session with an open transaction, and its backend pid.
async fn session(fx: &PgFixture) -> (PgConnection, i32) {
    let mut conn = fx.admin_conn().await;
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    sqlx::query("BEGIN").execute(&mut conn).await.unwrap();
    (conn, pid)
}

async fn hold_replica_row(conn: &mut PgConnection, replica: &str) {
    sqlx::query("SELECT 1 FROM connreg.replicas WHERE replica_id = $1 FOR UPDATE")
        .bind(replica)
        .execute(conn)
        .await
        .unwrap();
}

async fn hold_counter_row(conn: &mut PgConnection, scope: &str) {
    sqlx::query("SELECT 1 FROM connreg.admission_counters WHERE scope_id = $1 FOR UPDATE")
        .bind(scope)
        .execute(conn)
        .await
        .unwrap();
}

async fn commit(mut conn: PgConnection) {
    sqlx::query("COMMIT").execute(&mut conn).await.unwrap();
}

/// Sessions of the registry's data pool waiting for a lock `holder` holds.
async fn blocked_by(observer: &mut PgConnection, holder: i32) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity
          WHERE datname = current_database() AND application_name = 'connreg-data'
            AND $1 = ANY (pg_blocking_pids(pid))",
    )
    .bind(holder)
    .fetch_one(observer)
    .await
    .unwrap()
}

/// Waits (bounded) until a session of the registry's data pool waits for
/// a lock the session `holder` holds; panics if none ever does.
async fn until_blocked_by(observer: &mut PgConnection, holder: i32, what: &str) {
    for _ in 0..POLLS_MAX {
        if blocked_by(observer, holder).await > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{what}: no registry session ever waited for session {holder}");
}

/// A resolve of `action` for t0, on a task of its own.
fn resolve_in_background(
    registry: &PgRegistry,
    action: &'static str,
) -> tokio::task::JoinHandle<connreg::Result<connreg::Resolved>> {
    let registry = registry.clone();
    tokio::spawn(async move { registry.route_resolve(request(action, "t0")).await })
}

/// The heartbeat of r0 runs while a resolve of r0's tenant waits for the
/// scope's counter, which session `a` holds: the heartbeat must answer
/// while the resolve still waits. Then `a` commits and the resolve
/// answers. Returns the resolve's answer.
async fn heartbeat_beside_a_counter_wait(
    registry: &PgRegistry,
    resolving: tokio::task::JoinHandle<connreg::Result<connreg::Resolved>>,
    a: PgConnection,
) -> connreg::Result<connreg::Resolved> {
    let heartbeat = bounded(
        "the heartbeat of r0",
        registry.replica_heartbeat(HeartbeatParams {
            replica: R0.try_into().unwrap(),
            health_seq: 2,
            lease_ttl_ms: 600_000,
        }),
    )
    .await;
    // Checked before anything else runs: the resolve's counter wait is
    // bounded, and only session `a` keeps it waiting.
    let resolve_pending = !resolving.is_finished();
    assert_eq!(heartbeat, Ok(HeartbeatOutcome::Applied));
    if !resolve_pending {
        let answer = bounded("the resolve", resolving).await;
        panic!(
            "the heartbeat of r0 answered only after the resolve had answered {answer:?}: \
             the resolve held r0's row while it waited for the counter"
        );
    }
    commit(a).await;
    bounded("the resolve", resolving)
        .await
        .expect("the resolve task")
}

/// A resolve of `action` that first waits for r0 (session B holds its
/// row), then, once B lets r0 go, for the scope's counter (session A holds
/// it). Returns the resolve, waiting for the counter, and session A.
async fn resolve_between_a_replica_and_a_counter(
    fx: &PgFixture,
    registry: &PgRegistry,
    action: &'static str,
) -> (
    tokio::task::JoinHandle<connreg::Result<connreg::Resolved>>,
    PgConnection,
) {
    let mut observer = fx.admin_conn().await;
    let (mut b, b_pid) = session(fx).await;
    hold_replica_row(&mut b, R0).await;
    let resolving = resolve_in_background(registry, action);
    until_blocked_by(
        &mut observer,
        b_pid,
        &format!("the resolve of {action} waits for r0"),
    )
    .await;
    let (mut a, a_pid) = session(fx).await;
    hold_counter_row(&mut a, SCOPE).await;
    commit(b).await;
    until_blocked_by(
        &mut observer,
        a_pid,
        &format!("the resolve of {action} waits for the counter"),
    )
    .await;
    (resolving, a)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_is_not_delayed_while_a_pinned_retry_waits_for_a_counter() {
    // spec: LOCK-3, LOCK-1, PIN-3
    let (fx, registry, _clock) = one_replica_fleet().await;
    let created = registry.route_resolve(request("a1", "t0")).await.unwrap();
    assert_eq!(created.kind, ResolveKind::Created);
    registry
        .route_settle(SettleParams {
            assignment: created.assignment,
            outcome: Outcome::Completed,
        })
        .await
        .unwrap();
    // The pinned retry of a1 takes its counter, finds r0 held without
    // waiting, lets everything go and waits for r0; then needs the counter.
    let (resolving, a) = resolve_between_a_replica_and_a_counter(&fx, &registry, "a1").await;
    let retried = heartbeat_beside_a_counter_wait(&registry, resolving, a).await;
    // What the in-memory backend answers: r0 and the scope have room.
    assert_eq!(retried.map(|r| r.kind), Ok(ResolveKind::Reserved));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_is_not_delayed_while_a_new_routes_last_attempt_waits_for_a_counter() {
    // spec: LOCK-3, LOCK-1, ROUTE-6
    let (fx, registry, _clock) = one_replica_fleet().await;
    // The attempts skip r0, the only replica, while it is held; the last
    // waits for it; then needs the counter.
    let (resolving, a) = resolve_between_a_replica_and_a_counter(&fx, &registry, "n1").await;
    let created = heartbeat_beside_a_counter_wait(&registry, resolving, a).await;
    // What the in-memory backend answers: r0 and the scope have room.
    assert_eq!(created.map(|r| r.kind), Ok(ResolveKind::Created));
}

// ---------------------------------------------------------------------------
// Commit order against maintenance
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resolve_queued_on_a_counter_holds_no_catalog_lock() {
    // spec: LOCK-4, LOCK-1
    // A publication waits only for decisions in progress: a resolve that
    // queues for a counter another transaction holds must not hold the
    // catalog lock while it does, or every resolve queued on a busy
    // tenant's counter keeps publications out.
    let (fx, registry, _clock) = one_replica_fleet().await;
    let mut observer = fx.admin_conn().await;
    let (mut a, a_pid) = session(&fx).await;
    hold_counter_row(&mut a, SCOPE).await;
    let resolving = resolve_in_background(&registry, "q1");
    until_blocked_by(
        &mut observer,
        a_pid,
        "the resolve of q1 queues for the counter",
    )
    .await;
    let catalog_holders: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_locks l
           JOIN pg_stat_activity s ON s.pid = l.pid
          WHERE s.datname = current_database() AND s.application_name = 'connreg-data'
            AND l.granted AND l.relation = 'connreg.catalog_lock'::regclass",
    )
    .fetch_one(&mut observer)
    .await
    .unwrap();
    // And a publication lands at once, while the resolve still waits.
    let published = bounded(
        "a publication beside the queued resolve",
        registry.catalog_publish(binding_with_policy(2)),
    )
    .await;
    let still_waiting = !resolving.is_finished();
    commit(a).await;
    let resolved = resolving.await.unwrap();
    assert_eq!(
        catalog_holders, 0,
        "the resolve queued on the counter holds the catalog lock"
    );
    assert!(published.is_ok(), "the publication answered {published:?}");
    assert!(
        still_waiting,
        "the resolve stopped waiting before the counter was free"
    );
    assert_eq!(resolved.map(|r| r.kind), Ok(ResolveKind::Created));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resolve_beside_a_releasing_maintenance_is_placed_before_it() {
    // spec: LOCK-5, LEASE-2, ROUTE-3
    let (fx, registry, clock) = one_replica_fleet().await;
    let (held, created) = observe_commit(registry.route_resolve(request("c1", "t0"))).await;
    let held = held.unwrap();
    assert_eq!(held.kind, ResolveKind::Created);
    let created = created.commit.expect("the new route committed");
    // r0's lease (600,000 ms from time 0) has ended.
    const PAST_R0_LEASE_MS: i64 = 600_001;
    clock.advance_ms(PAST_R0_LEASE_MS as u64);

    // Maintenance, as the data role, releases c1 and takes r0 offline, and
    // takes its commit sequence as an observed call does; not committed yet.
    let mut maintenance = fx.data_conn().await;
    sqlx::query("BEGIN")
        .execute(&mut maintenance)
        .await
        .unwrap();
    let released: i64 =
        sqlx::query_scalar("SELECT released FROM connreg.data_lease_maintain($1, 10, 3600000)")
            .bind(PAST_R0_LEASE_MS)
            .fetch_one(&mut maintenance)
            .await
            .unwrap();
    assert_eq!(released, 1, "the maintenance releases c1");
    let release: i64 = sqlx::query_scalar("SELECT connreg.data_commit_order()")
        .fetch_one(&mut maintenance)
        .await
        .unwrap();

    // The resolve of c1 waits for nothing: its snapshot shows the route
    // held, and its place in the commit order is before the release.
    let (answer, read) = bounded(
        "the resolve of c1",
        observe_commit(registry.route_resolve(request("c1", "t0"))),
    )
    .await;
    let answer = answer.unwrap();
    assert_eq!(answer.kind, ResolveKind::Existing);
    assert_eq!(answer.assignment, held.assignment);
    assert_eq!(read.commit, None);
    assert_eq!(read.read_at, Some(created));
    assert!(created < release as u64);
    sqlx::query("COMMIT")
        .execute(&mut maintenance)
        .await
        .unwrap();

    // After the release r0 is offline: the pinned route cannot be served,
    // and no answer carries the released reservation.
    let (after, _) = observe_commit(registry.route_resolve(request("c1", "t0"))).await;
    assert_eq!(after.map(|r| r.kind), Err(Error::ReplicaUnavailable));
}

// ---------------------------------------------------------------------------
// Publications under load
// ---------------------------------------------------------------------------

/// The fixture's binding again, with another policy revision: a
/// publication that changes what new routes copy.
fn binding_with_policy(policy_revision: u64) -> Publication {
    Publication {
        changes: vec![Change::UpsertBinding(Binding {
            id: BINDING.try_into().unwrap(),
            tenant: "t0".try_into().unwrap(),
            capability: CAPABILITY.try_into().unwrap(),
            instance: INSTANCE.try_into().unwrap(),
            priority: 1,
            policy_revision,
            credential: opaque("credential"),
            quota_policy: None,
            admission_scopes: BTreeSet::from([SCOPE.try_into().unwrap()]),
            enabled: true,
        })],
    }
}

/// What one resolver task was answered.
#[derive(Debug, Default)]
struct Tally {
    created: u64,
    no_capacity: u64,
    unavailable: Vec<String>,
    other: Vec<String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publications_land_under_32_concurrent_resolvers_of_one_tenant() {
    // spec: LOCK-4, LOCK-6
    const RESOLVERS: usize = 32;
    const PUBLICATIONS: u64 = 5;
    let fx = PgFixture::new().await;
    // As many resolvers as the data pool has connections: all run at once.
    assert_eq!(fx.options().data.max_connections, RESOLVERS as u32);
    let (registry, _clock) = fx.registry_at_zero().await;
    publish_fleet(
        &registry,
        &FleetOptions {
            tenant_scope_limit: Some(1_000_000),
            ..FleetOptions::default()
        },
    )
    .await;
    let mut admin = fx.admin_conn().await;
    bulk_replicas(
        &mut admin,
        INSTANCE,
        64,
        connreg::limits::REPLICA_CAPACITY_MAX,
        600_000,
    )
    .await;

    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicU64::new(0));
    let mut resolvers = Vec::new();
    for task in 0..RESOLVERS {
        let registry = registry.clone();
        let stop = stop.clone();
        let answered = answered.clone();
        resolvers.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            let mut n = 0_u64;
            while !stop.load(Ordering::SeqCst) {
                n += 1;
                let action = format!("load-{task}-{n}");
                match registry.route_resolve(request(&action, "t0")).await {
                    Ok(r) if r.kind == ResolveKind::Created => tally.created += 1,
                    Err(Error::NoCapacity) => tally.no_capacity += 1,
                    Err(Error::Unavailable { reason }) => tally.unavailable.push(reason),
                    other => tally.other.push(format!("{action}: {other:?}")),
                }
                answered.fetch_add(1, Ordering::SeqCst);
            }
            tally
        }));
    }

    // Every resolver holds a connection of the pool before the first
    // publication.
    for _ in 0..POLLS_MAX {
        if registry.pool_status().data.open == RESOLVERS as u32 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(registry.pool_status().data.open, RESOLVERS as u32);

    let mut published = Vec::new();
    for p in 1..=PUBLICATIONS {
        // Each publication meets resolvers that are making progress.
        let before = answered.load(Ordering::SeqCst);
        for _ in 0..POLLS_MAX {
            if answered.load(Ordering::SeqCst) >= before + RESOLVERS as u64 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let answer = bounded(
            "a publication",
            registry.catalog_publish(binding_with_policy(1 + p)),
        )
        .await;
        published.push(answer);
    }
    stop.store(true, Ordering::SeqCst);
    let mut total = Tally::default();
    for resolver in resolvers {
        let tally = bounded("a resolver", resolver)
            .await
            .expect("a resolver task");
        total.created += tally.created;
        total.no_capacity += tally.no_capacity;
        total.unavailable.extend(tally.unavailable);
        total.other.extend(tally.other);
    }
    eprintln!(
        "resolvers: {} created, {} no capacity, {} unavailable, {} other",
        total.created,
        total.no_capacity,
        total.unavailable.len(),
        total.other.len()
    );

    let refused: Vec<_> = published.iter().filter(|p| p.is_err()).collect();
    assert!(
        refused.is_empty(),
        "{} of {PUBLICATIONS} publications did not land: {refused:?}",
        refused.len()
    );
    assert!(
        total.unavailable.is_empty(),
        "resolvers answered Unavailable {} times: {:?}",
        total.unavailable.len(),
        total.unavailable.iter().take(5).collect::<Vec<_>>()
    );
    assert!(
        total.other.is_empty(),
        "unexpected answers: {:?}",
        total.other
    );
    assert!(total.created > 0, "the resolvers routed nothing");
}

// ---------------------------------------------------------------------------
// Locks and timeouts out of the data role's reach
// ---------------------------------------------------------------------------

/// The action lock class of migrations 0008..0012 (`"cnr\0"` + 2).
const ACTION_LOCK_CLASS: i32 = 0x636e_7200 + 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_role_session_holding_the_action_advisory_key_does_not_block_resolves() {
    // spec: AUTH-6, LOCK-6
    let (fx, registry, _clock) = one_replica_fleet().await;
    // A session of the data role takes the key the data-plane functions
    // use for action e1, as the functions compute it (first four bytes of
    // md5, big-endian). A store that refuses the lock outright is just as
    // good: the point is that no data-role session can hold up the action.
    let mut intruder = fx.data_conn().await;
    let taken =
        sqlx::query("SELECT pg_advisory_lock($1, ('x' || left(md5($2), 8))::bit(32)::integer)")
            .bind(ACTION_LOCK_CLASS)
            .bind("e1")
            .execute(&mut intruder)
            .await;
    eprintln!(
        "the data role's pg_advisory_lock: {:?}",
        taken.as_ref().map(|_| "taken")
    );

    let answer = bounded(
        "the resolve of e1",
        registry.route_resolve(request("e1", "t0")),
    )
    .await;
    assert_eq!(answer.map(|r| r.kind), Ok(ResolveKind::Created));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_without_timeouts_still_gets_bounded_waits() {
    // spec: LOCK-6, AUTH-8
    let (fx, _registry, _clock) = one_replica_fleet().await;
    // The data role's own session, with both timeouts switched off (a role
    // may change its session's settings).
    let mut caller = fx.data_conn().await;
    sqlx::raw_sql("SET statement_timeout = 0; SET lock_timeout = 0")
        .execute(&mut caller)
        .await
        .unwrap();
    // Another transaction holds the only replica and the scope's counter.
    let (mut holder, _) = session(&fx).await;
    hold_replica_row(&mut holder, R0).await;
    hold_counter_row(&mut holder, SCOPE).await;

    let outcome = tokio::time::timeout(
        Duration::from_secs(30),
        sqlx::query_scalar::<_, String>(
            "SELECT outcome FROM connreg.data_route_resolve(
                 $1, 't0', $2, 0, $3, true, 'eu', 'eu-1', false)",
        )
        .bind("w1")
        .bind(CAPABILITY)
        .bind(CLASS)
        .fetch_one(&mut caller),
    )
    .await;
    commit(holder).await;
    let outcome = outcome
        .expect("the resolve waited unbounded in a session without timeouts")
        .expect("the resolve function answers");
    assert_eq!(outcome, "no_capacity");
}
