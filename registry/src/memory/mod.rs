//! The deterministic in-memory backend.
//!
//! One mutex guards the whole store, so every call is a serializable
//! transaction: racing resolves of one action see each other (ROUTE-3),
//! a publication swaps the catalog in one step (CAT-2, CAT-4), and
//! settlement compares under the same lock (SETTLE-2). No call awaits while
//! holding the lock, and nothing reads the wall clock, spawns threads or
//! iterates a hash map: the same calls in the same order give the same
//! results.
//!
//! Routing reads candidates through indexes, by (tenant, capability) and
//! then by (instance, version), never by scanning the fleet (AUTH-4).
//!
//! - `catalog`: the published records and their indexes; publication.
//! - `live`: replicas, counters, routes; resolve, settle, leases.

mod catalog;
mod live;
mod lookup;

use std::sync::{Arc, Mutex, MutexGuard};

use crate::catalog::{CatalogPage, CatalogQuery};
use crate::clock::Clock;
use crate::contracts::{CatalogAdmin, CatalogRead, Operations, ReplicaLifecycle, Routing, Status};
use crate::error::{Error, Result};
use crate::id::{ActionId, ReplicaId, TenantId};
use crate::inspect::{ChangeCursor, Inspect, StoreChanges, StoreSnapshot};
use crate::records::{Replica, Revision, RouteRecord};
use crate::request::{
    AuditEntry, AuditPage, AuditQuery, CircuitCloseParams, HeartbeatOutcome, HeartbeatParams,
    MaintainParams, Maintained, Publication, RegisterParams, RegistryConfig, Resolved,
    RouteRequest, SettleParams, Settled, StatusReport,
};

use catalog::CatalogState;
use live::LiveState;

#[derive(Debug, Default, Clone)]
struct Store {
    catalog: CatalogState,
    live: LiveState,
    /// The `stale-standby-reads` plant's standby, a publication behind:
    /// the catalog the previous publication made, in the first slot while
    /// reads go to the standby. Empty unless the plant is on.
    standby: [Option<CatalogState>; 2],
    /// The catalog the last publication made, which the standby applies
    /// when the next one comes. Empty unless the plant is on.
    published: Option<CatalogState>,
}

/// The authority an in-memory registry's operator acts carry unless
/// [`MemoryRegistry::operated_by`] names another.
pub const EMBEDDED_OPERATOR: &str = "embedded-operator";

/// The in-memory registry. Clones share one store.
#[derive(Clone)]
pub struct MemoryRegistry {
    store: Arc<Mutex<Store>>,
    clock: Arc<dyn Clock>,
    config: RegistryConfig,
    /// Who the operator acts of this handle are recorded as (AUTH-7).
    operator: Arc<str>,
    /// Replicas this handle's new routes skip (see [`MemoryRegistry::holding`]).
    held: Option<Arc<std::collections::BTreeSet<ReplicaId>>>,
    #[cfg(feature = "plant")]
    plant: Option<crate::plant::Plant>,
}

