//! Live state: replicas, admission counters and routes.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::id::{ActionId, CapabilityId, InstanceId, ReplicaId, ScopeId, TenantId, VersionId};
use crate::inspect::{INSPECT_ROWS_MAX, ScopeUsage, StoreSnapshot};
use crate::limits::{AUDIT_ENTRIES_MAX, INSTANCE_REPLICAS_MAX};
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

/// One registered replica and what routing keeps beside it. Replicas are
/// never removed, so a [`SlotRef`] names its replica for good.
#[derive(Debug, Clone)]
struct Slot {
    replica: Replica,
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
    routes: BTreeMap<ActionId, StoredRoute>,
    scope_in_use: BTreeMap<ScopeId, u32>,
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

    fn scope_has_room(&self, catalog: &CatalogState, scope: &ScopeId) -> bool {
        let in_use = self.scope_in_use.get(scope).copied().unwrap_or(0);
        catalog.scopes.get(scope).is_some_and(|s| in_use < s.limit)
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
        let Some(binding_ids) = catalog
            .bindings_by_tenant_capability
            .get(&(tenant.clone(), request.capability.clone()))
        else {
            return Err(Error::NoEligibleBinding);
        };
        self.last_resolve_rows_examined += binding_ids.len() as u64;
        let chains = binding_ids
            .iter()
            .filter_map(|b| catalog.bindings.get(b))
            .filter_map(|b| {
                catalog
                    .eligible_chain(b, &request.capability)
                    .map(|(i, v)| (b, i, v))
            });

        let topo = &request.topology;
        let action = &request.action;
        let mut any_chain = false;
        let mut best: Option<Best<'_, '_>> = None;
        for (binding, instance, version) in chains {
            any_chain = true;
            let scopes_ok = behaviour.over_capacity
                || binding
                    .admission_scopes
                    .iter()
                    .all(|s| self.scope_has_room(catalog, s));
            if !scopes_ok {
                continue;
            }
            let Some(&group) = self
                .replicas_by_instance_version
                .get(&(instance.id.clone(), version.id.clone()))
            else {
                continue;
            };
            let serving = &self.groups[group as usize];
            self.last_resolve_rows_examined += serving.len() as u64;
            // The candidates' order does not matter: their keys differ at
            // least in the replica, so the smallest is the same whatever
            // the order.
            for (index, candidate_slot) in serving.iter().enumerate() {
                let r = &candidate_slot.replica;
                let slot = SlotRef {
                    group,
                    index: index as u32,
                };
                // ROUTE-9, replica half.
                let eligible = r.spec.version == version.id
                    && r.state == ReplicaState::Ready
                    && lease_live(r.lease_expires_at, now)
                    && (behaviour.over_capacity || r.active < r.spec.capacity)
                    && !r.circuit.open
                    && r.spec.capacity_class == topo.capacity_class
                    && (topo.cross_region == CrossRegion::Allowed
                        || topo.preferred_region.as_ref() == Some(&r.spec.region));
                if !eligible {
                    continue;
                }
                // ROUTE-10: the order of `CandidateKey`, the hash computed
                // only on a tie of everything before it.
                let rank = (
                    binding.priority,
                    topo.preferred_region.as_ref() != Some(&r.spec.region),
                    topo.preferred_zone.as_ref() != Some(&r.spec.zone),
                    r.active,
                );
                let candidate = |hash| Best {
                    rank,
                    hash,
                    instance: &instance.id,
                    replica: &r.spec.id,
                    binding,
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
                            if (hash, &instance.id, &r.spec.id) < (best_hash, b.instance, b.replica)
                            {
                                *b = candidate(Some(hash));
                            }
                        }
                    },
                }
            }
        }
        if !any_chain {
            return Err(Error::NoEligibleBinding);
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
        let slot = self.slot_mut(at);
        // Within one catalog revision a binding names one tenant and one
        // capability, and a replica's spec (its capacity class among it)
        // never changes once registered, which every eligible request
        // matches: the revision and the binding decide whether the
        // template is this route's fixed part.
        if let Some(t) = &slot.template
            && t.policy.catalog_revision == catalog.revision
            && t.destination.binding == binding.id
        {
            return t.clone();
        }
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
        });
        slot.template = Some(fixed.clone());
        fixed
    }

    /// ROUTE-7: every scope, the replica count and the route, in one step.
    fn commit_new(&mut self, action: &ActionId, d: Decision) -> RouteAssignment {
        self.take_capacity(&d.fixed.scopes, d.slot, action);
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

    fn take_capacity(&mut self, scopes: &BTreeSet<ScopeId>, at: SlotRef, action: &ActionId) {
        for s in scopes {
            match self.scope_in_use.get_mut(s) {
                Some(n) => *n += 1,
                None => {
                    self.scope_in_use.insert(s.clone(), 1);
                }
            }
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
        let stored = self.routes[&request.action].clone();
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
        self.take_capacity(&f.scopes, stored.slot, &request.action);
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
        let fixed = Arc::new(RouteFixed {
            tenant: identity.tenant,
            capability: identity.capability,
            destination,
            policy,
            scopes: reservation.scopes,
        });
        self.take_capacity(&fixed.scopes, slot, &identity.action);
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
        scope_in_use: &mut BTreeMap<ScopeId, u32>,
        outcome: Outcome,
        policy: CircuitPolicy,
    ) {
        for s in &stored.fixed.scopes {
            if let Some(n) = scope_in_use.get_mut(s) {
                *n = n.saturating_sub(1);
            }
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
        self.groups[group as usize].push(Slot {
            replica: replica.clone(),
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

    /// LEASE-2, LEASE-3: bounded, contacts nothing, rewrites no destination.
    pub(crate) fn maintain(&mut self, max: u32, now: Timestamp) -> Result<Maintained> {
        let mut report = Maintained::default();
        let due: Vec<(Timestamp, ReplicaId)> = self
            .leases
            .iter()
            .take_while(|(at, _)| *at <= now)
            .take(max as usize + 1)
            .cloned()
            .collect();
        report.more = due.len() > max as usize;
        for (at, id) in due.into_iter().take(max as usize) {
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
                    in_use: self.scope_in_use.get(&s.id).copied().unwrap_or(0),
                })
                .collect(),
            routes: self
                .routes
                .iter()
                .map(|(action, r)| r.record(action))
                .collect(),
        })
    }
}
