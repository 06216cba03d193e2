//! Goal: the catalog publishes one revision at a time, all or nothing, and
//! pages read it tenant-scoped, ordered, bounded and pinned to one
//! revision (CAT-1..CAT-10).

use connreg::contracts::Operations;
use connreg::contracts::{CatalogRead, ReplicaLifecycle, Status};
use connreg::limits::{
    DEFINITION_BYTES_MAX, PAGE_BYTES_MAX, PAGE_BYTES_MIN, PAGE_ITEMS_MAX, PUBLICATION_CHANGES_MAX,
    SEARCH_TEXT_BYTES_MAX,
};
use connreg::*;

use crate::Harness;
use crate::fixture::{
    self, FleetOptions, acme, crm_create, globex, instance, profile, replica, stranger,
};
use crate::support::{assert_err, listed, listed_by, pages};

fn query(reader: Reader) -> CatalogQuery {
    CatalogQuery::first_page(reader)
}

fn internal(include_unbound: bool) -> Reader {
    Reader::Internal { include_unbound }
}

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

// spec: CAT-5, CAT-10
/// A profile filter keeps only capabilities whose eligible version
/// supports that profile.
pub async fn profile_filter_keeps_supporting_versions<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let with_profile = |p: &str| CatalogQuery {
        profile: Some(profile(p)),
        ..query(Reader::Tenant(acme()))
    };
    assert_eq!(
        listed_by(&s.store, with_profile("crm.bulk")).await,
        vec!["crm.contact.create", "crm.contact.read"]
    );
    assert_eq!(
        listed_by(&s.store, with_profile("mail.v1")).await,
        vec!["mail.send"]
    );
    assert!(
        listed_by(&s.store, with_profile("nobody.supports"))
            .await
            .is_empty()
    );
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

/// Publishes `n` extra active definitions `bulk.op.NN`, unbound.
async fn publish_bulk_definitions<S: connreg::contracts::Registry + connreg::Inspect>(
    s: &fixture::Setup<S>,
    n: usize,
    schema_bytes: usize,
) {
    let changes = (0..n)
        .map(|i| {
            Change::UpsertDefinition(CapabilityDefinition {
                id: fixture::cap(&format!("bulk.op.{i:02}")),
                summary: format!("bulk operation {i}"),
                schema: "s".repeat(schema_bytes),
                active: true,
            })
        })
        .collect();
    s.publish(changes).await.unwrap();
}

// spec: CAT-8
/// Pages are ordered by capability ID, hold at most the asked number of
/// items, carry their revision, and together list everything once.
pub async fn pages_are_ordered_and_bounded_by_items<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    publish_bulk_definitions(&s, 12, 10).await;
    let q = CatalogQuery {
        page_items: Some(5),
        ..query(internal(true))
    };
    let all = pages(&s.store, q).await;
    assert_eq!(all.len(), 4, "16 entries in pages of 5");
    let mut ids = Vec::new();
    for page in &all {
        assert!(page.entries.len() <= 5);
        assert_eq!(page.revision, Revision(2));
        ids.extend(page.entries.iter().map(|e| e.capability.to_string()));
    }
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(ids, sorted, "ordered by capability, each once");
    assert_eq!(ids.len(), 16);
    assert!(all[..3].iter().all(|p| p.next.is_some()));
    assert_eq!(all[3].next, None);

    let one_by_one = pages(
        &s.store,
        CatalogQuery {
            page_items: Some(1),
            ..query(Reader::Tenant(acme()))
        },
    )
    .await;
    let ids: Vec<String> = one_by_one
        .iter()
        .flat_map(|p| p.entries.iter().map(|e| e.capability.to_string()))
        .collect();
    assert_eq!(
        ids,
        vec!["crm.contact.create", "crm.contact.read", "mail.send"]
    );
}

