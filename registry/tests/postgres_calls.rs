//! Goal: no call of the PostgreSQL backend waits forever or answers from a
//! dead connection (LOCK-6), a queued publication holds routing up only
//! briefly (LOCK-4), and mutating calls report their commit order (LOCK-5).
#![cfg(feature = "postgres")]

mod postgres_common;

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use connreg::contracts::{CatalogAdmin, CatalogRead, ReplicaLifecycle, Routing};
use connreg::postgres::{LOCK_CLASS_ACTION, PgOptions, PgRegistry, lock_slot, observe_commit};
use connreg::{
    Error, HeartbeatParams, ManualClock, Outcome, RegistryConfig, ResolveKind, SettleParams,
    Timestamp,
};
use connreg_pgtest::proxy::FaultProxy;
use postgres_common::{FleetOptions, PgFixture, bulk_replicas, publish_fleet, request};
use sqlx::PgConnection;

/// A registry with one tenant and eight ready replicas, whose pools use
/// `options` (the fixture's, adjusted by the caller).
async fn fleet_with(fx: &PgFixture, options: PgOptions) -> PgRegistry {
    let registry = PgRegistry::connect(
        options,
        ManualClock::new(Timestamp(0)),
        RegistryConfig::default(),
    )
    .await
    .expect("the registry starts");
    publish_fleet(&registry, &FleetOptions::default()).await;
    let mut admin = fx.admin_conn().await;
    bulk_replicas(&mut admin, "t0-i0", 8, 100, 600_000).await;
    registry
}

fn upstream(fx: &PgFixture) -> SocketAddr {
    let host = fx.admin.get_host().to_string();
    (host.as_str(), fx.admin.get_port())
        .to_socket_addrs()
        .expect("the server address resolves")
        .next()
        .expect("one address")
}

/// The fixture's pools, with the data pool reaching the server through
/// `proxy`.
fn through(fx: &PgFixture, proxy: &FaultProxy) -> PgOptions {
    let mut options = fx.options();
    let addr = proxy.local_addr();
    options.data.connect = options
        .data
        .connect
        .clone()
        .host(&addr.ip().to_string())
        .port(addr.port());
    options
}

