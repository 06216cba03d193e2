//! Goal: the shapes callers see are pinned by insta snapshots shared by
//! every backend: a catalog page, a route assignment, and the text of
//! every error variant (CAT-8, PIN-1, and the error contract).
//!
//! Values that legitimately differ between backends (cursor text, fence
//! numbers) are redacted before the comparison.

use connreg::contracts::{CatalogRead, ReplicaLifecycle, Routing};
use connreg::*;
use serde::Serialize;

use crate::Harness;
use crate::fixture::{self, FleetOptions, acme, crm_create, globex, replica, stranger};

/// One error as a caller sees it.
#[derive(Debug, Serialize)]
struct ErrorText {
    case: &'static str,
    kind: &'static str,
    text: String,
}

fn text(case: &'static str, e: &Error) -> ErrorText {
    ErrorText {
        case,
        kind: e.kind(),
        text: e.to_string(),
    }
}

// spec: CAT-8
/// A tenant's first catalog page: entries in order, the revision, and a
/// cursor (redacted).
pub async fn catalog_page_matches_its_snapshot<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let page = s
        .store
        .catalog_page(CatalogQuery {
            page_items: Some(2),
            ..CatalogQuery::first_page(Reader::Tenant(acme()))
        })
        .await
        .unwrap();
    let mut value = serde_json::to_value(&page).unwrap();
    assert!(page.next.is_some());
    value["next"] = serde_json::json!("[cursor]");
    insta::assert_json_snapshot!("catalog_page", value);
}

// spec: PIN-1, REC-6
/// A route assignment, grouped as identity, destination, policy snapshot
/// and reservation (fence redacted).
pub async fn route_assignment_matches_its_snapshot<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let resolved = s.resolve("a1", &acme(), &crm_create()).await.unwrap();
    let mut value = serde_json::to_value(&resolved).unwrap();
    value["assignment"]["reservation"]["fence"] = serde_json::json!("[fence]");
    insta::assert_json_snapshot!("route_assignment", value);
}

// spec: ROUTE-4, CAT-10
/// The text of every error variant, and of the errors the backend itself
/// returns for typical bad requests: lowercase, and never naming another
/// tenant's data.
pub async fn error_texts_match_their_snapshot<H: Harness>(harness: &H) {
    let every_variant = [
        Error::InvalidRequest {
            what: "route request",
            reason: "a verified tenant is required".into(),
        },
        Error::LimitExceeded {
            what: "page items",
            max: 500,
        },
        Error::NotFound {
            what: "instance",
            id: "i-missing".into(),
        },
        Error::StaleCursor,
        Error::InvalidCursor {
            reason: "check failed",
        },
        Error::Conflict {
            reason: "the action is already assigned under other coordinates",
        },
        Error::NoEligibleBinding,
        Error::NoCapacity,
        Error::ReplicaUnavailable,
        Error::FenceLost,
        Error::Unavailable {
            reason: "connection refused".into(),
        },
    ];
    let variants: Vec<ErrorText> = every_variant.iter().map(|e| text("variant", e)).collect();
    let kinds: std::collections::BTreeSet<&str> = variants.iter().map(|v| v.kind).collect();
    assert_eq!(kinds.len(), every_variant.len(), "one entry per variant");
    for v in &variants {
        assert_eq!(v.text, v.text.to_lowercase(), "messages are lowercase");
    }
    insta::assert_yaml_snapshot!("error_variants", variants);

    // The same variants as this backend produces them.
    let s = fixture::open(
        harness,
        FleetOptions {
            replicas_per_instance: 1,
            replica_capacity: 1,
            ..FleetOptions::default()
        },
    )
    .await;
    let mut produced = Vec::new();
    let mut push = |case, r: Result<()>| produced.push(text(case, &r.expect_err(case)));
    let mut tenantless = s.fleet.request("a1", &acme(), &crm_create());
    tenantless.tenant = None;
    push(
        "resolve without a tenant",
        s.store.route_resolve(tenantless).await.map(drop),
    );
    push(
        "page over the item limit",
        s.store
            .catalog_page(CatalogQuery {
                page_items: Some(connreg::limits::PAGE_ITEMS_MAX + 1),
                ..CatalogQuery::first_page(Reader::Tenant(acme()))
            })
            .await
            .map(drop),
    );
    let mut dangling = s.fleet.binding("b-acme-crm-read");
    dangling.instance = fixture::instance("i-missing");
    push(
        "publication with a dangling instance",
        s.publish(vec![Change::UpsertBinding(dangling)])
            .await
            .map(drop),
    );
    push(
        "malformed cursor",
        s.store
            .catalog_page(CatalogQuery {
                cursor: Some("not-a-cursor".into()),
                ..CatalogQuery::first_page(Reader::Tenant(acme()))
            })
            .await
            .map(drop),
    );
    // Every bound is inclusive: a cursor of exactly the longest length is
    // read (and found malformed); one byte more is refused for its length.
    for (case, len) in [
        (
            "cursor at its length bound",
            connreg::limits::CURSOR_BYTES_MAX,
        ),
        (
            "cursor over its length bound",
            connreg::limits::CURSOR_BYTES_MAX + 1,
        ),
    ] {
        push(
            case,
            s.store
                .catalog_page(CatalogQuery {
                    cursor: Some("x".repeat(len)),
                    ..CatalogQuery::first_page(Reader::Tenant(acme()))
                })
                .await
                .map(drop),
        );
    }
    push(
        "no binding",
        s.resolve("a1", &stranger(), &crm_create()).await.map(drop),
    );
    let a = s.resolve_acme("a1").await;
    push(
        "other tenant",
        s.resolve("a1", &globex(), &crm_create()).await.map(drop),
    );
    push(
        "no capacity",
        s.resolve("a2", &acme(), &crm_create()).await.map(drop),
    );
    let mut stale = a.clone();
    stale.reservation.fence = FenceToken(a.reservation.fence.0 + 1);
    push(
        "settlement of another fence",
        s.settle(&stale, Outcome::Completed).await.map(drop),
    );
    s.settle(&a, Outcome::Completed).await.unwrap();
    s.store
        .replica_drain(replica("i-acme-crm-r0"))
        .await
        .unwrap();
    s.clock.advance_ms(s.fleet.options.lease_ttl_ms);
    push(
        "retry on an expired replica",
        s.resolve("a1", &acme(), &crm_create()).await.map(drop),
    );
    let first = s
        .store
        .catalog_page(CatalogQuery {
            page_items: Some(1),
            ..CatalogQuery::first_page(Reader::Tenant(acme()))
        })
        .await
        .unwrap();
    s.publish(vec![Change::UpsertType(s.fleet.connector_type("ty-crm"))])
        .await
        .unwrap();
    push(
        "stale cursor",
        s.store
            .catalog_page(CatalogQuery {
                page_items: Some(1),
                cursor: first.next,
                ..CatalogQuery::first_page(Reader::Tenant(acme()))
            })
            .await
            .map(drop),
    );
    insta::assert_yaml_snapshot!("backend_errors", produced);
}
