//! A fleet from its shape: the records, their publication and the replica
//! registrations, through the registry's own contracts on either backend.
//!
//! Names, for run prefix `p` ([`FleetPlan::with_prefix`]; empty with
//! [`FleetPlan::new`]), tenant `t`, capability `c`, binding `b`, instance
//! `i`, replica `k`. Every identifier the fleet writes starts with `p`,
//! so a run on a shared database can find and remove exactly its own rows
//! (`super::cleanup`):
//!
//! | record | identifier |
//! |---|---|
//! | tenant | `<p>t<t>` |
//! | capability | `<p>bench.cap<c>` (three digits) |
//! | connector type / version | `<p>ty-bench` / `<p>v-bench-1`, implementing every capability |
//! | instance | `<p>t<t>-i<i>`, version `<p>v-bench-1` |
//! | binding | `<p>t<t>-c<c>-b<b>`, priority `b`, instance `<p>t<t>-i<(c + b) mod I>` |
//! | tenant scope | `<p>t<t>-s` (every binding of the tenant reserves it) |
//! | binding scope | `<p>t<t>-c<c>-b<b>-s` |
//! | replica | `<p>t<t>-i<i>-r<k>`, region `regions[k mod R]`, zone `<region>-z<(k div R) mod Z>`, class `standard` |
//!
//! So every tenant can call every capability, each through
//! `bindings_per_tenant_capability` bindings in priority order, and a
//! resolve's candidates are those bindings' instances' replicas, however
//! large the rest of the fleet.

use std::collections::{BTreeSet, HashSet};

use connreg::contracts::Registry;
use connreg::limits::PUBLICATION_CHANGES_MAX;
use connreg::{
    AdmissionScope, Binding, BindingId, CapabilityDefinition, CapabilityId, CapacityClass, Change,
    ConnectorType, ConnectorTypeId, ConnectorVersion, CrossRegion, Instance, InstanceId, OpaqueRef,
    Publication, Region, RegisterParams, ReplicaId, ReplicaSpec, Revision, ScopeId, ScopeKind,
    TenantId, TopologyPreference, VersionId, Zone,
};
use serde::{Deserialize, Serialize};

use super::limits::{REGISTER_CONCURRENCY, RUN_PREFIX_BYTES_MAX};

/// The capacity class of every replica and every request.
pub const CAPACITY_CLASS: &str = "standard";

/// The shape of a fleet, as a contract's `[fleet]` table gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetShape {
    /// Tenants.
    pub tenants: u32,
    /// Capabilities; every tenant binds every one.
    pub capabilities: u32,
    /// Bindings per (tenant, capability), in priority order.
    pub bindings_per_tenant_capability: u32,
    /// Instances per tenant.
    pub instances_per_tenant: u32,
    /// Replicas per instance.
    pub replicas_per_instance: u32,
    /// Regions replicas alternate over.
    pub regions: Vec<String>,
    /// Zones per region.
    pub zones_per_region: u32,
    /// Capacity (concurrent reservations) of every replica.
    pub replica_capacity: u32,
    /// The lease replicas register and heartbeat with. Default 60,000 ms.
    #[serde(default = "default_lease_ttl_ms")]
    pub lease_ttl_ms: u64,
    /// Admission scope limits; an absent limit means no such scope.
    #[serde(default)]
    pub admission: Admission,
}

fn default_lease_ttl_ms() -> u64 {
    60_000
}

/// Hard admission scopes (REC-8).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Admission {
    /// One scope per tenant, reserved by all its bindings, with this limit.
    pub tenant_limit: Option<u32>,
    /// One scope per binding with this limit.
    pub binding_limit: Option<u32>,
}

impl FleetShape {
    /// Instances in the fleet.
    pub fn instances(&self) -> u64 {
        u64::from(self.tenants) * u64::from(self.instances_per_tenant)
    }

    /// Bindings in the fleet.
    pub fn bindings(&self) -> u64 {
        u64::from(self.tenants)
            * u64::from(self.capabilities)
            * u64::from(self.bindings_per_tenant_capability)
    }

    /// Replicas in the fleet.
    pub fn replicas(&self) -> u64 {
        self.instances() * u64::from(self.replicas_per_instance)
    }

    /// Admission scopes in the fleet.
    pub fn scopes(&self) -> u64 {
        let tenant = if self.admission.tenant_limit.is_some() {
            u64::from(self.tenants)
        } else {
            0
        };
        let binding = if self.admission.binding_limit.is_some() {
            self.bindings()
        } else {
            0
        };
        tenant + binding
    }
}

