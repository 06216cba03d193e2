//! The registry's records (REC-1..REC-8) and the route assignment (PIN-1).
//!
//! No record holds a credential value or a secret (REC-7): credentials and
//! secret providers appear only as [`OpaqueRef`]s with a revision.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::id::{
    ActionId, BindingId, CapabilityId, CapacityClass, ConnectorTypeId, InstanceId, ProfileId,
    Region, ReplicaId, ScopeId, TenantId, VersionId, Zone,
};
use crate::limits::{
    BINDING_SCOPES_MAX, DEFINITION_BYTES_MAX, MANIFEST_BYTES_MAX, REPLICA_CAPACITY_MAX,
    SCOPE_LIMIT_MAX, SEQUENCE_MAX, TEXT_BYTES_MAX, VERSION_CAPABILITIES_MAX,
};
use crate::request::CircuitPolicy;
use crate::text::SharedText;

/// The catalog revision. Each successful publication adds exactly one (CAT-1).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Revision(pub u64);

/// A route's fence token: fresh for every reservation, never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FenceToken(pub u64);

/// A reference to something held elsewhere (a secret provider, a credential,
/// a configuration document), with the revision it had. Never the value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpaqueRef {
    /// Where the referenced thing lives, such as `vault:kv/crm/prod`.
    pub reference: SharedText,
    /// Its revision.
    pub revision: u64,
}

/// A connector type: one implementation family and its owner (REC-1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectorType {
    /// Identifier.
    pub id: ConnectorTypeId,
    /// The implementation family, such as `salesforce`.
    pub family: String,
    /// The owning team.
    pub owner: String,
    /// Disabled types make every version of theirs ineligible.
    pub enabled: bool,
}

/// One admitted, immutable connector artifact (REC-2). Only `active` and
/// `qualified` may change after admission.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectorVersion {
    /// Identifier.
    pub id: VersionId,
    /// The type this version belongs to.
    pub connector_type: ConnectorTypeId,
    /// Digest of the artifact, such as `sha256:…`.
    pub artifact_digest: String,
    /// The artifact's manifest, as admitted.
    pub manifest: String,
    /// Capabilities this version implements.
    pub capabilities: BTreeSet<CapabilityId>,
    /// Profiles this version supports.
    pub profiles: BTreeSet<ProfileId>,
    /// The supply-chain attestation reference.
    pub attestation: String,
    /// Whether the version may serve routes.
    pub active: bool,
    /// Whether the version passed supply-chain qualification.
    pub qualified: bool,
}

impl ConnectorVersion {
    /// True when `other` differs from `self` only in `active` and `qualified`.
    pub fn same_artifact(&self, other: &ConnectorVersion) -> bool {
        self.id == other.id
            && self.connector_type == other.connector_type
            && self.artifact_digest == other.artifact_digest
            && self.manifest == other.manifest
            && self.capabilities == other.capabilities
            && self.profiles == other.profiles
            && self.attestation == other.attestation
    }
}

/// What a catalog entry says about a capability.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapabilityDefinition {
    /// Identifier.
    pub id: CapabilityId,
    /// One line for humans; searched by catalog search text.
    pub summary: String,
    /// The input/output schema, as JSON text.
    pub schema: String,
    /// Inactive definitions are never listed.
    pub active: bool,
}

/// One tenant's installation of one version (REC-3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Instance {
    /// Identifier.
    pub id: InstanceId,
    /// The owning tenant.
    pub tenant: TenantId,
    /// The version installed.
    pub version: VersionId,
    /// Non-secret configuration, by reference.
    pub config: OpaqueRef,
    /// The secret provider, by reference with its revision.
    pub secret_provider: OpaqueRef,
    /// Disabled instances are never routed to.
    pub enabled: bool,
}

/// Makes one (tenant, capability) eligible to use one instance (REC-4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Binding {
    /// Identifier.
    pub id: BindingId,
    /// The tenant; must own the instance.
    pub tenant: TenantId,
    /// The capability made callable.
    pub capability: CapabilityId,
    /// The instance that serves it.
    pub instance: InstanceId,
    /// Lower is preferred (ROUTE-10).
    pub priority: u32,
    /// The revision of the policy that governs this binding.
    pub policy_revision: u64,
    /// The credential, by reference with its revision.
    pub credential: OpaqueRef,
    /// An optional quota policy, by reference.
    pub quota_policy: Option<OpaqueRef>,
    /// The hard admission scopes a route through this binding reserves (REC-8).
    pub admission_scopes: BTreeSet<ScopeId>,
    /// Disabled bindings are never used for new routes.
    pub enabled: bool,
}

