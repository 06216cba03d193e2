//! Goal: the end-of-run checker of `connreg-qualify` finds broken
//! accounting, changed routes and phantom routes in a real store's
//! inspection, and finds nothing in an untouched one (SIM-6, SIM-3).

use connreg::contracts::{Routing, Status};
use connreg::{
    ActionId, Inspect, ManualClock, MemoryRegistry, RegistryConfig, RouteRequest, StatusReport,
    StoreSnapshot, Timestamp,
};
use connreg_benches::qualify::check::{Expect, Tracked, ViolationKind, Violations, check_store};
use connreg_benches::qualify::fleet::{self, Admission, FleetPlan, FleetShape};

struct Store {
    snapshot: StoreSnapshot,
    status: StatusReport,
    revision: connreg::Revision,
    tracked: Vec<Tracked>,
}

/// A small fleet with three routed actions, one of them settled.
async fn store() -> Store {
    let shape = FleetShape {
        tenants: 2,
        capabilities: 1,
        bindings_per_tenant_capability: 1,
        instances_per_tenant: 1,
        replicas_per_instance: 2,
        regions: vec!["eu-west".into()],
        zones_per_region: 1,
        replica_capacity: 4,
        lease_ttl_ms: 60_000,
        admission: Admission {
            tenant_limit: Some(10),
            binding_limit: None,
        },
    };
    let plan = FleetPlan::new(&shape);
    let registry = MemoryRegistry::new(
        ManualClock::new(Timestamp(1_000_000)),
        RegistryConfig::default(),
    )
    .unwrap();
    let revision = fleet::build(&registry, &plan).await.unwrap();
    let mut tracked = Vec::new();
    for n in 0..3 {
        let action = ActionId::new(format!("a{n}")).unwrap();
        let resolved = registry
            .route_resolve(RouteRequest {
                action: action.clone(),
                tenant: Some(plan.tenants[0].clone()),
                capability: plan.capabilities[0].clone(),
                topology: plan.topology(0, 0),
            })
            .await
            .unwrap();
        tracked.push(Tracked {
            action,
            expect: Expect::Reserved(resolved.assignment),
        });
    }
    let Expect::Reserved(first) = tracked[0].expect.clone() else {
        unreachable!()
    };
    registry
        .route_settle(connreg::SettleParams {
            assignment: first.clone(),
            outcome: connreg::Outcome::Cancelled,
        })
        .await
        .unwrap();
    tracked[0].expect = Expect::Released(first, connreg::Outcome::Cancelled);
    Store {
        snapshot: registry.inspect().await.unwrap(),
        status: Status::status(&registry).await.unwrap(),
        revision,
        tracked,
    }
}

fn check(s: &Store) -> Violations {
    let mut v = Violations::default();
    check_store(&s.snapshot, &s.status, s.revision, "", &s.tracked, &mut v);
    v
}

fn count(v: &Violations, kind: ViolationKind) -> u64 {
    v.counts().get(&kind).copied().unwrap_or(0)
}

#[tokio::test]
async fn an_untouched_store_has_no_violations() {
    // spec: SIM-6
    let s = store().await;
    let v = check(&s);
    assert_eq!(v.total(), 0, "{:?}", v.details());
}

#[tokio::test]
async fn a_replica_count_off_by_one_is_a_violation() {
    // spec: SIM-6
    let mut s = store().await;
    let replica = s
        .snapshot
        .replicas
        .iter_mut()
        .find(|r| r.active > 0)
        .expect("a busy replica");
    replica.active += 1;
    assert_eq!(count(&check(&s), ViolationKind::ReplicaAccounting), 1);
}

#[tokio::test]
async fn a_scope_over_its_limit_is_a_violation() {
    // spec: SIM-6
    let mut s = store().await;
    let scope = s.snapshot.scopes.iter_mut().find(|u| u.in_use > 0).unwrap();
    scope.scope.limit = scope.in_use - 1;
    assert_eq!(count(&check(&s), ViolationKind::ScopeOverLimit), 1);
}

#[tokio::test]
async fn a_route_moved_to_another_replica_is_a_violation() {
    // spec: SIM-6
    let mut s = store().await;
    let other = s.snapshot.replicas[1].spec.id.clone();
    let route = &mut s.snapshot.routes[2];
    std::sync::Arc::make_mut(&mut route.assignment.destination).replica = other;
    let v = check(&s);
    assert_eq!(
        count(&v, ViolationKind::RouteChanged),
        1,
        "{:?}",
        v.details()
    );
}

#[tokio::test]
async fn a_released_route_still_reserved_is_a_violation() {
    // spec: SIM-6
    let mut s = store().await;
    s.snapshot.routes[0].reserved = true;
    let v = check(&s);
    assert_eq!(
        count(&v, ViolationKind::ReservationState),
        1,
        "{:?}",
        v.details()
    );
}

#[tokio::test]
async fn a_route_nobody_asked_for_and_a_duplicate_route_are_violations() {
    // spec: SIM-6
    let mut s = store().await;
    s.tracked.pop();
    let again = s.snapshot.routes[1].clone();
    s.snapshot.routes.push(again);
    let v = check(&s);
    assert_eq!(
        count(&v, ViolationKind::RouteWithoutResolve),
        1,
        "{:?}",
        v.details()
    );
    assert_eq!(
        count(&v, ViolationKind::OneRoutePerAction),
        1,
        "{:?}",
        v.details()
    );
}

#[tokio::test]
async fn a_moved_revision_is_a_violation() {
    // spec: SIM-6
    let mut s = store().await;
    s.snapshot.revision.0 += 1;
    assert_eq!(count(&check(&s), ViolationKind::RevisionMoved), 1);
}

#[tokio::test]
async fn a_fence_on_two_routes_is_a_violation() {
    // spec: SIM-6, ROUTE-7
    let mut s = store().await;
    let fence = s.snapshot.routes[1].assignment.reservation.fence;
    s.snapshot.routes[2].assignment.reservation.fence = fence;
    let v = check(&s);
    assert_eq!(
        count(&v, ViolationKind::FenceReused),
        1,
        "{:?}",
        v.details()
    );
}

#[tokio::test]
async fn routes_of_another_prefix_are_counted_as_foreign_not_unasked() {
    // spec: SIM-6
    let s = store().await;
    let mut v = Violations::default();
    // The store's actions are `a0`..`a2`; with prefix `q-` none is the run's,
    // and the run resolved nothing: they are another fleet's routes.
    let checked = check_store(&s.snapshot, &s.status, s.revision, "q-", &[], &mut v);
    assert_eq!(checked.foreign_routes, 3);
    assert_eq!(v.total(), 0, "{:?}", v.details());
}
