//! Goal: an assigned action is pinned: retries reuse its route, re-reserve
//! only the same replica and scopes, and fail rather than move; cancellation
//! and reconciliation read the retained route (PIN-1..PIN-6).

use connreg::contracts::{ReplicaLifecycle, Routing};
use connreg::*;

use crate::fixture::{self, FleetOptions, Setup, acme, crm_create, globex, replica, scope};
use crate::support::assert_err;
use crate::{Harness, check};

fn two_replicas() -> FleetOptions {
    FleetOptions {
        replicas_per_instance: 2,
        ..FleetOptions::default()
    }
}

/// Asserts that a pinned retry of `a` fails without a replacement route
/// and without any change.
async fn assert_retry_fails_in_place<S: connreg::contracts::Registry + Inspect>(
    s: &Setup<S>,
    a: &RouteAssignment,
    what: &str,
) {
    let before = s.observe().await;
    let result = s
        .resolve(a.identity.action.as_str(), &acme(), &crm_create())
        .await;
    assert_err!(
        result,
        Error::ReplicaUnavailable | Error::NoCapacity,
        "{what}"
    );
    s.assert_unchanged(&before, what).await;
    let after = s.inspect().await;
    check::assert_clean(&check::no_failover(&before.snapshot, &after), what);
    let record = s
        .store
        .route_get(acme(), a.identity.action.clone())
        .await
        .unwrap()
        .expect("the route is kept");
    assert_eq!(record.assignment.destination, a.destination, "{what}");
}

// spec: PIN-1, PIN-3
/// A pinned re-reservation keeps identity, destination and policy exactly,
/// even after the binding and instance changed; only the reservation is
/// new: a fresh fence, the next attempt, the same scopes.
pub async fn pinned_assignment_keeps_identity_destination_and_policy<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let a = s.resolve_acme("a1").await;
    s.settle(&a, Outcome::Completed).await.unwrap();
    let mut b = s.fleet.binding("b-acme-crm-create");
    b.priority = 1;
    b.policy_revision += 1;
    b.credential.revision += 10;
    b.admission_scopes.remove(&scope("s-acme-crm"));
    let mut i = s.fleet.instance("i-acme-crm");
    i.secret_provider.revision += 10;
    s.publish(vec![Change::UpsertBinding(b), Change::UpsertInstance(i)])
        .await
        .unwrap();
    let again = s.resolve("a1", &acme(), &crm_create()).await.unwrap();
    assert_eq!(again.kind, ResolveKind::Reserved);
    let n = &again.assignment;
    assert_eq!(n.identity, a.identity);
    assert_eq!(n.destination, a.destination);
    assert_eq!(n.policy, a.policy);
    assert_ne!(n.reservation.fence, a.reservation.fence);
    assert_eq!(n.reservation.attempt, a.reservation.attempt + 1);
    assert_eq!(n.reservation.scopes, a.reservation.scopes);
    let snap = s.inspect().await;
    check::assert_clean(&check::all(&snap), "after a pinned retry");
    let crm_scope = snap
        .scopes
        .iter()
        .find(|u| u.scope.id == scope("s-acme-crm"))
        .unwrap();
    assert_eq!(crm_scope.in_use, 1, "the original scopes are reserved");
}

// spec: PIN-2
/// A retry never runs target selection again: after a better replica
/// appears, the retry still goes to the pinned one while a new action
/// goes to the better one.
pub async fn resolving_an_assigned_action_never_selects_again<H: Harness>(harness: &H) {
    let s = fixture::open(harness, two_replicas()).await;
    let a = s.resolve_acme("a1").await;
    assert_eq!(a.destination.replica, replica("i-acme-crm-r0"));
    s.settle(&a, Outcome::Completed).await.unwrap();
    for i in 2..5 {
        s.resolve_acme(&format!("a{i}")).await;
    }
    let mut fresh = s.fleet.replica_spec("i-acme-crm", 0);
    fresh.id = replica("i-acme-crm-fresh");
    fresh.endpoint = "https://fresh.connectors.internal:8443".into();
    s.register(fresh, 1).await;
    let retry = s.resolve("a1", &acme(), &crm_create()).await.unwrap();
    assert_eq!(retry.kind, ResolveKind::Reserved);
    assert_eq!(retry.assignment.destination, a.destination);
    assert_eq!(
        s.resolve_acme("a5").await.destination.replica,
        replica("i-acme-crm-fresh"),
        "a new selection would have chosen the fresh replica"
    );
}

