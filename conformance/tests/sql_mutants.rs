//! Every SQL mutant of the protocol functions
//! (`connreg::postgres::mutants::SQL_MUTANTS`) is caught: each is applied to
//! fresh databases, and each test its catalogue entry names must fail on
//! it. The same tests pass on the real schema: the conformance tests in
//! `--test postgres`, the PostgreSQL-only ones here (`*_on_postgres`).
//!
//! `cargo test -p connreg-conformance --test sql_mutants`; with
//! `SQL_MUTANTS_ONLY=<id>`, one mutant only. With `CONNREG_SQL_MUTANT=<id>`
//! the `*_on_postgres` tests run on that mutant instead of the real schema,
//! as `--test postgres` does (`.ci/sql-mutants-suite` runs both).

use std::panic::AssertUnwindSafe;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use connreg::contracts::{ReplicaLifecycle, Routing};
use connreg::limits::LEASE_MAINTENANCE_BATCH_MAX;
use connreg::postgres::PgConnectOptions;
use connreg::postgres::mutants::{SQL_MUTANTS, SqlMutant};
use connreg::postgres::testing::TestRegistry;
use connreg::request::SettleParams;
use connreg::request::{HeartbeatOutcome, HeartbeatParams, MaintainParams};
use connreg::{ManualClock, Outcome, RegistryConfig, Settled};
use connreg_conformance::fixture::{self, FleetOptions};
use connreg_conformance::run::block_on;
use sqlx::{Connection, PgConnection};

/// Narrows [`every_sql_mutant_is_caught`] to one mutant ID.
const ONLY_VAR: &str = "SQL_MUTANTS_ONLY";

/// How long a test waits for a call to queue on a lock, in ms.
const QUEUE_WAIT_MS: u64 = 10_000;

/// How often a test looks for a call waiting on a lock, in ms.
const LOCK_POLL_MS: u64 = 5;

/// Longest a maintenance call that waits for nothing may take, in ms (far
/// below the protocol functions' 2,500 ms lock timeout).
const MAINTENANCE_WAIT_MS_MAX: u64 = 1_000;

/// The sequence of the uncommitted heartbeat a test holds open.
const NEWER_SEQUENCE: i64 = 1_000;

/// Opens PostgreSQL registries with one mutant (or none) applied, and
/// keeps the last one's superuser options for the PostgreSQL-only tests.
struct MutantHarness {
    mutant: Option<&'static SqlMutant>,
    admin: Mutex<Option<PgConnectOptions>>,
}

impl MutantHarness {
    fn new(mutant: Option<&'static SqlMutant>) -> MutantHarness {
        MutantHarness {
            mutant,
            admin: Mutex::new(None),
        }
    }

    fn admin(&self) -> PgConnectOptions {
        self.admin
            .lock()
            .expect("the admin options")
            .clone()
            .expect("a registry was opened")
    }
}

impl connreg_conformance::Harness for MutantHarness {
    type Store = connreg::postgres::PgRegistry;
    type DataPlane = connreg::postgres::PgDataPlane;

    async fn open(
        &self,
        clock: ManualClock,
        config: RegistryConfig,
    ) -> connreg::postgres::PgRegistry {
        let test = TestRegistry::create()
            .await
            .unwrap_or_else(|e| panic!("a PostgreSQL test database: {e}"));
        let registry = connreg::postgres::PgRegistry::connect(test.options(), clock, config)
            .await
            .unwrap_or_else(|e| panic!("a registry on the test database: {e}"));
        if let Some(mutant) = self.mutant {
            connreg::postgres::mutants::apply(&test.admin, mutant)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        }
        *self.admin.lock().expect("the admin options") = Some(test.admin.clone());
        registry.keep_alive(test)
    }

    fn data_plane(store: &connreg::postgres::PgRegistry) -> connreg::postgres::PgDataPlane {
        store.data_plane()
    }

    fn operator_authority(store: &connreg::postgres::PgRegistry) -> String {
        store.control_role().to_owned()
    }
}

