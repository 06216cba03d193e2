//! A large fleet, loaded quickly: the catalog through the registry's own
//! publication, the replicas in one statement per instance as the admin
//! (registering ten thousand replicas one call at a time would measure
//! registration, not routing).

use std::collections::BTreeSet;

use connreg::contracts::CatalogAdmin;
use connreg::limits::SCOPE_LIMIT_MAX;
use connreg::postgres::PgRegistry;
use connreg::{
    AdmissionScope, Binding, CapabilityDefinition, Change, ConnectorType, ConnectorVersion,
    CrossRegion, Instance, OpaqueRef, Publication, RouteRequest, ScopeKind, TopologyPreference,
};
use sqlx::PgConnection;

/// The one capability of the bench fleet.
pub const CAPABILITY: &str = "crm.contact.create";

/// Lease end of every bench replica, far beyond the bench clock's time.
pub const LEASE_EXPIRES_AT_MS: i64 = 1 << 50;

/// Capacity of every bench replica: far more than a run reserves.
pub const REPLICA_CAPACITY: u32 = 10_000;

/// Publications of at most this many changes.
const CHANGES_PER_PUBLICATION: usize = 900;

fn reference(r: &str) -> OpaqueRef {
    OpaqueRef {
        reference: r.into(),
        revision: 1,
    }
}

fn id<T: TryFrom<String, Error = connreg::Error>>(s: impl Into<String>) -> T {
    T::try_from(s.into()).unwrap_or_else(|e| panic!("bench identifiers are valid: {e}"))
}

/// Publishes the catalog of `tenants` tenants, each with one instance, one
/// binding and one tenant admission scope the binding reserves.
pub async fn publish(registry: &PgRegistry, tenants: u32) -> Result<(), connreg::Error> {
    let mut changes = vec![
        Change::UpsertType(ConnectorType {
            id: id("crm"),
            family: "crm".into(),
            owner: "bench".into(),
            enabled: true,
        }),
        Change::UpsertDefinition(CapabilityDefinition {
            id: id(CAPABILITY),
            summary: "Create a contact".into(),
            schema: "{}".into(),
            active: true,
        }),
        Change::AdmitVersion(ConnectorVersion {
            id: id("crm-1"),
            connector_type: id("crm"),
            artifact_digest: "sha256:bench".into(),
            manifest: "bench".into(),
            capabilities: BTreeSet::from([id(CAPABILITY)]),
            profiles: BTreeSet::new(),
            attestation: "bench".into(),
            active: true,
            qualified: true,
        }),
    ];
    for t in 0..tenants {
        let tenant = format!("t{t}");
        changes.push(Change::UpsertScope(AdmissionScope {
            id: id(format!("{tenant}-s")),
            tenant: id(tenant.clone()),
            kind: ScopeKind::Tenant,
            limit: SCOPE_LIMIT_MAX,
        }));
        changes.push(Change::UpsertInstance(Instance {
            id: id(format!("{tenant}-i")),
            tenant: id(tenant.clone()),
            version: id("crm-1"),
            config: reference("config"),
            secret_provider: reference("vault:kv/crm"),
            enabled: true,
        }));
        changes.push(Change::UpsertBinding(binding(t, 1)));
    }
    let mut rest = changes.as_slice();
    while !rest.is_empty() {
        let (now, later) = rest.split_at(rest.len().min(CHANGES_PER_PUBLICATION));
        // A binding needs its instance and scope: they travel in one
        // publication because each tenant's three changes are adjacent and
        // the split falls on a multiple of three after the first three.
        registry
            .catalog_publish(Publication {
                changes: now.to_vec(),
            })
            .await?;
        rest = later;
    }
    Ok(())
}

/// Tenant `t{tenant}`'s one binding, of its instance, reserving its tenant
/// scope, at `policy_revision` (1 as [`publish`] publishes it; a higher one
/// is a publication that changes what new routes copy).
pub fn binding(tenant: u32, policy_revision: u64) -> Binding {
    let tenant = format!("t{tenant}");
    Binding {
        id: id(format!("{tenant}-b")),
        tenant: id(tenant.clone()),
        capability: id(CAPABILITY),
        instance: id(format!("{tenant}-i")),
        priority: 1,
        policy_revision,
        credential: reference("credential"),
        quota_policy: None,
        admission_scopes: BTreeSet::from([id(format!("{tenant}-s"))]),
        enabled: true,
    }
}

/// Inserts `per_tenant` ready replicas for each tenant's instance, spread
/// over three zones of one region.
pub async fn load_replicas(
    admin: &mut PgConnection,
    tenants: u32,
    per_tenant: u32,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO connreg.replicas (replica_id, instance_id, version_id, endpoint,
             peer_identity, region, zone, capacity_class, capacity, health_seq,
             lease_expires_at_ms, active, state, circuit_open, consecutive_unknown)
         SELECT 't' || t || '-i-r' || r, 't' || t || '-i', 'crm-1',
                'https://t' || t || '-r' || r, 'spiffe://t' || t || '-r' || r,
                'eu', 'eu-' || (r % 3), 'standard', $3, 1, $4, 0, 'ready', false, 0
         FROM generate_series(0, $1 - 1) AS t, generate_series(0, $2 - 1) AS r",
    )
    .bind(i64::from(tenants))
    .bind(i64::from(per_tenant))
    .bind(i64::from(REPLICA_CAPACITY))
    .bind(LEASE_EXPIRES_AT_MS)
    .execute(&mut *admin)
    .await?;
    sqlx::query("ANALYZE").execute(&mut *admin).await?;
    Ok(())
}

/// A new-route request of tenant `t{tenant}` for action `action`.
pub fn request(action: String, tenant: u32) -> RouteRequest {
    RouteRequest {
        action: id(action),
        tenant: Some(id(format!("t{tenant}"))),
        capability: id(CAPABILITY),
        topology: TopologyPreference {
            preferred_region: Some(id("eu")),
            preferred_zone: Some(id("eu-1")),
            capacity_class: id("standard"),
            cross_region: CrossRegion::Allowed,
        },
    }
}
