//! Goal: replicas register, heartbeat, drain and go offline by the injected
//! clock; lease maintenance is bounded, releases reservations as
//! lease_expired and never moves a route (LEASE-1..LEASE-4).

use std::collections::BTreeSet;

use connreg::contracts::{ReplicaLifecycle, Routing};
use connreg::limits::{LEASE_MAINTENANCE_BATCH_MAX, LEASE_TTL_MS_MAX, SEQUENCE_MAX};
use connreg::*;

use crate::fixture::{self, CLOCK_START_MS, FleetOptions, Setup, acme, crm_create, replica};
use crate::support::assert_err;
use crate::{Harness, check};

async fn get<S: ReplicaLifecycle>(s: &Setup<S>, id: &str) -> Replica {
    s.store
        .replica_get(replica(id))
        .await
        .unwrap()
        .expect("replica")
}

fn beat(id: &str, health_seq: u64, lease_ttl_ms: u64) -> HeartbeatParams {
    HeartbeatParams {
        replica: replica(id),
        health_seq,
        lease_ttl_ms,
    }
}

// spec: LEASE-1, LEASE-4
/// A newer heartbeat advances the health sequence and sets the lease from
/// the injected clock's now; it also renews a lease that ran out before
/// maintenance noticed.
pub async fn heartbeat_advances_sequence_and_lease<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    s.clock.advance_ms(10_000);
    assert_eq!(
        s.store
            .replica_heartbeat(beat("i-acme-crm-r0", 5, 45_000))
            .await
            .unwrap(),
        HeartbeatOutcome::Applied
    );
    let r = get(&s, "i-acme-crm-r0").await;
    assert_eq!(r.health_seq, 5);
    assert_eq!(r.lease_expires_at, Timestamp(CLOCK_START_MS + 55_000));
    assert_eq!(r.state, ReplicaState::Ready);

    s.clock.advance_ms(60_000);
    assert_eq!(
        s.store
            .replica_heartbeat(beat("i-acme-crm-r0", 6, 30_000))
            .await
            .unwrap(),
        HeartbeatOutcome::Applied
    );
    assert_eq!(
        s.resolve_acme("a1").await.destination.replica,
        replica("i-acme-crm-r0"),
        "the renewed replica serves again"
    );
}

// spec: LEASE-1
/// A heartbeat whose sequence is not newer than the stored one is ignored
/// and changes nothing, whatever lease it asks for.
pub async fn older_or_equal_heartbeat_is_ignored<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    s.store
        .replica_heartbeat(beat("i-acme-crm-r0", 5, 30_000))
        .await
        .unwrap();
    s.clock.advance_ms(1_000);
    let before = s.observe().await;
    for seq in [5, 4, 1, 0] {
        assert_eq!(
            s.store
                .replica_heartbeat(beat("i-acme-crm-r0", seq, 600_000))
                .await
                .unwrap(),
            HeartbeatOutcome::Ignored,
            "sequence {seq}"
        );
    }
    s.assert_unchanged(&before, "old heartbeats").await;
}

