//! Goal: settlement takes the exact assignment, releases its reservation
//! once, is idempotent afterwards, and drives the circuit only as the
//! rules say; circuits close only by the audited operator action
//! (SETTLE-1..SETTLE-6).

use std::sync::Arc;

use connreg::contracts::{Operations, ReplicaLifecycle, Routing};
use connreg::limits::{AUDIT_PAGE_ENTRIES_MAX, TEXT_BYTES_MAX};
use connreg::request::{AuditQuery, CircuitCloseParams};
use connreg::*;

use crate::fixture::{self, FleetOptions, Setup, acme, class, replica, scope};
use crate::support::assert_err;
use crate::{Harness, check};

fn two_replicas() -> FleetOptions {
    FleetOptions {
        replicas_per_instance: 2,
        ..FleetOptions::default()
    }
}

async fn circuit<S: ReplicaLifecycle>(s: &Setup<S>, id: &ReplicaId) -> Circuit {
    s.store
        .replica_get(id.clone())
        .await
        .unwrap()
        .expect("replica")
        .circuit
}

/// Resolves `n` acme routes that all land on the preferred replica r0.
async fn routes_on_r0<S: connreg::contracts::Registry + Inspect>(
    s: &Setup<S>,
    n: usize,
) -> Vec<RouteAssignment> {
    let mut out = Vec::new();
    for i in 0..n {
        let a = s.resolve_acme(&format!("a{i}")).await;
        assert_eq!(a.destination.replica, replica("i-acme-crm-r0"));
        out.push(a);
    }
    out
}

fn close_params(id: &str) -> CircuitCloseParams {
    CircuitCloseParams {
        replica: replica(id),
        reason: "provider confirmed recovery".into(),
    }
}

// spec: SETTLE-1, SETTLE-3
/// Each of the four outcomes settles a reservation and is recorded as the
/// route's last settlement.
pub async fn settlement_accepts_each_of_the_four_outcomes<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    for (i, outcome) in [
        Outcome::Completed,
        Outcome::OutcomeUnknown,
        Outcome::Cancelled,
        Outcome::LeaseExpired,
    ]
    .into_iter()
    .enumerate()
    {
        let a = s.resolve_acme(&format!("a{i}")).await;
        assert_eq!(
            s.settle(&a, outcome).await.unwrap(),
            Settled { released: true }
        );
        let record = s
            .store
            .route_get(acme(), a.identity.action.clone())
            .await
            .unwrap()
            .unwrap();
        assert!(!record.reserved);
        assert_eq!(record.last_settlement, Some(outcome));
    }
    check::assert_clean(&check::all(&s.inspect().await), "after settlements");
}

// spec: SETTLE-2
/// Any difference from the stored assignment, the fence or any other field,
/// fails with FenceLost and changes nothing; the exact copy then settles.
pub async fn settlement_of_a_different_assignment_is_fence_lost<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let a = s.resolve_acme("a1").await;
    s.resolve_acme("a2").await;
    let mut variants: Vec<(&str, RouteAssignment)> = Vec::new();
    let mut v = a.clone();
    v.reservation.fence = FenceToken(a.reservation.fence.0 + 1_000);
    variants.push(("fence", v));
    let mut v = a.clone();
    v.reservation.attempt += 1;
    variants.push(("attempt", v));
    let mut v = a.clone();
    v.reservation.scopes.remove(&scope("s-acme-crm"));
    variants.push(("scopes", v));
    let mut v = a.clone();
    Arc::make_mut(&mut v.destination).endpoint = "https://attacker.example:8443".into();
    variants.push(("endpoint", v));
    let mut v = a.clone();
    Arc::make_mut(&mut v.destination).replica = replica("i-acme-crm-r1");
    variants.push(("replica", v));
    let mut v = a.clone();
    Arc::make_mut(&mut v.policy).policy_revision += 1;
    variants.push(("policy revision", v));
    let mut v = a.clone();
    Arc::make_mut(&mut v.policy).credential.revision += 1;
    variants.push(("credential revision", v));
    let mut v = a.clone();
    Arc::make_mut(&mut v.policy).capacity_class = class("large");
    variants.push(("capacity class", v));
    let mut v = a.clone();
    v.identity.tenant = fixture::globex();
    variants.push(("tenant", v));
    let mut v = a.clone();
    v.identity.action = fixture::action("never-resolved");
    variants.push(("unknown action", v));
    let before = s.observe().await;
    for (what, v) in variants {
        for outcome in [Outcome::Completed, Outcome::OutcomeUnknown] {
            assert_err!(s.settle(&v, outcome).await, Error::FenceLost, "{what}");
        }
        s.assert_unchanged(&before, what).await;
    }
    assert!(s.settle(&a, Outcome::Completed).await.unwrap().released);
}

