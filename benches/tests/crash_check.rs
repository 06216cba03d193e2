//! Goal: the end-of-run check of `connreg-crash` passes on a consistent
//! store and reports each kind of violation, and only that kind, on a
//! store or a ledger of answers tampered by hand (SIM-3, ROUTE-3, SETTLE-3).

use std::collections::BTreeMap;

use connreg::contracts::Routing;
use connreg::{
    ActionId, FenceToken, Inspect, ManualClock, MemoryRegistry, Outcome, RegistryConfig,
    RouteAssignment, RouteRequest, SettleParams, StoreSnapshot, Timestamp,
};
use connreg_benches::crash::{ActionRecord, DETAILS_MAX, Verdict, check};
use connreg_benches::qualify::fleet::{self, Admission, FleetPlan, FleetShape};

/// A store and the answers its clients got, as the crash load leaves them.
struct Store {
    snapshot: StoreSnapshot,
    actions: BTreeMap<ActionId, ActionRecord>,
}

impl Store {
    fn route_mut(&mut self, action: &str) -> &mut connreg::RouteRecord {
        self.snapshot
            .routes
            .iter_mut()
            .find(|r| r.assignment.identity.action.as_str() == action)
            .unwrap_or_else(|| panic!("no stored route for {action}"))
    }

    fn record_mut(&mut self, action: &str) -> &mut ActionRecord {
        self.actions
            .get_mut(&ActionId::new(action).unwrap())
            .unwrap_or_else(|| panic!("no record for {action}"))
    }

    /// A replica of the fleet other than `replica`.
    fn other_replica(&self, replica: &connreg::ReplicaId) -> connreg::ReplicaId {
        let mut ids = self.snapshot.replicas.iter().map(|r| &r.spec.id);
        ids.find(|id| *id != replica)
            .expect("a second replica")
            .clone()
    }

    fn check(&self) -> Verdict {
        check(&self.actions, &self.snapshot)
    }
}

/// On an in-memory store with per-tenant and per-binding admission scopes:
///
/// - `settled`: answered, settlement acknowledged, released;
/// - `held`: answered, settlement never acknowledged, still reserved;
/// - `retried`: answered twice the same route (a retried resolve), still
///   reserved;
/// - `unanswered`: stored, but its answer never reached the client (commit
///   unknown), abandoned;
/// - `not-stored`: never answered and never stored.
async fn store() -> Store {
    let shape = FleetShape {
        tenants: 2,
        capabilities: 1,
        bindings_per_tenant_capability: 1,
        instances_per_tenant: 1,
        replicas_per_instance: 2,
        regions: vec!["eu-west".into()],
        zones_per_region: 1,
        replica_capacity: 8,
        lease_ttl_ms: 60_000,
        admission: Admission {
            tenant_limit: Some(10),
            binding_limit: Some(10),
        },
    };
    let plan = FleetPlan::new(&shape);
    let registry = MemoryRegistry::new(
        ManualClock::new(Timestamp(1_000_000)),
        RegistryConfig::default(),
    )
    .unwrap();
    fleet::build(&registry, &plan).await.unwrap();
    let resolve = |action: &str| {
        let request = RouteRequest {
            action: ActionId::new(action).unwrap(),
            tenant: Some(plan.tenants[0].clone()),
            capability: plan.capabilities[0].clone(),
            topology: plan.topology(0, 0),
        };
        let registry = &registry;
        async move { registry.route_resolve(request).await.unwrap().assignment }
    };
    let mut actions = BTreeMap::new();
    let mut answered = |action: &str, answers: Vec<RouteAssignment>, settle_acked: bool| {
        let record = ActionRecord {
            answers,
            settle_acked,
            abandoned: false,
        };
        actions.insert(ActionId::new(action).unwrap(), record);
    };

    let settled = resolve("settled").await;
    registry
        .route_settle(SettleParams {
            assignment: settled.clone(),
            outcome: Outcome::Completed,
        })
        .await
        .unwrap();
    answered("settled", vec![settled], true);
    answered("held", vec![resolve("held").await], false);
    let retried = vec![resolve("retried").await, resolve("retried").await];
    answered("retried", retried, false);
    resolve("unanswered").await;
    for action in ["unanswered", "not-stored"] {
        let record = ActionRecord {
            abandoned: true,
            ..ActionRecord::default()
        };
        actions.insert(ActionId::new(action).unwrap(), record);
    }
    Store {
        snapshot: registry.inspect().await.unwrap(),
        actions,
    }
}