// spec: CAT-8, CAT-10
/// Pages are also bounded by serialized bytes: a page never holds more
/// than its byte budget, and large entries end a page before its item
/// limit.
pub async fn pages_are_bounded_by_serialized_bytes<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let schema_bytes = 20 * 1024;
    publish_bulk_definitions(&s, 8, schema_bytes).await;
    let q = CatalogQuery {
        page_items: Some(PAGE_ITEMS_MAX),
        page_bytes: Some(PAGE_BYTES_MIN),
        search: Some("bulk".into()),
        ..query(internal(true))
    };
    let all = pages(&s.store, q).await;
    let mut total = 0;
    for page in &all {
        let bytes: usize = page
            .entries
            .iter()
            .map(|e| serde_json::to_vec(e).unwrap().len())
            .sum();
        assert!(bytes <= PAGE_BYTES_MIN as usize, "{bytes} bytes on a page");
        assert!(!page.entries.is_empty());
        total += page.entries.len();
    }
    assert_eq!(total, 8);
    assert!(all.len() >= 3, "8 entries of 20 KiB need several pages");
}

// spec: CAT-8
/// The byte budget is inclusive: entries that add up to exactly the budget
/// share one page, and one byte less moves the last of them to the next.
pub async fn page_byte_budget_holds_entries_up_to_exactly_its_size<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    publish_bulk_definitions(&s, 6, 20 * 1024).await;
    let bulk = CatalogQuery {
        page_items: Some(PAGE_ITEMS_MAX),
        page_bytes: Some(PAGE_BYTES_MAX),
        search: Some("bulk".into()),
        ..query(internal(true))
    };
    let everything = s.store.catalog_page(bulk.clone()).await.unwrap();
    assert_eq!(everything.entries.len(), 6);
    let size = |e: &CatalogEntry| serde_json::to_vec(e).unwrap().len() as u32;
    let four: u32 = everything.entries[..4].iter().map(size).sum();
    assert!(four >= PAGE_BYTES_MIN, "{four} bytes");

    let exact = s
        .store
        .catalog_page(CatalogQuery {
            page_bytes: Some(four),
            ..bulk.clone()
        })
        .await
        .unwrap();
    assert_eq!(exact.entries, everything.entries[..4].to_vec());
    assert!(exact.next.is_some());
    let short = s
        .store
        .catalog_page(CatalogQuery {
            page_bytes: Some(four - 1),
            ..bulk
        })
        .await
        .unwrap();
    assert_eq!(short.entries, everything.entries[..3].to_vec());
}