/// Runs the test named `name` (`area::name`, or `sql_mutants::name`) on
/// `harness`; true when it passed.
fn passes(name: &str, harness: &MutantHarness) -> bool {
    macro_rules! dispatch {
        ($($area:ident :: $test:ident),* $(,)?) => {
            match name {
                $(concat!(stringify!($area), "::", stringify!($test)) => {
                    std::panic::catch_unwind(AssertUnwindSafe(|| {
                        block_on(connreg_conformance::$area::$test(harness))
                    }))
                    .is_ok()
                })*
                "sql_mutants::settlement_takes_the_replica_before_the_counters" => {
                    std::panic::catch_unwind(AssertUnwindSafe(|| {
                        block_on(settlement_takes_the_replica_before_the_counters(harness))
                    }))
                    .is_ok()
                }
                "sql_mutants::heartbeat_waits_for_an_uncommitted_newer_one" => {
                    std::panic::catch_unwind(AssertUnwindSafe(|| {
                        block_on(heartbeat_waits_for_an_uncommitted_newer_one(harness))
                    }))
                    .is_ok()
                }
                "sql_mutants::a_counter_filled_while_waited_for_is_not_counted" => {
                    std::panic::catch_unwind(AssertUnwindSafe(|| {
                        block_on(a_counter_filled_while_waited_for_is_not_counted(harness))
                    }))
                    .is_ok()
                }
                "sql_mutants::a_replica_filled_while_waited_for_is_skipped" => {
                    std::panic::catch_unwind(AssertUnwindSafe(|| {
                        block_on(a_replica_filled_while_waited_for_is_skipped(harness))
                    }))
                    .is_ok()
                }
                "sql_mutants::maintenance_skips_a_held_replica" => {
                    std::panic::catch_unwind(AssertUnwindSafe(|| {
                        block_on(maintenance_skips_a_held_replica(harness))
                    }))
                    .is_ok()
                }
                other => panic!("the catalogue names an unknown test: {other}"),
            }
        };
    }
    dispatch!(
        pin::released_route_is_reserved_again_on_the_same_replica,
        pin::retry_on_full_replica_or_scope_answers_no_capacity,
        route::resolve_with_other_tenant_returns_conflict,
        route::lower_binding_priority_wins,
        route::equal_candidates_follow_the_stable_route_hash,
        route::cross_region_forbidden_keeps_routes_in_the_preferred_region,
        route::replica_of_another_capacity_class_is_filtered_out,
        route::full_replica_takes_no_new_routes,
        route::resolve_reserves_scopes_replica_and_fence_together,
        race::racing_resolves_of_one_action_create_one_assignment,
        race::mixed_load_over_a_full_binding_never_answers_unavailable,
        race::racing_unknown_settlements_count_every_one,
        race::racing_heartbeats_keep_the_highest_sequence,
        settle::settlement_releases_every_counter_at_once,
        settle::unknown_outcomes_open_the_circuit_at_the_threshold,
        settle::settling_again_changes_nothing,
        settle::stale_copy_after_a_pinned_retry_is_fence_lost,
        lease::maintenance_is_bounded_per_call,
        lease::maintenance_releases_reservations_as_lease_expired,
        lease::leases_follow_the_injected_clock_only,
        lease::older_or_equal_heartbeat_is_ignored,
        hold::a_reservation_is_released_once_its_hold_passes,
        hold::holds_are_released_oldest_first_within_the_batch,
    )
}

