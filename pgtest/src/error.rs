//! The one error type: why a test could not get its database.

use crate::source::ServerSource;

/// Why no database could be provided.
///
/// Cloneable because the outcome of starting the shared server is remembered
/// for the whole process: every test after a failed start gets the same error
/// at once instead of trying again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProvisionError {
    /// No way to reach or start a PostgreSQL server was found.
    #[error(
        "no PostgreSQL server for tests; provide one in any of these ways: \
         (1) set CONNREG_TEST_DATABASE_URL=postgres://USER:PASSWORD@HOST:PORT/postgres \
         (a superuser URL of a running server), \
         (2) install the PostgreSQL server binaries (`apt-get install postgresql`; \
         found through CONNREG_PG_BINDIR, `pg_config --bindir` or /usr/lib/postgresql/*/bin) \
         and a throwaway local cluster is started, \
         or (3) run a Docker engine (`docker info` must succeed, or set DOCKER_HOST)"
    )]
    NoServer,

    /// `CONNREG_TEST_PG` forced a source that this machine does not offer.
    #[error(
        "CONNREG_TEST_PG={requested} forces the {requested} server source, \
         but it is unavailable: {reason}"
    )]
    SourceUnavailable {
        /// The source that was forced.
        requested: ServerSource,
        /// What is missing and how to provide it.
        reason: String,
    },

    /// An environment variable of this crate holds a value it cannot use.
    #[error("{variable}={value:?} is invalid: {reason}")]
    InvalidSetting {
        /// The variable's name.
        variable: &'static str,
        /// Its value.
        value: String,
        /// What a valid value looks like.
        reason: String,
    },

    /// The chosen server could not be started or reached.
    #[error("could not start the {source_kind} PostgreSQL server: {detail}")]
    StartFailed {
        /// The source that was being started.
        source_kind: ServerSource,
        /// What went wrong, with the tail of the relevant output or log.
        detail: String,
    },

    /// A bounded wait ran out.
    #[error("{action} did not finish within {timeout_s} s")]
    TimedOut {
        /// What was being waited for.
        action: String,
        /// The bound, in seconds.
        timeout_s: u64,
    },

    /// A restart was asked of a server this crate does not run as a local
    /// cluster: one given by URL belongs to someone else, and a container is
    /// not restarted by the harness.
    #[error(
        "a server given by {} cannot be restarted by the harness; \
         only a throwaway local cluster can (CONNREG_TEST_PG=local, or a LocalCluster)",
        restart_origin(*source_kind)
    )]
    RestartUnsupported {
        /// Where the server came from.
        source_kind: ServerSource,
    },

    /// The server refused or failed a statement this crate ran.
    #[error("could not {action}: {message}")]
    Database {
        /// What was being done, e.g. `create database connreg_test_…`.
        action: String,
        /// The server's or driver's message.
        message: String,
    },
}

/// How a server's origin reads in [`ProvisionError::RestartUnsupported`].
fn restart_origin(source: ServerSource) -> &'static str {
    match source {
        ServerSource::Url => "URL",
        ServerSource::Docker => "Docker",
        ServerSource::Local => "the local binaries",
    }
}
