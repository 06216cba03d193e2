//! SQL mutants of the protocol functions (feature `postgres-testing`):
//! the slips a change to `migrations/` could make, each applied to a
//! throwaway database, so the tests that must catch it can be shown to.
//!
//! A mutant edits the live definition of one function
//! (`pg_get_functiondef` on the test database, so the latest migration's):
//! its [`find`](SqlMutant::find) text must occur exactly once there and is
//! replaced by [`replace`](SqlMutant::replace); the definition is then run
//! again as the superuser, which keeps the function's owner, `SECURITY
//! DEFINER`, `SET` clauses and grants. A `find` that no longer occurs
//! exactly once is an error naming the mutant, so a schema change that
//! invalidates a mutant is reported, never silently passed.
//!
//! [`TestRegistry::open`](super::testing::TestRegistry::open) applies the
//! mutant named by [`SQL_MUTANT_VAR`] to every database it opens, so
//!
//! ```text
//! CONNREG_SQL_MUTANT=settle-skips-counter-release \
//!   cargo test -p connreg-conformance --test postgres
//! ```
//!
//! runs the whole conformance suite against that mutant; an unknown ID
//! fails every test. `conformance/tests/sql_mutants.rs` applies each mutant
//! and runs the tests [`caught_by`](SqlMutant::caught_by) names, which must
//! fail. The table is in docs/TESTING.md, "SQL mutants of the PostgreSQL
//! backend".

use sqlx::{Connection, PgConnection};

use super::{PgConnectOptions, StartError};

/// The environment variable naming the mutant every test database opened
/// by [`TestRegistry::open`](super::testing::TestRegistry::open) gets.
pub const SQL_MUTANT_VAR: &str = "CONNREG_SQL_MUTANT";

/// What kind of slip a mutant is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MutantKind {
    /// A row lock (`FOR UPDATE`, `FOR NO KEY UPDATE`) or a lock call left out.
    LockDropped,
    /// `SKIP LOCKED` or `NOWAIT` left out: a wait where none may be.
    WaitAdded,
    /// Two locks taken in the other order (LOCK-1).
    LockOrder,
    /// A comparison or an ordering turned.
    ComparisonTurned,
    /// A term of a `WHERE` or a guard lost.
    TermLost,
    /// A counter's update left out.
    CounterOmitted,
}

impl MutantKind {
    /// The kind's name in the table (docs/TESTING.md).
    pub fn name(self) -> &'static str {
        match self {
            MutantKind::LockDropped => "lock dropped",
            MutantKind::WaitAdded => "wait added",
            MutantKind::LockOrder => "lock order",
            MutantKind::ComparisonTurned => "comparison turned",
            MutantKind::TermLost => "term lost",
            MutantKind::CounterOmitted => "counter omitted",
        }
    }
}

/// One SQL mutant of one protocol function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqlMutant {
    /// Kebab-case name, the value of [`SQL_MUTANT_VAR`].
    pub id: &'static str,
    /// The function, as a `regprocedure` (name and argument types).
    pub function: &'static str,
    /// The kind of slip.
    pub kind: MutantKind,
    /// Text that occurs exactly once in the function's live definition.
    pub find: &'static str,
    /// What replaces it.
    pub replace: &'static str,
    /// The tests that fail on it: conformance tests as `area::name`
    /// (`conformance/tests/sql_mutants.rs` runs them), `sql_mutants::name`
    /// for the PostgreSQL-only tests of that file, and
    /// `sim::INVARIANT@SCENARIO` for seed 1 of a scenario on the
    /// simulator's PostgreSQL tier failing on that invariant
    /// (`sim/tests/sql_mutants.rs` runs those).
    pub caught_by: &'static [&'static str],
}

const RESOLVE: &str =
    "connreg.data_route_resolve(text,text,text,bigint,text,boolean,text,text,boolean)";
const ROUND: &str = "connreg.route_decide_round(text,text,text,bigint,text,boolean,text,text,\
                     integer,integer,integer,boolean)";