async fn terminate_data_sessions(admin: &mut PgConnection) -> i64 {
    sqlx::query_scalar(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
          WHERE datname = current_database() AND application_name = 'connreg-data'",
    )
    .fetch_one(admin)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_blocked_past_its_deadline_answers_unavailable_and_leaves_no_session() {
    // spec: LOCK-6
    let fx = PgFixture::new().await;
    let mut options = fx.options();
    options.data.call_deadline_ms = 1_500;
    let registry = fleet_with(&fx, options).await;
    let mut admin = fx.admin_conn().await;
    // Another session holds the action's lock; the resolve waits on it,
    // well within the server's statement timeout.
    let mut holder = fx.admin_conn().await;
    sqlx::query("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query(
        "SELECT 1 FROM connreg.protocol_locks WHERE lock_class = $1 AND slot = $2 FOR UPDATE",
    )
    .bind(LOCK_CLASS_ACTION)
    .bind(lock_slot("held"))
    .execute(&mut holder)
    .await
    .unwrap();
    let answer = registry.route_resolve(request("held", "t0")).await;
    match answer {
        Err(Error::Unavailable { reason }) => {
            assert!(reason.contains("call deadline of 1500 ms"), "{reason}")
        }
        other => panic!("expected Unavailable past the deadline, got {other:?}"),
    }
    // The abandoned session is closed, not parked in the pool with its
    // transaction open. Counting only sessions that wait on a lock is not
    // enough: on a loaded server the call may not have reached its lock
    // wait yet (its session is still `idle in transaction`, the resolve
    // unread in the socket), and it would take the lock the moment the
    // holder lets go. So wait until no data-role session has a
    // transaction at all. The server notices the closed client within its
    // connection check interval (CLIENT_CHECK_INTERVAL_MS) or ends the
    // wait at the function's lock timeout; allow several of either.
    let mut open = 1;
    for _ in 0..1_000 {
        open = sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM pg_stat_activity
              WHERE datname = current_database() AND application_name = 'connreg-data'
                AND xact_start IS NOT NULL",
        )
        .fetch_one(&mut admin)
        .await
        .unwrap();
        if open == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        open, 0,
        "the abandoned call still has a transaction on the server"
    );
    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();
    let resolved = registry.route_resolve(request("held", "t0")).await.unwrap();
    assert_eq!(resolved.kind, ResolveKind::Created);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_black_hole_ends_in_the_call_deadline() {
    // spec: LOCK-6
    let fx = PgFixture::new().await;
    let proxy = FaultProxy::start(upstream(&fx)).await.unwrap();
    let mut options = through(&fx, &proxy);
    options.data.call_deadline_ms = 1_500;
    let registry = fleet_with(&fx, options).await;
    registry
        .route_resolve(request("before", "t0"))
        .await
        .unwrap();

    proxy.blackhole(true);
    let (answers, resolve) = tokio::join!(
        registry.replica_heartbeat(HeartbeatParams {
            replica: "t0-i0-r0".try_into().unwrap(),
            health_seq: 5,
            lease_ttl_ms: 600_000,
        }),
        registry.route_resolve(request("in-the-hole", "t0")),
    );
    for answer in [answers.map(|_| ()), resolve.map(|_| ())] {
        assert!(
            matches!(&answer, Err(Error::Unavailable { reason }) if reason.contains("call deadline")),
            "{answer:?}"
        );
    }
    proxy.blackhole(false);
    // The network is back: the registry serves again, the same action
    // included (its decision either committed or not; either way one route).
    let again = registry
        .route_resolve(request("in-the-hole", "t0"))
        .await
        .unwrap();
    assert!(matches!(
        again.kind,
        ResolveKind::Created | ResolveKind::Existing
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_after_the_servers_sessions_die_are_served_on_fresh_connections() {
    // spec: LOCK-6
    let fx = PgFixture::new().await;
    let registry = fleet_with(&fx, fx.options()).await;
    let mut admin = fx.admin_conn().await;
    // Pooled connections exist, then the server ends every one of them.
    let first = registry.route_resolve(request("a1", "t0")).await.unwrap();
    registry
        .replica_heartbeat(HeartbeatParams {
            replica: "t0-i0-r0".try_into().unwrap(),
            health_seq: 2,
            lease_ttl_ms: 600_000,
        })
        .await
        .unwrap();
    assert!(terminate_data_sessions(&mut admin).await >= 1);
    tokio::time::sleep(Duration::from_millis(50)).await;

    // A resolve is idempotent by action: retried once on a new connection.
    let second = registry.route_resolve(request("a2", "t0")).await.unwrap();
    assert_eq!(second.kind, ResolveKind::Created);
    // A transaction that could not begin wrote nothing: its dead
    // connections are closed and it begins on a fresh one.
    assert!(terminate_data_sessions(&mut admin).await >= 1);
    tokio::time::sleep(Duration::from_millis(50)).await;
    registry
        .route_settle(SettleParams {
            assignment: first.assignment,
            outcome: Outcome::Completed,
        })
        .await
        .expect("the settlement is served on a fresh connection");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_a_call_finds_its_connection_dead_the_pool_tests_the_others() {
    // spec: LOCK-6
    let fx = PgFixture::new().await;
    let registry = fleet_with(&fx, fx.options()).await;
    let mut admin = fx.admin_conn().await;
    // Several idle pooled connections, opened by concurrent calls; then the
    // server ends them all.
    let (a, b, c, d) = tokio::join!(
        registry.route_resolve(request("w0", "t0")),
        registry.route_resolve(request("w1", "t0")),
        registry.route_resolve(request("w2", "t0")),
        registry.route_resolve(request("w3", "t0")),
    );
    for warm in [a, b, c, d] {
        warm.unwrap();
    }
    assert!(terminate_data_sessions(&mut admin).await >= 2);
    tokio::time::sleep(Duration::from_millis(50)).await;
    // The first call pays for finding out; the pool then tests the
    // connections it hands out, so no later call meets a dead one.
    let mut retried = Vec::new();
    for i in 0..6 {
        let action = format!("after-{i}");
        let (answer, seen) = observe_commit(registry.route_resolve(request(&action, "t0"))).await;
        assert_eq!(answer.map(|r| r.kind), Ok(ResolveKind::Created), "{action}");
        if seen.retried {
            retried.push(action);
        }
    }
    assert!(
        retried.len() <= 1,
        "calls that met a dead connection: {retried:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_queued_publication_holds_routing_up_only_briefly() {
    // spec: LOCK-4, CAT-4
    let fx = PgFixture::new().await;
    let registry = fleet_with(&fx, fx.options()).await;
    // A resolve-like holder keeps the catalog lock's shared form for a
    // long time.
    let mut reader = fx.admin_conn().await;
    sqlx::query("BEGIN").execute(&mut reader).await.unwrap();
    sqlx::query("LOCK TABLE connreg.catalog_lock IN ROW SHARE MODE")
        .execute(&mut reader)
        .await
        .unwrap();
    // A publication queues for the exclusive lock meanwhile.
    let publishing = {
        let registry = registry.clone();
        tokio::spawn(async move {
            registry
                .catalog_publish(postgres_common::fleet_publication(&FleetOptions {
                    tenants: 2,
                    ..FleetOptions::default()
                }))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    // An unrelated resolve is not parked behind the queued publication:
    // it is decided while the reader still holds its lock.
    let resolving = {
        let registry = registry.clone();
        tokio::spawn(async move { registry.route_resolve(request("unrelated", "t0")).await })
    };
    let mut decided = false;
    for _ in 0..150 {
        if resolving.is_finished() {
            decided = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        decided,
        "the resolve waited behind the queued publication for 1.5 s"
    );
    assert_eq!(resolving.await.unwrap().unwrap().kind, ResolveKind::Created);
    assert!(!publishing.is_finished(), "published under a reader's lock");
    sqlx::query("COMMIT").execute(&mut reader).await.unwrap();
    let revision = publishing.await.unwrap().expect("the publication lands");
    assert_eq!(revision.0, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutating_calls_report_their_commit_order() {
    // spec: LOCK-5
    let fx = PgFixture::new().await;
    let registry = fleet_with(&fx, fx.options()).await;
    let (created, first) = observe_commit(registry.route_resolve(request("c1", "t0"))).await;
    let created = created.unwrap();
    let first = first
        .commit
        .expect("a decision that committed reports its order");
    let (settled, second) = observe_commit(registry.route_settle(SettleParams {
        assignment: created.assignment.clone(),
        outcome: Outcome::Completed,
    }))
    .await;
    assert!(settled.unwrap().released);
    let second = second.commit.expect("a settlement reports its order");
    assert!(second > first, "{second} after {first}");
    let (again, third) = observe_commit(registry.route_resolve(request("c1", "t0"))).await;
    assert_eq!(again.unwrap().kind, ResolveKind::Reserved);
    let third = third.commit.expect("a pinned retry reports its order");
    assert!(third > second);
    // A held route is answered from a snapshot: no commit, but the highest
    // commit that snapshot showed.
    let (held, read) = observe_commit(registry.route_resolve(request("c1", "t0"))).await;
    assert_eq!(held.unwrap().kind, ResolveKind::Existing);
    assert_eq!(read.commit, None);
    assert_eq!(read.read_at, Some(third));
    assert_eq!(read.read_unseen, Vec::<u64>::new());
    // An error answer committed nothing and reports nothing.
    let (lost, none) = observe_commit(registry.route_settle(SettleParams {
        assignment: created.assignment,
        outcome: Outcome::Completed,
    }))
    .await;
    assert_eq!(lost, Err(Error::FenceLost));
    assert_eq!(none, Default::default());
    // Outside observation no sequence is taken.
    let before: i64 = sqlx::query_scalar("SELECT last_value FROM connreg.commit_order")
        .fetch_one(&mut fx.admin_conn().await)
        .await
        .unwrap();
    registry.route_resolve(request("c2", "t0")).await.unwrap();
    let after: i64 = sqlx::query_scalar("SELECT last_value FROM connreg.commit_order")
        .fetch_one(&mut fx.admin_conn().await)
        .await
        .unwrap();
    assert_eq!(before, after);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_free_read_names_the_commits_its_snapshot_missed() {
    // spec: LOCK-5, ROUTE-3
    let fx = PgFixture::new().await;
    let registry = fleet_with(&fx, fx.options()).await;
    let (held, _) = observe_commit(registry.route_resolve(request("h1", "t0"))).await;
    assert_eq!(held.unwrap().kind, ResolveKind::Created);
    // A transaction that has taken its commit sequence and not committed
    // yet, then one that commits after it.
    let mut slow = fx.admin_conn().await;
    sqlx::query("BEGIN").execute(&mut slow).await.unwrap();
    let pending: i64 = sqlx::query_scalar("SELECT connreg.commit_take()")
        .fetch_one(&mut slow)
        .await
        .unwrap();
    let (other, later) = observe_commit(registry.route_resolve(request("h2", "t0"))).await;
    assert_eq!(other.unwrap().kind, ResolveKind::Created);
    let later = later.commit.expect("the second decision committed");
    assert!(later > pending as u64);
    let (again, read) = observe_commit(registry.route_resolve(request("h1", "t0"))).await;
    assert_eq!(again.unwrap().kind, ResolveKind::Existing);
    assert_eq!(read.read_at, Some(later));
    assert_eq!(read.read_unseen, vec![pending as u64]);
    // A lookup and a catalog read report their snapshot's place too.
    let (found, read) =
        observe_commit(registry.route_get("t0".try_into().unwrap(), "h2".try_into().unwrap()))
            .await;
    assert!(found.unwrap().is_some());
    assert_eq!((read.commit, read.read_at), (None, Some(later)));
    assert_eq!(read.read_unseen, vec![pending as u64]);
    let (revision, read) = observe_commit(registry.catalog_revision()).await;
    assert!(revision.is_ok());
    assert_eq!(read.read_at, Some(later));
    sqlx::query("COMMIT").execute(&mut slow).await.unwrap();
    let (_, read) = observe_commit(registry.route_resolve(request("h1", "t0"))).await;
    assert_eq!(read.read_at, Some(later));
    assert_eq!(read.read_unseen, Vec::<u64>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_lost_connection_makes_a_resolve_run_twice() {
    // spec: LOCK-6, ROUTE-3
    let fx = PgFixture::new().await;
    let proxy = FaultProxy::start(upstream(&fx)).await.unwrap();
    let registry = fleet_with(&fx, through(&fx, &proxy)).await;

    // The connection dies where the COMMIT's reply should be: the decision
    // committed, the second attempt on a fresh connection finds it.
    proxy.cut_next_commit();
    let (answer, seen) = observe_commit(registry.route_resolve(request("cut", "t0"))).await;
    assert!(!proxy.commit_cut_armed(), "no commit was cut");
    assert_eq!(answer.map(|r| r.kind), Ok(ResolveKind::Existing));
    assert!(seen.retried, "a lost COMMIT reply was not retried");

    // Every other error answer is the call's only attempt: a request the
    // registry refuses, one no binding serves, one the store refuses.
    let mut untenanted = request("no-tenant", "t0");
    untenanted.tenant = None;
    let mut unknown_class = request("no-class", "t0");
    unknown_class.topology.capacity_class = "no-such-class".try_into().unwrap();
    for (what, req) in [
        ("no tenant", untenanted),
        (
            "a tenant without bindings",
            request("no-binding", "t-unknown"),
        ),
        ("an unknown capacity class", unknown_class),
    ] {
        let (answer, seen) = observe_commit(registry.route_resolve(req)).await;
        assert!(answer.is_err(), "{what}: {answer:?}");
        assert!(!seen.retried, "{what}: {answer:?} was retried");
        assert_eq!(seen.commit, None, "{what}: an error answer committed");
    }
}
