//! connreg: a connector registry that publishes a revisioned, tenant-scoped
//! capability catalog and turns (tenant, capability, action) into exactly one
//! durable route to a connector replica.
//!
//! # Map
//!
//! - [`id`]: typed, validated identifiers.
//! - [`records`]: types, versions, definitions, instances, bindings, admission
//!   scopes, replicas, and the [`RouteAssignment`] execution contract.
//! - [`request`]: inputs and outputs of every contract method.
//! - [`catalog`]: catalog queries, pages and cursors.
//! - [`contracts`]: the narrow async traits, split by caller authority.
//! - [`error`]: the one domain error enum.
//! - [`limits`]: every bound, named.
//! - [`clock`]: the injected clock.
//! - [`ordering`]: the stable route ordering hash.
//! - [`memory`]: the deterministic in-memory backend.
//! - `postgres` (feature `postgres`): the PostgreSQL backend.
//!
//! # Example
//!
//! ```
//! use connreg::{ManualClock, MemoryRegistry, RegistryConfig, Timestamp};
//! use connreg::contracts::CatalogRead;
//!
//! let clock = ManualClock::new(Timestamp(0));
//! let registry = MemoryRegistry::new(clock.clone(), RegistryConfig::default()).unwrap();
//! let revision = futures_lite_block_on(registry.catalog_revision()).unwrap();
//! assert_eq!(revision.0, 0);
//! # fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
//! #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
//! # }
//! ```

pub mod catalog;
pub mod clock;
pub mod contracts;
pub mod error;
pub mod id;
pub mod inspect;
pub mod limits;
pub mod memory;
pub mod ordering;
#[cfg(feature = "plant")]
pub mod plant;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod records;
pub mod request;
pub mod text;

pub use catalog::{CatalogEntry, CatalogPage, CatalogQuery, Reader};
pub use clock::{Clock, ManualClock, SystemClock, Timestamp};
pub use error::{Error, Result};
pub use id::{
    ActionId, BindingId, CapabilityId, CapacityClass, ConnectorTypeId, InstanceId, ProfileId,
    Region, ReplicaId, ScopeId, TenantId, VersionId, Zone,
};
pub use inspect::{ChangeCursor, Inspect, StoreChanges, StoreSnapshot};
pub use memory::MemoryRegistry;
pub use records::{
    AdmissionScope, Binding, CapabilityDefinition, Circuit, ConnectorType, ConnectorVersion,
    FenceToken, Instance, OpaqueRef, Outcome, PolicySnapshot, Replica, ReplicaSpec, ReplicaState,
    Reservation, Revision, RouteAssignment, RouteDestination, RouteIdentity, RouteRecord,
    ScopeKind,
};
pub use request::{
    Change, CircuitPolicy, CrossRegion, HeartbeatOutcome, HeartbeatParams, MaintainParams,
    Maintained, Publication, RegisterParams, RegistryConfig, ReleaseReason, ReleasedReservation,
    ResolveKind, Resolved, RouteRequest, SettleParams, Settled, StatusReport, TopologyPreference,
};
pub use text::SharedText;