// spec: CAT-9
/// During a key rotation a cursor signed with the previous key still reads
/// its next page; a registry that no longer holds that key answers
/// InvalidCursor; a configuration whose two keys share an id is refused.
pub async fn cursors_signed_with_the_previous_key_survive_a_rotation<H: Harness>(harness: &H) {
    use connreg::catalog::{CursorKey, CursorKeys};
    use connreg::limits::CIRCUIT_THRESHOLD_MAX;

    let old_key = CursorKey::new("key-2025", &[7; 32]).unwrap();
    let new_key = CursorKey::new("key-2026", &[9; 32]).unwrap();
    assert_eq!((old_key.id(), new_key.id()), ("key-2025", "key-2026"));
    let with_keys = |current: &CursorKey, previous: Option<&CursorKey>| FleetOptions {
        config: RegistryConfig {
            cursor_keys: CursorKeys {
                current: current.clone(),
                previous: previous.cloned(),
            },
            ..RegistryConfig::default()
        },
        ..FleetOptions::default()
    };
    let q = CatalogQuery {
        page_items: Some(1),
        ..query(Reader::Tenant(acme()))
    };

    // The same fleet, at the same revision, in three registries.
    let before = fixture::open(harness, with_keys(&old_key, None)).await;
    let rotating = fixture::open(harness, with_keys(&new_key, Some(&old_key))).await;
    let after = fixture::open(harness, with_keys(&new_key, None)).await;
    let first = before.store.catalog_page(q.clone()).await.unwrap();
    let next = CatalogQuery {
        cursor: first.next.clone(),
        ..q.clone()
    };
    let second = before.store.catalog_page(next.clone()).await.unwrap();
    assert_eq!(
        rotating
            .store
            .catalog_page(next.clone())
            .await
            .unwrap()
            .entries,
        second.entries
    );
    assert_err!(
        after.store.catalog_page(next).await,
        Error::InvalidCursor { .. }
    );
    // The rotating registry signs with the new key only.
    let renewed = rotating.store.catalog_page(q.clone()).await.unwrap();
    let next = CatalogQuery {
        cursor: renewed.next.clone(),
        ..q
    };
    assert_eq!(
        after
            .store
            .catalog_page(next.clone())
            .await
            .unwrap()
            .entries,
        second.entries
    );
    assert_err!(
        before.store.catalog_page(next).await,
        Error::InvalidCursor { .. }
    );

    // Configuration checks, shared by every backend.
    let config = |previous: Option<&CursorKey>, threshold: u32| RegistryConfig {
        circuit: CircuitPolicy {
            enabled: true,
            threshold,
        },
        cursor_keys: CursorKeys {
            current: new_key.clone(),
            previous: previous.cloned(),
        },
    };
    assert!(
        config(Some(&old_key), CIRCUIT_THRESHOLD_MAX)
            .validate()
            .is_ok()
    );
    let same_id = CursorKey::new("key-2026", &[1; 32]).unwrap();
    assert_err!(
        config(Some(&same_id), 3).validate(),
        Error::InvalidRequest { .. }
    );
    assert_err!(config(None, 0).validate(), Error::InvalidRequest { .. });
    assert_err!(
        config(None, CIRCUIT_THRESHOLD_MAX + 1).validate(),
        Error::LimitExceeded { max, .. } if max == u64::from(CIRCUIT_THRESHOLD_MAX)
    );
}

// spec: CAT-9
/// A cursor presented after a publication fails with StaleCursor; the
/// caller restarts from the first page at the new revision.
pub async fn cursor_after_a_publication_is_stale<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let q = CatalogQuery {
        page_items: Some(1),
        ..query(Reader::Tenant(acme()))
    };
    let first = s.store.catalog_page(q.clone()).await.unwrap();
    let cursor = first.next.clone().expect("more pages");
    let second = s
        .store
        .catalog_page(CatalogQuery {
            cursor: Some(cursor.clone()),
            ..q.clone()
        })
        .await
        .unwrap();
    assert_eq!(second.revision, first.revision);
    assert_eq!(second.entries[0].capability.as_str(), "crm.contact.read");

    s.publish(vec![Change::UpsertType(s.fleet.connector_type("ty-mail"))])
        .await
        .unwrap();
    assert_err!(
        s.store
            .catalog_page(CatalogQuery {
                cursor: Some(cursor),
                ..q.clone()
            })
            .await,
        Error::StaleCursor
    );
    let restarted = s.store.catalog_page(q).await.unwrap();
    assert_eq!(restarted.revision, Revision(2));
    assert_eq!(restarted.entries[0].capability, crm_create());
}

