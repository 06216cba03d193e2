//! Running helper programs with a bound on how long they may take.

use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::limits::{ERROR_DETAIL_BYTES_MAX, POLL_INTERVAL_MS, PROBE_TIMEOUT_S};

/// What a finished program printed.
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) status: ExitStatus,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Finished {
    /// Both output streams, shortened for an error message.
    pub(crate) fn output_tail(&self) -> String {
        tail(&format!("{}{}", self.stdout, self.stderr))
    }
}

/// Why a program did not finish.
#[derive(Debug)]
pub(crate) enum RunError {
    /// It could not be started at all (missing, not executable, ...).
    Spawn(std::io::Error),
    /// It ran past its bound and was killed.
    TimedOut,
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Spawn(error) => write!(f, "could not run it: {error}"),
            RunError::TimedOut => f.write_str("it did not finish in time and was killed"),
        }
    }
}

/// Runs `command` to completion with no input, killing it after `timeout`.
pub(crate) fn run(command: &mut Command, timeout: Duration) -> Result<Finished, RunError> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(RunError::Spawn)?;
    // Drain both pipes while waiting, so a chatty program cannot block on a
    // full pipe and look like a hang.
    let stdout = child.stdout.take().map(drain);
    let stderr = child.stderr.take().map(drain);
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait().map_err(RunError::Spawn)? {
            Some(status) => break status,
            None if Instant::now() >= deadline => {
                // Ignored: the child may have exited just now.
                let _ = child.kill();
                let _ = child.wait();
                return Err(RunError::TimedOut);
            }
            None => thread::sleep(Duration::from_millis(POLL_INTERVAL_MS)),
        }
    };
    Ok(Finished {
        status,
        stdout: stdout.map(join_text).unwrap_or_default(),
        stderr: stderr.map(join_text).unwrap_or_default(),
    })
}

/// Runs a program that only reports something and returns its trimmed
/// standard output when it succeeds.
pub(crate) fn probe(command: &mut Command) -> Option<String> {
    let finished = run(command, Duration::from_secs(PROBE_TIMEOUT_S)).ok()?;
    finished
        .status
        .success()
        .then(|| finished.stdout.trim().to_owned())
}

/// The last [`ERROR_DETAIL_BYTES_MAX`] bytes of `text`, on a char boundary.
pub(crate) fn tail(text: &str) -> String {
    let text = text.trim();
    if text.len() <= ERROR_DETAIL_BYTES_MAX {
        return text.to_owned();
    }
    let mut start = text.len() - ERROR_DETAIL_BYTES_MAX;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("...{}", &text[start..])
}

fn drain(mut pipe: impl Read + Send + 'static) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        // A read error only shortens the text shown in an error message.
        let _ = pipe.read_to_end(&mut bytes);
        bytes
    })
}

fn join_text(reader: thread::JoinHandle<Vec<u8>>) -> String {
    String::from_utf8_lossy(&reader.join().unwrap_or_default()).into_owned()
}