impl std::fmt::Debug for MemoryRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryRegistry")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl MemoryRegistry {
    /// An empty registry at revision 0.
    pub fn new(clock: impl Clock, config: RegistryConfig) -> Result<MemoryRegistry> {
        config.validate()?;
        Ok(MemoryRegistry {
            store: Arc::new(Mutex::new(Store::default())),
            clock: Arc::new(clock),
            config,
            operator: Arc::from(EMBEDDED_OPERATOR),
            held: None,
            #[cfg(feature = "plant")]
            plant: None,
        })
    }

    /// The same store, its operator acts recorded under `authority`: the
    /// identity the embedding process verified for its operator (AUTH-7).
    pub fn operated_by(mut self, authority: &str) -> Result<MemoryRegistry> {
        crate::request::validate_audit_text("operator", authority)?;
        self.operator = Arc::from(authority);
        Ok(self)
    }

    /// The same store, with one planted bug switched on.
    #[cfg(feature = "plant")]
    pub fn with_plant(mut self, plant: crate::plant::Plant) -> MemoryRegistry {
        self.plant = Some(plant);
        self
    }

    /// Bindings and replica rows the most recent resolve looked at: the
    /// evidence that routing reads through indexes (AUTH-4). For tests only.
    #[doc(hidden)]
    pub fn last_resolve_rows_examined(&self) -> Result<u64> {
        Ok(self.lock()?.live.last_resolve_rows_examined)
    }

    /// A handle that implements only the data-plane contracts.
    pub fn data_plane(&self) -> MemoryDataPlane {
        MemoryDataPlane(self.clone())
    }

    /// A registry with a copy of this one's store (not shared: its calls
    /// leave this one as it is), the same clock, configuration and
    /// operator. A differential oracle tries a call on a fork to see what
    /// it would answer at this point without committing it.
    pub fn fork(&self) -> Result<MemoryRegistry> {
        let copy = self.lock()?.clone();
        Ok(MemoryRegistry {
            store: Arc::new(Mutex::new(copy)),
            ..self.clone()
        })
    }

    /// The same store, its new routes and its maintenance decided as if
    /// other transactions held the rows of `replicas`: a decision skips a
    /// replica another one holds rather than wait for it (ROUTE-6, the
    /// PostgreSQL backend's `SKIP LOCKED`), so a concurrent backend may
    /// pick the next best; a maintenance batch leaves a held replica's
    /// expiry, and the expired holds of its reservations, to the next call
    /// and says `more` (LEASE-2, PIN-8). A differential oracle replays such
    /// a decision serially with this.
    pub fn holding(mut self, replicas: std::collections::BTreeSet<ReplicaId>) -> MemoryRegistry {
        self.held = (!replicas.is_empty()).then(|| Arc::new(replicas));
        self
    }

    /// The replica a new route of `request` would go to now, changing
    /// nothing: the pick `route_resolve` makes for an action without a
    /// route (ROUTE-9, ROUTE-10), passing over the replicas this handle
    /// finds held ([`MemoryRegistry::holding`]). `Ok(None)` when the pick
    /// cannot be read without writing: the request has no tenant, or its
    /// resolve plan is not worked out at the catalog's revision (the next
    /// resolve of its tenant and capability works it out). An error is
    /// the refusal the resolve would answer.
    pub fn new_route_target(&self, request: &RouteRequest) -> Result<Option<ReplicaId>> {
        let now = self.clock.now();
        let store = self.lock()?;
        store
            .live
            .pick(&store.catalog, request, now, &self.behaviour())
            .transpose()
    }

    fn lock(&self) -> Result<MutexGuard<'_, Store>> {
        // A panic while holding the lock leaves the store unknowable: refuse
        // further calls rather than serve half-applied state.
        self.store.lock().map_err(|_| Error::Unavailable {
            reason: "store poisoned by an earlier panic".into(),
        })
    }

    #[cfg(feature = "plant")]
    fn planted(&self, plant: crate::plant::Plant) -> bool {
        self.plant == Some(plant)
    }

    #[cfg(not(feature = "plant"))]
    #[inline(always)]
    fn planted(&self, _plant: Planted) -> bool {
        false
    }
}

/// Stand-in for the plant type when the feature is off, so call sites read
/// the same either way and compile to nothing.
#[cfg(not(feature = "plant"))]
#[derive(Clone, Copy)]
enum Planted {
    FailoverOnRetry,
    NoActionSerialization,
    DoubleRelease,
    IgnoreFence,
    HeartbeatAdvancesRevision,
    MixedRevisionPages,
    OverCapacity,
    CrossTenantReturn,
    HoldNeverExpires,
    SettleRewritesOutcome,
    CircuitNeverResets,
    SettleKeepsUnknown,
    PageSkipsNext,
    HeartbeatKeepsLease,
    StaleStandbyReads,
    FencesOutOfOrder,
    RouteGetIgnoresRelease,
}

#[cfg(feature = "plant")]
use crate::plant::Plant as PlantKind;
#[cfg(not(feature = "plant"))]
use Planted as PlantKind;

impl CatalogAdmin for MemoryRegistry {
    async fn catalog_publish(&self, publication: Publication) -> Result<Revision> {
        publication.validate_shape()?;
        let mut store = self.lock()?;
        let next = store.catalog.apply(&publication, &store.live)?;
        if self.planted(PlantKind::StaleStandbyReads) {
            // Planted: a standby applies a publication only when the next
            // one comes.
            let applied = store.published.replace(next.clone());
            store.standby = [applied, None];
        }
        store.catalog = next;
        store.live.published(&publication);
        Ok(store.catalog.revision)
    }
}

impl CatalogRead for MemoryRegistry {
    async fn catalog_page(&self, query: CatalogQuery) -> Result<CatalogPage> {
        let planned = crate::catalog::PlannedQuery::plan(&query, &self.config.cursor_keys)?;
        let mut store = self.lock()?;
        if self.planted(PlantKind::StaleStandbyReads) {
            // Planted: first pages go to the primary and the standby in
            // turn; a continuation goes where the last first page went.
            store.standby.swap(0, usize::from(query.cursor.is_none()));
        }
        let Store {
            catalog, standby, ..
        } = &*store;
        let catalog = standby[0].as_ref().unwrap_or(catalog);
        let mixed = self.planted(PlantKind::MixedRevisionPages);
        let mut page = catalog.page(&planned, mixed)?;
        if self.planted(PlantKind::PageSkipsNext) && query.cursor.is_some() {
            let first = page.entries.len().min(1);
            page.entries.drain(..first);
        }
        Ok(page)
    }

