//! connreg-conformance: one suite, generic over a backend, that every
//! connreg backend runs from a one-line test, the way River's
//! `riverdrivertest` serves every River driver.
//!
//! A backend implements [`Harness`] (a fresh, empty store per test) and
//! writes one test file:
//!
//! ```text
//! // conformance/tests/memory.rs
//! connreg_conformance::conformance_tests!(connreg_conformance::memory::MemoryHarness);
//! ```
//!
//! The macro expands to one `#[test]` per conformance test, grouped in one
//! module per rule area, so a failure is named
//! `route::resolve_with_other_tenant_returns_conflict`. Each async test
//! runs on its own multi-threaded runtime ([`run::block_on`]); the model
//! test is synchronous and owns its runtime. The argument is an expression
//! evaluated once per test, so `MyHarness::new()` works as well as a unit
//! struct.
//!
//! # Map
//!
//! - [`harness`]: what a backend provides.
//! - [`fixture`]: the one place test fleets are built, from options.
//! - [`check`]: invariant checkers that report violations.
//! - [`records`], [`catalog`], [`route`], [`pin`], [`settle`], [`lease`],
//!   [`status`]: one module per rule area (REC, CAT, ROUTE, PIN, SETTLE,
//!   LEASE, AUTH-5).
//! - [`race`]: concurrency tests (ROUTE-3, CAT-4, CAT-9, SETTLE-2), and
//!   mixed load that must never answer `Unavailable` (LOCK-1, LOCK-2).
//! - [`model`]: the proptest state machine against a reference model
//!   (fixed seed, checked-in regressions first; docs/TESTING.md).
//! - [`snapshots`]: insta snapshots of a page, a route and error texts.
//! - [`determinism`]: the same calls twice give the same bytes (run by
//!   the in-memory backend's own tests).
//! - [`memory`]: the in-memory backend's harnesses, plain and planted.
//!
//! Every test names the rules it covers in a `// spec: ID` line; the
//! workspace's rule coverage test reads those lines.

pub mod catalog;
pub mod check;
pub mod determinism;
pub mod fixture;
pub mod harness;
pub mod hold;
pub mod lease;
pub mod memory;
pub mod model;
pub mod pin;
pub mod race;
pub mod records;
pub mod route;
#[doc(hidden)]
pub mod run;
pub mod settle;
pub mod snapshots;
pub mod status;
mod support;

pub use harness::Harness;

