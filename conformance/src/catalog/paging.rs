//! Catalog pages: ordered by capability, bounded by items and by serialized
//! bytes, the byte budget inclusive (CAT-8, CAT-10).

use connreg::contracts::CatalogRead;
use connreg::limits::{PAGE_BYTES_MAX, PAGE_BYTES_MIN, PAGE_ITEMS_MAX};
use connreg::*;

use crate::Harness;
use crate::fixture::{self, FleetOptions, acme};
use crate::support::pages;

use super::{internal, query};

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
