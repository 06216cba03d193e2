//! Where the server comes from, and the rule that picks it.

use std::fmt;
use std::path::PathBuf;
use std::process::Command;
use std::str::FromStr;

use crate::bindir::{self, BINDIR_VAR};
use crate::command;
use crate::error::ProvisionError;

/// Environment variable holding the superuser URL of a running server to use.
pub const DATABASE_URL_VAR: &str = "CONNREG_TEST_DATABASE_URL";

/// Environment variable forcing one source: `url`, `local` or `docker`.
///
/// When set, that source is used or the run fails; there is no fallback.
pub const FORCE_SOURCE_VAR: &str = "CONNREG_TEST_PG";

/// Where the server of this process comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ServerSource {
    /// A running server named by [`DATABASE_URL_VAR`].
    Url,
    /// A throwaway cluster started from local PostgreSQL binaries.
    Local,
    /// A PostgreSQL container on a Docker engine.
    Docker,
}

impl ServerSource {
    /// The name used in [`FORCE_SOURCE_VAR`] and in messages.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerSource::Url => "url",
            ServerSource::Local => "local",
            ServerSource::Docker => "docker",
        }
    }
}

impl fmt::Display for ServerSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ServerSource {
    type Err = ProvisionError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value.trim().to_ascii_lowercase().as_str() {
            "url" => Ok(ServerSource::Url),
            "local" => Ok(ServerSource::Local),
            "docker" => Ok(ServerSource::Docker),
            _ => Err(ProvisionError::InvalidSetting {
                variable: FORCE_SOURCE_VAR,
                value: value.to_owned(),
                reason: "expected one of `url`, `local` or `docker`, or leave it unset".to_owned(),
            }),
        }
    }
}

/// What this machine offers for getting a server: the input of the choice.
///
/// [`Environment::detect`] reads the real environment; tests of the choice
/// build one by hand.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Environment {
    /// The source forced by [`FORCE_SOURCE_VAR`], if any.
    pub forced: Option<ServerSource>,
    /// The value of [`DATABASE_URL_VAR`], if set and not empty.
    pub database_url: Option<String>,
    /// The folder of the PostgreSQL server binaries, if found (see [`bindir`](crate::bindir())).
    pub bindir: Option<PathBuf>,
    /// Whether a Docker engine answered.
    pub docker_available: bool,
}

impl Environment {
    /// Reads the environment variables and looks for binaries.
    ///
    /// The Docker engine is asked (`docker info`, bounded by
    /// [`PROBE_TIMEOUT_S`](crate::limits::PROBE_TIMEOUT_S)) only when the
    /// answer can matter: nothing earlier in the order is available, or
    /// Docker is forced.
    pub fn detect() -> Result<Environment, ProvisionError> {
        let forced = non_empty_var(FORCE_SOURCE_VAR)
            .map(|value| value.parse::<ServerSource>())
            .transpose()?;
        let database_url = non_empty_var(DATABASE_URL_VAR);
        let bindir = bindir::bindir();
        if let (Some(dir), Some(value)) = (&bindir, non_empty_var(BINDIR_VAR))
            && !bindir::has_server_binaries(dir)
        {
            return Err(ProvisionError::InvalidSetting {
                variable: BINDIR_VAR,
                value,
                reason: "that folder lacks initdb, pg_ctl or postgres".to_owned(),
            });
        }
        let docker_needed = match forced {
            Some(source) => source == ServerSource::Docker,
            None => database_url.is_none() && bindir.is_none(),
        };
        let docker_available = docker_needed && docker_answers();
        Ok(Environment {
            forced,
            database_url,
            bindir,
            docker_available,
        })
    }

    /// Picks the source: the forced one if it is available, else the first
    /// available of URL, local binaries, Docker.
    pub fn choose(&self) -> Result<ServerSource, ProvisionError> {
        let available = |source: ServerSource| match source {
            ServerSource::Url => self.database_url.is_some(),
            ServerSource::Local => self.bindir.is_some(),
            ServerSource::Docker => self.docker_available,
        };
        if let Some(requested) = self.forced {
            return if available(requested) {
                Ok(requested)
            } else {
                Err(ProvisionError::SourceUnavailable {
                    requested,
                    reason: unavailable_reason(requested),
                })
            };
        }
        [ServerSource::Url, ServerSource::Local, ServerSource::Docker]
            .into_iter()
            .find(|source| available(*source))
            .ok_or(ProvisionError::NoServer)
    }
}

fn unavailable_reason(source: ServerSource) -> String {
    match source {
        ServerSource::Url => format!(
            "{DATABASE_URL_VAR} is not set; set it to the superuser URL of a running server, \
             e.g. postgres://postgres:PASSWORD@127.0.0.1:5432/postgres"
        ),
        ServerSource::Local => format!(
            "no PostgreSQL server binaries were found through {BINDIR_VAR}, \
             `pg_config --bindir` or /usr/lib/postgresql/*/bin; \
             install them (`apt-get install postgresql`) or point {BINDIR_VAR} at them"
        ),
        ServerSource::Docker => "no Docker engine answered (`docker info` failed and DOCKER_HOST \
             is not set); start a Docker engine or unset CONNREG_TEST_PG"
            .to_owned(),
    }
}

/// Whether a Docker engine is there to use: `DOCKER_HOST` names one, or
/// `docker info` succeeds.
fn docker_answers() -> bool {
    non_empty_var("DOCKER_HOST").is_some()
        || command::probe(Command::new("docker").args(["info", "--format", "{{.ServerVersion}}"]))
            .is_some()
}

pub(crate) fn non_empty_var(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .filter(|value| !value.trim().is_empty())
}
