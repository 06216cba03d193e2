//! What each reader sees in the catalog: a tenant only the capabilities it
//! can call, an internal reader also unbound definitions, an anonymous
//! reader an empty page (CAT-5..CAT-7).

use connreg::contracts::CatalogRead;
use connreg::*;

use crate::Harness;
use crate::fixture::{self, FleetOptions, acme, crm_create, globex, profile, stranger};
use crate::support::{listed, listed_by};

use super::{internal, query};

// spec: CAT-5
/// A tenant sees exactly the capabilities it can call: its own enabled
/// bindings, never inactive or unbound definitions, never another tenant's.
pub async fn tenant_read_lists_only_what_it_can_call<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    assert_eq!(
        listed(&s.store, Reader::Tenant(acme())).await,
        vec!["crm.contact.create", "crm.contact.read", "mail.send"]
    );
    assert_eq!(
        listed(&s.store, Reader::Tenant(globex())).await,
        vec!["crm.contact.create"]
    );
    assert!(
        listed(&s.store, Reader::Tenant(stranger()))
            .await
            .is_empty()
    );
}

// spec: CAT-5
/// Each broken link of the chain (binding, instance, version active,
/// version qualified, type, capability implemented) hides the capability
/// from the tenant, and only that capability.
pub async fn each_broken_link_hides_the_capability<H: Harness>(harness: &H) {
    let fleet = fixture::Fleet::new(FleetOptions::default());
    // (what, changes, acme sees, globex sees): globex shares only the CRM
    // version and type with acme.
    type Case = (
        &'static str,
        Vec<Change>,
        Vec<&'static str>,
        Vec<&'static str>,
    );
    let mut cases: Vec<Case> = Vec::new();
    let mut b = fleet.binding("b-acme-crm-create");
    b.enabled = false;
    cases.push((
        "binding disabled",
        vec![Change::UpsertBinding(b)],
        vec!["crm.contact.read", "mail.send"],
        vec!["crm.contact.create"],
    ));
    let mut i = fleet.instance("i-acme-crm");
    i.enabled = false;
    cases.push((
        "instance disabled",
        vec![Change::UpsertInstance(i)],
        vec!["mail.send"],
        vec!["crm.contact.create"],
    ));
    for (what, active, qualified) in [
        ("version inactive", false, true),
        ("version unqualified", true, false),
    ] {
        cases.push((
            what,
            vec![Change::SetVersionStatus {
                version: fixture::version("v-crm-1"),
                active,
                qualified,
            }],
            vec!["mail.send"],
            vec![],
        ));
    }
    let mut t = fleet.connector_type("ty-crm");
    t.enabled = false;
    cases.push((
        "type disabled",
        vec![Change::UpsertType(t)],
        vec!["mail.send"],
        vec![],
    ));
    let mut narrow = fleet.version("v-crm-narrow");
    narrow.capabilities.remove(&crm_create());
    let mut i = fleet.instance("i-acme-crm");
    i.version = narrow.id.clone();
    cases.push((
        "version does not implement it",
        vec![Change::AdmitVersion(narrow), Change::UpsertInstance(i)],
        vec!["crm.contact.read", "mail.send"],
        vec!["crm.contact.create"],
    ));
    for (what, changes, acme_sees, globex_sees) in cases {
        let s = fixture::open(harness, FleetOptions::default()).await;
        s.publish(changes).await.unwrap();
        assert_eq!(
            listed(&s.store, Reader::Tenant(acme())).await,
            acme_sees,
            "{what}"
        );
        assert_eq!(
            listed(&s.store, Reader::Tenant(globex())).await,
            globex_sees,
            "{what}"
        );
    }
}

// spec: CAT-6
/// An internal read lists bound capabilities, and also active unbound
/// definitions when it asks; inactive definitions never appear.
pub async fn internal_read_may_include_unbound_definitions<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    assert_eq!(
        listed(&s.store, internal(false)).await,
        vec!["crm.contact.create", "crm.contact.read", "mail.send"]
    );
    assert_eq!(
        listed(&s.store, internal(true)).await,
        vec![
            "audit.export",
            "crm.contact.create",
            "crm.contact.read",
            "mail.send"
        ]
    );
}

// spec: CAT-6, CAT-5
/// With a profile filter, an internal read lists an unbound definition only
/// while some active, qualified version of an enabled type implements it
/// with that profile.
pub async fn internal_read_with_profile_needs_an_eligible_unbound_version<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let with_profile = |include_unbound: bool, p: &str| CatalogQuery {
        profile: Some(profile(p)),
        ..query(internal(include_unbound))
    };
    assert_eq!(
        listed_by(&s.store, with_profile(true, "crm.v1")).await,
        vec!["audit.export", "crm.contact.create", "crm.contact.read"]
    );
    assert_eq!(
        listed_by(&s.store, with_profile(false, "crm.v1")).await,
        vec!["crm.contact.create", "crm.contact.read"]
    );
    assert_eq!(
        listed_by(&s.store, with_profile(true, "mail.v1")).await,
        vec!["mail.send"],
        "no version implements audit.export with mail.v1"
    );

    // Each broken link of the unbound chain hides audit.export, and only
    // the link itself: the bound capabilities follow their own chain.
    let both_versions = |active: bool, qualified: bool| {
        ["v-crm-1", "v-crm-2"]
            .into_iter()
            .map(|v| Change::SetVersionStatus {
                version: fixture::version(v),
                active,
                qualified,
            })
            .collect::<Vec<_>>()
    };
    let mut crm_type = s.fleet.connector_type("ty-crm");
    crm_type.enabled = false;
    let restore = both_versions(true, true);
    for (what, broken) in [
        ("inactive versions", both_versions(false, true)),
        ("unqualified versions", both_versions(true, false)),
        ("a disabled type", vec![Change::UpsertType(crm_type)]),
    ] {
        s.publish(broken).await.unwrap();
        assert!(
            listed_by(&s.store, with_profile(true, "crm.v1"))
                .await
                .is_empty(),
            "{what}: nothing implements a crm capability any more"
        );
        assert_eq!(
            listed_by(&s.store, with_profile(true, "mail.v1")).await,
            vec!["mail.send"],
            "{what}"
        );
        let mut fix = restore.clone();
        fix.push(Change::UpsertType(s.fleet.connector_type("ty-crm")));
        s.publish(fix).await.unwrap();
    }
    // One eligible version is enough, bound or not.
    s.publish(vec![Change::SetVersionStatus {
        version: fixture::version("v-crm-1"),
        active: false,
        qualified: true,
    }])
    .await
    .unwrap();
    assert_eq!(
        listed_by(&s.store, with_profile(true, "crm.bulk")).await,
        vec!["audit.export", "crm.contact.create", "crm.contact.read"],
        "v-crm-2 still implements them"
    );
    assert!(
        listed_by(&s.store, with_profile(false, "crm.bulk"))
            .await
            .is_empty(),
        "no tenant can call them: every crm binding runs on v-crm-1"
    );
}

// spec: CAT-7
/// A read with neither a tenant nor the internal permission gets an empty
/// page, not an error.
pub async fn anonymous_read_returns_an_empty_page<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let page = s
        .store
        .catalog_page(query(Reader::Anonymous))
        .await
        .expect("an empty page, not an error");
    assert!(page.entries.is_empty());
    assert_eq!(page.next, None);
    assert_eq!(page.revision, Revision(1));
}
