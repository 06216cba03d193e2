//! Cleanup that runs when the test process ends, however it ends.
//!
//! Test harnesses never run `Drop` for statics, and a test process may be
//! killed outright (a nextest timeout, Ctrl-C), so the shared server cannot be
//! stopped from inside the process. Instead a tiny `sh` supervisor is started
//! beside it. The supervisor blocks reading a pipe whose only writer is held by
//! this process: when the process exits, for any reason, the kernel closes
//! that end, the read returns, and the supervisor runs its cleanup script.
//! Unlike polling a PID this needs no timer and cannot be fooled by PID reuse.

use std::ffi::OsStr;
use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::limits::POLL_INTERVAL_MS;

/// Keeps the supervisor waiting; dropping it (or exiting) runs the cleanup.
#[derive(Debug)]
pub(crate) struct CleanupGuard {
    /// Both taken by [`CleanupGuard::finish`] or the drop.
    writer: Option<ChildStdin>,
    child: Option<Child>,
}

/// Starts a supervisor that runs `script` with `sh` once this process has
/// exited or the returned guard is dropped. `args` become `$1`, `$2`, ...
pub(crate) fn arm(script: &str, args: &[&OsStr]) -> io::Result<CleanupGuard> {
    // Terminal signals are ignored so that Ctrl-C on a test run stops the
    // tests but still lets the cleanup run; the own process group keeps the
    // terminal from sending them in the first place.
    let full_script = format!(
        "trap '' INT HUP QUIT PIPE\n\
         while read -r line; do :; done\n\
         {script}"
    );
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(full_script)
        .arg("connreg-pgtest-cleanup")
        .args(args)
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
    Ok(CleanupGuard {
        writer: Some(writer),
        child: Some(child),
    })
}

impl CleanupGuard {
    /// Runs the cleanup now and waits, at most `bound`, for the supervisor
    /// to finish it; past that the supervisor is killed. For a value that
    /// cleans up itself first, so that nothing of it runs once its drop
    /// returns.
    pub(crate) fn finish(mut self, bound: Duration) {
        drop(self.writer.take());
        let Some(mut child) = self.child.take() else {
            return;
        };
        let deadline = Instant::now() + bound;
        loop {
            match child.try_wait() {
                Ok(Some(_)) | Err(_) => return,
                Ok(None) if Instant::now() > deadline => {
                    // Ignored: it may have exited just now.
                    let _ = child.kill();
                    let _ = child.wait();
                    return;
                }
                Ok(None) => thread::sleep(Duration::from_millis(POLL_INTERVAL_MS)),
            }
        }
    }
}

impl Drop for CleanupGuard {
    /// Lets the supervisor run its cleanup, and reaps it on a thread of its
    /// own once it finishes, so that it leaves no zombie.
    fn drop(&mut self) {
        drop(self.writer.take());
        if let Some(mut child) = self.child.take() {
            // Without a thread the supervisor stays a zombie until this
            // process exits; nothing else is lost.
            let _ = thread::Builder::new()
                .name("connreg-pgtest-reaper".to_owned())
                .spawn(move || child.wait());
        }
    }
}

/// A `sh` function `stop_server DATA`: sends the postmaster of data folder
/// `DATA` SIGQUIT (PostgreSQL's immediate shutdown, what `pg_ctl stop -m
/// immediate` sends), waits at most `stop_timeout_s` for it to exit, then
/// kills it. Signalling directly rather than through `pg_ctl` works the same
/// as root, where `pg_ctl` refuses to run.
fn stop_server_function(stop_timeout_s: u64) -> String {
    let polls_max = stop_timeout_s * 10;
    format!(
        r#"stop_server() {{
  pidfile="$1/postmaster.pid"
  [ -f "$pidfile" ] || return 0
  pid=$(head -n 1 "$pidfile")
  # Never signal a process that merely reused the PID of a crashed server.
  if [ ! -r "/proc/$pid/comm" ] || [ "$(cat "/proc/$pid/comm")" = postgres ]; then
    if kill -QUIT "$pid" 2>/dev/null; then
      n=0
      # A zombie has exited; whether init reaps it soon is not ours to wait for.
      while kill -0 "$pid" 2>/dev/null \
        && ! grep -qs '^State:[[:space:]]*Z' "/proc/$pid/status" \
        && [ "$n" -lt {polls_max} ]; do
        sleep 0.1
        n=$((n + 1))
      done
      kill -KILL "$pid" 2>/dev/null
    fi
  fi
}}
"#
    )
}

/// Cleanup of a local cluster: `$1` is its temporary folder, `$2` its data
/// folder. Stops the server immediately (see `stop_server_function`), then
/// removes the folder.
pub(crate) fn local_cluster_script(stop_timeout_s: u64) -> String {
    format!(
        "{}stop_server \"$2\"\nrm -rf \"$1\"\n",
        stop_server_function(stop_timeout_s)
    )
}

/// Cleanup of a pg_auto_failover formation: `$1` is its folder, which holds
/// the data folder of each of `data_names` and `pg_autoctl`'s runtime files
/// under `xdg/run/`. Every `pg_autoctl` process with a pid file there is
/// killed (SIGKILL, so none restarts a server), then each server is stopped
/// immediately (see `stop_server_function`), then the folder is removed.
pub(crate) fn formation_script(stop_timeout_s: u64, data_names: &[&str]) -> String {
    format!(
        r#"{stop_server}for pidfile in "$1/xdg/run/pg_autoctl$1"/*/pg_autoctl*.pid; do
  [ -f "$pidfile" ] || continue
  pid=$(head -n 1 "$pidfile")
  if grep -qs pg_autoctl "/proc/$pid/cmdline"; then kill -KILL "$pid" 2>/dev/null; fi
done
for name in {names}; do
  stop_server "$1/$name"
done
rm -rf "$1"
"#,
        stop_server = stop_server_function(stop_timeout_s),
        names = data_names.join(" "),
    )
}

/// Cleanup of a Docker container: `$1` is its id.
pub(crate) const DOCKER_CONTAINER_SCRIPT: &str =
    r#"docker rm --force --volumes "$1" >/dev/null 2>&1"#;
