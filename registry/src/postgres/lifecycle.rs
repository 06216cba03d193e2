//! Replica registration, heartbeats, draining, lease maintenance and
//! circuits (LEASE-1..LEASE-4, SETTLE-6).
//!
//! None of these touch the catalog revision (CAT-3), and every lease
//! comparison uses the injected clock's time, bound as a parameter.

use std::collections::BTreeMap;

use sqlx::PgConnection;

use super::codec::{col, ms, replica, replica_columns, to_i64};
use super::data::Data;
use super::error::db;
use super::locks;
use super::tx;
use crate::error::{Error, Result};
use crate::id::ReplicaId;
use crate::limits::{AUDIT_ENTRIES_MAX, INSTANCE_REPLICAS_MAX};
use crate::records::Replica;
use crate::request::{
    AuditEntry, CircuitCloseParams, HeartbeatOutcome, HeartbeatParams, MaintainParams, Maintained,
    RegisterParams,
};

const SELECT_REPLICA: &str = concat!(
    "SELECT ",
    replica_columns!(),
    " FROM connreg.replicas r WHERE r.replica_id = $1"
);

const LOCK_REPLICA: &str = concat!(
    "SELECT ",
    replica_columns!(),
    " FROM connreg.replicas r WHERE r.replica_id = $1 FOR UPDATE"
);

const INSERT_REPLICA: &str = concat!(
    "INSERT INTO connreg.replicas AS r (replica_id, instance_id, version_id, endpoint,
        peer_identity, region, zone, capacity_class, capacity, health_seq,
        lease_expires_at_ms, active, state, circuit_open, consecutive_unknown)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 0, 'ready', false, 0)
     RETURNING ",
    replica_columns!()
);

const REREGISTER_REPLICA: &str = concat!(
    "UPDATE connreg.replicas AS r
     SET health_seq = $2, lease_expires_at_ms = $3, state = 'ready'
     WHERE r.replica_id = $1
     RETURNING ",
    replica_columns!()
);

const DRAIN_REPLICA: &str = concat!(
    "UPDATE connreg.replicas AS r
     SET state = CASE WHEN r.state = 'ready' THEN 'draining' ELSE r.state END
     WHERE r.replica_id = $1
     RETURNING ",
    replica_columns!()
);

/// LEASE-2: the oldest expired leases not offline, skipping replicas other
/// transactions hold; they are taken in the next call.
const LOCK_EXPIRED: &str = "SELECT replica_id FROM connreg.replicas
     WHERE state <> 'offline' AND lease_expires_at_ms <= $1
     ORDER BY lease_expires_at_ms, replica_id
     LIMIT $2
     FOR UPDATE SKIP LOCKED";

const MORE_EXPIRED: &str = "SELECT EXISTS (SELECT 1 FROM connreg.replicas
     WHERE state <> 'offline' AND lease_expires_at_ms <= $1)";

/// The held reservations on the expired replicas, with their scopes.
const LOCK_RESERVED_ON: &str = "SELECT a.action_id, a.replica_id,
        ARRAY(SELECT s.scope_id FROM connreg.assignment_scopes s
              WHERE s.action_id = a.action_id ORDER BY s.scope_id) AS scopes
     FROM connreg.assignments a
     WHERE a.reserved AND a.replica_id = ANY($1)
     ORDER BY a.action_id
     FOR UPDATE OF a";

/// LEASE-2, LEASE-3: offline, reservations released as lease_expired, the
/// counts given back; destinations untouched.
const EXPIRE: &str = "WITH counters AS (
        UPDATE connreg.admission_counters c SET in_use = GREATEST(c.in_use - d.n, 0)
        FROM unnest($1::text[], $2::bigint[]) AS d(scope_id, n)
        WHERE c.scope_id = d.scope_id
    ), replicas AS (
        UPDATE connreg.replicas r SET state = 'offline', active = GREATEST(r.active - d.n, 0)
        FROM unnest($3::text[], $4::bigint[]) AS d(replica_id, n)
        WHERE r.replica_id = d.replica_id
    )
    UPDATE connreg.assignments SET reserved = false, last_settlement = 'lease_expired'
    WHERE action_id = ANY($5)";

