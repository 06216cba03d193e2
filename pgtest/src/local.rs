//! The throwaway local clusters: initdb into a temporary folder, start on a
//! free loopback port, restart in place, removed by a supervisor when the
//! process exits or the cluster's handle drops.
//!
//! Both the process's shared server and every
//! [`LocalCluster`](crate::LocalCluster) are made and restarted by these
//! functions; they differ only in their [`Settings`].

use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::command::{self, RunError};
use crate::error::ProvisionError;
use crate::limits::{
    LOCAL_INITDB_TIMEOUT_S, LOCAL_PORT_ATTEMPTS_MAX, LOCAL_START_TIMEOUT_S, LOCAL_STOP_TIMEOUT_S,
};
use crate::source::ServerSource;
use crate::supervisor::{self, CleanupGuard};
use crate::unique;

/// The address the cluster listens on; nothing else can reach it.
pub(crate) const LOCAL_HOST: &str = "127.0.0.1";

/// The superuser initdb creates.
pub(crate) const LOCAL_SUPERUSER: &str = "postgres";

/// How a cluster is configured beyond what every one of them shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Settings {
    /// `fsync` of the server: off for test clusters, on where crash
    /// durability is what is being tested.
    pub(crate) fsync: bool,
    /// `max_connections` of the server.
    pub(crate) connections_max: u32,
}

/// A running local cluster. Stopped (immediately) and removed by its
/// supervisor when the process exits or the value drops; in between it can
/// be restarted in place.
#[derive(Debug)]
pub(crate) struct Cluster {
    pub(crate) dir: PathBuf,
    pub(crate) port: u16,
    pub(crate) log_file: PathBuf,
    pub(crate) startup: Duration,
    pub(crate) bindir: PathBuf,
    data: PathBuf,
    owner: Option<Owner>,
    /// Held by a restart, so two restarts never interleave their stop and
    /// start.
    restarting: Mutex<()>,
    _cleanup: CleanupGuard,
}

/// Who runs initdb and the server: the current user, or the `postgres` user
/// when running as root (initdb and postgres refuse to run as root).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Owner {
    uid: u32,
    gid: u32,
}

/// Creates, configures and starts a cluster from the binaries in `bindir`.
pub(crate) fn start(bindir: &Path, settings: Settings) -> Result<Cluster, ProvisionError> {
    let started_at = Instant::now();
    let owner =
        owner_when_root("initdb refuses to run, and there is no `postgres` user to run it as")?;
    let (dir, data, log_file, cleanup) = cluster_dir(owner)?;

    initdb(bindir, &data, owner)?;
    configure(&data, &dir, settings)?;
    let port = start_on_free_port(bindir, &data, &log_file, owner)?;
    Ok(Cluster {
        dir,
        port,
        log_file,
        startup: started_at.elapsed(),
        bindir: bindir.to_owned(),
        data,
        owner,
        restarting: Mutex::new(()),
        _cleanup: cleanup,
    })
}

