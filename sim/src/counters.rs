//! Outcome counters: what a run saw, computed from its trace alone.
//!
//! Scenario expectations (`[expect.at_least]`, `[expect.at_most]`) name
//! these counters, so a scenario whose fault never fires fails. One list
//! defines the counters, their bounds type and their names.

use serde::{Deserialize, Serialize};

macro_rules! counters {
    ($($name:ident: $doc:literal),* $(,)?) => {
        /// What one run saw. Every field is derived from trace events by the
        /// checker, so a trace file alone reproduces it.
        #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct Counters {
            $(#[doc = $doc] pub $name: u64,)*
        }

        /// Bounds on counters, as a scenario's expectations state them.
        #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct CounterBounds {
            $(
                #[doc = $doc]
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $name: Option<u64>,
            )*
        }

        impl Counters {
            /// Every counter's name, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];

            /// (name, value) of every counter, in declaration order.
            pub fn pairs(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name)),*]
            }
        }

        impl CounterBounds {
            /// (name, bound) of every bounded counter, in declaration order.
            pub fn pairs(&self) -> Vec<(&'static str, u64)> {
                let mut out = Vec::new();
                $(if let Some(v) = self.$name { out.push((stringify!($name), v)); })*
                out
            }

            /// True when no counter is bounded.
            pub fn is_empty(&self) -> bool {
                self.pairs().is_empty()
            }
        }
    };
}

counters! {
    actions_started: "Actions a dispatcher started.",
    actions_ended: "Actions that ended (settled or failed with a typed error).",
    actions_abandoned: "Actions left open by a dispatcher that crashed.",
    actions_reconciled: "Abandoned actions a restarted dispatcher reconciled from their retained routes.",
    actions_completed: "Actions that ended settled as completed.",
    actions_outcome_unknown: "Actions that ended settled as outcome_unknown.",
    actions_cancelled: "Actions that ended settled as cancelled.",
    actions_failed: "Actions that ended with a typed error.",
    resolve_created: "Resolves that created a route.",
    resolve_existing: "Resolves that returned the existing, still reserved route.",
    resolve_reserved: "Resolves that reserved a released route again (pinned).",
    pinned_on_draining: "Pinned re-reservations on a replica last seen draining.",
    routes_preferred_zone: "New routes in the zone their request preferred.",
    routes_other_region: "New routes outside the region their request preferred.",
    conflict: "Replies with the Conflict error.",
    no_eligible_binding: "Replies with the NoEligibleBinding error.",
    no_capacity: "Replies with the NoCapacity error.",
    replica_unavailable: "Replies with the ReplicaUnavailable error.",
    fence_lost: "Replies with the FenceLost error.",
    stale_cursor: "Replies with the StaleCursor error.",
    unavailable: "Replies with the Unavailable error.",
    settle_released: "Settlements that released a reservation.",
    settle_idempotent: "Settlements of an already released reservation (no change).",
    settled_completed: "Releasing settlements with outcome completed.",
    settled_outcome_unknown: "Releasing settlements with outcome outcome_unknown.",
    settled_cancelled: "Releasing settlements with outcome cancelled.",
    settled_lease_expired: "Settlements with outcome lease_expired sent by a dispatcher (released or not).",
    lease_expired: "Reservations released by lease maintenance.",
    holds_expired: "Reservations lease maintenance released because their hold ended (PIN-8).",
    replicas_expired: "Replicas lease maintenance marked offline.",
    circuits_opened: "Replica circuits seen going from closed to open.",
    circuits_closed: "Circuits closed by an operator.",
    registrations: "Successful replica registrations.",
    heartbeats: "Heartbeats applied.",
    heartbeats_ignored: "Heartbeats ignored as older than the stored sequence.",
    drains: "Successful replica drains.",
    publications: "Successful catalog publications (the setup one excluded).",
    pages: "Catalog pages served.",
    page_continuations: "Catalog pages served from a continuation cursor.",
    executions: "Provider side effects in the ledger.",
    cancels: "Cancellations delivered to a replica that was running the action.",
    misdirected: "Dispatches a replica refused because the route names another replica.",
    answers_lost: "Registry answers dropped after the store committed.",
    rpc_failures: "Calls that failed in transport (timeout, refused, reset).",
    crashes: "Host crashes.",
    restarts: "Host restarts.",
    partitions: "Network partitions (two-way or one-way).",
    holds: "Network holds.",
    latency_spikes: "Latency changes.",
    loss_windows: "Message loss windows.",
    clock_jumps: "Registry clock jumps.",
    db_cuts: "Database connection cuts (all, or the next commit).",
    db_stalls: "Database stalls.",
    db_terminates: "Database session terminations.",
    db_restarts: "Database server restarts.",
    db_failovers: "Database failovers: the primary stopped, its standby promoted.",
    zone_silences: "Zones whose heartbeats a fault silenced.",
    group_crashes: "Replicas of groups crashed by a fleet-grain fault.",
    group_drains: "Replicas of groups a fleet-grain fault drained.",
    snapshots: "Store snapshots taken.",
}
