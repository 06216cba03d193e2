//! A pg_auto_failover formation: a monitor and two data nodes (a primary and
//! a synchronous-quorum secondary), each run by its own `pg_autoctl`
//! service, all from the installed Debian packages, in one temporary folder.
//!
//! This is the high-availability setup an operator deploys: the monitor
//! checks the nodes, and when the primary dies it promotes the secondary
//! by itself. Qualification uses it to measure a failover the way operators
//! run it, where [`ReplicatedPair`](crate::ReplicatedPair) promotes its
//! standby by hand.
//!
//! Everything of a formation stays in its folder: the servers' data, their
//! Unix sockets (`sock/`), `pg_autoctl`'s configuration, state and pid
//! files (`XDG_CONFIG_HOME`, `XDG_DATA_HOME`, `XDG_RUNTIME_DIR` under
//! `xdg/`) and the services' logs (`logs/`). As root, every program runs
//! as the `postgres` user, as for [`LocalCluster`](crate::LocalCluster).
//!
//! # Modules
//!
//! - `services`: starting the monitor and the nodes as `pg_autoctl`
//!   services, waiting for them, stopping them, the teardown.
//! - `programs`: the programs run in the formation's environment: `psql`
//!   on the monitor or a node, `initdb`.

mod programs;
mod services;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::{Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use crate::cluster::{self, LocalOptions};
use crate::error::ProvisionError;
use crate::limits::{
    FORMATION_FAILOVER_TIMEOUT_S, FORMATION_POLL_INTERVAL_MS, LOCAL_PORT_ATTEMPTS_MAX,
    LOCAL_STOP_TIMEOUT_S,
};
use crate::local::{self, LOCAL_HOST, LOCAL_SUPERUSER, Owner, failed};
use crate::pair::Replication;
use crate::supervisor::{self, CleanupGuard};

use services::signal;

/// Where the Debian package `pg-auto-failover-cli` installs `pg_autoctl`;
/// when it is not there, `PATH` is searched.
const PG_AUTOCTL_PATH: &str = "/usr/bin/pg_autoctl";

/// The Debian packages a formation needs: the monitor's extension for
/// PostgreSQL 15 and the `pg_autoctl` program.
const PG_AUTO_FAILOVER_PACKAGES: &str = "postgresql-15-auto-failover pg-auto-failover-cli";

/// Why no formation can start without `pg_autoctl`.
const NO_PG_AUTOCTL: &str = "pg_auto_failover's pg_autoctl was not found (neither at \
     /usr/bin/pg_autoctl nor on PATH); install the Debian packages postgresql-15-auto-failover \
     and pg-auto-failover-cli (`apt-get install -y postgresql-15-auto-failover \
     pg-auto-failover-cli`)";

/// The formation and group every node joins (pg_auto_failover's defaults).
const FORMATION_NAME: &str = "default";
const GROUP_ID: u32 = 0;

/// The monitor's database and the role the nodes reach it as.
const MONITOR_DATABASE: &str = "pg_auto_failover";
const MONITOR_ROLE: &str = "autoctl_node";

/// The folder, log and pg_auto_failover name of the monitor and the nodes.
const MONITOR_NAME: &str = "monitor";
const NODE_NAMES: [&str; 2] = ["node1", "node2"];

/// The monitor's view once both nodes are up: one primary, one secondary,
/// each where the monitor wants it (sorted by state).
const READY_STATES: &str = "primary/primary,secondary/secondary";

/// A write that returns only once it is committed as the node's
/// replication settings require: a transactional WAL message (it waits for
/// the synchronous standby like any commit) that leaves no object behind,
/// and fails on a standby.
const WRITE_PROBE_SQL: &str =
    "SELECT pg_logical_emit_message(true, 'connreg-pgtest', 'write probe') IS NOT NULL";

/// The primary's replication settings and its connected standbys, as
/// [`ReplicatedPair::replication_report`](crate::ReplicatedPair::replication_report)
/// gives them.
const REPLICATION_REPORT_SQL: &str = "SELECT 'synchronous_commit=' || current_setting('synchronous_commit') \
     UNION ALL SELECT 'synchronous_standby_names=' || current_setting('synchronous_standby_names') \
     UNION ALL SELECT 'standby=' || application_name || ' state=' || state || ' sync_state=' || sync_state \
       || ' replay_lag=' || coalesce(replay_lag::text, '0') FROM pg_stat_replication";

/// A pg_auto_failover formation of one monitor and two data nodes
/// (`node1`, `node2`), one the primary and the other its synchronous
/// (quorum) secondary, each run by `pg_autoctl` from the Debian packages
/// `postgresql-15-auto-failover` and `pg-auto-failover-cli`, all on free
/// ports reached over `127.0.0.1`, with trust authentication and no SSL.
///
/// ```no_run
/// use std::time::Duration;
/// use connreg_pgtest::{AutoFailoverFormation, LocalOptions};
///
/// # fn example() -> Result<(), connreg_pgtest::ProvisionError> {
/// let formation = AutoFailoverFormation::start(LocalOptions::default())?;
/// // ... write through formation.primary_url()? ...
/// let crashed = formation.crash_primary()?;
/// let (primary, without_primary) =
///     formation.wait_for_new_primary(crashed, Duration::from_secs(60))?;
/// // ... the monitor promoted the other node, port `primary` ...
/// # Ok(())
/// # }
/// ```
///
/// The monitor is tuned once the formation is up (see
/// [`limits::FORMATION_HEALTH_CHECK_PERIOD_MS`](crate::limits::FORMATION_HEALTH_CHECK_PERIOD_MS)
/// and the six settings after it) so that a crashed primary is replaced in
/// about 5 s. A crashed node stays down: a formation fails over once.
///
/// The data nodes listen on `127.0.0.1` only. The monitor listens on every
/// address (`pg_autoctl` starts it with `-h *`), but its `pg_hba.conf`
/// admits the loopback only.
///
/// Dropping the value stops every service (`pg_autoctl stop`, then by
/// force after [`limits::FORMATION_STOP_TIMEOUT_S`](crate::limits::FORMATION_STOP_TIMEOUT_S))
/// and deletes the folder before `drop` returns; if the process ends
/// without dropping it, a small `sh` supervisor kills the services and
/// deletes the folder.
#[derive(Debug)]
pub struct AutoFailoverFormation {
    dir: PathBuf,
    bindir: PathBuf,
    pg_autoctl: PathBuf,
    owner: Option<Owner>,
    options: LocalOptions,
    monitor_port: u16,
    node_ports: [u16; 2],
    startup: Duration,
    /// The node crashed by [`AutoFailoverFormation::crash_primary`], once.
    crash: Mutex<Option<Crash>>,
    /// The `pg_autoctl` services this process started, by the name of
    /// what they run; reaped in teardown.
    services: Mutex<Vec<(&'static str, Child)>>,
    /// The supervisor that cleans up if the process ends without dropping
    /// the value; finished by the teardown.
    cleanup: Option<CleanupGuard>,
}

/// The crash [`AutoFailoverFormation::crash_primary`] caused.
#[derive(Debug, Clone, Copy)]
struct Crash {
    port: u16,
    at: Instant,
}

impl AutoFailoverFormation {
    /// Starts a monitor, then `node1` (which becomes the primary), then
    /// `node2` (a base backup of it, which becomes its secondary); tunes the
    /// monitor; returns once the primary takes writes and the secondary
    /// streams as its synchronous (quorum) standby. `options` apply to both
    /// data nodes (the monitor keeps PostgreSQL's defaults). Blocks the
    /// calling thread (about 8 s); from async code use
    /// `tokio::task::spawn_blocking`.
    ///
    /// # Errors
    ///
    /// [`ProvisionError::StartFailed`] naming the Debian packages to install
    /// when `pg_autoctl` is missing; [`ProvisionError::SourceUnavailable`]
    /// without PostgreSQL server binaries; [`ProvisionError::InvalidSetting`]
    /// for too few connections; otherwise which stage failed (with the tail
    /// of its output or log) or timed out. A failed start leaves no process
    /// and no folder behind.
    pub fn start(options: LocalOptions) -> Result<AutoFailoverFormation, ProvisionError> {
        let pg_autoctl = find_pg_autoctl().ok_or_else(|| failed(NO_PG_AUTOCTL.to_owned()))?;
        let bindir = cluster::checked_bindir(options)?;
        let owner = local::owner_when_root(
            "initdb and pg_autoctl refuse to run, and there is no `postgres` user to run \
             them as",
        )?;
        let mut attempt = 1;
        loop {
            match AutoFailoverFormation::start_once(&bindir, &pg_autoctl, owner, options) {
                // Another process took one of the free ports before its
                // server bound it: start over on new ones.
                Err(error)
                    if attempt < LOCAL_PORT_ATTEMPTS_MAX
                        && error.to_string().contains("already in use") =>
                {
                    attempt += 1;
                }
                outcome => return outcome,
            }
        }
    }