/// Creates and starts a streaming standby of `primary`: a base backup of
/// it into a fresh folder, `standby.signal`, and a `primary_conninfo`
/// that names the standby `application_name` (what
/// `synchronous_standby_names` lists). Waits until the primary sees it
/// streaming.
pub(crate) fn start_standby(
    primary: &Cluster,
    application_name: &str,
) -> Result<Cluster, ProvisionError> {
    let started_at = Instant::now();
    let owner = primary.owner;
    let (dir, data, log_file, cleanup) = cluster_dir(owner)?;
    let mut backup = as_owner(
        Command::new(primary.bindir.join("pg_basebackup")),
        owner,
        &data,
    );
    backup
        .arg("--pgdata")
        .arg(&data)
        .args(["--host", LOCAL_HOST])
        .arg(format!("--port={}", primary.port))
        .args(["--username", LOCAL_SUPERUSER])
        .args(["--wal-method=stream", "--checkpoint=fast", "--no-sync"]);
    let finished = run(&mut backup, "pg_basebackup", LOCAL_INITDB_TIMEOUT_S)?;
    if !finished.status.success() {
        return Err(failed(format!(
            "pg_basebackup exited with {}: {}",
            finished.status,
            finished.output_tail()
        )));
    }
    // The copied configuration names the primary's socket folder; the
    // standby's own comes after it, and so wins.
    let settings = format!(
        "\n# connreg-pgtest: a streaming standby\n\
         unix_socket_directories = '{socket_dir}'\n\
         primary_conninfo = 'host={LOCAL_HOST} port={port} user={LOCAL_SUPERUSER} application_name={application_name}'\n\
         hot_standby = on\n",
        socket_dir = dir.display().to_string().replace('\'', "''"),
        port = primary.port,
    );
    let append = |file: &Path, text: &str| {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)
            .and_then(|mut opened| opened.write_all(text.as_bytes()))
            .map_err(|error| failed(format!("could not write {}: {error}", file.display())))
    };
    append(&data.join("postgresql.conf"), &settings)?;
    append(&data.join("standby.signal"), "")?;
    if let Some(owner) = owner {
        std::os::unix::fs::chown(
            data.join("standby.signal"),
            Some(owner.uid),
            Some(owner.gid),
        )
        .map_err(|error| {
            failed(format!(
                "could not give standby.signal to postgres: {error}"
            ))
        })?;
    }
    let port = start_on_free_port(&primary.bindir, &data, &log_file, owner)?;
    let standby = Cluster {
        dir,
        port,
        log_file,
        startup: started_at.elapsed(),
        bindir: primary.bindir.clone(),
        data,
        owner,
        restarting: Mutex::new(()),
        _cleanup: cleanup,
    };
    let query = format!(
        "SELECT count(*) FROM pg_stat_replication \
         WHERE application_name = '{application_name}' AND state = 'streaming'"
    );
    let deadline = Instant::now() + Duration::from_secs(LOCAL_START_TIMEOUT_S);
    loop {
        if primary.query(&query)?.trim() == "1" {
            return Ok(standby);
        }
        if Instant::now() > deadline {
            return Err(ProvisionError::TimedOut {
                action: format!("standby {application_name} streaming from the primary"),
                timeout_s: LOCAL_START_TIMEOUT_S,
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Cluster {
    /// Runs one SQL statement as the superuser with `psql` and returns its
    /// unaligned output.
    pub(crate) fn query(&self, sql: &str) -> Result<String, ProvisionError> {
        let mut psql = as_owner(
            Command::new(self.bindir.join("psql")),
            self.owner,
            &self.data,
        );
        psql.args(["--no-psqlrc", "--tuples-only", "--no-align", "--quiet"])
            .args(["--host", LOCAL_HOST])
            .arg(format!("--port={}", self.port))
            .args(["--username", LOCAL_SUPERUSER, "--dbname", "postgres"])
            .arg("--command")
            .arg(sql);
        let finished = run(&mut psql, "psql", LOCAL_STOP_TIMEOUT_S)?;
        if finished.status.success() {
            Ok(finished.stdout)
        } else {
            Err(failed(format!(
                "psql {sql:?} exited with {}: {}",
                finished.status,
                finished.output_tail()
            )))
        }
    }

    /// Appends settings to the server's configuration and reloads it.
    pub(crate) fn set_and_reload(&self, settings: &str) -> Result<(), ProvisionError> {
        append(&self.data.join("postgresql.conf"), settings)?;
        self.query("SELECT pg_reload_conf()").map(|_| ())
    }

    /// Stops the server as a crash would, and leaves it stopped.
    pub(crate) fn stop_immediate(&self) -> Result<(), ProvisionError> {
        let _restarting = self
            .restarting
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let finished = self.pg_ctl_stop_immediate()?;
        if finished.status.success() || !self.data.join("postmaster.pid").exists() {
            return Ok(());
        }
        Err(failed(format!(
            "pg_ctl stop -m immediate exited with {}: {}",
            finished.status,
            finished.output_tail()
        )))
    }

    /// Promotes a standby to a primary, waiting until it accepts writes.
    pub(crate) fn promote(&self) -> Result<(), ProvisionError> {
        let mut pg_ctl = as_owner(
            Command::new(self.bindir.join("pg_ctl")),
            self.owner,
            &self.data,
        );
        pg_ctl
            .arg("promote")
            .arg("--pgdata")
            .arg(&self.data)
            .args(["--wait", "--silent"])
            .arg(format!("--timeout={LOCAL_START_TIMEOUT_S}"));
        let finished = run(&mut pg_ctl, "pg_ctl promote", LOCAL_START_TIMEOUT_S * 2)?;
        if finished.status.success() {
            return Ok(());
        }
        Err(failed(format!(
            "pg_ctl promote exited with {}: {}\nserver log: {}",
            finished.status,
            finished.output_tail(),
            command::tail(&read_from(&self.log_file, 0))
        )))
    }

    /// Stops the server as a crash would (`pg_ctl stop -m immediate`: no
    /// checkpoint, every session ended at once), then starts it again on the
    /// same port and data folder and waits until it accepts connections
    /// (after crash recovery). Blocks the calling thread meanwhile.
    pub(crate) fn restart_immediate(&self) -> Result<(), ProvisionError> {
        let _restarting = self
            .restarting
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let log_start = file_len(&self.log_file);
        let finished = self.pg_ctl_stop_immediate()?;
        // A server already down (an earlier restart failed to start it)
        // only needs starting.
        if !finished.status.success() && self.data.join("postmaster.pid").exists() {
            return Err(failed(format!(
                "pg_ctl stop -m immediate exited with {}: {}\nserver log: {}",
                finished.status,
                finished.output_tail(),
                command::tail(&read_from(&self.log_file, log_start))
            )));
        }
        let finished = pg_ctl_start(
            &self.bindir,
            &self.data,
            &self.log_file,
            self.owner,
            self.port,
        )?;
        if finished.status.success() {
            return Ok(());
        }
        Err(failed(format!(
            "pg_ctl start after an immediate stop exited with {}: {}\nserver log: {}",
            finished.status,
            finished.output_tail(),
            command::tail(&read_from(&self.log_file, log_start))
        )))
    }

    /// `pg_ctl stop -m immediate` of the server, as its owner.
    fn pg_ctl_stop_immediate(&self) -> Result<command::Finished, ProvisionError> {
        let pg_ctl = as_owner(
            Command::new(self.bindir.join("pg_ctl")),
            self.owner,
            &self.data,
        );
        stop_immediate(pg_ctl, &self.data, "pg_ctl stop")
    }
}

/// A new private folder for a cluster, with its data folder and log paths,
/// and the supervisor that removes it: armed before anything is put in the
/// folder, so that even a failed or interrupted start leaves nothing
/// behind.
fn cluster_dir(
    owner: Option<Owner>,
) -> Result<(PathBuf, PathBuf, PathBuf, CleanupGuard), ProvisionError> {
    let dir = make_private_dir("connreg-pgtest", owner)?;
    let data = dir.join("data");
    let log_file = dir.join("server.log");
    let cleanup = supervisor::arm(
        &supervisor::local_cluster_script(LOCAL_STOP_TIMEOUT_S),
        &[dir.as_os_str(), data.as_os_str()],
    )
    .map_err(|error| {
        failed(format!(
            "could not start the cleanup supervisor (sh): {error}"
        ))
    })?;
    Ok((dir, data, log_file, cleanup))
}

/// The `postgres` user when running as root, else `None` (the current
/// user). `refusing` completes the error without a `postgres` user: which
/// programs refuse root and that there is nobody to run them as.
pub(crate) fn owner_when_root(refusing: &str) -> Result<Option<Owner>, ProvisionError> {
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
        _ => Err(failed(format!(
            "running as root, where {refusing}; create one (`useradd --system postgres`) or \
             run the tests as a non-root user"
        ))),
    }
}

/// A new folder in the temporary folder only `owner` (or the current user)
/// can enter, named `<prefix>-<this process's id>-<random suffix>`.
pub(crate) fn make_private_dir(
    prefix: &str,
    owner: Option<Owner>,
) -> Result<PathBuf, ProvisionError> {
    let dir = std::env::temp_dir().join(format!(
        "{prefix}-{}-{}",
        std::process::id(),
        unique::random_suffix()
    ));
    make_dir(&dir, owner)?;
    Ok(dir)
}

/// A new folder only `owner` (or the current user) can enter.
pub(crate) fn make_dir(dir: &Path, owner: Option<Owner>) -> Result<(), ProvisionError> {
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

fn initdb(bindir: &Path, data: &Path, owner: Option<Owner>) -> Result<(), ProvisionError> {
    let initdb = as_owner(Command::new(bindir.join("initdb")), owner, data);
    let finished = run_initdb(initdb, data)?;
    if finished.status.success() {
        return Ok(());
    }
    let hint = if owner.is_some() {
        " (running initdb as the postgres user: every folder above the cluster must be \
         reachable by that user; set TMPDIR to a folder such as /tmp if it is not)"
    } else {
        ""
    };
    Err(failed(format!(
        "initdb exited with {}{hint}: {}",
        finished.status,
        finished.output_tail()
    )))
}

/// Runs `initdb` (a command for the program, as its owner) into `data`:
/// superuser `postgres`, trust authentication, UTF8, locale C, no sync.
pub(crate) fn run_initdb(
    mut initdb: Command,
    data: &Path,
) -> Result<command::Finished, ProvisionError> {
    initdb
        .arg("--pgdata")
        .arg(data)
        .args(["--username", LOCAL_SUPERUSER])
        .args(["--auth", "trust"])
        .args(["--encoding", "UTF8", "--locale", "C"])
        // Durability of a throwaway cluster is worthless; this saves seconds.
        .arg("--no-sync");
    run(&mut initdb, "initdb", LOCAL_INITDB_TIMEOUT_S)
}

/// Loopback TCP and a socket in the cluster's own folder, trust for both;
/// the settings' connections and fsync.
fn configure(data: &Path, dir: &Path, settings: Settings) -> Result<(), ProvisionError> {
    let settings = format!(
        "\n# connreg-pgtest: a throwaway test cluster\n\
         listen_addresses = '{LOCAL_HOST}'\n\
         unix_socket_directories = '{socket_dir}'\n\
         max_connections = {connections_max}\n\
         fsync = {fsync}\n",
        socket_dir = dir.display().to_string().replace('\'', "''"),
        connections_max = settings.connections_max,
        fsync = if settings.fsync { "on" } else { "off" },
    );
    // Only the server's own loopback and socket, and replication over the
    // loopback for a standby ([`start_standby`]).
    let hba = "local all all trust\nhost all all 127.0.0.1/32 trust\n\
               host replication all 127.0.0.1/32 trust\n";
    // Existing files are rewritten in place so they keep initdb's owner.
    let write = |file: &str, text: &str, append: bool| {
        let path = data.join(file);
        OpenOptions::new()
            .append(append)
            .write(true)
            .truncate(!append)
            .open(&path)
            .and_then(|mut opened| opened.write_all(text.as_bytes()))
            .map_err(|error| failed(format!("could not write {}: {error}", path.display())))
    };
    write("postgresql.conf", &settings, true)?;
    write("pg_hba.conf", hba, false)
}

fn start_on_free_port(
    bindir: &Path,
    data: &Path,
    log_file: &Path,
    owner: Option<Owner>,
) -> Result<u16, ProvisionError> {
    let mut last_log = String::new();
    for _ in 0..LOCAL_PORT_ATTEMPTS_MAX {
        let [port] = free_ports()?;
        let log_start = file_len(log_file);
        let finished = pg_ctl_start(bindir, data, log_file, owner, port)?;
        if finished.status.success() {
            return Ok(port);
        }
        last_log = read_from(log_file, log_start);
        if !last_log.contains("already in use") {
            return Err(failed(format!(
                "pg_ctl start exited with {}: {}\nserver log: {}",
                finished.status,
                finished.output_tail(),
                command::tail(&last_log)
            )));
        }
    }
    Err(failed(format!(
        "every one of {LOCAL_PORT_ATTEMPTS_MAX} free ports was taken before the server \
         could bind it; last server log: {}",
        command::tail(&last_log)
    )))
}

/// `pg_ctl start` on `port`, waiting until the server accepts connections.
fn pg_ctl_start(
    bindir: &Path,
    data: &Path,
    log_file: &Path,
    owner: Option<Owner>,
    port: u16,
) -> Result<command::Finished, ProvisionError> {
    let mut pg_ctl = as_owner(Command::new(bindir.join("pg_ctl")), owner, data);
    pg_ctl
        .arg("start")
        .arg("--pgdata")
        .arg(data)
        .arg("--log")
        .arg(log_file)
        .arg("--wait")
        .arg(format!("--timeout={LOCAL_START_TIMEOUT_S}"))
        .arg("--silent")
        .arg(format!("--options=-p {port}"));
    // pg_ctl enforces the start timeout; this bound only guards pg_ctl.
    run(&mut pg_ctl, "pg_ctl start", LOCAL_START_TIMEOUT_S * 2)
}

/// `pg_ctl stop -m immediate` of `data` with `pg_ctl` (a command for the
/// program, as its owner), as a crash would stop the server; `action`
/// names it in a timeout.
pub(crate) fn stop_immediate(
    mut pg_ctl: Command,
    data: &Path,
    action: &str,
) -> Result<command::Finished, ProvisionError> {
    pg_ctl
        .arg("stop")
        .arg("--pgdata")
        .arg(data)
        .args(["--mode", "immediate", "--wait", "--silent"])
        .arg(format!("--timeout={LOCAL_STOP_TIMEOUT_S}"));
    // pg_ctl enforces the stop timeout; this bound only guards pg_ctl.
    run(&mut pg_ctl, action, LOCAL_STOP_TIMEOUT_S * 2)
}

/// Runs a helper program (`pg_ctl`, `initdb`, ...), killed after `bound_s`.
pub(crate) fn run(
    program: &mut Command,
    action: &str,
    bound_s: u64,
) -> Result<command::Finished, ProvisionError> {
    command::run(program, Duration::from_secs(bound_s)).map_err(|error| match error {
        RunError::TimedOut => ProvisionError::TimedOut {
            action: action.to_owned(),
            timeout_s: bound_s,
        },
        RunError::Spawn(_) => failed(format!("{action}: {error}")),
    })
}

/// `N` different ports the kernel just handed out on loopback, free at the
/// time of asking (all held at once, so they differ).
pub(crate) fn free_ports<const N: usize>() -> Result<[u16; N], ProvisionError> {
    let mut listeners = Vec::with_capacity(N);
    let mut ports = [0; N];
    for port in &mut ports {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|error| {
            failed(format!(
                "could not find a free port on {LOCAL_HOST}: {error}"
            ))
        })?;
        *port = listener
            .local_addr()
            .map_err(|error| failed(format!("could not read a bound port: {error}")))?
            .port();
        listeners.push(listener);
    }
    Ok(ports)
}

/// A command that runs as `owner` (when root), in the cluster's folder.
fn as_owner(command: Command, owner: Option<Owner>, data: &Path) -> Command {
    // A working directory the owner can enter; root's home would not be.
    run_as(command, owner, data.parent().unwrap_or(data))
}

/// A command that runs as `owner` (when root), in `dir`.
pub(crate) fn run_as(mut command: Command, owner: Option<Owner>, dir: &Path) -> Command {
    if let Some(owner) = owner {
        // Setting the uid as root also drops root's supplementary groups.
        command.uid(owner.uid).gid(owner.gid);
    }
    command.current_dir(dir);
    command
}

/// Appends `text` to `file`, which keeps its owner.
pub(crate) fn append(file: &Path, text: &str) -> Result<(), ProvisionError> {
    OpenOptions::new()
        .append(true)
        .open(file)
        .and_then(|mut opened| opened.write_all(text.as_bytes()))
        .map_err(|error| failed(format!("could not write {}: {error}", file.display())))
}

fn file_len(path: &Path) -> u64 {
    fs::metadata(path).map(|meta| meta.len()).unwrap_or(0)
}

fn read_from(path: &Path, offset: u64) -> String {
    let mut text = String::new();
    if let Ok(mut file) = fs::File::open(path)
        && file.seek(SeekFrom::Start(offset)).is_ok()
    {
        // A read error only shortens an error message.
        let _ = file.read_to_string(&mut text);
    }
    text
}

/// A failed start of a local server (or of anything built on them).
pub(crate) fn failed(detail: String) -> ProvisionError {
    ProvisionError::StartFailed {
        source_kind: ServerSource::Local,
        detail,
    }
}