// spec: CAT-9, CAT-10
/// Malformed, tampered, oversized and foreign cursors get InvalidCursor
/// and reveal nothing; none of them changes anything.
pub async fn tampered_or_foreign_cursors_are_rejected<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let q = CatalogQuery {
        page_items: Some(1),
        ..query(Reader::Tenant(acme()))
    };
    let cursor = s
        .store
        .catalog_page(q.clone())
        .await
        .unwrap()
        .next
        .expect("more pages");
    let before = s.observe().await;
    let mut bad: Vec<String> = vec![
        String::new(),
        "~".into(),
        "garbage".into(),
        "\u{0}\u{1}".into(),
        "x".repeat(10_000),
        format!("{cursor}x"),
        cursor[1..].to_string(),
    ];
    // Flip each character in turn: any edit must be caught.
    for i in 0..cursor.len() {
        let mut bytes = cursor.clone().into_bytes();
        bytes[i] = if bytes[i] == b'0' { b'1' } else { b'0' };
        if let Ok(t) = String::from_utf8(bytes)
            && t != cursor
        {
            bad.push(t);
        }
    }
    for c in bad {
        let result = s
            .store
            .catalog_page(CatalogQuery {
                cursor: Some(c.clone()),
                ..q.clone()
            })
            .await;
        assert_err!(
            result,
            Error::InvalidCursor { .. } | Error::StaleCursor,
            "cursor {c:?}"
        );
    }
    // Another reader or another filter cannot reuse the cursor.
    for other in [
        CatalogQuery {
            cursor: Some(cursor.clone()),
            ..CatalogQuery {
                page_items: Some(1),
                ..query(Reader::Tenant(globex()))
            }
        },
        CatalogQuery {
            cursor: Some(cursor.clone()),
            search: Some("crm".into()),
            ..q.clone()
        },
        CatalogQuery {
            cursor: Some(cursor.clone()),
            ..query(internal(true))
        },
    ] {
        assert_err!(
            s.store.catalog_page(other).await,
            Error::InvalidCursor { .. }
        );
    }
    s.assert_unchanged(&before, "bad cursors").await;
}

// spec: CAT-9
/// A client that edits a cursor's revision past a publication and signs it
/// again with everything it can know (the unkeyed digest of the first
/// cursor format, or a MAC under a key of its own, with the registry's key
/// id) gets InvalidCursor: neither a page nor StaleCursor.
pub async fn forged_cursors_are_invalid<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let q = CatalogQuery {
        page_items: Some(1),
        ..query(Reader::Tenant(acme()))
    };
    let cursor = s
        .store
        .catalog_page(q.clone())
        .await
        .unwrap()
        .next
        .expect("more pages");
    let stale_at = s.store.catalog_revision().await.unwrap();
    s.publish(vec![Change::UpsertType(s.fleet.connector_type("ty-mail"))])
        .await
        .unwrap();
    let now = s.store.catalog_revision().await.unwrap();
    assert_ne!(now, stale_at);
    // The honest cursor is stale now.
    assert_err!(
        s.store
            .catalog_page(CatalogQuery {
                cursor: Some(cursor.clone()),
                ..q.clone()
            })
            .await,
        Error::StaleCursor
    );
    for forged in forgeries(&cursor, stale_at.0, now.0) {
        let answer = s
            .store
            .catalog_page(CatalogQuery {
                cursor: Some(forged.clone()),
                ..q.clone()
            })
            .await;
        assert_err!(
            answer,
            Error::InvalidCursor { .. },
            "forged cursor {forged:?}"
        );
    }
}

/// `cursor` with its revision field `from` replaced by `to`, re-signed
/// every way a client could: by the unkeyed digest (first format), and by
/// HMAC-SHA-256 under keys of its own.
fn forgeries(cursor: &str, from: u64, to: u64) -> Vec<String> {
    use hmac::{KeyInit, Mac};
    use md5::{Digest, Md5};
    let Some((body, _)) = cursor.rsplit_once('~') else {
        return vec![];
    };
    let edited: Vec<String> = body
        .split('~')
        .map(|part| {
            if part == from.to_string() {
                to.to_string()
            } else {
                part.to_owned()
            }
        })
        .collect();
    let edited = edited.join("~");
    assert_ne!(edited, body, "the cursor carries its revision");
    let hex = |bytes: &[u8]| -> String { bytes.iter().map(|b| format!("{b:02x}")).collect() };
    let mut out = Vec::new();
    // The first format's check: MD5 over the length-prefixed body.
    let mut md5 = Md5::new();
    md5.update((edited.len() as u64).to_be_bytes());
    md5.update(edited.as_bytes());
    let digest = hex(&md5.finalize());
    for len in [8, 32] {
        out.push(format!("{edited}~{}", &digest[..len]));
    }
    // A MAC under keys the client chose, including empty and the text the
    // key id suggests.
    for key in [&b""[..], b"dev", b"connreg", &[0u8; 32]] {
        let mut mac =
            <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key");
        mac.update(edited.as_bytes());
        let tag = hex(&mac.finalize().into_bytes());
        out.push(format!("{edited}~{}", &tag[..32]));
    }
    out
}

