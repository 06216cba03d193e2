//! Goal: the PostgreSQL backend starts on a fresh database and serves one
//! route end to end.
#![cfg(feature = "postgres")]

mod postgres_common;

use std::collections::BTreeSet;

use connreg::contracts::{CatalogAdmin, CatalogRead, ReplicaLifecycle, Routing, Status};
use connreg::*;
use postgres_common::PgFixture;

fn id<T: TryFrom<&'static str, Error = Error>>(s: &'static str) -> T {
    T::try_from(s).unwrap()
}

fn opaque(r: &str) -> OpaqueRef {
    OpaqueRef {
        reference: r.into(),
        revision: 1,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_route_end_to_end() {
    let fx = PgFixture::new().await;
    let (reg, _clock) = fx.registry_at_zero().await;
    let rev = reg
        .catalog_publish(Publication {
            changes: vec![
                Change::UpsertType(ConnectorType {
                    id: id("crm"),
                    family: "crm".into(),
                    owner: "team".into(),
                    enabled: true,
                }),
                Change::UpsertDefinition(CapabilityDefinition {
                    id: id("crm.contact.create"),
                    summary: "Create a contact".into(),
                    schema: "{}".into(),
                    active: true,
                }),
                Change::AdmitVersion(ConnectorVersion {
                    id: id("crm-1"),
                    connector_type: id("crm"),
                    artifact_digest: "sha256:1".into(),
                    manifest: "m".into(),
                    capabilities: BTreeSet::from([id("crm.contact.create")]),
                    profiles: BTreeSet::new(),
                    attestation: "att".into(),
                    active: true,
                    qualified: true,
                }),
                Change::UpsertInstance(Instance {
                    id: id("i1"),
                    tenant: id("t1"),
                    version: id("crm-1"),
                    config: opaque("cfg"),
                    secret_provider: opaque("vault:x"),
                    enabled: true,
                }),
                Change::UpsertScope(AdmissionScope {
                    id: id("s1"),
                    tenant: id("t1"),
                    kind: ScopeKind::Tenant,
                    limit: 10,
                }),
                Change::UpsertBinding(Binding {
                    id: id("b1"),
                    tenant: id("t1"),
                    capability: id("crm.contact.create"),
                    instance: id("i1"),
                    priority: 1,
                    policy_revision: 1,
                    credential: opaque("cred"),
                    quota_policy: None,
                    admission_scopes: BTreeSet::from([id("s1")]),
                    enabled: true,
                }),
            ],
        })
        .await
        .unwrap();
    assert_eq!(rev, Revision(1));
    reg.replica_register(RegisterParams {
        spec: ReplicaSpec {
            id: id("r1"),
            instance: id("i1"),
            version: id("crm-1"),
            endpoint: "https://r1".into(),
            peer_identity: "spiffe://r1".into(),
            region: id("eu"),
            zone: id("eu-a"),
            capacity_class: id("standard"),
            capacity: 2,
        },
        health_seq: 1,
        lease_ttl_ms: 10_000,
    })
    .await
    .unwrap();
    let request = RouteRequest {
        action: id("a1"),
        tenant: Some(id("t1")),
        capability: id("crm.contact.create"),
        topology: TopologyPreference {
            preferred_region: Some(id("eu")),
            preferred_zone: None,
            capacity_class: id("standard"),
            cross_region: CrossRegion::Allowed,
        },
    };
    let first = reg.route_resolve(request.clone()).await.unwrap();
    assert_eq!(first.kind, ResolveKind::Created);
    assert_eq!(first.assignment.destination.replica.as_str(), "r1");
    let again = reg.route_resolve(request.clone()).await.unwrap();
    assert_eq!(again.kind, ResolveKind::Existing);
    assert_eq!(again.assignment, first.assignment);
    let page = reg
        .catalog_page(CatalogQuery::first_page(Reader::Tenant(id("t1"))))
        .await
        .unwrap();
    assert_eq!(page.entries.len(), 1);
    let settled = reg
        .route_settle(SettleParams {
            assignment: first.assignment.clone(),
            outcome: Outcome::Completed,
        })
        .await
        .unwrap();
    assert!(settled.released);
    let retry = reg.route_resolve(request).await.unwrap();
    assert_eq!(retry.kind, ResolveKind::Reserved);
    assert_eq!(retry.assignment.reservation.attempt, 2);
    let status = reg.status().await.unwrap();
    assert_eq!(status.active_assignments, 1);
    assert_eq!(status.replicas_ready, 1);
}