// spec: SETTLE-2, PIN-3
/// After a pinned retry took a new reservation, the old copy is stale:
/// settling it is FenceLost and leaves the new reservation held.
pub async fn stale_copy_after_a_pinned_retry_is_fence_lost<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let old = s.resolve_acme("a1").await;
    assert!(s.settle(&old, Outcome::Completed).await.unwrap().released);
    let new = s
        .resolve("a1", &acme(), &fixture::crm_create())
        .await
        .unwrap()
        .assignment;
    let before = s.observe().await;
    for outcome in [Outcome::Completed, Outcome::Cancelled] {
        assert_err!(s.settle(&old, outcome).await, Error::FenceLost);
    }
    s.assert_unchanged(&before, "stale copy").await;
    assert!(s.settle(&new, Outcome::Completed).await.unwrap().released);
}

// spec: SETTLE-3, ROUTE-7
/// One settlement releases every scope of the reservation, marks the route
/// unreserved with its outcome and decrements the replica, touching
/// nothing else.
pub async fn settlement_releases_every_counter_at_once<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let a = s.resolve_acme("a1").await;
    s.resolve_acme("a2").await;
    s.resolve("m1", &acme(), &fixture::mail_send())
        .await
        .unwrap();
    let before = s.inspect().await;
    s.settle(&a, Outcome::Cancelled).await.unwrap();
    let after = s.inspect().await;
    check::assert_clean(&check::all(&after), "after settlement");
    for (b, n) in before.replicas.iter().zip(&after.replicas) {
        let expected = b.active - u32::from(b.spec.id == a.destination.replica);
        assert_eq!(n.active, expected, "{}", b.spec.id);
    }
    for (b, n) in before.scopes.iter().zip(&after.scopes) {
        let expected = b.in_use - u32::from(a.reservation.scopes.contains(&b.scope.id));
        assert_eq!(n.in_use, expected, "{}", b.scope.id);
    }
    for (b, n) in before.routes.iter().zip(&after.routes) {
        assert_eq!(b.assignment, n.assignment, "assignments never change");
        if b.assignment.identity.action == a.identity.action {
            assert!(!n.reserved);
            assert_eq!(n.last_settlement, Some(Outcome::Cancelled));
        } else {
            assert_eq!(b, n);
        }
    }
}

// spec: SETTLE-4, REC-6
/// Settling again after the release succeeds with `released: false` and
/// changes nothing, whatever the outcome; the route is never deleted.
pub async fn settling_again_changes_nothing<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default().with_circuit(true, 1)).await;
    let a = s.resolve_acme("a1").await;
    s.resolve_acme("a2").await;
    assert!(s.settle(&a, Outcome::Completed).await.unwrap().released);
    let before = s.observe().await;
    for outcome in [
        Outcome::Completed,
        Outcome::OutcomeUnknown,
        Outcome::Cancelled,
        Outcome::LeaseExpired,
    ] {
        assert_eq!(
            s.settle(&a, outcome).await.unwrap(),
            Settled { released: false }
        );
    }
    s.assert_unchanged(&before, "repeated settlement").await;
    let record = s
        .store
        .route_get(acme(), a.identity.action.clone())
        .await
        .unwrap()
        .expect("never deleted");
    assert_eq!(record.last_settlement, Some(Outcome::Completed));
}

// spec: SETTLE-5
/// A completed outcome resets the replica's consecutive unknown count.
pub async fn completed_resets_the_unknown_count<H: Harness>(harness: &H) {
    let s = fixture::open(harness, two_replicas()).await;
    let r0 = replica("i-acme-crm-r0");
    let routes = routes_on_r0(&s, 3).await;
    s.settle(&routes[0], Outcome::OutcomeUnknown).await.unwrap();
    s.settle(&routes[1], Outcome::OutcomeUnknown).await.unwrap();
    assert_eq!(circuit(&s, &r0).await.consecutive_unknown, 2);
    s.settle(&routes[2], Outcome::Completed).await.unwrap();
    assert_eq!(circuit(&s, &r0).await, Circuit::default());
}

// spec: SETTLE-5
/// Consecutive unknown outcomes open the circuit exactly at the threshold.
pub async fn unknown_outcomes_open_the_circuit_at_the_threshold<H: Harness>(harness: &H) {
    let s = fixture::open(harness, two_replicas().with_circuit(true, 3)).await;
    let r0 = replica("i-acme-crm-r0");
    let routes = routes_on_r0(&s, 3).await;
    for (i, a) in routes.iter().enumerate() {
        s.settle(a, Outcome::OutcomeUnknown).await.unwrap();
        let c = circuit(&s, &r0).await;
        assert_eq!(c.consecutive_unknown, i as u32 + 1);
        assert_eq!(c.open, i == 2, "open only at the threshold of 3");
    }
    let other = circuit(&s, &replica("i-acme-crm-r1")).await;
    assert_eq!(other, Circuit::default(), "circuits are per replica");
}

