//! The replica lifecycle over the live state: registering or coming back,
//! heartbeats, draining, reading a replica, and lease maintenance that
//! takes expired replicas offline and releases their reservations.

use std::collections::BTreeSet;

use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::id::ReplicaId;
use crate::limits::{INSTANCE_REPLICAS_MAX, LEASE_MAINTENANCE_RESERVATIONS_MAX};
use crate::records::{Circuit, FenceToken, Outcome, Replica, ReplicaState};
use crate::request::{
    CircuitPolicy, HeartbeatOutcome, HeartbeatParams, Maintained, RegisterParams, ReleaseReason,
    ReleasedReservation,
};

use super::{LiveState, RouteRow, Slot, SlotRef};
use crate::memory::catalog::CatalogState;

impl LiveState {
    /// The replica registered as `id`.
    pub(crate) fn replica(&self, id: &ReplicaId) -> Option<&Replica> {
        let at = *self.slot_of.get(id)?;
        Some(&self.slot(at).replica)
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
            let back = r.clone();
            self.leases.insert((lease, spec.id.clone()));
            let number = self.slot(at).number;
            self.changes.replica(number);
            return Ok(back);
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
        let number = u32::try_from(self.replica_at.len())
            .unwrap_or_else(|_| unreachable!("replicas are bounded per instance"));
        self.replica_at.push(at);
        self.groups[group as usize].push(Slot {
            replica: replica.clone(),
            codes,
            reserved: BTreeSet::new(),
            template: None,
            number,
        });
        self.changes.replica(number);
        Ok(replica)
    }

    pub(super) fn slot_of_mut(&mut self, id: &ReplicaId) -> Result<&mut Slot> {
        match self.slot_of.get(id) {
            Some(&at) => Ok(self.slot_mut(at)),
            None => Err(Error::NotFound {
                what: "replica",
                id: id.to_string(),
            }),
        }
    }

    /// LEASE-1: newer sequences advance; older ones are ignored.
    /// LEASE-1: an applied heartbeat renews the lease to `now` plus its
    /// TTL. `keep_lease` is the `heartbeat-keeps-lease` plant: the beat is
    /// applied and the lease left where it was.
    pub(crate) fn heartbeat(
        &mut self,
        params: &HeartbeatParams,
        now: Timestamp,
        keep_lease: bool,
    ) -> Result<HeartbeatOutcome> {
        let slot = self.slot_of_mut(&params.replica)?;
        let number = slot.number;
        let r = &mut slot.replica;
        if r.state == ReplicaState::Offline {
            return Err(Error::ReplicaUnavailable);
        }
        if params.health_seq <= r.health_seq {
            return Ok(HeartbeatOutcome::Ignored);
        }
        let old = r.lease_expires_at;
        r.health_seq = params.health_seq;
        if !keep_lease {
            r.lease_expires_at = now.plus_ms(params.lease_ttl_ms);
        }
        let new = r.lease_expires_at;
        self.leases.remove(&(old, params.replica.clone()));
        self.leases.insert((new, params.replica.clone()));
        self.changes.replica(number);
        Ok(HeartbeatOutcome::Applied)
    }

    pub(crate) fn drain(&mut self, id: &ReplicaId) -> Result<Replica> {
        let slot = self.slot_of_mut(id)?;
        if slot.replica.state != ReplicaState::Ready {
            return Ok(slot.replica.clone());
        }
        slot.replica.state = ReplicaState::Draining;
        let drained = slot.replica.clone();
        let number = slot.number;
        self.changes.replica(number);
        Ok(drained)
    }