    fn start_once(
        bindir: &Path,
        pg_autoctl: &Path,
        owner: Option<Owner>,
        options: LocalOptions,
    ) -> Result<AutoFailoverFormation, ProvisionError> {
        let started_at = Instant::now();
        let dir = local::make_private_dir("connreg-pgtest-paf", owner)?;
        // Armed before anything runs in the folder: even a start
        // interrupted by the end of the process leaves nothing behind.
        let script = supervisor::formation_script(
            LOCAL_STOP_TIMEOUT_S,
            &[MONITOR_NAME, NODE_NAMES[0], NODE_NAMES[1]],
        );
        let cleanup = match supervisor::arm(&script, &[dir.as_os_str()]) {
            Ok(cleanup) => cleanup,
            Err(error) => {
                // Ignored: the folder is empty, and the error below is what
                // the caller needs to know.
                let _ = fs::remove_dir_all(&dir);
                return Err(failed(format!(
                    "could not start the cleanup supervisor (sh): {error}"
                )));
            }
        };
        let [monitor_port, port1, port2] = local::free_ports()?;
        // From here on, dropping the value tears down whatever started.
        let mut formation = AutoFailoverFormation {
            dir,
            bindir: bindir.to_owned(),
            pg_autoctl: pg_autoctl.to_owned(),
            owner,
            options,
            monitor_port,
            node_ports: [port1, port2],
            startup: Duration::ZERO,
            crash: Mutex::new(None),
            services: Mutex::new(Vec::new()),
            cleanup: Some(cleanup),
        };
        for folder in ["sock", "logs", "xdg", "xdg/config", "xdg/data", "xdg/run"] {
            local::make_dir(&formation.dir.join(folder), owner)?;
        }
        formation.start_monitor()?;
        formation.start_node(0)?;
        formation.wait_for(
            "node1 registered as single by the monitor",
            &format!(
                "SELECT string_agg(current_group_state::text, ',') = 'single' \
                 FROM pgautofailover.current_state('{FORMATION_NAME}')"
            ),
        )?;
        // pg_basebackup of the second node waits for a spread checkpoint
        // (about 7 s on a fresh node); one now lets it start at once.
        formation.sql(port1, "postgres", &["CHECKPOINT"])?;
        formation.start_node(1)?;
        formation.wait_for(
            "node1 primary and node2 secondary",
            &format!(
                "SELECT string_agg(current_group_state::text || '/' || assigned_group_state::text, \
                 ',' ORDER BY current_group_state::text) = '{READY_STATES}' \
                 FROM pgautofailover.current_state('{FORMATION_NAME}')"
            ),
        )?;
        formation.tune_monitor()?;
        formation.wait_until_ready()?;
        formation.startup = started_at.elapsed();
        Ok(formation)
    }

