//! Goal: every record of REC-1..REC-8 behaves as the rule says, through
//! the public contracts only, and bad record input gets a typed error and
//! changes nothing.

use std::collections::BTreeSet;

use connreg::contracts::{CatalogRead, ReplicaLifecycle, Routing, Status};
use connreg::limits::{
    AUDIT_PAGE_ENTRIES_MAX, BINDING_SCOPES_MAX, ID_BYTES_MAX, INSTANCE_REPLICAS_MAX,
    LEASE_MAINTENANCE_BATCH_MAX, MANIFEST_BYTES_MAX, PUBLICATION_CHANGES_MAX, REPLICA_CAPACITY_MAX,
    SCOPE_LIMIT_MAX, TENANT_CAPABILITY_BINDINGS_MAX, TEXT_BYTES_MAX, VERSION_CAPABILITIES_MAX,
};
use connreg::*;

use crate::Harness;
use crate::fixture::{
    self, FleetOptions, acme, crm_create, crm_read, globex, instance, mail_send, reference, scope,
};
use crate::support::{assert_err, listed};

// spec: REC-1, CAT-5, ROUTE-9
/// A disabled type hides every capability of its versions and takes no new
/// routes; enabling it again brings them back.
pub async fn disabled_connector_type_hides_its_capabilities<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let mut ty = s.fleet.connector_type("ty-crm");
    ty.enabled = false;
    s.publish(vec![Change::UpsertType(ty.clone())])
        .await
        .unwrap();
    assert_eq!(
        listed(&s.store, Reader::Tenant(acme())).await,
        vec!["mail.send"]
    );
    assert_err!(
        s.resolve("a1", &acme(), &crm_create()).await,
        Error::NoEligibleBinding
    );
    ty.enabled = true;
    s.publish(vec![Change::UpsertType(ty)]).await.unwrap();
    assert_eq!(
        listed(&s.store, Reader::Tenant(acme())).await,
        vec!["crm.contact.create", "crm.contact.read", "mail.send"]
    );
    s.resolve_acme("a1").await;
}

// spec: REC-2, CAT-2
/// Admitting an existing version again with any artifact field changed is
/// a conflict, and the failed publication changes nothing.
pub async fn readmitting_a_version_with_another_artifact_is_conflict<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let original = s.fleet.version("v-crm-1");
    let mut variants = Vec::new();
    let mut v = original.clone();
    v.artifact_digest = "sha256:other".into();
    variants.push(("digest", v));
    let mut v = original.clone();
    v.manifest = "name = \"changed\"".into();
    variants.push(("manifest", v));
    let mut v = original.clone();
    v.capabilities.remove(&crm_read());
    variants.push(("capabilities", v));
    let mut v = original.clone();
    v.profiles.insert(fixture::profile("crm.v2"));
    variants.push(("profiles", v));
    let mut v = original.clone();
    v.attestation = "slsa:forged".into();
    variants.push(("attestation", v));
    let mut v = original.clone();
    v.connector_type = fixture::connector_type("ty-mail");
    variants.push(("type", v));
    let before = s.observe().await;
    for (what, v) in variants {
        assert_err!(
            s.publish(vec![Change::AdmitVersion(v)]).await,
            Error::Conflict { .. },
            "changed {what}"
        );
        s.assert_unchanged(&before, what).await;
    }
}

// spec: REC-2, CAT-5
/// Only a version's active and qualified flags change after admission;
/// identical re-admission is accepted and sets them.
pub async fn version_status_is_the_only_mutable_part<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let v = fixture::version("v-crm-1");
    for (active, qualified) in [(false, true), (true, false)] {
        s.publish(vec![Change::SetVersionStatus {
            version: v.clone(),
            active,
            qualified,
        }])
        .await
        .unwrap();
        assert_eq!(
            listed(&s.store, Reader::Tenant(acme())).await,
            vec!["mail.send"],
            "active {active}, qualified {qualified}"
        );
    }
    // Re-admitting the identical artifact is not a change of the artifact.
    let rev = s
        .publish(vec![Change::AdmitVersion(s.fleet.version("v-crm-1"))])
        .await
        .unwrap();
    assert_eq!(rev, Revision(4));
    assert_eq!(
        listed(&s.store, Reader::Tenant(acme())).await,
        vec!["crm.contact.create", "crm.contact.read", "mail.send"]
    );
    let before = s.observe().await;
    assert_err!(
        s.publish(vec![Change::SetVersionStatus {
            version: fixture::version("v-unknown"),
            active: true,
            qualified: true,
        }])
        .await,
        Error::NotFound {
            what: "version",
            ..
        }
    );
    s.assert_unchanged(&before, "unknown version status").await;
}

