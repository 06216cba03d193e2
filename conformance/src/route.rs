//! Goal: a new action gets exactly one route, to an eligible replica chosen
//! in the documented order, reserved in one step; an assigned action gets
//! the same route back or a conflict (ROUTE-1..ROUTE-11).

use std::collections::BTreeSet;

use connreg::contracts::{CatalogRead, ReplicaLifecycle, Routing, Status};
use connreg::ordering::route_hash;
use connreg::*;

use crate::fixture::{
    self, FleetOptions, Setup, acme, audit_export, class, crm_create, crm_read, globex, region,
    replica, stranger, zone,
};
use crate::support::assert_err;
use crate::{Harness, check};

fn two_replicas() -> FleetOptions {
    FleetOptions {
        replicas_per_instance: 2,
        ..FleetOptions::default()
    }
}

fn no_preference(fleet: &fixture::Fleet) -> TopologyPreference {
    TopologyPreference {
        preferred_region: None,
        preferred_zone: None,
        ..fleet.topology()
    }
}

async fn resolve_with<S: Routing>(
    s: &Setup<S>,
    action_id: &str,
    topology: TopologyPreference,
) -> Result<Resolved> {
    let mut request = s.fleet.request(action_id, &acme(), &crm_create());
    request.topology = topology;
    s.store.route_resolve(request).await
}

// spec: ROUTE-1
/// A route request holds only action, tenant, capability and the
/// deployment's topology: it cannot carry an instance, replica, endpoint,
/// credential or peer key, not even smuggled in as extra fields.
pub async fn route_request_cannot_name_a_target<H: Harness>(_harness: &H) {
    let fleet = fixture::Fleet::new(FleetOptions::default());
    let request = fleet.request("a1", &acme(), &crm_create());
    let value = serde_json::to_value(&request).unwrap();
    let keys: BTreeSet<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        BTreeSet::from(["action", "tenant", "capability", "topology"])
    );
    let topology_keys: BTreeSet<&str> = value["topology"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        topology_keys,
        BTreeSet::from([
            "preferred_region",
            "preferred_zone",
            "capacity_class",
            "cross_region"
        ])
    );
    for smuggled in [
        "instance",
        "replica",
        "endpoint",
        "credential",
        "peer_key",
        "peer_identity",
        "binding",
    ] {
        let mut v = value.clone();
        v[smuggled] = serde_json::json!("i-acme-crm-r1");
        assert!(
            serde_json::from_value::<RouteRequest>(v).is_err(),
            "a request with {smuggled} must not parse"
        );
        let mut v = value.clone();
        v["topology"][smuggled] = serde_json::json!("i-acme-crm-r1");
        assert!(
            serde_json::from_value::<RouteRequest>(v).is_err(),
            "a topology with {smuggled} must not parse"
        );
    }
}

// spec: ROUTE-2
/// A request without a tenant is refused first: even with an incoherent
/// topology and an action that is already assigned, the answer is the
/// missing tenant, and nothing changes.
pub async fn request_without_tenant_is_rejected_before_anything_else<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    s.resolve_acme("a1").await;
    let before = s.observe().await;
    for action_id in ["a1", "a-new"] {
        let mut request = s.fleet.request(action_id, &acme(), &crm_create());
        request.tenant = None;
        request.topology.cross_region = CrossRegion::Forbidden;
        request.topology.preferred_region = None;
        assert_err!(
            s.store.route_resolve(request).await,
            Error::InvalidRequest {
                what: "route request",
                ..
            }
        );
    }
    s.assert_unchanged(&before, "tenantless requests").await;
}

// spec: ROUTE-3, ROUTE-4, PIN-2
/// Resolving an assigned action again returns the same assignment, as
/// Existing, and reserves nothing more.
pub async fn repeated_resolve_returns_the_same_assignment<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let first = s.resolve("a1", &acme(), &crm_create()).await.unwrap();
    assert_eq!(first.kind, ResolveKind::Created);
    let before = s.observe().await;
    for _ in 0..3 {
        let again = s.resolve("a1", &acme(), &crm_create()).await.unwrap();
        assert_eq!(again.kind, ResolveKind::Existing);
        assert_eq!(again.assignment, first.assignment);
    }
    s.assert_unchanged(&before, "repeated resolves").await;
}