impl Data {
    /// LEASE-1: register, or come back after going offline.
    pub(crate) async fn replica_register(&self, params: RegisterParams) -> Result<Replica> {
        params.validate()?;
        let spec = &params.spec;
        let health_seq = to_i64("health sequence", params.health_seq)?;
        let lease = ms(self.now().plus_ms(params.lease_ttl_ms));
        tx::transaction(&self.pool, async |tx: &mut PgConnection| {
            // Serializes one instance's registrations: its replica count.
            // Lock order (LOCK-1): the instance's advisory lock, then the replica
            // row; no other row.
            locks::instance(&mut *tx, spec.instance.as_str()).await?;
            let row = sqlx::query(
            "SELECT EXISTS (SELECT 1 FROM connreg.instances WHERE instance_id = $1) AS instance,
                    EXISTS (SELECT 1 FROM connreg.connector_versions WHERE version_id = $2)
                        AS version",
        )
        .bind(spec.instance.as_str())
        .bind(spec.version.as_str())
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
            if !col::<bool>(&row, "instance")? {
                return Err(Error::NotFound {
                    what: "instance",
                    id: spec.instance.to_string(),
                });
            }
            if !col::<bool>(&row, "version")? {
                return Err(Error::NotFound {
                    what: "version",
                    id: spec.version.to_string(),
                });
            }
            let existing = sqlx::query(LOCK_REPLICA)
                .bind(spec.id.as_str())
                .fetch_optional(&mut *tx)
                .await
                .map_err(db)?;
            if let Some(existing) = existing {
                let stored = replica(&existing)?;
                if stored.spec != *spec {
                    return Err(Error::Conflict {
                        reason: "a registered replica must present the same identity",
                    });
                }
                if params.health_seq <= stored.health_seq {
                    return Ok(stored);
                }
                let row = sqlx::query(REREGISTER_REPLICA)
                    .bind(spec.id.as_str())
                    .bind(health_seq)
                    .bind(lease)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(db)?;
                return replica(&row);
            }
            let siblings: i64 =
                sqlx::query_scalar("SELECT count(*) FROM connreg.replicas WHERE instance_id = $1")
                    .bind(spec.instance.as_str())
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(db)?;
            if siblings >= INSTANCE_REPLICAS_MAX as i64 {
                return Err(Error::LimitExceeded {
                    what: "replicas per instance",
                    max: INSTANCE_REPLICAS_MAX as u64,
                });
            }
            let row = sqlx::query(INSERT_REPLICA)
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
                .fetch_one(&mut *tx)
                .await
                .map_err(db)?;
            replica(&row)
        })
        .await
    }

