//! Inputs and outputs of routing, settlement, replica lifecycle, status and
//! publication.

use serde::{Deserialize, Serialize};

use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::id::{
    ActionId, CapabilityId, CapacityClass, Region, ReplicaId, TenantId, VersionId, Zone,
};
use crate::limits::{
    CIRCUIT_THRESHOLD_MAX, LEASE_MAINTENANCE_BATCH_MAX, LEASE_TTL_MS_MAX, PUBLICATION_CHANGES_MAX,
    RESERVATION_HOLD_MS_DEFAULT, RESERVATION_HOLD_MS_MAX, RESERVATION_HOLD_MS_MIN, TEXT_BYTES_MAX,
};
use crate::records::{
    AdmissionScope, Binding, CapabilityDefinition, ConnectorType, ConnectorVersion, Instance,
    Outcome, Revision, RouteAssignment,
};

/// Whether a new route may leave the preferred region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CrossRegion {
    /// Any region is eligible; the preferred one ranks first.
    #[default]
    Allowed,
    /// Only replicas in the preferred region are eligible.
    Forbidden,
}

/// The deployment's topology preference and routing policy. Owned by the
/// deployment, never by transport data (ROUTE-1, ROUTE-11).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologyPreference {
    /// Replicas here rank first.
    pub preferred_region: Option<Region>,
    /// Within a region, replicas here rank first.
    pub preferred_zone: Option<Zone>,
    /// Only replicas of this class are eligible (a filter).
    pub capacity_class: CapacityClass,
    /// Whether other regions are eligible (a filter).
    pub cross_region: CrossRegion,
}

impl TopologyPreference {
    /// Checks that the policy is coherent.
    pub fn validate(&self) -> Result<()> {
        if self.cross_region == CrossRegion::Forbidden && self.preferred_region.is_none() {
            return Err(Error::invalid(
                "topology preference",
                "cross-region forbidden needs a preferred region",
            ));
        }
        Ok(())
    }
}

/// A request for the route of one action (ROUTE-1).
///
/// By its type it cannot name an instance, replica, endpoint, credential or
/// peer key: the registry alone chooses the target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteRequest {
    /// The action.
    pub action: ActionId,
    /// The verified tenant, from the caller's authentication. A request
    /// without one is rejected before anything else (ROUTE-2).
    pub tenant: Option<TenantId>,
    /// The capability asked for.
    pub capability: CapabilityId,
    /// The deployment's topology preference.
    pub topology: TopologyPreference,
}

/// Whether a resolve made a new route or returned an existing one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResolveKind {
    /// A new route was decided and reserved.
    Created,
    /// The existing route's reservation is still held; returned as is.
    Existing,
    /// The existing route's reservation had been released and was taken
    /// again on the same replica and scopes, with a fresh fence (PIN-3).
    Reserved,
}

/// The answer to a resolve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolved {
    /// The action's route.
    pub assignment: RouteAssignment,
    /// How it came about.
    pub kind: ResolveKind,
}

/// Settle one reservation with one outcome (SETTLE-1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettleParams {
    /// The exact assignment the caller holds.
    pub assignment: RouteAssignment,
    /// What happened.
    pub outcome: Outcome,
}

/// The answer to a settlement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settled {
    /// True when this call released the reservation; false when it had
    /// already been released (SETTLE-4).
    pub released: bool,
}

/// A replica heartbeat (LEASE-1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatParams {
    /// Which replica.
    pub replica: ReplicaId,
    /// Must be higher than the stored one, or the heartbeat is ignored.
    pub health_seq: u64,
    /// The lease granted from now, in milliseconds.
    pub lease_ttl_ms: u64,
}

impl HeartbeatParams {
    /// Checks the lease bound.
    pub fn validate(&self) -> Result<()> {
        crate::records::check_sequence("health sequence", self.health_seq)?;
        validate_lease_ttl(self.lease_ttl_ms)
    }
}

pub(crate) fn validate_lease_ttl(ttl: u64) -> Result<()> {
    if ttl == 0 {
        return Err(Error::invalid("lease ttl", "must be at least 1 ms"));
    }
    if ttl > LEASE_TTL_MS_MAX {
        return Err(Error::limit("lease ttl ms", LEASE_TTL_MS_MAX as usize));
    }
    Ok(())
}

/// What a heartbeat did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeartbeatOutcome {
    /// Health sequence and lease advanced.
    Applied,
    /// The sequence was not newer than the stored one; nothing changed.
    Ignored,
}

/// Register (or re-register after going offline) one replica.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterParams {
    /// The provisioned identity. A replica that exists must present the
    /// same identity.
    pub spec: crate::records::ReplicaSpec,
    /// Must be higher than any stored sequence.
    pub health_seq: u64,
    /// The first lease, in milliseconds from now.
    pub lease_ttl_ms: u64,
}

impl RegisterParams {
    /// Checks the spec, the sequence and the lease bound.
    pub fn validate(&self) -> Result<()> {
        self.spec.validate()?;
        crate::records::check_sequence("health sequence", self.health_seq)?;
        validate_lease_ttl(self.lease_ttl_ms)
    }
}