// spec: REC-3, CAT-2
/// An instance belongs to one tenant: moving it to another is a conflict
/// and changes nothing.
pub async fn instance_cannot_move_to_another_tenant<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let mut moved = s.fleet.instance("i-acme-crm");
    moved.tenant = globex();
    let before = s.observe().await;
    assert_err!(
        s.publish(vec![Change::UpsertInstance(moved)]).await,
        Error::Conflict { .. }
    );
    s.assert_unchanged(&before, "moved instance").await;
}

// spec: REC-3, REC-7, CAT-5
/// An instance's secret provider travels into the route as a reference
/// with its revision; a disabled instance takes no new route.
pub async fn instance_references_travel_into_the_route<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let a = s.resolve_acme("a1").await;
    let inst = s.fleet.instance("i-acme-crm");
    assert_eq!(a.policy.secret_provider, inst.secret_provider);
    assert_eq!(a.destination.instance, inst.id);
    // The route's texts read as the texts its records were written with.
    let provider = &a.policy.secret_provider.reference;
    assert_eq!(
        provider.as_str(),
        inst.secret_provider.reference.to_string()
    );
    let back: RouteAssignment = serde_json::from_value(serde_json::to_value(&a).unwrap()).unwrap();
    assert_eq!(back, a, "the answer reads back as it was written");
    let endpoint: &str = a.destination.endpoint.as_ref();
    assert_eq!(
        endpoint,
        format!("https://{}.connectors.internal:8443", a.destination.replica)
    );
    let mut disabled = inst;
    disabled.enabled = false;
    s.publish(vec![Change::UpsertInstance(disabled)])
        .await
        .unwrap();
    assert_err!(
        s.resolve("a2", &acme(), &crm_create()).await,
        Error::NoEligibleBinding
    );
    assert!(
        !listed(&s.store, Reader::Tenant(acme()))
            .await
            .contains(&"crm.contact.create".to_string())
    );
}

// spec: REC-4, ROUTE-10
/// A tenant may hold several bindings for one capability; the lower
/// priority serves first, and the other serves when the first is disabled.
/// The route carries the binding's policy revision, credential revision
/// and quota policy.
pub async fn tenant_may_hold_several_bindings_for_one_capability<H: Harness>(harness: &H) {
    let options = FleetOptions {
        backup_binding: true,
        ..FleetOptions::default()
    };
    let s = fixture::open(harness, options).await;
    let primary = s.resolve_acme("a1").await;
    let b = s.fleet.binding("b-acme-crm-create");
    assert_eq!(primary.destination.binding, b.id);
    assert_eq!(primary.policy.binding_priority, b.priority);
    assert_eq!(primary.policy.policy_revision, b.policy_revision);
    assert_eq!(primary.policy.credential, b.credential);
    assert_eq!(primary.policy.quota_policy, b.quota_policy);
    let mut disabled = b;
    disabled.enabled = false;
    s.publish(vec![Change::UpsertBinding(disabled)])
        .await
        .unwrap();
    let backup = s.resolve_acme("a2").await;
    assert_eq!(
        backup.destination.binding,
        fixture::binding("b-acme-crm-create-backup")
    );
    assert_eq!(backup.destination.instance, instance("i-acme-crm-backup"));
    assert_eq!(backup.policy.binding_priority, 20);
    assert_eq!(backup.policy.quota_policy, None);
}

