//! Routing over the live state: the cached resolve plan of each (tenant,
//! capability), the scan that picks a new route's target, the commit of
//! its reservation, pinned re-reservations of an existing route, and
//! reading a route back.

use std::sync::Arc;

use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::id::{ActionId, CapabilityId, InstanceId, ReplicaId, ScopeId, TenantId};
use crate::ordering::{ROUTE_HASH_LANES, route_hash_keys};
use crate::records::{
    Binding, FenceToken, PolicySnapshot, ReplicaState, Revision, RouteAssignment, RouteDestination,
    RouteRecord,
};
use crate::request::{CrossRegion, ResolveKind, Resolved, RouteRequest, lease_live};

use super::{LiveState, RouteFixed, Slot, SlotRef, StoredRoute};
use crate::memory::Behaviour;
use crate::memory::catalog::CatalogState;
use crate::memory::lookup::LookupMap;

/// What a request's topology asks for, in [`TopologyIndex`] codes; `None`
/// where the request names nothing, or a text no replica names.
struct WantedCodes {
    region: Option<u32>,
    zone: Option<u32>,
    class: Option<u32>,
}

/// What a resolve of one (tenant, capability) needs from the catalog,
/// worked out once per catalog revision: the bindings whose whole chain
/// is eligible (ROUTE-5), each with its replica group and the scopes it
/// takes.
#[derive(Debug)]
struct ResolvePlan {
    /// How many bindings the (tenant, capability) has, eligible or not
    /// (AUTH-4 evidence).
    bindings: u64,
    /// The eligible chains, in binding order.
    chains: Vec<PlannedChain>,
}

#[derive(Debug)]
struct PlannedChain {
    binding: Binding,
    instance: InstanceId,
    /// The group of the replicas serving (instance, version), if any.
    group: Option<u32>,
    /// Each scope's counter and limit; `None` when a scope is not in the
    /// catalog, so the binding never has room.
    scopes: Option<Vec<(u32, u32)>>,
}

/// The cached [`ResolvePlan`]s and what they were worked out from. A new
/// catalog revision or a new replica group drops them all, so the cache
/// holds at most one plan per (tenant, capability) of the catalog.
#[derive(Debug, Default, Clone)]
pub(super) struct PlanCache {
    revision: Option<Revision>,
    groups: usize,
    plans: LookupMap<(TenantId, CapabilityId), Arc<ResolvePlan>>,
}

/// The target a resolve picked, before it is committed.
struct Decision {
    fixed: Arc<RouteFixed>,
    slot: SlotRef,
    fence: FenceToken,
}

/// (priority, region mismatch, zone mismatch, active): the part of a
/// candidate's ROUTE-10 key before the route hash.
type Rank = (u32, bool, bool, u32);

/// The best candidate of a resolve's scan (ROUTE-10).
#[derive(Clone, Copy)]
struct Best<'c, 's> {
    rank: Rank,
    replica: &'s ReplicaId,
    instance: &'c InstanceId,
    binding: &'c Binding,
    slot: SlotRef,
}

impl<'c, 's> Best<'c, 's> {
    /// The candidate of `rank` in `slot`, the `index`th replica of
    /// `group`, through `chain`.
    fn at(rank: Rank, chain: &'c PlannedChain, group: u32, index: usize, slot: &'s Slot) -> Self {
        Best {
            rank,
            replica: &slot.replica.spec.id,
            instance: &chain.instance,
            binding: &chain.binding,
            slot: SlotRef {
                group,
                index: index as u32,
            },
        }
    }
}

/// Of `batch`'s candidates (all of one rank), the one with the lowest
/// (route hash, instance, replica) into `lowest` when it is lower than
/// what `lowest` holds; the first of equal keys is kept.
fn lowest_of<'c, 's>(
    action: &ActionId,
    batch: &[Best<'c, 's>],
    lowest: &mut Option<(u64, Best<'c, 's>)>,
) {
    let Some(first) = batch.first() else {
        return;
    };
    let mut replicas = [first.replica; ROUTE_HASH_LANES];
    for (r, c) in replicas.iter_mut().zip(batch) {
        *r = c.replica;
    }
    let mut hashes = [0; ROUTE_HASH_LANES];
    route_hash_keys(action, &replicas[..batch.len()], &mut hashes);
    for (c, hash) in batch.iter().zip(hashes) {
        let lower = lowest
            .as_ref()
            .is_none_or(|(h, l)| (hash, c.instance, c.replica) < (*h, l.instance, l.replica));
        if lower {
            *lowest = Some((hash, *c));
        }
    }
}

