//! Invariants: checked as answers arrive, and once more at the end over a
//! full inspection of the store (`connreg::Inspect`).
//!
//! At the end, against the snapshot (the whole store, the run's rows and
//! any other):
//!
//! - every replica's `active` equals the live reservations on it, and is
//!   at most its capacity (ROUTE-7, SETTLE-3);
//! - every admission scope's `in_use` equals the live reservations that
//!   hold it, and is at most its limit (REC-8);
//! - one route per action, and no fence token on two routes;
//!
//! and over the run's own routes (those whose action starts with the run
//! prefix): each exactly the assignment its client was given, reserved or
//! released as its client left it, and no route nobody asked for
//! (ROUTE-3, ROUTE-7, PIN-1, SETTLE-3, SETTLE-4);
//! - the catalog revision is the one the fleet was published at: routing,
//!   settlement and heartbeats never move it (CAT-3);
//! - aggregate status agrees with the inspection (AUTH-5).

use std::collections::BTreeMap;

use connreg::StoreSnapshot;
use connreg::{ActionId, Outcome, ReplicaId, Revision, RouteAssignment, ScopeId, StatusReport};
use serde::{Deserialize, Serialize};

use super::limits::VIOLATION_DETAILS_MAX;

/// What kind of invariant a violation broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ViolationKind {
    /// A replica's active count differs from its live reservations.
    ReplicaAccounting,
    /// A replica holds more reservations than its capacity.
    ReplicaOverCapacity,
    /// A scope's counter differs from its live reservations.
    ScopeAccounting,
    /// A scope counts more reservations than its limit.
    ScopeOverLimit,
    /// Two routes for one action.
    OneRoutePerAction,
    /// A route differs from the assignment its client was given.
    RouteChanged,
    /// A route is reserved where its client released it, or the reverse,
    /// or carries another settlement outcome.
    ReservationState,
    /// An action its client was refused has a route.
    RouteWithoutResolve,
    /// An action its client was given a route for has none.
    RouteMissing,
    /// The catalog revision moved without a publication.
    RevisionMoved,
    /// Aggregate status disagrees with the inspection.
    StatusDisagrees,
    /// A resolve of a new action did not create its route.
    NewActionNotCreated,
    /// A duplicate resolve returned something other than the held route.
    DuplicateResolveChanged,
    /// Settling a held reservation did not release it.
    SettleNotReleased,
    /// A tenant's catalog page missed capabilities it holds bindings for.
    CatalogIncomplete,
    /// Two routes carry one fence token.
    FenceReused,
}

impl ViolationKind {
    /// The kind's name in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            ViolationKind::ReplicaAccounting => "replica_accounting",
            ViolationKind::ReplicaOverCapacity => "replica_over_capacity",
            ViolationKind::ScopeAccounting => "scope_accounting",
            ViolationKind::ScopeOverLimit => "scope_over_limit",
            ViolationKind::OneRoutePerAction => "one_route_per_action",
            ViolationKind::RouteChanged => "route_changed",
            ViolationKind::ReservationState => "reservation_state",
            ViolationKind::RouteWithoutResolve => "route_without_resolve",
            ViolationKind::RouteMissing => "route_missing",
            ViolationKind::RevisionMoved => "revision_moved",
            ViolationKind::StatusDisagrees => "status_disagrees",
            ViolationKind::NewActionNotCreated => "new_action_not_created",
            ViolationKind::DuplicateResolveChanged => "duplicate_resolve_changed",
            ViolationKind::SettleNotReleased => "settle_not_released",
            ViolationKind::CatalogIncomplete => "catalog_incomplete",
            ViolationKind::FenceReused => "fence_reused",
        }
    }
}

/// Violations: every one counted, the first [`VIOLATION_DETAILS_MAX`]
/// described.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violations {
    counts: BTreeMap<ViolationKind, u64>,
    details: Vec<String>,
}