// spec: LEASE-1, LEASE-2
/// A replica goes ready → draining → offline, refuses heartbeats while
/// offline, and comes back ready by registering again with a newer
/// sequence.
pub async fn replica_lifecycle_runs_ready_draining_offline_and_back<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let drained = s
        .store
        .replica_drain(replica("i-acme-crm-r0"))
        .await
        .unwrap();
    assert_eq!(drained.state, ReplicaState::Draining);
    let again = s
        .store
        .replica_drain(replica("i-acme-crm-r0"))
        .await
        .unwrap();
    assert_eq!(again.state, ReplicaState::Draining);
    s.store
        .replica_heartbeat(beat("i-acme-crm-r0", 2, 30_000))
        .await
        .unwrap();
    assert_eq!(
        get(&s, "i-acme-crm-r0").await.state,
        ReplicaState::Draining,
        "a heartbeat does not undo a drain"
    );
    s.clock.advance_ms(30_000);
    s.store
        .lease_maintain(MaintainParams { max: 100 })
        .await
        .unwrap();
    assert_eq!(get(&s, "i-acme-crm-r0").await.state, ReplicaState::Offline);
    let before = s.observe().await;
    assert_err!(
        s.store
            .replica_heartbeat(beat("i-acme-crm-r0", 3, 30_000))
            .await,
        Error::ReplicaUnavailable
    );
    s.assert_unchanged(&before, "heartbeat to an offline replica")
        .await;
    assert_eq!(
        s.store
            .replica_drain(replica("i-acme-crm-r0"))
            .await
            .unwrap()
            .state,
        ReplicaState::Offline,
        "draining an offline replica leaves it offline"
    );

    let back = s
        .store
        .replica_register(
            s.fleet
                .register_params(s.fleet.replica_spec("i-acme-crm", 0), 3),
        )
        .await
        .unwrap();
    assert_eq!(back.state, ReplicaState::Ready);
    assert_eq!(back.health_seq, 3);
    assert_eq!(back.active, 0);
    assert_eq!(
        back.lease_expires_at,
        Timestamp(CLOCK_START_MS + 30_000 + s.fleet.options.lease_ttl_ms)
    );
    assert_eq!(
        s.resolve_acme("a1").await.destination.replica,
        replica("i-acme-crm-r0")
    );
}

// spec: LEASE-1, LEASE-2
/// Registering a live replica again with a newer sequence moves its lease
/// and undoes a drain: maintenance goes by the new lease end only, and a
/// not-newer registration changes nothing.
pub async fn registering_a_live_replica_again_moves_its_lease<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    s.store
        .replica_drain(replica("i-acme-crm-r0"))
        .await
        .unwrap();
    s.clock.advance_ms(10_000);
    let spec = s.fleet.replica_spec("i-acme-crm", 0);
    let again = s
        .store
        .replica_register(s.fleet.register_params(spec.clone(), 2))
        .await
        .unwrap();
    assert_eq!(
        again.state,
        ReplicaState::Ready,
        "a newer registration undoes a drain"
    );
    assert_eq!(
        again.lease_expires_at,
        Timestamp(CLOCK_START_MS + 10_000 + s.fleet.options.lease_ttl_ms)
    );
    let before = s.observe().await;
    let stale = s
        .store
        .replica_register(s.fleet.register_params(spec, 2))
        .await
        .unwrap();
    assert_eq!(stale, again);
    s.assert_unchanged(&before, "a not-newer registration")
        .await;

    // Past the first lease end, before the second: exactly a batch of 11
    // expired, so nothing more remains.
    s.clock.advance_ms(s.fleet.options.lease_ttl_ms - 5_000);
    let maintained = s
        .store
        .lease_maintain(MaintainParams { max: 11 })
        .await
        .unwrap();
    assert!(
        !maintained.expired.contains(&replica("i-acme-crm-r0")),
        "{maintained:?}"
    );
    assert_eq!(maintained.expired.len(), 11);
    assert!(!maintained.more, "a batch of exactly the expired replicas");
    assert_eq!(get(&s, "i-acme-crm-r0").await.state, ReplicaState::Ready);
    s.clock.advance_ms(5_000);
    let maintained = s
        .store
        .lease_maintain(MaintainParams { max: 100 })
        .await
        .unwrap();
    assert_eq!(maintained.expired, vec![replica("i-acme-crm-r0")]);
}

// spec: LEASE-2
/// Lease maintenance marks at most `max` expired replicas offline per call
/// and says when more remain; its batch size is itself bounded.
pub async fn maintenance_is_bounded_per_call<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let before = s.observe().await;
    assert_err!(
        s.store.lease_maintain(MaintainParams { max: 0 }).await,
        Error::InvalidRequest { .. }
    );
    assert_err!(
        s.store
            .lease_maintain(MaintainParams {
                max: LEASE_MAINTENANCE_BATCH_MAX + 1
            })
            .await,
        Error::LimitExceeded { max, .. } if max == u64::from(LEASE_MAINTENANCE_BATCH_MAX)
    );
    s.assert_unchanged(&before, "refused maintenance").await;

    let total = s.fleet.replica_specs().len();
    assert_eq!(total, 12);
    s.clock.advance_ms(s.fleet.options.lease_ttl_ms);
    let mut seen = BTreeSet::new();
    for (expected, more) in [(5, true), (5, true), (2, false), (0, false)] {
        let m = s
            .store
            .lease_maintain(MaintainParams { max: 5 })
            .await
            .unwrap();
        assert_eq!(m.expired.len(), expected);
        assert_eq!(m.more, more);
        for id in m.expired {
            assert!(seen.insert(id), "a replica expires once");
        }
    }
    assert_eq!(seen.len(), total);
    let snap = s.inspect().await;
    assert!(
        snap.replicas
            .iter()
            .all(|r| r.state == ReplicaState::Offline)
    );
}

