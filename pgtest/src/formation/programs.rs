//! The programs a formation runs besides its services, in its environment
//! (`AutoFailoverFormation::command`): `psql` on the monitor or a node,
//! `initdb` of a data folder.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::{AutoFailoverFormation, FORMATION_NAME, MONITOR_DATABASE, WRITE_PROBE_SQL};
use crate::command::{self, RunError};
use crate::error::ProvisionError;
use crate::limits::{
    FORMATION_COMMAND_TIMEOUT_S, FORMATION_CONNECT_TIMEOUT_S, FORMATION_WRITE_PROBE_TIMEOUT_MS,
};
use crate::local::{self, LOCAL_HOST, LOCAL_SUPERUSER, failed};

impl AutoFailoverFormation {
    /// Whether a write on the server at `port` commits within
    /// [`FORMATION_WRITE_PROBE_TIMEOUT_MS`].
    pub(super) fn takes_writes(&self, port: u16) -> bool {
        self.sql_within(
            port,
            "postgres",
            &[WRITE_PROBE_SQL],
            Duration::from_millis(FORMATION_WRITE_PROBE_TIMEOUT_MS),
        )
        .is_ok_and(|answer| answer.trim() == "t")
    }

    /// The monitor's nodes and their states, for an error message.
    pub(super) fn monitor_view(&self) -> String {
        self.sql(
            self.monitor_port,
            MONITOR_DATABASE,
            &[&format!(
                "SELECT coalesce(string_agg(format('%s:%s %s/%s', nodename, nodeport, \
                 current_group_state, assigned_group_state), ', ' ORDER BY nodename), 'no node') \
                 FROM pgautofailover.current_state('{FORMATION_NAME}')"
            )],
        )
        .map(|view| view.trim().to_owned())
        .unwrap_or_else(|error| format!("unreachable: {error}"))
    }

    /// A command run as the owner in the formation's folder, with the
    /// environment that keeps `pg_autoctl`'s files and the sockets in it.
    pub(super) fn command(&self, program: &Path) -> Command {
        let mut command = Command::new(program);
        // The caller's libpq settings (PGPORT, PGDATABASE, ...) would
        // redirect pg_autoctl's and psql's connections.
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("PG") {
                command.env_remove(name);
            }
        }
        let mut path = OsString::from(self.bindir.as_os_str());
        if let Some(inherited) = std::env::var_os("PATH") {
            path.push(":");
            path.push(inherited);
        }
        command
            .env("PATH", path)
            .env("HOME", &self.dir)
            .env("PGHOST", self.dir.join("sock"))
            .env("PGUSER", LOCAL_SUPERUSER)
            .env("XDG_CONFIG_HOME", self.dir.join("xdg/config"))
            .env("XDG_DATA_HOME", self.dir.join("xdg/data"))
            .env("XDG_RUNTIME_DIR", self.dir.join("xdg/run"));
        local::run_as(command, self.owner, &self.dir)
    }

    /// Runs `statements` (one `--command` each) on database `database` of
    /// the server at `port` with `psql`, within [`FORMATION_COMMAND_TIMEOUT_S`];
    /// returns the unaligned output.
    pub(super) fn sql(
        &self,
        port: u16,
        database: &str,
        statements: &[&str],
    ) -> Result<String, ProvisionError> {
        self.sql_within(
            port,
            database,
            statements,
            Duration::from_secs(FORMATION_COMMAND_TIMEOUT_S),
        )
    }

    fn sql_within(
        &self,
        port: u16,
        database: &str,
        statements: &[&str],
        bound: Duration,
    ) -> Result<String, ProvisionError> {
        let mut psql = self.command(&self.bindir.join("psql"));
        psql.env("PGCONNECT_TIMEOUT", FORMATION_CONNECT_TIMEOUT_S.to_string())
            .args(["--no-psqlrc", "--tuples-only", "--no-align", "--quiet"])
            .args(["--set", "ON_ERROR_STOP=1"])
            .args(["--host", LOCAL_HOST])
            .arg(format!("--port={port}"))
            .args(["--username", LOCAL_SUPERUSER, "--dbname", database]);
        for statement in statements {
            psql.arg("--command").arg(statement);
        }
        let action = || format!("run {statements:?} on port {port}");
        let finished = command::run(&mut psql, bound).map_err(|error| match error {
            RunError::TimedOut => ProvisionError::TimedOut {
                action: action(),
                timeout_s: bound.as_secs(),
            },
            RunError::Spawn(_) => ProvisionError::Database {
                action: action(),
                message: format!("psql: {error}"),
            },
        })?;
        if finished.status.success() {
            return Ok(finished.stdout);
        }
        Err(ProvisionError::Database {
            action: action(),
            message: finished.output_tail(),
        })
    }

    /// initdb of `data` (trust authentication, superuser `postgres`), its
    /// socket in the formation's `sock/`, then `settings`.
    pub(super) fn initdb(&self, data: &Path, settings: &str) -> Result<(), ProvisionError> {
        let finished = local::run_initdb(self.command(&self.bindir.join("initdb")), data)?;
        if !finished.status.success() {
            return Err(failed(format!(
                "initdb of {} exited with {}: {}",
                data.display(),
                finished.status,
                finished.output_tail()
            )));
        }
        // pg_autoctl never passes a socket folder to postgres, which would
        // otherwise use Debian's /var/run/postgresql.
        local::append(
            &data.join("postgresql.conf"),
            &format!(
                "\n# connreg-pgtest: a pg_auto_failover formation\n\
                 unix_socket_directories = '{socket_dir}'\n{settings}",
                socket_dir = self
                    .dir
                    .join("sock")
                    .display()
                    .to_string()
                    .replace('\'', "''"),
            ),
        )
    }
}