/// Panics if the error's text or debug form names anything of acme's route.
fn assert_reveals_nothing(e: &Error, a: &RouteAssignment) {
    let texts = [e.to_string(), format!("{e:?}")];
    let secrets = [
        a.identity.tenant.to_string(),
        a.identity.capability.to_string(),
        a.destination.replica.to_string(),
        a.destination.instance.to_string(),
        a.destination.binding.to_string(),
        a.destination.endpoint.to_string(),
        a.destination.peer_identity.to_string(),
        a.policy.credential.reference.to_string(),
    ];
    for text in &texts {
        for secret in &secrets {
            assert!(
                !text.contains(secret.as_str()),
                "{text:?} reveals {secret:?}"
            );
        }
    }
}

// spec: ROUTE-4
/// Another tenant resolving an assigned action gets Conflict that reveals
/// nothing of the assignment, and nothing changes.
pub async fn resolve_with_other_tenant_returns_conflict<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let a = s.resolve_acme("a1").await;
    let before = s.observe().await;
    for tenant in [globex(), stranger()] {
        let e = s
            .resolve("a1", &tenant, &crm_create())
            .await
            .expect_err("another tenant's action");
        assert!(matches!(e, Error::Conflict { .. }), "{e:?}");
        assert_reveals_nothing(&e, &a);
    }
    s.assert_unchanged(&before, "cross-tenant resolve").await;
}

// spec: ROUTE-4
/// The same tenant asking for another capability on an assigned action
/// gets Conflict, and nothing changes.
pub async fn resolve_with_other_capability_returns_conflict<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let a = s.resolve_acme("a1").await;
    let before = s.observe().await;
    let e = s
        .resolve("a1", &acme(), &crm_read())
        .await
        .expect_err("another capability");
    assert!(matches!(e, Error::Conflict { .. }), "{e:?}");
    s.assert_unchanged(&before, "other capability").await;
    // The settled route conflicts the same way.
    s.settle(&a, Outcome::Completed).await.unwrap();
    assert_err!(
        s.resolve("a1", &globex(), &crm_create()).await,
        Error::Conflict { .. }
    );
}

// spec: ROUTE-5, ROUTE-9
/// A new action needs an enabled binding of its tenant for its capability:
/// otherwise NoEligibleBinding, and nothing changes. With a binding but no
/// eligible replica the answer is NoCapacity instead.
pub async fn new_action_needs_an_enabled_binding<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let before = s.observe().await;
    assert_err!(
        s.resolve("a1", &stranger(), &crm_create()).await,
        Error::NoEligibleBinding
    );
    assert_err!(
        s.resolve("a1", &acme(), &audit_export()).await,
        Error::NoEligibleBinding
    );
    assert_err!(
        s.resolve("a1", &globex(), &crm_read()).await,
        Error::NoEligibleBinding
    );
    s.assert_unchanged(&before, "no binding").await;

    let mut b = s.fleet.binding("b-acme-crm-create");
    b.enabled = false;
    s.publish(vec![Change::UpsertBinding(b.clone())])
        .await
        .unwrap();
    let before = s.observe().await;
    assert_err!(
        s.resolve("a1", &acme(), &crm_create()).await,
        Error::NoEligibleBinding
    );
    s.assert_unchanged(&before, "disabled binding").await;

    b.enabled = true;
    s.publish(vec![Change::UpsertBinding(b)]).await.unwrap();
    for k in 0..4 {
        s.store
            .replica_drain(replica(&format!("i-acme-crm-r{k}")))
            .await
            .unwrap();
    }
    assert_err!(
        s.resolve("a1", &acme(), &crm_create()).await,
        Error::NoCapacity
    );
}

