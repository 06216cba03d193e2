//! The `router-instance-directory.v1` document: exact release targets and
//! provider-neutral facts about their instances, parsed strictly (DIR-1).

use std::collections::BTreeMap;
use std::num::NonZeroU16;

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use crate::address::{self, Address};
use crate::error::DocumentError;
use crate::json::{self, Json, Members};
use crate::limits::{
    DOCUMENT_BYTES_MAX, INSTANCES_PER_TARGET_MAX, PORTS_PER_INSTANCE_MAX, TARGETS_MAX,
};
use crate::names::{self, InstanceId, PortName, name_error_at};
use crate::path::{Path, quote};
use crate::release::{self, ReleaseIdentity};

/// The only `version` a directory document may declare.
pub const DOCUMENT_VERSION: &str = "router-instance-directory.v1";

/// A parsed, valid `router-instance-directory.v1` document.
///
/// ```json
/// {
///   "version": "router-instance-directory.v1",
///   "targets": [
///     {
///       "release": {
///         "agent_id": "billing-agent",
///         "card_version": "4",
///         "release_id": "billing-agent-2026-08-08.1",
///         "card_digest": "sha256:5d41402abc4b2a76b9719d911017c592",
///         "capability": "invoice.create",
///         "credential_audience": "https://billing-agent.agents.example"
///       },
///       "instances": [
///         {
///           "instance_id": "billing-agent-a",
///           "address": "10.0.4.17",
///           "protocol": "tcp",
///           "ready": true,
///           "ports": { "invoke": 8080, "metrics": 9090 }
///         }
///       ]
///     }
///   ]
/// }
/// ```
///
/// Parsing refuses, with the path of the offending place: a version other
/// than [`DOCUMENT_VERSION`] (checked first, so a newer document is reported
/// as such rather than as a list of unknown fields), unknown or missing
/// fields, duplicate keys, two targets with the same release, two instances
/// of one target with the same ID, empty or malformed names, invalid
/// addresses or ports, and anything past [`limits`](crate::limits).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceDirectory {
    targets: Vec<DirectoryTarget>,
}

impl InstanceDirectory {
    /// Parses and validates a whole document.
    pub fn parse(bytes: &[u8]) -> Result<Self, DocumentError> {
        let root = json::parse(bytes, DOCUMENT_BYTES_MAX)?;
        let path = Path::root();
        check_version(&root, &path)?;
        let members = Members::of_schema(&root, &path, &["version", "targets"])?;
        let targets_path = path.field("targets");
        let items = json::array(
            members.required("targets")?,
            &targets_path,
            "targets",
            TARGETS_MAX,
        )?;
        let mut targets = Vec::with_capacity(items.len());
        let mut first_seen: BTreeMap<ReleaseIdentity, usize> = BTreeMap::new();
        for (index, item) in items.iter().enumerate() {
            let target_path = targets_path.index(index);
            let target = DirectoryTarget::parse(item, &target_path)?;
            if let Some(first) = first_seen.insert(target.release.clone(), index) {
                return Err(DocumentError::DuplicateTarget {
                    path: target_path.field("release").render(),
                    first: targets_path.index(first).field("release").render(),
                });
            }
            targets.push(target);
        }
        Ok(Self { targets })
    }

    /// Every target, in document order.
    #[must_use]
    pub fn targets(&self) -> &[DirectoryTarget] {
        &self.targets
    }

    /// The target for exactly `release`, if the document lists it.
    #[must_use]
    pub fn target_for(&self, release: &ReleaseIdentity) -> Option<&DirectoryTarget> {
        self.targets
            .iter()
            .find(|target| target.release == *release)
    }
}

fn check_version(root: &Json, path: &Path) -> Result<(), DocumentError> {
    let members = json::object(root, path)?;
    let version_path = path.field("version");
    let value = members
        .iter()
        .find(|(key, _)| key == "version")
        .map(|(_, value)| value)
        .ok_or_else(|| DocumentError::MissingField {
            path: version_path.render(),
        })?;
    let version = json::string(value, &version_path)?;
    if version != DOCUMENT_VERSION {
        return Err(DocumentError::UnsupportedVersion {
            path: version_path.render(),
            found: quote(version),
        });
    }
    Ok(())
}

impl Serialize for InstanceDirectory {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut document = serializer.serialize_struct("InstanceDirectory", 2)?;
        document.serialize_field("version", DOCUMENT_VERSION)?;
        document.serialize_field("targets", &self.targets)?;
        document.end()
    }
}

/// One exact release and the instances that serve it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DirectoryTarget {
    release: ReleaseIdentity,
    instances: Vec<Instance>,
}