// spec: REC-4, CAT-2
/// A tenant holds at most `TENANT_CAPABILITY_BINDINGS_MAX` bindings for one
/// capability: exactly the limit is accepted, one more is `LimitExceeded`
/// and changes nothing, and updating a binding already held is not a new
/// one.
pub async fn bindings_per_tenant_and_capability_stop_at_their_limit<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let extra = |k: usize| {
        let mut b = s.fleet.binding("b-acme-crm-create");
        b.id = fixture::binding(&format!("b-acme-crm-create-{k:02}"));
        b.priority = 100 + k as u32;
        Change::UpsertBinding(b)
    };
    // The fixture holds one already.
    s.publish((1..TENANT_CAPABILITY_BINDINGS_MAX).map(extra).collect())
        .await
        .expect("exactly the limit is accepted");
    let before = s.observe().await;
    assert_err!(
        s.publish(vec![extra(TENANT_CAPABILITY_BINDINGS_MAX)]).await,
        Error::LimitExceeded { max, .. } if max == TENANT_CAPABILITY_BINDINGS_MAX as u64
    );
    s.assert_unchanged(&before, "a binding past the limit")
        .await;

    let mut held = s.fleet.binding("b-acme-crm-create");
    held.priority = 11;
    s.publish(vec![Change::UpsertBinding(held)])
        .await
        .expect("updating a binding at the limit");
    let mut other_capability = s.fleet.binding("b-acme-crm-read");
    other_capability.id = fixture::binding("b-acme-crm-read-2");
    s.publish(vec![Change::UpsertBinding(other_capability)])
        .await
        .expect("another capability counts on its own");
}

// spec: REC-4, REC-8, CAT-2
/// A binding must use its own tenant's instance and scopes, and may not
/// change tenant or capability; each refusal changes nothing.
pub async fn binding_must_stay_within_its_tenant<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let before = s.observe().await;

    let mut foreign_instance = s.fleet.binding("b-globex-crm-create");
    foreign_instance.instance = instance("i-acme-crm");
    assert_err!(
        s.publish(vec![Change::UpsertBinding(foreign_instance)])
            .await,
        Error::InvalidRequest { .. }
    );
    s.assert_unchanged(&before, "foreign instance").await;

    let mut foreign_scope = s.fleet.binding("b-globex-crm-create");
    foreign_scope.admission_scopes.insert(scope("s-acme"));
    assert_err!(
        s.publish(vec![Change::UpsertBinding(foreign_scope)]).await,
        Error::InvalidRequest { .. }
    );
    s.assert_unchanged(&before, "foreign scope").await;

    let mut other_capability = s.fleet.binding("b-acme-crm-read");
    other_capability.capability = mail_send();
    assert_err!(
        s.publish(vec![Change::UpsertBinding(other_capability)])
            .await,
        Error::Conflict { .. }
    );
    s.assert_unchanged(&before, "binding changing capability")
        .await;

    let mut too_many = s.fleet.binding("b-acme-crm-read");
    too_many.admission_scopes = (0..=BINDING_SCOPES_MAX)
        .map(|i| scope(&format!("s-extra-{i}")))
        .collect::<BTreeSet<_>>();
    assert_err!(
        s.publish(vec![Change::UpsertBinding(too_many)]).await,
        Error::LimitExceeded {
            max,
            ..
        } if max == BINDING_SCOPES_MAX as u64
    );
    s.assert_unchanged(&before, "too many scopes").await;
}

// spec: REC-5, LEASE-4
/// A registered replica carries its whole provisioned identity and live
/// state: health sequence, lease from the injected clock, no reservations,
/// ready, circuit closed.
pub async fn registered_replica_carries_its_full_record<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let spec = s.fleet.replica_spec("i-acme-crm", 0);
    let r = s
        .store
        .replica_get(spec.id.clone())
        .await
        .unwrap()
        .expect("registered");
    assert_eq!(r.spec, spec);
    assert_eq!(r.health_seq, 1);
    assert_eq!(
        r.lease_expires_at,
        Timestamp(fixture::CLOCK_START_MS + s.fleet.options.lease_ttl_ms)
    );
    assert_eq!(r.active, 0);
    assert_eq!(r.state, ReplicaState::Ready);
    assert_eq!(r.circuit, Circuit::default());
    assert_eq!(
        s.store
            .replica_get(fixture::replica("never-registered"))
            .await
            .unwrap(),
        None
    );
}