// spec: PIN-3, SETTLE-3
/// After release, a retry reserves the same replica and scopes again.
pub async fn released_route_is_reserved_again_on_the_same_replica<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let a = s.resolve_acme("a1").await;
    s.settle(&a, Outcome::Cancelled).await.unwrap();
    let idle = s.inspect().await;
    assert!(idle.replicas.iter().all(|r| r.active == 0));
    assert!(idle.scopes.iter().all(|u| u.in_use == 0));
    let retry = s.resolve("a1", &acme(), &crm_create()).await.unwrap();
    assert_eq!(retry.kind, ResolveKind::Reserved);
    assert_eq!(retry.assignment.destination.replica, a.destination.replica);
    let snap = s.inspect().await;
    check::assert_clean(&check::all(&snap), "after the retry");
    let r = snap
        .replicas
        .iter()
        .find(|r| r.spec.id == a.destination.replica)
        .unwrap();
    assert_eq!(r.active, 1);
    for u in &snap.scopes {
        let expected = u32::from(a.reservation.scopes.contains(&u.scope.id));
        assert_eq!(u.in_use, expected, "{}", u.scope.id);
    }
    let record = s
        .store
        .route_get(acme(), a.identity.action.clone())
        .await
        .unwrap()
        .unwrap();
    assert!(record.reserved);
    assert_eq!(record.assignment, retry.assignment);
    // Resolving again while reserved returns the new reservation as is.
    let again = s.resolve("a1", &acme(), &crm_create()).await.unwrap();
    assert_eq!(again.kind, ResolveKind::Existing);
    assert_eq!(again.assignment, retry.assignment);
}

// spec: PIN-3, LEASE-1
/// A draining replica takes no new routes but still takes its pinned
/// retries.
pub async fn draining_pinned_replica_still_takes_its_retry<H: Harness>(harness: &H) {
    let s = fixture::open(harness, two_replicas()).await;
    let a = s.resolve_acme("a1").await;
    s.settle(&a, Outcome::OutcomeUnknown).await.unwrap();
    s.store
        .replica_drain(a.destination.replica.clone())
        .await
        .unwrap();
    let retry = s.resolve("a1", &acme(), &crm_create()).await.unwrap();
    assert_eq!(retry.kind, ResolveKind::Reserved);
    assert_eq!(retry.assignment.destination, a.destination);
    assert_ne!(
        s.resolve_acme("a2").await.destination.replica,
        a.destination.replica
    );
}

// spec: PIN-4, PIN-3, LEASE-3
/// When the pinned replica went offline, a retry fails and no replacement
/// route appears, although other replicas have room.
pub async fn retry_with_offline_replica_fails_without_failover<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let a = s.resolve_acme("a1").await;
    s.keep_alive(|spec| spec.id != a.destination.replica).await;
    s.clock.advance_ms(s.fleet.options.lease_ttl_ms);
    let maintained = s
        .store
        .lease_maintain(MaintainParams { max: 100 })
        .await
        .unwrap();
    assert_eq!(maintained.expired, vec![a.destination.replica.clone()]);
    assert_retry_fails_in_place(&s, &a, "offline replica").await;
}

// spec: PIN-4, PIN-3, LEASE-4
/// When the pinned replica's lease ran out (not yet maintained), a retry
/// fails in place.
pub async fn retry_with_expired_lease_fails_without_failover<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let a = s.resolve_acme("a1").await;
    s.settle(&a, Outcome::OutcomeUnknown).await.unwrap();
    s.keep_alive(|spec| spec.id != a.destination.replica).await;
    s.clock.advance_ms(s.fleet.options.lease_ttl_ms);
    assert_retry_fails_in_place(&s, &a, "expired lease").await;
}

// spec: PIN-4, PIN-3, SETTLE-5
/// When the pinned replica's circuit is open, a retry fails in place.
pub async fn retry_with_open_circuit_fails_without_failover<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default().with_circuit(true, 1)).await;
    let a = s.resolve_acme("a1").await;
    s.settle(&a, Outcome::OutcomeUnknown).await.unwrap();
    assert_retry_fails_in_place(&s, &a, "open circuit").await;
}