// spec: ROUTE-5, PIN-1
/// A new route records the catalog revision it was decided on.
pub async fn new_route_records_the_revision_it_was_decided_on<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    assert_eq!(
        s.resolve_acme("a1").await.policy.catalog_revision,
        Revision(1)
    );
    s.publish(vec![Change::UpsertType(s.fleet.connector_type("ty-crm"))])
        .await
        .unwrap();
    assert_eq!(
        s.resolve_acme("a2").await.policy.catalog_revision,
        Revision(2)
    );
}

// spec: ROUTE-6, ROUTE-9
/// When every eligible replica is full the answer is NoCapacity, and the
/// refused resolve changes nothing.
pub async fn full_fleet_answers_no_capacity<H: Harness>(harness: &H) {
    let options = FleetOptions {
        replica_capacity: 1,
        ..FleetOptions::default()
    };
    let s = fixture::open(harness, options).await;
    let mut used = BTreeSet::new();
    for i in 0..4 {
        used.insert(
            s.resolve_acme(&format!("a{i}"))
                .await
                .destination
                .replica
                .clone(),
        );
    }
    assert_eq!(used.len(), 4, "one route per replica of capacity 1");
    let before = s.observe().await;
    assert_err!(
        s.resolve("a4", &acme(), &crm_create()).await,
        Error::NoCapacity
    );
    s.assert_unchanged(&before, "full fleet").await;
}

// spec: ROUTE-7, REC-8
/// One resolve reserves every scope of the binding, one unit of the chosen
/// replica, a fence no other route holds, and inserts the complete,
/// reserved route.
pub async fn resolve_reserves_scopes_replica_and_fence_together<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    s.resolve("m1", &acme(), &fixture::mail_send())
        .await
        .unwrap();
    s.resolve("g1", &globex(), &crm_create()).await.unwrap();
    let before = s.inspect().await;
    let a = s.resolve_acme("a1").await;
    let after = s.inspect().await;
    check::assert_clean(&check::all(&after), "after one resolve");
    assert_eq!(after.routes.len(), before.routes.len() + 1);
    let route = after
        .routes
        .iter()
        .find(|r| r.assignment.identity.action == a.identity.action)
        .expect("the route is stored");
    assert_eq!(route.assignment, a);
    assert!(route.reserved);
    assert_eq!(route.last_settlement, None);
    assert_eq!(a.reservation.attempt, 1);
    assert!(
        before
            .routes
            .iter()
            .all(|r| r.assignment.reservation.fence != a.reservation.fence),
        "the fence is fresh"
    );
    for (b, n) in before.replicas.iter().zip(&after.replicas) {
        let expected = b.active + u32::from(b.spec.id == a.destination.replica);
        assert_eq!(n.active, expected, "{}", b.spec.id);
    }
    for (b, n) in before.scopes.iter().zip(&after.scopes) {
        let expected = b.in_use + u32::from(a.reservation.scopes.contains(&b.scope.id));
        assert_eq!(n.in_use, expected, "{}", b.scope.id);
    }
}

// spec: ROUTE-8
/// By the time a resolve returns, its route is committed: another handle
/// reads it back, reserved, and status counts it.
pub async fn resolved_route_is_committed_before_it_is_returned<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let a = s.resolve_acme("a1").await;
    let other = s.store.clone();
    let record = other
        .route_get(acme(), a.identity.action.clone())
        .await
        .unwrap()
        .expect("committed");
    assert_eq!(record.assignment, a);
    assert!(record.reserved);
    assert_eq!(other.status().await.unwrap().active_assignments, 1);
    let r = other
        .replica_get(a.destination.replica.clone())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.active, 1);
}

// spec: ROUTE-9, LEASE-1
/// A draining replica takes no new routes.
pub async fn draining_replica_takes_no_new_routes<H: Harness>(harness: &H) {
    let s = fixture::open(harness, two_replicas()).await;
    assert_eq!(
        s.resolve_acme("a0").await.destination.replica,
        replica("i-acme-crm-r0")
    );
    s.store
        .replica_drain(replica("i-acme-crm-r0"))
        .await
        .unwrap();
    for i in 1..4 {
        assert_eq!(
            s.resolve_acme(&format!("a{i}")).await.destination.replica,
            replica("i-acme-crm-r1")
        );
    }
}