    /// LEASE-2, LEASE-3: bounded by replicas and by reservations, contacts
    /// nothing, rewrites no destination. The batch stops before the
    /// expired replica whose reservations would take it past
    /// [`LEASE_MAINTENANCE_RESERVATIONS_MAX`] (the first always fits).
    /// The replicas in `held` are passed over as rows another transaction
    /// holds: their expiry and their reservations' holds wait for the next
    /// call, which `more` announces.
    pub(crate) fn maintain(
        &mut self,
        max: u32,
        now: Timestamp,
        hold_ms: u64,
        held: &BTreeSet<ReplicaId>,
    ) -> Result<Maintained> {
        let mut report = Maintained::default();
        let mut due: Vec<(Timestamp, ReplicaId)> = Vec::new();
        for (at, id) in self.leases.iter().take_while(|(at, _)| *at <= now) {
            if held.contains(id) {
                report.more = true;
                continue;
            }
            if due.len() > max as usize {
                break;
            }
            due.push((*at, id.clone()));
        }
        let mut batch = 0;
        let mut reservations = 0usize;
        for (_, id) in due.iter().take(max as usize) {
            let n = self
                .slot_of
                .get(id)
                .map_or(0, |&at| self.slot(at).reserved.len());
            if batch > 0 && reservations + n > LEASE_MAINTENANCE_RESERVATIONS_MAX as usize {
                break;
            }
            reservations += n;
            batch += 1;
        }
        report.more |= due.len() > batch;
        for (at, id) in due.into_iter().take(batch) {
            self.leases.remove(&(at, id.clone()));
            // The order of the releases reaches no answer: the report
            // lists them sorted.
            let routes: Vec<u32> = match self.slot_of.get(&id) {
                Some(&at) => {
                    let slot = self.slot_mut(at);
                    slot.replica.state = ReplicaState::Offline;
                    let held = slot.reserved.iter().copied().collect();
                    let number = slot.number;
                    self.changes.replica(number);
                    held
                }
                None => Vec::new(),
            };
            for number in routes {
                let RouteRow { action, route } = &mut self.route_rows[number];
                let (action, stored) = (action.clone(), route);
                report.releases.push(ReleasedReservation {
                    action: action.clone(),
                    fence: stored.fence,
                    replica: stored.fixed.destination.replica.clone(),
                    scopes: stored.fixed.scopes.clone(),
                    reason: ReleaseReason::LeaseExpired,
                });
                self.holds.remove(&(stored.reserved_at, stored.fence));
                // lease_expired never touches the circuit.
                Self::release_stored(
                    stored,
                    number,
                    &mut self.groups,
                    &mut self.scope_in_use,
                    &mut self.changes,
                    Outcome::LeaseExpired,
                    CircuitPolicy::default(),
                );
                report.released += 1;
            }
            report.expired.push(id);
        }
        self.expire_holds(max, now, hold_ms, held, &mut report);
        report.releases.sort();
        Ok(report)
    }

    /// PIN-8: after the expired replicas, the reservations held longer
    /// than `hold_ms`, oldest first (then by fence), at most `max` of them
    /// and within the call's reservation bound, released as
    /// `lease_expired`; `more` when some remain.
    fn expire_holds(
        &mut self,
        max: u32,
        now: Timestamp,
        hold_ms: u64,
        held: &BTreeSet<ReplicaId>,
        report: &mut Maintained,
    ) {
        let room = (max as usize).min(
            (LEASE_MAINTENANCE_RESERVATIONS_MAX as usize).saturating_sub(report.releases.len()),
        );
        let due: Vec<((Timestamp, FenceToken), u32)> = self
            .holds
            .iter()
            .take_while(|((at, _), _)| at.plus_ms(hold_ms) <= now)
            .take(room + 1)
            .map(|(k, n)| (*k, *n))
            .collect();
        // The first `room + 1` holds due are looked at; a held one is
        // passed over and the next takes its place.
        let mut taken = 0;
        for (key, number) in due {
            if taken >= room {
                report.more = true;
                break;
            }
            let RouteRow { action, route } = &mut self.route_rows[number];
            let (action, stored) = (action.clone(), route);
            if held.contains(&stored.fixed.destination.replica) {
                report.more = true;
                continue;
            }
            taken += 1;
            report.releases.push(ReleasedReservation {
                action: action.clone(),
                fence: key.1,
                replica: stored.fixed.destination.replica.clone(),
                scopes: stored.fixed.scopes.clone(),
                reason: ReleaseReason::HoldExpired,
            });
            self.holds.remove(&key);
            Self::release_stored(
                stored,
                number,
                &mut self.groups,
                &mut self.scope_in_use,
                &mut self.changes,
                Outcome::LeaseExpired,
                CircuitPolicy::default(),
            );
            report.released += 1;
        }
    }
}
