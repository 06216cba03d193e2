//! Goal: no reservation outlives the registry's hold (PIN-8). Lease
//! maintenance releases a reservation taken longer ago than
//! `RegistryConfig::reservation_hold_ms`, whoever holds it, names it with
//! the reason `hold_expired`, records it as `lease_expired` and leaves the
//! route pinned: a retry reserves the same replica again with a fresh fence
//! and a fresh hold.

use connreg::contracts::{ReplicaLifecycle, Routing};
use connreg::limits::{RESERVATION_HOLD_MS_MAX, RESERVATION_HOLD_MS_MIN};
use connreg::*;

use crate::fixture::{self, FleetOptions, Setup, acme};
use crate::{Harness, check};

/// A hold far shorter than the fixture's 30 s leases, so replicas kept
/// alive by heartbeats never expire while holds do.
const HOLD_MS: u64 = 10_000;

fn options() -> FleetOptions {
    let mut options = FleetOptions::default();
    options.config.reservation_hold_ms = HOLD_MS;
    options
}

async fn maintain<S: ReplicaLifecycle>(s: &Setup<S>, max: u32) -> Maintained {
    s.store
        .lease_maintain(MaintainParams { max })
        .await
        .unwrap()
}

async fn route<S: Routing>(s: &Setup<S>, a: &RouteAssignment) -> RouteRecord {
    s.store
        .route_get(acme(), a.identity.action.clone())
        .await
        .unwrap()
        .expect("the route is retained")
}

fn named(a: &RouteAssignment) -> ReleasedReservation {
    ReleasedReservation {
        action: a.identity.action.clone(),
        fence: a.reservation.fence,
        replica: a.destination.replica.clone(),
        scopes: a.reservation.scopes.clone(),
        reason: ReleaseReason::HoldExpired,
    }
}

// spec: PIN-8, PIN-3, SETTLE-4, LEASE-3
/// A reservation is held until exactly its hold has passed; then
/// maintenance releases it (named, counters back, circuit untouched), a
/// late settlement of it changes nothing, and a retry reserves the same
/// replica again with a fresh fence whose hold starts anew.
pub async fn a_reservation_is_released_once_its_hold_passes<H: Harness>(harness: &H) {
    let s = fixture::open(harness, options().with_circuit(true, 1)).await;
    let a1 = s.resolve_acme("a1").await;
    s.clock.advance_ms(HOLD_MS - 1);
    s.keep_alive(|_| true).await;
    let m = maintain(&s, 100).await;
    assert!(m.releases.is_empty(), "held for less than the hold: {m:?}");
    assert!(route(&s, &a1).await.reserved);

    s.clock.advance_ms(1);
    let m = maintain(&s, 100).await;
    assert_eq!(m.releases, vec![named(&a1)]);
    assert_eq!(m.released, 1);
    assert!(m.expired.is_empty(), "no replica's lease ended");
    assert!(!m.more);
    let record = route(&s, &a1).await;
    assert!(!record.reserved);
    assert_eq!(record.last_settlement, Some(Outcome::LeaseExpired));
    assert_eq!(record.assignment, a1, "the route is never rewritten");
    let snap = s.inspect().await;
    check::assert_clean(&check::all(&snap), "after the hold released a1");
    let replica = s
        .store
        .replica_get(a1.destination.replica.clone())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(replica.active, 0);
    assert_eq!(replica.circuit, Circuit::default());
    assert!(
        !s.settle(&a1, Outcome::OutcomeUnknown)
            .await
            .unwrap()
            .released,
        "the released reservation's settlement is idempotent"
    );
    assert_eq!(
        route(&s, &a1).await.last_settlement,
        Some(Outcome::LeaseExpired)
    );

    let again = s
        .resolve("a1", &acme(), &fixture::crm_create())
        .await
        .unwrap();
    assert_eq!(again.kind, ResolveKind::Reserved);
    assert_eq!(again.assignment.destination, a1.destination);
    assert!(again.assignment.reservation.fence > a1.reservation.fence);
    s.clock.advance_ms(HOLD_MS - 1);
    s.keep_alive(|_| true).await;
    assert!(maintain(&s, 100).await.releases.is_empty());
    s.clock.advance_ms(1);
    assert_eq!(
        maintain(&s, 100).await.releases,
        vec![named(&again.assignment)]
    );
}

// spec: PIN-8, LEASE-2
/// Holds are released oldest first, at most `max` a call, and `more` says
/// when some remain; a settled reservation is never released again.
pub async fn holds_are_released_oldest_first_within_the_batch<H: Harness>(harness: &H) {
    let s = fixture::open(harness, options()).await;
    let a1 = s.resolve_acme("a1").await;
    s.clock.advance_ms(10);
    let a2 = s.resolve_acme("a2").await;
    s.clock.advance_ms(10);
    let a3 = s.resolve_acme("a3").await;
    s.clock.advance_ms(10);
    let a4 = s.resolve_acme("a4").await;
    assert!(s.settle(&a3, Outcome::Completed).await.unwrap().released);
    s.clock.advance_ms(HOLD_MS);
    s.keep_alive(|_| true).await;
    let first = maintain(&s, 2).await;
    assert_eq!(first.releases, vec![named(&a1), named(&a2)]);
    assert!(first.more, "a4 is past its hold too");
    let second = maintain(&s, 2).await;
    assert_eq!(second.releases, vec![named(&a4)]);
    assert!(!second.more);
    assert_eq!(
        route(&s, &a3).await.last_settlement,
        Some(Outcome::Completed),
        "a settled reservation keeps its outcome"
    );
    let snap = s.inspect().await;
    check::assert_clean(&check::all(&snap), "after every hold ended");
}

// spec: PIN-8, CAT-10
/// A hold outside its documented bounds is refused by the configuration.
pub async fn a_hold_outside_its_bounds_is_refused<H: Harness>(_harness: &H) {
    for (hold, ok) in [
        (RESERVATION_HOLD_MS_MIN - 1, false),
        (RESERVATION_HOLD_MS_MIN, true),
        (RESERVATION_HOLD_MS_MAX, true),
        (RESERVATION_HOLD_MS_MAX + 1, false),
    ] {
        let config = RegistryConfig {
            reservation_hold_ms: hold,
            ..RegistryConfig::default()
        };
        assert_eq!(config.validate().is_ok(), ok, "hold {hold} ms");
    }
}