// spec: ROUTE-9, LEASE-4
/// A replica whose lease has run out takes no new routes, even before
/// lease maintenance marks it offline.
pub async fn replica_with_expired_lease_takes_no_new_routes<H: Harness>(harness: &H) {
    let s = fixture::open(harness, two_replicas()).await;
    s.store
        .replica_heartbeat(HeartbeatParams {
            replica: replica("i-acme-crm-r1"),
            health_seq: 2,
            lease_ttl_ms: 120_000,
        })
        .await
        .unwrap();
    s.clock.advance_ms(s.fleet.options.lease_ttl_ms - 1);
    assert_eq!(
        s.resolve_acme("a0").await.destination.replica,
        replica("i-acme-crm-r0"),
        "one millisecond before expiry the lease holds"
    );
    s.clock.advance_ms(1);
    assert_eq!(
        s.resolve_acme("a1").await.destination.replica,
        replica("i-acme-crm-r1")
    );
    s.clock.advance_ms(120_000);
    assert_err!(
        s.resolve("a2", &acme(), &crm_create()).await,
        Error::NoCapacity
    );
}

// spec: ROUTE-9
/// A replica at capacity takes no new routes.
pub async fn full_replica_takes_no_new_routes<H: Harness>(harness: &H) {
    let options = FleetOptions {
        replica_capacity: 1,
        ..two_replicas()
    };
    let s = fixture::open(harness, options).await;
    assert_eq!(
        s.resolve_acme("a0").await.destination.replica,
        replica("i-acme-crm-r0")
    );
    assert_eq!(
        s.resolve_acme("a1").await.destination.replica,
        replica("i-acme-crm-r1")
    );
    assert_err!(
        s.resolve("a2", &acme(), &crm_create()).await,
        Error::NoCapacity
    );
}

// spec: ROUTE-9, SETTLE-5
/// A replica whose circuit is open takes no new routes.
pub async fn replica_with_open_circuit_takes_no_new_routes<H: Harness>(harness: &H) {
    let s = fixture::open(harness, two_replicas().with_circuit(true, 1)).await;
    let a = s.resolve_acme("a0").await;
    assert_eq!(a.destination.replica, replica("i-acme-crm-r0"));
    s.settle(&a, Outcome::OutcomeUnknown).await.unwrap();
    for i in 1..4 {
        assert_eq!(
            s.resolve_acme(&format!("a{i}")).await.destination.replica,
            replica("i-acme-crm-r1")
        );
    }
}

fn large_replica(fleet: &fixture::Fleet) -> ReplicaSpec {
    let mut spec = fleet.replica_spec("i-acme-crm", 0);
    spec.id = replica("i-acme-crm-large");
    spec.endpoint = "https://i-acme-crm-large.connectors.internal:8443".into();
    spec.peer_identity = "spiffe://fleet/i-acme-crm-large".into();
    spec.capacity_class = class("large");
    spec.capacity = 1;
    spec
}

// spec: ROUTE-9, ROUTE-11
/// Capacity class is a filter: replicas of another class are never chosen,
/// even when they would rank first, and when the required class is full
/// the answer is NoCapacity although other classes have room.
pub async fn replica_of_another_capacity_class_is_filtered_out<H: Harness>(harness: &H) {
    let s = fixture::open(harness, two_replicas()).await;
    s.register(large_replica(&s.fleet), 1).await;
    for i in 0..3 {
        assert_ne!(
            s.resolve_acme(&format!("a{i}")).await.destination.replica,
            replica("i-acme-crm-large")
        );
    }
    let large = TopologyPreference {
        capacity_class: class("large"),
        ..s.fleet.topology()
    };
    let r = resolve_with(&s, "big-1", large.clone()).await.unwrap();
    assert_eq!(
        r.assignment.destination.replica,
        replica("i-acme-crm-large")
    );
    assert_eq!(r.assignment.policy.capacity_class, class("large"));
    assert_err!(resolve_with(&s, "big-2", large).await, Error::NoCapacity);
}