impl DirectoryTarget {
    fn parse(value: &Json, path: &Path) -> Result<Self, DocumentError> {
        let members = Members::of_schema(value, path, &["release", "instances"])?;
        let release =
            release::release_identity(members.required("release")?, &path.field("release"))?;
        let instances_path = path.field("instances");
        let items = json::array(
            members.required("instances")?,
            &instances_path,
            "instances",
            INSTANCES_PER_TARGET_MAX,
        )?;
        let mut instances = Vec::with_capacity(items.len());
        let mut first_seen: BTreeMap<InstanceId, usize> = BTreeMap::new();
        for (index, item) in items.iter().enumerate() {
            let instance_path = instances_path.index(index);
            let instance = Instance::parse(item, &instance_path)?;
            if let Some(first) = first_seen.insert(instance.instance_id.clone(), index) {
                return Err(DocumentError::DuplicateInstance {
                    path: instance_path.field("instance_id").render(),
                    first: instances_path.index(first).field("instance_id").render(),
                });
            }
            instances.push(instance);
        }
        Ok(Self { release, instances })
    }

    /// The exact release this target is for.
    #[must_use]
    pub fn release(&self) -> &ReleaseIdentity {
        &self.release
    }

    /// The instances serving the release, in document order.
    #[must_use]
    pub fn instances(&self) -> &[Instance] {
        &self.instances
    }
}

/// Provider-neutral facts about one instance of a release: where it
/// listens, on which named ports, over which protocol, and whether it is
/// ready.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Instance {
    instance_id: InstanceId,
    address: Address,
    protocol: Protocol,
    ready: bool,
    ports: BTreeMap<PortName, NonZeroU16>,
}

/// The JSON fields of an [`Instance`], in schema order.
const INSTANCE_FIELDS: [&str; 5] = ["instance_id", "address", "protocol", "ready", "ports"];

impl Instance {
    fn parse(value: &Json, path: &Path) -> Result<Self, DocumentError> {
        let members = Members::of_schema(value, path, &INSTANCE_FIELDS)?;
        let field =
            |name: &str| Ok::<_, DocumentError>((members.required(name)?, path.field(name)));
        let (value, at) = field("instance_id")?;
        let instance_id = names::instance_id(value, &at)?;
        let (value, at) = field("address")?;
        let address = address::address(value, &at)?;
        let (value, at) = field("protocol")?;
        let protocol = Protocol::parse(value, &at)?;
        let (value, at) = field("ready")?;
        let ready = json::boolean(value, &at)?;
        let (value, at) = field("ports")?;
        let ports = parse_ports(value, &at)?;
        Ok(Self {
            instance_id,
            address,
            protocol,
            ready,
            ports,
        })
    }

    /// The instance's ID, unique within its target.
    #[must_use]
    pub fn instance_id(&self) -> &InstanceId {
        &self.instance_id
    }

    /// Where the instance listens.
    #[must_use]
    pub fn address(&self) -> &Address {
        &self.address
    }

    /// The transport protocol of the instance's ports.
    #[must_use]
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// Whether the deployment reports the instance ready for invocations.
    #[must_use]
    pub fn is_ready(&self) -> bool {
        self.ready
    }

    /// The instance's ports by name.
    #[must_use]
    pub fn ports(&self) -> &BTreeMap<PortName, NonZeroU16> {
        &self.ports
    }

    /// The port named `name`, if the instance has one.
    #[must_use]
    pub fn port(&self, name: &PortName) -> Option<NonZeroU16> {
        self.ports.get(name).copied()
    }
}

fn parse_ports(value: &Json, path: &Path) -> Result<BTreeMap<PortName, NonZeroU16>, DocumentError> {
    let members = Members::of_map(value, path)?;
    if members.iter().len() > PORTS_PER_INSTANCE_MAX {
        return Err(DocumentError::LimitExceeded {
            path: path.render(),
            what: "ports",
            max: PORTS_PER_INSTANCE_MAX,
        });
    }
    let mut ports = BTreeMap::new();
    for (name, number) in members.iter() {
        let at = path.field(name);
        let name = PortName::new(name).map_err(|error| name_error_at(&at, error))?;
        ports.insert(name, address::port(number, &at)?);
    }
    Ok(ports)
}

/// The transport protocol of an instance's ports. Only [`Protocol::Tcp`]
/// endpoints are ever selected; the others are facts a directory may record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Protocol {
    /// `tcp`.
    Tcp,
    /// `udp`.
    Udp,
    /// `sctp`.
    Sctp,
}

impl Protocol {
    fn parse(value: &Json, path: &Path) -> Result<Self, DocumentError> {
        match json::string(value, path)? {
            "tcp" => Ok(Self::Tcp),
            "udp" => Ok(Self::Udp),
            "sctp" => Ok(Self::Sctp),
            other => Err(DocumentError::UnknownProtocol {
                path: path.render(),
                found: quote(other),
            }),
        }
    }
}
