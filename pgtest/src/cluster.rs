//! A throwaway local cluster owned by its caller: its own settings (such as
//! `fsync=on` for crash qualification), its own lifetime.

use std::path::{Path, PathBuf};

use crate::bindir;
use crate::error::ProvisionError;
use crate::limits::SERVER_CONNECTIONS_MAX;
use crate::local::{self, Cluster, LOCAL_HOST, LOCAL_SUPERUSER, Settings};
use crate::source::ServerSource;

/// Settings of a [`LocalCluster`]. Defaults: those of the shared test
/// server ([`crate::server()`]'s local cluster).
///
/// | field | default |
/// |---|---|
/// | `fsync` | `false` |
/// | `connections_max` | [`SERVER_CONNECTIONS_MAX`] (300) |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalOptions {
    /// The server's `fsync`. Off suits tests (durability of a throwaway
    /// cluster is worthless); on is what crash qualification needs, so that
    /// what survives a restart is what PostgreSQL promises survives a crash.
    pub fsync: bool,
    /// The server's `max_connections`; more than 3 (the superuser
    /// reservation).
    pub connections_max: u32,
}

impl Default for LocalOptions {
    fn default() -> LocalOptions {
        LocalOptions {
            fsync: false,
            connections_max: SERVER_CONNECTIONS_MAX,
        }
    }
}

/// Why no local cluster can start without server binaries.
const NO_BINARIES: &str = "no PostgreSQL server binaries found (CONNREG_PG_BINDIR, \
     `pg_config --bindir`, /usr/lib/postgresql/*/bin); install them (`apt-get install postgresql`)";

/// The folder of the server binaries ([`bindir()`](crate::bindir())),
/// once `options` are checked; run before anything starts.
pub(crate) fn checked_bindir(options: LocalOptions) -> Result<PathBuf, ProvisionError> {
    let bindir = bindir::bindir().ok_or_else(|| ProvisionError::SourceUnavailable {
        requested: ServerSource::Local,
        reason: NO_BINARIES.to_owned(),
    })?;
    if options.connections_max <= 3 {
        return Err(ProvisionError::InvalidSetting {
            variable: "LocalOptions::connections_max",
            value: options.connections_max.to_string(),
            reason: "must exceed the 3 connections reserved for superusers".to_owned(),
        });
    }
    Ok(bindir)
}

/// A throwaway PostgreSQL cluster of its own, separate from the process's
/// shared [`Server`](crate::Server): initdb in a fresh temporary folder,
/// listening on a free port of `127.0.0.1` with trust authentication (as
/// root, run as the `postgres` user), made the same way as the shared one.
///
/// ```no_run
/// use connreg_pgtest::{LocalCluster, LocalOptions};
///
/// # fn example() -> Result<(), connreg_pgtest::ProvisionError> {
/// let cluster = LocalCluster::start(LocalOptions { fsync: true, ..LocalOptions::default() })?;
/// // ... connect to cluster.url() ...
/// cluster.restart_immediate()?; // as after a crash
/// # Ok(())
/// # }
/// ```
///
/// Dropping the value stops the server at once (SIGQUIT, an immediate
/// shutdown) and deletes its folder, from its supervisor, in the background;
/// so does the end of the process, however it ends.
#[derive(Debug)]
pub struct LocalCluster {
    cluster: Cluster,
    options: LocalOptions,
    url: String,
}

impl LocalCluster {
    /// Creates and starts a cluster with `options`, from the binaries
    /// [`bindir()`](crate::bindir()) finds. Blocks the calling thread (about
    /// a second); from async code use `tokio::task::spawn_blocking`.
    ///
    /// # Errors
    ///
    /// [`ProvisionError::SourceUnavailable`] without PostgreSQL server
    /// binaries; [`ProvisionError::InvalidSetting`] for too few
    /// connections; otherwise why initdb or the start failed, or what timed
    /// out.
    pub fn start(options: LocalOptions) -> Result<LocalCluster, ProvisionError> {
        let bindir = checked_bindir(options)?;
        let cluster = local::start(
            &bindir,
            Settings {
                fsync: options.fsync,
                connections_max: options.connections_max,
            },
        )?;
        let url = format!(
            "postgres://{LOCAL_SUPERUSER}@{LOCAL_HOST}:{}/postgres",
            cluster.port
        );
        Ok(LocalCluster {
            cluster,
            options,
            url,
        })
    }

    /// The options it was started with.
    pub fn options(&self) -> LocalOptions {
        self.options
    }

    /// Superuser URL of the maintenance database `postgres`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Superuser URL of database `database`.
    pub fn database_url(&self, database: &str) -> String {
        format!(
            "postgres://{LOCAL_SUPERUSER}@{LOCAL_HOST}:{}/{database}",
            self.cluster.port
        )
    }

    /// `127.0.0.1`.
    pub fn host(&self) -> &str {
        LOCAL_HOST
    }

    /// The TCP port, the same across restarts.
    pub fn port(&self) -> u16 {
        self.cluster.port
    }

    /// The superuser's name (`postgres`); it has no password.
    pub fn superuser(&self) -> &str {
        LOCAL_SUPERUSER
    }

    /// The cluster's temporary folder (data, socket, log).
    pub fn dir(&self) -> &Path {
        &self.cluster.dir
    }

    /// The server log, across restarts.
    pub fn log_file(&self) -> &Path {
        &self.cluster.log_file
    }

    /// Restarts the server as after a crash: `pg_ctl stop -m immediate`,
    /// then a start on the same port and data folder, waiting until it
    /// accepts connections (crash recovery included). Every open session
    /// ends. Restarts of one cluster never overlap (a second call waits for
    /// the first). Blocks the calling thread; from async code use
    /// `tokio::task::spawn_blocking`.
    ///
    /// # Errors
    ///
    /// Why `pg_ctl` failed (with the server log's tail) or what timed out.
    pub fn restart_immediate(&self) -> Result<(), ProvisionError> {
        self.cluster.restart_immediate()
    }
}
