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
//! Needs PostgreSQL 14 or newer (the pools set
//! `client_connection_check_interval`); the project tests on 15.
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
//! - `0007_order_route_locks`: the resolve split into `route_resolve` (the
//!   advisory locks and the bounded `lock_timeout`) and `route_decide`,
//!   following the one global lock order (see `routing`): counters waited
//!   for holding no row, candidates abandoned whole in a subtransaction,
//!   every wait bounded; the commit order sequence; the publication's
//!   bounded wait for the catalog lock.
//! - `0008_create_protocol_boundary`: the data role's boundary (AUTH-6):
//!   every data-plane call one `SECURITY DEFINER` function (`data_*`) with
//!   a fixed `search_path`, owned by the protocol owner role (`NOLOGIN`,
//!   only the table privileges those functions need); the data role keeps
//!   EXECUTE on them and SELECT on the schema version, nothing else. The
//!   catalog lock becomes a table lock on `connreg.catalog_lock`, which no
//!   role without a privilege on it can take.
//! - `0009_replace_protocol_functions`: the same data-plane functions with
//!   their argument checks and lock keys inline (no helper function calls
//!   on the hot path).
//! - `0010_name_maintenance_releases`: lease maintenance answers which
//!   reservations it released, not only how many.
//! - `0011_narrow_route_writes`: a route's scopes in its own row
//!   (`assignments.scopes`; the `assignment_scopes` table is gone), a
//!   one-scope counter locked, checked and counted by one `UPDATE`
//!   (`take_scopes`), counters with room for HOT updates: less written
//!   and less WAL per resolve and settlement, the same answers.
//! - `0012_share_route_snapshots`: a route's fixed part (tenant,
//!   capability, destination, policy snapshot) in one shared, immutable
//!   `connreg.route_snapshots` row per (replica, binding, catalog
//!   revision, capacity class); the route's row keeps its action, its
//!   snapshot, its reservation and its scopes (in the snapshot since
//!   0020: a binding's scopes are fixed at a revision), and `connreg.routes` joins
//!   the two into the columns a route had: a new route writes a narrow
//!   row, the same answers.
//! - `0013_bound_waits_and_batches`: progress at fleet scale. The resolve
//!   decides in rounds (`route_decide_round`) that wait for nothing under
//!   the catalog lock (since 0018, for no row longer than 1 ms); a held counter or replica, or a pause between
//!   attempts, is waited for between rounds holding only the action's
//!   lock. The action's and instance's locks become rows of
//!   `connreg.protocol_locks`, which only the protocol owner may lock. An
//!   `existing` answer is ordered with maintenance by its replica's row.
//!   Lease maintenance is bounded by reservations too and does one
//!   set-based pass. Every data-plane function fixes its `lock_timeout`.
//!
//! No column holds a credential or secret value, only references and
//! revisions (REC-7).
//!
//! # Roles (AUTH-1, AUTH-2, AUTH-6..AUTH-8)
//!
//! - The control role owns the schema and its tables, migrates, publishes,
//!   closes circuits (recorded under its own name: `session_user`) and
//!   reads the audit log, which nobody else may read or change.
//! - The protocol owner role ([`Roles::protocol_owner`]) cannot log in and
//!   owns the data-plane functions.
//! - The data role can run those functions and read the schema version.
//!   Every lock it can come to hold is taken inside them: the catalog lock
//!   is a table lock it has no privilege to take, and row locks need table
//!   privileges it lacks. The action's and instance's locks are rows of
//!   `connreg.protocol_locks` (migration 0013), so the advisory locks it
//!   can still take (`pg_advisory_lock` is PUBLIC in PostgreSQL) hold up
//!   no protocol call. Every data-plane function fixes its own
//!   `lock_timeout` ([`PROTOCOL_LOCK_WAIT_MS`]) and bounds its own work, so
//!   a session's settings cannot stretch a call's waits. Role defaults
//!   ([`DATA_ROLE_STATEMENT_TIMEOUT_MS`] and the others, set by
//!   [`create_roles`]) remain a backstop; a client can still change its own
//!   session settings (an idle open transaction, say), so they protect
//!   against mistakes, not against a holder of the credentials who means
//!   harm.
//! - [`PgRegistry::connect`] refuses one role for both pools unless
//!   [`PgOptions::single_role_development`] says so.
//!
//! # Bounds on waiting (LOCK-3, LOCK-4, LOCK-6)
//!
//! - A resolve waits for any one row lock at most [`ROUTE_LOCK_WAIT_MS`]
//!   and decides within [`ROUTE_DECISION_MS_MAX`] (past either:
//!   `NoCapacity`, contention past the limit); it never holds a replica
//!   row, nor the catalog lock, while it waits for a counter.
//! - A publication waits in the catalog lock's queue at most
//!   [`PUBLICATION_LOCK_WAIT_MS`](crate::limits::PUBLICATION_LOCK_WAIT_MS)
//!   per attempt, then steps out so routing runs, and tries again with a
//!   growing pause, up to
//!   [`PUBLICATION_LOCK_ATTEMPTS_MAX`](crate::limits::PUBLICATION_LOCK_ATTEMPTS_MAX)
//!   times. A resolve holds its shared lock only for one round of its
//!   decision (one revision, ROUTE-5), which waits for no row longer than
//!   [`ROUTE_ROW_WAIT_MS`], so a queued
//!   publication waits only for the rounds in progress.
//! - Every contract call has its pool's call deadline
//!   ([`PoolOptions::call_deadline_ms`]); past it the answer is
//!   `Unavailable` and the connection is closed (`health`).
//!
//! //! # Map
//!
//! - `config`: [`PoolOptions`], [`PgOptions`] and their documented defaults.
//! - `setup`: [`create_roles`], migrations, [`SCHEMA_VERSION`] check.
//! - `registry`: [`PgRegistry`], [`PgDataPlane`] and the contracts.
//! - `catalog`: publication and catalog pages.
//! - `routing`: resolve (one call of `connreg.data_route_resolve`), lookup,
//!   settlement; the lock order.
//! - `tx`: transactions that commit, or roll back and wait for it, on
//!   every path; connections of abandoned calls closed.
//! - `health`: call deadlines, and testing pooled connections after one
//!   was lost.
//! - `commit`: [`observe_commit`], the commit order of a call.
//! - `lifecycle`: registration, heartbeats, drain, lease maintenance;
//!   the control plane's operator acts (circuits, the audit log).
//! - `status`: aggregate status and inspection.
//! - `locks`: the advisory lock key space.
//! - `codec`: rows to records; the `bigint` bounds.
//! - `error`: the one mapping of database failures, and [`StartError`].
//! - `data`: the data plane's shared handle.
//! - `testing` (feature `postgres-testing`): a registry on a fresh test
//!   database with its own two roles.
//! - `mutants` (feature `postgres-testing`): SQL mutants of the protocol
//!   functions, applied to test databases.

