//! Replica registration, heartbeats, draining, lease maintenance
//! (LEASE-1..LEASE-4), each one call of the data role's function (migration
//! 0008); and the operator acts of the control plane: closing a circuit and
//! reading the audit log (SETTLE-6, AUTH-7).
//!
//! None of these touch the catalog revision (CAT-3), and every lease
//! comparison uses the injected clock's time, bound as a parameter.

use sqlx::{PgConnection, PgPool};

use super::codec::{col, ms, replica_json, to_i64, u64_of};
use super::data::Data;
use super::error::db;
use super::tx;
use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::id::ReplicaId;
use crate::limits::{AUDIT_ENTRIES_MAX, INSTANCE_REPLICAS_MAX};
use crate::records::{Replica, ReplicaSpec};
use crate::request::{
    AuditEntry, AuditPage, AuditQuery, CircuitCloseParams, HeartbeatOutcome, HeartbeatParams,
    MaintainParams, Maintained, RegisterParams, ReleasedReservation,
};

const REGISTER: &str = "SELECT outcome, replica::text AS replica
     FROM connreg.data_replica_register($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)";

const HEARTBEAT: &str = "SELECT connreg.data_replica_heartbeat($1, $2, $3)";

const DRAIN: &str = "SELECT connreg.data_replica_drain($1)::text";

const SELECT_REPLICA: &str = "SELECT connreg.data_replica_get($1)::text";

const MAINTAIN: &str =
    "SELECT expired, released, more, releases FROM connreg.data_lease_maintain($1, $2, $3)";

impl Data {
    /// LEASE-1: register, or come back after going offline.
    pub(crate) async fn replica_register(&self, params: RegisterParams) -> Result<Replica> {
        params.validate()?;
        let spec = &params.spec;
        let health_seq = to_i64("health sequence", params.health_seq)?;
        let lease = ms(self.now().plus_ms(params.lease_ttl_ms));
        tx::call(&self.pool, async |conn: &mut PgConnection| {
            let row = sqlx::query(REGISTER)
                .bind(spec.id.as_str())
                .bind(spec.instance.as_str())
                .bind(spec.version.as_str())
                .bind(&spec.endpoint)
                .bind(&spec.peer_identity)
                .bind(spec.region.as_str())
                .bind(spec.zone.as_str())
                .bind(spec.capacity_class.as_str())
                .bind(i64::from(spec.capacity))
                .bind(health_seq)
                .bind(lease)
                .fetch_one(conn)
                .await
                .map_err(db)?;
            let outcome: String = col(&row, "outcome")?;
            let stored: Option<String> = col(&row, "replica")?;
            registered(spec, &outcome, stored)
        })
        .await
    }
}

/// The answer to a registration from the function's outcome.
fn registered(spec: &ReplicaSpec, outcome: &str, stored: Option<String>) -> Result<Replica> {
    {
        match (outcome, stored) {
            ("registered" | "unchanged", Some(stored)) => replica_json(&stored),
            ("instance_not_found", _) => Err(Error::NotFound {
                what: "instance",
                id: spec.instance.to_string(),
            }),
            ("version_not_found", _) => Err(Error::NotFound {
                what: "version",
                id: spec.version.to_string(),
            }),
            ("conflict", _) => Err(Error::Conflict {
                reason: "a registered replica must present the same identity",
            }),
            ("limit", _) => Err(Error::LimitExceeded {
                what: "replicas per instance",
                max: INSTANCE_REPLICAS_MAX as u64,
            }),
            _ => Err(super::error::corrupt("data_replica_register outcome")),
        }
    }
}

impl Data {
    /// LEASE-1: newer sequences advance; older ones are ignored.
    pub(crate) async fn replica_heartbeat(
        &self,
        params: HeartbeatParams,
    ) -> Result<HeartbeatOutcome> {
        params.validate()?;
        // A sequence above i64::MAX is newer than any stored one.
        let Ok(health_seq) = i64::try_from(params.health_seq) else {
            return Err(Error::LimitExceeded {
                what: "health sequence",
                max: i64::MAX as u64,
            });
        };
        let lease = ms(self.now().plus_ms(params.lease_ttl_ms));
        tx::call(&self.pool, async |conn: &mut PgConnection| {
            let outcome: String = sqlx::query_scalar(HEARTBEAT)
                .bind(params.replica.as_str())
                .bind(health_seq)
                .bind(lease)
                .fetch_one(conn)
                .await
                .map_err(db)?;
            match outcome.as_str() {
                "applied" => Ok(HeartbeatOutcome::Applied),
                "ignored" => Ok(HeartbeatOutcome::Ignored),
                "offline" => Err(Error::ReplicaUnavailable),
                "not_found" => Err(Error::NotFound {
                    what: "replica",
                    id: params.replica.to_string(),
                }),
                _ => Err(super::error::corrupt("data_replica_heartbeat outcome")),
            }
        })
        .await
    }

    /// Stops new routes; pinned retries still reach the replica.
    pub(crate) async fn replica_drain(&self, id: ReplicaId) -> Result<Replica> {
        tx::call(&self.pool, async |conn: &mut PgConnection| {
            let stored: Option<String> = sqlx::query_scalar(DRAIN)
                .bind(id.as_str())
                .fetch_one(conn)
                .await
                .map_err(db)?;
            match stored {
                Some(stored) => replica_json(&stored),
                None => Err(Error::NotFound {
                    what: "replica",
                    id: id.to_string(),
                }),
            }
        })
        .await
    }