/// The verdict's counts by kind, to compare whole.
#[derive(Debug, Default, PartialEq, Eq)]
struct Found {
    lost: u64,
    duplicated: u64,
    counter_mismatches: u64,
    held_after_settle: u64,
}

fn found(verdict: &Verdict) -> Found {
    Found {
        lost: verdict.lost,
        duplicated: verdict.duplicated,
        counter_mismatches: verdict.counter_mismatches,
        held_after_settle: verdict.held_after_settle,
    }
}

/// Asserts that `store` has exactly the violations in `expected`, each one
/// described.
fn assert_found(store: &Store, expected: Found) {
    let verdict = store.check();
    assert_eq!(found(&verdict), expected, "{:?}", verdict.details);
    assert_eq!(verdict.total() as usize, verdict.details.len());
}

#[tokio::test]
async fn a_consistent_store_passes() {
    // spec: SIM-3
    let s = store().await;
    assert!(s.snapshot.routes.iter().any(|r| r.reserved));
    assert!(s.snapshot.scopes.iter().any(|u| u.in_use > 0));
    let verdict = s.check();
    assert_eq!(verdict.total(), 0, "{:?}", verdict.details);
    assert!(verdict.details.is_empty());
}

#[tokio::test]
async fn a_replica_active_count_one_above_its_reservations_is_a_counter_mismatch() {
    // spec: SIM-3
    let mut s = store().await;
    let replica = s.snapshot.replicas.iter_mut().find(|r| r.active > 0);
    replica.expect("a busy replica").active += 1;
    assert_found(
        &s,
        Found {
            counter_mismatches: 1,
            ..Found::default()
        },
    );
}

#[tokio::test]
async fn a_replica_active_count_one_below_its_reservations_is_a_counter_mismatch() {
    // spec: SIM-3
    let mut s = store().await;
    let replica = s.snapshot.replicas.iter_mut().find(|r| r.active > 0);
    replica.expect("a busy replica").active -= 1;
    assert_found(
        &s,
        Found {
            counter_mismatches: 1,
            ..Found::default()
        },
    );
}

#[tokio::test]
async fn an_idle_replica_counting_one_reservation_is_a_counter_mismatch() {
    // spec: SIM-3
    let mut s = store().await;
    let replica = s.snapshot.replicas.iter_mut().find(|r| r.active == 0);
    replica.expect("an idle replica").active = 1;
    assert_found(
        &s,
        Found {
            counter_mismatches: 1,
            ..Found::default()
        },
    );
}

#[tokio::test]
async fn an_admission_counter_one_above_its_reservations_is_a_counter_mismatch() {
    // spec: SETTLE-3
    let mut s = store().await;
    let usage = s.snapshot.scopes.iter_mut().find(|u| u.in_use > 0);
    usage.expect("a busy scope").in_use += 1;
    assert_found(
        &s,
        Found {
            counter_mismatches: 1,
            ..Found::default()
        },
    );
}

#[tokio::test]
async fn an_admission_counter_one_below_its_reservations_is_a_counter_mismatch() {
    // spec: SETTLE-3
    let mut s = store().await;
    let usage = s.snapshot.scopes.iter_mut().find(|u| u.in_use > 0);
    usage.expect("a busy scope").in_use -= 1;
    assert_found(
        &s,
        Found {
            counter_mismatches: 1,
            ..Found::default()
        },
    );
}

#[tokio::test]
async fn a_released_route_still_counted_is_a_mismatch_on_its_replica_and_every_scope() {
    // spec: SETTLE-3
    let mut s = store().await;
    let route = s.route_mut("held");
    route.reserved = false;
    let scopes = route.assignment.reservation.scopes.len() as u64;
    assert!(scopes >= 2, "the fleet has tenant and binding scopes");
    assert_found(
        &s,
        Found {
            counter_mismatches: 1 + scopes,
            ..Found::default()
        },
    );
}

#[tokio::test]
async fn a_second_stored_route_for_an_answered_action_is_duplicated() {
    // spec: ROUTE-3
    let mut s = store().await;
    let again = s.route_mut("settled").clone();
    s.snapshot.routes.push(again);
    assert_found(
        &s,
        Found {
            duplicated: 1,
            ..Found::default()
        },
    );
}