mod catalog;
mod codec;
mod commit;
mod config;
mod data;
mod error;
mod health;
mod lifecycle;
mod locks;
#[cfg(feature = "postgres-testing")]
pub mod mutants;
mod registry;
mod routing;
mod setup;
mod status;
#[cfg(feature = "postgres-testing")]
pub mod testing;
mod text;
mod tx;

pub use commit::{Observed, READ_UNSEEN_WINDOW, observe_commit};
pub use config::{
    CLIENT_CHECK_INTERVAL_MS, PgOptions, PoolOptions, SERVER_KEEPALIVE_COUNT,
    SERVER_KEEPALIVE_IDLE_S, SERVER_KEEPALIVE_INTERVAL_S,
};
pub use error::StartError;
pub use locks::{
    CATALOG_KEY, LOCK_CLASS_ACTION, LOCK_CLASS_BASE, LOCK_CLASS_CATALOG, LOCK_CLASS_INSTANCE,
    LOCK_CLASS_SETUP, PROTOCOL_LOCK_SLOTS, PROTOCOL_LOCK_WAIT_MS, key as lock_key,
    slot as lock_slot,
};
pub use registry::{PgDataPlane, PgRegistry, PoolSize, PoolStatus};
pub use routing::{
    ROUTE_DECISION_MS_MAX, ROUTE_LOCK_BACKOFF_MS_PER_ATTEMPT, ROUTE_LOCK_WAIT_MS,
    ROUTE_ROW_WAIT_MS, ReplicaReads,
};
pub use setup::{
    CONTROL_ROLE_IDLE_IN_TRANSACTION_MS, CONTROL_ROLE_LOCK_TIMEOUT_MS,
    CONTROL_ROLE_STATEMENT_TIMEOUT_MS, DATA_ROLE_IDLE_IN_TRANSACTION_MS, DATA_ROLE_LOCK_TIMEOUT_MS,
    DATA_ROLE_STATEMENT_TIMEOUT_MS, MIGRATOR, Roles, SCHEMA, SCHEMA_VERSION, create_roles,
};
pub use sqlx::postgres::PgConnectOptions;