// spec: REC-5, CAT-2
/// A replica keeps the identity it registered with; a different identity,
/// an unknown instance or version, or a bad capacity is refused and
/// changes nothing.
pub async fn replica_registration_is_validated<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let before = s.observe().await;
    let base = s.fleet.replica_spec("i-acme-crm", 0);

    let mut other = base.clone();
    other.endpoint = "https://elsewhere:8443".into();
    let register = |spec: ReplicaSpec| s.store.replica_register(s.fleet.register_params(spec, 9));
    assert_err!(register(other).await, Error::Conflict { .. });

    let mut orphan = s.fleet.replica_spec("i-acme-crm", 9);
    orphan.instance = instance("i-missing");
    assert_err!(
        register(orphan).await,
        Error::NotFound {
            what: "instance",
            ..
        }
    );

    let mut unknown_version = s.fleet.replica_spec("i-acme-crm", 9);
    unknown_version.version = fixture::version("v-missing");
    assert_err!(
        register(unknown_version).await,
        Error::NotFound {
            what: "version",
            ..
        }
    );

    let mut empty = s.fleet.replica_spec("i-acme-crm", 9);
    empty.capacity = 0;
    assert_err!(register(empty).await, Error::InvalidRequest { .. });

    let mut huge = s.fleet.replica_spec("i-acme-crm", 9);
    huge.capacity = REPLICA_CAPACITY_MAX + 1;
    assert_err!(
        register(huge).await,
        Error::LimitExceeded { max, .. } if max == u64::from(REPLICA_CAPACITY_MAX)
    );

    let mut long_endpoint = s.fleet.replica_spec("i-acme-crm", 9);
    long_endpoint.endpoint = "x".repeat(TEXT_BYTES_MAX + 1).into();
    assert_err!(
        register(long_endpoint).await,
        Error::LimitExceeded { max, .. } if max == TEXT_BYTES_MAX as u64
    );
    s.assert_unchanged(&before, "refused registrations").await;
}

// spec: REC-5, LEASE-1
/// One instance is served by at most `INSTANCE_REPLICAS_MAX` replicas: the
/// next new replica is `LimitExceeded` and changes nothing, while a known
/// replica still registers again and other instances count on their own.
pub async fn replicas_per_instance_stop_at_their_limit<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    for k in s.fleet.options.replicas_per_instance..INSTANCE_REPLICAS_MAX {
        s.register(s.fleet.replica_spec("i-acme-crm", k), 1).await;
    }
    let register =
        |spec: ReplicaSpec, seq: u64| s.store.replica_register(s.fleet.register_params(spec, seq));
    let before = s.observe().await;
    assert_err!(
        register(s.fleet.replica_spec("i-acme-crm", INSTANCE_REPLICAS_MAX), 1).await,
        Error::LimitExceeded { max, .. } if max == INSTANCE_REPLICAS_MAX as u64
    );
    s.assert_unchanged(&before, "a replica past the limit")
        .await;

    let again = register(s.fleet.replica_spec("i-acme-crm", 0), 2)
        .await
        .expect("a known replica registers again at the limit");
    assert_eq!(again.health_seq, 2);
    register(
        s.fleet.replica_spec("i-acme-mail", INSTANCE_REPLICAS_MAX),
        1,
    )
    .await
    .expect("another instance counts on its own");
}
// spec: REC-6, SETTLE-4
/// A route is kept after its capacity is released: it reads back
/// unreserved with its last settlement, and still counts as an assignment.
pub async fn assignment_is_kept_after_release<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let a = s.resolve_acme("a1").await;
    s.settle(&a, Outcome::Completed).await.unwrap();
    let record = s
        .store
        .route_get(acme(), a.identity.action.clone())
        .await
        .unwrap()
        .expect("kept");
    assert_eq!(record.assignment, a);
    assert!(!record.reserved);
    assert_eq!(record.last_settlement, Some(Outcome::Completed));
    let status = s.store.status().await.unwrap();
    assert_eq!(status.assignments_total, 1);
    assert_eq!(status.active_assignments, 0);
}

// spec: REC-7
/// Credentials and secret providers appear only as opaque references with
/// a revision, in routes, inspections and catalog pages alike.
pub async fn records_hold_credentials_only_as_references<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let a = s.resolve_acme("a1").await;
    let mut seen = 0;
    let values = [
        serde_json::to_value(&a).unwrap(),
        serde_json::to_value(s.inspect().await).unwrap(),
        serde_json::to_value(
            s.store
                .catalog_page(CatalogQuery::first_page(Reader::Tenant(acme())))
                .await
                .unwrap(),
        )
        .unwrap(),
    ];
    for v in &values {
        seen += check_references(v, "$");
    }
    assert!(
        seen >= 2,
        "the route carries a credential and a secret provider"
    );
    assert_eq!(a.policy.credential, reference("cred:b-acme-crm-create", 3));
}

