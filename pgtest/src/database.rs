//! One isolated database per test, dropped when the test is done with it.

use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use sqlx::Connection;
use tokio::runtime::RuntimeFlavor;

use crate::dropper::{self, DropJob};
use crate::error::ProvisionError;
use crate::limits::{DATABASE_CREATE_TIMEOUT_S, DATABASE_DROP_TIMEOUT_S};
use crate::runtime::run_on_fresh_thread;
use crate::server::{self, Server, server_if_acquired};
use crate::source::ServerSource;
use crate::unique;

/// Prefix of every database this crate creates, so leftovers on a shared
/// server are easy to find: `connreg_test_<pid>_<counter>_<random>`.
pub const DATABASE_NAME_PREFIX: &str = "connreg_test_";

/// One isolated database on the process's [`Server`], dropped (best effort)
/// when the value drops.
///
/// Each test makes its own, so tests run in parallel without sharing state.
/// The database is created from `template1`, owned by the server's superuser,
/// and empty.
///
/// # Dropping
///
/// Dropping the value runs `DROP DATABASE … WITH (FORCE)` (PostgreSQL 13 or
/// newer), which also ends connections still open to it, on a background
/// thread of this crate; failures are reported on stderr and otherwise
/// ignored. It never hangs:
///
/// - On the throwaway servers (local cluster, Docker) `Drop` returns at
///   once. Dropping still matters there, because a long test process would
///   otherwise fill the disk (each database is a few MiB); a drop still in
///   flight when the process exits goes away with the server.
/// - On a server named by URL, which outlives the process, `Drop` waits for
///   the drop to finish, at most
///   [`DATABASE_DROP_TIMEOUT_S`](crate::limits::DATABASE_DROP_TIMEOUT_S) + 1 s.
///   On a multi-threaded runtime it waits through `block_in_place`; on a
///   current-thread runtime it blocks that thread, so drop the database after
///   the test's other tasks have stopped connecting (the natural order when
///   it is the first local of the test).
///
/// [`TestDatabase::drop_now`] drops it at once and returns the outcome.
#[derive(Debug)]
pub struct TestDatabase {
    server: &'static Server,
    name: String,
    url: String,
    /// Set by [`TestDatabase::drop_now`], so `Drop` has nothing left to do.
    dropped: bool,
}

impl TestDatabase {
    /// Creates a new database on the process's server, acquiring the server
    /// first if this is the first use (see [`server()`](crate::server())).
    ///
    /// Must run inside a tokio runtime with the time driver enabled, as
    /// `#[tokio::test]` provides; the one-time server start runs on tokio's
    /// blocking pool.
    pub async fn create() -> Result<TestDatabase, ProvisionError> {
        let server = match server_if_acquired() {
            Some(acquired) => acquired?,
            None => match tokio::task::spawn_blocking(server::server).await {
                Ok(acquired) => acquired?,
                Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
                // The runtime is shutting down; start here instead.
                Err(_) => server::server()?,
            },
        };
        Self::create_on(server).await
    }

    /// [`create`](Self::create) for sync code, such as a bench without a
    /// runtime; works inside a runtime too (it runs on a thread of its own).
    pub fn create_blocking() -> Result<TestDatabase, ProvisionError> {
        let server = server::server()?;
        let wait = Duration::from_secs(DATABASE_CREATE_TIMEOUT_S + 1);
        run_on_fresh_thread("connreg-pgtest-create", wait, move || {
            TestDatabase::create_on(server)
        })
        .unwrap_or_else(|error| {
            Err(ProvisionError::Database {
                action: "create a test database".to_owned(),
                message: error.to_string(),
            })
        })
    }

    async fn create_on(server: &'static Server) -> Result<TestDatabase, ProvisionError> {
        let name = format!(
            "{DATABASE_NAME_PREFIX}{}_{}_{}",
            std::process::id(),
            unique::next_number(),
            unique::random_suffix()
        );
        let action = format!("create database {name}");
        let statement = format!("CREATE DATABASE {}", quote_identifier(&name));
        execute_on(server.url(), statement, &action, DATABASE_CREATE_TIMEOUT_S).await?;
        Ok(TestDatabase {
            url: server.database_url(&name),
            server,
            name,
            dropped: false,
        })
    }

    /// Superuser URL of this test's own database.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Superuser URL of the server's maintenance database, for creating
    /// roles and the like; see [`Server::url`].
    pub fn server_url(&self) -> &str {
        self.server.url()
    }

    /// Name of this test's database.
    pub fn database_name(&self) -> &str {
        &self.name
    }

    /// The server this database lives on (host, port, superuser for tools
    /// such as pgbench).
    pub fn server(&self) -> &'static Server {
        self.server
    }

    /// Drops the database now, on the caller's runtime, and says whether it
    /// worked, instead of leaving it to `Drop`. Connections still open to it
    /// are ended.
    pub async fn drop_now(mut self) -> Result<(), ProvisionError> {
        self.dropped = true;
        dropper::drop_database(self.server.url(), &self.name).await
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if self.dropped {
            return;
        }
        // Only a server that outlives the process needs the drop to finish
        // before the process may end.
        let (done, outcome) = if self.server.source() == ServerSource::Url {
            let (sender, receiver) = std_mpsc::sync_channel(1);
            (Some(sender), Some(receiver))
        } else {
            (None, None)
        };
        let job = DropJob {
            server_url: self.server.url().to_owned(),
            name: self.name.clone(),
            done,
        };
        if let Err(error) = dropper::submit(job) {
            eprintln!(
                "connreg-pgtest: could not drop database {}: {error}; \
                 it is left on the server",
                self.name
            );
            return;
        }
        if let Some(outcome) = outcome {
            let wait = Duration::from_secs(DATABASE_DROP_TIMEOUT_S + 1);
            if wait_off_runtime(|| outcome.recv_timeout(wait)).is_err() {
                eprintln!(
                    "connreg-pgtest: dropping database {} took over {} s; not waiting longer",
                    self.name,
                    wait.as_secs()
                );
            }
        }
    }
}

/// Runs the blocking `wait`, on a multi-threaded tokio runtime through
/// `block_in_place`, so that the other tasks of this worker move elsewhere
/// and keep running (one of them may be what the drop waits for).
fn wait_off_runtime<T>(wait: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(wait)
        }
        _ => wait(),
    }
}

/// Connects to `url`, runs one statement with the simple protocol (CREATE and
/// DROP DATABASE cannot run in a transaction block), and disconnects.
pub(crate) async fn execute_on(
    url: &str,
    statement: String,
    action: &str,
    timeout_s: u64,
) -> Result<(), ProvisionError> {
    let work = async {
        let mut connection = sqlx::PgConnection::connect(url).await?;
        sqlx::Executor::execute(&mut connection, statement.as_str()).await?;
        connection.close().await
    };
    match tokio::time::timeout(Duration::from_secs(timeout_s), work).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(ProvisionError::Database {
            action: action.to_owned(),
            message: error.to_string(),
        }),
        Err(_) => Err(ProvisionError::TimedOut {
            action: action.to_owned(),
            timeout_s,
        }),
    }
}

pub(crate) fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
