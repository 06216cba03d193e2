//! Catalog read filters: the profile filter, search text and the exact
//! capability filter, and an empty search text that is no filter at all
//! (CAT-5, CAT-9, CAT-10).

use connreg::contracts::CatalogRead;
use connreg::*;

use crate::Harness;
use crate::fixture::{self, FleetOptions, acme, crm_create, profile, stranger};
use crate::support::listed_by;

use super::query;

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