// spec: LOCK-1
/// A settlement takes its replica's row before its counters: while another
/// transaction holds the route's counters, the waiting settlement already
/// holds the replica's row.
async fn settlement_takes_the_replica_before_the_counters(harness: &MutantHarness) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let a = s.resolve_acme("held-counters").await;
    let admin = harness.admin();
    let mut holder = PgConnection::connect_with(&admin).await.expect("a session");
    let mut observer = PgConnection::connect_with(&admin).await.expect("a session");
    sqlx::raw_sql("BEGIN").execute(&mut holder).await.unwrap();
    let scopes: Vec<String> = a
        .reservation
        .scopes
        .iter()
        .map(|s| s.as_str().to_owned())
        .collect();
    sqlx::query("SELECT 1 FROM connreg.admission_counters WHERE scope_id = ANY($1) FOR UPDATE")
        .bind(&scopes)
        .execute(&mut holder)
        .await
        .unwrap();
    let store = s.store.clone();
    let params = SettleParams {
        assignment: a.clone(),
        outcome: Outcome::Completed,
    };
    let settling = tokio::spawn(async move { store.route_settle(params).await });
    until_one_waits(&mut observer, "the settlement").await;
    let replica_free =
        sqlx::query("SELECT 1 FROM connreg.replicas WHERE replica_id = $1 FOR UPDATE NOWAIT")
            .bind(a.destination.replica.as_str())
            .execute(&mut observer)
            .await
            .is_ok();
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut holder)
        .await
        .unwrap();
    let settled = settling.await.expect("the settlement task");
    assert_eq!(settled, Ok(Settled { released: true }));
    assert!(
        !replica_free,
        "a settlement waiting for counters held no replica row: counters before replica"
    );
}

// spec: LEASE-1
/// A heartbeat reads the stored sequence under the replica's row: one that
/// starts while a newer heartbeat is uncommitted waits for it and is then
/// ignored, instead of writing its older sequence over the newer one.
async fn heartbeat_waits_for_an_uncommitted_newer_one(harness: &MutantHarness) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let id = fixture::replica("i-acme-crm-r0");
    let admin = harness.admin();
    let mut newer = PgConnection::connect_with(&admin).await.expect("a session");
    let mut observer = PgConnection::connect_with(&admin).await.expect("a session");
    sqlx::raw_sql("BEGIN").execute(&mut newer).await.unwrap();
    sqlx::query("UPDATE connreg.replicas SET health_seq = $2 WHERE replica_id = $1")
        .bind(id.as_str())
        .bind(NEWER_SEQUENCE)
        .execute(&mut newer)
        .await
        .unwrap();
    let store = s.store.clone();
    let params = HeartbeatParams {
        replica: id.clone(),
        health_seq: NEWER_SEQUENCE as u64 - 1,
        lease_ttl_ms: 1_000,
    };
    let beating = tokio::spawn(async move { store.replica_heartbeat(params).await });
    until_one_waits(&mut observer, "the heartbeat").await;
    sqlx::raw_sql("COMMIT").execute(&mut newer).await.unwrap();
    let outcome = beating.await.expect("the heartbeat task");
    let stored = s.store.replica_get(id).await.unwrap().expect("the replica");
    assert_eq!(
        stored.health_seq, NEWER_SEQUENCE as u64,
        "the newer sequence stays"
    );
    assert_eq!(outcome, Ok(HeartbeatOutcome::Ignored));
}

// spec: LEASE-2, LOCK-1
/// Lease maintenance waits for no replica row: an expired replica another
/// transaction holds is left for the next call (`more`), and the call
/// answers at once.
async fn maintenance_skips_a_held_replica(harness: &MutantHarness) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let held = fixture::replica("i-acme-crm-r0");
    let admin = harness.admin();
    let mut holder = PgConnection::connect_with(&admin).await.expect("a session");
    sqlx::raw_sql("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query("SELECT 1 FROM connreg.replicas WHERE replica_id = $1 FOR UPDATE")
        .bind(held.as_str())
        .execute(&mut holder)
        .await
        .unwrap();
    s.clock.advance_ms(s.fleet.options.lease_ttl_ms);
    let start = Instant::now();
    let maintained = s
        .store
        .lease_maintain(MaintainParams {
            max: LEASE_MAINTENANCE_BATCH_MAX,
        })
        .await;
    let took = start.elapsed();
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut holder)
        .await
        .unwrap();
    let maintained = maintained.expect("maintenance answers while a replica is held");
    assert!(
        took < Duration::from_millis(MAINTENANCE_WAIT_MS_MAX),
        "maintenance waited {took:?} for a held replica"
    );
    assert!(
        !maintained.expired.contains(&held),
        "the held replica is left"
    );
    assert_eq!(maintained.expired.len(), s.fleet.replica_specs().len() - 1);
    assert!(
        maintained.more,
        "the held replica is left for the next call"
    );
}