    async fn catalog_revision(&self) -> Result<Revision> {
        Ok(self.lock()?.catalog.revision)
    }
}

impl Routing for MemoryRegistry {
    async fn route_resolve(&self, request: RouteRequest) -> Result<Resolved> {
        let now = self.clock.now();
        if self.planted(PlantKind::NoActionSerialization) {
            // Boxed: the plant's future, which holds a copy of the store
            // across a yield, would otherwise set the size of every
            // resolve's future.
            return Box::pin(self.resolve_unserialized(request)).await;
        }
        let mut store = self.lock()?;
        let Store { catalog, live, .. } = &mut *store;
        live.resolve(catalog, &request, now, &self.behaviour())
    }

    async fn route_get(&self, tenant: TenantId, action: ActionId) -> Result<Option<RouteRecord>> {
        let mut route = self.lock()?.live.route(&tenant, &action);
        if self.planted(PlantKind::RouteGetIgnoresRelease)
            && let Some(r) = route.as_mut()
        {
            // Planted: the route as its reservation left it, as a read of
            // a cache that releases do not reach would show it.
            r.reserved = true;
            r.last_settlement = None;
        }
        Ok(route)
    }

    async fn route_settle(&self, params: SettleParams) -> Result<Settled> {
        let mut store = self.lock()?;
        let policy = self.config.circuit;
        store.live.settle(&params, policy, &self.behaviour())
    }
}

impl ReplicaLifecycle for MemoryRegistry {
    async fn replica_register(&self, params: RegisterParams) -> Result<Replica> {
        let now = self.clock.now();
        let mut store = self.lock()?;
        let Store { catalog, live, .. } = &mut *store;
        live.register(catalog, &params, now)
    }

    async fn replica_heartbeat(&self, params: HeartbeatParams) -> Result<HeartbeatOutcome> {
        params.validate()?;
        let now = self.clock.now();
        let mut store = self.lock()?;
        let keep_lease = self.planted(PlantKind::HeartbeatKeepsLease);
        let outcome = store.live.heartbeat(&params, now, keep_lease)?;
        if outcome == HeartbeatOutcome::Applied
            && self.planted(PlantKind::HeartbeatAdvancesRevision)
        {
            store.catalog.revision = Revision(store.catalog.revision.0 + 1);
        }
        Ok(outcome)
    }

    async fn replica_drain(&self, replica: ReplicaId) -> Result<Replica> {
        self.lock()?.live.drain(&replica)
    }

    async fn replica_get(&self, replica: ReplicaId) -> Result<Option<Replica>> {
        Ok(self.lock()?.live.replica(&replica).cloned())
    }

    async fn lease_maintain(&self, params: MaintainParams) -> Result<Maintained> {
        params.validate()?;
        let now = self.clock.now();
        // The `hold-never-expires` plant: a hold no clock reaches.
        let hold_ms = if self.planted(PlantKind::HoldNeverExpires) {
            u64::MAX
        } else {
            self.config.reservation_hold_ms
        };
        let held = self.held.clone().unwrap_or_default();
        let mut store = self.lock()?;
        store.live.maintain(params.max, now, hold_ms, &held)
    }
}

impl Operations for MemoryRegistry {
    async fn circuit_close(&self, params: CircuitCloseParams) -> Result<AuditEntry> {
        params.validate()?;
        let now = self.clock.now();
        self.lock()?
            .live
            .circuit_close(&params, &self.operator, now)
    }

    async fn audit_page(&self, query: AuditQuery) -> Result<AuditPage> {
        query.validate()?;
        Ok(self.lock()?.live.audit_page(&query))
    }
}

impl Status for MemoryRegistry {
    async fn status(&self) -> Result<StatusReport> {
        let store = self.lock()?;
        Ok(store.live.status(store.catalog.revision))
    }
}

impl Inspect for MemoryRegistry {
    async fn inspect(&self) -> Result<StoreSnapshot> {
        let store = self.lock()?;
        store.live.snapshot(&store.catalog)
    }

    /// Reads only the rows written since `cursor`: every write stamps the
    /// rows it writes, and the stamps are indexed by their order, so a
    /// read costs the rows it returns, not the size of the store.
    async fn inspect_changes(&self, cursor: Option<ChangeCursor>) -> Result<StoreChanges> {
        let store = self.lock()?;
        store.live.changes_since(&store.catalog, cursor)
    }
}