/// A fleet's records, ready to publish and register.
#[derive(Debug, Clone)]
pub struct FleetPlan {
    /// What every identifier of the fleet starts with.
    pub prefix: String,
    /// The shape it was built from.
    pub shape: FleetShape,
    /// Tenants, by index.
    pub tenants: Vec<TenantId>,
    /// Capabilities, by index.
    pub capabilities: Vec<CapabilityId>,
    /// Regions with their zones, in the shape's order.
    pub regions: Vec<(Region, Vec<Zone>)>,
    /// Every replica, tenant by tenant, instance by instance.
    pub replicas: Vec<ReplicaSpec>,
    /// Catalog and admission records, referenced ones first.
    pub changes: Vec<Change>,
    /// The replicas of the zones a contract's `[expiry]` lets expire.
    pub expiring: HashSet<ReplicaId>,
    /// With an `[expiry]`: the lease of every other replica, long enough
    /// to outlive every trial's expiry.
    pub survivor_lease_ms: Option<u64>,
}

/// Bench identifiers are built from validated shapes and always valid.
fn id<T: TryFrom<String, Error = connreg::Error>>(value: String) -> T {
    T::try_from(value).unwrap_or_else(|e| panic!("a bench identifier is invalid: {e}"))
}

fn reference(kind: &str, of: &str) -> OpaqueRef {
    OpaqueRef {
        reference: format!("{kind}:{of}").into(),
        revision: 1,
    }
}

/// Tenant `t`'s identifier under run prefix `prefix`.
pub fn tenant_name(prefix: &str, t: u32) -> String {
    format!("{prefix}t{t}")
}

/// Capability `c`'s identifier under run prefix `prefix`.
pub fn capability_name(prefix: &str, c: u32) -> String {
    format!("{prefix}bench.cap{c:03}")
}

impl FleetPlan {
    /// The records of a fleet of `shape` with no prefix: for a store of
    /// its own (the in-memory backend, a fresh test database).
    pub fn new(shape: &FleetShape) -> FleetPlan {
        FleetPlan::with_prefix(shape, "")
    }