/// What an admission scope counts, for operators; the limit is what binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopeKind {
    /// Per tenant.
    Tenant,
    /// Per binding.
    Binding,
    /// Per instance.
    Instance,
    /// Anything else the policy defines.
    Custom,
}

/// A hard admission scope: a counter with a limit (REC-8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdmissionScope {
    /// Identifier.
    pub id: ScopeId,
    /// The tenant whose bindings may use it.
    pub tenant: TenantId,
    /// What it counts.
    pub kind: ScopeKind,
    /// Most concurrent reservations.
    pub limit: u32,
}

/// A replica's lifecycle state (REC-5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplicaState {
    /// Takes new routes.
    Ready,
    /// Takes pinned retries only.
    Draining,
    /// Takes nothing until it registers again.
    Offline,
}

impl ReplicaState {
    /// The state's name as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            ReplicaState::Ready => "ready",
            ReplicaState::Draining => "draining",
            ReplicaState::Offline => "offline",
        }
    }
}

/// A replica's circuit (SETTLE-5, SETTLE-6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Circuit {
    /// An open circuit makes the replica ineligible.
    pub open: bool,
    /// Unknown outcomes since the last completed one.
    pub consecutive_unknown: u32,
}

impl Circuit {
    /// The circuit after one settlement with `outcome` under `policy`
    /// (SETTLE-5): completed resets the count, unknown counts and may open,
    /// the rest do neither. Nothing here ever closes an open circuit
    /// (SETTLE-6). Every backend settles through this one rule.
    #[must_use]
    pub fn after_settlement(self, outcome: Outcome, policy: CircuitPolicy) -> Circuit {
        match outcome {
            Outcome::Completed => Circuit {
                consecutive_unknown: 0,
                ..self
            },
            Outcome::OutcomeUnknown if policy.enabled => {
                let consecutive_unknown = self.consecutive_unknown.saturating_add(1);
                Circuit {
                    open: self.open || consecutive_unknown >= policy.threshold,
                    consecutive_unknown,
                }
            }
            Outcome::OutcomeUnknown | Outcome::Cancelled | Outcome::LeaseExpired => self,
        }
    }
}

/// The fixed identity of a replica, as provisioned (REC-5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicaSpec {
    /// Identifier.
    pub id: ReplicaId,
    /// The instance it serves.
    pub instance: InstanceId,
    /// The version it runs.
    pub version: VersionId,
    /// Where to reach it.
    pub endpoint: SharedText,
    /// Its signed peer identity.
    pub peer_identity: SharedText,
    /// Region.
    pub region: Region,
    /// Zone.
    pub zone: Zone,
    /// Capacity class.
    pub capacity_class: CapacityClass,
    /// Most concurrent reservations.
    pub capacity: u32,
}

/// A replica as stored: its spec plus live state (REC-5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Replica {
    /// The provisioned identity.
    pub spec: ReplicaSpec,
    /// Highest health sequence seen.
    pub health_seq: u64,
    /// When the lease ends.
    pub lease_expires_at: Timestamp,
    /// Live reservations on this replica.
    pub active: u32,
    /// Lifecycle state.
    pub state: ReplicaState,
    /// Circuit.
    pub circuit: Circuit,
}

/// One of the four settlement outcomes (SETTLE-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The provider finished the action.
    Completed,
    /// Nobody knows whether the provider committed.
    OutcomeUnknown,
    /// The dispatcher cancelled the action.
    Cancelled,
    /// The replica's lease ran out with the reservation held.
    LeaseExpired,
}

impl Outcome {
    /// The outcome's name as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::OutcomeUnknown => "outcome_unknown",
            Outcome::Cancelled => "cancelled",
            Outcome::LeaseExpired => "lease_expired",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Outcome> {
        Some(match s {
            "completed" => Outcome::Completed,
            "outcome_unknown" => Outcome::OutcomeUnknown,
            "cancelled" => Outcome::Cancelled,
            "lease_expired" => Outcome::LeaseExpired,
            _ => return None,
        })
    }
}

/// Who the route is for (PIN-1: identity).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteIdentity {
    /// The action.
    pub action: ActionId,
    /// The verified tenant.
    pub tenant: TenantId,
    /// The capability.
    pub capability: CapabilityId,
}

