//! The one place test fleets are built: records from [`FleetOptions`],
//! published through the admin contract and registered through the
//! lifecycle contract.
//!
//! The default fleet, in words:
//!
//! - tenants `t-acme` and `t-globex`;
//! - connector types `ty-crm` and `ty-mail`;
//! - definitions `crm.contact.create`, `crm.contact.read`, `mail.send`,
//!   `audit.export` (active, bound by nobody) and `legacy.fax.send`
//!   (inactive);
//! - versions `v-crm-1` and `v-crm-2` (type `ty-crm`) and `v-mail-1`
//!   (type `ty-mail`), all active and qualified;
//! - instances `i-acme-crm`, `i-acme-mail`, `i-globex-crm` (and, with
//!   [`FleetOptions::backup_binding`], `i-acme-crm-backup`);
//! - bindings `b-acme-crm-create` (scopes `s-acme`, `s-acme-crm`),
//!   `b-acme-crm-read`, `b-acme-mail-send` (scope `s-acme`) and
//!   `b-globex-crm-create` (scope `s-globex`);
//! - per instance, [`FleetOptions::replicas_per_instance`] replicas named
//!   `<instance>-r<k>`, alternating over regions `eu-west` and `us-east`
//!   and zones `<region>-a`, `<region>-b`, all of capacity class
//!   `standard`.
//!
//! Every default is listed on [`FleetOptions`].

use std::collections::BTreeSet;

use connreg::contracts::CatalogAdmin;
use connreg::{
    ActionId, AdmissionScope, Binding, BindingId, CapabilityDefinition, CapabilityId,
    CapacityClass, Change, CircuitPolicy, ConnectorType, ConnectorTypeId, ConnectorVersion,
    CrossRegion, HeartbeatParams, Inspect, Instance, InstanceId, ManualClock, OpaqueRef, Outcome,
    ProfileId, Publication, Region, RegisterParams, RegistryConfig, ReplicaId, ReplicaSpec,
    Resolved, Revision, RouteAssignment, RouteRequest, ScopeId, ScopeKind, SettleParams, Settled,
    StoreSnapshot, TenantId, Timestamp, TopologyPreference, VersionId, Zone,
};

use crate::Harness;

/// Tenant `t-acme`: owns most of the fleet.
pub fn acme() -> TenantId {
    TenantId::new("t-acme").expect("valid id")
}

/// Tenant `t-globex`: the other tenant.
pub fn globex() -> TenantId {
    TenantId::new("t-globex").expect("valid id")
}

/// A tenant that holds nothing.
pub fn stranger() -> TenantId {
    TenantId::new("t-stranger").expect("valid id")
}

/// Capability `crm.contact.create`, bound for both tenants.
pub fn crm_create() -> CapabilityId {
    cap("crm.contact.create")
}

/// Capability `crm.contact.read`, bound for `t-acme`.
pub fn crm_read() -> CapabilityId {
    cap("crm.contact.read")
}

/// Capability `mail.send`, bound for `t-acme`.
pub fn mail_send() -> CapabilityId {
    cap("mail.send")
}

/// Capability `audit.export`: active, implemented, bound by nobody.
pub fn audit_export() -> CapabilityId {
    cap("audit.export")
}

/// A capability ID.
pub fn cap(id: &str) -> CapabilityId {
    CapabilityId::new(id).expect("valid id")
}

/// An action ID.
pub fn action(id: &str) -> ActionId {
    ActionId::new(id).expect("valid id")
}

/// A replica ID.
pub fn replica(id: &str) -> ReplicaId {
    ReplicaId::new(id).expect("valid id")
}

/// An instance ID.
pub fn instance(id: &str) -> InstanceId {
    InstanceId::new(id).expect("valid id")
}

/// A binding ID.
pub fn binding(id: &str) -> BindingId {
    BindingId::new(id).expect("valid id")
}

/// A version ID.
pub fn version(id: &str) -> VersionId {
    VersionId::new(id).expect("valid id")
}

/// A connector type ID.
pub fn connector_type(id: &str) -> ConnectorTypeId {
    ConnectorTypeId::new(id).expect("valid id")
}

