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

use std::ffi::OsString;
use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{self, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use crate::cluster::{self, LocalOptions};
use crate::command::{self, RunError};
use crate::error::ProvisionError;
use crate::limits::{
    FORMATION_COMMAND_TIMEOUT_S, FORMATION_CONNECT_TIMEOUT_S, FORMATION_CREATE_TIMEOUT_S,
    FORMATION_FAILOVER_TIMEOUT_S, FORMATION_HEALTH_CHECK_PERIOD_MS,
    FORMATION_HEALTH_CHECK_RETRIES_MAX, FORMATION_HEALTH_CHECK_RETRY_DELAY_MS,
    FORMATION_HEALTH_CHECK_TIMEOUT_MS, FORMATION_NODE_UNHEALTHY_TIMEOUT_MS,
    FORMATION_POLL_INTERVAL_MS, FORMATION_PRIMARY_DEMOTE_TIMEOUT_MS, FORMATION_START_TIMEOUT_S,
    FORMATION_STARTUP_GRACE_PERIOD_MS, FORMATION_STOP_TIMEOUT_S, FORMATION_WRITE_PROBE_TIMEOUT_MS,
    LOCAL_INITDB_TIMEOUT_S, LOCAL_PORT_ATTEMPTS_MAX, LOCAL_STOP_TIMEOUT_S, PROBE_TIMEOUT_S,
};
use crate::local::{LOCAL_HOST, LOCAL_SUPERUSER};
use crate::pair::Replication;
use crate::source::ServerSource;
use crate::{bindir, unique};

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
    backstop: Option<Backstop>,
}

