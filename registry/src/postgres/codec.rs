//! Conversions between records and rows.
//!
//! PostgreSQL has no unsigned integers. Counters and `u32` fields fit
//! `bigint` exactly. `u64` fields (revisions, health sequences, reference
//! revisions) are stored as `bigint` too, so this backend accepts values up
//! to `i64::MAX` and answers [`Error::LimitExceeded`] above; times are
//! clamped to `i64::MAX` ms, some 292 million years.

use std::collections::BTreeSet;
use std::sync::Arc;

use sqlx::Row;
use sqlx::postgres::PgRow;

use super::error::{corrupt, db};
use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::records::{
    Circuit, FenceToken, OpaqueRef, Outcome, PolicySnapshot, Replica, ReplicaSpec, ReplicaState,
    Reservation, Revision, RouteAssignment, RouteDestination, RouteIdentity, RouteRecord,
};
use crate::text::SharedText;

/// A `u64` input as `bigint`, or the limit it exceeds.
pub(crate) fn to_i64(what: &'static str, v: u64) -> Result<i64> {
    i64::try_from(v).map_err(|_| Error::LimitExceeded {
        what,
        max: i64::MAX as u64,
    })
}

/// A time as `bigint` milliseconds, clamped.
pub(crate) fn ms(t: Timestamp) -> i64 {
    i64::try_from(t.0).unwrap_or(i64::MAX)
}

pub(crate) fn u64_of(what: &'static str, v: i64) -> Result<u64> {
    u64::try_from(v).map_err(|_| corrupt(what))
}

pub(crate) fn u32_of(what: &'static str, v: i64) -> Result<u32> {
    u32::try_from(v).map_err(|_| corrupt(what))
}

/// A column, decoded.
pub(crate) fn col<'r, T>(row: &'r PgRow, name: &str) -> Result<T>
where
    T: sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    row.try_get(name).map_err(db)
}

