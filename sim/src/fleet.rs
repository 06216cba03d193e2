//! A scenario's fleet as registry records: the setup publication, the
//! replica specs, and the records operators re-publish with changes.

use std::collections::{BTreeMap, BTreeSet};

use connreg::{
    AdmissionScope, Binding, BindingId, CapabilityDefinition, CapabilityId, CapacityClass, Change,
    CircuitPolicy, ConnectorType, ConnectorTypeId, ConnectorVersion, Instance, InstanceId,
    OpaqueRef, ProfileId, Publication, Region, RegistryConfig, ReplicaId, ReplicaSpec, ScopeId,
    TenantId, TopologyPreference, VersionId, Zone,
};

use crate::scenario::{MixEntry, Scenario, group_host, replica_host};
use crate::wire::REPLICA_PORT;

/// The fleet's records, ready to publish.
#[derive(Debug, Clone)]
pub struct FleetPlan {
    /// Connector types.
    pub types: BTreeMap<ConnectorTypeId, ConnectorType>,
    /// Capability definitions, one per capability any version names.
    pub definitions: BTreeMap<CapabilityId, CapabilityDefinition>,
    /// Versions.
    pub versions: BTreeMap<VersionId, ConnectorVersion>,
    /// Instances.
    pub instances: BTreeMap<InstanceId, Instance>,
    /// Admission scopes.
    pub scopes: BTreeMap<ScopeId, AdmissionScope>,
    /// Bindings.
    pub bindings: BTreeMap<BindingId, Binding>,
    /// Replicas listed one by one, in scenario order, with their
    /// provider's unknown-outcome probability.
    pub replicas: Vec<(ReplicaSpec, f64)>,
    /// Replica groups, in scenario order.
    pub groups: Vec<GroupPlan>,
    /// The trace name of every replica endpoint (`replica-<id>`), so a
    /// caller names the replica it dials, whichever host answers there.
    pub endpoints: BTreeMap<String, String>,
    /// The registry configuration.
    pub config: RegistryConfig,
}

fn opaque(prefix: &str, id: &str) -> OpaqueRef {
    OpaqueRef {
        reference: format!("{prefix}:{id}").into(),
        revision: 1,
    }
}

/// Identifiers in a validated scenario are valid; this turns the
/// impossible failure into a message rather than a panic.
fn id<T>(make: fn(String) -> connreg::Result<T>, value: &str) -> Result<T, String> {
    make(value.to_string()).map_err(|e| format!("{value:?}: {e}"))
}