// spec: SETTLE-5
/// Cancelled and lease_expired release capacity but neither reset nor
/// advance the unknown count.
pub async fn cancelled_and_lease_expired_count_neither_way<H: Harness>(harness: &H) {
    let s = fixture::open(harness, two_replicas().with_circuit(true, 2)).await;
    let r0 = replica("i-acme-crm-r0");
    let routes = routes_on_r0(&s, 4).await;
    s.settle(&routes[0], Outcome::OutcomeUnknown).await.unwrap();
    s.settle(&routes[1], Outcome::Cancelled).await.unwrap();
    s.settle(&routes[2], Outcome::LeaseExpired).await.unwrap();
    assert_eq!(
        circuit(&s, &r0).await,
        Circuit {
            open: false,
            consecutive_unknown: 1
        }
    );
    s.settle(&routes[3], Outcome::OutcomeUnknown).await.unwrap();
    assert_eq!(
        circuit(&s, &r0).await,
        Circuit {
            open: true,
            consecutive_unknown: 2
        }
    );
    let snap = s.inspect().await;
    assert!(snap.replicas.iter().all(|r| r.active == 0));
}

// spec: SETTLE-5
/// With circuit policy off, unknown outcomes count nothing and never open
/// the circuit.
pub async fn disabled_circuit_policy_counts_nothing<H: Harness>(harness: &H) {
    let s = fixture::open(harness, two_replicas().with_circuit(false, 1)).await;
    let r0 = replica("i-acme-crm-r0");
    for a in routes_on_r0(&s, 3).await {
        s.settle(&a, Outcome::OutcomeUnknown).await.unwrap();
    }
    assert_eq!(circuit(&s, &r0).await, Circuit::default());
}

// spec: SETTLE-6, SETTLE-5
/// An open circuit stays open through completed outcomes, heartbeats,
/// routing, lease maintenance and the passing of time: there is no
/// cool-down.
pub async fn routing_never_closes_an_open_circuit<H: Harness>(harness: &H) {
    let s = fixture::open(harness, two_replicas().with_circuit(true, 1)).await;
    let r0 = replica("i-acme-crm-r0");
    let routes = routes_on_r0(&s, 2).await;
    s.settle(&routes[0], Outcome::OutcomeUnknown).await.unwrap();
    assert!(circuit(&s, &r0).await.open);
    s.settle(&routes[1], Outcome::Completed).await.unwrap();
    let c = circuit(&s, &r0).await;
    assert!(c.open, "a completed outcome does not close the circuit");
    for hour in 1..=24u64 {
        for k in 0..2 {
            s.store
                .replica_heartbeat(HeartbeatParams {
                    replica: replica(&format!("i-acme-crm-r{k}")),
                    health_seq: hour + 1,
                    lease_ttl_ms: 600_000,
                })
                .await
                .unwrap();
        }
        s.clock.advance_ms(60 * 60 * 1000 / 8);
        let a = s.resolve_acme(&format!("h{hour}")).await;
        assert_ne!(a.destination.replica, r0);
        s.settle(&a, Outcome::Completed).await.unwrap();
        s.store
            .lease_maintain(MaintainParams { max: 100 })
            .await
            .unwrap();
    }
    assert!(circuit(&s, &r0).await.open);
}

