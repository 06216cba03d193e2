//! Live state: replicas, admission counters and routes.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::id::{
    ActionId, CapabilityId, CapacityClass, InstanceId, Region, ReplicaId, ScopeId, TenantId,
    VersionId, Zone,
};
use crate::inspect::{INSPECT_ROWS_MAX, ScopeUsage, StoreSnapshot};
use crate::limits::{AUDIT_ENTRIES_MAX, INSTANCE_REPLICAS_MAX, LEASE_MAINTENANCE_RESERVATIONS_MAX};
use crate::ordering::route_hash_key;
use crate::records::{
    Binding, Circuit, FenceToken, Outcome, PolicySnapshot, Replica, ReplicaState, Reservation,
    Revision, RouteAssignment, RouteDestination, RouteIdentity, RouteRecord,
};
use crate::request::{
    AuditEntry, AuditPage, AuditQuery, CircuitCloseParams, CircuitPolicy, CrossRegion,
    HeartbeatOutcome, HeartbeatParams, Maintained, RegisterParams, ReleasedReservation,
    ResolveKind, Resolved, RouteRequest, SettleParams, Settled, StatusReport, lease_live,
};

use super::Behaviour;
use super::catalog::CatalogState;
use super::lookup::LookupMap;

/// One registered replica and what routing keeps beside it. Replicas are
/// never removed, so a [`SlotRef`] names its replica for good.
#[derive(Debug, Clone)]
struct Slot {
    replica: Replica,
    /// The replica's region, zone and capacity class as codes, so a
    /// resolve compares numbers instead of texts.
    codes: TopologyCodes,
    /// Actions holding a reservation on this replica, in order.
    reserved: BTreeSet<ActionId>,
    /// The fixed part of the last route decided to this replica, shared
    /// by the next ones while nothing it was built from has changed.
    template: Option<Arc<RouteFixed>>,
}

/// What every route decided through one (catalog revision, binding,
/// replica) holds alike: all of its assignment but the action and the
/// reservation's fence and attempt. Routes share it instead of copying it.
#[derive(Debug, PartialEq, Eq)]
struct RouteFixed {
    tenant: TenantId,
    capability: CapabilityId,
    destination: RouteDestination,
    policy: PolicySnapshot,
    /// The admission scopes every reservation of the route takes.
    scopes: BTreeSet<ScopeId>,
    /// The counters of `scopes`, in the same order.
    counters: Vec<u32>,
}

/// A region, zone and capacity class, each as its code in
/// [`TopologyIndex`].
#[derive(Debug, Clone, Copy)]
struct TopologyCodes {
    region: u32,
    zone: u32,
    class: u32,
}

/// The codes of every region, zone and capacity class a registered
/// replica names. Codes are handed out in registration order and never
/// reused; a text no replica names has no code.
#[derive(Debug, Default, Clone)]
struct TopologyIndex {
    regions: BTreeMap<Region, u32>,
    zones: BTreeMap<Zone, u32>,
    classes: BTreeMap<CapacityClass, u32>,
}

impl TopologyIndex {
    fn code<K: Ord + Clone>(codes: &mut BTreeMap<K, u32>, key: &K) -> u32 {
        if let Some(&code) = codes.get(key) {
            return code;
        }
        let code = codes.len() as u32;
        codes.insert(key.clone(), code);
        code
    }

    fn register(&mut self, region: &Region, zone: &Zone, class: &CapacityClass) -> TopologyCodes {
        TopologyCodes {
            region: Self::code(&mut self.regions, region),
            zone: Self::code(&mut self.zones, zone),
            class: Self::code(&mut self.classes, class),
        }
    }
}

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
struct PlanCache {
    revision: Option<Revision>,
    groups: usize,
    plans: LookupMap<(TenantId, CapabilityId), Arc<ResolvePlan>>,
}

/// Where a replica's slot is: the group of the replicas serving its
/// (instance, version), and its place in that group. A resolve reads one
/// group, whose replicas lie side by side in memory however the fleet
/// registered.
#[derive(Debug, Clone, Copy)]
struct SlotRef {
    group: u32,
    index: u32,
}

/// A route as stored: the shared fixed part, the replica's slot and what
/// changes per reservation. [`StoredRoute::assignment`] gives the
/// assignment it stands for.
#[derive(Debug, Clone)]
struct StoredRoute {
    fixed: Arc<RouteFixed>,
    /// The destination replica's slot.
    slot: SlotRef,
    fence: FenceToken,
    attempt: u32,
    reserved: bool,
    last_settlement: Option<Outcome>,
}

