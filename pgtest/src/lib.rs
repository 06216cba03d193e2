//! Real, isolated PostgreSQL databases for tests and benches, with no manual
//! step.
//!
//! Each test calls [`TestDatabase::create`] and gets a database of its own on
//! a server shared by the whole test process:
//!
//! ```no_run
//! use connreg_pgtest::TestDatabase;
//! use sqlx::Connection;
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let database = TestDatabase::create().await?;
//! let mut connection = sqlx::PgConnection::connect(database.url()).await?;
//! sqlx::raw_sql("create table t (id int)").execute(&mut connection).await?;
//! // `database` is dropped (DROP DATABASE ... WITH (FORCE)) at the end.
//! # Ok(())
//! # }
//! ```
//!
//! # Where the server comes from
//!
//! [`server()`] picks one source on first use and prints one line saying
//! which (see [`Server::source`]):
//!
//! 1. `CONNREG_TEST_DATABASE_URL` ([`DATABASE_URL_VAR`]) set: that server,
//!    through its superuser URL.
//! 2. Else PostgreSQL server binaries found ([`bindir()`]): a throwaway
//!    cluster in a temporary folder, listening on a free port of 127.0.0.1
//!    with trust authentication, `fsync=off`, `max_connections` =
//!    [`limits::SERVER_CONNECTIONS_MAX`]. As root, initdb and the server run
//!    as the `postgres` user.
//! 3. Else a Docker engine: a `postgres` container through testcontainers.
//! 4. Else [`ProvisionError::NoServer`], whose message says how to provide
//!    one. Tests fail rather than skip.
//!
//! `CONNREG_TEST_PG=url|local|docker` ([`FORCE_SOURCE_VAR`]) forces one
//! source; if it is unavailable the run fails instead of falling back.
//!
//! # Cleanup
//!
//! Test processes never drop statics, so the local cluster and the Docker
//! container are removed by a small `sh` supervisor started beside them,
//! which waits for this process to exit (however it exits) and then stops
//! the server and deletes its folder (or removes the container). Each
//! [`TestDatabase`] is dropped when its value drops, in the background on
//! throwaway servers and waited for (bounded) on a URL server.
//!
//! # Modules
//!
//! - `source`: the sources and the rule choosing one ([`Environment`]).
//! - `server`: the shared [`Server`] and [`server()`].
//! - `local`: initdb, configuration, start and restart of the throwaway
//!   clusters.
//! - `cluster`: [`LocalCluster`], a throwaway cluster of the caller's own
//!   (for instance with `fsync=on`), restartable like the shared one
//!   ([`Server::restart_immediate`]).
//! - `pair`: [`ReplicatedPair`], a primary and a streaming standby promoted
//!   by hand.
//! - `formation`: [`AutoFailoverFormation`], a pg_auto_failover monitor and
//!   two data nodes from the Debian packages, failing over by themselves.
//! - `docker`: the testcontainers fallback.
//! - `supervisor`: cleanup when the process exits.
//! - `database`: [`TestDatabase`].
//! - `dropper`: dropping test databases on a background thread.
//! - `bindir`: finding the PostgreSQL binaries ([`bindir()`]).
//! - [`proxy`]: [`FaultProxy`](proxy::FaultProxy), a TCP fault proxy in
//!   front of a server (cuts, commit-unknown cuts, stalls, blackholes).
//! - [`limits`]: every timeout, retry count and size.
//! - `error`: [`ProvisionError`].
//! - `command`, `runtime`, `unique`: bounded child processes, async work
//!   from sync code, unique names.

pub mod limits;
pub mod proxy;

mod bindir;
mod cluster;
mod command;
mod database;
mod docker;
mod dropper;
mod error;
mod formation;
mod local;
mod pair;
mod runtime;
mod server;
mod source;
mod supervisor;
mod unique;

pub use bindir::{BINDIR_VAR, bindir};
pub use cluster::{LocalCluster, LocalOptions};
pub use database::{DATABASE_NAME_PREFIX, TestDatabase};
pub use error::ProvisionError;
pub use formation::AutoFailoverFormation;
pub use pair::{ReplicatedPair, Replication, Role, STANDBY_NAME};
pub use server::{Server, server};
pub use source::{DATABASE_URL_VAR, Environment, FORCE_SOURCE_VAR, ServerSource};