/// One bounded batch of lease maintenance (LEASE-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaintainParams {
    /// Most replicas to mark offline in this call.
    pub max: u32,
}

impl MaintainParams {
    /// Checks the batch bound.
    pub fn validate(&self) -> Result<()> {
        if self.max == 0 {
            return Err(Error::invalid("maintenance batch", "must be at least 1"));
        }
        if self.max > LEASE_MAINTENANCE_BATCH_MAX {
            return Err(Error::limit(
                "maintenance batch",
                LEASE_MAINTENANCE_BATCH_MAX as usize,
            ));
        }
        Ok(())
    }
}

/// Why lease maintenance released a reservation.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum ReleaseReason {
    /// Its replica's lease ended (LEASE-2).
    #[default]
    LeaseExpired,
    /// It was held longer than the configured reservation hold (PIN-8).
    HoldExpired,
}

impl ReleaseReason {
    /// Whether the replica's lease ended.
    pub fn is_lease_expired(&self) -> bool {
        *self == ReleaseReason::LeaseExpired
    }
}

/// One reservation a call released: which action's, at which fence, and
/// the replica and scopes that got their unit back.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReleasedReservation {
    /// The action whose reservation it was.
    pub action: crate::id::ActionId,
    /// Its fence.
    pub fence: crate::records::FenceToken,
    /// The replica that got a unit back.
    pub replica: ReplicaId,
    /// The admission scopes that got a unit back, in order.
    pub scopes: std::collections::BTreeSet<crate::id::ScopeId>,
    /// Why it was released (left out when its replica's lease ended).
    #[serde(default, skip_serializing_if = "ReleaseReason::is_lease_expired")]
    pub reason: ReleaseReason,
}

/// What one maintenance batch did.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Maintained {
    /// Replicas marked offline, in the order processed.
    pub expired: Vec<ReplicaId>,
    /// Reservations released as `lease_expired`, whether their replica's
    /// lease or their own hold ended: as many as `releases`.
    pub released: u32,
    /// The reservations released, in action order (LEASE-2), so a caller
    /// can tell exactly which were freed.
    #[serde(default)]
    pub releases: Vec<ReleasedReservation>,
    /// True when more expired replicas, or reservations past their hold,
    /// remain for another call.
    pub more: bool,
}

/// An operator closing a replica's circuit (SETTLE-6, AUTH-7). Who closes
/// it is not a field: it is the authority of the control-plane handle that
/// makes the call (on PostgreSQL, the control role the session logged in
/// as), so a caller cannot name someone else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CircuitCloseParams {
    /// Which replica.
    pub replica: ReplicaId,
    /// Why, for the audit log.
    pub reason: String,
}

impl CircuitCloseParams {
    /// Checks the audit fields.
    pub fn validate(&self) -> Result<()> {
        validate_audit_text("reason", &self.reason)
    }
}

/// Checks one free-text audit field: not blank, bounded, no control
/// characters.
pub(crate) fn validate_audit_text(what: &'static str, v: &str) -> Result<()> {
    if v.trim().is_empty() {
        return Err(Error::invalid(what, "must not be empty"));
    }
    if v.len() > TEXT_BYTES_MAX {
        return Err(Error::limit(what, TEXT_BYTES_MAX));
    }
    if v.chars().any(char::is_control) {
        return Err(Error::invalid(what, "must not contain control characters"));
    }
    Ok(())
}

/// One audited operator action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// Its position in the log: ascending, never reused.
    pub seq: u64,
    /// When.
    pub at: Timestamp,
    /// Who: the authority of the control-plane handle that acted.
    pub operator: String,
    /// What, such as `circuit_close`.
    pub action: String,
    /// On which replica.
    pub replica: ReplicaId,
    /// Why.
    pub reason: String,
}

/// A page of the audit log, oldest first (AUTH-7).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    /// Entries after this position; `None` starts at the oldest kept.
    pub after: Option<u64>,
    /// At most this many entries, 1 to
    /// [`AUDIT_PAGE_ENTRIES_MAX`](crate::limits::AUDIT_PAGE_ENTRIES_MAX).
    pub limit: u32,
}

impl AuditQuery {
    /// Checks the page size.
    pub fn validate(&self) -> Result<()> {
        if self.limit == 0 {
            return Err(Error::invalid("audit page limit", "must be at least 1"));
        }
        if self.limit as usize > crate::limits::AUDIT_PAGE_ENTRIES_MAX {
            return Err(Error::limit(
                "audit page limit",
                crate::limits::AUDIT_PAGE_ENTRIES_MAX,
            ));
        }
        Ok(())
    }
}

/// One page of the audit log.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AuditPage {
    /// Entries in ascending `seq`.
    pub entries: Vec<AuditEntry>,
    /// Pass as `after` for the next page; `None` when this page is the last.
    pub next_after: Option<u64>,
}