impl StoredRoute {
    fn assignment(&self, action: &ActionId) -> RouteAssignment {
        let f = &*self.fixed;
        RouteAssignment {
            identity: RouteIdentity {
                action: action.clone(),
                tenant: f.tenant.clone(),
                capability: f.capability.clone(),
            },
            destination: f.destination.clone(),
            policy: f.policy.clone(),
            reservation: Reservation {
                fence: self.fence,
                attempt: self.attempt,
                scopes: f.scopes.clone(),
            },
        }
    }

    fn record(&self, action: &ActionId) -> RouteRecord {
        RouteRecord {
            assignment: self.assignment(action),
            reserved: self.reserved,
            last_settlement: self.last_settlement,
        }
    }

    /// Whether `given` is this route's assignment (its action being the
    /// key it was found under); with `ignore_reservation`, whatever its
    /// reservation says (the `ignore-fence` plant).
    fn is(&self, given: &RouteAssignment, ignore_reservation: bool) -> bool {
        let f = &*self.fixed;
        given.identity.tenant == f.tenant
            && given.identity.capability == f.capability
            && given.destination == f.destination
            && given.policy == f.policy
            && (ignore_reservation
                || (given.reservation.fence == self.fence
                    && given.reservation.attempt == self.attempt
                    && given.reservation.scopes == f.scopes))
    }
}

/// The target a resolve picked, before it is committed.
struct Decision {
    fixed: Arc<RouteFixed>,
    slot: SlotRef,
    fence: FenceToken,
}

/// The best candidate so far of a resolve's scan (ROUTE-10). The route
/// hash is computed only when another candidate ties it on everything
/// before the hash.
struct Best<'c, 's> {
    /// (priority, region mismatch, zone mismatch, active).
    rank: (u32, bool, bool, u32),
    hash: Option<u64>,
    instance: &'c InstanceId,
    replica: &'s ReplicaId,
    binding: &'c Binding,
    slot: SlotRef,
}

#[derive(Debug, Default, Clone)]
pub(crate) struct LiveState {
    /// Every registered replica, in groups by (instance, version).
    groups: Vec<Vec<Slot>>,
    /// replica → its slot.
    slot_of: BTreeMap<ReplicaId, SlotRef>,
    /// action → its route. Listed only sorted ([`LiveState::snapshot`]).
    routes: LookupMap<ActionId, StoredRoute>,
    /// scope → its counter in `scope_in_use`. Counters are handed out on
    /// first use and never reused.
    scope_counter: BTreeMap<ScopeId, u32>,
    /// Reservations held in each scope, by counter.
    scope_in_use: Vec<u32>,
    topology: TopologyIndex,
    plans: PlanCache,
    /// (instance, version) → the group of the replicas serving it: the
    /// routing index.
    replicas_by_instance_version: BTreeMap<(InstanceId, VersionId), u32>,
    /// instance → how many replicas serve it, for `INSTANCE_REPLICAS_MAX`.
    replicas_per_instance: BTreeMap<InstanceId, usize>,
    /// (lease end, replica) of every replica not offline: maintenance index.
    leases: BTreeSet<(Timestamp, ReplicaId)>,
    last_fence: u64,
    audit: VecDeque<AuditEntry>,
    /// The `seq` of the last audit entry written (0: none yet).
    audit_seq: u64,
    /// Bindings and replicas the last resolve looked at (AUTH-4 evidence
    /// for tests; deterministic, never used for decisions).
    pub(crate) last_resolve_rows_examined: u64,
}

impl LiveState {
    fn next_fence(&mut self) -> FenceToken {
        self.last_fence += 1;
        FenceToken(self.last_fence)
    }

    fn slot(&self, at: SlotRef) -> &Slot {
        &self.groups[at.group as usize][at.index as usize]
    }

    fn slot_mut(&mut self, at: SlotRef) -> &mut Slot {
        &mut self.groups[at.group as usize][at.index as usize]
    }

    /// The counter of `scope`, handed out on its first use.
    fn counter_of(&mut self, scope: &ScopeId) -> u32 {
        if let Some(&counter) = self.scope_counter.get(scope) {
            return counter;
        }
        let counter = self.scope_in_use.len() as u32;
        self.scope_in_use.push(0);
        self.scope_counter.insert(scope.clone(), counter);
        counter
    }