/// Counts reference-shaped fields and panics on any credential or secret
/// field that is not exactly `{reference, revision}` (or null).
fn check_references(v: &serde_json::Value, path: &str) -> usize {
    let mut count = 0;
    match v {
        serde_json::Value::Object(map) => {
            for (k, child) in map {
                let here = format!("{path}.{k}");
                let sensitive = ["credential", "secret", "quota", "password", "token", "key"]
                    .iter()
                    .any(|w| k.contains(w));
                if sensitive && !child.is_null() {
                    let keys: BTreeSet<&str> = child
                        .as_object()
                        .map(|m| m.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    assert_eq!(
                        keys,
                        BTreeSet::from(["reference", "revision"]),
                        "{here} must be an opaque reference, got {child}"
                    );
                    count += 1;
                } else {
                    count += check_references(child, &here);
                }
            }
        }
        serde_json::Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                count += check_references(child, &format!("{path}[{i}]"));
            }
        }
        _ => {}
    }
    count
}

// spec: REC-8, ROUTE-7
/// A route reserves every admission scope of its binding or none: when one
/// scope is full the resolve fails and no other counter moves.
pub async fn route_reserves_every_scope_or_none<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let mut narrow = s.fleet.scope("s-acme-crm");
    narrow.limit = 1;
    s.publish(vec![Change::UpsertScope(narrow)]).await.unwrap();
    let a = s.resolve_acme("a1").await;
    assert_eq!(
        a.reservation.scopes,
        BTreeSet::from([scope("s-acme"), scope("s-acme-crm")])
    );
    let usage = |snap: &StoreSnapshot, id: &str| {
        snap.scopes
            .iter()
            .find(|u| u.scope.id.as_str() == id)
            .map(|u| u.in_use)
    };
    let snap = s.inspect().await;
    assert_eq!(usage(&snap, "s-acme"), Some(1));
    assert_eq!(usage(&snap, "s-acme-crm"), Some(1));

    let before = s.observe().await;
    assert_err!(
        s.resolve("a2", &acme(), &crm_create()).await,
        Error::NoCapacity
    );
    s.assert_unchanged(&before, "partial reservation").await;

    // A binding that uses only the tenant scope still has room.
    s.resolve("a3", &acme(), &crm_read()).await.unwrap();
    let snap = s.inspect().await;
    assert_eq!(usage(&snap, "s-acme"), Some(2));
    assert_eq!(usage(&snap, "s-acme-crm"), Some(1));
}

// spec: CAT-10, ROUTE-1
/// Every identifier is checked where it is made: empty is invalid, longer
/// than the limit is over the limit, and characters outside the documented
/// set are invalid.
pub async fn typed_identifiers_reject_bad_text<H: Harness>(_harness: &H) {
    fn check<T: std::fmt::Debug>(kind: &str, make: fn(String) -> Result<T>) {
        assert_err!(
            make(String::new()),
            Error::InvalidRequest { .. },
            "{kind} empty"
        );
        assert_err!(
            make("a".repeat(ID_BYTES_MAX + 1)),
            Error::LimitExceeded { max, .. } if max == ID_BYTES_MAX as u64,
            "{kind} oversized"
        );
        for bad in ["a/b", "a b", "é", "a\n", "a~b"] {
            assert_err!(
                make(bad.to_string()),
                Error::InvalidRequest { .. },
                "{kind} {bad:?}"
            );
        }
        make("a".repeat(ID_BYTES_MAX)).expect("the longest identifier is valid");
        make("eu-1.r_2:x".to_string()).expect("every allowed character");
    }
    check("tenant", TenantId::new);
    check("capability", CapabilityId::new);
    check("profile", ProfileId::new);
    check("type", ConnectorTypeId::new);
    check("version", VersionId::new);
    check("instance", InstanceId::new);
    check("binding", BindingId::new);
    check("scope", ScopeId::new);
    check("replica", ReplicaId::new);
    check("action", ActionId::new);
    check("region", Region::new);
    check("zone", Zone::new);
    check("class", CapacityClass::new);
    assert!(serde_json::from_str::<TenantId>("\"\"").is_err());
    assert!(serde_json::from_str::<ActionId>("\"a/b\"").is_err());
}