impl Violations {
    /// Counts one violation; `detail` is called only while there is room
    /// for its description.
    pub fn add(&mut self, kind: ViolationKind, detail: impl FnOnce() -> String) {
        *self.counts.entry(kind).or_default() += 1;
        if self.details.len() < VIOLATION_DETAILS_MAX {
            self.details
                .push(format!("{}: {}", kind.as_str(), detail()));
        }
    }

    /// Adds another set's counts and, room allowing, its descriptions.
    pub fn merge(&mut self, other: &Violations) {
        for (kind, n) in &other.counts {
            *self.counts.entry(*kind).or_default() += n;
        }
        let room = VIOLATION_DETAILS_MAX.saturating_sub(self.details.len());
        self.details
            .extend(other.details.iter().take(room).cloned());
    }

    /// All violations.
    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }

    /// Counts by kind.
    pub fn counts(&self) -> &BTreeMap<ViolationKind, u64> {
        &self.counts
    }

    /// The first descriptions.
    pub fn details(&self) -> &[String] {
        &self.details
    }
}

/// What a client knows of one action it resolved as new.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Expect {
    /// It holds this assignment's reservation.
    Reserved(RouteAssignment),
    /// It settled this assignment's reservation with this outcome.
    Released(RouteAssignment, Outcome),
    /// The resolve was refused with an expected error: no route exists.
    NoRoute,
    /// A call about it failed unexpectedly; its state is unknown.
    Unknown,
}

/// One action a client resolved as new, and what it expects of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tracked {
    /// The action.
    pub action: ActionId,
    /// What its route must look like.
    pub expect: Expect,
}

/// How much the end check read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checked {
    /// Replicas checked.
    pub replicas: u64,
    /// Admission scopes checked.
    pub scopes: u64,
    /// Routes checked.
    pub routes: u64,
    /// Live reservations found.
    pub live_reservations: u64,
    /// Routes of other runs or of the operator's own fleet: their
    /// accounting was checked, their assignments were not.
    #[serde(default)]
    pub foreign_routes: u64,
}