    fn counters_of(&mut self, scopes: &BTreeSet<ScopeId>) -> Vec<u32> {
        scopes.iter().map(|s| self.counter_of(s)).collect()
    }

    /// Reservations held in `scope`.
    fn in_use(&self, scope: &ScopeId) -> u32 {
        self.scope_counter
            .get(scope)
            .map_or(0, |&counter| self.scope_in_use[counter as usize])
    }

    fn scope_has_room(&self, catalog: &CatalogState, scope: &ScopeId) -> bool {
        catalog
            .scopes
            .get(scope)
            .is_some_and(|s| self.in_use(scope) < s.limit)
    }

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

    /// The replica registered as `id`.
    pub(crate) fn replica(&self, id: &ReplicaId) -> Option<&Replica> {
        let at = *self.slot_of.get(id)?;
        Some(&self.slot(at).replica)
    }

    /// The route of `action`, when it is `tenant`'s.
    pub(crate) fn route(&self, tenant: &TenantId, action: &ActionId) -> Option<RouteRecord> {
        self.routes
            .get(action)
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

        if let Some(existing) = self.routes.get(&request.action) {
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
        let assignment = self.commit_new(&request.action, decision);
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
        let action = &request.action;
        let mut best: Option<Best<'_, '_>> = None;
        for chain in &plan.chains {
            let scopes_ok = behaviour.over_capacity
                || chain.scopes.as_ref().is_some_and(|scopes| {
                    scopes
                        .iter()
                        .all(|&(counter, limit)| self.scope_in_use[counter as usize] < limit)
                });
            if !scopes_ok {
                continue;
            }
            let Some(group) = chain.group else {
                continue;
            };
            let serving = &self.groups[group as usize];
            self.last_resolve_rows_examined += serving.len() as u64;
            // The candidates' order does not matter: their keys differ at
            // least in the replica, so the smallest is the same whatever
            // the order. Every replica of the group runs the chain's
            // version: the group is keyed by it.
            for (index, candidate_slot) in serving.iter().enumerate() {
                let r = &candidate_slot.replica;
                let codes = candidate_slot.codes;
                let slot = SlotRef {
                    group,
                    index: index as u32,
                };
                // ROUTE-9, replica half.
                let eligible = r.state == ReplicaState::Ready
                    && lease_live(r.lease_expires_at, now)
                    && (behaviour.over_capacity || r.active < r.spec.capacity)
                    && !r.circuit.open
                    && wanted.class == Some(codes.class)
                    && (any_region || wanted.region == Some(codes.region));
                if !eligible {
                    continue;
                }
                // ROUTE-10: the order of `CandidateKey`, the hash computed
                // only on a tie of everything before it.
                let rank = (
                    chain.binding.priority,
                    wanted.region != Some(codes.region),
                    wanted.zone != Some(codes.zone),
                    r.active,
                );
                let candidate = |hash| Best {
                    rank,
                    hash,
                    instance: &chain.instance,
                    replica: &r.spec.id,
                    binding: &chain.binding,
                    slot,
                };
                match &mut best {
                    None => best = Some(candidate(None)),
                    Some(b) => match rank.cmp(&b.rank) {
                        Ordering::Less => *b = candidate(None),
                        Ordering::Greater => {}
                        Ordering::Equal => {
                            let best_hash = *b
                                .hash
                                .get_or_insert_with(|| route_hash_key(action, b.replica));
                            let hash = route_hash_key(action, &r.spec.id);
                            if (hash, &chain.instance, &r.spec.id)
                                < (best_hash, b.instance, b.replica)
                            {
                                *b = candidate(Some(hash));
                            }
                        }
                    },
                }
            }
        }
        let Some(Best { binding, slot, .. }) = best else {
            return Err(Error::NoCapacity);
        };
        let fixed = self.route_fixed(catalog, request, tenant, binding, slot);
        let fence = self.next_fence();
        Ok(Decision { fixed, slot, fence })
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
            destination: RouteDestination {
                binding: binding.id.clone(),
                instance: instance.id.clone(),
                version: version.id.clone(),
                connector_type: version.connector_type.clone(),
                replica: replica.spec.id.clone(),
                endpoint: replica.spec.endpoint.clone(),
                peer_identity: replica.spec.peer_identity.clone(),
                region: replica.spec.region.clone(),
                zone: replica.spec.zone.clone(),
            },
            policy: PolicySnapshot {
                catalog_revision: catalog.revision,
                binding_priority: binding.priority,
                policy_revision: binding.policy_revision,
                credential: binding.credential.clone(),
                secret_provider: instance.secret_provider.clone(),
                quota_policy: binding.quota_policy.clone(),
                capacity_class: topo.capacity_class.clone(),
            },
            scopes: binding.admission_scopes.clone(),
            counters,
        });
        slot.template = Some(fixed.clone());
        fixed
    }

    /// ROUTE-7: every scope, the replica count and the route, in one step.
    fn commit_new(&mut self, action: &ActionId, d: Decision) -> RouteAssignment {
        self.take_capacity(&d.fixed.counters, d.slot, action);
        let stored = StoredRoute {
            fixed: d.fixed,
            slot: d.slot,
            fence: d.fence,
            attempt: 1,
            reserved: true,
            last_settlement: None,
        };
        let assignment = stored.assignment(action);
        self.routes.insert(action.clone(), stored);
        assignment
    }

    fn take_capacity(&mut self, counters: &[u32], at: SlotRef, action: &ActionId) {
        for &counter in counters {
            self.scope_in_use[counter as usize] += 1;
        }
        let slot = self.slot_mut(at);
        slot.replica.active += 1;
        slot.reserved.insert(action.clone());
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
        let Some(stored) = self.routes.get(&request.action).cloned() else {
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
                    assignment: self.commit_new(&request.action, moved),
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
        let fence = self.next_fence();
        self.take_capacity(&f.counters, stored.slot, &request.action);
        let record = self
            .routes
            .get_mut(&request.action)
            .unwrap_or_else(|| unreachable!("the route was read under the same lock"));
        record.fence = fence;
        record.attempt = stored.attempt + 1;
        record.reserved = true;
        Ok(Resolved {
            assignment: record.assignment(&request.action),
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
        self.take_capacity(&fixed.counters, slot, &identity.action);
        self.routes.insert(
            identity.action,
            StoredRoute {
                fixed,
                slot,
                fence,
                attempt: reservation.attempt,
                reserved: true,
                last_settlement: None,
            },
        );
    }

    /// SETTLE-1..SETTLE-5.
    pub(crate) fn settle(
        &mut self,
        params: &SettleParams,
        policy: CircuitPolicy,
        behaviour: &Behaviour,
    ) -> Result<Settled> {
        let given = &params.assignment;
        let action = &given.identity.action;
        let Some(stored) = self.routes.get_mut(action) else {
            return Err(Error::FenceLost);
        };
        if !stored.is(given, behaviour.ignore_fence) {
            return Err(Error::FenceLost);
        }
        if !stored.reserved && !behaviour.double_release {
            return Ok(Settled { released: false });
        }
        Self::release_stored(
            stored,
            action,
            &mut self.groups,
            &mut self.scope_in_use,
            params.outcome,
            policy,
        );
        Ok(Settled { released: true })
    }

    /// Gives back what `stored`'s reservation took and records the
    /// settlement.
    fn release_stored(
        stored: &mut StoredRoute,
        action: &ActionId,
        groups: &mut [Vec<Slot>],
        scope_in_use: &mut [u32],
        outcome: Outcome,
        policy: CircuitPolicy,
    ) {
        for &counter in &stored.fixed.counters {
            let n = &mut scope_in_use[counter as usize];
            *n = n.saturating_sub(1);
        }
        let slot = &mut groups[stored.slot.group as usize][stored.slot.index as usize];
        slot.replica.active = slot.replica.active.saturating_sub(1);
        slot.reserved.remove(action);
        slot.replica.circuit = slot.replica.circuit.after_settlement(outcome, policy);
        stored.reserved = false;
        stored.last_settlement = Some(outcome);
    }

    /// LEASE-1: register or come back.
    pub(crate) fn register(
        &mut self,
        catalog: &CatalogState,
        params: &RegisterParams,
        now: Timestamp,
    ) -> Result<Replica> {
        params.validate()?;
        let spec = &params.spec;
        if !catalog.instances.contains_key(&spec.instance) {
            return Err(Error::NotFound {
                what: "instance",
                id: spec.instance.to_string(),
            });
        }
        if !catalog.versions.contains_key(&spec.version) {
            return Err(Error::NotFound {
                what: "version",
                id: spec.version.to_string(),
            });
        }
        let lease = now.plus_ms(params.lease_ttl_ms);
        if let Some(&at) = self.slot_of.get(&spec.id) {
            let r = &mut self.groups[at.group as usize][at.index as usize].replica;
            if r.spec != *spec {
                return Err(Error::Conflict {
                    reason: "a registered replica must present the same identity",
                });
            }
            if params.health_seq <= r.health_seq {
                return Ok(r.clone());
            }
            if r.state != ReplicaState::Offline {
                self.leases.remove(&(r.lease_expires_at, spec.id.clone()));
            }
            r.health_seq = params.health_seq;
            r.lease_expires_at = lease;
            r.state = ReplicaState::Ready;
            self.leases.insert((lease, spec.id.clone()));
            return Ok(r.clone());
        }
        let siblings = self
            .replicas_per_instance
            .entry(spec.instance.clone())
            .or_default();
        if *siblings >= INSTANCE_REPLICAS_MAX {
            return Err(Error::limit("replicas per instance", INSTANCE_REPLICAS_MAX));
        }
        *siblings += 1;
        let groups = &mut self.groups;
        let group = *self
            .replicas_by_instance_version
            .entry((spec.instance.clone(), spec.version.clone()))
            .or_insert_with(|| {
                groups.push(Vec::new());
                (groups.len() - 1) as u32
            });
        let at = SlotRef {
            group,
            index: self.groups[group as usize].len() as u32,
        };
        let replica = Replica {
            spec: spec.clone(),
            health_seq: params.health_seq,
            lease_expires_at: lease,
            active: 0,
            state: ReplicaState::Ready,
            circuit: Circuit::default(),
        };
        self.leases.insert((lease, spec.id.clone()));
        self.slot_of.insert(spec.id.clone(), at);
        let codes = self
            .topology
            .register(&spec.region, &spec.zone, &spec.capacity_class);
        self.groups[group as usize].push(Slot {
            replica: replica.clone(),
            codes,
            reserved: BTreeSet::new(),
            template: None,
        });
        Ok(replica)
    }

    fn replica_mut(&mut self, id: &ReplicaId) -> Result<&mut Replica> {
        match self.slot_of.get(id) {
            Some(&at) => Ok(&mut self.slot_mut(at).replica),
            None => Err(Error::NotFound {
                what: "replica",
                id: id.to_string(),
            }),
        }
    }

    /// LEASE-1: newer sequences advance; older ones are ignored.
    pub(crate) fn heartbeat(
        &mut self,
        params: &HeartbeatParams,
        now: Timestamp,
    ) -> Result<HeartbeatOutcome> {
        let r = self.replica_mut(&params.replica)?;
        if r.state == ReplicaState::Offline {
            return Err(Error::ReplicaUnavailable);
        }
        if params.health_seq <= r.health_seq {
            return Ok(HeartbeatOutcome::Ignored);
        }
        let old = r.lease_expires_at;
        r.health_seq = params.health_seq;
        r.lease_expires_at = now.plus_ms(params.lease_ttl_ms);
        let new = r.lease_expires_at;
        self.leases.remove(&(old, params.replica.clone()));
        self.leases.insert((new, params.replica.clone()));
        Ok(HeartbeatOutcome::Applied)
    }

    pub(crate) fn drain(&mut self, id: &ReplicaId) -> Result<Replica> {
        let r = self.replica_mut(id)?;
        if r.state == ReplicaState::Ready {
            r.state = ReplicaState::Draining;
        }
        Ok(r.clone())
    }

    /// LEASE-2, LEASE-3: bounded by replicas and by reservations, contacts
    /// nothing, rewrites no destination. The batch stops before the
    /// expired replica whose reservations would take it past
    /// [`LEASE_MAINTENANCE_RESERVATIONS_MAX`] (the first always fits).
    pub(crate) fn maintain(&mut self, max: u32, now: Timestamp) -> Result<Maintained> {
        let mut report = Maintained::default();
        let due: Vec<(Timestamp, ReplicaId)> = self
            .leases
            .iter()
            .take_while(|(at, _)| *at <= now)
            .take(max as usize + 1)
            .cloned()
            .collect();
        let mut batch = 0;
        let mut held = 0usize;
        for (_, id) in due.iter().take(max as usize) {
            let n = self
                .slot_of
                .get(id)
                .map_or(0, |&at| self.slot(at).reserved.len());
            if batch > 0 && held + n > LEASE_MAINTENANCE_RESERVATIONS_MAX as usize {
                break;
            }
            held += n;
            batch += 1;
        }
        report.more = due.len() > batch;
        for (at, id) in due.into_iter().take(batch) {
            self.leases.remove(&(at, id.clone()));
            let actions: Vec<ActionId> = match self.slot_of.get(&id) {
                Some(&at) => {
                    let slot = self.slot_mut(at);
                    slot.replica.state = ReplicaState::Offline;
                    slot.reserved.iter().cloned().collect()
                }
                None => Vec::new(),
            };
            for action in actions {
                let stored = self
                    .routes
                    .get_mut(&action)
                    .unwrap_or_else(|| unreachable!("a reservation belongs to a stored route"));
                report.releases.push(ReleasedReservation {
                    action: action.clone(),
                    fence: stored.fence,
                    replica: stored.fixed.destination.replica.clone(),
                    scopes: stored.fixed.scopes.clone(),
                });
                // lease_expired never touches the circuit.
                Self::release_stored(
                    stored,
                    &action,
                    &mut self.groups,
                    &mut self.scope_in_use,
                    Outcome::LeaseExpired,
                    CircuitPolicy::default(),
                );
                report.released += 1;
            }
            report.expired.push(id);
        }
        report.releases.sort();
        Ok(report)
    }

    /// SETTLE-6: only an operator closes a circuit, and it is audited.
    pub(crate) fn circuit_close(
        &mut self,
        params: &CircuitCloseParams,
        operator: &str,
        now: Timestamp,
    ) -> Result<AuditEntry> {
        let r = self.replica_mut(&params.replica)?;
        if !r.circuit.open {
            return Err(Error::Conflict {
                reason: "the circuit is not open",
            });
        }
        r.circuit = Circuit::default();
        self.audit_seq += 1;
        let entry = AuditEntry {
            seq: self.audit_seq,
            at: now,
            operator: operator.to_owned(),
            action: "circuit_close".into(),
            replica: params.replica.clone(),
            reason: params.reason.clone(),
        };
        if self.audit.len() >= AUDIT_ENTRIES_MAX {
            self.audit.pop_front();
        }
        self.audit.push_back(entry.clone());
        Ok(entry)
    }

    /// AUTH-7: the kept audit entries after `query.after`, oldest first.
    pub(crate) fn audit_page(&self, query: &AuditQuery) -> AuditPage {
        let after = query.after.unwrap_or(0);
        let limit = query.limit as usize;
        let mut entries: Vec<AuditEntry> = self
            .audit
            .iter()
            .filter(|e| e.seq > after)
            .take(limit + 1)
            .cloned()
            .collect();
        let more = entries.len() > limit;
        entries.truncate(limit);
        AuditPage {
            next_after: if more {
                entries.last().map(|e| e.seq)
            } else {
                None
            },
            entries,
        }
    }

    pub(crate) fn status(&self, revision: Revision) -> StatusReport {
        let mut s = StatusReport {
            revision,
            ..StatusReport::default()
        };
        for r in self.groups.iter().flatten().map(|s| &s.replica) {
            match r.state {
                ReplicaState::Ready => s.replicas_ready += 1,
                ReplicaState::Draining => s.replicas_draining += 1,
                ReplicaState::Offline => s.replicas_offline += 1,
            }
            if r.circuit.open {
                s.open_circuits += 1;
            }
        }
        s.active_assignments = self
            .groups
            .iter()
            .flatten()
            .map(|s| s.reserved.len() as u64)
            .sum();
        s.assignments_total = self.routes.len() as u64;
        s
    }

    pub(crate) fn snapshot(&self, catalog: &CatalogState) -> Result<StoreSnapshot> {
        let rows = self.slot_of.len() + self.routes.len() + catalog.scopes.len();
        if rows > INSPECT_ROWS_MAX {
            return Err(Error::limit("inspected rows", INSPECT_ROWS_MAX));
        }
        Ok(StoreSnapshot {
            revision: catalog.revision,
            replicas: self
                .slot_of
                .values()
                .map(|&at| self.slot(at).replica.clone())
                .collect(),
            scopes: catalog
                .scopes
                .values()
                .map(|s| ScopeUsage {
                    scope: s.clone(),
                    in_use: self.in_use(&s.id),
                })
                .collect(),
            routes: self
                .routes
                .sorted()
                .into_iter()
                .map(|(action, r)| r.record(action))
                .collect(),
        })
    }
}
