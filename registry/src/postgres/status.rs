//! Aggregate status (AUTH-5) and full inspection for checkers.

use super::catalog::parse_scope_kind;
use super::codec::{col, id, replica, replica_columns, route, route_columns, u32_of, u64_of};
use super::data::Data;
use super::error::{corrupt, db};
use super::tx;
use crate::error::{Error, Result};
use crate::inspect::{INSPECT_ROWS_MAX, ScopeUsage, StoreSnapshot};
use crate::records::{AdmissionScope, Revision};
use crate::request::StatusReport;
use sqlx::{PgConnection, PgPool};

/// One statement of the data role's function (migration 0008), so one
/// snapshot: the counts agree with each other.
const STATUS: &str = "SELECT * FROM connreg.data_status()";

const COUNT_ROWS: &str = "SELECT (SELECT count(*) FROM connreg.replicas)
        + (SELECT count(*) FROM connreg.assignments)
        + (SELECT count(*) FROM connreg.admission_scopes)";

impl Data {
    /// AUTH-5: readable through the data role.
    pub(crate) async fn status(&self) -> Result<StatusReport> {
        let row = sqlx::query(STATUS)
            .fetch_one(&self.pool)
            .await
            .map_err(db)?;
        let count = |name: &'static str| -> Result<u64> { u64_of(name, col(&row, name)?) };
        Ok(StatusReport {
            revision: Revision(count("revision")?),
            replicas_ready: count("ready")?,
            replicas_draining: count("draining")?,
            replicas_offline: count("offline")?,
            active_assignments: count("active_assignments")?,
            assignments_total: count("assignments_total")?,
            open_circuits: count("open_circuits")?,
        })
    }
}

/// Every replica, scope and route, from one snapshot: through the control
/// pool, since the data role reads no table (AUTH-6).
pub(crate) async fn inspect(control: &PgPool) -> Result<StoreSnapshot> {
    tx::read(control, async |tx: &mut PgConnection| {
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        let rows: i64 = sqlx::query_scalar(COUNT_ROWS)
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
        if rows > INSPECT_ROWS_MAX as i64 {
            return Err(Error::LimitExceeded {
                what: "inspected rows",
                max: INSPECT_ROWS_MAX as u64,
            });
        }
        let revision: i64 = sqlx::query_scalar("SELECT revision FROM connreg.catalog_state")
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
        let replicas = sqlx::query(concat!(
            "SELECT ",
            replica_columns!(),
            " FROM connreg.replicas r ORDER BY r.replica_id"
        ))
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?
        .iter()
        .map(replica)
        .collect::<Result<Vec<_>>>()?;
        let scopes = sqlx::query(
            "SELECT s.scope_id, s.tenant_id, s.kind, s.scope_limit, COALESCE(c.in_use, 0) AS in_use
             FROM connreg.admission_scopes s
             LEFT JOIN connreg.admission_counters c ON c.scope_id = s.scope_id
             ORDER BY s.scope_id",
        )
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?
        .iter()
        .map(|row| {
            let kind: String = col(row, "kind")?;
            Ok(ScopeUsage {
                scope: AdmissionScope {
                    id: id(row, "scope_id")?,
                    tenant: id(row, "tenant_id")?,
                    kind: parse_scope_kind(&kind).ok_or_else(|| corrupt("kind"))?,
                    limit: u32_of("scope_limit", col(row, "scope_limit")?)?,
                },
                in_use: u32_of("in_use", col(row, "in_use")?)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
        let routes = sqlx::query(concat!(
            "SELECT ",
            route_columns!(),
            " FROM connreg.routes a ORDER BY a.action_id"
        ))
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?
        .iter()
        .map(route)
        .collect::<Result<Vec<_>>>()?;
        Ok(StoreSnapshot {
            revision: Revision(u64_of("revision", revision)?),
            replicas,
            scopes,
            routes,
        })
    })
    .await
}