// spec: CAT-10
/// Search text, page items and page bytes are limited by the registry,
/// with the documented maximum in the error.
pub async fn read_limits_are_enforced_by_the_registry<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let before = s.observe().await;
    let base = query(Reader::Tenant(acme()));
    let limit = |what_expected: &'static str, max_expected: u64, q: CatalogQuery| {
        let store = s.store.clone();
        async move {
            assert_err!(
                store.catalog_page(q).await,
                Error::LimitExceeded { what, max } if what == what_expected && max == max_expected
            );
        }
    };
    limit(
        "search text bytes",
        SEARCH_TEXT_BYTES_MAX as u64,
        CatalogQuery {
            search: Some("a".repeat(SEARCH_TEXT_BYTES_MAX + 1)),
            ..base.clone()
        },
    )
    .await;
    limit(
        "page items",
        u64::from(PAGE_ITEMS_MAX),
        CatalogQuery {
            page_items: Some(PAGE_ITEMS_MAX + 1),
            ..base.clone()
        },
    )
    .await;
    limit(
        "page bytes",
        u64::from(PAGE_BYTES_MAX),
        CatalogQuery {
            page_bytes: Some(PAGE_BYTES_MAX + 1),
            ..base.clone()
        },
    )
    .await;
    for invalid in [
        CatalogQuery {
            page_items: Some(0),
            ..base.clone()
        },
        CatalogQuery {
            page_bytes: Some(PAGE_BYTES_MIN - 1),
            ..base.clone()
        },
        CatalogQuery {
            search: Some("bad\u{7}text".into()),
            ..base.clone()
        },
    ] {
        assert_err!(
            s.store.catalog_page(invalid.clone()).await,
            Error::InvalidRequest { .. },
            "{invalid:?}"
        );
    }
    // The largest allowed values are accepted.
    s.store
        .catalog_page(CatalogQuery {
            search: Some("a".repeat(SEARCH_TEXT_BYTES_MAX)),
            page_items: Some(PAGE_ITEMS_MAX),
            page_bytes: Some(PAGE_BYTES_MAX),
            ..base
        })
        .await
        .unwrap();
    s.assert_unchanged(&before, "refused reads").await;
}

// spec: CAT-10
/// Search text matches capability IDs and summaries, ignoring ASCII case;
/// the exact capability filter keeps one capability.
pub async fn search_and_exact_capability_filters_apply<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let base = query(Reader::Tenant(acme()));
    let search = |text: &str| CatalogQuery {
        search: Some(text.into()),
        ..base.clone()
    };
    assert_eq!(
        listed_by(&s.store, search("CONTACT")).await,
        vec!["crm.contact.create", "crm.contact.read"]
    );
    // "send for tests" appears only in the summary of mail.send.
    assert_eq!(
        listed_by(&s.store, search("send for TESTS")).await,
        vec!["mail.send"]
    );
    assert!(
        listed_by(&s.store, search("nothing-like-this"))
            .await
            .is_empty()
    );
    assert_eq!(
        listed_by(
            &s.store,
            CatalogQuery {
                capability: Some(fixture::crm_read()),
                ..base.clone()
            }
        )
        .await,
        vec!["crm.contact.read"]
    );
    // An exact filter never reveals a capability the tenant cannot call.
    assert!(
        listed_by(
            &s.store,
            CatalogQuery {
                capability: Some(crm_create()),
                ..query(Reader::Tenant(stranger()))
            }
        )
        .await
        .is_empty()
    );
}