const SETTLE: &str = "connreg.data_route_settle(jsonb,text,boolean,bigint)";
const MAINTAIN: &str = "connreg.data_lease_maintain(bigint,integer,bigint)";
const HEARTBEAT: &str = "connreg.data_replica_heartbeat(text,bigint,bigint)";

/// Every SQL mutant, in the order of the table in docs/TESTING.md.
pub const SQL_MUTANTS: &[SqlMutant] = &[
    // The lock-free `existing` answer (every resolve of a held route, the
    // simulator's PostgreSQL tier included since migration 0015).
    SqlMutant {
        id: "resolve-existing-ignores-reservation",
        function: RESOLVE,
        kind: MutantKind::TermLost,
        find: "WHERE a.action_id = p_action AND a.reserved\n",
        replace: "WHERE a.action_id = p_action\n",
        caught_by: &[
            "pin::released_route_is_reserved_again_on_the_same_replica",
            "sim::capacity_accounting@0005_draining_pinned_retries.toml",
        ],
    },
    SqlMutant {
        id: "resolve-existing-ignores-tenant",
        function: RESOLVE,
        kind: MutantKind::TermLost,
        find: "AND a.tenant_id = p_tenant AND a.capability_id = p_capability;",
        replace: "AND a.capability_id = p_capability;",
        caught_by: &[
            "route::resolve_with_other_tenant_returns_conflict",
            "sim::no_cross_tenant_disclosure@0010_one_action_two_tenants.toml",
        ],
    },
    SqlMutant {
        id: "resolve-drops-action-lock",
        function: RESOLVE,
        kind: MutantKind::LockDropped,
        find: "    PERFORM connreg.protocol_lock(1668182530, p_action);\n",
        replace: "",
        caught_by: &["race::racing_resolves_of_one_action_create_one_assignment"],
    },
    // The decision round.
    SqlMutant {
        id: "round-conflict-needs-both",
        function: ROUND,
        kind: MutantKind::ComparisonTurned,
        find: "IF v_tenant <> p_tenant OR v_capability <> p_capability THEN",
        replace: "IF v_tenant <> p_tenant AND v_capability <> p_capability THEN",
        caught_by: &["route::resolve_with_other_tenant_returns_conflict"],
    },
    SqlMutant {
        id: "round-pinned-room-turned",
        function: ROUND,
        kind: MutantKind::ComparisonTurned,
        find: "v_room AND r.active < r.capacity",
        replace: "v_room AND r.active <= r.capacity",
        caught_by: &["pin::retry_on_full_replica_or_scope_answers_no_capacity"],
    },
    SqlMutant {
        id: "round-priority-reversed",
        function: ROUND,
        kind: MutantKind::ComparisonTurned,
        find: "ORDER BY e.priority, r.region",
        replace: "ORDER BY e.priority DESC, r.region",
        caught_by: &["route::lower_binding_priority_wins"],
    },
    SqlMutant {
        id: "round-spread-hash-turned",
        function: ROUND,
        kind: MutantKind::ComparisonTurned,
        find: "substr(md5(p_action || '/' || r.replica_id), 1, 16),\n                      e.instance_id",
        replace: "substr(md5(r.replica_id || '/' || p_action), 1, 16),\n                      e.instance_id",
        // Every replica it picks is eligible: no invariant of the
        // simulator objects, only a reference that ranks as the fleet must.
        caught_by: &[
            "route::equal_candidates_follow_the_stable_route_hash",
            "sim::oracle_agrees@0001_steady_state.toml",
        ],
    },
    SqlMutant {
        id: "round-ignores-region",
        function: ROUND,
        kind: MutantKind::TermLost,
        find: "               AND (p_cross_region_allowed OR r.region = p_region)\n             \
               ORDER BY e.priority",
        replace: "             ORDER BY e.priority",
        caught_by: &["route::cross_region_forbidden_keeps_routes_in_the_preferred_region"],
    },
    SqlMutant {
        id: "round-ignores-capacity-class",
        function: ROUND,
        kind: MutantKind::TermLost,
        find: "               AND r.capacity_class = p_capacity_class\n               \
               AND (p_cross_region_allowed",
        replace: "               AND (p_cross_region_allowed",
        caught_by: &["route::replica_of_another_capacity_class_is_filtered_out"],
    },
    SqlMutant {
        id: "round-counter-room-turned",
        function: ROUND,
        kind: MutantKind::ComparisonTurned,
        find: "WHERE c.scope_id = ANY (v_scopes)\n                       \
               AND c.in_use < (SELECT s.scope_limit",
        replace: "WHERE c.scope_id = ANY (v_scopes)\n                       \
                  AND c.in_use <= (SELECT s.scope_limit",
        caught_by: &["sql_mutants::a_counter_filled_while_waited_for_is_not_counted"],
    },
    SqlMutant {
        id: "round-pick-unchecked",
        function: ROUND,
        kind: MutantKind::TermLost,
        find: "                   AND r.active < r.capacity AND NOT r.circuit_open\n                \
               RETURNING",
        replace: "                   AND NOT r.circuit_open\n                RETURNING",
        caught_by: &["sql_mutants::a_replica_filled_while_waited_for_is_skipped"],
    },
    SqlMutant {
        id: "round-rows-waited-for",
        function: ROUND,
        kind: MutantKind::WaitAdded,
        find: "                PERFORM set_config('lock_timeout', '1', true);\n",
        replace: "",
        caught_by: &["race::mixed_load_over_a_full_binding_never_answers_unavailable"],
    },
    SqlMutant {
        id: "round-reserve-skips-replica-count",
        function: ROUND,
        kind: MutantKind::CounterOmitted,
        find: "UPDATE connreg.replicas r SET active = r.active + 1\n                 \
               WHERE r.replica_id = v_replica;",
        replace: "",
        caught_by: &["pin::released_route_is_reserved_again_on_the_same_replica"],
    },
    SqlMutant {
        id: "round-create-skips-replica-count",
        function: ROUND,
        kind: MutantKind::CounterOmitted,
        find: "UPDATE connreg.replicas r SET active = r.active + 1\n                 \
               WHERE r.replica_id = cand.replica_id",
        replace: "UPDATE connreg.replicas r SET active = r.active\n                 \
               WHERE r.replica_id = cand.replica_id",
        caught_by: &["route::full_replica_takes_no_new_routes"],
    },
    SqlMutant {
        id: "round-create-skips-counter",
        function: ROUND,
        kind: MutantKind::CounterOmitted,
        find: "UPDATE connreg.admission_counters c SET in_use = c.in_use + 1\n                     \
               WHERE c.scope_id = ANY (v_scopes)",
        replace: "UPDATE connreg.admission_counters c SET in_use = c.in_use\n                     \
                  WHERE c.scope_id = ANY (v_scopes)",
        caught_by: &["route::resolve_reserves_scopes_replica_and_fence_together"],
    },
    // Settlement.
    SqlMutant {
        id: "settle-skips-counter-release",
        function: SETTLE,
        kind: MutantKind::CounterOmitted,
        find: "UPDATE connreg.admission_counters c SET in_use = greatest(c.in_use - 1, 0)\n     \
               WHERE c.scope_id = ANY(v_scopes);",
        replace: "",
        caught_by: &["settle::settlement_releases_every_counter_at_once"],
    },
    SqlMutant {
        id: "settle-skips-replica-release",
        function: SETTLE,
        kind: MutantKind::CounterOmitted,
        find: "SET active = greatest(r.active - 1, 0), circuit_open = v_open,",
        replace: "SET circuit_open = v_open,",
        caught_by: &["settle::settlement_releases_every_counter_at_once"],
    },
    SqlMutant {
        id: "settle-circuit-threshold-turned",
        function: SETTLE,
        kind: MutantKind::ComparisonTurned,
        find: "v_unknown >= p_circuit_threshold",
        replace: "v_unknown > p_circuit_threshold",
        caught_by: &[
            "settle::unknown_outcomes_open_the_circuit_at_the_threshold",
            "sim::circuit_follows_outcomes@0036_circuit_counts_reset.toml",
        ],
    },
    SqlMutant {
        id: "settle-releases-twice",
        function: SETTLE,
        kind: MutantKind::TermLost,
        find: "    IF NOT v_route.reserved THEN\n        RETURN 'not_reserved';\n    END IF;\n",
        replace: "",
        caught_by: &["settle::settling_again_changes_nothing"],
    },
    SqlMutant {
        id: "settle-ignores-fence",
        function: SETTLE,
        kind: MutantKind::TermLost,
        find: "connreg.assignment_json(v_route) IS DISTINCT FROM p_given",
        replace: "connreg.assignment_json(v_route) - 'fence' - 'attempt' \
                  IS DISTINCT FROM p_given - 'fence' - 'attempt'",
        caught_by: &["settle::stale_copy_after_a_pinned_retry_is_fence_lost"],
    },
    SqlMutant {
        id: "settle-unlocked-replica",
        function: SETTLE,
        kind: MutantKind::LockDropped,
        find: "WHERE r.replica_id = v_replica FOR UPDATE;",
        replace: "WHERE r.replica_id = v_replica;",
        caught_by: &["race::racing_unknown_settlements_count_every_one"],
    },
    SqlMutant {
        id: "settle-locks-counters-first",
        function: SETTLE,
        kind: MutantKind::LockOrder,
        find: "    PERFORM connreg.protocol_lock(1668182530, v_action);\n",
        replace: "    PERFORM connreg.protocol_lock(1668182530, v_action);\n    \
                  PERFORM 1 FROM connreg.admission_counters c\n      \
                  WHERE c.scope_id IN (SELECT jsonb_array_elements_text(p_given->'scopes'))\n      \
                  ORDER BY c.scope_id FOR UPDATE;\n",
        caught_by: &["sql_mutants::settlement_takes_the_replica_before_the_counters"],
    },
    // Lease maintenance and held reservations.
    SqlMutant {
        id: "maintain-ignores-batch-limit",
        function: MAINTAIN,
        kind: MutantKind::TermLost,
        find: "         LIMIT p_max\n",
        replace: "",
        caught_by: &["lease::maintenance_is_bounded_per_call"],
    },
    SqlMutant {
        id: "maintain-waits-for-replicas",
        function: MAINTAIN,
        kind: MutantKind::WaitAdded,
        find: "         FOR UPDATE SKIP LOCKED\n    LOOP",
        replace: "         FOR UPDATE\n    LOOP",
        caught_by: &["sql_mutants::maintenance_skips_a_held_replica"],
    },
    SqlMutant {
        id: "maintain-skips-counter-release",
        function: MAINTAIN,
        kind: MutantKind::CounterOmitted,
        find: "SET in_use = greatest(c.in_use - d.n, 0)",
        replace: "SET in_use = c.in_use",
        caught_by: &["lease::maintenance_releases_reservations_as_lease_expired"],
    },
    SqlMutant {
        id: "maintain-expiry-turned",
        function: MAINTAIN,
        kind: MutantKind::ComparisonTurned,
        find: "AND x.lease_expires_at_ms <= p_now_ms\n         ORDER BY",
        replace: "AND x.lease_expires_at_ms < p_now_ms\n         ORDER BY",
        caught_by: &["lease::leases_follow_the_injected_clock_only"],
    },
    SqlMutant {
        id: "maintain-hold-turned",
        function: MAINTAIN,
        kind: MutantKind::ComparisonTurned,
        find: "a.reserved_at_ms <= p_now_ms - p_hold_ms",
        replace: "a.reserved_at_ms < p_now_ms - p_hold_ms",
        caught_by: &["hold::a_reservation_is_released_once_its_hold_passes"],
    },
    SqlMutant {
        id: "maintain-holds-newest-first",
        function: MAINTAIN,
        kind: MutantKind::ComparisonTurned,
        find: "ORDER BY a.reserved_at_ms, a.fence",
        replace: "ORDER BY a.reserved_at_ms DESC, a.fence",
        caught_by: &["hold::holds_are_released_oldest_first_within_the_batch"],
    },
    // Heartbeats.
    SqlMutant {
        id: "heartbeat-accepts-equal-sequence",
        function: HEARTBEAT,
        kind: MutantKind::ComparisonTurned,
        find: "IF p_health_seq <= v_seq THEN",
        replace: "IF p_health_seq < v_seq THEN",
        caught_by: &["lease::older_or_equal_heartbeat_is_ignored"],
    },
    SqlMutant {
        id: "heartbeat-unlocked-replica",
        function: HEARTBEAT,
        kind: MutantKind::LockDropped,
        find: "WHERE r.replica_id = p_replica FOR UPDATE;",
        replace: "WHERE r.replica_id = p_replica;",
        caught_by: &["sql_mutants::heartbeat_waits_for_an_uncommitted_newer_one"],
    },
];