    /// LEASE-1: newer sequences advance; older ones are ignored.
    pub(crate) async fn replica_heartbeat(
        &self,
        params: HeartbeatParams,
    ) -> Result<HeartbeatOutcome> {
        params.validate()?;
        let lease = ms(self.now().plus_ms(params.lease_ttl_ms));
        tx::transaction(&self.pool, async |tx: &mut PgConnection| {
            // Lock order (LOCK-1): the replica row only.
            let row = sqlx::query(
                "SELECT state, health_seq FROM connreg.replicas WHERE replica_id = $1 FOR UPDATE",
            )
            .bind(params.replica.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(db)?;
            let Some(row) = row else {
                return Err(Error::NotFound {
                    what: "replica",
                    id: params.replica.to_string(),
                });
            };
            if col::<String>(&row, "state")? == "offline" {
                return Err(Error::ReplicaUnavailable);
            }
            let stored: i64 = col(&row, "health_seq")?;
            // A sequence above i64::MAX is newer than any stored one.
            let Ok(health_seq) = i64::try_from(params.health_seq) else {
                return Err(Error::LimitExceeded {
                    what: "health sequence",
                    max: i64::MAX as u64,
                });
            };
            if health_seq <= stored {
                return Ok(HeartbeatOutcome::Ignored);
            }
            sqlx::query(
                "UPDATE connreg.replicas SET health_seq = $2, lease_expires_at_ms = $3
             WHERE replica_id = $1",
            )
            .bind(params.replica.as_str())
            .bind(health_seq)
            .bind(lease)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
            Ok(HeartbeatOutcome::Applied)
        })
        .await
    }

    /// Stops new routes; pinned retries still reach the replica.
    pub(crate) async fn replica_drain(&self, id: ReplicaId) -> Result<Replica> {
        tx::transaction(&self.pool, async |tx: &mut PgConnection| {
            // Lock order (LOCK-1): the replica row only.
            let row = sqlx::query(DRAIN_REPLICA)
                .bind(id.as_str())
                .fetch_optional(&mut *tx)
                .await
                .map_err(db)?;
            match row {
                Some(row) => replica(&row),
                None => Err(Error::NotFound {
                    what: "replica",
                    id: id.to_string(),
                }),
            }
        })
        .await
    }

    pub(crate) async fn replica_get(&self, id: ReplicaId) -> Result<Option<Replica>> {
        let row = sqlx::query(SELECT_REPLICA)
            .bind(id.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
        row.as_ref().map(replica).transpose()
    }

    /// LEASE-2, LEASE-3: one bounded batch; contacts nothing, rewrites no
    /// destination.
    pub(crate) async fn lease_maintain(&self, params: MaintainParams) -> Result<Maintained> {
        params.validate()?;
        let now = ms(self.now());
        tx::transaction(&self.pool, async |tx: &mut PgConnection| {
            // Lock order (LOCK-1): replica rows first, never waiting (SKIP LOCKED),
            // then the assignments on them, then their counters in scope order.
            let expired: Vec<String> = sqlx::query_scalar(LOCK_EXPIRED)
                .bind(now)
                .bind(i64::from(params.max))
                .fetch_all(&mut *tx)
                .await
                .map_err(db)?;
            let mut report = Maintained::default();
            if !expired.is_empty() {
                let reserved = sqlx::query(LOCK_RESERVED_ON)
                    .bind(&expired)
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(db)?;
                let mut actions = Vec::with_capacity(reserved.len());
                let mut per_scope: BTreeMap<String, i64> = BTreeMap::new();
                let mut per_replica: BTreeMap<String, i64> =
                    expired.iter().map(|r| (r.clone(), 0)).collect();
                for row in &reserved {
                    actions.push(col::<String>(row, "action_id")?);
                    *per_replica.entry(col(row, "replica_id")?).or_default() += 1;
                    for scope in col::<Vec<String>>(row, "scopes")? {
                        *per_scope.entry(scope).or_default() += 1;
                    }
                }
                let (scopes, scope_counts): (Vec<String>, Vec<i64>) = per_scope.into_iter().unzip();
                let (replicas, replica_counts): (Vec<String>, Vec<i64>) =
                    per_replica.into_iter().unzip();
                locks::counters(&mut *tx, &scopes).await?;
                sqlx::query(EXPIRE)
                    .bind(&scopes)
                    .bind(&scope_counts)
                    .bind(&replicas)
                    .bind(&replica_counts)
                    .bind(&actions)
                    .execute(&mut *tx)
                    .await
                    .map_err(db)?;
                report.released = u32::try_from(actions.len()).unwrap_or(u32::MAX);
                report.expired = expired
                    .into_iter()
                    .map(|r| ReplicaId::new(r).map_err(|_| super::error::corrupt("replica_id")))
                    .collect::<Result<Vec<ReplicaId>>>()?;
            }
            // Expired replicas left: beyond this batch, or held by others now.
            report.more = sqlx::query_scalar(MORE_EXPIRED)
                .bind(now)
                .fetch_one(&mut *tx)
                .await
                .map_err(db)?;
            Ok(report)
        })
        .await
    }

    /// SETTLE-6: only an operator closes a circuit, and it is audited.
    pub(crate) async fn circuit_close(&self, params: CircuitCloseParams) -> Result<AuditEntry> {
        params.validate()?;
        let now = self.now();
        tx::transaction(&self.pool, async |tx: &mut PgConnection| {
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
            sqlx::query(
                "WITH closed AS (
                UPDATE connreg.replicas SET circuit_open = false, consecutive_unknown = 0
                WHERE replica_id = $1
            ), entry AS (
                INSERT INTO connreg.operator_audit (at_ms, operator, action, replica_id, reason)
                VALUES ($2, $3, 'circuit_close', $1, $4)
                RETURNING entry_id
            )
            DELETE FROM connreg.operator_audit
            WHERE entry_id <= (SELECT entry_id FROM entry) - $5",
            )
            .bind(params.replica.as_str())
            .bind(ms(now))
            .bind(&params.operator)
            .bind(&params.reason)
            .bind(to_i64("audit entries", AUDIT_ENTRIES_MAX as u64)?)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
            Ok(())
        })
        .await?;
        Ok(AuditEntry {
            at: now,
            operator: params.operator,
            action: "circuit_close".into(),
            replica: params.replica,
            reason: params.reason,
        })
    }
}
