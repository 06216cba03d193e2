//! Goal: the catalog publishes one revision at a time, all or nothing, and
//! pages read it tenant-scoped, ordered, bounded and pinned to one
//! revision (CAT-1..CAT-10).
//!
//! The tests are grouped by what they check: publications and the
//! revision (`publication`), what each reader sees (`visibility`), profile
//! and search filters (`filters`), page order and bounds (`paging`),
//! cursors (`cursors`), and the documented limits (`limits`).

use connreg::{CatalogQuery, Reader};

mod cursors;
mod filters;
mod limits;
mod paging;
mod publication;
mod visibility;

pub use cursors::{
    cursor_after_a_publication_is_stale, cursors_signed_with_the_previous_key_survive_a_rotation,
    forged_cursors_are_invalid, tampered_or_foreign_cursors_are_rejected,
};
pub use filters::{
    empty_search_text_is_no_filter, profile_filter_keeps_supporting_versions,
    search_and_exact_capability_filters_apply,
};
pub use limits::{
    definition_size_counts_serialized_bytes, limits_have_their_documented_values,
    oversized_definition_is_refused, read_limits_are_enforced_by_the_registry,
};
pub use paging::{
    page_byte_budget_holds_entries_up_to_exactly_its_size, pages_are_bounded_by_serialized_bytes,
    pages_are_ordered_and_bounded_by_items,
};
pub use publication::{
    each_publication_adds_exactly_one_revision, empty_or_oversized_publication_is_refused,
    failed_publication_changes_nothing, replica_churn_does_not_advance_the_revision,
};
pub use visibility::{
    anonymous_read_returns_an_empty_page, each_broken_link_hides_the_capability,
    internal_read_may_include_unbound_definitions,
    internal_read_with_profile_needs_an_eligible_unbound_version,
    tenant_read_lists_only_what_it_can_call,
};

fn query(reader: Reader) -> CatalogQuery {
    CatalogQuery::first_page(reader)
}

fn internal(include_unbound: bool) -> Reader {
    Reader::Internal { include_unbound }
}
