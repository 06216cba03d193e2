//! Catalog publications: each adds exactly one revision, applies whole or
//! not at all, stays within its change limit, and replica churn never
//! advances the revision (CAT-1..CAT-3).

use connreg::contracts::Operations;
use connreg::contracts::{CatalogRead, ReplicaLifecycle, Status};
use connreg::limits::PUBLICATION_CHANGES_MAX;
use connreg::*;

use crate::Harness;
use crate::fixture::{self, FleetOptions, instance, replica};
use crate::support::assert_err;

// spec: CAT-1
/// A fresh store is at revision 0 and every successful publication adds
/// exactly one, even when it changes nothing visible.
pub async fn each_publication_adds_exactly_one_revision<H: Harness>(harness: &H) {
    let s = fixture::open_empty(harness, FleetOptions::default()).await;
    assert_eq!(s.store.catalog_revision().await.unwrap(), Revision(0));
    assert_eq!(
        s.store.status().await.unwrap().revision,
        Revision(0),
        "status reports the same revision"
    );
    for expected in 1..=3 {
        let rev = s
            .publish(vec![Change::UpsertType(s.fleet.connector_type("ty-crm"))])
            .await
            .unwrap();
        assert_eq!(rev, Revision(expected));
        assert_eq!(s.store.catalog_revision().await.unwrap(), rev);
    }
}

// spec: CAT-2
/// A publication whose last change has a dangling reference fails whole:
/// its earlier, valid changes are not visible and the revision stays.
pub async fn failed_publication_changes_nothing<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let before = s.observe().await;
    let mut disabled_type = s.fleet.connector_type("ty-mail");
    disabled_type.enabled = false;
    let mut new_def = s.fleet.definition("crm.contact.delete");
    new_def.summary = "visible only if the publication applied".into();

    let mut dangling_instance = s.fleet.binding("b-acme-crm-read");
    dangling_instance.instance = instance("i-missing");
    let mut dangling_scope = s.fleet.binding("b-acme-crm-read");
    dangling_scope
        .admission_scopes
        .insert(fixture::scope("s-missing"));
    let mut dangling_capability = s.fleet.binding("b-acme-crm-read");
    dangling_capability.id = fixture::binding("b-acme-new");
    dangling_capability.capability = fixture::cap("crm.missing");
    let mut dangling_type = s.fleet.version("v-crm-3");
    dangling_type.connector_type = fixture::connector_type("ty-missing");
    let mut dangling_definition = s.fleet.version("v-crm-3");
    dangling_definition
        .capabilities
        .insert(fixture::cap("crm.missing"));
    let mut dangling_version = s.fleet.instance("i-acme-crm");
    dangling_version.version = fixture::version("v-missing");

    let cases: Vec<(&str, Change)> = vec![
        ("instance", Change::UpsertBinding(dangling_instance)),
        ("admission scope", Change::UpsertBinding(dangling_scope)),
        (
            "capability definition",
            Change::UpsertBinding(dangling_capability),
        ),
        ("connector type", Change::AdmitVersion(dangling_type)),
        (
            "capability definition",
            Change::AdmitVersion(dangling_definition),
        ),
        ("version", Change::UpsertInstance(dangling_version)),
    ];
    for (what_missing, bad) in cases {
        let changes = vec![
            Change::UpsertType(disabled_type.clone()),
            Change::UpsertDefinition(new_def.clone()),
            bad.clone(),
        ];
        assert_err!(
            s.publish(changes).await,
            Error::NotFound { what, .. } if what == what_missing,
            "{bad:?}"
        );
        s.assert_unchanged(&before, what_missing).await;
    }
}

// spec: CAT-2, CAT-10
/// An empty publication and one over the change limit are refused.
pub async fn empty_or_oversized_publication_is_refused<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let before = s.observe().await;
    assert_err!(s.publish(vec![]).await, Error::InvalidRequest { .. });
    let change = Change::UpsertType(s.fleet.connector_type("ty-crm"));
    assert_err!(
        s.publish(vec![change; PUBLICATION_CHANGES_MAX + 1]).await,
        Error::LimitExceeded { max, .. } if max == PUBLICATION_CHANGES_MAX as u64
    );
    s.assert_unchanged(&before, "refused publications").await;
}

// spec: CAT-3, CAT-1
/// Replica registration, heartbeats, drains, routes, settlements, lease
/// maintenance and circuit changes leave the revision alone; instance and
/// binding changes advance it.
pub async fn replica_churn_does_not_advance_the_revision<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default().with_circuit(true, 1)).await;
    let rev = Revision(1);
    let r0 = replica("i-acme-crm-r0");
    s.register(s.fleet.replica_spec("i-acme-crm", 7), 1).await;
    s.store
        .replica_heartbeat(HeartbeatParams {
            replica: r0.clone(),
            health_seq: 2,
            lease_ttl_ms: 60_000,
        })
        .await
        .unwrap();
    let a = s.resolve_acme("a1").await;
    s.settle(&a, Outcome::OutcomeUnknown).await.unwrap();
    s.store
        .circuit_close(connreg::request::CircuitCloseParams {
            replica: a.destination.replica.clone(),
            reason: "test".into(),
        })
        .await
        .unwrap();
    s.store
        .replica_drain(replica("i-acme-crm-r1"))
        .await
        .unwrap();
    s.clock.advance_ms(120_000);
    s.store
        .lease_maintain(MaintainParams { max: 100 })
        .await
        .unwrap();
    assert_eq!(s.store.catalog_revision().await.unwrap(), rev);
    assert_eq!(s.inspect().await.revision, rev);

    let mut i = s.fleet.instance("i-acme-crm");
    i.secret_provider.revision += 1;
    assert_eq!(
        s.publish(vec![Change::UpsertInstance(i)]).await.unwrap(),
        Revision(2)
    );
    let mut b = s.fleet.binding("b-acme-crm-create");
    b.credential.revision += 1;
    assert_eq!(
        s.publish(vec![Change::UpsertBinding(b)]).await.unwrap(),
        Revision(3)
    );
}