// spec: CAT-10, CAT-2
/// A definition over the size limit is refused with the limit and the
/// publication changes nothing.
pub async fn oversized_definition_is_refused<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let before = s.observe().await;
    let mut d = s.fleet.definition("crm.contact.create");
    d.schema = "s".repeat(DEFINITION_BYTES_MAX + 1);
    assert_err!(
        s.publish(vec![Change::UpsertDefinition(d)]).await,
        Error::LimitExceeded { max, .. } if max == DEFINITION_BYTES_MAX as u64
    );
    s.assert_unchanged(&before, "oversized definition").await;
    // Exactly at the limit is accepted.
    let mut d = s.fleet.definition("crm.contact.create");
    d.summary = String::new();
    d.schema = "s".repeat(DEFINITION_BYTES_MAX);
    s.publish(vec![Change::UpsertDefinition(d)]).await.unwrap();
}

// spec: CAT-8, CAT-10
/// Definition size counts serialized bytes, so every accepted definition
/// fits the smallest page: a definition that only grows when escaped is
/// refused, and a listing with the smallest byte budget loses nothing.
pub async fn definition_size_counts_serialized_bytes<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let before = s.observe().await;
    // 20 000 raw bytes, but six times that as JSON.
    let mut expanding = s.fleet.definition("audit.export");
    expanding.schema = "\u{1}".repeat(20_000);
    assert_err!(
        s.publish(vec![Change::UpsertDefinition(expanding)]).await,
        Error::LimitExceeded { max, .. } if max == DEFINITION_BYTES_MAX as u64
    );
    s.assert_unchanged(&before, "expanding definition").await;

    // Quotes double when escaped: this one is just within the limit.
    let mut quoted = s.fleet.definition("audit.export");
    quoted.summary = String::new();
    quoted.schema = "\"".repeat(DEFINITION_BYTES_MAX / 2);
    s.publish(vec![Change::UpsertDefinition(quoted)])
        .await
        .unwrap();
    let smallest = CatalogQuery {
        page_bytes: Some(PAGE_BYTES_MIN),
        ..query(internal(true))
    };
    assert_eq!(
        listed_by(&s.store, smallest).await,
        listed(&s.store, internal(true)).await,
        "the smallest pages list everything"
    );
    assert_eq!(listed(&s.store, internal(true)).await.len(), 4);
}

