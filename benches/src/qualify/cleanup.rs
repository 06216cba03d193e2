//! Removing a run's rows, and only its rows, from a shared database.
//!
//! Every identifier a run writes starts with its prefix (`super::fleet`,
//! `super::workload`), so the rows are found by key. They are deleted in
//! one transaction through the control role, which owns the tables, in
//! the order the foreign keys need. Routes are never deleted by the
//! registry itself (REC-6); this is the qualification's own housekeeping,
//! not a registry operation.
//!
//! What a run leaves changed on a shared database, by design: the catalog
//! revision (each publication raised it), the fence and commit-order
//! sequences (each reservation drew from them). No row.

use std::collections::BTreeMap;

use connreg::postgres::PgConnectOptions;
use serde::{Deserialize, Serialize};
use sqlx::{Connection, PgConnection};

/// Each table a run writes, with the column that starts with the run
/// prefix, in deletion order (children first).
pub const RUN_TABLES: [(&str, &str); 13] = [
    ("assignments", "action_id"),
    ("route_snapshots", "replica_id"),
    ("replicas", "replica_id"),
    ("binding_scopes", "binding_id"),
    ("bindings", "binding_id"),
    ("admission_counters", "scope_id"),
    ("admission_scopes", "scope_id"),
    ("instances", "instance_id"),
    ("version_profiles", "version_id"),
    ("version_capabilities", "version_id"),
    ("connector_versions", "version_id"),
    ("capability_definitions", "capability_id"),
    ("connector_types", "type_id"),
];

/// What the cleanup did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CleanupFacts {
    /// The prefix removed.
    pub prefix: String,
    /// Rows deleted, by table.
    pub removed: BTreeMap<String, u64>,
    /// Rows deleted in all.
    pub rows_removed: u64,
    /// Rows with the prefix found afterwards: 0 unless something failed.
    pub rows_left: u64,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

fn statement(table: &str, column: &str, verb: &str) -> String {
    // Table and column names are the constants above, never input.
    format!("{verb} FROM connreg.{table} WHERE starts_with({column}, $1)")
}

/// Deletes every row whose key starts with `prefix`, as the control role,
/// then counts what is left. An empty prefix is refused: it would match
/// every row.
pub async fn remove_run(control: &PgConnectOptions, prefix: &str) -> CleanupFacts {
    let mut facts = CleanupFacts {
        prefix: prefix.to_string(),
        ..CleanupFacts::default()
    };
    if prefix.is_empty() {
        facts.error = Some("refused: an empty prefix matches every row".into());
        return facts;
    }
    let result: Result<(), sqlx::Error> = async {
        let mut conn = PgConnection::connect_with(control).await?;
        let mut tx = conn.begin().await?;
        for (table, column) in RUN_TABLES {
            let done = sqlx::query(&statement(table, column, "DELETE"))
                .bind(prefix)
                .execute(&mut *tx)
                .await?;
            facts
                .removed
                .insert(table.to_string(), done.rows_affected());
            facts.rows_removed += done.rows_affected();
        }
        tx.commit().await?;
        facts.rows_left = count_run_rows(&mut conn, prefix).await?;
        conn.close().await
    }
    .await;
    if let Err(e) = result {
        facts.error = Some(e.to_string());
    }
    facts
}

/// Rows whose key starts with `prefix`, over every run table.
pub async fn count_run_rows(conn: &mut PgConnection, prefix: &str) -> Result<u64, sqlx::Error> {
    let mut total = 0u64;
    for (table, column) in RUN_TABLES {
        let n: i64 = sqlx::query_scalar(&statement(table, column, "SELECT count(*)"))
            .bind(prefix)
            .fetch_one(&mut *conn)
            .await?;
        total += n.max(0) as u64;
    }
    Ok(total)
}