// spec: SETTLE-6, AUTH-7
/// The operator's circuit_close, a control-plane act, closes an open
/// circuit and returns its audit entry under the handle's own authority;
/// the replica serves again; the audit log reads back exactly the entries
/// written. Closing a closed circuit is a conflict; bad audit fields and
/// unknown replicas are refused; refusals change nothing and write no
/// entry.
pub async fn operator_closes_a_circuit_with_an_audit_entry<H: Harness>(harness: &H) {
    let s = fixture::open(harness, two_replicas().with_circuit(true, 1)).await;
    let r0 = replica("i-acme-crm-r0");
    let routes = routes_on_r0(&s, 1).await;
    s.settle(&routes[0], Outcome::OutcomeUnknown).await.unwrap();

    let before = s.observe().await;
    let mut bad = vec![
        CircuitCloseParams {
            reason: " ".into(),
            ..close_params("i-acme-crm-r0")
        },
        CircuitCloseParams {
            reason: "line\nbreak".into(),
            ..close_params("i-acme-crm-r0")
        },
        CircuitCloseParams {
            reason: String::new(),
            ..close_params("i-acme-crm-r0")
        },
    ];
    for p in bad.drain(..) {
        assert_err!(s.store.circuit_close(p).await, Error::InvalidRequest { .. });
    }
    assert_err!(
        s.store
            .circuit_close(CircuitCloseParams {
                reason: "r".repeat(TEXT_BYTES_MAX + 1),
                ..close_params("i-acme-crm-r0")
            })
            .await,
        Error::LimitExceeded { max, .. } if max == TEXT_BYTES_MAX as u64
    );
    assert_err!(
        s.store.circuit_close(close_params("nowhere")).await,
        Error::NotFound { .. }
    );
    assert_err!(
        s.store.circuit_close(close_params("i-acme-crm-r1")).await,
        Error::Conflict { .. }
    );
    s.assert_unchanged(&before, "refused circuit closes").await;

    s.clock.advance_ms(1234);
    let entry = s
        .store
        .circuit_close(close_params("i-acme-crm-r0"))
        .await
        .unwrap();
    assert_eq!(entry.replica, r0);
    assert_eq!(entry.operator, H::operator_authority(&s.store));
    assert_eq!(entry.reason, "provider confirmed recovery");
    assert_eq!(entry.action, "circuit_close");
    assert_eq!(entry.at, Timestamp(fixture::CLOCK_START_MS + 1234));
    assert_eq!(circuit(&s, &r0).await, Circuit::default());
    assert_eq!(s.resolve_acme("again").await.destination.replica, r0);
    assert_err!(
        s.store.circuit_close(close_params("i-acme-crm-r0")).await,
        Error::Conflict { .. }
    );

    // The log holds the one entry written, and pages are bounded.
    let page = s
        .store
        .audit_page(AuditQuery {
            after: None,
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(page.entries, vec![entry.clone()]);
    assert_eq!(page.next_after, None);
    let rest = s
        .store
        .audit_page(AuditQuery {
            after: Some(entry.seq),
            limit: 10,
        })
        .await
        .unwrap();
    assert!(rest.entries.is_empty(), "{rest:?}");
    for limit in [0, AUDIT_PAGE_ENTRIES_MAX as u32 + 1] {
        assert!(
            s.store
                .audit_page(AuditQuery { after: None, limit })
                .await
                .is_err(),
            "audit page limit {limit} accepted"
        );
    }
}

// spec: AUTH-7
/// Audit pages read every entry once, in order, across page boundaries.
pub async fn audit_log_pages_read_every_entry_in_order<H: Harness>(harness: &H) {
    let s = fixture::open(harness, two_replicas().with_circuit(true, 1)).await;
    let r0 = replica("i-acme-crm-r0");
    let mut written = Vec::new();
    for round in 0..3 {
        let route = s.resolve_acme(&format!("open-{round}")).await;
        assert_eq!(route.destination.replica, r0);
        s.settle(&route, Outcome::OutcomeUnknown).await.unwrap();
        s.clock.advance_ms(10);
        written.push(
            s.store
                .circuit_close(close_params("i-acme-crm-r0"))
                .await
                .unwrap(),
        );
    }
    let mut read = Vec::new();
    let mut after = None;
    loop {
        let page = s
            .store
            .audit_page(AuditQuery { after, limit: 2 })
            .await
            .unwrap();
        assert!(page.entries.len() <= 2);
        read.extend(page.entries);
        match page.next_after {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(read, written);
    assert!(written.windows(2).all(|w| w[0].seq < w[1].seq));
    // A page that holds exactly the entries left is the last one.
    let all = s
        .store
        .audit_page(AuditQuery {
            after: None,
            limit: written.len() as u32,
        })
        .await
        .unwrap();
    assert_eq!(all.entries, written);
    assert_eq!(all.next_after, None);
}

// spec: SETTLE-1, REC-5
/// Each outcome and each replica state has one stored name, its serialized
/// form, and a stored outcome name reads back as that outcome; any other
/// name is no outcome.
pub async fn outcome_and_state_names_are_their_serialized_names<H: Harness>(_harness: &H) {
    for outcome in [
        Outcome::Completed,
        Outcome::OutcomeUnknown,
        Outcome::Cancelled,
        Outcome::LeaseExpired,
    ] {
        assert_eq!(
            serde_json::to_value(outcome).unwrap(),
            serde_json::json!(outcome.as_str())
        );
        assert_eq!(Outcome::parse(outcome.as_str()), Some(outcome));
    }
    for other in ["", "Completed", "unknown", "expired"] {
        assert_eq!(Outcome::parse(other), None, "{other:?}");
    }
    for state in [
        ReplicaState::Ready,
        ReplicaState::Draining,
        ReplicaState::Offline,
    ] {
        assert_eq!(
            serde_json::to_value(state).unwrap(),
            serde_json::json!(state.as_str())
        );
    }
}