/// Checks the end-of-run invariants over `snapshot` and `status` against
/// what the clients were told (`tracked`, every new action of the run,
/// each starting with `prefix`).
pub fn check_store(
    snapshot: &StoreSnapshot,
    status: &StatusReport,
    published_at: Revision,
    prefix: &str,
    tracked: &[Tracked],
    violations: &mut Violations,
) -> Checked {
    let mut by_action: BTreeMap<&ActionId, &connreg::RouteRecord> = BTreeMap::new();
    let mut on_replica: BTreeMap<&ReplicaId, u64> = BTreeMap::new();
    let mut on_scope: BTreeMap<&ScopeId, u64> = BTreeMap::new();
    let mut live = 0u64;
    let mut fences: BTreeMap<u64, &ActionId> = BTreeMap::new();
    for route in &snapshot.routes {
        let fence = route.assignment.reservation.fence.0;
        if let Some(other) = fences.insert(fence, &route.assignment.identity.action) {
            let action = &route.assignment.identity.action;
            violations.add(ViolationKind::FenceReused, || {
                format!("actions {other} and {action} both hold fence {fence}")
            });
        }
        let action = &route.assignment.identity.action;
        if by_action.insert(action, route).is_some() {
            violations.add(ViolationKind::OneRoutePerAction, || {
                format!("action {action} has more than one route")
            });
        }
        if route.reserved {
            live += 1;
            *on_replica
                .entry(&route.assignment.destination.replica)
                .or_default() += 1;
            for scope in &route.assignment.reservation.scopes {
                *on_scope.entry(scope).or_default() += 1;
            }
        }
    }

    for replica in &snapshot.replicas {
        let id = &replica.spec.id;
        let expected = on_replica.get(id).copied().unwrap_or(0);
        if u64::from(replica.active) != expected {
            violations.add(ViolationKind::ReplicaAccounting, || {
                format!(
                    "replica {id} counts {} active, {expected} reservations are live",
                    replica.active
                )
            });
        }
        if replica.active > replica.spec.capacity {
            violations.add(ViolationKind::ReplicaOverCapacity, || {
                format!(
                    "replica {id} holds {} of capacity {}",
                    replica.active, replica.spec.capacity
                )
            });
        }
    }
    for usage in &snapshot.scopes {
        let id = &usage.scope.id;
        let expected = on_scope.get(id).copied().unwrap_or(0);
        if u64::from(usage.in_use) != expected {
            violations.add(ViolationKind::ScopeAccounting, || {
                format!(
                    "scope {id} counts {} in use, {expected} reservations are live",
                    usage.in_use
                )
            });
        }
        if usage.in_use > usage.scope.limit {
            violations.add(ViolationKind::ScopeOverLimit, || {
                format!(
                    "scope {id} counts {} of limit {}",
                    usage.in_use, usage.scope.limit
                )
            });
        }
    }

    let mut known = 0usize;
    for t in tracked {
        let route = by_action.get(&t.action);
        if route.is_some() {
            known += 1;
        }
        let action = &t.action;
        match (&t.expect, route) {
            (Expect::Unknown, _) | (Expect::NoRoute, None) => {}
            (Expect::NoRoute, Some(_)) => {
                violations.add(ViolationKind::RouteWithoutResolve, || {
                    format!("action {action} was refused but has a route")
                });
            }
            (Expect::Reserved(_) | Expect::Released(..), None) => {
                violations.add(ViolationKind::RouteMissing, || {
                    format!("action {action} was routed but has no route")
                });
            }
            (Expect::Reserved(a), Some(r)) => {
                if r.assignment != *a {
                    violations.add(ViolationKind::RouteChanged, || {
                        format!("action {action}: the stored assignment differs from the one given")
                    });
                } else if !r.reserved {
                    violations.add(ViolationKind::ReservationState, || {
                        format!("action {action} is held by its client but released in the store")
                    });
                }
            }
            (Expect::Released(a, outcome), Some(r)) => {
                if r.assignment != *a {
                    violations.add(ViolationKind::RouteChanged, || {
                        format!("action {action}: the stored assignment differs from the one given")
                    });
                } else if r.reserved || r.last_settlement != Some(*outcome) {
                    violations.add(ViolationKind::ReservationState, || {
                        format!(
                            "action {action} was settled {} but the store has reserved={} last={:?}",
                            outcome.as_str(),
                            r.reserved,
                            r.last_settlement
                        )
                    });
                }
            }
        }
    }
    // Every route of the run belongs to an action some client resolved as
    // new.
    let ours = by_action
        .keys()
        .filter(|a| a.as_str().starts_with(prefix))
        .count();
    let unasked = ours.saturating_sub(known);
    for _ in 0..unasked {
        violations.add(ViolationKind::RouteWithoutResolve, || {
            "a route exists for an action no client resolved".into()
        });
    }

    if snapshot.revision != published_at || status.revision != published_at {
        violations.add(ViolationKind::RevisionMoved, || {
            format!(
                "the fleet was published at revision {}, the store reads {} (status {})",
                published_at.0, snapshot.revision.0, status.revision.0
            )
        });
    }
    if status.active_assignments != live || status.assignments_total != snapshot.routes.len() as u64
    {
        violations.add(ViolationKind::StatusDisagrees, || {
            format!(
                "status counts {} active of {} routes, the inspection {live} of {}",
                status.active_assignments,
                status.assignments_total,
                snapshot.routes.len()
            )
        });
    }

    Checked {
        replicas: snapshot.replicas.len() as u64,
        scopes: snapshot.scopes.len() as u64,
        routes: snapshot.routes.len() as u64,
        live_reservations: live,
        foreign_routes: (by_action.len() - ours) as u64,
    }
}