    /// The options the data nodes were started with.
    pub fn options(&self) -> LocalOptions {
        self.options
    }

    /// How the primary waits for its standby: always
    /// [`Replication::Synchronous`] (pg_auto_failover's
    /// `synchronous_standby_names = 'ANY 1 (...)'`, a quorum of one, with
    /// `synchronous_commit = on`).
    pub fn replication(&self) -> Replication {
        Replication::Synchronous
    }

    /// How long [`AutoFailoverFormation::start`] took, from the folder's
    /// creation to the primary taking writes with a synchronous standby.
    pub fn startup(&self) -> Duration {
        self.startup
    }

    /// `127.0.0.1`, where the monitor and both nodes listen.
    pub fn host(&self) -> &str {
        LOCAL_HOST
    }

    /// The superuser's name (`postgres`) on both nodes and the monitor; it
    /// has no password.
    pub fn superuser(&self) -> &str {
        LOCAL_SUPERUSER
    }

    /// The formation's temporary folder (data of the monitor and the
    /// nodes, sockets, `pg_autoctl` files, logs under `logs/`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The ports of `node1` and `node2`, which never change (a failover
    /// changes which of them is the primary).
    pub fn node_ports(&self) -> [u16; 2] {
        self.node_ports
    }

    /// The monitor's port.
    pub fn monitor_port(&self) -> u16 {
        self.monitor_port
    }