// spec: CAT-10
/// Every bound has the maximum `connreg::limits` documents, the figure
/// callers size their requests by. The tests at each bound follow its name
/// (exactly the maximum is accepted, one more is refused); this pins the
/// figures themselves, derived bounds included.
pub async fn limits_have_their_documented_values<H: Harness>(_harness: &H) {
    use connreg::limits::*;
    let documented: [(&str, u64, u64); 31] = [
        ("ID_BYTES_MAX", ID_BYTES_MAX as u64, 128),
        ("TEXT_BYTES_MAX", TEXT_BYTES_MAX as u64, 512),
        ("MANIFEST_BYTES_MAX", MANIFEST_BYTES_MAX as u64, 16_384),
        ("DEFINITION_BYTES_MAX", DEFINITION_BYTES_MAX as u64, 32_768),
        ("SEARCH_TEXT_BYTES_MAX", SEARCH_TEXT_BYTES_MAX as u64, 256),
        (
            "VERSION_CAPABILITIES_MAX",
            VERSION_CAPABILITIES_MAX as u64,
            256,
        ),
        ("BINDING_SCOPES_MAX", BINDING_SCOPES_MAX as u64, 8),
        (
            "TENANT_CAPABILITY_BINDINGS_MAX",
            TENANT_CAPABILITY_BINDINGS_MAX as u64,
            16,
        ),
        ("INSTANCE_REPLICAS_MAX", INSTANCE_REPLICAS_MAX as u64, 1_024),
        (
            "REPLICA_CAPACITY_MAX",
            u64::from(REPLICA_CAPACITY_MAX),
            10_000,
        ),
        ("SCOPE_LIMIT_MAX", u64::from(SCOPE_LIMIT_MAX), 1_000_000),
        ("PAGE_ITEMS_DEFAULT", u64::from(PAGE_ITEMS_DEFAULT), 50),
        ("PAGE_ITEMS_MAX", u64::from(PAGE_ITEMS_MAX), 500),
        ("PAGE_BYTES_DEFAULT", u64::from(PAGE_BYTES_DEFAULT), 262_144),
        ("PAGE_BYTES_MAX", u64::from(PAGE_BYTES_MAX), 1_048_576),
        ("PAGE_BYTES_MIN", u64::from(PAGE_BYTES_MIN), 66_688),
        (
            "ENTRY_FRAMING_BYTES_MAX",
            u64::from(ENTRY_FRAMING_BYTES_MAX),
            33_920,
        ),
        ("CURSOR_BYTES_MAX", CURSOR_BYTES_MAX as u64, 320),
        ("SEQUENCE_MAX", SEQUENCE_MAX, 9_223_372_036_854_775_807),
        (
            "PUBLICATION_CHANGES_MAX",
            PUBLICATION_CHANGES_MAX as u64,
            1_000,
        ),
        (
            "LEASE_MAINTENANCE_BATCH_MAX",
            u64::from(LEASE_MAINTENANCE_BATCH_MAX),
            1_000,
        ),
        ("LEASE_TTL_MS_MAX", LEASE_TTL_MS_MAX, 600_000),
        (
            "ROUTE_LOCK_ATTEMPTS_MAX",
            u64::from(ROUTE_LOCK_ATTEMPTS_MAX),
            8,
        ),
        (
            "CIRCUIT_THRESHOLD_MAX",
            u64::from(CIRCUIT_THRESHOLD_MAX),
            1_000,
        ),
        ("AUDIT_ENTRIES_MAX", AUDIT_ENTRIES_MAX as u64, 10_000),
        (
            "AUDIT_PAGE_ENTRIES_MAX",
            AUDIT_PAGE_ENTRIES_MAX as u64,
            1_000,
        ),
        ("CALL_DEADLINE_MS_MAX", CALL_DEADLINE_MS_MAX, 600_000),
        (
            "PUBLICATION_LOCK_ATTEMPTS_MAX",
            u64::from(PUBLICATION_LOCK_ATTEMPTS_MAX),
            40,
        ),
        (
            "PUBLICATION_LOCK_WAIT_MS",
            u64::from(PUBLICATION_LOCK_WAIT_MS),
            20,
        ),
        (
            "PUBLICATION_LOCK_BACKOFF_MS_PER_ATTEMPT",
            u64::from(PUBLICATION_LOCK_BACKOFF_MS_PER_ATTEMPT),
            5,
        ),
        ("INSPECT_ROWS_MAX", INSPECT_ROWS_MAX as u64, 200_000),
    ];
    for (name, value, figure) in documented {
        assert_eq!(value, figure, "{name}");
    }
}

// spec: CAT-9, CAT-10
/// An empty search text is no filter: it lists what a query without search
/// text lists, and the two are one query, so a cursor of either continues
/// the other.
pub async fn empty_search_text_is_no_filter<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let plain = CatalogQuery {
        page_items: Some(1),
        ..query(Reader::Tenant(acme()))
    };
    let empty = CatalogQuery {
        search: Some(String::new()),
        ..plain.clone()
    };
    assert_eq!(
        listed_by(&s.store, empty.clone()).await,
        listed_by(&s.store, plain.clone()).await
    );
    for (first, then) in [(&plain, &empty), (&empty, &plain)] {
        let cursor = s
            .store
            .catalog_page(first.clone())
            .await
            .unwrap()
            .next
            .expect("more pages");
        let second = s
            .store
            .catalog_page(CatalogQuery {
                cursor: Some(cursor),
                ..then.clone()
            })
            .await
            .expect("the same query continues");
        assert_eq!(second.entries.len(), 1);
    }
}
