//! Catalog limits: read limits enforced by the registry, definitions sized
//! by their serialized bytes, and every bound at its documented value
//! (CAT-2, CAT-8, CAT-10).

use connreg::contracts::CatalogRead;
use connreg::limits::{
    DEFINITION_BYTES_MAX, PAGE_BYTES_MAX, PAGE_BYTES_MIN, PAGE_ITEMS_MAX, SEARCH_TEXT_BYTES_MAX,
};
use connreg::*;

use crate::Harness;
use crate::fixture::{self, FleetOptions, acme};
use crate::support::{assert_err, listed, listed_by};

use super::{internal, query};

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
