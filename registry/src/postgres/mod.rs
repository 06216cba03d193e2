//! The PostgreSQL backend (feature `postgres`): normalized tables, two
//! separately permissioned pools, one transaction per decision.
//!
//! Same semantics as the in-memory backend, call for call; the conformance
//! suite runs on both. Start with [`create_roles`] (once per database, as
//! an admin), then [`PgRegistry::connect`] (control and data pools;
//! installs the schema) or, in a data-plane process, [`PgDataPlane::connect`]
//! (data pool only; checks the schema version).
//!
//! ```no_run
//! use connreg::postgres::{PgOptions, PgRegistry, PoolOptions, Roles, create_roles};
//! use connreg::{RegistryConfig, SystemClock};
//!
//! # async fn start() -> Result<(), Box<dyn std::error::Error>> {
//! let admin = PoolOptions::parse_url("postgres://postgres@db/registry")?;
//! let roles = Roles {
//!     control: "connreg_control".into(),
//!     data: "connreg_data".into(),
//!     control_password: Some("…".into()),
//!     data_password: Some("…".into()),
//! };
//! create_roles(&admin, &roles).await?;
//! let options = PgOptions::from_urls(
//!     "postgres://connreg_control:…@db/registry",
//!     "postgres://connreg_data:…@db/registry",
//! )?;
//! let registry = PgRegistry::connect(options, SystemClock, RegistryConfig::default()).await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Schema
//!
//! `migrations/`, applied in order by sqlx's migrator, all in schema
//! `connreg`:
//!
//! - `0001_create_catalog`: types, versions with their capabilities and
//!   profiles, definitions, instances, bindings with their scopes,
//!   admission scopes (limits) and counters (kept apart, so the data role
//!   can move counts but not limits), the catalog revision, the schema
//!   version.
//! - `0002_create_fleet`: replicas, assignments with their scopes, the fence
//!   sequence, the operator audit log; indexes for routing (bindings by
//!   tenant and capability, replicas by instance, version and state), lease
//!   maintenance and held reservations.
//! - `0003_create_data_role_grants`: `connreg.grant_data_role`, the data
//!   role's exact privileges (AUTH-2).
//! - `0004_create_route_resolve`: the eligibility view and the resolve
//!   function (one round trip per decision), and the grants again.
//! - `0005_replace_route_resolve`: the resolve function again, with the
//!   last choosing attempt's `lock_timeout` confined to its own statement.
//! - `0006_replace_route_resolve`: the resolve function again; a lock cycle
//!   between the last attempt's wait and another decision's counter locks
//!   is contention past the limit (`NoCapacity`), not an error.
//!
//! No column holds a credential or secret value, only references and
//! revisions (REC-7).
//!
//! # Known bound: catalog publication behind a contended resolve
//!
//! A resolve holds the catalog's shared advisory lock (transaction-level)
//! for its whole decision, including the backoff pauses between choosing
//! attempts when other decisions hold every eligible replica row, so one
//! decision sees one catalog revision (ROUTE-5). A publication, which takes
//! that lock exclusively, therefore waits for a contended resolve: at most
//! [`ROUTE_LOCK_BACKOFF_MS_PER_ATTEMPT`] times (2 + 3 + ... +
//! (`ROUTE_LOCK_ATTEMPTS_MAX` - 1)) ms of pauses plus [`ROUTE_LOCK_WAIT_MS`]
//! for the last attempt (with the defaults, 27 ms + 1 s), plus the counter
//! locks and the writes.
//!
//! # Map
//!
//! - `config`: [`PoolOptions`], [`PgOptions`] and their documented defaults.
//! - `setup`: [`create_roles`], migrations, [`SCHEMA_VERSION`] check.
//! - `registry`: [`PgRegistry`], [`PgDataPlane`] and the contracts.
//! - `catalog`: publication and catalog pages.
//! - `routing`: resolve (one call of `connreg.route_resolve`), lookup,
//!   settlement; the lock order.
//! - `lifecycle`: registration, heartbeats, drain, lease maintenance,
//!   circuits.
//! - `status`: aggregate status and inspection.
//! - `locks`: the advisory lock key space.
//! - `codec`: rows to records; the `bigint` bounds.
//! - `error`: the one mapping of database failures, and [`StartError`].
//! - `data`: the data plane's shared handle.
//! - `testing` (feature `postgres-testing`): a registry on a fresh test
//!   database with its own two roles.

mod catalog;
mod codec;
mod commit;
mod config;
mod data;
mod error;
mod lifecycle;
mod locks;
mod registry;
mod routing;
mod setup;
mod status;
#[cfg(feature = "postgres-testing")]
pub mod testing;
mod tx;

pub use commit::observe_commit;
pub use config::{PgOptions, PoolOptions};
pub use error::StartError;
pub use locks::{
    CATALOG_KEY, LOCK_CLASS_ACTION, LOCK_CLASS_BASE, LOCK_CLASS_CATALOG, LOCK_CLASS_INSTANCE,
    LOCK_CLASS_SETUP, key as lock_key,
};
pub use registry::{PgDataPlane, PgRegistry, PoolSize, PoolStatus};
pub use routing::{ROUTE_LOCK_BACKOFF_MS_PER_ATTEMPT, ROUTE_LOCK_WAIT_MS, ReplicaReads};
pub use setup::{MIGRATOR, Roles, SCHEMA, SCHEMA_VERSION, create_roles};
pub use sqlx::postgres::PgConnectOptions;
