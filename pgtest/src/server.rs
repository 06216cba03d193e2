//! The one server of this process: chosen, started and reported once.

use std::path::Path;
use std::str::FromStr;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use percent_encoding::percent_decode_str;
use sqlx::postgres::PgConnectOptions;
use url::Url;

use crate::docker::{self, DockerServer};
use crate::error::ProvisionError;
use crate::limits::SERVER_CONNECTIONS_MAX;
use crate::local::{self, Cluster, LOCAL_HOST, LOCAL_SUPERUSER, Settings};
use crate::source::{DATABASE_URL_VAR, Environment, ServerSource};

/// The outcome of the first [`server`] call, kept for the whole process.
static SERVER: OnceLock<Result<Server, ProvisionError>> = OnceLock::new();

/// The PostgreSQL server this process's tests share.
///
/// Only [`server`] makes one. Every URL it gives is a superuser one.
#[derive(Debug)]
pub struct Server {
    source: ServerSource,
    url: String,
    host: String,
    port: u16,
    superuser: String,
    password: Option<String>,
    acquired_in: Duration,
    kind: Kind,
}

/// What keeps the server alive, per source.
#[derive(Debug)]
enum Kind {
    Url,
    Local(Cluster),
    Docker(Box<DockerServer>),
}

/// The server this process uses, acquired on the first call.
///
/// The first call chooses the source (see [`Environment::choose`]: the
/// [`DATABASE_URL_VAR`] server, else a throwaway local cluster, else a Docker
/// container, with `CONNREG_TEST_PG` forcing one), starts it if needed, and
/// prints one line about it on stderr. Starting blocks the calling thread:
/// about a second for a local cluster here, longer for a first Docker image
/// pull. Concurrent first calls wait for the same start.
///
/// A failure is kept too: every later call returns the same error at once.
pub fn server() -> Result<&'static Server, ProvisionError> {
    SERVER
        .get_or_init(|| {
            let acquired = acquire();
            match &acquired {
                Ok(server) => eprintln!("connreg-pgtest: {}", server.describe()),
                Err(error) => eprintln!("connreg-pgtest: no PostgreSQL server: {error}"),
            }
            acquired
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The server if [`server`] has already run, without blocking.
pub(crate) fn server_if_acquired() -> Option<Result<&'static Server, ProvisionError>> {
    SERVER
        .get()
        .map(|acquired| acquired.as_ref().map_err(Clone::clone))
}

fn acquire() -> Result<Server, ProvisionError> {
    let started_at = Instant::now();
    let environment = Environment::detect()?;
    let source = environment.choose()?;
    let mut server = match source {
        ServerSource::Url => {
            // `choose` picks Url only when the URL is present.
            let url = environment.database_url.unwrap_or_default();
            from_url(url)?
        }
        ServerSource::Local => {
            let bindir = environment.bindir.unwrap_or_default();
            let cluster = local::start(
                &bindir,
                Settings {
                    fsync: false,
                    connections_max: SERVER_CONNECTIONS_MAX,
                },
            )?;
            Server {
                source,
                url: format!(
                    "postgres://{LOCAL_SUPERUSER}@{LOCAL_HOST}:{}/postgres",
                    cluster.port
                ),
                host: LOCAL_HOST.to_owned(),
                port: cluster.port,
                superuser: LOCAL_SUPERUSER.to_owned(),
                password: None,
                acquired_in: Duration::ZERO,
                kind: Kind::Local(cluster),
            }
        }
        ServerSource::Docker => {
            let container = docker::start()?;
            Server {
                source,
                url: docker::url(&container.host, container.port),
                host: container.host.clone(),
                port: container.port,
                superuser: docker::DOCKER_SUPERUSER.to_owned(),
                password: Some(docker::DOCKER_PASSWORD.to_owned()),
                acquired_in: Duration::ZERO,
                kind: Kind::Docker(Box::new(container)),
            }
        }
    };
    server.acquired_in = started_at.elapsed();
    Ok(server)
}

fn from_url(raw: String) -> Result<Server, ProvisionError> {
    let invalid = |reason: String| ProvisionError::InvalidSetting {
        variable: DATABASE_URL_VAR,
        value: redact(&raw),
        reason,
    };
    let parsed = Url::parse(&raw).map_err(|error| invalid(error.to_string()))?;
    if !matches!(parsed.scheme(), "postgres" | "postgresql") {
        return Err(invalid(
            "expected a postgres:// or postgresql:// URL".to_owned(),
        ));
    }
    // sqlx's reading of the URL is the one connections will use, defaults
    // (PGHOST, PGPORT, PGUSER, ...) included.
    let options = PgConnectOptions::from_str(&raw).map_err(|error| invalid(error.to_string()))?;
    let password = (!parsed.password().unwrap_or_default().is_empty()).then(|| {
        percent_decode_str(parsed.password().unwrap_or_default())
            .decode_utf8_lossy()
            .into_owned()
    });
    Ok(Server {
        source: ServerSource::Url,
        host: options.get_host().to_owned(),
        port: options.get_port(),
        superuser: options.get_username().to_owned(),
        password,
        url: raw,
        acquired_in: Duration::ZERO,
        kind: Kind::Url,
    })
}

/// `url` with its password replaced, for messages.
fn redact(url: &str) -> String {
    match Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            // Only fails for URLs that cannot have a password.
            let _ = parsed.set_password(Some("REDACTED"));
            parsed.to_string()
        }
        Ok(_) => url.to_owned(),
        Err(_) => "(not a URL)".to_owned(),
    }
}

