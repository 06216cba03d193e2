//! Invariant checkers over a [`StoreSnapshot`]: they report violations
//! instead of panicking, so the plant tests can show they fire.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use connreg::{ActionId, FenceToken, ReplicaId, ScopeId, StoreSnapshot};

/// One broken invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Which invariant, in a few words.
    pub invariant: &'static str,
    /// What was seen.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.invariant, self.detail)
    }
}

/// Capacity accounting (ROUTE-7, SETTLE-3, REC-8): every replica's active
/// count and every scope's counter equal the live reservations that name
/// them, and never exceed capacity or limit. Scopes in `lowered` had
/// their limit lowered below their use by a publication and may sit above
/// it until enough reservations are released.
pub fn capacity(snapshot: &StoreSnapshot, lowered: &BTreeSet<ScopeId>) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut by_replica: BTreeMap<&ReplicaId, u32> = BTreeMap::new();
    let mut by_scope: BTreeMap<&ScopeId, u32> = BTreeMap::new();
    for route in snapshot.routes.iter().filter(|r| r.reserved) {
        *by_replica
            .entry(&route.assignment.destination.replica)
            .or_default() += 1;
        for s in &route.assignment.reservation.scopes {
            *by_scope.entry(s).or_default() += 1;
        }
    }
    for r in &snapshot.replicas {
        let live = by_replica.remove(&r.spec.id).unwrap_or(0);
        if r.active != live {
            violations.push(Violation {
                invariant: "replica active count equals live reservations",
                detail: format!("{}: active {} but {live} live", r.spec.id, r.active),
            });
        }
        if r.active > r.spec.capacity {
            violations.push(Violation {
                invariant: "replica active count within capacity",
                detail: format!("{}: active {} > {}", r.spec.id, r.active, r.spec.capacity),
            });
        }
    }
    for (replica, live) in by_replica {
        violations.push(Violation {
            invariant: "reservations name a known replica",
            detail: format!("{replica}: {live} live reservations on no replica"),
        });
    }
    for s in &snapshot.scopes {
        let live = by_scope.remove(&s.scope.id).unwrap_or(0);
        if s.in_use != live {
            violations.push(Violation {
                invariant: "scope counter equals live reservations",
                detail: format!("{}: in use {} but {live} live", s.scope.id, s.in_use),
            });
        }
        if s.in_use > s.scope.limit && !lowered.contains(&s.scope.id) {
            violations.push(Violation {
                invariant: "scope counter within limit",
                detail: format!("{}: in use {} > {}", s.scope.id, s.in_use, s.scope.limit),
            });
        }
    }
    for (scope, live) in by_scope {
        violations.push(Violation {
            invariant: "reservations name a known scope",
            detail: format!("{scope}: {live} live reservations on no scope"),
        });
    }
    violations
}

/// One route per action, and fence tokens unique across routes (ROUTE-3,
/// ROUTE-7).
pub fn routes(snapshot: &StoreSnapshot) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut actions: BTreeSet<&ActionId> = BTreeSet::new();
    let mut fences: BTreeMap<FenceToken, &ActionId> = BTreeMap::new();
    for route in &snapshot.routes {
        let a = &route.assignment;
        if !actions.insert(&a.identity.action) {
            violations.push(Violation {
                invariant: "one route per action",
                detail: format!("{} has more than one route", a.identity.action),
            });
        }
        if let Some(other) = fences.insert(a.reservation.fence, &a.identity.action) {
            violations.push(Violation {
                invariant: "fence tokens unique",
                detail: format!(
                    "fence {:?} held by {other} and {}",
                    a.reservation.fence, a.identity.action
                ),
            });
        }
        if a.reservation.attempt == 0 {
            violations.push(Violation {
                invariant: "attempts count from one",
                detail: format!("{} has attempt 0", a.identity.action),
            });
        }
    }
    violations
}

/// No silent failover (PIN-1, PIN-4, LEASE-3): every route of `before` is
/// still there in `after` with the same identity, destination and policy.
pub fn no_failover(before: &StoreSnapshot, after: &StoreSnapshot) -> Vec<Violation> {
    let after_routes: BTreeMap<&ActionId, _> = after
        .routes
        .iter()
        .map(|r| (&r.assignment.identity.action, &r.assignment))
        .collect();
    let mut violations = Vec::new();
    for r in &before.routes {
        let a = &r.assignment;
        match after_routes.get(&a.identity.action) {
            None => violations.push(Violation {
                invariant: "routes are never deleted",
                detail: format!("{} disappeared", a.identity.action),
            }),
            Some(now) => {
                if now.identity != a.identity
                    || now.destination != a.destination
                    || now.policy != a.policy
                {
                    violations.push(Violation {
                        invariant: "no silent failover",
                        detail: format!(
                            "{} moved from {} to {}",
                            a.identity.action, a.destination.replica, now.destination.replica
                        ),
                    });
                }
            }
        }
    }
    violations
}

/// Every single-snapshot invariant, with no lowered scopes.
pub fn all(snapshot: &StoreSnapshot) -> Vec<Violation> {
    let mut v = capacity(snapshot, &BTreeSet::new());
    v.extend(routes(snapshot));
    v
}

/// Panics listing every violation, if there are any.
pub fn assert_clean(violations: &[Violation], context: &str) {
    if !violations.is_empty() {
        let list: Vec<String> = violations.iter().map(ToString::to_string).collect();
        panic!("{context}: invariants violated:\n  {}", list.join("\n  "));
    }
}