/// Waits until a session of this database waits for a lock.
/// The decision round's signature, for `ALTER FUNCTION`.
const ROUND_SIGNATURE: &str = "connreg.route_decide_round(text, text, text, bigint, text, \
     boolean, text, text, integer, integer, integer, boolean)";

/// A new route of acme's first binding decided while `holder` (an open
/// transaction) holds the rows `take` writes, and then commits them: the
/// round's row waits are lengthened on this test database (its 1 ms
/// `lock_timeout`, migration 0018, would otherwise usually end first:
/// the function's text is edited, as a mutant's is), so
/// its `UPDATE` reads the committed rows again (READ COMMITTED) and must
/// check room on them, not on the unlocked candidate read.
async fn resolve_after_a_committed_take(
    harness: &MutantHarness,
    take: &str,
) -> Result<connreg::request::Resolved, connreg::Error> {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let probe = s.resolve_acme("probe").await;
    let admin = harness.admin();
    let mut holder = PgConnection::connect_with(&admin).await.expect("a session");
    let mut observer = PgConnection::connect_with(&admin).await.expect("a session");
    let definition: String = sqlx::query_scalar(&format!(
        "SELECT pg_get_functiondef('{ROUND_SIGNATURE}'::regprocedure)"
    ))
    .fetch_one(&mut observer)
    .await
    .unwrap();
    let waits = "set_config('lock_timeout', '1', true)";
    assert_eq!(definition.matches(waits).count(), 1, "the round's row wait");
    sqlx::raw_sql(&definition.replace(waits, "set_config('lock_timeout', '5000', true)"))
        .execute(&mut observer)
        .await
        .unwrap();
    let scopes: Vec<String> = (probe.reservation.scopes.iter())
        .map(|s| s.as_str().to_owned())
        .collect();
    sqlx::raw_sql("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query(take)
        .bind(&scopes)
        .bind(probe.destination.instance.as_str())
        .execute(&mut holder)
        .await
        .unwrap();
    let store = s.store.clone();
    let request = s
        .fleet
        .request("after-the-take", &fixture::acme(), &fixture::crm_create());
    let resolving = tokio::spawn(async move { store.route_resolve(request).await });
    until_one_waits(&mut observer, "the resolve").await;
    sqlx::raw_sql("COMMIT").execute(&mut holder).await.unwrap();
    resolving.await.expect("the resolve task")
}

// spec: ROUTE-7, SIM-3
/// A counter filled by a commit the decision waited for is not counted
/// past its limit: the binding has no room, so the answer is `NoCapacity`.
async fn a_counter_filled_while_waited_for_is_not_counted(harness: &MutantHarness) {
    let answer = resolve_after_a_committed_take(
        harness,
        "UPDATE connreg.admission_counters c SET in_use = s.scope_limit
           FROM connreg.admission_scopes s
          WHERE s.scope_id = c.scope_id AND c.scope_id = ANY($1) AND $2::text IS NOT NULL",
    )
    .await;
    assert!(
        matches!(answer, Err(connreg::Error::NoCapacity)),
        "a full counter was counted: {answer:?}"
    );
}

// spec: ROUTE-6, ROUTE-9
/// A replica filled by a commit the decision waited for is skipped, not
/// counted past its capacity: every replica of the instance is full, so
/// the answer is `NoCapacity`.
async fn a_replica_filled_while_waited_for_is_skipped(harness: &MutantHarness) {
    let answer = resolve_after_a_committed_take(
        harness,
        "UPDATE connreg.replicas r SET active = r.capacity
          WHERE r.instance_id = $2 AND cardinality($1::text[]) >= 0",
    )
    .await;
    assert!(
        matches!(answer, Err(connreg::Error::NoCapacity)),
        "a full replica was counted: {answer:?}"
    );
}

async fn until_one_waits(observer: &mut PgConnection, who: &str) {
    let start = Instant::now();
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
              WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(&mut *observer)
        .await
        .unwrap();
        if waiting >= 1 {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_millis(QUEUE_WAIT_MS),
            "{who} never waited for the held lock"
        );
        tokio::time::sleep(Duration::from_millis(LOCK_POLL_MS)).await;
    }
}