// spec: ROUTE-9, ROUTE-11
/// With cross-region forbidden, only the preferred region is eligible:
/// when it is full the answer is NoCapacity, not another region.
pub async fn cross_region_forbidden_keeps_routes_in_the_preferred_region<H: Harness>(harness: &H) {
    let options = FleetOptions {
        replica_capacity: 1,
        ..two_replicas()
    };
    let s = fixture::open(harness, options).await;
    let forbidden = TopologyPreference {
        cross_region: CrossRegion::Forbidden,
        ..s.fleet.topology()
    };
    let a = resolve_with(&s, "a0", forbidden.clone()).await.unwrap();
    assert_eq!(a.assignment.destination.region, region("eu-west"));
    assert_err!(resolve_with(&s, "a1", forbidden).await, Error::NoCapacity);
    let us_only = TopologyPreference {
        preferred_region: Some(region("us-east")),
        preferred_zone: None,
        cross_region: CrossRegion::Forbidden,
        ..s.fleet.topology()
    };
    let b = resolve_with(&s, "a2", us_only).await.unwrap();
    assert_eq!(b.assignment.destination.region, region("us-east"));
}

// spec: ROUTE-9, ROUTE-11
/// With cross-region allowed (the default), a full preferred region spills
/// over to another region.
pub async fn cross_region_allowed_spills_to_other_regions<H: Harness>(harness: &H) {
    let options = FleetOptions {
        replica_capacity: 1,
        ..two_replicas()
    };
    let s = fixture::open(harness, options).await;
    assert_eq!(
        s.resolve_acme("a0").await.destination.region,
        region("eu-west")
    );
    assert_eq!(
        s.resolve_acme("a1").await.destination.region,
        region("us-east")
    );
}

// spec: ROUTE-9
/// A replica of the instance that runs another version than the instance's
/// is never chosen, even when it would rank first.
pub async fn replica_running_another_version_is_filtered_out<H: Harness>(harness: &H) {
    let s = fixture::open(harness, two_replicas()).await;
    let mut other = s.fleet.replica_spec("i-acme-crm", 0);
    other.id = replica("i-acme-crm-v2");
    other.version = fixture::version("v-crm-2");
    s.register(other, 1).await;
    s.store
        .replica_drain(replica("i-acme-crm-r0"))
        .await
        .unwrap();
    for i in 0..3 {
        assert_eq!(
            s.resolve_acme(&format!("a{i}")).await.destination.replica,
            replica("i-acme-crm-r1")
        );
    }
}

// spec: ROUTE-6, ROUTE-9, LEASE-1
/// A replica registered after a resolve found none takes the next route,
/// with no new catalog revision between the two resolves.
pub async fn replica_registered_after_a_refused_resolve_takes_the_next_route<H: Harness>(
    harness: &H,
) {
    let options = FleetOptions {
        register_replicas: false,
        ..FleetOptions::default()
    };
    let s = fixture::open(harness, options).await;
    assert_err!(
        s.resolve("a0", &acme(), &crm_create()).await,
        Error::NoCapacity
    );
    s.register(s.fleet.replica_spec("i-acme-crm", 0), 1).await;
    let route = s.resolve_acme("a1").await;
    assert_eq!(route.destination.replica, replica("i-acme-crm-r0"));
    assert_eq!(route.policy.catalog_revision, Revision(1));
}

// spec: ROUTE-10, REC-4
/// The binding with the lower priority number wins, before any topology
/// preference.
pub async fn lower_binding_priority_wins<H: Harness>(harness: &H) {
    let options = FleetOptions {
        backup_binding: true,
        ..FleetOptions::default()
    };
    let s = fixture::open(harness, options).await;
    assert_eq!(
        s.resolve_acme("a0").await.destination.instance,
        fixture::instance("i-acme-crm")
    );
    let mut backup = s.fleet.binding("b-acme-crm-create-backup");
    backup.priority = 5;
    s.publish(vec![Change::UpsertBinding(backup)])
        .await
        .unwrap();
    // Load the backup's preferred replica: priority still wins over the
    // primary's idle replicas.
    for i in 1..4 {
        let a = s.resolve_acme(&format!("a{i}")).await;
        assert_eq!(
            a.destination.instance,
            fixture::instance("i-acme-crm-backup")
        );
        assert_eq!(a.policy.binding_priority, 5);
    }
}