impl Server {
    /// Where this server came from.
    pub fn source(&self) -> ServerSource {
        self.source
    }

    /// Superuser URL of the server's maintenance database (`postgres`, or
    /// whichever database [`DATABASE_URL_VAR`] names), for creating roles and
    /// databases.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Superuser URL of database `database` on this server.
    pub fn database_url(&self, database: &str) -> String {
        match Url::parse(&self.url) {
            Ok(mut url) => {
                url.set_path(&format!("/{database}"));
                url.to_string()
            }
            // `self.url` was parsed when the server was acquired.
            Err(_) => self.url.clone(),
        }
    }

    /// Host to connect to: `127.0.0.1` for the local cluster, the engine's
    /// host for Docker, the URL's host otherwise (may be a socket folder).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// TCP port to connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Name of the superuser every URL of this crate connects as.
    pub fn superuser(&self) -> &str {
        &self.superuser
    }

    /// The superuser's password, if it has one (the local cluster trusts
    /// loopback and has none). For tools such as pgbench, via `PGPASSWORD`.
    pub fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }

    /// `max_connections` of the server if this crate started it
    /// ([`SERVER_CONNECTIONS_MAX`]); `None` for a server named by URL, whose
    /// own setting applies.
    pub fn connections_max(&self) -> Option<u32> {
        match self.kind {
            Kind::Url => None,
            Kind::Local(_) | Kind::Docker(_) => Some(SERVER_CONNECTIONS_MAX),
        }
    }

    /// The local cluster's temporary folder (data, socket, log), removed when
    /// the process exits; `None` for other sources.
    pub fn local_dir(&self) -> Option<&Path> {
        match &self.kind {
            Kind::Local(cluster) => Some(&cluster.dir),
            _ => None,
        }
    }

    /// The local cluster's server log, worth reading when a test fails
    /// oddly; `None` for other sources.
    pub fn log_file(&self) -> Option<&Path> {
        match &self.kind {
            Kind::Local(cluster) => Some(&cluster.log_file),
            _ => None,
        }
    }

    /// Whether [`restart_immediate`](Self::restart_immediate) can work: only
    /// on the throwaway local cluster.
    pub fn can_restart(&self) -> bool {
        matches!(self.kind, Kind::Local(_))
    }

    /// Restarts the server as after a crash: `pg_ctl stop -m immediate`
    /// (every session of every test of this process ends at once, nothing is
    /// checkpointed), then a start on the same port and data folder, waiting
    /// until it accepts connections again (crash recovery included). As
    /// root, `pg_ctl` runs as the `postgres` user. Blocks the calling thread
    /// for about a second; from async code call it through
    /// `tokio::task::spawn_blocking`.
    ///
    /// With `fsync=off` (this server's setting) recovery from a real machine
    /// crash would lose data, but an immediate shutdown keeps the operating
    /// system's page cache, so what was committed survives it. For a cluster
    /// of its own with `fsync=on`, see [`LocalCluster`](crate::LocalCluster).
    ///
    /// # Errors
    ///
    /// [`ProvisionError::RestartUnsupported`] for a server given by URL or
    /// run by Docker (see [`can_restart`](Self::can_restart)); otherwise
    /// why `pg_ctl` failed or timed out.
    pub fn restart_immediate(&self) -> Result<(), ProvisionError> {
        match &self.kind {
            Kind::Local(cluster) => cluster.restart_immediate(),
            Kind::Url | Kind::Docker(_) => Err(ProvisionError::RestartUnsupported {
                source_kind: self.source,
            }),
        }
    }

    /// How long choosing and starting the server took.
    pub fn acquired_in(&self) -> Duration {
        self.acquired_in
    }

    /// The one line printed on first use.
    fn describe(&self) -> String {
        let origin = match &self.kind {
            Kind::Url => format!("named by {DATABASE_URL_VAR}"),
            Kind::Local(cluster) => format!(
                "throwaway cluster from {} in {} (log {}), started in {:.2} s, \
                 max_connections={SERVER_CONNECTIONS_MAX}, removed when this process exits",
                cluster.bindir.display(),
                cluster.dir.display(),
                cluster.log_file.display(),
                cluster.startup.as_secs_f64(),
            ),
            Kind::Docker(container) => format!(
                "container {} (postgres:{}), max_connections={SERVER_CONNECTIONS_MAX}, \
                 removed when this process exits",
                container.container_id,
                docker::DOCKER_IMAGE_TAG
            ),
        };
        format!(
            "PostgreSQL from source `{}` at {}:{} as {}: {origin}",
            self.source, self.host, self.port, self.superuser
        )
    }
}
