//! `pages_list_all_once` (CAT-8): a paged read lists each capability once,
//! in capability order, no more on a page than its item limit, and, read
//! to its last page at one revision, every capability its reader may see
//! at that revision (and, for an internal reader, nothing else).
//!
//! A read is followed from its first page through the cursors its pages
//! hand out. The listing so far travels with each cursor, so readers that
//! happen to receive the same cursor text (same reader, query, revision
//! and last capability) carry the same listing. A read whose first page
//! the checker did not see, or that filters (search, capability, profile),
//! is checked for order and size only.

use std::collections::BTreeSet;

use connreg::limits::PAGE_ITEMS_DEFAULT;
use connreg::{CapabilityId, CatalogPage, CatalogQuery, Reader, Revision};

use super::catalog::CatalogModel;
use super::{Checker, invariant};

/// Paged reads followed at once, past which a new read is checked for
/// order and size only. A read occupies one entry per cursor it was
/// handed; a simulated run reads far fewer pages.
pub(super) const PAGED_READS_MAX: usize = 100_000;

/// A paged read up to one of its cursors.
#[derive(Debug, Clone)]
pub(super) struct PagedRead {
    revision: Revision,
    /// The last capability listed so far.
    last: Option<CapabilityId>,
    /// Everything listed so far.
    listed: BTreeSet<CapabilityId>,
}

impl Checker {
    /// Follows a page answer of a paged read: its order, its size, its
    /// place after the read's earlier pages. Returns the read's whole
    /// listing when this page ends a read followed from its first page.
    pub(super) fn follow_pages(
        &mut self,
        query: &CatalogQuery,
        page: &CatalogPage,
    ) -> Option<BTreeSet<CapabilityId>> {
        let items = query.page_items.unwrap_or(PAGE_ITEMS_DEFAULT) as usize;
        if page.entries.len() > items {
            self.violate(
                invariant::PAGES,
                format!(
                    "a page at revision {} lists {} entries, over its limit of {items}",
                    page.revision.0,
                    page.entries.len()
                ),
            );
        }
        if let Some(w) = page
            .entries
            .windows(2)
            .find(|w| w[0].capability >= w[1].capability)
        {
            self.violate(
                invariant::PAGES,
                format!(
                    "a page at revision {} lists {} before {}: out of capability order or twice",
                    page.revision.0, w[0].capability, w[1].capability
                ),
            );
        }
        let mut read = match &query.cursor {
            None => PagedRead {
                revision: page.revision,
                last: None,
                listed: BTreeSet::new(),
            },
            Some(cursor) => self.paged.get(cursor)?.clone(),
        };
        // Another revision than the cursor's is `page_single_revision`'s.
        if read.revision != page.revision {
            return None;
        }
        if let (Some(last), Some(first)) = (&read.last, page.entries.first())
            && first.capability <= *last
        {
            self.violate(
                invariant::PAGES,
                format!(
                    "a continuation page at revision {} starts at {}, not after {last}, the last capability of the page before",
                    page.revision.0, first.capability
                ),
            );
        }
        read.listed
            .extend(page.entries.iter().map(|e| e.capability.clone()));
        if let Some(e) = page.entries.last() {
            read.last = Some(e.capability.clone());
        }
        let filtered =
            query.search.is_some() || query.capability.is_some() || query.profile.is_some();
        match &page.next {
            Some(next) => {
                if self.paged.len() < PAGED_READS_MAX || self.paged.contains_key(next) {
                    self.paged.insert(next.clone(), read);
                }
                None
            }
            None => (!filtered).then_some(read.listed),
        }
    }
}

/// What is wrong with a whole read's listing, against what its reader may
/// see at the page's revision in `model`.
pub(super) fn listing_faults(
    model: &CatalogModel,
    reader: &Reader,
    revision: Revision,
    listed: &BTreeSet<CapabilityId>,
) -> Vec<String> {
    let mut faults = Vec::new();
    let visible = model.visible_to(reader);
    let missing: Vec<&CapabilityId> = visible.difference(listed).collect();
    if !missing.is_empty() {
        faults.push(format!(
            "a paged read for {} at revision {} ended without {missing:?}, which it may see",
            reader_name(reader),
            revision.0
        ));
    }
    // A tenant's or an anonymous reader's extra entries are
    // `no_cross_tenant_disclosure`'s.
    if matches!(reader, Reader::Internal { .. }) {
        let extra: Vec<&CapabilityId> = listed.difference(&visible).collect();
        if !extra.is_empty() {
            faults.push(format!(
                "a paged read for {} at revision {} lists {extra:?}, which it may not see",
                reader_name(reader),
                revision.0
            ));
        }
    }
    faults
}

fn reader_name(reader: &Reader) -> String {
    match reader {
        Reader::Tenant(t) => format!("tenant {t}"),
        Reader::Anonymous => "an anonymous reader".into(),
        Reader::Internal {
            include_unbound: false,
        } => "an internal reader".into(),
        Reader::Internal {
            include_unbound: true,
        } => "an internal reader of unbound capabilities too".into(),
    }
}
