//! Goal: aggregate status is backend-neutral and agrees with the store:
//! replicas by state, live reservations, routes, open circuits and the
//! revision (AUTH-5).

use connreg::contracts::{ReplicaLifecycle, Status};
use connreg::*;

use crate::Harness;
use crate::fixture::{self, FleetOptions, replica};

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