#[tokio::test]
async fn a_second_stored_route_for_an_unanswered_action_is_duplicated() {
    // spec: ROUTE-3
    let mut s = store().await;
    // Released, so the counters still agree and only the duplicate shows.
    let mut again = s.route_mut("unanswered").clone();
    again.reserved = false;
    s.snapshot.routes.push(again);
    assert_found(
        &s,
        Found {
            duplicated: 1,
            ..Found::default()
        },
    );
}

#[tokio::test]
async fn two_different_routes_answered_for_one_action_are_duplicated() {
    // spec: ROUTE-3
    let mut s = store().await;
    let current = s
        .route_mut("retried")
        .assignment
        .destination
        .replica
        .clone();
    let other = s.other_replica(&current);
    std::sync::Arc::make_mut(&mut s.record_mut("retried").answers[0].destination).replica = other;
    assert_found(
        &s,
        Found {
            duplicated: 1,
            ..Found::default()
        },
    );
}

#[tokio::test]
async fn an_answered_action_without_a_stored_route_is_lost() {
    // spec: ROUTE-3
    let mut s = store().await;
    s.snapshot
        .routes
        .retain(|r| r.assignment.identity.action.as_str() != "settled");
    assert_found(
        &s,
        Found {
            lost: 1,
            ..Found::default()
        },
    );
}

#[tokio::test]
async fn an_answer_with_another_fence_than_the_stored_route_is_lost() {
    // spec: SIM-3
    let mut s = store().await;
    let fence = &mut s.record_mut("held").answers[0].reservation.fence;
    *fence = FenceToken(fence.0 + 1);
    assert_found(
        &s,
        Found {
            lost: 1,
            ..Found::default()
        },
    );
}

#[tokio::test]
async fn a_stored_route_moved_to_another_replica_than_the_answer_is_lost() {
    // spec: SIM-3
    let mut s = store().await;
    let current = s
        .route_mut("settled")
        .assignment
        .destination
        .replica
        .clone();
    let other = s.other_replica(&current);
    std::sync::Arc::make_mut(&mut s.route_mut("settled").assignment.destination).replica = other;
    assert_found(
        &s,
        Found {
            lost: 1,
            ..Found::default()
        },
    );
}

#[tokio::test]
async fn a_reservation_held_after_an_acknowledged_settle_is_reported() {
    // spec: SETTLE-3
    let mut s = store().await;
    // The counters agree with the held reservation, so only the settlement
    // rule can see it.
    let route = s.route_mut("settled");
    route.reserved = true;
    let replica = route.assignment.destination.replica.clone();
    let scopes = route.assignment.reservation.scopes.clone();
    for r in &mut s.snapshot.replicas {
        if r.spec.id == replica {
            r.active += 1;
        }
    }
    for usage in &mut s.snapshot.scopes {
        if scopes.contains(&usage.scope.id) {
            usage.in_use += 1;
        }
    }
    assert_found(
        &s,
        Found {
            held_after_settle: 1,
            ..Found::default()
        },
    );
}

#[tokio::test]
async fn a_reservation_held_after_an_unacknowledged_settle_is_not_a_violation() {
    // spec: SETTLE-3
    // A settlement whose answer was lost may or may not have committed.
    let mut s = store().await;
    assert!(s.route_mut("held").reserved);
    s.record_mut("held").abandoned = true;
    assert_found(&s, Found::default());
}

#[tokio::test]
async fn violations_past_the_detail_limit_are_counted_but_not_described() {
    // spec: SIM-3
    let mut s = store().await;
    let extra = DETAILS_MAX + 5;
    for n in 0..extra {
        let mut answer = s.route_mut("held").assignment.clone();
        answer.identity.action = ActionId::new(format!("phantom-{n}")).unwrap();
        let record = ActionRecord {
            answers: vec![answer],
            ..ActionRecord::default()
        };
        s.actions
            .insert(record.answers[0].identity.action.clone(), record);
    }
    let verdict = s.check();
    assert_eq!(verdict.lost, extra as u64);
    assert_eq!(verdict.total(), extra as u64);
    assert_eq!(verdict.details.len(), DETAILS_MAX);
}