/// Who runs initdb, `pg_autoctl` and the servers: the current user, or the
/// `postgres` user when running as root (initdb and postgres refuse root).
#[derive(Debug, Clone, Copy)]
struct Owner {
    uid: u32,
    gid: u32,
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
        let bindir = bindir::bindir().ok_or_else(|| ProvisionError::SourceUnavailable {
            requested: ServerSource::Local,
            reason: cluster::NO_BINARIES.to_owned(),
        })?;
        cluster::check(options)?;
        let owner = owner_when_root()?;
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
        let dir = make_private_dir(owner)?;
        // Armed before anything runs in the folder: even a start
        // interrupted by the end of the process leaves nothing behind.
        let backstop = match Backstop::arm(&dir) {
            Ok(backstop) => backstop,
            Err(error) => {
                // Ignored: the folder is empty, and the error below is what
                // the caller needs to know.
                let _ = fs::remove_dir_all(&dir);
                return Err(failed(format!(
                    "could not start the cleanup supervisor (sh): {error}"
                )));
            }
        };
        let [monitor_port, port1, port2] = free_ports()?;
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
            backstop: Some(backstop),
        };
        for folder in ["sock", "logs", "xdg", "xdg/config", "xdg/data", "xdg/run"] {
            make_dir(&formation.dir.join(folder), owner)?;
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

    /// initdb of the monitor's folder, `pg_autoctl create monitor`, then
    /// `pg_autoctl run` as a service; waits until the monitor's database
    /// accepts connections.
    fn start_monitor(&self) -> Result<(), ProvisionError> {
        let data = self.data_dir(MONITOR_NAME);
        self.initdb(&data, "")?;
        let mut create = self.command(&self.pg_autoctl);
        create
            .args(["create", "monitor", "--pgctl"])
            .arg(self.bindir.join("pg_ctl"))
            .arg("--pgdata")
            .arg(&data)
            .arg(format!("--pgport={}", self.monitor_port))
            .args(["--hostname", LOCAL_HOST, "--auth", "trust", "--no-ssl"]);
        let finished = run(
            &mut create,
            "pg_autoctl create monitor",
            Duration::from_secs(FORMATION_CREATE_TIMEOUT_S),
        )?;
        if !finished.status.success() {
            return Err(failed(format!(
                "pg_autoctl create monitor exited with {} (the monitor needs the pgautofailover \
                 extension of the server's major version: Debian package \
                 postgresql-<major>-auto-failover, here {PG_AUTO_FAILOVER_PACKAGES}): {}",
                finished.status,
                finished.output_tail()
            )));
        }
        let mut run = vec![OsString::from("run"), OsString::from("--pgdata")];
        run.push(data.into_os_string());
        self.spawn_service(MONITOR_NAME, &run)?;
        self.wait_for("the monitor accepting connections", "SELECT true")
    }

    /// initdb of node `index`'s folder (the first node only: the second is
    /// a base backup of it, configuration included), then `pg_autoctl
    /// create postgres --run` as a service.
    fn start_node(&self, index: usize) -> Result<(), ProvisionError> {
        let name = NODE_NAMES[index];
        let data = self.data_dir(name);
        if index == 0 {
            let settings = format!(
                "max_connections = {connections_max}\nfsync = {fsync}\n",
                connections_max = self.options.connections_max,
                fsync = if self.options.fsync { "on" } else { "off" },
            );
            self.initdb(&data, &settings)?;
        }
        let monitor_uri = format!(
            "postgres://{MONITOR_ROLE}@{LOCAL_HOST}:{}/{MONITOR_DATABASE}?sslmode=disable",
            self.monitor_port
        );
        let mut create: Vec<OsString> = ["create", "postgres", "--pgctl"]
            .iter()
            .map(OsString::from)
            .collect();
        create.push(self.bindir.join("pg_ctl").into_os_string());
        create.push("--pgdata".into());
        create.push(data.into_os_string());
        for arg in [
            format!("--pgport={}", self.node_ports[index]),
            format!("--name={name}"),
            format!("--hostname={LOCAL_HOST}"),
            format!("--listen={LOCAL_HOST}"),
            format!("--monitor={monitor_uri}"),
            "--auth=trust".to_owned(),
            "--no-ssl".to_owned(),
            "--run".to_owned(),
        ] {
            create.push(arg.into());
        }
        self.spawn_service(name, &create)
    }

    /// Sets the monitor's health checks and timeouts to the `FORMATION_*`
    /// limits, for a failover in about 5 s.
    fn tune_monitor(&self) -> Result<(), ProvisionError> {
        let settings = [
            (
                "health_check_period",
                FORMATION_HEALTH_CHECK_PERIOD_MS.to_string(),
            ),
            (
                "health_check_timeout",
                FORMATION_HEALTH_CHECK_TIMEOUT_MS.to_string(),
            ),
            (
                "health_check_max_retries",
                FORMATION_HEALTH_CHECK_RETRIES_MAX.to_string(),
            ),
            (
                "health_check_retry_delay",
                FORMATION_HEALTH_CHECK_RETRY_DELAY_MS.to_string(),
            ),
            (
                "node_considered_unhealthy_timeout",
                FORMATION_NODE_UNHEALTHY_TIMEOUT_MS.to_string(),
            ),
            (
                "primary_demote_timeout",
                FORMATION_PRIMARY_DEMOTE_TIMEOUT_MS.to_string(),
            ),
            (
                "startup_grace_period",
                FORMATION_STARTUP_GRACE_PERIOD_MS.to_string(),
            ),
        ];
        // One statement a --command: ALTER SYSTEM refuses a transaction
        // block, which several statements in one query string would be.
        let mut statements: Vec<String> = settings
            .iter()
            .map(|(name, value)| format!("ALTER SYSTEM SET pgautofailover.{name} = {value}"))
            .collect();
        statements.push("SELECT pg_reload_conf()".to_owned());
        let statements: Vec<&str> = statements.iter().map(String::as_str).collect();
        self.sql(self.monitor_port, MONITOR_DATABASE, &statements)
            .map(|_| ())
    }

    /// Waits until the primary the monitor names takes writes and sees the
    /// other node streaming as a synchronous standby.
    fn wait_until_ready(&self) -> Result<(), ProvisionError> {
        let deadline = Instant::now() + Duration::from_secs(FORMATION_START_TIMEOUT_S);
        loop {
            self.check_services()?;
            let last = match self.primary_port().and_then(|port| {
                let synchronous = self.sql(
                    port,
                    "postgres",
                    &["SELECT count(*) FROM pg_stat_replication \
                       WHERE state = 'streaming' AND sync_state IN ('sync', 'quorum')"],
                )?;
                Ok(synchronous.trim() == "1" && self.takes_writes(port))
            }) {
                Ok(true) => return Ok(()),
                Ok(false) => "no synchronous standby streaming yet".to_owned(),
                Err(error) => error.to_string(),
            };
            if Instant::now() > deadline {
                return Err(ProvisionError::TimedOut {
                    action: format!(
                        "the formation's primary taking writes with a synchronous standby \
                         (last: {last}; monitor: {})",
                        self.monitor_view()
                    ),
                    timeout_s: FORMATION_START_TIMEOUT_S,
                });
            }
            thread::sleep(Duration::from_millis(FORMATION_POLL_INTERVAL_MS));
        }
    }

    /// Polls the monitor with `check` (a query answering `t` when done)
    /// until it says so, failing early if a service exited.
    fn wait_for(&self, action: &str, check: &str) -> Result<(), ProvisionError> {
        let deadline = Instant::now() + Duration::from_secs(FORMATION_START_TIMEOUT_S);
        loop {
            self.check_services()?;
            let last = match self.sql(self.monitor_port, MONITOR_DATABASE, &[check]) {
                Ok(answer) if answer.trim() == "t" => return Ok(()),
                Ok(answer) => format!("{:?}", answer.trim()),
                Err(error) => error.to_string(),
            };
            if Instant::now() > deadline {
                return Err(ProvisionError::TimedOut {
                    action: format!("{action} (last: {last}; monitor: {})", self.monitor_view()),
                    timeout_s: FORMATION_START_TIMEOUT_S,
                });
            }
            thread::sleep(Duration::from_millis(FORMATION_POLL_INTERVAL_MS));
        }
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

    /// Whether a write on the server at `port` commits within
    /// [`FORMATION_WRITE_PROBE_TIMEOUT_MS`].
    fn takes_writes(&self, port: u16) -> bool {
        self.sql_within(
            port,
            "postgres",
            &[WRITE_PROBE_SQL],
            Duration::from_millis(FORMATION_WRITE_PROBE_TIMEOUT_MS),
        )
        .is_ok_and(|answer| answer.trim() == "t")
    }

    /// The monitor's nodes and their states, for an error message.
    fn monitor_view(&self) -> String {
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

    /// Fails when a `pg_autoctl` service this process started has exited,
    /// with the tail of its log.
    fn check_services(&self) -> Result<(), ProvisionError> {
        let mut services = self.services.lock().unwrap_or_else(PoisonError::into_inner);
        for (name, child) in services.iter_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(failed(format!(
                    "pg_autoctl of {name} exited with {status}: {}",
                    command::tail(&read_text(&self.log_path(name)))
                )));
            }
        }
        Ok(())
    }

    /// A command run as the owner in the formation's folder, with the
    /// environment that keeps `pg_autoctl`'s files and the sockets in it.
    fn command(&self, program: &Path) -> Command {
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
            .env("XDG_RUNTIME_DIR", self.dir.join("xdg/run"))
            .current_dir(&self.dir);
        if let Some(owner) = self.owner {
            // Setting the uid as root also drops root's supplementary groups.
            command.uid(owner.uid).gid(owner.gid);
        }
        command
    }

    /// Runs `statements` (one `--command` each) on database `database` of
    /// the server at `port` with `psql`, within [`FORMATION_COMMAND_TIMEOUT_S`];
    /// returns the unaligned output.
    fn sql(
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
    fn initdb(&self, data: &Path, settings: &str) -> Result<(), ProvisionError> {
        let mut initdb = self.command(&self.bindir.join("initdb"));
        initdb
            .arg("--pgdata")
            .arg(data)
            .args(["--username", LOCAL_SUPERUSER, "--auth", "trust"])
            .args(["--encoding", "UTF8", "--locale", "C"])
            // Durability of a throwaway cluster's initial files is worthless.
            .arg("--no-sync");
        let finished = run(
            &mut initdb,
            "initdb",
            Duration::from_secs(LOCAL_INITDB_TIMEOUT_S),
        )?;
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
        append(
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

    /// Starts `pg_autoctl args` as a long-running service of `name`, in its
    /// own process group, output appended to `logs/<name>.log`.
    fn spawn_service(&self, name: &'static str, args: &[OsString]) -> Result<(), ProvisionError> {
        let log = self.log_path(name);
        let open_log = || {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .map_err(|error| failed(format!("could not open {}: {error}", log.display())))
        };
        let mut service = self.command(&self.pg_autoctl);
        service
            .args(args)
            .stdin(Stdio::null())
            .stdout(open_log()?)
            .stderr(open_log()?)
            // Ctrl-C on a test run reaches the test, not the formation,
            // which its teardown or its supervisor stops.
            .process_group(0);
        let child = service.spawn().map_err(|error| {
            failed(format!(
                "could not run {} for {name}: {error}",
                self.pg_autoctl.display()
            ))
        })?;
        self.services
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((name, child));
        Ok(())
    }

    /// `pg_ctl stop -m immediate` of `data`, as a crash would stop it.
    fn stop_immediate(&self, data: &Path) -> Result<(), ProvisionError> {
        let mut pg_ctl = self.command(&self.bindir.join("pg_ctl"));
        pg_ctl
            .arg("stop")
            .arg("--pgdata")
            .arg(data)
            .args(["--mode", "immediate", "--wait", "--silent"])
            .arg(format!("--timeout={LOCAL_STOP_TIMEOUT_S}"));
        // pg_ctl enforces the stop timeout; this bound only guards pg_ctl.
        let finished = run(
            &mut pg_ctl,
            "pg_ctl stop -m immediate",
            Duration::from_secs(LOCAL_STOP_TIMEOUT_S * 2),
        )?;
        if finished.status.success() || postmaster_pid(data).is_none() {
            return Ok(());
        }
        Err(failed(format!(
            "pg_ctl stop -m immediate of {} exited with {}: {}",
            data.display(),
            finished.status,
            finished.output_tail()
        )))
    }

    /// The data folder of the monitor or a node.
    fn data_dir(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The log of the `pg_autoctl` service of the monitor or a node.
    fn log_path(&self, name: &str) -> PathBuf {
        self.dir.join("logs").join(format!("{name}.log"))
    }

    /// Where `pg_autoctl` keeps the pid files of `data`'s services:
    /// `$XDG_RUNTIME_DIR/pg_autoctl` followed by `data`'s absolute path.
    fn runtime_dir(&self, data: &Path) -> PathBuf {
        let mut dir = self.dir.join("xdg/run/pg_autoctl").into_os_string();
        dir.push(data.as_os_str());
        PathBuf::from(dir)
    }

    /// The running `pg_autoctl` processes of `data`: its supervisor and
    /// each of its services (the first line of each `pg_autoctl*.pid`).
    fn service_pids(&self, data: &Path) -> Vec<u32> {
        let Ok(entries) = fs::read_dir(self.runtime_dir(data)) else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .filter(|entry| {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                name.starts_with("pg_autoctl") && name.ends_with(".pid")
            })
            .filter_map(|entry| first_line_pid(&entry.path()))
            .filter(|&pid| running(pid, "pg_autoctl"))
            .collect()
    }

    /// Whether anything of `data` still runs: a `pg_autoctl` process or
    /// its postmaster.
    fn alive(&self, data: &Path) -> bool {
        !self.service_pids(data).is_empty() || postmaster_pid(data).is_some()
    }

    /// Stops the services of `names` (`pg_autoctl stop`, which only
    /// signals; a server left without its service at once, with `pg_ctl
    /// stop -m immediate`), waits for them and their servers to exit, and
    /// kills what is left after [`FORMATION_STOP_TIMEOUT_S`]. Returns what
    /// could not be stopped.
    fn stop_services(&self, names: &[&str]) -> Vec<String> {
        let data: Vec<PathBuf> = names.iter().map(|name| self.data_dir(name)).collect();
        for folder in &data {
            if self.service_pids(folder).is_empty() {
                // A server without its pg_autoctl (a start that failed
                // half-way) has nobody else to stop it. A failed stop is
                // made up for by force below.
                if postmaster_pid(folder).is_some() {
                    let _ = self.stop_immediate(folder);
                }
                continue;
            }
            let mut stop = self.command(&self.pg_autoctl);
            stop.arg("stop").arg("--pgdata").arg(folder);
            // A failed stop is made up for by force below.
            let _ = command::run(&mut stop, Duration::from_secs(FORMATION_COMMAND_TIMEOUT_S));
        }
        let all_gone = |bound_s: u64| {
            let deadline = Instant::now() + Duration::from_secs(bound_s);
            loop {
                self.reap();
                if !data.iter().any(|folder| self.alive(folder)) {
                    return true;
                }
                if Instant::now() > deadline {
                    return false;
                }
                thread::sleep(Duration::from_millis(FORMATION_POLL_INTERVAL_MS));
            }
        };
        if all_gone(FORMATION_STOP_TIMEOUT_S) {
            return Vec::new();
        }
        let mut problems = Vec::new();
        for folder in &data {
            if let Err(error) = signal("KILL", &self.service_pids(folder)) {
                problems.push(error.to_string());
            }
            if postmaster_pid(folder).is_some()
                && let Err(error) = self.stop_immediate(folder)
            {
                problems.push(error.to_string());
                if let Some(pid) = postmaster_pid(folder)
                    && let Err(error) = signal("KILL", &[pid])
                {
                    problems.push(error.to_string());
                }
            }
        }
        if !all_gone(LOCAL_STOP_TIMEOUT_S) {
            problems.push(format!(
                "processes of {} still run after being killed",
                names.join(", ")
            ));
        }
        problems
    }

    /// Collects the exit status of every service that has exited, so that
    /// none lingers as a zombie.
    fn reap(&self) {
        let mut services = self.services.lock().unwrap_or_else(PoisonError::into_inner);
        for (_, child) in services.iter_mut() {
            // An error means it was collected already.
            let _ = child.try_wait();
        }
    }

    /// Stops the data nodes, then the monitor, then deletes the folder.
    /// Returns what went wrong.
    fn teardown(&mut self) -> Vec<String> {
        let mut problems = self.stop_services(&NODE_NAMES);
        problems.extend(self.stop_services(&[MONITOR_NAME]));
        let services = std::mem::take(
            self.services
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for (_, mut child) in services {
            if let Ok(None) = child.try_wait() {
                // Still running after everything was stopped: by force.
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if let Err(error) = fs::remove_dir_all(&self.dir)
            && error.kind() != io::ErrorKind::NotFound
        {
            problems.push(format!("could not delete {}: {error}", self.dir.display()));
        }
        if let Some(backstop) = self.backstop.take() {
            backstop.disarm();
        }
        problems
    }
}

impl Drop for AutoFailoverFormation {
    /// Stops every service and server of the formation and deletes its
    /// folder; never panics. What could not be cleaned is reported on
    /// stderr (the supervisor tries again when the process exits).
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

/// A `sh` supervisor that kills a formation's services and deletes its
/// folder once this process exits without dropping the formation (the
/// crate's [`supervisor`](crate::supervisor) for a formation; kept here so
/// that a drop can wait for it to finish).
#[derive(Debug)]
struct Backstop {
    child: Child,
    writer: ChildStdin,
}

impl Backstop {
    /// Starts the supervisor of the formation in `dir`. `$1` of its script
    /// is the folder: every `pg_autoctl` process with a pid file there is
    /// killed (SIGKILL, so none restarts a server), then each postmaster is
    /// sent SIGQUIT (an immediate shutdown) and waited for, then the folder
    /// is deleted.
    fn arm(dir: &Path) -> io::Result<Backstop> {
        let polls_max = LOCAL_STOP_TIMEOUT_S * 10;
        let script = format!(
            r#"trap '' INT HUP QUIT PIPE
while read -r line; do :; done
for pidfile in "$1/xdg/run/pg_autoctl$1"/*/pg_autoctl*.pid; do
  [ -f "$pidfile" ] || continue
  pid=$(head -n 1 "$pidfile")
  if grep -qs pg_autoctl "/proc/$pid/cmdline"; then kill -KILL "$pid" 2>/dev/null; fi
done
for name in {MONITOR_NAME} {node1} {node2}; do
  pidfile="$1/$name/postmaster.pid"
  [ -f "$pidfile" ] || continue
  pid=$(head -n 1 "$pidfile")
  # Never signal a process that merely reused the PID of a crashed server.
  if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = postgres ] && kill -QUIT "$pid" 2>/dev/null; then
    n=0
    while kill -0 "$pid" 2>/dev/null \
      && ! grep -qs '^State:[[:space:]]*Z' "/proc/$pid/status" \
      && [ "$n" -lt {polls_max} ]; do
      sleep 0.1
      n=$((n + 1))
    done
    kill -KILL "$pid" 2>/dev/null
  fi
done
rm -rf "$1"
"#,
            node1 = NODE_NAMES[0],
            node2 = NODE_NAMES[1],
        );
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg("connreg-pgtest-formation-cleanup")
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .current_dir("/")
            .process_group(0)
            .spawn()?;
        let writer = child
            .stdin
            .take()
            .ok_or_else(|| io::Error::other("the supervisor's stdin was not piped"))?;
        Ok(Backstop { child, writer })
    }

    /// Lets the supervisor run its script (which finds nothing left after a
    /// teardown) and waits, at most [`LOCAL_STOP_TIMEOUT_S`], for it to
    /// exit; past that it is killed.
    fn disarm(self) {
        let Backstop { mut child, writer } = self;
        drop(writer);
        let deadline = Instant::now() + Duration::from_secs(LOCAL_STOP_TIMEOUT_S);
        loop {
            match child.try_wait() {
                Ok(Some(_)) | Err(_) => return,
                Ok(None) if Instant::now() > deadline => {
                    // Ignored: it may have exited just now.
                    let _ = child.kill();
                    let _ = child.wait();
                    return;
                }
                Ok(None) => thread::sleep(Duration::from_millis(FORMATION_POLL_INTERVAL_MS)),
            }
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

fn owner_when_root() -> Result<Option<Owner>, ProvisionError> {
    let uid = command::probe(Command::new("id").arg("-u"))
        .ok_or_else(|| failed("could not learn the current user id (`id -u` failed)".to_owned()))?;
    if uid != "0" {
        return Ok(None);
    }
    let id_of = |flag: &str| {
        command::probe(Command::new("id").args([flag, LOCAL_SUPERUSER]))
            .and_then(|id| id.parse::<u32>().ok())
    };
    match (id_of("-u"), id_of("-g")) {
        (Some(uid), Some(gid)) => Ok(Some(Owner { uid, gid })),
        _ => Err(failed(
            "running as root, where initdb and pg_autoctl refuse to run, and there is no \
             `postgres` user to run them as; create one (`useradd --system postgres`) or run \
             the tests as a non-root user"
                .to_owned(),
        )),
    }
}

/// A new folder only its owner can enter, named after this process.
fn make_private_dir(owner: Option<Owner>) -> Result<PathBuf, ProvisionError> {
    let dir = std::env::temp_dir().join(format!(
        "connreg-pgtest-paf-{}-{}",
        std::process::id(),
        unique::random_suffix()
    ));
    make_dir(&dir, owner)?;
    Ok(dir)
}

/// A new folder only `owner` (or the current user) can enter.
fn make_dir(dir: &Path, owner: Option<Owner>) -> Result<(), ProvisionError> {
    DirBuilder::new()
        .mode(0o700)
        .create(dir)
        .map_err(|error| failed(format!("could not create {}: {error}", dir.display())))?;
    if let Some(owner) = owner {
        std::os::unix::fs::chown(dir, Some(owner.uid), Some(owner.gid)).map_err(|error| {
            failed(format!(
                "could not give {} to the postgres user: {error}",
                dir.display()
            ))
        })?;
    }
    Ok(())
}

/// Three different ports the kernel just handed out on loopback, free at
/// the time of asking (all held at once, so they differ).
fn free_ports() -> Result<[u16; 3], ProvisionError> {
    let bind = || {
        TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|error| {
            failed(format!(
                "could not find a free port on {LOCAL_HOST}: {error}"
            ))
        })
    };
    let listeners = [bind()?, bind()?, bind()?];
    let mut ports = [0; 3];
    for (port, listener) in ports.iter_mut().zip(&listeners) {
        *port = listener
            .local_addr()
            .map_err(|error| failed(format!("could not read a bound port: {error}")))?
            .port();
    }
    Ok(ports)
}

/// Appends `text` to `file`, which keeps its owner.
fn append(file: &Path, text: &str) -> Result<(), ProvisionError> {
    OpenOptions::new()
        .append(true)
        .open(file)
        .and_then(|mut opened| opened.write_all(text.as_bytes()))
        .map_err(|error| failed(format!("could not write {}: {error}", file.display())))
}

/// Runs a helper program, killed after `bound`.
fn run(
    program: &mut Command,
    action: &str,
    bound: Duration,
) -> Result<command::Finished, ProvisionError> {
    command::run(program, bound).map_err(|error| match error {
        RunError::TimedOut => ProvisionError::TimedOut {
            action: action.to_owned(),
            timeout_s: bound.as_secs(),
        },
        RunError::Spawn(_) => failed(format!("{action}: {error}")),
    })
}

/// Sends `signal` (a name such as `KILL`) to `pids` with `sh`'s `kill`.
fn signal(signal: &str, pids: &[u32]) -> Result<(), ProvisionError> {
    if pids.is_empty() {
        return Ok(());
    }
    let mut kill = Command::new("sh");
    kill.args(["-c", "kill -s \"$0\" \"$@\"", signal])
        .args(pids.iter().map(u32::to_string));
    let finished = run(&mut kill, "kill", Duration::from_secs(PROBE_TIMEOUT_S))?;
    // A process that exited meanwhile makes kill fail; that is the goal.
    if finished.status.success() || pids.iter().all(|&pid| !running(pid, "")) {
        return Ok(());
    }
    Err(failed(format!(
        "kill -s {signal} {pids:?} exited with {}: {}",
        finished.status,
        finished.output_tail()
    )))
}

/// The pid on the first line of `file`.
fn first_line_pid(file: &Path) -> Option<u32> {
    fs::read_to_string(file)
        .ok()?
        .lines()
        .next()?
        .trim()
        .parse()
        .ok()
}

/// The pid of `data`'s running postmaster.
fn postmaster_pid(data: &Path) -> Option<u32> {
    first_line_pid(&data.join("postmaster.pid")).filter(|&pid| running(pid, "postgres"))
}

/// Whether process `pid` runs (exists and is no zombie) with `name` in its
/// command line (guarding against a pid reused by another program).
fn running(pid: u32, name: &str) -> bool {
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let Ok(status) = fs::read_to_string(proc_dir.join("status")) else {
        return false;
    };
    let zombie = status.lines().any(|line| {
        line.strip_prefix("State:")
            .is_some_and(|state| state.trim_start().starts_with('Z'))
    });
    if zombie {
        return false;
    }
    let command_line = fs::read(proc_dir.join("cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&command_line).contains(name)
}

/// The text of `path`, empty when it cannot be read (it only shortens an
/// error message).
fn read_text(path: &Path) -> String {
    fs::read(path)
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default()
}

fn failed(detail: String) -> ProvisionError {
    ProvisionError::StartFailed {
        source_kind: ServerSource::Local,
        detail,
    }
}