/// An admission scope ID.
pub fn scope(id: &str) -> ScopeId {
    ScopeId::new(id).expect("valid id")
}

/// A profile ID.
pub fn profile(id: &str) -> ProfileId {
    ProfileId::new(id).expect("valid id")
}

/// A region.
pub fn region(id: &str) -> Region {
    Region::new(id).expect("valid id")
}

/// A zone.
pub fn zone(id: &str) -> Zone {
    Zone::new(id).expect("valid id")
}

/// A capacity class.
pub fn class(id: &str) -> CapacityClass {
    CapacityClass::new(id).expect("valid id")
}

/// An opaque reference with a revision.
pub fn reference(reference: &str, revision: u64) -> OpaqueRef {
    OpaqueRef {
        reference: reference.into(),
        revision,
    }
}

/// The regions replicas alternate over, the preferred one first.
pub const REGIONS: [&str; 2] = ["eu-west", "us-east"];

/// The clock's start: far from zero so "before" is representable.
pub const CLOCK_START_MS: u64 = 1_000_000;

/// How the fleet is shaped. Defaults:
///
/// | field | default |
/// |---|---|
/// | `replicas_per_instance` | 4 |
/// | `replica_capacity` | 4 |
/// | `scope_limit` | 100 |
/// | `lease_ttl_ms` | 30 000 |
/// | `backup_binding` | false |
/// | `register_replicas` | true |
/// | `config` | `RegistryConfig::default()` (circuit on, threshold 3) |
/// | `clock_start` | [`CLOCK_START_MS`] |
#[derive(Debug, Clone)]
pub struct FleetOptions {
    /// Replicas registered for every instance.
    pub replicas_per_instance: usize,
    /// Capacity of every replica.
    pub replica_capacity: u32,
    /// Limit of every admission scope.
    pub scope_limit: u32,
    /// First lease of every replica, in milliseconds.
    pub lease_ttl_ms: u64,
    /// Adds instance `i-acme-crm-backup` and a second, lower-priority
    /// binding of `t-acme` for `crm.contact.create` (REC-4).
    pub backup_binding: bool,
    /// Registers the replicas after publishing.
    pub register_replicas: bool,
    /// Registry configuration.
    pub config: RegistryConfig,
    /// Where the clock starts.
    pub clock_start: Timestamp,
}

impl Default for FleetOptions {
    fn default() -> Self {
        FleetOptions {
            replicas_per_instance: 4,
            replica_capacity: 4,
            scope_limit: 100,
            lease_ttl_ms: 30_000,
            backup_binding: false,
            register_replicas: true,
            config: RegistryConfig::default(),
            clock_start: Timestamp(CLOCK_START_MS),
        }
    }
}

impl FleetOptions {
    /// Sets the circuit policy.
    pub fn with_circuit(mut self, enabled: bool, threshold: u32) -> Self {
        self.config.circuit = CircuitPolicy { enabled, threshold };
        self
    }
}

/// The records of one fleet, built from options. Pure data: publishing and
/// registering happen in [`open`].
#[derive(Debug, Clone)]
pub struct Fleet {
    /// The options it was built from.
    pub options: FleetOptions,
}

impl Fleet {
    /// The fleet for `options`.
    pub fn new(options: FleetOptions) -> Fleet {
        Fleet { options }
    }

    /// Connector type `id`, enabled.
    pub fn connector_type(&self, id: &str) -> ConnectorType {
        let family = if id == "ty-mail" {
            "smtp"
        } else {
            "salesforce"
        };
        ConnectorType {
            id: connector_type(id),
            family: family.into(),
            owner: "team-connectors".into(),
            enabled: true,
        }
    }