/// What the live state needs to know of the plants, resolved once per call.
#[derive(Debug, Clone, Default)]
pub(crate) struct Behaviour {
    /// Replicas new routes skip ([`MemoryRegistry::holding`]).
    pub(crate) held: Option<Arc<std::collections::BTreeSet<ReplicaId>>>,
    pub(crate) failover_on_retry: bool,
    pub(crate) double_release: bool,
    pub(crate) ignore_fence: bool,
    pub(crate) over_capacity: bool,
    pub(crate) cross_tenant_return: bool,
    pub(crate) settle_rewrites_outcome: bool,
    pub(crate) circuit_never_resets: bool,
    pub(crate) settle_keeps_unknown: bool,
    pub(crate) fences_out_of_order: bool,
}

impl MemoryRegistry {
    fn behaviour(&self) -> Behaviour {
        Behaviour {
            held: self.held.clone(),
            failover_on_retry: self.planted(PlantKind::FailoverOnRetry),
            double_release: self.planted(PlantKind::DoubleRelease),
            ignore_fence: self.planted(PlantKind::IgnoreFence),
            over_capacity: self.planted(PlantKind::OverCapacity),
            cross_tenant_return: self.planted(PlantKind::CrossTenantReturn),
            settle_rewrites_outcome: self.planted(PlantKind::SettleRewritesOutcome),
            circuit_never_resets: self.planted(PlantKind::CircuitNeverResets),
            settle_keeps_unknown: self.planted(PlantKind::SettleKeepsUnknown),
            fences_out_of_order: self.planted(PlantKind::FencesOutOfOrder),
        }
    }

    /// The `no-action-serialization` plant: decide under one lock, yield,
    /// then write under another, overwriting whatever raced in between.
    async fn resolve_unserialized(&self, request: RouteRequest) -> Result<Resolved> {
        let now = self.clock.now();
        let decided = {
            let mut scratch = self.lock()?.clone();
            let Store { catalog, live, .. } = &mut scratch;
            let resolved = live.resolve(catalog, &request, now, &self.behaviour())?;
            (resolved, scratch.live)
        };
        YieldOnce(false).await;
        let (resolved, _) = decided;
        if resolved.kind != crate::request::ResolveKind::Created {
            let mut store = self.lock()?;
            let Store { catalog, live, .. } = &mut *store;
            return live.resolve(catalog, &request, now, &self.behaviour());
        }
        let mut store = self.lock()?;
        store.live.force_insert(resolved.assignment.clone());
        Ok(resolved)
    }
}

/// Returns `Pending` once, so other tasks run between two halves of a call.
struct YieldOnce(bool);

impl std::future::Future for YieldOnce {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            std::task::Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }
}

/// The data-plane view of a [`MemoryRegistry`]: it cannot publish.
#[derive(Clone, Debug)]
pub struct MemoryDataPlane(MemoryRegistry);

impl CatalogRead for MemoryDataPlane {
    async fn catalog_page(&self, query: CatalogQuery) -> Result<CatalogPage> {
        self.0.catalog_page(query).await
    }
    async fn catalog_revision(&self) -> Result<Revision> {
        self.0.catalog_revision().await
    }
}

impl Routing for MemoryDataPlane {
    async fn route_resolve(&self, request: RouteRequest) -> Result<Resolved> {
        self.0.route_resolve(request).await
    }
    async fn route_get(&self, tenant: TenantId, action: ActionId) -> Result<Option<RouteRecord>> {
        self.0.route_get(tenant, action).await
    }
    async fn route_settle(&self, params: SettleParams) -> Result<Settled> {
        self.0.route_settle(params).await
    }
}

impl ReplicaLifecycle for MemoryDataPlane {
    async fn replica_register(&self, params: RegisterParams) -> Result<Replica> {
        self.0.replica_register(params).await
    }
    async fn replica_heartbeat(&self, params: HeartbeatParams) -> Result<HeartbeatOutcome> {
        self.0.replica_heartbeat(params).await
    }
    async fn replica_drain(&self, replica: ReplicaId) -> Result<Replica> {
        self.0.replica_drain(replica).await
    }
    async fn replica_get(&self, replica: ReplicaId) -> Result<Option<Replica>> {
        self.0.replica_get(replica).await
    }
    async fn lease_maintain(&self, params: MaintainParams) -> Result<Maintained> {
        self.0.lease_maintain(params).await
    }
}

impl Status for MemoryDataPlane {
    async fn status(&self) -> Result<StatusReport> {
        self.0.status().await
    }
}