impl LiveState {
    /// The resolve plan of (`tenant`, `capability`) at the catalog's
    /// revision; `None` when the tenant has no binding of the capability.
    fn plan(
        &mut self,
        catalog: &CatalogState,
        tenant: &TenantId,
        capability: &CapabilityId,
    ) -> Option<Arc<ResolvePlan>> {
        if self.plans.revision != Some(catalog.revision) || self.plans.groups != self.groups.len() {
            self.plans.plans.clear();
            self.plans.revision = Some(catalog.revision);
            self.plans.groups = self.groups.len();
        }
        let key = (tenant.clone(), capability.clone());
        if let Some(plan) = self.plans.plans.get(&key) {
            return Some(plan.clone());
        }
        let binding_ids = catalog.bindings_by_tenant_capability.get(&key)?;
        let mut chains = Vec::new();
        for binding in binding_ids.iter().filter_map(|b| catalog.bindings.get(b)) {
            let Some((instance, version)) = catalog.eligible_chain(binding, capability) else {
                continue;
            };
            let group = self
                .replicas_by_instance_version
                .get(&(instance.id.clone(), version.id.clone()))
                .copied();
            let limits: Option<Vec<(&ScopeId, u32)>> = binding
                .admission_scopes
                .iter()
                .map(|s| catalog.scopes.get(s).map(|d| (s, d.limit)))
                .collect();
            let scopes = limits.map(|limits| {
                limits
                    .into_iter()
                    .map(|(s, limit)| (self.counter_of(s), limit))
                    .collect()
            });
            chains.push(PlannedChain {
                binding: binding.clone(),
                instance: instance.id.clone(),
                group,
                scopes,
            });
        }
        let plan = Arc::new(ResolvePlan {
            bindings: binding_ids.len() as u64,
            chains,
        });
        self.plans.plans.insert(key, plan.clone());
        Some(plan)
    }

    /// The route of `action`, when it is `tenant`'s.
    pub(crate) fn route(&self, tenant: &TenantId, action: &ActionId) -> Option<RouteRecord> {
        self.stored(action)
            .filter(|r| r.fixed.tenant == *tenant)
            .map(|r| r.record(action))
    }

    /// Resolve (ROUTE-2..ROUTE-7, PIN-2..PIN-4).
    pub(crate) fn resolve(
        &mut self,
        catalog: &CatalogState,
        request: &RouteRequest,
        now: Timestamp,
        behaviour: &Behaviour,
    ) -> Result<Resolved> {
        // ROUTE-2: no tenant, nothing else happens.
        let Some(tenant) = &request.tenant else {
            return Err(Error::invalid(
                "route request",
                "a verified tenant is required",
            ));
        };
        request.topology.validate()?;
        self.last_resolve_rows_examined = 0;

        if let Some(&n) = self.routes.get(&request.action) {
            let existing = &self.route_rows[n].route;
            let f = &*existing.fixed;
            if (&f.tenant != tenant || f.capability != request.capability)
                && !behaviour.cross_tenant_return
            {
                // ROUTE-4: reveal nothing of the other assignment.
                return Err(Error::Conflict {
                    reason: "the action is already assigned under other coordinates",
                });
            }
            self.last_resolve_rows_examined = 1;
            if existing.reserved {
                return Ok(Resolved {
                    assignment: existing.assignment(&request.action),
                    kind: ResolveKind::Existing,
                });
            }
            return self.reserve_pinned(catalog, request, now, behaviour);
        }

        let decision = self.decide(catalog, request, tenant, now, behaviour)?;
        let assignment = self.commit_new(&request.action, decision, now);
        Ok(Resolved {
            assignment,
            kind: ResolveKind::Created,
        })
    }