/// Where the action runs (PIN-1: destination). Never rewritten (LEASE-3).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteDestination {
    /// The binding used.
    pub binding: BindingId,
    /// The tenant's instance (the provider account boundary).
    pub instance: InstanceId,
    /// The version the replica ran.
    pub version: VersionId,
    /// The connector type.
    pub connector_type: ConnectorTypeId,
    /// The replica (the host).
    pub replica: ReplicaId,
    /// The replica's endpoint at decision time.
    pub endpoint: SharedText,
    /// The replica's signed peer identity at decision time.
    pub peer_identity: SharedText,
    /// Region of the replica.
    pub region: Region,
    /// Zone of the replica.
    pub zone: Zone,
}

/// The policy that governed the decision (PIN-1: policy snapshot).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySnapshot {
    /// The catalog revision the decision read.
    pub catalog_revision: Revision,
    /// The binding's priority.
    pub binding_priority: u32,
    /// The binding's policy revision.
    pub policy_revision: u64,
    /// The credential reference and revision.
    pub credential: OpaqueRef,
    /// The secret provider reference and revision of the instance.
    pub secret_provider: OpaqueRef,
    /// The quota policy, if any.
    pub quota_policy: Option<OpaqueRef>,
    /// The capacity class required.
    pub capacity_class: CapacityClass,
}

/// The capacity held for the current attempt (PIN-1: reservation).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reservation {
    /// Fresh for every reservation; settlement must present it.
    pub fence: FenceToken,
    /// Which reservation of this action this is, from 1.
    pub attempt: u32,
    /// The admission scopes reserved.
    pub scopes: BTreeSet<ScopeId>,
}

/// The immutable execution contract of one action (REC-6, PIN-1).
///
/// Identity, destination and policy never change after commit. A pinned
/// retry after release (PIN-3) makes a new `reservation` with a fresh fence;
/// the other three groups stay as they were.
///
/// The destination and the policy are shared, never copied: every
/// assignment of a route, and every route decided from the same records,
/// holds the same two, so handing out an assignment copies no text. They
/// serialize as the records themselves.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteAssignment {
    /// Who.
    pub identity: RouteIdentity,
    /// Where.
    pub destination: Arc<RouteDestination>,
    /// Under which policy.
    pub policy: Arc<PolicySnapshot>,
    /// The current attempt's reservation.
    pub reservation: Reservation,
}

/// An assignment with its live reservation status, as stored (REC-6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteRecord {
    /// The contract.
    pub assignment: RouteAssignment,
    /// Whether the reservation is held.
    pub reserved: bool,
    /// The last settlement's outcome, if any.
    pub last_settlement: Option<Outcome>,
}

/// Bytes of `text` once JSON-escaped, without the surrounding quotes.
fn json_text_bytes(text: &str) -> usize {
    serde_json::to_string(text).map_or(usize::MAX, |t| t.len() - 2)
}

/// Checks a sequence or revision against [`SEQUENCE_MAX`].
pub(crate) fn check_sequence(what: &'static str, value: u64) -> Result<()> {
    if value > SEQUENCE_MAX {
        return Err(Error::limit(what, SEQUENCE_MAX as usize));
    }
    Ok(())
}

fn check_text(what: &'static str, value: &str, max: usize, allow_empty: bool) -> Result<()> {
    if !allow_empty && value.trim().is_empty() {
        return Err(Error::invalid(what, "must not be empty"));
    }
    if value.len() > max {
        return Err(Error::limit(what, max));
    }
    if value
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return Err(Error::invalid(what, "must not contain control characters"));
    }
    Ok(())
}

impl OpaqueRef {
    /// Checks the reference's shape.
    pub fn validate(&self, what: &'static str) -> Result<()> {
        check_text(what, &self.reference, TEXT_BYTES_MAX, false)?;
        check_sequence("reference revision", self.revision)
    }
}

impl ConnectorType {
    /// Checks the record's fields.
    pub fn validate(&self) -> Result<()> {
        check_text("connector type family", &self.family, TEXT_BYTES_MAX, false)?;
        check_text("connector type owner", &self.owner, TEXT_BYTES_MAX, false)
    }
}