impl FleetPlan {
    /// The records of a validated scenario.
    pub fn of(s: &Scenario) -> Result<FleetPlan, String> {
        let f = &s.fleet;
        let mut plan = FleetPlan {
            types: BTreeMap::new(),
            definitions: BTreeMap::new(),
            versions: BTreeMap::new(),
            instances: BTreeMap::new(),
            scopes: BTreeMap::new(),
            bindings: BTreeMap::new(),
            replicas: Vec::new(),
            groups: Vec::new(),
            endpoints: BTreeMap::new(),
            config: RegistryConfig {
                circuit: CircuitPolicy {
                    enabled: s.registry.circuit_enabled,
                    threshold: s.registry.circuit_threshold,
                },
                reservation_hold_ms: crate::hold::hold_ms(s),
                ..RegistryConfig::default()
            },
        };
        for t in &f.types {
            let t = t.get_ref();
            let tid = id(ConnectorTypeId::new, &t.id)?;
            plan.types.insert(
                tid.clone(),
                ConnectorType {
                    id: tid,
                    family: t.id.clone(),
                    owner: "simulator".into(),
                    enabled: t.enabled,
                },
            );
        }
        for v in &f.versions {
            let v = v.get_ref();
            let mut capabilities = BTreeSet::new();
            for c in &v.capabilities {
                let cid = id(CapabilityId::new, c)?;
                plan.definitions.insert(
                    cid.clone(),
                    CapabilityDefinition {
                        id: cid.clone(),
                        summary: format!("{c} (simulated)"),
                        schema: "{}".into(),
                        active: true,
                    },
                );
                capabilities.insert(cid);
            }
            let profiles = v
                .profiles
                .iter()
                .map(|p| id(ProfileId::new, p))
                .collect::<Result<BTreeSet<_>, _>>()?;
            let vid = id(VersionId::new, &v.id)?;
            plan.versions.insert(
                vid.clone(),
                ConnectorVersion {
                    id: vid,
                    connector_type: id(ConnectorTypeId::new, &v.connector_type)?,
                    artifact_digest: format!("sha256:{}", v.id),
                    manifest: String::new(),
                    capabilities,
                    profiles,
                    attestation: format!("attestation:{}", v.id),
                    active: v.active,
                    qualified: v.qualified,
                },
            );
        }
        for i in s.all_instances() {
            let i = i.get_ref();
            let iid = id(InstanceId::new, &i.id)?;
            plan.instances.insert(
                iid.clone(),
                Instance {
                    id: iid,
                    tenant: id(TenantId::new, &i.tenant)?,
                    version: id(VersionId::new, &i.version)?,
                    config: opaque("config", &i.id),
                    secret_provider: opaque("vault", &i.id),
                    enabled: i.enabled,
                },
            );
        }
        for sc in s.all_scopes() {
            let sc = sc.get_ref();
            let sid = id(ScopeId::new, &sc.id)?;
            plan.scopes.insert(
                sid.clone(),
                AdmissionScope {
                    id: sid,
                    tenant: id(TenantId::new, &sc.tenant)?,
                    kind: sc.kind,
                    limit: sc.limit,
                },
            );
        }
        for b in s.all_bindings() {
            let b = b.get_ref();
            let bid = id(BindingId::new, &b.id)?;
            let scopes = b
                .scopes
                .iter()
                .map(|x| id(ScopeId::new, x))
                .collect::<Result<BTreeSet<_>, _>>()?;
            plan.bindings.insert(
                bid.clone(),
                Binding {
                    id: bid,
                    tenant: id(TenantId::new, &b.tenant)?,
                    capability: id(CapabilityId::new, &b.capability)?,
                    instance: id(InstanceId::new, &b.instance)?,
                    priority: b.priority,
                    policy_revision: 1,
                    credential: opaque("credential", &b.id),
                    quota_policy: None,
                    admission_scopes: scopes,
                    enabled: b.enabled,
                },
            );
        }
        for r in &f.replicas {
            let r = r.get_ref();
            let instance = id(InstanceId::new, &r.instance)?;
            let version = plan
                .instances
                .get(&instance)
                .map(|i| i.version.clone())
                .ok_or_else(|| format!("replica {} names unknown instance", r.id))?;
            plan.replicas.push((
                ReplicaSpec {
                    id: id(ReplicaId::new, &r.id)?,
                    instance,
                    version,
                    endpoint: format!("{}:{REPLICA_PORT}", replica_host(&r.id)).into(),
                    peer_identity: format!("spiffe://sim/replica/{}", r.id).into(),
                    region: id(Region::new, &r.region)?,
                    zone: id(Zone::new, &r.zone)?,
                    capacity_class: id(CapacityClass::new, &r.class)?,
                    capacity: r.capacity,
                },
                r.unknown_ratio,
            ));
        }
        for (g, members) in s.group_members() {
            let host = group_host(&g.name);
            let mut specs = Vec::with_capacity(members.len());
            for m in members {
                let instance = id(InstanceId::new, &m.instance)?;
                let version = plan
                    .instances
                    .get(&instance)
                    .map(|i| i.version.clone())
                    .ok_or_else(|| format!("replica {} names unknown instance", m.id))?;
                specs.push(GroupReplica {
                    spec: ReplicaSpec {
                        id: id(ReplicaId::new, &m.id)?,
                        instance,
                        version,
                        endpoint: format!("{host}:{}", m.port).into(),
                        peer_identity: format!("spiffe://sim/replica/{}", m.id).into(),
                        region: id(Region::new, &m.region)?,
                        zone: id(Zone::new, &m.zone)?,
                        capacity_class: id(CapacityClass::new, &g.class)?,
                        capacity: g.capacity,
                    },
                    port: m.port,
                });
            }
            plan.groups.push(GroupPlan {
                name: g.name.clone(),
                host,
                heartbeat_ms: g.heartbeat_ms.unwrap_or(s.lifecycle.heartbeat_ms),
                jitter_ms: g.heartbeat_jitter_ms,
                unknown_ratio: g.unknown_ratio,
                members: specs,
            });
        }
        plan.endpoints = plan
            .specs()
            .iter()
            .map(|r| (r.endpoint.to_string(), replica_host(r.id.as_str())))
            .collect();
        Ok(plan)
    }

