//! What a resolve answer must agree with: the caller's tenant and action,
//! the fences issued so far (`fence_unique`), the action's current
//! reservation (`one_route_per_action`), releases earlier in commit order
//! (`capacity_accounting`); a new route's admission and eligibility checks
//! start here.

use connreg::{ReplicaState, ResolveKind, Resolved, RouteRequest};

use super::{Checker, Deferred, invariant};

impl Checker {
    pub(super) fn on_resolved(&mut self, request: &RouteRequest, resolved: &Resolved, lost: bool) {
        let a = &resolved.assignment;
        let action = &a.identity.action;
        match resolved.kind {
            ResolveKind::Created => self.counters.resolve_created += 1,
            ResolveKind::Existing => self.counters.resolve_existing += 1,
            ResolveKind::Reserved => self.counters.resolve_reserved += 1,
        }
        if request.tenant.as_ref() != Some(&a.identity.tenant) {
            self.violate(
                invariant::TENANT,
                format!(
                    "a resolve of {} by {} answered {}'s route",
                    request.action,
                    request
                        .tenant
                        .as_ref()
                        .map_or("no tenant".to_string(), |t| t.to_string()),
                    a.identity.tenant
                ),
            );
            return;
        }
        if &request.action != action || request.capability != a.identity.capability {
            self.violate(
                invariant::ONE_ROUTE,
                format!(
                    "a resolve of {} for {} answered {action} for {}",
                    request.action, request.capability, a.identity.capability
                ),
            );
            return;
        }
        let fence = a.reservation.fence;
        let how = match resolved.kind {
            ResolveKind::Created => "created",
            ResolveKind::Existing => "existing",
            ResolveKind::Reserved => "reserved",
        };
        if resolved.kind == ResolveKind::Existing
            && (!self.deterministic || self.commit_unknown.contains(action))
            && !self.issued.contains_key(&fence)
            && self
                .latest
                .get(action)
                .is_none_or(|l| l.reservation.fence < fence)
        {
            // The reservation of a resolve whose COMMIT reply was lost: an
            // earlier call answered `unavailable`, or (on a real database)
            // the registry tried the call again on a new connection and
            // found the route its first attempt committed. This answer is
            // the first to carry it; the store must agree (snapshots). On
            // PostgreSQL a lock-free read's answer may also come before
            // the answer of the commit it showed.
            self.issued.insert(fence, action.clone());
            self.issued_by_existing.insert(fence);
            if self
                .latest
                .get(action)
                .is_none_or(|l| l.reservation.fence < fence)
            {
                self.latest.insert(action.clone(), a.clone());
            }
        }
        if self.ordered
            && resolved.kind == ResolveKind::Existing
            && self.reservations.has_ended(fence)
        {
            // LOCK-5: an answer after a release in commit order cannot
            // still carry the released reservation (maintenance included).
            self.violate(
                invariant::CAPACITY,
                format!(
                    "an existing answer for {action} carries fence {}, which a release earlier in commit order ended",
                    fence.0
                ),
            );
        }
        if self.ordered
            && resolved.kind == ResolveKind::Existing
            && let Some(latest) = self.latest.get(action)
            && latest != a
        {
            self.violate(
                invariant::ONE_ROUTE,
                format!("an existing answer for {action} carries fence {}, but its current reservation has fence {}", fence.0, latest.reservation.fence.0),
            );
        }
        self.learn_truth(a, resolved.kind == ResolveKind::Created, how);
        match resolved.kind {
            ResolveKind::Created | ResolveKind::Reserved => {
                if let Some(other) = self.issued.insert(fence, action.clone())
                    && !(other == *action && self.issued_by_existing.remove(&fence))
                {
                    self.violate(
                        invariant::FENCE,
                        format!(
                            "fence {} was issued to {action} and before to {other}",
                            fence.0
                        ),
                    );
                }
                let newer = self
                    .latest
                    .get(action)
                    .is_none_or(|l| l.reservation.fence <= fence);
                if newer {
                    self.latest.insert(action.clone(), a.clone());
                }
                self.reservations.reserve(a);
                if self.ordered {
                    self.check_admission(a);
                }
            }
            ResolveKind::Existing => {
                if !self.reservations.known(fence) {
                    // The first answer to carry a reservation whose
                    // creating answer was lost with its COMMIT reply.
                    self.reservations.reserve(a);
                }
                if let Some(other) = self.issued.get(&fence)
                    && other != action
                {
                    let detail =
                        format!("fence {} answered for {action} belongs to {other}", fence.0);
                    self.violate(invariant::FENCE, detail);
                }
            }
        }
        if !lost {
            self.answered.insert(fence);
        }
        if resolved.kind == ResolveKind::Reserved
            && self
                .replica_model
                .get(&a.destination.replica)
                .is_some_and(|(state, _)| *state == ReplicaState::Draining)
        {
            self.counters.pinned_on_draining += 1;
        }
        if resolved.kind == ResolveKind::Created {
            let topo = &request.topology;
            if topo.preferred_zone.as_ref() == Some(&a.destination.zone) {
                self.counters.routes_preferred_zone += 1;
            }
            if topo
                .preferred_region
                .as_ref()
                .is_some_and(|r| r != &a.destination.region)
            {
                self.counters.routes_other_region += 1;
            }
            if self.awaits_publication(a.policy.catalog_revision) {
                self.deferred
                    .push(Deferred::Route(Box::new((request.clone(), a.clone()))));
            } else {
                self.check_eligible(request, a);
            }
        }
    }
}