    pub(crate) async fn replica_get(&self, id: ReplicaId) -> Result<Option<Replica>> {
        let stored: Option<String> = sqlx::query_scalar(SELECT_REPLICA)
            .bind(id.as_str())
            .fetch_one(&self.pool)
            .await
            .map_err(db)?;
        stored.as_deref().map(replica_json).transpose()
    }

    /// LEASE-2, LEASE-3: one bounded batch; contacts nothing, rewrites no
    /// destination.
    pub(crate) async fn lease_maintain(&self, params: MaintainParams) -> Result<Maintained> {
        params.validate()?;
        let now = ms(self.now());
        tx::call(&self.pool, async |conn: &mut PgConnection| {
            let row = sqlx::query(MAINTAIN)
                .bind(now)
                .bind(i32::try_from(params.max).unwrap_or(i32::MAX))
                .bind(i64::try_from(self.config.reservation_hold_ms).unwrap_or(i64::MAX))
                .fetch_one(conn)
                .await
                .map_err(db)?;
            let released: i64 = col(&row, "released")?;
            let releases: String = col(&row, "releases")?;
            let mut releases: Vec<ReleasedReservation> = serde_json::from_str(&releases)
                .map_err(|_| super::error::corrupt("data_lease_maintain releases"))?;
            // The lease releases come in action order, the hold releases
            // after them: one order, as the in-memory backend answers.
            releases.sort();
            Ok(Maintained {
                releases,
                expired: col::<Vec<String>>(&row, "expired")?
                    .into_iter()
                    .map(|r| ReplicaId::new(r).map_err(|_| super::error::corrupt("replica_id")))
                    .collect::<Result<Vec<ReplicaId>>>()?,
                released: u32::try_from(released).unwrap_or(u32::MAX),
                more: col(&row, "more")?,
            })
        })
        .await
    }
}

/// SETTLE-6, AUTH-7: only an operator closes a circuit, on the control
/// pool, recorded under the role the session logged in as.
pub(crate) async fn circuit_close(
    control: &PgPool,
    now: Timestamp,
    params: CircuitCloseParams,
) -> Result<AuditEntry> {
    params.validate()?;
    tx::transaction(control, async |tx: &mut PgConnection| {
        // Lock order (LOCK-1): the replica row only.
        let open: Option<bool> = sqlx::query_scalar(
            "SELECT circuit_open FROM connreg.replicas WHERE replica_id = $1 FOR UPDATE",
        )
        .bind(params.replica.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(db)?;
        match open {
            None => {
                return Err(Error::NotFound {
                    what: "replica",
                    id: params.replica.to_string(),
                });
            }
            Some(false) => {
                return Err(Error::Conflict {
                    reason: "the circuit is not open",
                });
            }
            Some(true) => {}
        }
        let row = sqlx::query(
            "WITH closed AS (
                UPDATE connreg.replicas SET circuit_open = false, consecutive_unknown = 0
                WHERE replica_id = $1
            ), entry AS (
                INSERT INTO connreg.operator_audit (at_ms, operator, action, replica_id, reason)
                VALUES ($2, session_user, 'circuit_close', $1, $3)
                RETURNING entry_id, operator
            ), pruned AS (
                DELETE FROM connreg.operator_audit
                WHERE entry_id <= (SELECT entry_id FROM entry) - $4
            )
            SELECT entry_id, operator FROM entry",
        )
        .bind(params.replica.as_str())
        .bind(ms(now))
        .bind(&params.reason)
        .bind(to_i64("audit entries", AUDIT_ENTRIES_MAX as u64)?)
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        Ok(AuditEntry {
            seq: u64_of("entry_id", col(&row, "entry_id")?)?,
            at: now,
            operator: col(&row, "operator")?,
            action: "circuit_close".into(),
            replica: params.replica.clone(),
            reason: params.reason.clone(),
        })
    })
    .await
}

/// AUTH-7: one page of the audit log, oldest first, on the control pool.
pub(crate) async fn audit_page(control: &PgPool, query: AuditQuery) -> Result<AuditPage> {
    query.validate()?;
    let after = to_i64("audit position", query.after.unwrap_or(0))?;
    let rows = sqlx::query(
        "SELECT entry_id, at_ms, operator, action, replica_id, reason
         FROM connreg.operator_audit WHERE entry_id > $1 ORDER BY entry_id LIMIT $2",
    )
    .bind(after)
    .bind(i64::from(query.limit) + 1)
    .fetch_all(control)
    .await
    .map_err(db)?;
    let mut entries = rows
        .iter()
        .map(|row| {
            Ok(AuditEntry {
                seq: u64_of("entry_id", col(row, "entry_id")?)?,
                at: Timestamp(u64_of("at_ms", col(row, "at_ms")?)?),
                operator: col(row, "operator")?,
                action: col(row, "action")?,
                replica: super::codec::id(row, "replica_id")?,
                reason: col(row, "reason")?,
            })
        })
        .collect::<Result<Vec<AuditEntry>>>()?;
    let more = entries.len() > query.limit as usize;
    entries.truncate(query.limit as usize);
    Ok(AuditPage {
        next_after: if more {
            entries.last().map(|e| e.seq)
        } else {
            None
        },
        entries,
    })
}
