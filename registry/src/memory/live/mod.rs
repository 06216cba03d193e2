//! The live state of the in-memory backend: the store of registered
//! replicas, their routes and admission counters, and the indexes kept
//! beside them (replica groups by instance and version, topology codes,
//! lease ends). The operations on it live in the child modules:
//!
//! - `resolve`: routing: resolve plans, picking a target, pinned
//!   reservations, reading a route.
//! - `settle`: settlement, the release of a reservation, and closing a
//!   circuit.
//! - `lifecycle`: replica registration, heartbeats, draining and lease
//!   maintenance.
//! - `audit`: the operator audit trail, status counts and inspection.
//! - `feed`: the change feed: which rows each write wrote, read by cursor.

mod audit;
mod feed;
mod lifecycle;
mod resolve;
mod settle;

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use crate::clock::Timestamp;
use crate::id::{
    ActionId, CapabilityId, CapacityClass, InstanceId, Region, ReplicaId, ScopeId, TenantId,
    VersionId, Zone,
};
use crate::records::{
    FenceToken, Outcome, PolicySnapshot, Replica, Reservation, RouteAssignment, RouteDestination,
    RouteIdentity, RouteRecord,
};
use crate::request::AuditEntry;

use super::Behaviour;
use super::catalog::CatalogState;
use super::lookup::LookupMap;

use resolve::PlanCache;

/// One registered replica and what routing keeps beside it. Replicas are
/// never removed, so a [`SlotRef`] names its replica for good.
#[derive(Debug, Clone)]
struct Slot {
    replica: Replica,
    /// The replica's region, zone and capacity class as codes, so a
    /// resolve compares numbers instead of texts.
    codes: TopologyCodes,
    /// The routes holding a reservation on this replica, by number.
    reserved: BTreeSet<u32>,
    /// The fixed part of the last route decided to this replica, shared
    /// by the next ones while nothing it was built from has changed.
    template: Option<Arc<RouteFixed>>,
    /// The replica's number: its place in registration order, which names
    /// it in the change feed.
    number: u32,
}

/// What every route decided through one (catalog revision, binding,
/// replica) holds alike: all of its assignment but the action and the
/// reservation's fence and attempt. Routes share it instead of copying it.
#[derive(Debug, PartialEq, Eq)]
struct RouteFixed {
    tenant: TenantId,
    capability: CapabilityId,
    destination: Arc<RouteDestination>,
    policy: Arc<PolicySnapshot>,
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
    /// When the current reservation was taken (PIN-8).
    reserved_at: Timestamp,
    last_settlement: Option<Outcome>,
}

/// A stored route and the action it is stored under.
#[derive(Debug, Clone)]
struct RouteRow {
    action: ActionId,
    route: StoredRoute,
}

/// Routes per chunk of [`RouteRows`].
const ROUTE_ROWS_CHUNK: usize = 4096;

/// Every stored route by number, in chunks of [`ROUTE_ROWS_CHUNK`]
/// allocated whole: the store grows a chunk at a time and never moves
/// the rows it holds.
#[derive(Debug, Clone, Default)]
struct RouteRows {
    chunks: Vec<Vec<RouteRow>>,
    len: usize,
}

impl RouteRows {
    fn len(&self) -> usize {
        self.len
    }

    fn push(&mut self, row: RouteRow) {
        if self.len.is_multiple_of(ROUTE_ROWS_CHUNK) {
            self.chunks.push(Vec::with_capacity(ROUTE_ROWS_CHUNK));
        }
        let Some(chunk) = self.chunks.last_mut() else {
            unreachable!("a chunk was just added when the last one was full");
        };
        chunk.push(row);
        self.len += 1;
    }
}

impl std::ops::Index<u32> for RouteRows {
    type Output = RouteRow;

    fn index(&self, n: u32) -> &RouteRow {
        let n = n as usize;
        &self.chunks[n / ROUTE_ROWS_CHUNK][n % ROUTE_ROWS_CHUNK]
    }
}