    /// Capability definition `id`; `legacy.fax.send` is inactive.
    pub fn definition(&self, id: &str) -> CapabilityDefinition {
        CapabilityDefinition {
            id: cap(id),
            summary: format!("{} for tests", id.replace('.', " ")),
            schema: format!(r#"{{"type":"object","title":"{id}"}}"#),
            active: id != "legacy.fax.send",
        }
    }

    /// Version `id`: `v-mail-1` implements `mail.send`; the CRM versions
    /// implement the CRM capabilities, `audit.export` and `legacy.fax.send`.
    pub fn version(&self, id: &str) -> ConnectorVersion {
        let (ty, caps, profiles): (&str, &[&str], &[&str]) = if id == "v-mail-1" {
            ("ty-mail", &["mail.send"], &["mail.v1"])
        } else {
            (
                "ty-crm",
                &[
                    "crm.contact.create",
                    "crm.contact.read",
                    "audit.export",
                    "legacy.fax.send",
                ],
                &["crm.v1", "crm.bulk"],
            )
        };
        ConnectorVersion {
            id: version(id),
            connector_type: connector_type(ty),
            artifact_digest: format!("sha256:{id}"),
            manifest: format!("name = \"{id}\""),
            capabilities: caps.iter().map(|c| cap(c)).collect(),
            profiles: profiles.iter().map(|p| profile(p)).collect(),
            attestation: format!("slsa:{id}"),
            active: true,
            qualified: true,
        }
    }

    /// Instance `id`, enabled, owned by the tenant its name says.
    pub fn instance(&self, id: &str) -> Instance {
        let tenant = if id.starts_with("i-globex") {
            globex()
        } else {
            acme()
        };
        let version_id = if id == "i-acme-mail" {
            "v-mail-1"
        } else {
            "v-crm-1"
        };
        Instance {
            id: instance(id),
            tenant,
            version: version(version_id),
            config: reference(&format!("config:{id}"), 1),
            secret_provider: reference(&format!("vault:{id}"), 2),
            enabled: true,
        }
    }

    /// Admission scope `id` with the fleet's limit.
    pub fn scope(&self, id: &str) -> AdmissionScope {
        let (tenant, kind) = match id {
            "s-acme" => (acme(), ScopeKind::Tenant),
            "s-acme-crm" => (acme(), ScopeKind::Binding),
            _ => (globex(), ScopeKind::Tenant),
        };
        AdmissionScope {
            id: scope(id),
            tenant,
            kind,
            limit: self.options.scope_limit,
        }
    }

    /// Binding `id`, enabled.
    pub fn binding(&self, id: &str) -> Binding {
        let (tenant, capability, inst, priority, scopes): (_, _, _, _, &[&str]) = match id {
            "b-acme-crm-create" => (
                acme(),
                crm_create(),
                "i-acme-crm",
                10,
                &["s-acme", "s-acme-crm"],
            ),
            "b-acme-crm-create-backup" => {
                (acme(), crm_create(), "i-acme-crm-backup", 20, &["s-acme"])
            }
            "b-acme-crm-read" => (acme(), crm_read(), "i-acme-crm", 10, &["s-acme"]),
            "b-acme-mail-send" => (acme(), mail_send(), "i-acme-mail", 10, &["s-acme"]),
            _ => (globex(), crm_create(), "i-globex-crm", 10, &["s-globex"]),
        };
        Binding {
            id: binding(id),
            tenant,
            capability,
            instance: instance(inst),
            priority,
            policy_revision: 7,
            credential: reference(&format!("cred:{id}"), 3),
            quota_policy: (id == "b-acme-crm-create").then(|| reference("quota:acme/crm", 1)),
            admission_scopes: scopes.iter().map(|s| scope(s)).collect::<BTreeSet<_>>(),
            enabled: true,
        }
    }

    /// Every instance ID of the fleet.
    pub fn instance_ids(&self) -> Vec<&'static str> {
        let mut ids = vec!["i-acme-crm", "i-acme-mail", "i-globex-crm"];
        if self.options.backup_binding {
            ids.insert(1, "i-acme-crm-backup");
        }
        ids
    }

