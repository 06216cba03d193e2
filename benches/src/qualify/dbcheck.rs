//! The whole-database invariants, computed by the server (issue 10, item
//! 6): as the control role, in one read-only `REPEATABLE READ`
//! transaction (one snapshot), with aggregate queries that need no row
//! limit, so they hold for a database of any size and for every fleet in
//! it, not only the run's:
//!
//! - one assignment per action;
//! - no fence token on two assignments;
//! - every assignment's snapshot exists (the decision writes a route only
//!   with the snapshot it has just read or inserted; no foreign key
//!   re-checks it on the write path);
//! - every replica's `active` equals its reserved assignments;
//! - every admission counter's `in_use` equals the reserved assignments
//!   holding its scope.
//!
//! They complement the inspection of `super::check`, which is bounded by
//! `INSPECT_ROWS_MAX` and also checks each route against its answer.

use connreg::postgres::PgConnectOptions;
use serde::{Deserialize, Serialize};
use sqlx::{Connection, PgConnection};

use super::check::{ViolationKind, Violations};

/// What the server counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatabaseCheck {
    /// Assignments in the database.
    pub assignments: u64,
    /// Replicas in the database.
    pub replicas: u64,
    /// Admission counters in the database.
    pub counters: u64,
    /// Actions with more than one assignment.
    pub duplicate_actions: u64,
    /// Fence tokens on more than one assignment.
    pub reused_fences: u64,
    /// Replicas whose `active` differs from their reserved assignments.
    pub replicas_mismatched: u64,
    /// Counters whose `in_use` differs from the reserved assignments
    /// holding their scope.
    pub counters_mismatched: u64,
    /// Assignments whose snapshot row is missing.
    #[serde(default)]
    pub routes_without_snapshot: u64,
}

const COUNTS: &str = "
SELECT
  (SELECT count(*) FROM connreg.assignments),
  (SELECT count(*) FROM connreg.replicas),
  (SELECT count(*) FROM connreg.admission_counters),
  (SELECT count(*) FROM (SELECT action_id FROM connreg.assignments
                         GROUP BY action_id HAVING count(*) > 1) d),
  (SELECT count(*) FROM (SELECT fence FROM connreg.assignments
                         GROUP BY fence HAVING count(*) > 1) f),
  (SELECT count(*) FROM connreg.replicas r
     LEFT JOIN (SELECT replica_id, count(*) AS live FROM connreg.routes
                WHERE reserved GROUP BY replica_id) a USING (replica_id)
     WHERE r.active <> coalesce(a.live, 0)),
  (SELECT count(*) FROM connreg.admission_counters c
     LEFT JOIN (SELECT s.scope_id, count(*) AS live
                FROM connreg.routes a, unnest(a.scopes) AS s(scope_id)
                WHERE a.reserved GROUP BY s.scope_id) l USING (scope_id)
     WHERE c.in_use <> coalesce(l.live, 0)),
  (SELECT count(*) FROM connreg.assignments a
     WHERE NOT EXISTS (SELECT 1 FROM connreg.route_snapshots s
                       WHERE s.snapshot_id = a.snapshot_id))
";

/// Runs the checks as the control role; adds what they find to
/// `violations`.
pub async fn check_database(
    control: &PgConnectOptions,
    violations: &mut Violations,
) -> Result<DatabaseCheck, String> {
    let mut conn = PgConnection::connect_with(control)
        .await
        .map_err(|e| format!("connect as the control role: {e}"))?;
    let counts = async {
        let mut tx = conn.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await?;
        let row: (i64, i64, i64, i64, i64, i64, i64, i64) =
            sqlx::query_as(COUNTS).fetch_one(&mut *tx).await?;
        tx.rollback().await?;
        Ok::<_, sqlx::Error>(row)
    }
    .await;
    let _ = conn.close().await;
    let (assignments, replicas, counters, duplicates, fences, replicas_off, counters_off, orphans) =
        counts.map_err(|e| format!("the whole-database checks failed: {e}"))?;
    let n = |v: i64| v.max(0) as u64;
    let check = DatabaseCheck {
        assignments: n(assignments),
        replicas: n(replicas),
        counters: n(counters),
        duplicate_actions: n(duplicates),
        reused_fences: n(fences),
        replicas_mismatched: n(replicas_off),
        counters_mismatched: n(counters_off),
        routes_without_snapshot: n(orphans),
    };
    for (count, kind, what) in [
        (
            check.duplicate_actions,
            ViolationKind::OneRoutePerAction,
            "actions with more than one assignment",
        ),
        (
            check.reused_fences,
            ViolationKind::FenceReused,
            "fences on more than one assignment",
        ),
        (
            check.replicas_mismatched,
            ViolationKind::ReplicaAccounting,
            "replicas whose active count differs from their reserved assignments",
        ),
        (
            check.counters_mismatched,
            ViolationKind::ScopeAccounting,
            "admission counters that differ from the reserved assignments holding them",
        ),
        (
            check.routes_without_snapshot,
            ViolationKind::RouteChanged,
            "assignments whose route snapshot is missing",
        ),
    ] {
        if count > 0 {
            violations.add(kind, || {
                format!("whole database, counted by the server: {count} {what}")
            });
        }
    }
    Ok(check)
}
