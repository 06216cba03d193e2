//! `route_eligibility` (ROUTE-5, ROUTE-9, ROUTE-11): a new route uses a
//! binding chain the catalog at its revision allows, the requested
//! capacity class and region policy, and (commit-ordered traces) a replica
//! that is ready with its circuit closed; and (commit-ordered traces) a
//! pinned re-reservation (PIN-3) goes to a replica that is ready or
//! draining, with its circuit closed and its lease live at the answer's
//! clock (binding and instance switches do not block it).

use connreg::{CrossRegion, ReplicaState, RouteAssignment, RouteRequest};

use super::{Checker, invariant};

impl Checker {
    pub(super) fn check_eligible(&mut self, request: &RouteRequest, a: &RouteAssignment) {
        let action = &a.identity.action;
        let mut refusals = Vec::new();
        match self.catalogs.get(&a.policy.catalog_revision) {
            None => refusals.push(format!(
                "it read revision {}, which no publication made",
                a.policy.catalog_revision.0
            )),
            Some(model) => refusals.extend(model.route_refusal(a)),
        }
        let topo = &request.topology;
        if a.policy.capacity_class != topo.capacity_class {
            refusals.push("its policy snapshot has another capacity class".into());
        }
        if let Some(spec) = self.specs.get(&a.destination.replica) {
            if spec.capacity_class != topo.capacity_class {
                refusals.push(format!(
                    "replica {} has class {}",
                    spec.id, spec.capacity_class
                ));
            }
            if spec.instance != a.destination.instance {
                refusals.push(format!("replica {} serves another instance", spec.id));
            }
        }
        if topo.cross_region == CrossRegion::Forbidden
            && topo.preferred_region.as_ref() != Some(&a.destination.region)
        {
            refusals.push(format!(
                "it is in region {} and cross-region routes are forbidden",
                a.destination.region
            ));
        }
        if self.ordered
            && let Some((state, open)) = self.replica_model.get(&a.destination.replica)
        {
            if *state != ReplicaState::Ready {
                refusals.push(format!(
                    "replica {} is {}",
                    a.destination.replica,
                    state.as_str()
                ));
            }
            if *open {
                refusals.push(format!(
                    "replica {}'s circuit is open",
                    a.destination.replica
                ));
            }
        }
        for why in refusals {
            self.violate(
                invariant::ELIGIBLE,
                format!(
                    "the new route of {action} on replica {}: {why}",
                    a.destination.replica
                ),
            );
        }
    }

    /// PIN-3: a `reserved` answer at registry clock `now` (commit-ordered
    /// traces; the replica's state and lease are those the answers before
    /// it left).
    pub(super) fn check_pinned_eligible(&mut self, a: &RouteAssignment, now: u64) {
        if !self.ordered {
            return;
        }
        let replica = &a.destination.replica;
        let mut refusals = Vec::new();
        if let Some((state, open)) = self.replica_model.get(replica) {
            if *state == ReplicaState::Offline {
                refusals.push(format!("replica {replica} is offline"));
            }
            if *open {
                refusals.push(format!("replica {replica}'s circuit is open"));
            }
        }
        if let Some(end) = self.witness_lease_end(replica)
            && end <= now
        {
            refusals.push(format!(
                "replica {replica}'s lease ended at {end}, by the answers, and the answer decided at {now}"
            ));
        }
        for why in refusals {
            self.violate(
                invariant::ELIGIBLE,
                format!(
                    "the re-reservation of {} (fence {}): {why}",
                    a.identity.action, a.reservation.fence.0
                ),
            );
        }
    }
}