    /// Superuser URL of the monitor's database (`pg_auto_failover`).
    pub fn monitor_url(&self) -> String {
        self.database_url(self.monitor_port, MONITOR_DATABASE)
    }

    /// Superuser URL of database `database` on the server at `port`.
    pub fn database_url(&self, port: u16, database: &str) -> String {
        format!("postgres://{LOCAL_SUPERUSER}@{LOCAL_HOST}:{port}/{database}")
    }

    /// The port of the node the monitor names primary now
    /// (`pgautofailover.get_primary`).
    ///
    /// # Errors
    ///
    /// [`ProvisionError::Database`] when the monitor names none (during a
    /// failover it has no writable node for a moment) or cannot be reached.
    pub fn primary_port(&self) -> Result<u16, ProvisionError> {
        let answer = self.sql(
            self.monitor_port,
            MONITOR_DATABASE,
            &[&format!(
                "SELECT primary_host, primary_port \
                 FROM pgautofailover.get_primary('{FORMATION_NAME}', {GROUP_ID})"
            )],
        )?;
        let answer = answer.trim();
        answer
            .split_once('|')
            .and_then(|(_, port)| port.parse::<u16>().ok())
            .ok_or_else(|| ProvisionError::Database {
                action: "ask the monitor for the primary".to_owned(),
                message: format!("unexpected answer {answer:?}"),
            })
    }

    /// Superuser URL of database `database` on the primary now.
    ///
    /// # Errors
    ///
    /// As [`AutoFailoverFormation::primary_port`].
    pub fn primary_database_url(&self, database: &str) -> Result<String, ProvisionError> {
        Ok(self.database_url(self.primary_port()?, database))
    }

    /// Superuser URL of the maintenance database on the primary now.
    ///
    /// # Errors
    ///
    /// As [`AutoFailoverFormation::primary_port`].
    pub fn primary_url(&self) -> Result<String, ProvisionError> {
        self.primary_database_url("postgres")
    }

    /// Crashes the node that is the primary now, as a machine crash would:
    /// its `pg_autoctl` services are killed (SIGKILL), then its server is
    /// stopped with `pg_ctl stop -m immediate` (no checkpoint, every session
    /// cut). Returns the crashed node's port. The node stays down; the
    /// monitor notices and promotes the other node
    /// ([`AutoFailoverFormation::wait_for_new_primary`]).
    ///
    /// # Errors
    ///
    /// [`ProvisionError::InvalidSetting`] for a second crash (the first
    /// crashed node is not brought back, so nothing could take over); why
    /// the monitor could not name the primary or the stop failed.
    pub fn crash_primary(&self) -> Result<u16, ProvisionError> {
        let mut crash = self.crash.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(earlier) = *crash {
            return Err(ProvisionError::InvalidSetting {
                variable: "AutoFailoverFormation::crash_primary",
                value: "a second crash".to_owned(),
                reason: format!(
                    "the node on port {} crashed already and is not brought back, so no \
                     node could take over from another crashed primary",
                    earlier.port
                ),
            });
        }
        let port = self.primary_port()?;
        let index = self
            .node_index(port)
            .ok_or_else(|| ProvisionError::Database {
                action: "ask the monitor for the primary".to_owned(),
                message: format!("it names port {port}, which is neither node's"),
            })?;
        let data = self.data_dir(NODE_NAMES[index]);
        let at = Instant::now();
        signal("KILL", &self.service_pids(&data))?;
        self.stop_immediate(&data)?;
        *crash = Some(Crash { port, at });
        Ok(port)
    }

