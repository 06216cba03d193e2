//! Goal: on PostgreSQL, racing decisions serialize on the action's advisory
//! lock in the project's own key space, duplicate resolves through separate
//! pools converge on one route, contention on a hot replica is waited
//! out rather than reported as missing capacity, and racing new routes
//! share one snapshot of their fixed part per replica, binding and catalog
//! revision (ROUTE-3, ROUTE-6, ROUTE-7).
#![cfg(feature = "postgres")]

mod postgres_common;

use std::collections::BTreeSet;
use std::time::Duration;

use connreg::contracts::{Routing, Status};
use connreg::postgres::{LOCK_CLASS_ACTION, PgRegistry, lock_slot};
use connreg::{Error, Inspect, ManualClock, RegistryConfig, ResolveKind, Timestamp};
use postgres_common::{FleetOptions, PgFixture, bulk_replicas, publish_fleet, request};
use sqlx::{Connection, PgConnection};
use tokio::sync::Barrier;

/// Two registries on one database: two control and two data pools.
async fn two_registries(fx: &PgFixture) -> [PgRegistry; 2] {
    let clock = ManualClock::new(Timestamp(0));
    let first = PgRegistry::connect(fx.options(), clock.clone(), RegistryConfig::default())
        .await
        .unwrap();
    let second = PgRegistry::connect(fx.options(), clock, RegistryConfig::default())
        .await
        .unwrap();
    [first, second]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn duplicate_resolves_from_separate_pools_converge_on_one_assignment() {
    // spec: ROUTE-3, ROUTE-7
    let fx = PgFixture::new().await;
    let registries = two_registries(&fx).await;
    publish_fleet(
        &registries[0],
        &FleetOptions {
            tenant_scope_limit: Some(100),
            ..FleetOptions::default()
        },
    )
    .await;
    let mut admin = fx.admin_conn().await;
    bulk_replicas(&mut admin, "t0-i0", 8, 100, 60_000).await;

    for round in 0..4 {
        let action = format!("dup-{round}");
        let barrier = std::sync::Arc::new(Barrier::new(32));
        let mut racers = Vec::new();
        for i in 0..32 {
            let registry = registries[i % 2].clone();
            let barrier = barrier.clone();
            let request = request(&action, "t0");
            racers.push(tokio::spawn(async move {
                barrier.wait().await;
                registry.route_resolve(request).await
            }));
        }
        let mut created = 0;
        let mut assignments = BTreeSet::new();
        for racer in racers {
            let resolved = racer.await.unwrap().unwrap();
            if resolved.kind == ResolveKind::Created {
                created += 1;
            }
            assignments.insert(serde_json::to_string(&resolved.assignment).unwrap());
        }
        assert_eq!(created, 1, "round {round}: exactly one decision");
        assert_eq!(assignments.len(), 1, "round {round}: every caller got it");
    }
    let snapshot = registries[1].inspect().await.unwrap();
    assert_eq!(snapshot.routes.len(), 4);
    let active: u32 = snapshot.replicas.iter().map(|r| r.active).sum();
    assert_eq!(active, 4);
    assert_eq!(snapshot.scopes[0].in_use, 4);
    let fences: BTreeSet<_> = snapshot
        .routes
        .iter()
        .map(|r| r.assignment.reservation.fence)
        .collect();
    assert_eq!(fences.len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn contention_on_one_replica_never_reports_no_capacity_while_it_has_room() {
    // spec: ROUTE-6
    const CAPACITY: u32 = 24;
    let fx = PgFixture::new().await;
    let registries = two_registries(&fx).await;
    publish_fleet(&registries[0], &FleetOptions::default()).await;
    let mut admin = fx.admin_conn().await;
    // One replica: every racer wants the same row.
    bulk_replicas(&mut admin, "t0-i0", 1, CAPACITY, 60_000).await;

    let barrier = std::sync::Arc::new(Barrier::new(CAPACITY as usize));
    let mut racers = Vec::new();
    for i in 0..CAPACITY as usize {
        let registry = registries[i % 2].clone();
        let barrier = barrier.clone();
        let request = request(&format!("hot-{i}"), "t0");
        racers.push(tokio::spawn(async move {
            barrier.wait().await;
            registry.route_resolve(request).await
        }));
    }
    for racer in racers {
        let resolved = racer.await.unwrap();
        assert!(
            matches!(&resolved, Ok(r) if r.kind == ResolveKind::Created),
            "a racer was refused while the replica had room: {resolved:?}"
        );
    }
    // Now it is full: the answer is NoCapacity, at once.
    let full = registries[0].route_resolve(request("hot-late", "t0")).await;
    assert_eq!(full.unwrap_err(), Error::NoCapacity);
    let status = registries[1].status().await.unwrap();
    assert_eq!(status.active_assignments, u64::from(CAPACITY));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolve_serializes_on_the_actions_protocol_lock() {
    // spec: ROUTE-3
    let fx = PgFixture::new().await;
    let (registry, _clock) = fx.registry_at_zero().await;
    publish_fleet(&registry, &FleetOptions::default()).await;
    let mut admin = fx.admin_conn().await;
    bulk_replicas(&mut admin, "t0-i0", 2, 4, 60_000).await;

    // Another session holds action a1's lock: its row of the protocol's
    // lock table (migration 0013), which the data role cannot lock.
    let mut holder = PgConnection::connect_with(&fx.admin).await.unwrap();
    sqlx::query("BEGIN").execute(&mut holder).await.unwrap();
    let locked: Vec<(i32,)> = sqlx::query_as(
        "SELECT slot FROM connreg.protocol_locks \
          WHERE lock_class = $1 AND slot = $2 FOR NO KEY UPDATE",
    )
    .bind(LOCK_CLASS_ACTION)
    .bind(lock_slot("a1"))
    .fetch_all(&mut holder)
    .await
    .unwrap();
    assert_eq!(locked, vec![(lock_slot("a1"),)], "a1's lock row exists");
    assert_ne!(lock_slot("a1"), lock_slot("a2"), "the test needs two slots");

    let resolving = {
        let registry = registry.clone();
        tokio::spawn(async move { registry.route_resolve(request("a1", "t0")).await })
    };
    // Another action is not held up, and a migrator run (its own lock
    // space) neither.
    registry.route_resolve(request("a2", "t0")).await.unwrap();
    let second = PgRegistry::connect(
        fx.options(),
        ManualClock::new(Timestamp(0)),
        RegistryConfig::default(),
    )
    .await
    .unwrap();
    second.close().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!resolving.is_finished(), "decided a1 past its action lock");
    sqlx::query("COMMIT").execute(&mut holder).await.unwrap();
    let resolved = resolving.await.unwrap().unwrap();
    assert_eq!(resolved.kind, ResolveKind::Created);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolve_waiting_for_a_stalled_counter_holds_no_replica_row() {
    // spec: LOCK-1, LOCK-3, ROUTE-6
    // One stalled holder of a tenant's counter must not spread: the resolve
    // that needs the counter waits for it holding no replica row, so
    // heartbeats and settlements on the replicas it would pick go on, and
    // past ROUTE_LOCK_WAIT_MS it answers NoCapacity, never Unavailable.
    let fx = PgFixture::new().await;
    let (registry, _clock) = fx.registry_at_zero().await;
    publish_fleet(
        &registry,
        &FleetOptions {
            tenant_scope_limit: Some(10),
            ..FleetOptions::default()
        },
    )
    .await;
    let mut admin = fx.admin_conn().await;
    bulk_replicas(&mut admin, "t0-i0", 1, 4, 60_000).await;

    let mut counter_holder = PgConnection::connect_with(&fx.admin).await.unwrap();
    sqlx::query("BEGIN")
        .execute(&mut counter_holder)
        .await
        .unwrap();
    sqlx::query("SELECT 1 FROM connreg.admission_counters WHERE scope_id = 't0-s' FOR UPDATE")
        .execute(&mut counter_holder)
        .await
        .unwrap();

    let resolving = {
        let registry = registry.clone();
        tokio::spawn(async move { registry.route_resolve(request("slow", "t0")).await })
    };
    let mut waiting = false;
    for _ in 0..100 {
        waiting = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_stat_activity
                             WHERE datname = current_database() AND wait_event_type = 'Lock'
                               AND query LIKE '%route_resolve%')",
        )
        .fetch_one(&mut admin)
        .await
        .unwrap();
        if waiting {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(waiting, "the resolve never waited for the counter");
    // The replica it would pick is free meanwhile: a heartbeat's lock is
    // granted at once.
    let mut other = PgConnection::connect_with(&fx.admin).await.unwrap();
    sqlx::query("BEGIN").execute(&mut other).await.unwrap();
    let free = sqlx::query(
        "SELECT 1 FROM connreg.replicas WHERE replica_id = 't0-i0-r0' FOR UPDATE NOWAIT",
    )
    .execute(&mut other)
    .await;
    assert!(
        free.is_ok(),
        "the waiting resolve holds the replica row: {free:?}"
    );
    sqlx::query("ROLLBACK").execute(&mut other).await.unwrap();

    let answer = resolving.await.unwrap();
    assert_eq!(answer.map(|r| r.kind), Err(Error::NoCapacity));
    sqlx::query("COMMIT")
        .execute(&mut counter_holder)
        .await
        .unwrap();
    let resolved = registry.route_resolve(request("slow", "t0")).await.unwrap();
    assert_eq!(resolved.kind, ResolveKind::Created);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_replica_is_waited_for_within_the_bound_and_the_callers_lock_timeout_stays() {
    // spec: ROUTE-6, LOCK-6
    // The only replica is held: the decision waits for it between rounds,
    // at most ROUTE_LOCK_WAIT_MS a wait and ROUTE_DECISION_MS_MAX in all,
    // and answers no_capacity past that, or created once it is free. The
    // function fixes its own lock_timeout (SET clause), so the caller's
    // setting is neither used nor changed.
    let fx = PgFixture::new().await;
    let (registry, _clock) = fx.registry_at_zero().await;
    publish_fleet(&registry, &FleetOptions::default()).await;
    let mut admin = fx.admin_conn().await;
    bulk_replicas(&mut admin, "t0-i0", 1, 4, 60_000).await;

    let mut holder = PgConnection::connect_with(&fx.admin).await.unwrap();
    sqlx::query("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query("SELECT 1 FROM connreg.replicas WHERE replica_id = 't0-i0-r0' FOR UPDATE")
        .execute(&mut holder)
        .await
        .unwrap();

    // Both exits of the bounded wait: it runs out, and it gets the row.
    for (action, release_after_ms, outcome) in [
        ("timed-out", None, "no_capacity"),
        ("waited", Some(200), "created"),
    ] {
        let mut caller = PgConnection::connect_with(&fx.admin).await.unwrap();
        sqlx::query("BEGIN").execute(&mut caller).await.unwrap();
        sqlx::query("SET LOCAL lock_timeout = '7s'")
            .execute(&mut caller)
            .await
            .unwrap();
        let resolving = tokio::spawn(async move {
            let got: (String,) = sqlx::query_as(
                "SELECT outcome FROM connreg.data_route_resolve($1, 't0', $2, 0, $3, true,
                     'eu', 'eu-1', false)",
            )
            .bind(action)
            .bind(postgres_common::CAPABILITY)
            .bind(postgres_common::CLASS)
            .fetch_one(&mut caller)
            .await
            .unwrap();
            let lock_timeout: (String,) = sqlx::query_as("SELECT current_setting('lock_timeout')")
                .fetch_one(&mut caller)
                .await
                .unwrap();
            sqlx::query("ROLLBACK").execute(&mut caller).await.unwrap();
            (got.0, lock_timeout.0)
        });
        if let Some(ms) = release_after_ms {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            sqlx::query("COMMIT").execute(&mut holder).await.unwrap();
        }
        let (got, lock_timeout) = resolving.await.unwrap();
        assert_eq!(got, outcome, "{action}");
        assert_eq!(lock_timeout, "7s", "{action}");
    }
}

/// The shared route snapshots (migration 0012), as the admin.
async fn snapshot_rows(admin: &mut PgConnection) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM connreg.route_snapshots")
        .fetch_one(admin)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_new_routes_share_one_snapshot_per_replica_binding_and_revision() {
    // spec: ROUTE-7
    const RACERS: usize = 16;
    let fx = PgFixture::new().await;
    let registries = two_registries(&fx).await;
    let first = publish_fleet(&registries[0], &FleetOptions::default()).await;
    let mut admin = fx.admin_conn().await;
    // One replica: every racer's route has the same fixed part, and the
    // first ones race to insert it.
    bulk_replicas(&mut admin, "t0-i0", 1, 100, 60_000).await;

    let barrier = std::sync::Arc::new(Barrier::new(RACERS));
    let mut racers = Vec::new();
    for i in 0..RACERS {
        let registry = registries[i % 2].clone();
        let barrier = barrier.clone();
        let request = request(&format!("shared-{i}"), "t0");
        racers.push(tokio::spawn(async move {
            barrier.wait().await;
            registry.route_resolve(request).await
        }));
    }
    let mut fixed = BTreeSet::new();
    for racer in racers {
        let resolved = racer.await.unwrap().unwrap();
        assert_eq!(resolved.kind, ResolveKind::Created);
        assert_eq!(resolved.assignment.policy.catalog_revision, first);
        fixed.insert(
            serde_json::to_string(&(
                &resolved.assignment.destination,
                &resolved.assignment.policy,
            ))
            .unwrap(),
        );
    }
    assert_eq!(fixed.len(), 1, "one fixed part");
    assert_eq!(snapshot_rows(&mut admin).await, 1);

    // A new catalog revision: the next route gets a snapshot of its own;
    // the earlier routes keep theirs.
    let second = publish_fleet(&registries[0], &FleetOptions::default()).await;
    assert!(second > first);
    let next = registries[1]
        .route_resolve(request("shared-next", "t0"))
        .await
        .unwrap();
    assert_eq!(next.assignment.policy.catalog_revision, second);
    assert_eq!(snapshot_rows(&mut admin).await, 2);
    let snapshot = registries[0].inspect().await.unwrap();
    assert_eq!(snapshot.routes.len(), RACERS + 1);
    assert_eq!(
        snapshot
            .routes
            .iter()
            .filter(|r| r.assignment.policy.catalog_revision == first)
            .count(),
        RACERS
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_routes_answer_reads_its_commit_position_only_for_an_observing_caller() {
    // spec: LOCK-5, ROUTE-3
    // The lock-free `existing` answer carries where its snapshot falls in
    // the commit order to a caller that observes commit order, and nothing
    // to a serving caller, whose call never computes it (migration 0016).
    let fx = PgFixture::new().await;
    let (registry, _clock) = fx.registry_at_zero().await;
    publish_fleet(&registry, &FleetOptions::default()).await;
    let mut admin = fx.admin_conn().await;
    bulk_replicas(&mut admin, "t0-i0", 1, 2, 60_000).await;
    let resolve = async |admin: &mut PgConnection, observed: bool| {
        sqlx::query_as::<_, (String, Option<i64>, Option<i64>, Option<Vec<i64>>)>(
            "SELECT outcome, commit_seq, read_seq, read_unseen
               FROM connreg.data_route_resolve('held', 't0', $1, 0, $2, true, 'eu', 'eu-1', $3)",
        )
        .bind(postgres_common::CAPABILITY)
        .bind(postgres_common::CLASS)
        .bind(observed)
        .fetch_one(admin)
        .await
        .unwrap()
    };
    let (outcome, created_at, _, _) = resolve(&mut admin, true).await;
    assert_eq!(outcome, "created");
    let created_at = created_at.expect("an observed commit's sequence");

    let served = resolve(&mut admin, false).await;
    assert_eq!(served, ("existing".to_owned(), None, None, None));

    let (outcome, commit, read_at, unseen) = resolve(&mut admin, true).await;
    assert_eq!((outcome.as_str(), commit), ("existing", None));
    assert_eq!(
        read_at,
        Some(created_at),
        "the snapshot shows the route's commit"
    );
    assert_eq!(unseen, Some(vec![]), "no commit below it was missed");
}