#[test]
fn every_sql_mutant_applies_once() {
    // The real schema: each find text occurs exactly once (apply refuses
    // otherwise), each mutant installs, and IDs are unique.
    let mut ids: Vec<&str> = SQL_MUTANTS.iter().map(|m| m.id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), SQL_MUTANTS.len(), "SQL mutant IDs are unique");
    assert!(SQL_MUTANTS.len() >= 15);
    block_on(async {
        let test = TestRegistry::create().await.expect("a test database");
        let _registry = connreg::postgres::PgRegistry::connect(
            test.options(),
            ManualClock::new(connreg::Timestamp(0)),
            RegistryConfig::default(),
        )
        .await
        .expect("a registry");
        let mut admin = test
            .admin_connection()
            .await
            .expect("a superuser connection");
        for mutant in SQL_MUTANTS {
            sqlx::raw_sql("BEGIN").execute(&mut admin).await.unwrap();
            connreg::postgres::mutants::apply_on(&mut admin, mutant)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            sqlx::raw_sql("ROLLBACK").execute(&mut admin).await.unwrap();
        }
    });
}

/// Runs one PostgreSQL-only test on the real schema, or on the mutant
/// `CONNREG_SQL_MUTANT` names (as `.ci/sql-mutants-suite` does).
fn postgres_only(test: &str) {
    let mutant = connreg::postgres::mutants::mutant_from_env().unwrap_or_else(|e| panic!("{e}"));
    assert!(passes(test, &MutantHarness::new(mutant)), "{test} failed");
}

#[test]
fn settlement_takes_the_replica_before_the_counters_on_postgres() {
    postgres_only("sql_mutants::settlement_takes_the_replica_before_the_counters");
}

#[test]
fn heartbeat_waits_for_an_uncommitted_newer_one_on_postgres() {
    postgres_only("sql_mutants::heartbeat_waits_for_an_uncommitted_newer_one");
}

#[test]
fn maintenance_skips_a_held_replica_on_postgres() {
    postgres_only("sql_mutants::maintenance_skips_a_held_replica");
}

#[test]
fn a_counter_filled_while_waited_for_is_not_counted_on_postgres() {
    postgres_only("sql_mutants::a_counter_filled_while_waited_for_is_not_counted");
}

#[test]
fn a_replica_filled_while_waited_for_is_skipped_on_postgres() {
    postgres_only("sql_mutants::a_replica_filled_while_waited_for_is_skipped");
}

#[test]
fn every_sql_mutant_is_caught() {
    let only = std::env::var(ONLY_VAR).ok();
    let mut missed = Vec::new();
    for mutant in SQL_MUTANTS {
        if only.as_deref().is_some_and(|id| id != mutant.id) {
            continue;
        }
        let start = Instant::now();
        for test in mutant.caught_by {
            if test.starts_with("sim::") {
                // A PostgreSQL-tier scenario: sim/tests/sql_mutants.rs.
                continue;
            }
            let harness = MutantHarness::new(Some(mutant));
            let caught = !passes(test, &harness);
            eprintln!(
                "sql mutant {:<40} {:<18} {} {test} ({} ms)",
                mutant.id,
                mutant.kind.name(),
                if caught { "caught by" } else { "MISSED by" },
                start.elapsed().as_millis()
            );
            if !caught {
                missed.push(format!("{} (by {test})", mutant.id));
            }
        }
    }
    assert!(missed.is_empty(), "SQL mutants not caught: {missed:?}");
}
