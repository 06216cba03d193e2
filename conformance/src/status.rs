//! Goal: aggregate status is backend-neutral and agrees with the store:
//! replicas by state, live reservations, routes, open circuits and the
//! revision (AUTH-5).

use connreg::contracts::{CatalogRead, ReplicaLifecycle, Routing, Status};
use connreg::*;

use crate::Harness;
use crate::fixture::{self, FleetOptions, acme, crm_create, replica};

// spec: AUTH-5, REC-6
/// Status counts replicas by state, reservations held, routes ever made,
/// open circuits and the revision, exactly as a full inspection shows.
pub async fn status_counts_match_the_store<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default().with_circuit(true, 1)).await;
    let empty = s.store.status().await.unwrap();
    assert_eq!(
        empty,
        StatusReport {
            revision: Revision(1),
            replicas_ready: 12,
            replicas_draining: 0,
            replicas_offline: 0,
            active_assignments: 0,
            assignments_total: 0,
            open_circuits: 0,
        }
    );
    let a = s.resolve_acme("a1").await;
    s.resolve_acme("a2").await;
    s.resolve("g1", &fixture::globex(), &fixture::crm_create())
        .await
        .unwrap();
    s.settle(&a, Outcome::OutcomeUnknown).await.unwrap();
    s.store
        .replica_drain(replica("i-acme-crm-r3"))
        .await
        .unwrap();
    // Everything but i-acme-mail's replicas stays alive.
    for spec in s.fleet.replica_specs() {
        if spec.instance.as_str() != "i-acme-mail" {
            s.store
                .replica_heartbeat(HeartbeatParams {
                    replica: spec.id,
                    health_seq: 2,
                    lease_ttl_ms: 600_000,
                })
                .await
                .unwrap();
        }
    }
    s.clock.advance_ms(s.fleet.options.lease_ttl_ms);
    s.store
        .lease_maintain(MaintainParams { max: 100 })
        .await
        .unwrap();

    let status = s.store.status().await.unwrap();
    assert_eq!(
        status,
        StatusReport {
            revision: Revision(1),
            replicas_ready: 7,
            replicas_draining: 1,
            replicas_offline: 4,
            active_assignments: 2,
            assignments_total: 3,
            open_circuits: 1,
        }
    );
    let snap = s.inspect().await;
    let count = |state| snap.replicas.iter().filter(|r| r.state == state).count() as u64;
    assert_eq!(status.replicas_ready, count(ReplicaState::Ready));
    assert_eq!(status.replicas_draining, count(ReplicaState::Draining));
    assert_eq!(status.replicas_offline, count(ReplicaState::Offline));
    assert_eq!(
        status.active_assignments,
        snap.routes.iter().filter(|r| r.reserved).count() as u64
    );
    assert_eq!(status.assignments_total, snap.routes.len() as u64);
    assert_eq!(
        status.open_circuits,
        snap.replicas.iter().filter(|r| r.circuit.open).count() as u64
    );
    assert_eq!(status.revision, snap.revision);
}

// spec: AUTH-1, AUTH-5
/// The data-plane handle serves the same store as the full handle: every
/// data-plane call through it answers what the full handle answers and
/// writes where the full handle reads.
pub async fn data_plane_handle_serves_the_same_store<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let data = H::data_plane(&s.store);

    assert_eq!(data.catalog_revision().await.unwrap(), Revision(1));
    let first = CatalogQuery::first_page(Reader::Tenant(acme()));
    assert_eq!(
        data.catalog_page(first.clone()).await.unwrap(),
        s.store.catalog_page(first).await.unwrap()
    );

    let resolved = data
        .route_resolve(s.fleet.request("dp-1", &acme(), &crm_create()))
        .await
        .unwrap();
    assert_eq!(resolved.kind, ResolveKind::Created);
    let action = resolved.assignment.identity.action.clone();
    let route = data
        .route_get(acme(), action.clone())
        .await
        .unwrap()
        .expect("the route resolved through the data plane");
    assert_eq!(route.assignment, resolved.assignment);
    assert!(route.reserved);
    assert_eq!(
        s.store.route_get(acme(), action.clone()).await.unwrap(),
        Some(route)
    );
    assert_eq!(
        data.route_get(fixture::globex(), action.clone())
            .await
            .unwrap(),
        None,
        "another tenant's route is not found"
    );

    let target = resolved.assignment.destination.replica.clone();
    let held = data
        .replica_get(target.clone())
        .await
        .unwrap()
        .expect("the routed replica");
    assert_eq!(held.active, 1);
    assert_eq!(
        s.store.replica_get(target.clone()).await.unwrap(),
        Some(held)
    );
    assert_eq!(data.replica_get(replica("nowhere")).await.unwrap(), None);

    let status = data.status().await.unwrap();
    assert_eq!(status, s.store.status().await.unwrap());
    assert_eq!(
        (
            status.revision,
            status.active_assignments,
            status.replicas_ready
        ),
        (Revision(1), 1, 12)
    );

    let settled = data
        .route_settle(SettleParams {
            assignment: resolved.assignment.clone(),
            outcome: Outcome::Completed,
        })
        .await
        .unwrap();
    assert!(settled.released);
    assert_eq!(s.store.status().await.unwrap().active_assignments, 0);

    assert_eq!(
        data.replica_heartbeat(HeartbeatParams {
            replica: target.clone(),
            health_seq: 2,
            lease_ttl_ms: 600_000,
        })
        .await
        .unwrap(),
        HeartbeatOutcome::Applied
    );
    let drained = data.replica_drain(target.clone()).await.unwrap();
    assert_eq!(drained.state, ReplicaState::Draining);
    assert_eq!(drained.health_seq, 2);
    let back = data
        .replica_register(RegisterParams {
            spec: drained.spec.clone(),
            health_seq: 3,
            lease_ttl_ms: 600_000,
        })
        .await
        .unwrap();
    assert_eq!(back.state, ReplicaState::Ready);

    s.clock.advance_ms(s.fleet.options.lease_ttl_ms);
    let maintained = data
        .lease_maintain(MaintainParams { max: 100 })
        .await
        .unwrap();
    assert_eq!(maintained.expired.len(), 11, "all but the renewed replica");
    assert_eq!(s.store.status().await.unwrap().replicas_offline, 11);
}