    /// Picks the target of a new route and builds what its assignment
    /// holds, changing nothing but the fence counter and the replica's
    /// template.
    fn decide(
        &mut self,
        catalog: &CatalogState,
        request: &RouteRequest,
        tenant: &TenantId,
        now: Timestamp,
        behaviour: &Behaviour,
    ) -> Result<Decision> {
        // ROUTE-5: at least one enabled binding whose whole chain is valid.
        let Some(plan) = self.plan(catalog, tenant, &request.capability) else {
            return Err(Error::NoEligibleBinding);
        };
        self.last_resolve_rows_examined += plan.bindings;
        if plan.chains.is_empty() {
            return Err(Error::NoEligibleBinding);
        }
        let (best, examined) = self.best(&plan, request, now, behaviour);
        let best = best.map(|b| (b.binding, b.slot));
        self.last_resolve_rows_examined += examined;
        let Some((binding, slot)) = best else {
            return Err(Error::NoCapacity);
        };
        let fixed = self.route_fixed(catalog, request, tenant, binding, slot);
        let fence = self.reservation_fence(behaviour);
        Ok(Decision { fixed, slot, fence })
    }

    /// The replica a new route of `request` would go to now, changing
    /// nothing: [`LiveState::decide`]'s pick. `None` when its plan is not
    /// worked out at the catalog's revision (only a resolve works it out).
    pub(crate) fn pick(
        &self,
        catalog: &CatalogState,
        request: &RouteRequest,
        now: Timestamp,
        behaviour: &Behaviour,
    ) -> Option<Result<ReplicaId>> {
        let tenant = request.tenant.as_ref()?;
        if let Err(e) = request.topology.validate() {
            return Some(Err(e));
        }
        let key = (tenant.clone(), request.capability.clone());
        let plan = match catalog.bindings_by_tenant_capability.get(&key) {
            None => return Some(Err(Error::NoEligibleBinding)),
            Some(_)
                if self.plans.revision != Some(catalog.revision)
                    || self.plans.groups != self.groups.len() =>
            {
                return None;
            }
            Some(_) => self.plans.plans.get(&key)?.clone(),
        };
        if plan.chains.is_empty() {
            return Some(Err(Error::NoEligibleBinding));
        }
        Some(match self.best(&plan, request, now, behaviour).0 {
            Some(b) => Ok(b.replica.clone()),
            None => Err(Error::NoCapacity),
        })
    }

    /// The scan of a new route's candidates (ROUTE-9, ROUTE-10): the best
    /// one, and how many replicas were looked at.
    fn best<'c, 's>(
        &'s self,
        plan: &'c ResolvePlan,
        request: &RouteRequest,
        now: Timestamp,
        behaviour: &Behaviour,
    ) -> (Option<Best<'c, 's>>, u64) {
        let topo = &request.topology;
        let wanted = WantedCodes {
            region: topo
                .preferred_region
                .as_ref()
                .and_then(|r| self.topology.regions.get(r).copied()),
            zone: topo
                .preferred_zone
                .as_ref()
                .and_then(|z| self.topology.zones.get(z).copied()),
            class: self.topology.classes.get(&topo.capacity_class).copied(),
        };
        let any_region = topo.cross_region == CrossRegion::Allowed;
        // ROUTE-9 (the replica half) and ROUTE-10's rank: priority,
        // region and zone mismatch, active reservations. `None` when the
        // replica in `slot` is not eligible.
        let rank_of = |chain: &PlannedChain, slot: &Slot| -> Option<Rank> {
            let r = &slot.replica;
            let codes = slot.codes;
            let eligible = r.state == ReplicaState::Ready
                && lease_live(r.lease_expires_at, now)
                && (behaviour.over_capacity || r.active < r.spec.capacity)
                && !r.circuit.open
                && !behaviour
                    .held
                    .as_ref()
                    .is_some_and(|h| h.contains(&r.spec.id))
                && wanted.class == Some(codes.class)
                && (any_region || wanted.region == Some(codes.region));
            eligible.then_some((
                chain.binding.priority,
                wanted.region != Some(codes.region),
                wanted.zone != Some(codes.zone),
                r.active,
            ))
        };
        // The chains whose scopes all have room, each with its group.
        let open = plan.chains.iter().filter_map(|chain| {
            let scopes_ok = behaviour.over_capacity
                || chain.scopes.as_ref().is_some_and(|scopes| {
                    scopes
                        .iter()
                        .all(|&(counter, limit)| self.scope_in_use[counter as usize] < limit)
                });
            let group = chain.group.filter(|_| scopes_ok)?;
            Some((chain, group, &self.groups[group as usize]))
        });
        // First the smallest rank and whether more than one candidate
        // has it; the candidates' order does not matter, since their keys
        // differ at least in the replica.
        let mut examined = 0;
        let mut best: Option<Best<'_, '_>> = None;
        let mut tied = false;
        for (chain, group, serving) in open.clone() {
            examined += serving.len() as u64;
            for (index, slot) in serving.iter().enumerate() {
                let Some(rank) = rank_of(chain, slot) else {
                    continue;
                };
                let candidate = Best::at(rank, chain, group, index, slot);
                match &best {
                    Some(b) if rank > b.rank => {}
                    Some(b) if rank == b.rank => tied = true,
                    _ => {
                        best = Some(candidate);
                        tied = false;
                    }
                }
            }
        }
        // Then, on a tie, the route hash of each candidate of that rank
        // only, and the instance and replica after it (ROUTE-10). The
        // hashes are computed a batch of candidates at a time, side by
        // side.
        if let Some(b) = best.as_mut().filter(|_| tied) {
            let min = b.rank;
            let mut batch = [*b; ROUTE_HASH_LANES];
            let mut n = 0;
            let mut lowest = None;
            for (chain, group, serving) in open {
                for (index, slot) in serving.iter().enumerate() {
                    if rank_of(chain, slot) != Some(min) {
                        continue;
                    }
                    batch[n] = Best::at(min, chain, group, index, slot);
                    n += 1;
                    if n == ROUTE_HASH_LANES {
                        lowest_of(&request.action, &batch, &mut lowest);
                        n = 0;
                    }
                }
            }
            lowest_of(&request.action, &batch[..n], &mut lowest);
            if let Some((_, c)) = lowest {
                *b = c;
            }
        }
        (best, examined)
    }

