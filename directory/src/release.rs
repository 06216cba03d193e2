//! The exact, already authorized release target a router receives, and the
//! fields of it that selection may never change (DIR-5).

use std::fmt;

use serde::Serialize;

use crate::address::{self, NetworkDestination};
use crate::error::DocumentError;
use crate::json::{self, Json, Members};
use crate::limits::TARGET_BYTES_MAX;
use crate::names::identity_text;
use crate::path::Path;

/// The identity of one exact release of an agent. Two releases are the same
/// only when all six fields are equal, byte for byte.
///
/// In JSON it is an object with exactly these six string fields.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ReleaseIdentity {
    /// The agent the release belongs to.
    pub agent_id: String,
    /// The version of the agent card.
    pub card_version: String,
    /// The release.
    pub release_id: String,
    /// The digest of the agent card.
    pub card_digest: String,
    /// The capability being invoked.
    pub capability: String,
    /// The audience the invocation's credential is issued for.
    pub credential_audience: String,
}

/// The JSON fields of a [`ReleaseIdentity`], in schema order.
const RELEASE_FIELDS: [&str; 6] = [
    "agent_id",
    "card_version",
    "release_id",
    "card_digest",
    "capability",
    "credential_audience",
];

/// Reads a release identity object at `path`.
pub(crate) fn release_identity(
    value: &Json,
    path: &Path,
) -> Result<ReleaseIdentity, DocumentError> {
    let members = Members::of_schema(value, path, &RELEASE_FIELDS)?;
    let field = |name: &str| identity_text(members.required(name)?, &path.field(name));
    Ok(ReleaseIdentity {
        agent_id: field("agent_id")?,
        card_version: field("card_version")?,
        release_id: field("release_id")?,
        card_digest: field("card_digest")?,
        capability: field("capability")?,
        credential_audience: field("credential_audience")?,
    })
}

/// One exact, authorized release target: the release identity and the
/// canonical endpoint a direct-mode router invokes.
///
/// In JSON (the `connreg-router --target` file):
///
/// ```json
/// {
///   "release": {
///     "agent_id": "billing-agent",
///     "card_version": "4",
///     "release_id": "billing-agent-2026-08-08.1",
///     "card_digest": "sha256:5d41402abc4b2a76b9719d911017c592",
///     "capability": "invoice.create",
///     "credential_audience": "https://billing-agent.agents.example"
///   },
///   "canonical_endpoint": { "address": "billing-agent.agents.example", "port": 443 }
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct ReleaseTarget {
    /// The exact release.
    pub release: ReleaseIdentity,
    /// Where the release is invoked when no directory says otherwise.
    pub canonical_endpoint: NetworkDestination,
}

impl ReleaseTarget {
    /// Parses a release target file, as strictly as a directory document:
    /// no unknown or duplicate fields, every field present and valid, at
    /// most [`TARGET_BYTES_MAX`] bytes.
    pub fn parse(bytes: &[u8]) -> Result<Self, DocumentError> {
        let root = json::parse(bytes, TARGET_BYTES_MAX)?;
        let path = Path::root();
        let members = Members::of_schema(&root, &path, &["release", "canonical_endpoint"])?;
        Ok(Self {
            release: release_identity(members.required("release")?, &path.field("release"))?,
            canonical_endpoint: address::destination(
                members.required("canonical_endpoint")?,
                &path.field("canonical_endpoint"),
            )?,
        })
    }

    /// The first field, in [`ImmutableField::ALL`] order, in which `other`
    /// differs from this target; `None` when they are the same target.
    #[must_use]
    pub fn changed_field(&self, other: &Self) -> Option<ImmutableField> {
        ImmutableField::ALL
            .into_iter()
            .find(|field| field.value(self) != field.value(other))
    }
}

/// A field of an authorized [`ReleaseTarget`] that selection may not change.
/// Only the network destination may differ from the canonical endpoint, and
/// it is carried beside the target, never in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum ImmutableField {
    /// [`ReleaseIdentity::agent_id`].
    AgentId,
    /// [`ReleaseIdentity::card_version`].
    CardVersion,
    /// [`ReleaseIdentity::release_id`].
    ReleaseId,
    /// [`ReleaseIdentity::card_digest`].
    CardDigest,
    /// [`ReleaseIdentity::capability`].
    Capability,
    /// [`ReleaseIdentity::credential_audience`].
    CredentialAudience,
    /// [`ReleaseTarget::canonical_endpoint`]: the record of where the
    /// release is canonically served, which a directory may route around
    /// but not rewrite.
    CanonicalEndpoint,
}

impl ImmutableField {
    /// Every immutable field, in the order they are compared.
    pub const ALL: [Self; 7] = [
        Self::AgentId,
        Self::CardVersion,
        Self::ReleaseId,
        Self::CardDigest,
        Self::Capability,
        Self::CredentialAudience,
        Self::CanonicalEndpoint,
    ];

    /// The field's name as written in JSON.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AgentId => "agent_id",
            Self::CardVersion => "card_version",
            Self::ReleaseId => "release_id",
            Self::CardDigest => "card_digest",
            Self::Capability => "capability",
            Self::CredentialAudience => "credential_audience",
            Self::CanonicalEndpoint => "canonical_endpoint",
        }
    }

    fn value(self, target: &ReleaseTarget) -> FieldValue<'_> {
        let release = &target.release;
        match self {
            Self::AgentId => FieldValue::Text(&release.agent_id),
            Self::CardVersion => FieldValue::Text(&release.card_version),
            Self::ReleaseId => FieldValue::Text(&release.release_id),
            Self::CardDigest => FieldValue::Text(&release.card_digest),
            Self::Capability => FieldValue::Text(&release.capability),
            Self::CredentialAudience => FieldValue::Text(&release.credential_audience),
            Self::CanonicalEndpoint => FieldValue::Destination(&target.canonical_endpoint),
        }
    }
}

#[derive(PartialEq)]
enum FieldValue<'a> {
    Text(&'a str),
    Destination(&'a NetworkDestination),
}

impl fmt::Display for ImmutableField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