/// Aggregate status (AUTH-5).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct StatusReport {
    /// The catalog revision.
    pub revision: Revision,
    /// Replicas ready.
    pub replicas_ready: u64,
    /// Replicas draining.
    pub replicas_draining: u64,
    /// Replicas offline.
    pub replicas_offline: u64,
    /// Reservations held.
    pub active_assignments: u64,
    /// Assignments ever made (never deleted).
    pub assignments_total: u64,
    /// Replicas whose circuit is open.
    pub open_circuits: u64,
}

/// Circuit breaking policy (SETTLE-5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CircuitPolicy {
    /// Whether unknown outcomes count at all.
    pub enabled: bool,
    /// Consecutive unknown outcomes that open the circuit.
    pub threshold: u32,
}

impl Default for CircuitPolicy {
    fn default() -> Self {
        CircuitPolicy {
            enabled: true,
            threshold: 3,
        }
    }
}

/// Registry-wide configuration shared by every backend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryConfig {
    /// Circuit breaking.
    pub circuit: CircuitPolicy,
    /// How long a reservation is held before lease maintenance releases
    /// it, in milliseconds from when it was taken (PIN-8): between
    /// [`RESERVATION_HOLD_MS_MIN`] and [`RESERVATION_HOLD_MS_MAX`], by
    /// default [`RESERVATION_HOLD_MS_DEFAULT`]. Every caller must settle
    /// well within it.
    #[serde(default = "default_reservation_hold_ms")]
    pub reservation_hold_ms: u64,
    /// The keys catalog cursors are signed with (CAT-9). Never serialized;
    /// the default is a development key (see
    /// [`CursorKeys::default`](crate::catalog::CursorKeys)).
    #[serde(skip)]
    pub cursor_keys: crate::catalog::CursorKeys,
}

fn default_reservation_hold_ms() -> u64 {
    RESERVATION_HOLD_MS_DEFAULT
}

impl Default for RegistryConfig {
    fn default() -> Self {
        RegistryConfig {
            circuit: CircuitPolicy::default(),
            reservation_hold_ms: RESERVATION_HOLD_MS_DEFAULT,
            cursor_keys: crate::catalog::CursorKeys::default(),
        }
    }
}

impl RegistryConfig {
    /// Checks the configuration.
    pub fn validate(&self) -> Result<()> {
        if self.reservation_hold_ms < RESERVATION_HOLD_MS_MIN {
            return Err(Error::invalid(
                "reservation hold",
                "must be at least RESERVATION_HOLD_MS_MIN (100 ms)",
            ));
        }
        if self.reservation_hold_ms > RESERVATION_HOLD_MS_MAX {
            return Err(Error::limit(
                "reservation hold ms",
                RESERVATION_HOLD_MS_MAX as usize,
            ));
        }
        if self.circuit.threshold == 0 {
            return Err(Error::invalid("circuit threshold", "must be at least 1"));
        }
        if self.circuit.threshold > CIRCUIT_THRESHOLD_MAX {
            return Err(Error::limit(
                "circuit threshold",
                CIRCUIT_THRESHOLD_MAX as usize,
            ));
        }
        self.cursor_keys.validate()
    }
}

/// One change in a publication.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "change", content = "record")]
pub enum Change {
    /// Create or update a connector type.
    UpsertType(ConnectorType),
    /// Admit a version. Admitting an existing id again with a different
    /// artifact is a conflict (REC-2).
    AdmitVersion(ConnectorVersion),
    /// Change only the status of an admitted version.
    SetVersionStatus {
        /// Which version.
        version: VersionId,
        /// Active or not.
        active: bool,
        /// Qualified or not.
        qualified: bool,
    },
    /// Create or update a capability definition.
    UpsertDefinition(CapabilityDefinition),
    /// Create or update an instance.
    UpsertInstance(Instance),
    /// Create or update a binding.
    UpsertBinding(Binding),
    /// Create or update an admission scope.
    UpsertScope(AdmissionScope),
}

/// A set of changes applied as one transaction (CAT-2).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Publication {
    /// The changes, applied in order.
    pub changes: Vec<Change>,
}

impl Publication {
    /// Checks the size bound and every record's own fields. References are
    /// checked by the backend against the store.
    pub fn validate_shape(&self) -> Result<()> {
        if self.changes.is_empty() {
            return Err(Error::invalid("publication", "has no changes"));
        }
        if self.changes.len() > PUBLICATION_CHANGES_MAX {
            return Err(Error::limit("publication changes", PUBLICATION_CHANGES_MAX));
        }
        for change in &self.changes {
            match change {
                Change::UpsertType(t) => t.validate()?,
                Change::AdmitVersion(v) => v.validate()?,
                Change::SetVersionStatus { .. } => {}
                Change::UpsertDefinition(d) => d.validate()?,
                Change::UpsertInstance(i) => i.validate()?,
                Change::UpsertBinding(b) => b.validate()?,
                Change::UpsertScope(s) => s.validate()?,
            }
        }
        Ok(())
    }
}

/// When a replica's reservations expire, for lease checks.
pub(crate) fn lease_live(lease_expires_at: Timestamp, now: Timestamp) -> bool {
    lease_expires_at > now
}