    /// The fixed part of a route through `binding` to the replica in
    /// `at`: the replica's template when it was built from the same
    /// records, otherwise a new one that becomes its template.
    fn route_fixed(
        &mut self,
        catalog: &CatalogState,
        request: &RouteRequest,
        tenant: &TenantId,
        binding: &Binding,
        at: SlotRef,
    ) -> Arc<RouteFixed> {
        let topo = &request.topology;
        // Within one catalog revision a binding names one tenant and one
        // capability, and a replica's spec (its capacity class among it)
        // never changes once registered, which every eligible request
        // matches: the revision and the binding decide whether the
        // template is this route's fixed part.
        if let Some(t) = &self.slot(at).template
            && t.policy.catalog_revision == catalog.revision
            && t.destination.binding == binding.id
        {
            return t.clone();
        }
        let counters = self.counters_of(&binding.admission_scopes);
        let slot = self.slot_mut(at);
        let replica = &slot.replica;
        let instance = &catalog.instances[&binding.instance];
        let version = &catalog.versions[&replica.spec.version];
        let fixed = Arc::new(RouteFixed {
            tenant: tenant.clone(),
            capability: request.capability.clone(),
            destination: Arc::new(RouteDestination {
                binding: binding.id.clone(),
                instance: instance.id.clone(),
                version: version.id.clone(),
                connector_type: version.connector_type.clone(),
                replica: replica.spec.id.clone(),
                endpoint: replica.spec.endpoint.clone(),
                peer_identity: replica.spec.peer_identity.clone(),
                region: replica.spec.region.clone(),
                zone: replica.spec.zone.clone(),
            }),
            policy: Arc::new(PolicySnapshot {
                catalog_revision: catalog.revision,
                binding_priority: binding.priority,
                policy_revision: binding.policy_revision,
                credential: binding.credential.clone(),
                secret_provider: instance.secret_provider.clone(),
                quota_policy: binding.quota_policy.clone(),
                capacity_class: topo.capacity_class.clone(),
            }),
            scopes: binding.admission_scopes.clone(),
            counters,
        });
        slot.template = Some(fixed.clone());
        fixed
    }