impl std::ops::IndexMut<u32> for RouteRows {
    fn index_mut(&mut self, n: u32) -> &mut RouteRow {
        let n = n as usize;
        &mut self.chunks[n / ROUTE_ROWS_CHUNK][n % ROUTE_ROWS_CHUNK]
    }
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

#[derive(Debug, Default, Clone)]
pub(crate) struct LiveState {
    /// Every registered replica, in groups by (instance, version).
    groups: Vec<Vec<Slot>>,
    /// replica → its slot.
    slot_of: BTreeMap<ReplicaId, SlotRef>,
    /// Every replica's slot, by replica number (`Slot::number`).
    replica_at: Vec<SlotRef>,
    /// action → its route's number, its place in `route_rows`. Listed
    /// only sorted ([`LiveState::snapshot`]).
    routes: LookupMap<ActionId, u32>,
    /// Every route, in the order they were created; routes are never
    /// removed.
    route_rows: RouteRows,
    /// scope → its counter in `scope_in_use`. Counters are handed out on
    /// first use and never reused.
    scope_counter: BTreeMap<ScopeId, u32>,
    /// Reservations held in each scope, by counter.
    scope_in_use: Vec<u32>,
    /// Each counter's scope.
    scope_ids: Vec<ScopeId>,
    topology: TopologyIndex,
    plans: PlanCache,
    /// (instance, version) → the group of the replicas serving it: the
    /// routing index.
    replicas_by_instance_version: BTreeMap<(InstanceId, VersionId), u32>,
    /// instance → how many replicas serve it, for `INSTANCE_REPLICAS_MAX`.
    replicas_per_instance: BTreeMap<InstanceId, usize>,
    /// (lease end, replica) of every replica not offline: maintenance index.
    leases: BTreeSet<(Timestamp, ReplicaId)>,
    /// (reserved at, fence) → route of every held reservation: the
    /// reservation hold's index (PIN-8), oldest first.
    holds: Holds,
    last_fence: u64,
    /// The `fences-out-of-order` plant's spare: the lower fence of a block
    /// of two whose top was handed out first. Empty unless the plant is on.
    spare_fence: Option<FenceToken>,
    audit: VecDeque<AuditEntry>,
    /// The `seq` of the last audit entry written (0: none yet).
    audit_seq: u64,
    /// Which rows were written when: every write stamps the replica,
    /// scope and route rows it writes here.
    changes: feed::ChangeLog,
    /// Bindings and replicas the last resolve looked at (AUTH-4 evidence
    /// for tests; deterministic, never used for decisions).
    pub(crate) last_resolve_rows_examined: u64,
}

/// The held reservations by when they were taken and their fence (unique),
/// naming their route's number.
type Holds = BTreeMap<(Timestamp, FenceToken), u32>;

impl LiveState {
    fn next_fence(&mut self) -> FenceToken {
        self.last_fence += 1;
        FenceToken(self.last_fence)
    }

    /// The fence of a new reservation: the next one; with the
    /// `fences-out-of-order` plant, fences are taken two at a time (a
    /// cached block of a sequence) and each block handed out from its top.
    fn reservation_fence(&mut self, behaviour: &Behaviour) -> FenceToken {
        if behaviour.fences_out_of_order {
            if let Some(spare) = self.spare_fence.take() {
                return spare;
            }
            self.spare_fence = Some(self.next_fence());
        }
        self.next_fence()
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
        self.scope_ids.push(scope.clone());
        self.scope_counter.insert(scope.clone(), counter);
        counter
    }

    /// The route stored under `action`.
    fn stored(&self, action: &ActionId) -> Option<&StoredRoute> {
        let &n = self.routes.get(action)?;
        Some(&self.route_rows[n].route)
    }

    /// Stores `route` under `action`, in place of the route stored there
    /// if any; its number.
    fn store_route(&mut self, action: &ActionId, route: StoredRoute) -> u32 {
        let next = u32::try_from(self.route_rows.len())
            .unwrap_or_else(|_| unreachable!("routes are bounded far below u32::MAX"));
        match self.routes.entry(action.clone()) {
            Entry::Occupied(at) => {
                let n = *at.get();
                self.route_rows[n].route = route;
                n
            }
            Entry::Vacant(at) => {
                at.insert(next);
                self.route_rows.push(RouteRow {
                    action: action.clone(),
                    route,
                });
                next
            }
        }
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
}