    /// Every binding ID of the fleet.
    pub fn binding_ids(&self) -> Vec<&'static str> {
        let mut ids = vec![
            "b-acme-crm-create",
            "b-acme-crm-read",
            "b-acme-mail-send",
            "b-globex-crm-create",
        ];
        if self.options.backup_binding {
            ids.insert(1, "b-acme-crm-create-backup");
        }
        ids
    }

    /// The whole fleet as one publication, in dependency order.
    pub fn publication(&self) -> Publication {
        let mut changes = Vec::new();
        for t in ["ty-crm", "ty-mail"] {
            changes.push(Change::UpsertType(self.connector_type(t)));
        }
        for d in [
            "audit.export",
            "crm.contact.create",
            "crm.contact.read",
            "legacy.fax.send",
            "mail.send",
        ] {
            changes.push(Change::UpsertDefinition(self.definition(d)));
        }
        for v in ["v-crm-1", "v-crm-2", "v-mail-1"] {
            changes.push(Change::AdmitVersion(self.version(v)));
        }
        for i in self.instance_ids() {
            changes.push(Change::UpsertInstance(self.instance(i)));
        }
        for s in ["s-acme", "s-acme-crm", "s-globex"] {
            changes.push(Change::UpsertScope(self.scope(s)));
        }
        for b in self.binding_ids() {
            changes.push(Change::UpsertBinding(self.binding(b)));
        }
        Publication { changes }
    }

    /// Replica `k` of `instance_id`, running the instance's version.
    pub fn replica_spec(&self, instance_id: &str, k: usize) -> ReplicaSpec {
        let inst = self.instance(instance_id);
        let region_name = REGIONS[k % 2];
        let zone_name = format!(
            "{region_name}-{}",
            if (k / 2).is_multiple_of(2) { "a" } else { "b" }
        );
        let id = format!("{instance_id}-r{k}");
        ReplicaSpec {
            id: replica(&id),
            instance: inst.id,
            version: inst.version,
            endpoint: format!("https://{id}.connectors.internal:8443").into(),
            peer_identity: format!("spiffe://fleet/{id}").into(),
            region: region(region_name),
            zone: zone(&zone_name),
            capacity_class: class("standard"),
            capacity: self.options.replica_capacity,
        }
    }

    /// The replicas of one instance.
    pub fn replicas_of(&self, instance_id: &str) -> Vec<ReplicaSpec> {
        (0..self.options.replicas_per_instance)
            .map(|k| self.replica_spec(instance_id, k))
            .collect()
    }

    /// Every replica of the fleet.
    pub fn replica_specs(&self) -> Vec<ReplicaSpec> {
        self.instance_ids()
            .into_iter()
            .flat_map(|i| self.replicas_of(i))
            .collect()
    }

    /// The deployment's default topology: prefer `eu-west` / `eu-west-a`,
    /// class `standard`, cross-region allowed.
    pub fn topology(&self) -> TopologyPreference {
        TopologyPreference {
            preferred_region: Some(region("eu-west")),
            preferred_zone: Some(zone("eu-west-a")),
            capacity_class: class("standard"),
            cross_region: CrossRegion::Allowed,
        }
    }

    /// A request with the default topology.
    pub fn request(
        &self,
        action_id: &str,
        tenant: &TenantId,
        capability: &CapabilityId,
    ) -> RouteRequest {
        RouteRequest {
            action: action(action_id),
            tenant: Some(tenant.clone()),
            capability: capability.clone(),
            topology: self.topology(),
        }
    }

    /// Registration of `spec` with the fleet's lease.
    pub fn register_params(&self, spec: ReplicaSpec, health_seq: u64) -> RegisterParams {
        RegisterParams {
            spec,
            health_seq,
            lease_ttl_ms: self.options.lease_ttl_ms,
        }
    }
}

/// A store with a published and registered fleet.
#[derive(Debug, Clone)]
pub struct Setup<S> {
    /// The store under test.
    pub store: S,
    /// Its clock.
    pub clock: ManualClock,
    /// The fleet's records.
    pub fleet: Fleet,
}

/// Opens a fresh store and builds the fleet in it: one publication, then
/// every replica registered with health sequence 1.
pub async fn open<H: Harness>(harness: &H, options: FleetOptions) -> Setup<H::Store> {
    let setup = open_empty(harness, options).await;
    let revision = setup
        .store
        .catalog_publish(setup.fleet.publication())
        .await
        .expect("the fixture publication is valid");
    assert_eq!(revision, Revision(1), "a fresh store starts at revision 0");
    if setup.fleet.options.register_replicas {
        for spec in setup.fleet.replica_specs() {
            setup.register(spec, 1).await;
        }
    }
    setup
}