    /// The records of a fleet of `shape`, every identifier starting with
    /// `prefix`. The shape must be valid (as a validated contract's is) and
    /// the prefix at most [`RUN_PREFIX_BYTES_MAX`] bytes of identifier
    /// characters.
    pub fn with_prefix(shape: &FleetShape, prefix: &str) -> FleetPlan {
        assert!(
            prefix.len() <= RUN_PREFIX_BYTES_MAX,
            "a run prefix is at most RUN_PREFIX_BYTES_MAX bytes"
        );
        let ty: ConnectorTypeId = id(format!("{prefix}ty-bench"));
        let version: VersionId = id(format!("{prefix}v-bench-1"));
        let capabilities: Vec<CapabilityId> = (0..shape.capabilities)
            .map(|c| id(capability_name(prefix, c)))
            .collect();
        let tenants: Vec<TenantId> = (0..shape.tenants)
            .map(|t| id(tenant_name(prefix, t)))
            .collect();
        let regions: Vec<(Region, Vec<Zone>)> = shape
            .regions
            .iter()
            .map(|r| {
                let zones = (0..shape.zones_per_region)
                    .map(|z| id(format!("{r}-z{z}")))
                    .collect();
                (id(r.clone()), zones)
            })
            .collect();

        let mut changes = vec![Change::UpsertType(ConnectorType {
            id: ty.clone(),
            family: "bench".into(),
            owner: "connreg-qualify".into(),
            enabled: true,
        })];
        for c in &capabilities {
            changes.push(Change::UpsertDefinition(CapabilityDefinition {
                id: c.clone(),
                summary: format!("{c} for scale qualification"),
                schema: format!(r#"{{"type":"object","title":"{c}"}}"#),
                active: true,
            }));
        }
        changes.push(Change::AdmitVersion(ConnectorVersion {
            id: version.clone(),
            connector_type: ty,
            artifact_digest: format!("sha256:{prefix}v-bench-1"),
            manifest: format!("name = \"{prefix}v-bench-1\""),
            capabilities: capabilities.iter().cloned().collect(),
            profiles: BTreeSet::new(),
            attestation: format!("slsa:{prefix}v-bench-1"),
            active: true,
            qualified: true,
        }));

        let mut replicas = Vec::new();
        for tenant in &tenants {
            // A tenant's records travel together, instances and scopes
            // before the bindings that name them, so a publication split
            // anywhere still references only what is already published.
            for i in 0..shape.instances_per_tenant {
                let instance: InstanceId = id(format!("{tenant}-i{i}"));
                changes.push(Change::UpsertInstance(Instance {
                    id: instance.clone(),
                    tenant: tenant.clone(),
                    version: version.clone(),
                    config: reference("config", instance.as_str()),
                    secret_provider: reference("vault", instance.as_str()),
                    enabled: true,
                }));
                for k in 0..shape.replicas_per_instance as usize {
                    let (region, zones) = &regions[k % regions.len()];
                    let zone = &zones[(k / regions.len()) % zones.len()];
                    let name = format!("{instance}-r{k}");
                    replicas.push(ReplicaSpec {
                        id: id(name.clone()),
                        instance: instance.clone(),
                        version: version.clone(),
                        endpoint: format!("https://{name}.bench.internal:8443").into(),
                        peer_identity: format!("spiffe://bench/{name}").into(),
                        region: region.clone(),
                        zone: zone.clone(),
                        capacity_class: id(CAPACITY_CLASS.into()),
                        capacity: shape.replica_capacity,
                    });
                }
            }
            let tenant_scope: Option<ScopeId> = shape.admission.tenant_limit.map(|limit| {
                let scope: ScopeId = id(format!("{tenant}-s"));
                changes.push(Change::UpsertScope(AdmissionScope {
                    id: scope.clone(),
                    tenant: tenant.clone(),
                    kind: ScopeKind::Tenant,
                    limit,
                }));
                scope
            });
            for (c, capability) in capabilities.iter().enumerate() {
                for b in 0..shape.bindings_per_tenant_capability {
                    let binding: BindingId = id(format!("{tenant}-c{c}-b{b}"));
                    let mut scopes: BTreeSet<ScopeId> = tenant_scope.iter().cloned().collect();
                    if let Some(limit) = shape.admission.binding_limit {
                        let scope: ScopeId = id(format!("{binding}-s"));
                        changes.push(Change::UpsertScope(AdmissionScope {
                            id: scope.clone(),
                            tenant: tenant.clone(),
                            kind: ScopeKind::Binding,
                            limit,
                        }));
                        scopes.insert(scope);
                    }
                    // Spreads each capability's preferred binding over the
                    // tenant's instances.
                    let instance = (c as u32 + b) % shape.instances_per_tenant;
                    changes.push(Change::UpsertBinding(Binding {
                        id: binding.clone(),
                        tenant: tenant.clone(),
                        capability: capability.clone(),
                        instance: id(format!("{tenant}-i{instance}")),
                        priority: b,
                        policy_revision: 1,
                        credential: reference("credential", binding.as_str()),
                        quota_policy: None,
                        admission_scopes: scopes,
                        enabled: true,
                    }));
                }
            }
        }
        FleetPlan {
            prefix: prefix.to_string(),
            shape: shape.clone(),
            tenants,
            capabilities,
            regions,
            replicas,
            changes,
            expiring: HashSet::new(),
            survivor_lease_ms: None,
        }
    }

    /// The same plan, the replicas of `zones` marked to expire and every
    /// other replica registered and heartbeating with `survivor_lease_ms`.
    pub fn with_expiry(mut self, zones: &[String], survivor_lease_ms: u64) -> FleetPlan {
        self.expiring = self
            .replicas
            .iter()
            .filter(|r| zones.iter().any(|z| z == r.zone.as_str()))
            .map(|r| r.id.clone())
            .collect();
        self.survivor_lease_ms = Some(survivor_lease_ms);
        self
    }

    /// The lease replica `id` registers and heartbeats with: the fleet's,
    /// or with an `[expiry]` the survivors' for replicas outside its zones.
    pub fn lease_ms(&self, id: &ReplicaId) -> u64 {
        match self.survivor_lease_ms {
            Some(long) if !self.expiring.contains(id) => long,
            _ => self.shape.lease_ttl_ms,
        }
    }

    /// The records as publications of at most `PUBLICATION_CHANGES_MAX`
    /// changes each, in order.
    pub fn publications(&self) -> Vec<Publication> {
        self.changes
            .chunks(PUBLICATION_CHANGES_MAX)
            .map(|chunk| Publication {
                changes: chunk.to_vec(),
            })
            .collect()
    }

    /// The registration of replica `spec` with the fleet's lease.
    pub fn register_params(&self, spec: ReplicaSpec) -> RegisterParams {
        let lease_ttl_ms = self.lease_ms(&spec.id);
        RegisterParams {
            spec,
            health_seq: 1,
            lease_ttl_ms,
        }
    }

    /// The deployment topology that prefers region `r` and its zone `z`
    /// (both taken modulo their counts); other regions stay allowed.
    pub fn topology(&self, r: usize, z: usize) -> TopologyPreference {
        let (region, zones) = &self.regions[r % self.regions.len()];
        TopologyPreference {
            preferred_region: Some(region.clone()),
            preferred_zone: Some(zones[z % zones.len()].clone()),
            capacity_class: id::<CapacityClass>(CAPACITY_CLASS.into()),
            cross_region: CrossRegion::Allowed,
        }
    }
}

/// Which setup step failed, and the registry's answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{step}: {source}")]
pub struct SetupError {
    /// The step, such as `publication 3 of 12`.
    pub step: String,
    /// The registry's error.
    pub source: connreg::Error,
}

/// Publishes the plan's records and registers every replica, at most
/// [`REGISTER_CONCURRENCY`] registrations at a time. Returns the catalog
/// revision the fleet was published at.
pub async fn build<R>(registry: &R, plan: &FleetPlan) -> Result<Revision, SetupError>
where
    R: Registry + Clone + 'static,
{
    let publications = plan.publications();
    let total = publications.len();
    let mut revision = Revision::default();
    for (n, publication) in publications.into_iter().enumerate() {
        revision = registry
            .catalog_publish(publication)
            .await
            .map_err(|source| SetupError {
                step: format!("publication {} of {total}", n + 1),
                source,
            })?;
    }
    let params = plan
        .replicas
        .iter()
        .map(|spec| plan.register_params(spec.clone()))
        .collect();
    register_all(registry, params)
        .await
        .map_err(|failure| match failure {
            RegisterFailure::Refused { replica, source } => SetupError {
                step: format!("registering replica {replica}"),
                source,
            },
            RegisterFailure::Task(e) => SetupError {
                step: "registering replicas".into(),
                source: connreg::Error::Unavailable {
                    reason: format!("a registration task failed: {e}"),
                },
            },
        })?;
    Ok(revision)
}

/// Why [`register_all`] stopped.
#[derive(Debug)]
pub(crate) enum RegisterFailure {
    /// The registry refused to register `replica`.
    Refused {
        /// The replica.
        replica: ReplicaId,
        /// The registry's error.
        source: connreg::Error,
    },
    /// A registration task did not finish.
    Task(tokio::task::JoinError),
}

/// Registers every one of `params`, at most [`REGISTER_CONCURRENCY`] at a
/// time: worker `w` registers `params[w]`, `params[w + REGISTER_CONCURRENCY]`
/// and so on, in order. Stops at the first failure a worker reports.
pub(crate) async fn register_all<R>(
    registry: &R,
    params: Vec<RegisterParams>,
) -> Result<(), RegisterFailure>
where
    R: Registry + Clone + 'static,
{
    let mut shares: Vec<Vec<RegisterParams>> = Vec::new();
    shares.resize_with(REGISTER_CONCURRENCY.min(params.len()), Vec::new);
    for (i, p) in params.into_iter().enumerate() {
        shares[i % REGISTER_CONCURRENCY].push(p);
    }
    let mut workers = tokio::task::JoinSet::new();
    for share in shares {
        let registry = registry.clone();
        workers.spawn(async move {
            for p in share {
                let replica = p.spec.id.clone();
                registry
                    .replica_register(p)
                    .await
                    .map_err(|source| RegisterFailure::Refused { replica, source })?;
            }
            Ok(())
        });
    }
    while let Some(joined) = workers.join_next().await {
        joined.map_err(RegisterFailure::Task)??;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> FleetShape {
        FleetShape {
            tenants: 3,
            capabilities: 2,
            bindings_per_tenant_capability: 2,
            instances_per_tenant: 2,
            replicas_per_instance: 5,
            regions: vec!["eu-west".into(), "us-east".into()],
            zones_per_region: 2,
            replica_capacity: 4,
            lease_ttl_ms: 60_000,
            admission: Admission {
                tenant_limit: Some(10),
                binding_limit: Some(5),
            },
        }
    }

    #[test]
    fn the_plan_has_the_shape_it_was_asked_for() {
        // spec: SIM-6
        let s = shape();
        let plan = FleetPlan::new(&s);
        assert_eq!(plan.replicas.len() as u64, s.replicas());
        let count = |f: fn(&Change) -> bool| plan.changes.iter().filter(|c| f(c)).count() as u64;
        assert_eq!(
            count(|c| matches!(c, Change::UpsertBinding(_))),
            s.bindings()
        );
        assert_eq!(count(|c| matches!(c, Change::UpsertScope(_))), s.scopes());
        assert_eq!(
            count(|c| matches!(c, Change::UpsertInstance(_))),
            s.instances()
        );
        let ids: BTreeSet<_> = plan.replicas.iter().map(|r| r.id.clone()).collect();
        assert_eq!(ids.len(), plan.replicas.len(), "replica ids are unique");
    }
}