    /// Waits until the node other than `crashed_port` takes writes: the
    /// monitor names it primary, `SELECT NOT pg_is_in_recovery()` is true
    /// on it, and a write on it commits. Returns its port and how long
    /// there was no primary: since [`AutoFailoverFormation::crash_primary`]
    /// crashed `crashed_port`, or since this call if it did not.
    ///
    /// # Errors
    ///
    /// [`ProvisionError::InvalidSetting`] when `crashed_port` is neither
    /// node's; [`ProvisionError::TimedOut`] after `timeout`, with the
    /// monitor's last view of the nodes.
    pub fn wait_for_new_primary(
        &self,
        crashed_port: u16,
        timeout: Duration,
    ) -> Result<(u16, Duration), ProvisionError> {
        let began = match *self.crash.lock().unwrap_or_else(PoisonError::into_inner) {
            Some(crash) if crash.port == crashed_port => crash.at,
            _ => Instant::now(),
        };
        let index =
            self.node_index(crashed_port)
                .ok_or_else(|| ProvisionError::InvalidSetting {
                    variable: "AutoFailoverFormation::wait_for_new_primary",
                    value: crashed_port.to_string(),
                    reason: format!("not a node's port (they are {:?})", self.node_ports),
                })?;
        let other = self.node_ports[1 - index];
        let deadline = Instant::now() + timeout;
        loop {
            let named = matches!(self.primary_port(), Ok(port) if port == other);
            if named
                && self
                    .sql(other, "postgres", &["SELECT NOT pg_is_in_recovery()"])
                    .is_ok_and(|answer| answer.trim() == "t")
                && self.takes_writes(other)
            {
                return Ok((other, began.elapsed()));
            }
            if Instant::now() > deadline {
                return Err(ProvisionError::TimedOut {
                    action: format!(
                        "the node on port {other} taking writes as the new primary after the \
                         crash of port {crashed_port} (monitor: {})",
                        self.monitor_view()
                    ),
                    timeout_s: timeout.as_secs(),
                });
            }
            thread::sleep(Duration::from_millis(FORMATION_POLL_INTERVAL_MS));
        }
    }

    /// Fails over as [`ReplicatedPair::fail_over`](crate::ReplicatedPair::fail_over)
    /// does, but the way an operator's formation does it: crashes the
    /// primary ([`AutoFailoverFormation::crash_primary`]) and waits, at
    /// most [`FORMATION_FAILOVER_TIMEOUT_S`], for the monitor to promote the
    /// other node ([`AutoFailoverFormation::wait_for_new_primary`]).
    /// Returns how long no primary took writes.
    ///
    /// # Errors
    ///
    /// As the two calls.
    pub fn fail_over(&self) -> Result<Duration, ProvisionError> {
        let crashed = self.crash_primary()?;
        self.wait_for_new_primary(crashed, Duration::from_secs(FORMATION_FAILOVER_TIMEOUT_S))
            .map(|(_, without_primary)| without_primary)
    }

    /// The primary's replication settings and its connected standbys, one
    /// `name=value` line each as
    /// [`ReplicatedPair::replication_report`](crate::ReplicatedPair::replication_report)
    /// gives them, then the monitor's view, one `node=` line a node.
    ///
    /// # Errors
    ///
    /// Why the monitor or the primary could not be queried.
    pub fn replication_report(&self) -> Result<String, ProvisionError> {
        let primary = self.primary_port()?;
        let mut report = self.sql(primary, "postgres", &[REPLICATION_REPORT_SQL])?;
        report.push_str(&self.sql(
            self.monitor_port,
            MONITOR_DATABASE,
            &[&format!(
                "SELECT 'node=' || nodename || ' port=' || nodeport \
                   || ' reported=' || current_group_state || ' assigned=' || assigned_group_state \
                 FROM pgautofailover.current_state('{FORMATION_NAME}') ORDER BY nodename"
            )],
        )?);
        Ok(report)
    }

    /// Which node listens on `port`.
    fn node_index(&self, port: u16) -> Option<usize> {
        self.node_ports.iter().position(|&node| node == port)
    }
}

impl Drop for AutoFailoverFormation {
    /// Stops every service and server of the formation and deletes its
    /// folder; never panics. What could not be cleaned is reported on
    /// stderr (the supervisor, finished last, tries again).
    fn drop(&mut self) {
        let problems = self.teardown();
        if !problems.is_empty() {
            eprintln!(
                "connreg-pgtest: the pg_auto_failover formation in {} was not fully removed: {}",
                self.dir.display(),
                problems.join("; ")
            );
        }
    }
}

/// `pg_autoctl`: [`PG_AUTOCTL_PATH`], else the first on `PATH`.
fn find_pg_autoctl() -> Option<PathBuf> {
    let installed = PathBuf::from(PG_AUTOCTL_PATH);
    if installed.is_file() {
        return Some(installed);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("pg_autoctl"))
        .find(|candidate| candidate.is_file())
}