    /// The setup publications: every record, referenced ones first, in
    /// publications of at most `PUBLICATION_CHANGES_MAX` changes.
    pub fn publications(&self) -> Vec<Publication> {
        self.publication()
            .changes
            .chunks(connreg::limits::PUBLICATION_CHANGES_MAX)
            .map(|c| Publication {
                changes: c.to_vec(),
            })
            .collect()
    }

    /// The trace name of the replica at `endpoint`, or the endpoint itself
    /// when no replica is there.
    pub fn name_at(&self, endpoint: &str) -> String {
        self.endpoints
            .get(endpoint)
            .cloned()
            .unwrap_or_else(|| endpoint.to_string())
    }

    /// The setup publication: every record, referenced ones first.
    pub fn publication(&self) -> Publication {
        let mut changes = Vec::new();
        changes.extend(self.types.values().cloned().map(Change::UpsertType));
        changes.extend(
            self.definitions
                .values()
                .cloned()
                .map(Change::UpsertDefinition),
        );
        changes.extend(self.versions.values().cloned().map(Change::AdmitVersion));
        changes.extend(self.instances.values().cloned().map(Change::UpsertInstance));
        changes.extend(self.scopes.values().cloned().map(Change::UpsertScope));
        changes.extend(self.bindings.values().cloned().map(Change::UpsertBinding));
        Publication { changes }
    }

    /// The replica specs: listed ones, then the groups'.
    pub fn specs(&self) -> Vec<ReplicaSpec> {
        self.replicas
            .iter()
            .map(|(s, _)| s.clone())
            .chain(
                self.groups
                    .iter()
                    .flat_map(|g| g.members.iter().map(|m| m.spec.clone())),
            )
            .collect()
    }
}

/// A replica group, as its host runs it.
#[derive(Debug, Clone)]
pub struct GroupPlan {
    /// The group's name.
    pub name: String,
    /// Its host.
    pub host: String,
    /// Interval between a replica's heartbeats.
    pub heartbeat_ms: u64,
    /// How much earlier than `heartbeat_ms` a heartbeat may come.
    pub jitter_ms: u64,
    /// The providers' unknown-outcome probability.
    pub unknown_ratio: f64,
    /// The replicas.
    pub members: Vec<GroupReplica>,
}

/// One replica of a group.
#[derive(Debug, Clone)]
pub struct GroupReplica {
    /// What it registers.
    pub spec: ReplicaSpec,
    /// The port it answers on.
    pub port: u16,
}

/// One request kind of the workload mix, as typed values.
#[derive(Debug, Clone)]
pub struct MixPlan {
    /// The tenants: one, or a tenant group's, drawn uniformly.
    pub tenants: Vec<TenantId>,
    /// The capability.
    pub capability: CapabilityId,
    /// The deployment's topology preference.
    pub topology: TopologyPreference,
    /// Relative weight.
    pub weight: u32,
}

impl MixPlan {
    /// The typed form of a validated mix entry.
    pub fn of(s: &Scenario, m: &MixEntry) -> Result<MixPlan, String> {
        let tenants = match &m.tenants {
            Some(g) => s
                .group_tenants(g)
                .iter()
                .map(|t| id(TenantId::new, t))
                .collect::<Result<Vec<_>, _>>()?,
            None => vec![id(TenantId::new, &m.tenant)?],
        };
        Ok(MixPlan {
            tenants,
            capability: id(CapabilityId::new, &m.capability)?,
            topology: TopologyPreference {
                preferred_region: m
                    .region
                    .as_deref()
                    .map(|r| id(Region::new, r))
                    .transpose()?,
                preferred_zone: m.zone.as_deref().map(|z| id(Zone::new, z)).transpose()?,
                capacity_class: id(CapacityClass::new, &m.class)?,
                cross_region: m.cross_region,
            },
            weight: m.weight,
        })
    }
}
