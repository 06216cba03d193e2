//! Live state: replicas, admission counters and routes.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::id::{ActionId, ReplicaId, ScopeId};
use crate::inspect::{INSPECT_ROWS_MAX, ScopeUsage, StoreSnapshot};
use crate::limits::{AUDIT_ENTRIES_MAX, INSTANCE_REPLICAS_MAX};
use crate::ordering::{CandidateKey, route_hash};
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

#[derive(Debug, Default, Clone)]
pub(crate) struct LiveState {
    pub(crate) replicas: BTreeMap<ReplicaId, Replica>,
    pub(crate) routes: BTreeMap<ActionId, RouteRecord>,
    scope_in_use: BTreeMap<ScopeId, u32>,
    /// instance → replicas serving it: the routing index.
    replicas_by_instance_version:
        BTreeMap<(crate::id::InstanceId, crate::id::VersionId), BTreeSet<ReplicaId>>,
    /// instance → how many replicas serve it, for `INSTANCE_REPLICAS_MAX`.
    replicas_per_instance: BTreeMap<crate::id::InstanceId, usize>,
    /// replica → actions holding a reservation on it.
    reserved_by_replica: BTreeMap<ReplicaId, BTreeSet<ActionId>>,
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

    fn scope_has_room(&self, catalog: &CatalogState, scope: &ScopeId) -> bool {
        let in_use = self.scope_in_use.get(scope).copied().unwrap_or(0);
        catalog.scopes.get(scope).is_some_and(|s| in_use < s.limit)
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
            let id = &existing.assignment.identity;
            if (&id.tenant != tenant || id.capability != request.capability)
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
                    assignment: existing.assignment.clone(),
                    kind: ResolveKind::Existing,
                });
            }
            return self.reserve_pinned(catalog, request, now, behaviour);
        }

        let assignment = self.decide(catalog, request, tenant, now, behaviour)?;
        self.commit_new(assignment.clone());
        Ok(Resolved {
            assignment,
            kind: ResolveKind::Created,
        })
    }

    /// Picks the target of a new route and builds its assignment, without
    /// changing anything.
    fn decide(
        &mut self,
        catalog: &CatalogState,
        request: &RouteRequest,
        tenant: &crate::id::TenantId,
        now: Timestamp,
        behaviour: &Behaviour,
    ) -> Result<RouteAssignment> {
        // ROUTE-5: at least one enabled binding whose whole chain is valid.
        let Some(binding_ids) = catalog
            .bindings_by_tenant_capability
            .get(&(tenant.clone(), request.capability.clone()))
        else {
            return Err(Error::NoEligibleBinding);
        };
        self.last_resolve_rows_examined += binding_ids.len() as u64;
        let chains: Vec<(&Binding, _, _)> = binding_ids
            .iter()
            .filter_map(|b| catalog.bindings.get(b))
            .filter_map(|b| {
                catalog
                    .eligible_chain(b, &request.capability)
                    .map(|(i, v)| (b, i, v))
            })
            .collect();
        if chains.is_empty() {
            return Err(Error::NoEligibleBinding);
        }

        let topo = &request.topology;
        let mut best: Option<(CandidateKey, &Binding, &Replica)> = None;
        for (binding, instance, version) in &chains {
            let scopes_ok = behaviour.over_capacity
                || binding
                    .admission_scopes
                    .iter()
                    .all(|s| self.scope_has_room(catalog, s));
            if !scopes_ok {
                continue;
            }
            let Some(replica_ids) = self
                .replicas_by_instance_version
                .get(&(instance.id.clone(), version.id.clone()))
            else {
                continue;
            };
            self.last_resolve_rows_examined += replica_ids.len() as u64;
            for rid in replica_ids {
                let Some(r) = self.replicas.get(rid) else {
                    continue;
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
                // ROUTE-10.
                let key = CandidateKey {
                    priority: binding.priority,
                    region_mismatch: topo.preferred_region.as_ref() != Some(&r.spec.region),
                    zone_mismatch: topo.preferred_zone.as_ref() != Some(&r.spec.zone),
                    active: r.active,
                    hash: route_hash(&request.action, rid),
                    instance: instance.id.clone(),
                    replica: rid.clone(),
                };
                if best.as_ref().is_none_or(|(k, _, _)| key < *k) {
                    best = Some((key, binding, r));
                }
            }
        }
        let Some((_, binding, replica)) = best else {
            return Err(Error::NoCapacity);
        };
        let replica = replica.clone();
        let instance = &catalog.instances[&binding.instance];
        let version = &catalog.versions[&replica.spec.version];
        let fence = self.next_fence();
        Ok(RouteAssignment {
            identity: RouteIdentity {
                action: request.action.clone(),
                tenant: tenant.clone(),
                capability: request.capability.clone(),
            },
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
            reservation: Reservation {
                fence,
                attempt: 1,
                scopes: binding.admission_scopes.clone(),
            },
        })
    }

    /// ROUTE-7: every scope, the replica count and the route, in one step.
    fn commit_new(&mut self, assignment: RouteAssignment) {
        self.take_capacity(&assignment);
        self.routes.insert(
            assignment.identity.action.clone(),
            RouteRecord {
                assignment,
                reserved: true,
                last_settlement: None,
            },
        );
    }

    fn take_capacity(&mut self, a: &RouteAssignment) {
        for s in &a.reservation.scopes {
            *self.scope_in_use.entry(s.clone()).or_default() += 1;
        }
        if let Some(r) = self.replicas.get_mut(&a.destination.replica) {
            r.active += 1;
        }
        self.reserved_by_replica
            .entry(a.destination.replica.clone())
            .or_default()
            .insert(a.identity.action.clone());
    }

    fn give_capacity(&mut self, a: &RouteAssignment) {
        for s in &a.reservation.scopes {
            if let Some(n) = self.scope_in_use.get_mut(s) {
                *n = n.saturating_sub(1);
            }
        }
        if let Some(r) = self.replicas.get_mut(&a.destination.replica) {
            r.active = r.active.saturating_sub(1);
        }
        if let Some(set) = self.reserved_by_replica.get_mut(&a.destination.replica) {
            set.remove(&a.identity.action);
            if set.is_empty() {
                self.reserved_by_replica.remove(&a.destination.replica);
            }
        }
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
        let record = &self.routes[&request.action];
        let a = record.assignment.clone();
        let replica_ok = self.replicas.get(&a.destination.replica).is_some_and(|r| {
            matches!(r.state, ReplicaState::Ready | ReplicaState::Draining)
                && lease_live(r.lease_expires_at, now)
                && r.spec.version == a.destination.version
                && !r.circuit.open
        }) && catalog
            .versions
            .get(&a.destination.version)
            .is_some_and(|v| v.active && v.qualified)
            && catalog
                .types
                .get(&a.destination.connector_type)
                .is_some_and(|t| t.enabled);
        if !replica_ok {
            if behaviour.failover_on_retry {
                let tenant = a.identity.tenant.clone();
                let moved = self.decide(catalog, request, &tenant, now, behaviour)?;
                self.commit_new(moved.clone());
                return Ok(Resolved {
                    assignment: moved,
                    kind: ResolveKind::Reserved,
                });
            }
            return Err(Error::ReplicaUnavailable);
        }
        let replica = &self.replicas[&a.destination.replica];
        let room = behaviour.over_capacity
            || (replica.active < replica.spec.capacity
                && a.reservation
                    .scopes
                    .iter()
                    .all(|s| self.scope_has_room(catalog, s)));
        if !room {
            return Err(Error::NoCapacity);
        }
        let fence = self.next_fence();
        let assignment = RouteAssignment {
            reservation: Reservation {
                fence,
                attempt: a.reservation.attempt + 1,
                scopes: a.reservation.scopes.clone(),
            },
            ..a
        };
        self.take_capacity(&assignment);
        let record = self
            .routes
            .get_mut(&request.action)
            .unwrap_or_else(|| unreachable!("the route was read under the same lock"));
        record.assignment = assignment.clone();
        record.reserved = true;
        Ok(Resolved {
            assignment,
            kind: ResolveKind::Reserved,
        })
    }

    /// The `no-action-serialization` plant's write: overwrite and reserve.
    pub(crate) fn force_insert(&mut self, assignment: RouteAssignment) {
        let mut fresh = assignment;
        fresh.reservation.fence = self.next_fence();
        self.commit_new(fresh);
    }

    /// SETTLE-1..SETTLE-5.
    pub(crate) fn settle(
        &mut self,
        params: &SettleParams,
        policy: CircuitPolicy,
        behaviour: &Behaviour,
    ) -> Result<Settled> {
        let given = &params.assignment;
        let Some(stored) = self.routes.get(&given.identity.action) else {
            return Err(Error::FenceLost);
        };
        let same = if behaviour.ignore_fence {
            same_but_fence(given, &stored.assignment)
        } else {
            *given == stored.assignment
        };
        if !same {
            return Err(Error::FenceLost);
        }
        if !stored.reserved && !behaviour.double_release {
            return Ok(Settled { released: false });
        }
        let a = stored.assignment.clone();
        self.release(&a, params.outcome, policy);
        Ok(Settled { released: true })
    }

    fn release(&mut self, a: &RouteAssignment, outcome: Outcome, policy: CircuitPolicy) {
        self.give_capacity(a);
        if let Some(r) = self.replicas.get_mut(&a.destination.replica) {
            r.circuit = r.circuit.after_settlement(outcome, policy);
        }
        if let Some(record) = self.routes.get_mut(&a.identity.action) {
            record.reserved = false;
            record.last_settlement = Some(outcome);
        }
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
        if let Some(r) = self.replicas.get_mut(&spec.id) {
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
        self.replicas_by_instance_version
            .entry((spec.instance.clone(), spec.version.clone()))
            .or_default()
            .insert(spec.id.clone());
        let replica = Replica {
            spec: spec.clone(),
            health_seq: params.health_seq,
            lease_expires_at: lease,
            active: 0,
            state: ReplicaState::Ready,
            circuit: Circuit::default(),
        };
        self.leases.insert((lease, spec.id.clone()));
        self.replicas.insert(spec.id.clone(), replica.clone());
        Ok(replica)
    }

    fn replica_mut(&mut self, id: &ReplicaId) -> Result<&mut Replica> {
        self.replicas.get_mut(id).ok_or_else(|| Error::NotFound {
            what: "replica",
            id: id.to_string(),
        })
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
            if let Some(r) = self.replicas.get_mut(&id) {
                r.state = ReplicaState::Offline;
            }
            let actions: Vec<ActionId> = self
                .reserved_by_replica
                .get(&id)
                .map(|s| s.iter().cloned().collect())
                .unwrap_or_default();
            for action in actions {
                let a = self.routes[&action].assignment.clone();
                // lease_expired never touches the circuit.
                self.release(&a, Outcome::LeaseExpired, CircuitPolicy::default());
                report.released += 1;
                report.releases.push(ReleasedReservation {
                    action: a.identity.action.clone(),
                    fence: a.reservation.fence,
                    replica: a.destination.replica.clone(),
                    scopes: a.reservation.scopes.clone(),
                });
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
        for r in self.replicas.values() {
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
            .reserved_by_replica
            .values()
            .map(|a| a.len() as u64)
            .sum();
        s.assignments_total = self.routes.len() as u64;
        s
    }

    pub(crate) fn snapshot(&self, catalog: &CatalogState) -> Result<StoreSnapshot> {
        let rows = self.replicas.len() + self.routes.len() + catalog.scopes.len();
        if rows > INSPECT_ROWS_MAX {
            return Err(Error::limit("inspected rows", INSPECT_ROWS_MAX));
        }
        Ok(StoreSnapshot {
            revision: catalog.revision,
            replicas: self.replicas.values().cloned().collect(),
            scopes: catalog
                .scopes
                .values()
                .map(|s| ScopeUsage {
                    scope: s.clone(),
                    in_use: self.scope_in_use.get(&s.id).copied().unwrap_or(0),
                })
                .collect(),
            routes: self.routes.values().cloned().collect(),
        })
    }
}

/// The `ignore-fence` plant's comparison: the same assignment whatever its
/// reservation says.
fn same_but_fence(given: &RouteAssignment, stored: &RouteAssignment) -> bool {
    let mut g = given.clone();
    g.reservation = stored.reservation.clone();
    g == *stored
}