// spec: ROUTE-10
/// The preferred region ranks before the preferred zone, and the zone
/// before load.
pub async fn preferred_region_then_zone_rank_first<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let topo = |r: &str, z: Option<&str>| TopologyPreference {
        preferred_region: Some(region(r)),
        preferred_zone: z.map(zone),
        ..s.fleet.topology()
    };
    // Replicas: r0 eu-west-a, r1 us-east-a, r2 eu-west-b, r3 us-east-b.
    let a = resolve_with(&s, "z1", topo("us-east", Some("us-east-b")))
        .await
        .unwrap();
    assert_eq!(a.assignment.destination.replica, replica("i-acme-crm-r3"));
    let a = resolve_with(&s, "z2", topo("eu-west", Some("eu-west-b")))
        .await
        .unwrap();
    assert_eq!(a.assignment.destination.replica, replica("i-acme-crm-r2"));
    // A zone of another region does not beat the region.
    let a = resolve_with(&s, "z3", topo("us-east", Some("eu-west-a")))
        .await
        .unwrap();
    assert_eq!(a.assignment.destination.region, region("us-east"));
    // The preferred zone wins over a less loaded replica.
    for i in 0..3 {
        let a = resolve_with(&s, &format!("l{i}"), topo("eu-west", Some("eu-west-b")))
            .await
            .unwrap();
        assert_eq!(a.assignment.destination.replica, replica("i-acme-crm-r2"));
    }
}

// spec: ROUTE-10
/// Without topology preferences, fewer active reservations rank first:
/// four new routes spread over four replicas.
pub async fn fewer_active_reservations_rank_before_the_hash<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let topo = no_preference(&s.fleet);
    let mut used = BTreeSet::new();
    for i in 0..4 {
        let a = resolve_with(&s, &format!("a{i}"), topo.clone())
            .await
            .unwrap();
        used.insert(a.assignment.destination.replica.clone());
    }
    assert_eq!(used.len(), 4);
}

// spec: ROUTE-10
/// Among otherwise equal candidates the replica with the smallest stable
/// route hash of (action, replica) wins, on every backend alike.
pub async fn equal_candidates_follow_the_stable_route_hash<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let topo = no_preference(&s.fleet);
    let replicas: Vec<ReplicaId> = s
        .fleet
        .replicas_of("i-acme-crm")
        .into_iter()
        .map(|r| r.id)
        .collect();
    let mut chosen = BTreeSet::new();
    for i in 0..12 {
        let action_id = format!("hash-{i}");
        let expected = replicas
            .iter()
            .min_by_key(|r| (route_hash(&fixture::action(&action_id), r), (*r).clone()))
            .unwrap()
            .clone();
        let a = resolve_with(&s, &action_id, topo.clone())
            .await
            .unwrap()
            .assignment;
        assert_eq!(a.destination.replica, expected, "{action_id}");
        chosen.insert(expected);
        // Release so every replica is idle again for the next action.
        s.settle(&a, Outcome::Completed).await.unwrap();
    }
    assert!(chosen.len() > 1, "the hash spreads actions");
}

// spec: ROUTE-10
/// Two bindings of the same priority on the same instance offer the same
/// replicas with equal keys: the binding with the smaller ID takes the
/// route, on every backend alike, and keeps it for its retries.
pub async fn equal_keys_of_two_bindings_go_to_the_smaller_binding_id<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let primary = s.fleet.binding("b-acme-crm-create");
    for id in ["b-acme-crm-create-a", "b-acme-crm-create-z"] {
        let mut twin = primary.clone();
        twin.id = fixture::binding(id);
        twin.credential = fixture::reference(&format!("cred:{id}"), 3);
        s.publish(vec![Change::UpsertBinding(twin)]).await.unwrap();
    }
    for i in 0..4 {
        let a = s.resolve_acme(&format!("twin-{i}")).await;
        assert_eq!(a.destination.binding, primary.id, "twin-{i}");
        assert_eq!(a.policy.credential, primary.credential);
        s.settle(&a, Outcome::Completed).await.unwrap();
    }
    let mut disabled = primary.clone();
    disabled.enabled = false;
    s.publish(vec![Change::UpsertBinding(disabled)])
        .await
        .unwrap();
    let a = s.resolve_acme("twin-after").await;
    assert_eq!(
        a.destination.binding,
        fixture::binding("b-acme-crm-create-a")
    );
}