/// An identifier column, validated.
pub(crate) fn id<T>(row: &PgRow, name: &'static str) -> Result<T>
where
    T: TryFrom<String, Error = Error>,
{
    T::try_from(col::<String>(row, name)?).map_err(|_| corrupt(name))
}

/// An identifier array column, validated, as a set.
pub(crate) fn id_set<T>(row: &PgRow, name: &'static str) -> Result<BTreeSet<T>>
where
    T: TryFrom<String, Error = Error> + Ord,
{
    col::<Vec<String>>(row, name)?
        .into_iter()
        .map(|s| T::try_from(s).map_err(|_| corrupt(name)))
        .collect()
}

fn opaque(row: &PgRow, reference: &str, revision: &'static str) -> Result<OpaqueRef> {
    Ok(OpaqueRef {
        reference: col(row, reference)?,
        revision: u64_of(revision, col(row, revision)?)?,
    })
}

fn opaque_opt(row: &PgRow, reference: &str, revision: &'static str) -> Result<Option<OpaqueRef>> {
    let r: Option<SharedText> = col(row, reference)?;
    let v: Option<i64> = col(row, revision)?;
    match (r, v) {
        (Some(reference), Some(v)) => Ok(Some(OpaqueRef {
            reference,
            revision: u64_of(revision, v)?,
        })),
        (None, None) => Ok(None),
        _ => Err(corrupt(revision)),
    }
}

/// The columns [`route`] reads, from `connreg.routes a` (a route's row
/// with its snapshot, migration 0012).
macro_rules! route_columns {
    () => {
        "a.action_id, a.tenant_id, a.capability_id, a.binding_id, a.instance_id, \
         a.version_id, a.type_id, a.replica_id, a.endpoint, a.peer_identity, a.region, \
         a.zone, a.catalog_revision, a.binding_priority, a.policy_revision, \
         a.credential_ref, a.credential_revision, a.secret_provider_ref, \
         a.secret_provider_revision, a.quota_policy_ref, a.quota_policy_revision, \
         a.capacity_class, a.fence, a.attempt, a.reserved, a.last_settlement, a.scopes"
    };
}
pub(crate) use route_columns;

/// A route, from [`route_columns!`].
pub(crate) fn route(row: &PgRow) -> Result<RouteRecord> {
    let last: Option<String> = col(row, "last_settlement")?;
    let last_settlement = match last {
        None => None,
        Some(s) => Some(Outcome::parse(&s).ok_or_else(|| corrupt("last_settlement"))?),
    };
    Ok(RouteRecord {
        assignment: RouteAssignment {
            identity: RouteIdentity {
                action: id(row, "action_id")?,
                tenant: id(row, "tenant_id")?,
                capability: id(row, "capability_id")?,
            },
            destination: Arc::new(RouteDestination {
                binding: id(row, "binding_id")?,
                instance: id(row, "instance_id")?,
                version: id(row, "version_id")?,
                connector_type: id(row, "type_id")?,
                replica: id(row, "replica_id")?,
                endpoint: col(row, "endpoint")?,
                peer_identity: col(row, "peer_identity")?,
                region: id(row, "region")?,
                zone: id(row, "zone")?,
            }),
            policy: Arc::new(PolicySnapshot {
                catalog_revision: Revision(u64_of(
                    "catalog_revision",
                    col(row, "catalog_revision")?,
                )?),
                binding_priority: u32_of("binding_priority", col(row, "binding_priority")?)?,
                policy_revision: u64_of("policy_revision", col(row, "policy_revision")?)?,
                credential: opaque(row, "credential_ref", "credential_revision")?,
                secret_provider: opaque(row, "secret_provider_ref", "secret_provider_revision")?,
                quota_policy: opaque_opt(row, "quota_policy_ref", "quota_policy_revision")?,
                capacity_class: id(row, "capacity_class")?,
            }),
            reservation: Reservation {
                fence: FenceToken(u64_of("fence", col(row, "fence")?)?),
                attempt: u32_of("attempt", col(row, "attempt")?)?,
                scopes: id_set(row, "scopes")?,
            },
        },
        reserved: col(row, "reserved")?,
        last_settlement,
    })
}

/// The columns [`replica`] reads, from `connreg.replicas r`.
macro_rules! replica_columns {
    () => {
        "r.replica_id, r.instance_id, r.version_id, r.endpoint, r.peer_identity, r.region, \
         r.zone, r.capacity_class, r.capacity, r.health_seq, r.lease_expires_at_ms, r.active, \
         r.state, r.circuit_open, r.consecutive_unknown"
    };
}
pub(crate) use replica_columns;

/// A replica, from [`replica_columns!`].
pub(crate) fn replica(row: &PgRow) -> Result<Replica> {
    let state: String = col(row, "state")?;
    let state = match state.as_str() {
        "ready" => ReplicaState::Ready,
        "draining" => ReplicaState::Draining,
        "offline" => ReplicaState::Offline,
        _ => return Err(corrupt("state")),
    };
    Ok(Replica {
        spec: ReplicaSpec {
            id: id(row, "replica_id")?,
            instance: id(row, "instance_id")?,
            version: id(row, "version_id")?,
            endpoint: col(row, "endpoint")?,
            peer_identity: col(row, "peer_identity")?,
            region: id(row, "region")?,
            zone: id(row, "zone")?,
            capacity_class: id(row, "capacity_class")?,
            capacity: u32_of("capacity", col(row, "capacity")?)?,
        },
        health_seq: u64_of("health_seq", col(row, "health_seq")?)?,
        lease_expires_at: Timestamp(u64_of(
            "lease_expires_at_ms",
            col(row, "lease_expires_at_ms")?,
        )?),
        active: u32_of("active", col(row, "active")?)?,
        state,
        circuit: Circuit {
            open: col(row, "circuit_open")?,
            consecutive_unknown: u32_of("consecutive_unknown", col(row, "consecutive_unknown")?)?,
        },
    })
}

/// A replica row as `to_jsonb` writes it (the data role's functions,
/// migration 0008).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplicaRow {
    replica_id: String,
    instance_id: String,
    version_id: String,
    endpoint: SharedText,
    peer_identity: SharedText,
    region: String,
    zone: String,
    capacity_class: String,
    capacity: i64,
    health_seq: i64,
    lease_expires_at_ms: i64,
    active: i64,
    state: String,
    circuit_open: bool,
    consecutive_unknown: i64,
}

/// A replica, from its row as JSON text.
pub(crate) fn replica_json(text: &str) -> Result<Replica> {
    fn checked<T: TryFrom<String, Error = Error>>(name: &'static str, v: String) -> Result<T> {
        T::try_from(v).map_err(|_| corrupt(name))
    }
    let row: ReplicaRow = serde_json::from_str(text).map_err(|_| corrupt("replica row"))?;
    let state = match row.state.as_str() {
        "ready" => ReplicaState::Ready,
        "draining" => ReplicaState::Draining,
        "offline" => ReplicaState::Offline,
        _ => return Err(corrupt("state")),
    };
    Ok(Replica {
        spec: ReplicaSpec {
            id: checked("replica_id", row.replica_id)?,
            instance: checked("instance_id", row.instance_id)?,
            version: checked("version_id", row.version_id)?,
            endpoint: row.endpoint,
            peer_identity: row.peer_identity,
            region: checked("region", row.region)?,
            zone: checked("zone", row.zone)?,
            capacity_class: checked("capacity_class", row.capacity_class)?,
            capacity: u32_of("capacity", row.capacity)?,
        },
        health_seq: u64_of("health_seq", row.health_seq)?,
        lease_expires_at: Timestamp(u64_of("lease_expires_at_ms", row.lease_expires_at_ms)?),
        active: u32_of("active", row.active)?,
        state,
        circuit: Circuit {
            open: row.circuit_open,
            consecutive_unknown: u32_of("consecutive_unknown", row.consecutive_unknown)?,
        },
    })
}
