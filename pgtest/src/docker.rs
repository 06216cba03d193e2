//! A PostgreSQL container on a Docker engine, through testcontainers.
//!
//! Not exercised on machines without an engine; kept to what the
//! testcontainers-modules documentation shows.

use std::ffi::OsStr;
use std::thread;
use std::time::{Duration, Instant};

use sqlx::Connection;
use testcontainers_modules::postgres::Postgres;
use testcontainers_modules::testcontainers::runners::SyncRunner;
use testcontainers_modules::testcontainers::{Container, ImageExt};

use crate::error::ProvisionError;
use crate::limits::{DOCKER_START_TIMEOUT_S, POLL_INTERVAL_MS, SERVER_CONNECTIONS_MAX};
use crate::source::ServerSource;
use crate::supervisor::{self, CleanupGuard};

/// The image tag: the major version the local binaries of the project's
/// machines have, so both sources run the same server.
pub(crate) const DOCKER_IMAGE_TAG: &str = "15-alpine";

/// The superuser and password the image is started with.
pub(crate) const DOCKER_SUPERUSER: &str = "postgres";
pub(crate) const DOCKER_PASSWORD: &str = "postgres";

/// The port PostgreSQL listens on inside the container.
const CONTAINER_PORT: u16 = 5432;

/// A running container, kept for the whole process; removed by its
/// supervisor (`docker rm --force`) when the process exits, since statics
/// are never dropped.
pub(crate) struct DockerServer {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) container_id: String,
    _container: Container<Postgres>,
    _cleanup: CleanupGuard,
}

impl std::fmt::Debug for DockerServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerServer")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("container_id", &self.container_id)
            .finish_non_exhaustive()
    }
}

/// Starts the container and waits until it accepts connections.
pub(crate) fn start() -> Result<DockerServer, ProvisionError> {
    // The sync runner blocks on a runtime of its own, which panics on a
    // thread already inside a tokio runtime, so it gets a thread of its own.
    thread::Builder::new()
        .name("connreg-pgtest-docker".to_owned())
        .spawn(start_on_this_thread)
        .map_err(|error| failed(format!("could not start a thread: {error}")))?
        .join()
        .unwrap_or_else(|_| Err(failed("starting the container panicked".to_owned())))
}

fn start_on_this_thread() -> Result<DockerServer, ProvisionError> {
    let max_connections = format!("max_connections={SERVER_CONNECTIONS_MAX}");
    let container = Postgres::default()
        .with_user(DOCKER_SUPERUSER)
        .with_password(DOCKER_PASSWORD)
        .with_tag(DOCKER_IMAGE_TAG)
        // Replaces the module's default command (`-c fsync=off`).
        .with_cmd(["-c", "fsync=off", "-c", max_connections.as_str()])
        .with_startup_timeout(Duration::from_secs(DOCKER_START_TIMEOUT_S))
        .start()
        .map_err(|error| failed(format!("testcontainers: {error}")))?;
    // If anything below fails, dropping `container` removes it.
    let container_id = container.id().to_owned();
    let cleanup = supervisor::arm(
        supervisor::DOCKER_CONTAINER_SCRIPT,
        &[OsStr::new(&container_id)],
    )
    .map_err(|error| {
        failed(format!(
            "could not start the cleanup supervisor (sh): {error}"
        ))
    })?;
    let host = container
        .get_host()
        .map_err(|error| failed(format!("testcontainers: {error}")))?
        .to_string();
    let port = container
        .get_host_port_ipv4(CONTAINER_PORT)
        .map_err(|error| failed(format!("testcontainers: {error}")))?;
    wait_until_accepting(&url(&host, port))?;
    Ok(DockerServer {
        host,
        port,
        container_id,
        _container: container,
        _cleanup: cleanup,
    })
}

/// The superuser URL of the container's `postgres` database.
pub(crate) fn url(host: &str, port: u16) -> String {
    format!("postgres://{DOCKER_SUPERUSER}:{DOCKER_PASSWORD}@{host}:{port}/postgres")
}

/// The image's entrypoint runs a temporary server while initialising and then
/// restarts it, so a log line alone can precede the real start; a successful
/// connection cannot.
fn wait_until_accepting(url: &str) -> Result<(), ProvisionError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| failed(format!("could not build a runtime: {error}")))?;
    let deadline = Instant::now() + Duration::from_secs(DOCKER_START_TIMEOUT_S);
    runtime.block_on(async {
        loop {
            match sqlx::PgConnection::connect(url).await {
                Ok(connection) => {
                    // Closing politely is not needed for the check.
                    let _ = connection.close().await;
                    return Ok(());
                }
                Err(_) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(POLL_INTERVAL_MS)).await;
                }
                Err(error) => {
                    return Err(failed(format!(
                        "the container did not accept connections within \
                         {DOCKER_START_TIMEOUT_S} s: {error}"
                    )));
                }
            }
        }
    })
}

fn failed(detail: String) -> ProvisionError {
    ProvisionError::StartFailed {
        source_kind: ServerSource::Docker,
        detail,
    }
}
