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
use std::process::{ChildStdin, Command, Stdio};
use std::thread;

/// Keeps the supervisor waiting; dropping it (or exiting) runs the cleanup.
#[derive(Debug)]
pub(crate) struct CleanupGuard {
    _writer: ChildStdin,
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
    // Reap the supervisor if it finishes while this process still runs (its
    // guard was dropped after a failed start), so it leaves no zombie.
    thread::Builder::new()
        .name("connreg-pgtest-reaper".to_owned())
        .spawn(move || child.wait())?;
    Ok(CleanupGuard { _writer: writer })
}

/// Cleanup of a local cluster: `$1` is its temporary folder, `$2` its data
/// folder. Sends the postmaster SIGQUIT (PostgreSQL's immediate shutdown, what
/// `pg_ctl stop -m immediate` sends), waits for it to exit, then removes the
/// folder. Signalling directly rather than through `pg_ctl` works the same as
/// root, where `pg_ctl` refuses to run.
pub(crate) fn local_cluster_script(stop_timeout_s: u64) -> String {
    let polls_max = stop_timeout_s * 10;
    format!(
        r#"pidfile="$2/postmaster.pid"
if [ -f "$pidfile" ]; then
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
fi
rm -rf "$1"
"#
    )
}

/// Cleanup of a Docker container: `$1` is its id.
pub(crate) const DOCKER_CONTAINER_SCRIPT: &str =
    r#"docker rm --force --volumes "$1" >/dev/null 2>&1"#;