// spec: LEASE-2, SETTLE-5, PIN-7
/// Maintenance releases the reservations of an expired replica as
/// lease_expired settlements: counters drop, routes read unreserved, and
/// the circuit is not touched.
pub async fn maintenance_releases_reservations_as_lease_expired<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default().with_circuit(true, 1)).await;
    let a1 = s.resolve_acme("a1").await;
    let a2 = s.resolve_acme("a2").await;
    let g = s
        .resolve("g1", &fixture::globex(), &crm_create())
        .await
        .unwrap()
        .assignment;
    assert_eq!(a1.destination.replica, a2.destination.replica);
    s.keep_alive(|spec| spec.id != a1.destination.replica).await;
    s.clock.advance_ms(s.fleet.options.lease_ttl_ms);
    let m = s
        .store
        .lease_maintain(MaintainParams { max: 100 })
        .await
        .unwrap();
    assert_eq!(m.expired, vec![a1.destination.replica.clone()]);
    assert_eq!(m.released, 2);
    assert!(!m.more);
    // The answer names exactly the two reservations it released, in
    // action order, and not globex's on another replica.
    let named = |a: &RouteAssignment| connreg::ReleasedReservation {
        action: a.identity.action.clone(),
        fence: a.reservation.fence,
        replica: a.destination.replica.clone(),
        scopes: a.reservation.scopes.clone(),
        reason: connreg::ReleaseReason::LeaseExpired,
    };
    assert_eq!(m.releases, vec![named(&a1), named(&a2)]);
    assert_ne!(g.destination.replica, a1.destination.replica);
    let snap = s.inspect().await;
    check::assert_clean(&check::all(&snap), "after maintenance");
    for a in [&a1, &a2] {
        let record = s
            .store
            .route_get(acme(), a.identity.action.clone())
            .await
            .unwrap()
            .unwrap();
        assert!(!record.reserved);
        assert_eq!(record.last_settlement, Some(Outcome::LeaseExpired));
    }
    let r = get(&s, a1.destination.replica.as_str()).await;
    assert_eq!(r.state, ReplicaState::Offline);
    assert_eq!(r.active, 0);
    assert_eq!(r.circuit, Circuit::default());
    let other = s
        .store
        .route_get(fixture::globex(), g.identity.action.clone())
        .await
        .unwrap()
        .unwrap();
    assert!(other.reserved, "routes on live replicas are untouched");
    // The released copies are settled already: settling them is idempotent.
    assert!(!s.settle(&a1, Outcome::Completed).await.unwrap().released);
}

// spec: LEASE-3, PIN-4
/// Maintenance never rewrites a destination: every route keeps identity,
/// destination and policy, and a retry afterwards fails in place.
pub async fn maintenance_never_rewrites_a_destination<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let mut routes = Vec::new();
    for i in 0..6 {
        routes.push(s.resolve_acme(&format!("a{i}")).await);
    }
    let before = s.inspect().await;
    s.clock.advance_ms(s.fleet.options.lease_ttl_ms);
    loop {
        let m = s
            .store
            .lease_maintain(MaintainParams { max: 3 })
            .await
            .unwrap();
        if !m.more {
            break;
        }
    }
    let after = s.inspect().await;
    check::assert_clean(&check::no_failover(&before, &after), "maintenance");
    check::assert_clean(&check::all(&after), "maintenance");
    assert_eq!(before.routes.len(), after.routes.len());
    for a in &routes {
        assert_err!(
            s.resolve(a.identity.action.as_str(), &acme(), &crm_create())
                .await,
            Error::ReplicaUnavailable | Error::NoCapacity
        );
    }
    check::assert_clean(
        &check::no_failover(&before, &s.inspect().await),
        "retries after maintenance",
    );
}