// spec: PIN-4, PIN-3
/// When the pinned version is deactivated or unqualified, or its type
/// disabled, a retry fails in place; restored, the retry succeeds.
pub async fn retry_after_version_or_type_is_withdrawn_fails_without_failover<H: Harness>(
    harness: &H,
) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let a = s.resolve_acme("a1").await;
    s.settle(&a, Outcome::Completed).await.unwrap();
    let status = |active, qualified| Change::SetVersionStatus {
        version: a.destination.version.clone(),
        active,
        qualified,
    };
    let mut disabled_type = s.fleet.connector_type("ty-crm");
    disabled_type.enabled = false;
    let withdrawals = [
        ("version inactive", status(false, true)),
        ("version unqualified", status(true, false)),
        ("type disabled", Change::UpsertType(disabled_type)),
    ];
    for (what, change) in withdrawals {
        s.publish(vec![change]).await.unwrap();
        assert_retry_fails_in_place(&s, &a, what).await;
        s.publish(vec![
            status(true, true),
            Change::UpsertType(s.fleet.connector_type("ty-crm")),
        ])
        .await
        .unwrap();
    }
    let retry = s.resolve("a1", &acme(), &crm_create()).await.unwrap();
    assert_eq!(retry.kind, ResolveKind::Reserved);
    assert_eq!(retry.assignment.destination, a.destination);
}

// spec: PIN-3, PIN-4, REC-8
/// When the pinned replica or one of the pinned scopes is full, a retry
/// answers NoCapacity in place.
pub async fn retry_on_full_replica_or_scope_answers_no_capacity<H: Harness>(harness: &H) {
    let options = FleetOptions {
        replica_capacity: 1,
        ..two_replicas()
    };
    let s = fixture::open(harness, options).await;
    let a = s.resolve_acme("a1").await;
    s.settle(&a, Outcome::Completed).await.unwrap();
    let b = s.resolve_acme("a2").await;
    assert_eq!(b.destination.replica, a.destination.replica);
    let before = s.observe().await;
    assert_err!(
        s.resolve("a1", &acme(), &crm_create()).await,
        Error::NoCapacity
    );
    s.assert_unchanged(&before, "full pinned replica").await;

    // Free the replica, then fill the pinned scope through a route on the
    // other replica (draining keeps new routes off the pinned one).
    s.settle(&b, Outcome::Completed).await.unwrap();
    s.store
        .replica_drain(a.destination.replica.clone())
        .await
        .unwrap();
    let mut narrow = s.fleet.scope("s-acme-crm");
    narrow.limit = 1;
    s.publish(vec![Change::UpsertScope(narrow)]).await.unwrap();
    let c = s.resolve_acme("a3").await;
    assert_ne!(c.destination.replica, a.destination.replica);
    let before = s.observe().await;
    assert_err!(
        s.resolve("a1", &acme(), &crm_create()).await,
        Error::NoCapacity
    );
    s.assert_unchanged(&before, "full pinned scope").await;
}

// spec: PIN-5
/// Cancellation reads the same assignment, addressed to its replica, only
/// for its own tenant.
pub async fn cancellation_reads_the_same_assignment<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let a = s.resolve_acme("a1").await;
    let record = s
        .store
        .route_get(acme(), a.identity.action.clone())
        .await
        .unwrap()
        .expect("the route");
    assert_eq!(record.assignment, a);
    assert!(record.reserved);
    assert_eq!(
        s.store
            .route_get(globex(), a.identity.action.clone())
            .await
            .unwrap(),
        None,
        "another tenant's route reads as none"
    );
    assert_eq!(
        s.store
            .route_get(acme(), fixture::action("never-resolved"))
            .await
            .unwrap(),
        None
    );
    s.settle(&a, Outcome::Cancelled).await.unwrap();
    let after = s
        .store
        .route_get(acme(), a.identity.action.clone())
        .await
        .unwrap()
        .expect("kept after cancellation");
    assert_eq!(after.assignment.destination.replica, a.destination.replica);
    assert_eq!(after.last_settlement, Some(Outcome::Cancelled));
}

// spec: PIN-6, REC-6, LEASE-3
/// After an unknown outcome, and even after the replica went offline, the
/// retained route still names the provider boundary: binding, instance,
/// version and replica.
pub async fn reconciliation_finds_the_provider_boundary<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let a = s.resolve_acme("a1").await;
    s.settle(&a, Outcome::OutcomeUnknown).await.unwrap();
    s.clock.advance_ms(10 * s.fleet.options.lease_ttl_ms);
    s.store
        .lease_maintain(MaintainParams { max: 100 })
        .await
        .unwrap();
    let record = s
        .store
        .route_get(acme(), a.identity.action.clone())
        .await
        .unwrap()
        .expect("retained");
    assert_eq!(record.last_settlement, Some(Outcome::OutcomeUnknown));
    assert!(!record.reserved);
    assert_eq!(record.assignment.identity, a.identity);
    assert_eq!(record.assignment.destination, a.destination);
    assert_eq!(record.assignment.policy, a.policy);
}
