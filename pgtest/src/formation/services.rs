//! The monitor's and the nodes' `pg_autoctl` services: starting them and
//! waiting until the formation is ready, crashing a node, and stopping
//! everything in the teardown.

use std::ffi::OsString;
use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::PoisonError;
use std::thread;
use std::time::{Duration, Instant};

use super::{
    AutoFailoverFormation, MONITOR_DATABASE, MONITOR_NAME, MONITOR_ROLE, NODE_NAMES,
    PG_AUTO_FAILOVER_PACKAGES,
};
use crate::command;
use crate::error::ProvisionError;
use crate::limits::{
    FORMATION_COMMAND_TIMEOUT_S, FORMATION_CREATE_TIMEOUT_S, FORMATION_HEALTH_CHECK_PERIOD_MS,
    FORMATION_HEALTH_CHECK_RETRIES_MAX, FORMATION_HEALTH_CHECK_RETRY_DELAY_MS,
    FORMATION_HEALTH_CHECK_TIMEOUT_MS, FORMATION_NODE_UNHEALTHY_TIMEOUT_MS,
    FORMATION_POLL_INTERVAL_MS, FORMATION_PRIMARY_DEMOTE_TIMEOUT_MS, FORMATION_START_TIMEOUT_S,
    FORMATION_STARTUP_GRACE_PERIOD_MS, FORMATION_STOP_TIMEOUT_S, LOCAL_STOP_TIMEOUT_S,
    PROBE_TIMEOUT_S,
};
use crate::local::{self, LOCAL_HOST, failed};

impl AutoFailoverFormation {
    /// initdb of the monitor's folder, `pg_autoctl create monitor`, then
    /// `pg_autoctl run` as a service; waits until the monitor's database
    /// accepts connections.
    pub(super) fn start_monitor(&self) -> Result<(), ProvisionError> {
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
        let finished = local::run(
            &mut create,
            "pg_autoctl create monitor",
            FORMATION_CREATE_TIMEOUT_S,
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
    pub(super) fn start_node(&self, index: usize) -> Result<(), ProvisionError> {
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
    pub(super) fn tune_monitor(&self) -> Result<(), ProvisionError> {
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
    pub(super) fn wait_until_ready(&self) -> Result<(), ProvisionError> {
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
    pub(super) fn wait_for(&self, action: &str, check: &str) -> Result<(), ProvisionError> {
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
    pub(super) fn stop_immediate(&self, data: &Path) -> Result<(), ProvisionError> {
        let finished = local::stop_immediate(
            self.command(&self.bindir.join("pg_ctl")),
            data,
            "pg_ctl stop -m immediate",
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
    pub(super) fn data_dir(&self, name: &str) -> PathBuf {
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
    pub(super) fn service_pids(&self, data: &Path) -> Vec<u32> {
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
    pub(super) fn teardown(&mut self) -> Vec<String> {
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
        if let Some(cleanup) = self.cleanup.take() {
            // Its script finds nothing left; waiting for it leaves no
            // process naming the folder once the drop returns.
            cleanup.finish(Duration::from_secs(LOCAL_STOP_TIMEOUT_S));
        }
        problems
    }
}

/// Sends `signal` (a name such as `KILL`) to `pids` with `sh`'s `kill`.
pub(super) fn signal(signal: &str, pids: &[u32]) -> Result<(), ProvisionError> {
    if pids.is_empty() {
        return Ok(());
    }
    let mut kill = Command::new("sh");
    kill.args(["-c", "kill -s \"$0\" \"$@\"", signal])
        .args(pids.iter().map(u32::to_string));
    let finished = local::run(&mut kill, "kill", PROBE_TIMEOUT_S)?;
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