/// The mutant called `id`.
pub fn mutant(id: &str) -> Option<&'static SqlMutant> {
    SQL_MUTANTS.iter().find(|m| m.id == id)
}

/// The mutant [`SQL_MUTANT_VAR`] names, if it is set; an unknown ID is an
/// error listing the known ones.
pub fn mutant_from_env() -> Result<Option<&'static SqlMutant>, StartError> {
    let Ok(id) = std::env::var(SQL_MUTANT_VAR) else {
        return Ok(None);
    };
    mutant(&id).map(Some).ok_or_else(|| StartError::Setup {
        reason: format!(
            "{SQL_MUTANT_VAR}={id}: no such SQL mutant (known: {})",
            SQL_MUTANTS
                .iter()
                .map(|m| m.id)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

/// Applies `mutant` to the database `admin` (a superuser's options)
/// reaches, whose schema is installed: its function's definition with
/// `find` replaced.
pub async fn apply(admin: &PgConnectOptions, mutant: &SqlMutant) -> Result<(), StartError> {
    let mut conn = PgConnection::connect_with(admin).await?;
    let definition: String = sqlx::query_scalar(DEFINITION)
        .bind(mutant.function)
        .fetch_one(&mut conn)
        .await
        .map_err(|e| failed(mutant, format!("no live definition: {e}")))?;
    let mutated = mutated(mutant, &definition)?;
    sqlx::query(&mutated)
        .persistent(false)
        .execute(&mut conn)
        .await
        .map_err(|e| {
            failed(
                mutant,
                format!("the mutated definition does not install: {e}"),
            )
        })?;
    let _ = conn.close().await;
    Ok(())
}

/// [`apply`] on an open superuser connection, inside the caller's
/// transaction if one is open (to check a mutant and roll it back).
pub async fn apply_on(conn: &mut PgConnection, mutant: &SqlMutant) -> Result<(), StartError> {
    let definition: String = sqlx::query_scalar(DEFINITION)
        .bind(mutant.function)
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| failed(mutant, format!("no live definition: {e}")))?;
    let mutated = mutated(mutant, &definition)?;
    sqlx::query(&mutated)
        .persistent(false)
        .execute(&mut *conn)
        .await
        .map_err(|e| {
            failed(
                mutant,
                format!("the mutated definition does not install: {e}"),
            )
        })?;
    Ok(())
}

/// A function's live definition, as `CREATE OR REPLACE FUNCTION`.
const DEFINITION: &str = "SELECT pg_get_functiondef($1::regprocedure)";

/// `definition` with the mutant's edit, or an error when its `find` text
/// does not occur exactly once.
fn mutated(mutant: &SqlMutant, definition: &str) -> Result<String, StartError> {
    let found = definition.matches(mutant.find).count();
    if found != 1 {
        return Err(failed(
            mutant,
            format!(
                "its find text occurs {found} times in the live definition, not once: \
                 the schema changed under it; update the mutant"
            ),
        ));
    }
    Ok(definition.replacen(mutant.find, mutant.replace, 1))
}

fn failed(mutant: &SqlMutant, what: String) -> StartError {
    StartError::Setup {
        reason: format!("SQL mutant {} ({}): {what}", mutant.id, mutant.function),
    }
}
