//! The narrow contracts, split by what a caller may do.
//!
//! A data-plane caller holds [`CatalogRead`], [`Routing`], [`ReplicaLifecycle`]
//! and [`Status`]; only a control-plane caller holds [`CatalogAdmin`] and
//! [`Operations`] (operator acts, audited). Every
//! method is async so a database backend can implement it; futures are `Send`
//! so callers can spawn them.

use std::future::Future;

use crate::catalog::{CatalogPage, CatalogQuery};
use crate::error::Result;
use crate::id::{ActionId, ReplicaId, TenantId};
use crate::records::{Replica, Revision, RouteRecord};
use crate::request::{
    AuditEntry, AuditPage, AuditQuery, CircuitCloseParams, HeartbeatOutcome, HeartbeatParams,
    MaintainParams, Maintained, Publication, RegisterParams, Resolved, RouteRequest, SettleParams,
    Settled, StatusReport,
};

/// Catalog and admission changes: control plane only (CAT-1..CAT-4).
pub trait CatalogAdmin: Send + Sync {
    /// Validates every record the publication references and applies it as
    /// one transaction under the exclusive publication lock. Returns the new
    /// revision, exactly one above the previous (CAT-1, CAT-2).
    fn catalog_publish(
        &self,
        publication: Publication,
    ) -> impl Future<Output = Result<Revision>> + Send;
}

/// Catalog reads (CAT-4..CAT-10).
pub trait CatalogRead: Send + Sync {
    /// One page, read entirely at one revision under the shared lock.
    fn catalog_page(&self, query: CatalogQuery)
    -> impl Future<Output = Result<CatalogPage>> + Send;

    /// The current revision.
    fn catalog_revision(&self) -> impl Future<Output = Result<Revision>> + Send;
}

/// Route resolution, lookup and settlement (ROUTE, PIN, SETTLE).
pub trait Routing: Send + Sync {
    /// Returns the action's one route, creating it if the action is new.
    fn route_resolve(&self, request: RouteRequest)
    -> impl Future<Output = Result<Resolved>> + Send;

    /// The action's route, for cancellation and reconciliation (PIN-5, PIN-6).
    /// `None` when the action has no route for this tenant: another
    /// tenant's route is indistinguishable from none.
    fn route_get(
        &self,
        tenant: TenantId,
        action: ActionId,
    ) -> impl Future<Output = Result<Option<RouteRecord>>> + Send;

    /// Settles the reservation of the exact assignment given (SETTLE-1..5).
    fn route_settle(&self, params: SettleParams) -> impl Future<Output = Result<Settled>> + Send;
}

/// Replica registration, heartbeats, draining, leases and circuits (LEASE).
pub trait ReplicaLifecycle: Send + Sync {
    /// Registers a provisioned replica, or brings an offline one back.
    fn replica_register(
        &self,
        params: RegisterParams,
    ) -> impl Future<Output = Result<Replica>> + Send;

    /// Advances health sequence and lease; older sequences are ignored.
    fn replica_heartbeat(
        &self,
        params: HeartbeatParams,
    ) -> impl Future<Output = Result<HeartbeatOutcome>> + Send;

    /// Stops new routes to the replica; pinned retries still reach it.
    fn replica_drain(&self, replica: ReplicaId) -> impl Future<Output = Result<Replica>> + Send;

    /// Reads one replica.
    fn replica_get(
        &self,
        replica: ReplicaId,
    ) -> impl Future<Output = Result<Option<Replica>>> + Send;

    /// Marks at most `params.max` expired replicas offline and releases
    /// their reservations as `lease_expired` (LEASE-2, LEASE-3).
    fn lease_maintain(
        &self,
        params: MaintainParams,
    ) -> impl Future<Output = Result<Maintained>> + Send;
}

/// Operator acts: control plane only, each recorded in an append-only audit
/// log under the caller's authority (SETTLE-6, AUTH-7).
pub trait Operations: Send + Sync {
    /// Closes an open circuit; the entry names the handle's authority.
    fn circuit_close(
        &self,
        params: CircuitCloseParams,
    ) -> impl Future<Output = Result<AuditEntry>> + Send;

    /// One page of the audit log, oldest first.
    fn audit_page(&self, query: AuditQuery) -> impl Future<Output = Result<AuditPage>> + Send;
}

/// Aggregate status (AUTH-5).
pub trait Status: Send + Sync {
    /// Counts of replicas by state, reservations, open circuits, revision.
    fn status(&self) -> impl Future<Output = Result<StatusReport>> + Send;
}

/// Everything a data-plane process may do.
pub trait DataPlane: CatalogRead + Routing + ReplicaLifecycle + Status {}
impl<T: CatalogRead + Routing + ReplicaLifecycle + Status> DataPlane for T {}

/// Everything a control-plane process may do besides the data plane.
pub trait ControlPlane: CatalogAdmin + Operations {}
impl<T: CatalogAdmin + Operations> ControlPlane for T {}

/// A whole registry: both planes. Used by tests, the simulator and embedded
/// deployments; fleet processes split the planes.
pub trait Registry: ControlPlane + DataPlane {}
impl<T: ControlPlane + DataPlane> Registry for T {}