impl ConnectorVersion {
    /// Checks the record's fields.
    pub fn validate(&self) -> Result<()> {
        check_text(
            "artifact digest",
            &self.artifact_digest,
            TEXT_BYTES_MAX,
            false,
        )?;
        check_text("manifest", &self.manifest, MANIFEST_BYTES_MAX, true)?;
        check_text("attestation", &self.attestation, TEXT_BYTES_MAX, false)?;
        if self.capabilities.len() > VERSION_CAPABILITIES_MAX {
            return Err(Error::limit(
                "version capabilities",
                VERSION_CAPABILITIES_MAX,
            ));
        }
        if self.profiles.len() > VERSION_CAPABILITIES_MAX {
            return Err(Error::limit("version profiles", VERSION_CAPABILITIES_MAX));
        }
        Ok(())
    }
}

impl CapabilityDefinition {
    /// Checks the record's fields.
    pub fn validate(&self) -> Result<()> {
        check_text("capability summary", &self.summary, TEXT_BYTES_MAX, true)?;
        // A schema is JSON text: line breaks and tabs are fine, NUL is not
        // text at all (and no database column can hold it).
        if self.schema.contains('\0') {
            return Err(Error::invalid("capability schema", "must not contain NUL"));
        }
        // Counted as serialized (escaped) bytes, the unit page budgets use:
        // raw bytes would let a schema of control characters or quotes grow
        // past `PAGE_BYTES_MIN` when listed, and such an entry would end a
        // listing early instead of fitting one page.
        if json_text_bytes(&self.summary) + json_text_bytes(&self.schema) > DEFINITION_BYTES_MAX {
            return Err(Error::limit(
                "capability definition bytes",
                DEFINITION_BYTES_MAX,
            ));
        }
        Ok(())
    }
}

impl Instance {
    /// Checks the record's fields.
    pub fn validate(&self) -> Result<()> {
        self.config.validate("instance config reference")?;
        self.secret_provider
            .validate("instance secret provider reference")
    }
}

impl Binding {
    /// Checks the record's fields.
    pub fn validate(&self) -> Result<()> {
        self.credential.validate("binding credential reference")?;
        if let Some(q) = &self.quota_policy {
            q.validate("binding quota policy reference")?;
        }
        check_sequence("binding policy revision", self.policy_revision)?;
        if self.admission_scopes.len() > BINDING_SCOPES_MAX {
            return Err(Error::limit("binding admission scopes", BINDING_SCOPES_MAX));
        }
        Ok(())
    }
}

impl AdmissionScope {
    /// Checks the record's fields.
    pub fn validate(&self) -> Result<()> {
        if self.limit > SCOPE_LIMIT_MAX {
            return Err(Error::limit(
                "admission scope limit",
                SCOPE_LIMIT_MAX as usize,
            ));
        }
        Ok(())
    }
}

impl ReplicaSpec {
    /// Checks the record's fields.
    pub fn validate(&self) -> Result<()> {
        check_text("replica endpoint", &self.endpoint, TEXT_BYTES_MAX, false)?;
        check_text(
            "replica peer identity",
            &self.peer_identity,
            TEXT_BYTES_MAX,
            false,
        )?;
        if self.capacity == 0 {
            return Err(Error::invalid("replica capacity", "must be at least 1"));
        }
        if self.capacity > REPLICA_CAPACITY_MAX {
            return Err(Error::limit(
                "replica capacity",
                REPLICA_CAPACITY_MAX as usize,
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn definition(summary: &str, schema: &str) -> CapabilityDefinition {
        CapabilityDefinition {
            id: CapabilityId::new("cap").unwrap(),
            summary: summary.into(),
            schema: schema.into(),
            active: true,
        }
    }

    #[test]
    fn definition_size_counts_escaped_bytes() {
        // Plain text counts as its raw length.
        assert!(
            definition("", &"s".repeat(DEFINITION_BYTES_MAX))
                .validate()
                .is_ok()
        );
        assert!(
            definition("s", &"s".repeat(DEFINITION_BYTES_MAX))
                .validate()
                .is_err()
        );
        // Quotes and control characters count as their escapes.
        assert!(
            definition("", &"\"".repeat(DEFINITION_BYTES_MAX / 2))
                .validate()
                .is_ok()
        );
        assert_eq!(
            definition("", &"\u{1}".repeat(DEFINITION_BYTES_MAX / 4)).validate(),
            Err(Error::LimitExceeded {
                what: "capability definition bytes",
                max: DEFINITION_BYTES_MAX as u64
            })
        );
    }
}