// spec: REC-2, CAT-10, CAT-2
/// Record text over its limit is refused with the limit, and the
/// publication changes nothing.
pub async fn record_fields_over_their_limits_are_refused<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let before = s.observe().await;
    let mut big_manifest = s.fleet.version("v-crm-9");
    big_manifest.manifest = "m".repeat(MANIFEST_BYTES_MAX + 1);
    let mut long_owner = s.fleet.connector_type("ty-crm");
    long_owner.owner = "o".repeat(TEXT_BYTES_MAX + 1);
    let mut empty_family = s.fleet.connector_type("ty-crm");
    empty_family.family = " ".into();
    let mut long_reference = s.fleet.instance("i-acme-crm");
    long_reference.secret_provider.reference = "r".repeat(TEXT_BYTES_MAX + 1).into();
    let mut big_scope = s.fleet.scope("s-acme");
    big_scope.limit = SCOPE_LIMIT_MAX + 1;
    let cases = vec![
        (
            Change::AdmitVersion(big_manifest),
            Some(MANIFEST_BYTES_MAX as u64),
        ),
        (Change::UpsertType(long_owner), Some(TEXT_BYTES_MAX as u64)),
        (Change::UpsertType(empty_family), None),
        (
            Change::UpsertInstance(long_reference),
            Some(TEXT_BYTES_MAX as u64),
        ),
        (
            Change::UpsertScope(big_scope),
            Some(u64::from(SCOPE_LIMIT_MAX)),
        ),
    ];
    for (change, limit) in cases {
        let result = s.publish(vec![change.clone()]).await;
        match limit {
            Some(max) => {
                assert_err!(result, Error::LimitExceeded { max: m, .. } if m == max, "{change:?}")
            }
            None => assert_err!(result, Error::InvalidRequest { .. }, "{change:?}"),
        }
        s.assert_unchanged(&before, "refused record").await;
    }
}

// spec: CAT-10, REC-2, REC-5, REC-8
/// Every record and request bound is inclusive: a value of exactly its
/// maximum is accepted (the refusals one past it are tested beside each
/// rule).
pub async fn values_of_exactly_their_maximum_are_accepted<H: Harness>(harness: &H) {
    use connreg::contracts::Operations;
    use connreg::request::{AuditQuery, CircuitCloseParams};

    let s = fixture::open(harness, FleetOptions::default()).await;
    assert!(InstanceId::new("i".repeat(ID_BYTES_MAX)).is_ok());

    let mut big_manifest = s.fleet.version("v-crm-9");
    big_manifest.manifest = "m".repeat(MANIFEST_BYTES_MAX);
    let mut long_owner = s.fleet.connector_type("ty-crm");
    long_owner.owner = "o".repeat(TEXT_BYTES_MAX);
    let mut roomy = s.fleet.scope("s-acme");
    roomy.limit = SCOPE_LIMIT_MAX;
    let extra_scopes: Vec<AdmissionScope> = (0..BINDING_SCOPES_MAX)
        .map(|k| AdmissionScope {
            id: scope(&format!("s-acme-extra-{k}")),
            ..s.fleet.scope("s-acme")
        })
        .collect();
    let mut many_scopes = s.fleet.binding("b-acme-crm-read");
    many_scopes.admission_scopes = extra_scopes.iter().map(|x| x.id.clone()).collect();
    let mut changes = vec![
        Change::AdmitVersion(big_manifest),
        Change::UpsertType(long_owner),
        Change::UpsertScope(roomy),
    ];
    changes.extend(extra_scopes.into_iter().map(Change::UpsertScope));
    changes.push(Change::UpsertBinding(many_scopes));
    s.publish(changes).await.expect("records at their bounds");
    let same_type = Change::UpsertType(s.fleet.connector_type("ty-mail"));
    s.publish(vec![same_type; PUBLICATION_CHANGES_MAX])
        .await
        .expect("a publication of exactly the most changes");

    let mut big = s.fleet.replica_spec("i-acme-crm", 9);
    big.capacity = REPLICA_CAPACITY_MAX;
    let big = s
        .store
        .replica_register(s.fleet.register_params(big, 1))
        .await
        .expect("a replica of the largest capacity");
    assert_eq!(big.spec.capacity, REPLICA_CAPACITY_MAX);
    s.store
        .lease_maintain(MaintainParams {
            max: LEASE_MAINTENANCE_BATCH_MAX,
        })
        .await
        .expect("the largest maintenance batch");
    s.store
        .audit_page(AuditQuery {
            after: None,
            limit: AUDIT_PAGE_ENTRIES_MAX as u32,
        })
        .await
        .expect("the largest audit page");
    // The reason passes its bound; the circuit, closed, is the refusal.
    assert_err!(
        s.store
            .circuit_close(CircuitCloseParams {
                replica: big.spec.id,
                reason: "r".repeat(TEXT_BYTES_MAX),
            })
            .await,
        Error::Conflict { .. }
    );
}

