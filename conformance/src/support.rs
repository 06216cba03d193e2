//! Small helpers the test modules share: error matching and catalog
//! listing.

use connreg::contracts::CatalogRead;
use connreg::{CatalogPage, CatalogQuery, Reader};

/// Asserts that a result is an error matching a pattern (variants, never
/// message text), with an optional guard and context message.
macro_rules! assert_err {
    ($result:expr, $pattern:pat $(if $guard:expr)? $(, $($msg:tt)+)?) => {
        match $result {
            Err($pattern) $(if $guard)? => {}
            #[allow(unreachable_patterns)]
            other => {
                let context: String = String::new() $(+ &format!(" ({})", format!($($msg)+)))?;
                panic!(
                    "expected Err({}), got {:?}{}",
                    stringify!($pattern),
                    other,
                    context
                )
            }
        }
    };
}
pub(crate) use assert_err;

/// Every page of a listing, following cursors from the first page.
/// Panics on any error (tests that expect errors call the store directly).
pub(crate) async fn pages<S: CatalogRead>(store: &S, query: CatalogQuery) -> Vec<CatalogPage> {
    let mut out = Vec::new();
    let mut query = query;
    loop {
        let page = store.catalog_page(query.clone()).await.expect("page");
        let next = page.next.clone();
        out.push(page);
        match next {
            Some(cursor) => query.cursor = Some(cursor),
            None => return out,
        }
        assert!(out.len() <= 10_000, "listing does not end");
    }
}

/// The capability IDs a reader sees, over all pages.
pub(crate) async fn listed<S: CatalogRead>(store: &S, reader: Reader) -> Vec<String> {
    pages(store, CatalogQuery::first_page(reader))
        .await
        .into_iter()
        .flat_map(|p| p.entries)
        .map(|e| e.capability.to_string())
        .collect()
}

/// The capability IDs of one listing query, over all pages.
pub(crate) async fn listed_by<S: CatalogRead>(store: &S, query: CatalogQuery) -> Vec<String> {
    pages(store, query)
        .await
        .into_iter()
        .flat_map(|p| p.entries)
        .map(|e| e.capability.to_string())
        .collect()
}