// spec: LEASE-4
/// Leases follow only the injected clock: real time passing expires
/// nothing, and expiry happens exactly at the lease end.
pub async fn leases_follow_the_injected_clock_only<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let end = CLOCK_START_MS + s.fleet.options.lease_ttl_ms;
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let m = s
        .store
        .lease_maintain(MaintainParams { max: 100 })
        .await
        .unwrap();
    assert!(m.expired.is_empty(), "wall-clock time expires nothing");
    s.clock.set(Timestamp(end - 1));
    let m = s
        .store
        .lease_maintain(MaintainParams { max: 100 })
        .await
        .unwrap();
    assert!(m.expired.is_empty(), "the lease holds until its end");
    s.clock.set(Timestamp(end));
    let m = s
        .store
        .lease_maintain(MaintainParams { max: 100 })
        .await
        .unwrap();
    assert_eq!(m.expired.len(), 12, "every lease ends at once");
}

// spec: LEASE-1, LEASE-4, CAT-10
/// Bad lifecycle input (lease too short or too long, unknown replica) gets
/// a typed error and changes nothing.
pub async fn lifecycle_bad_input_is_refused_and_changes_nothing<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let before = s.observe().await;
    assert_err!(
        s.store.replica_heartbeat(beat("i-acme-crm-r0", 9, 0)).await,
        Error::InvalidRequest { .. }
    );
    assert_err!(
        s.store
            .replica_heartbeat(beat("i-acme-crm-r0", 9, LEASE_TTL_MS_MAX + 1))
            .await,
        Error::LimitExceeded { max, .. } if max == LEASE_TTL_MS_MAX
    );
    assert_err!(
        s.store.replica_heartbeat(beat("nowhere", 9, 1_000)).await,
        Error::NotFound { .. }
    );
    assert_err!(
        s.store.replica_drain(replica("nowhere")).await,
        Error::NotFound { .. }
    );
    let mut params = s
        .fleet
        .register_params(s.fleet.replica_spec("i-acme-crm", 7), 1);
    params.lease_ttl_ms = 0;
    assert_err!(
        s.store.replica_register(params.clone()).await,
        Error::InvalidRequest { .. }
    );
    params.lease_ttl_ms = LEASE_TTL_MS_MAX + 1;
    assert_err!(
        s.store.replica_register(params).await,
        Error::LimitExceeded { .. }
    );
    s.assert_unchanged(&before, "bad lifecycle input").await;
    // The longest lease is accepted.
    s.store
        .replica_heartbeat(beat("i-acme-crm-r0", 9, LEASE_TTL_MS_MAX))
        .await
        .unwrap();
}

// spec: LEASE-1, REC-5
/// Health sequences past `SEQUENCE_MAX` are refused the same way by every
/// backend, in heartbeats and registrations, and change nothing.
pub async fn health_sequence_past_its_bound_is_refused<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let before = s.observe().await;
    assert_err!(
        s.store
            .replica_heartbeat(beat("i-acme-crm-r0", SEQUENCE_MAX + 1, 1_000))
            .await,
        Error::LimitExceeded { max, .. } if max == SEQUENCE_MAX
    );
    let spec = get(&s, "i-acme-crm-r0").await.spec;
    assert_err!(
        s.store
            .replica_register(RegisterParams {
                spec,
                health_seq: u64::MAX,
                lease_ttl_ms: 1_000,
            })
            .await,
        Error::LimitExceeded { max, .. } if max == SEQUENCE_MAX
    );
    s.assert_unchanged(&before, "refused sequences").await;
    assert_eq!(
        s.store
            .replica_heartbeat(beat("i-acme-crm-r0", SEQUENCE_MAX, 1_000))
            .await
            .unwrap(),
        HeartbeatOutcome::Applied
    );
}