// spec: ROUTE-7, ROUTE-9
/// Two bindings of one tenant on the same instance, in one catalog
/// revision, route to the same replica: each route records its own
/// binding, capability, scopes and policy, never the other's.
pub async fn routes_of_two_bindings_to_one_replica_keep_their_own_snapshot<H: Harness>(
    harness: &H,
) {
    let options = FleetOptions {
        replicas_per_instance: 1,
        ..FleetOptions::default()
    };
    let s = fixture::open(harness, options).await;
    let create = s.fleet.binding("b-acme-crm-create");
    let read = s.fleet.binding("b-acme-crm-read");
    let first = s.resolve_acme("two-1").await;
    let second = s
        .resolve("two-2", &acme(), &crm_read())
        .await
        .unwrap()
        .assignment;
    let third = s.resolve_acme("two-3").await;
    assert_eq!(first.destination.replica, second.destination.replica);
    assert_eq!(first.destination.replica, third.destination.replica);
    for (a, binding) in [(&first, &create), (&second, &read), (&third, &create)] {
        let action = &a.identity.action;
        assert_eq!(a.destination.binding, binding.id, "{action}");
        assert_eq!(a.identity.capability, binding.capability, "{action}");
        assert_eq!(a.reservation.scopes, binding.admission_scopes, "{action}");
        assert_eq!(a.policy.credential, binding.credential, "{action}");
        assert_eq!(a.policy.quota_policy, binding.quota_policy, "{action}");
        assert_eq!(a.policy.binding_priority, binding.priority, "{action}");
    }
}

// spec: ROUTE-11, PIN-2
/// Topology preferences and filters apply to new routes only: a retry
/// with another region, zone, class or cross-region rule gets the same
/// route, reserved or released.
pub async fn topology_preferences_never_move_an_existing_route<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let a = s.resolve_acme("a1").await;
    let elsewhere = TopologyPreference {
        preferred_region: Some(region("us-east")),
        preferred_zone: Some(zone("us-east-b")),
        capacity_class: class("large"),
        cross_region: CrossRegion::Forbidden,
    };
    let again = resolve_with(&s, "a1", elsewhere.clone()).await.unwrap();
    assert_eq!(again.kind, ResolveKind::Existing);
    assert_eq!(again.assignment, a);
    s.settle(&a, Outcome::Cancelled).await.unwrap();
    let retried = resolve_with(&s, "a1", elsewhere).await.unwrap();
    assert_eq!(retried.kind, ResolveKind::Reserved);
    assert_eq!(retried.assignment.destination, a.destination);
    assert_eq!(retried.assignment.policy, a.policy);
    let rev = s.store.catalog_revision().await.unwrap();
    assert_eq!(rev, Revision(1));
}

// spec: ROUTE-11, ROUTE-9
/// Cross-region forbidden keeps routes in the preferred region, so the
/// rule needs one: a request that forbids other regions and names no
/// preferred region is refused as invalid and changes nothing.
pub async fn cross_region_forbidden_without_a_preferred_region_is_refused<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let before = s.observe().await;
    let mut request = s.fleet.request("a1", &acme(), &crm_create());
    request.topology.cross_region = CrossRegion::Forbidden;
    request.topology.preferred_region = None;
    assert_err!(
        s.store.route_resolve(request).await,
        Error::InvalidRequest {
            what: "topology preference",
            ..
        }
    );
    s.assert_unchanged(&before, "incoherent topology").await;
}