/// Opens a fresh, empty store with the fleet's records unpublished.
pub async fn open_empty<H: Harness>(harness: &H, options: FleetOptions) -> Setup<H::Store> {
    let clock = ManualClock::new(options.clock_start);
    let store = harness.open(clock.clone(), options.config.clone()).await;
    Setup {
        store,
        clock,
        fleet: Fleet::new(options),
    }
}

impl<S: connreg::contracts::Registry + Inspect> Setup<S> {
    /// Registers one replica, expecting success.
    pub async fn register(&self, spec: ReplicaSpec, health_seq: u64) {
        self.store
            .replica_register(self.fleet.register_params(spec, health_seq))
            .await
            .expect("the fixture registration is valid");
    }

    /// Heartbeats every replica of the fleet that `keep` accepts, with
    /// health sequence 2 and a ten-minute lease, expecting success: those
    /// replicas outlive the fleet's lease, the others do not.
    pub async fn keep_alive(&self, keep: impl Fn(&ReplicaSpec) -> bool) {
        for spec in self.fleet.replica_specs() {
            if keep(&spec) {
                self.store
                    .replica_heartbeat(HeartbeatParams {
                        replica: spec.id,
                        health_seq: 2,
                        lease_ttl_ms: 600_000,
                    })
                    .await
                    .unwrap();
            }
        }
    }

    /// Resolves `action_id` for `tenant` and `capability` with the default
    /// topology.
    pub async fn resolve(
        &self,
        action_id: &str,
        tenant: &TenantId,
        capability: &CapabilityId,
    ) -> connreg::Result<Resolved> {
        self.store
            .route_resolve(self.fleet.request(action_id, tenant, capability))
            .await
    }

    /// Resolves a new `t-acme` / `crm.contact.create` action, expecting
    /// success.
    pub async fn resolve_acme(&self, action_id: &str) -> RouteAssignment {
        self.resolve(action_id, &acme(), &crm_create())
            .await
            .expect("the fixture has capacity")
            .assignment
    }

    /// Settles `assignment` with `outcome`.
    pub async fn settle(
        &self,
        assignment: &RouteAssignment,
        outcome: Outcome,
    ) -> connreg::Result<Settled> {
        self.store
            .route_settle(SettleParams {
                assignment: assignment.clone(),
                outcome,
            })
            .await
    }

    /// Publishes `changes` as one publication.
    pub async fn publish(&self, changes: Vec<Change>) -> connreg::Result<Revision> {
        self.store.catalog_publish(Publication { changes }).await
    }

    /// A full inspection, expecting success.
    pub async fn inspect(&self) -> StoreSnapshot {
        self.store.inspect().await.expect("inspect")
    }

    /// Everything a failed call must leave alone: the inspection, the
    /// revision and every catalog listing (internal, with unbound).
    pub async fn observe(&self) -> Observed {
        let snapshot = self.inspect().await;
        let revision = self.store.catalog_revision().await.expect("revision");
        let mut catalog = Vec::new();
        for reader in [
            connreg::Reader::Internal {
                include_unbound: true,
            },
            connreg::Reader::Tenant(acme()),
            connreg::Reader::Tenant(globex()),
        ] {
            let page = self
                .store
                .catalog_page(connreg::CatalogQuery {
                    page_items: Some(connreg::limits::PAGE_ITEMS_MAX),
                    ..connreg::CatalogQuery::first_page(reader)
                })
                .await
                .expect("catalog page");
            catalog.push(page);
        }
        Observed {
            snapshot,
            revision,
            catalog,
        }
    }

    /// Asserts that nothing observable changed since `before`.
    pub async fn assert_unchanged(&self, before: &Observed, what: &str) {
        let after = self.observe().await;
        assert_eq!(before.revision, after.revision, "{what}: revision changed");
        assert_eq!(before.snapshot, after.snapshot, "{what}: store changed");
        assert_eq!(before.catalog, after.catalog, "{what}: catalog changed");
    }
}

/// What [`Setup::observe`] saw.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// The full inspection.
    pub snapshot: StoreSnapshot,
    /// The catalog revision.
    pub revision: Revision,
    /// First pages of the internal and both tenants' listings.
    pub catalog: Vec<connreg::CatalogPage>,
}