    /// ROUTE-7: every scope, the replica count and the route, in one step.
    fn commit_new(&mut self, action: &ActionId, d: Decision, now: Timestamp) -> RouteAssignment {
        let stored = StoredRoute {
            fixed: d.fixed.clone(),
            slot: d.slot,
            fence: d.fence,
            attempt: 1,
            reserved: true,
            reserved_at: now,
            last_settlement: None,
        };
        let assignment = stored.assignment(action);
        let n = self.store_route(action, stored);
        self.holds.insert((now, d.fence), n);
        self.take_capacity(&d.fixed, d.slot, n);
        self.changes.route(n);
        assignment
    }

    /// Takes a reservation of `fixed`'s scopes and of the replica in `at`
    /// for the route numbered `route`, stamping the scopes and the replica.
    fn take_capacity(&mut self, fixed: &RouteFixed, at: SlotRef, route: u32) {
        for &counter in &fixed.counters {
            self.scope_in_use[counter as usize] += 1;
        }
        self.changes.scopes(&fixed.counters);
        let slot = &mut self.groups[at.group as usize][at.index as usize];
        slot.replica.active += 1;
        slot.reserved.insert(route);
        self.changes.replica(slot.number);
    }

    /// PIN-3, PIN-4: the same replica and scopes again, or an error; never
    /// another target.
    fn reserve_pinned(
        &mut self,
        catalog: &CatalogState,
        request: &RouteRequest,
        now: Timestamp,
        behaviour: &Behaviour,
    ) -> Result<Resolved> {
        let Some(stored) = self.stored(&request.action).cloned() else {
            unreachable!("a pinned reserve follows the route's lookup under the same lock");
        };
        let f = &*stored.fixed;
        let replica = &self.slot(stored.slot).replica;
        let replica_ok = matches!(replica.state, ReplicaState::Ready | ReplicaState::Draining)
            && lease_live(replica.lease_expires_at, now)
            && replica.spec.version == f.destination.version
            && !replica.circuit.open
            && catalog
                .versions
                .get(&f.destination.version)
                .is_some_and(|v| v.active && v.qualified)
            && catalog
                .types
                .get(&f.destination.connector_type)
                .is_some_and(|t| t.enabled);
        if !replica_ok {
            if behaviour.failover_on_retry {
                let tenant = f.tenant.clone();
                let moved = self.decide(catalog, request, &tenant, now, behaviour)?;
                return Ok(Resolved {
                    assignment: self.commit_new(&request.action, moved, now),
                    kind: ResolveKind::Reserved,
                });
            }
            return Err(Error::ReplicaUnavailable);
        }
        let room = behaviour.over_capacity
            || (replica.active < replica.spec.capacity
                && f.scopes.iter().all(|s| self.scope_has_room(catalog, s)));
        if !room {
            return Err(Error::NoCapacity);
        }
        let fence = self.reservation_fence(behaviour);
        let Some(&n) = self.routes.get(&request.action) else {
            unreachable!("the route was read under the same lock");
        };
        self.take_capacity(f, stored.slot, n);
        let record = &mut self.route_rows[n].route;
        record.fence = fence;
        record.attempt = stored.attempt + 1;
        record.reserved = true;
        record.reserved_at = now;
        let assignment = record.assignment(&request.action);
        self.holds.insert((now, fence), n);
        self.changes.route(n);
        Ok(Resolved {
            assignment,
            kind: ResolveKind::Reserved,
        })
    }

    /// The `no-action-serialization` plant's write: overwrite and reserve.
    pub(crate) fn force_insert(&mut self, assignment: RouteAssignment) {
        let Some(&slot) = self.slot_of.get(&assignment.destination.replica) else {
            unreachable!("a decided route's replica is registered, and replicas stay");
        };
        let fence = self.next_fence();
        let RouteAssignment {
            identity,
            destination,
            policy,
            reservation,
        } = assignment;
        let counters = self.counters_of(&reservation.scopes);
        let fixed = Arc::new(RouteFixed {
            tenant: identity.tenant,
            capability: identity.capability,
            destination,
            policy,
            scopes: reservation.scopes,
            counters,
        });
        let n = self.store_route(
            &identity.action,
            StoredRoute {
                fixed: fixed.clone(),
                slot,
                fence,
                attempt: reservation.attempt,
                reserved: true,
                // Never taken by maintenance: the plant's route is not in
                // the hold index.
                reserved_at: Timestamp(u64::MAX),
                last_settlement: None,
            },
        );
        self.take_capacity(&fixed, slot, n);
        self.changes.route(n);
    }
}