// spec: REC-2, CAT-10, CAT-2
/// A version implements at most `VERSION_CAPABILITIES_MAX` capabilities
/// and supports at most as many profiles: exactly that many of each is
/// admitted, one more of either is refused with the limit and changes
/// nothing.
pub async fn version_capabilities_and_profiles_stop_at_their_limit<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let definitions: Vec<CapabilityDefinition> = (0..=VERSION_CAPABILITIES_MAX)
        .map(|k| s.fleet.definition(&format!("bulk.cap-{k:03}")))
        .collect();
    s.publish(
        definitions
            .iter()
            .cloned()
            .map(Change::UpsertDefinition)
            .collect(),
    )
    .await
    .unwrap();
    let mut over_capabilities = s.fleet.version("v-crm-9");
    over_capabilities.capabilities = definitions.iter().map(|d| d.id.clone()).collect();
    let mut over_profiles = s.fleet.version("v-crm-9");
    over_profiles.profiles = (0..=VERSION_CAPABILITIES_MAX)
        .map(|k| fixture::profile(&format!("bulk.p-{k:03}")))
        .collect();
    let before = s.observe().await;
    for (what, v) in [
        ("capabilities", over_capabilities.clone()),
        ("profiles", over_profiles.clone()),
    ] {
        assert_err!(
            s.publish(vec![Change::AdmitVersion(v)]).await,
            Error::LimitExceeded { max, .. } if max == VERSION_CAPABILITIES_MAX as u64,
            "{what}"
        );
        s.assert_unchanged(&before, what).await;
    }
    let mut at_bounds = over_capabilities;
    at_bounds.capabilities.pop_last();
    at_bounds.profiles = over_profiles.profiles;
    at_bounds.profiles.pop_last();
    assert_eq!(at_bounds.capabilities.len(), VERSION_CAPABILITIES_MAX);
    assert_eq!(at_bounds.profiles.len(), VERSION_CAPABILITIES_MAX);
    s.publish(vec![Change::AdmitVersion(at_bounds)])
        .await
        .expect("a version at both bounds");
}

// spec: CAT-10, CAT-2
/// Record text may hold line breaks and tabs (a manifest is many lines),
/// but no other control character: such text is refused and the
/// publication changes nothing.
pub async fn record_text_takes_line_breaks_and_tabs_but_no_other_control_character<H: Harness>(
    harness: &H,
) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let before = s.observe().await;
    for bad in ["team\u{7}", "team\r", "\u{1b}[31mteam"] {
        let mut ty = s.fleet.connector_type("ty-crm");
        ty.owner = bad.into();
        assert_err!(
            s.publish(vec![Change::UpsertType(ty)]).await,
            Error::InvalidRequest { .. },
            "{bad:?}"
        );
        s.assert_unchanged(&before, "control characters").await;
    }
    let mut v = s.fleet.version("v-crm-9");
    v.manifest = "name = \"v-crm-9\"\n\tkind = \"crm\"\n".into();
    let mut ty = s.fleet.connector_type("ty-crm");
    ty.owner = "team\tcrm\nplatform".into();
    s.publish(vec![Change::AdmitVersion(v), Change::UpsertType(ty)])
        .await
        .expect("line breaks and tabs");
}