/// The conformance suite for one backend: pass an expression that makes
/// its [`Harness`].
///
/// ```text
/// connreg_conformance::conformance_tests!(connreg_conformance::memory::MemoryHarness);
/// ```
#[macro_export]
macro_rules! conformance_tests {
    ($harness:expr) => {
        $crate::__conformance_area! { $harness; records: [
            disabled_connector_type_hides_its_capabilities,
            readmitting_a_version_with_another_artifact_is_conflict,
            version_status_is_the_only_mutable_part,
            instance_cannot_move_to_another_tenant,
            instance_references_travel_into_the_route,
            tenant_may_hold_several_bindings_for_one_capability,
            binding_must_stay_within_its_tenant,
            bindings_per_tenant_and_capability_stop_at_their_limit,
            registered_replica_carries_its_full_record,
            replica_registration_is_validated,
            replicas_per_instance_stop_at_their_limit,
            assignment_is_kept_after_release,
            records_hold_credentials_only_as_references,
            route_reserves_every_scope_or_none,
            typed_identifiers_reject_bad_text,
            record_fields_over_their_limits_are_refused,
            values_of_exactly_their_maximum_are_accepted,
            version_capabilities_and_profiles_stop_at_their_limit,
            record_text_takes_line_breaks_and_tabs_but_no_other_control_character,
        ] }
        $crate::__conformance_area! { $harness; catalog: [
            each_publication_adds_exactly_one_revision,
            failed_publication_changes_nothing,
            empty_or_oversized_publication_is_refused,
            replica_churn_does_not_advance_the_revision,
            tenant_read_lists_only_what_it_can_call,
            each_broken_link_hides_the_capability,
            profile_filter_keeps_supporting_versions,
            internal_read_may_include_unbound_definitions,
            internal_read_with_profile_needs_an_eligible_unbound_version,
            anonymous_read_returns_an_empty_page,
            pages_are_ordered_and_bounded_by_items,
            pages_are_bounded_by_serialized_bytes,
            page_byte_budget_holds_entries_up_to_exactly_its_size,
            cursor_after_a_publication_is_stale,
            tampered_or_foreign_cursors_are_rejected,
            forged_cursors_are_invalid,
            cursors_signed_with_the_previous_key_survive_a_rotation,
            read_limits_are_enforced_by_the_registry,
            search_and_exact_capability_filters_apply,
            oversized_definition_is_refused,
            definition_size_counts_serialized_bytes,
            limits_have_their_documented_values,
            empty_search_text_is_no_filter,
        ] }
        $crate::__conformance_area! { $harness; route: [
            route_request_cannot_name_a_target,
            request_without_tenant_is_rejected_before_anything_else,
            repeated_resolve_returns_the_same_assignment,
            resolve_with_other_tenant_returns_conflict,
            resolve_with_other_capability_returns_conflict,
            new_action_needs_an_enabled_binding,
            new_route_records_the_revision_it_was_decided_on,
            full_fleet_answers_no_capacity,
            resolve_reserves_scopes_replica_and_fence_together,
            resolved_route_is_committed_before_it_is_returned,
            draining_replica_takes_no_new_routes,
            replica_with_expired_lease_takes_no_new_routes,
            full_replica_takes_no_new_routes,
            replica_with_open_circuit_takes_no_new_routes,
            replica_of_another_capacity_class_is_filtered_out,
            cross_region_forbidden_keeps_routes_in_the_preferred_region,
            cross_region_allowed_spills_to_other_regions,
            replica_running_another_version_is_filtered_out,
            replica_registered_after_a_refused_resolve_takes_the_next_route,
            lower_binding_priority_wins,
            preferred_region_then_zone_rank_first,
            fewer_active_reservations_rank_before_the_hash,
            equal_candidates_follow_the_stable_route_hash,
            equal_keys_of_two_bindings_go_to_the_smaller_binding_id,
            routes_of_two_bindings_to_one_replica_keep_their_own_snapshot,
            topology_preferences_never_move_an_existing_route,
            cross_region_forbidden_without_a_preferred_region_is_refused,
        ] }
        $crate::__conformance_area! { $harness; pin: [
            pinned_assignment_keeps_identity_destination_and_policy,
            resolving_an_assigned_action_never_selects_again,
            released_route_is_reserved_again_on_the_same_replica,
            draining_pinned_replica_still_takes_its_retry,
            retry_with_offline_replica_fails_without_failover,
            retry_with_expired_lease_fails_without_failover,
            retry_with_open_circuit_fails_without_failover,
            retry_after_version_or_type_is_withdrawn_fails_without_failover,
            retry_on_full_replica_or_scope_answers_no_capacity,
            cancellation_reads_the_same_assignment,
            reconciliation_finds_the_provider_boundary,
        ] }
        $crate::__conformance_area! { $harness; settle: [
            settlement_accepts_each_of_the_four_outcomes,
            settlement_of_a_different_assignment_is_fence_lost,
            stale_copy_after_a_pinned_retry_is_fence_lost,
            settlement_releases_every_counter_at_once,
            settling_again_changes_nothing,
            completed_resets_the_unknown_count,
            unknown_outcomes_open_the_circuit_at_the_threshold,
            cancelled_and_lease_expired_count_neither_way,
            disabled_circuit_policy_counts_nothing,
            routing_never_closes_an_open_circuit,
            operator_closes_a_circuit_with_an_audit_entry,
            audit_log_pages_read_every_entry_in_order,
            outcome_and_state_names_are_their_serialized_names,
        ] }
        $crate::__conformance_area! { $harness; lease: [
            heartbeat_advances_sequence_and_lease,
            older_or_equal_heartbeat_is_ignored,
            replica_lifecycle_runs_ready_draining_offline_and_back,
            registering_a_live_replica_again_moves_its_lease,
            maintenance_is_bounded_per_call,
            maintenance_releases_reservations_as_lease_expired,
            maintenance_never_rewrites_a_destination,
            leases_follow_the_injected_clock_only,
            lifecycle_bad_input_is_refused_and_changes_nothing,
            health_sequence_past_its_bound_is_refused,
        ] }
        $crate::__conformance_area! { $harness; hold: [
            a_reservation_is_released_once_its_hold_passes,
            holds_are_released_oldest_first_within_the_batch,
            a_hold_outside_its_bounds_is_refused,
        ] }
        $crate::__conformance_area! { $harness; status: [
            status_counts_match_the_store,
            data_plane_handle_serves_the_same_store,
            change_feed_adds_up_to_a_full_inspection,
            change_feed_stays_exact_over_many_rewrites_of_the_same_rows,
        ] }
        $crate::__conformance_area! { $harness; race: [
            racing_resolves_of_one_action_create_one_assignment,
            racing_resolves_never_exceed_capacity,
            publications_racing_paginated_reads_never_mix_revisions,
            racing_settlements_release_once,
            settlements_racing_retries_keep_counters_exact,
            racing_unknown_settlements_count_every_one,
            racing_heartbeats_keep_the_highest_sequence,
            mixed_load_over_a_full_binding_never_answers_unavailable,
        ] }
        $crate::__conformance_area! { $harness; snapshots: [
            catalog_page_matches_its_snapshot,
            route_assignment_matches_its_snapshot,
            error_texts_match_their_snapshot,
        ] }
        mod model {
            #[allow(unused_imports)]
            use super::*;

            #[test]
            fn reference_model_agrees_with_the_backend() {
                $crate::model::run($harness).unwrap_or_else(|failure| panic!("{failure}"));
            }
        }
    };
}

/// One area's tests. Not public API: use [`conformance_tests!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_area {
    ($harness:expr; $area:ident : [$($name:ident),* $(,)?]) => {
        mod $area {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[test]
                fn $name() {
                    $crate::run::block_on(async { $crate::$area::$name(&$harness).await });
                }
            )*
        }
    };
}
