//! Where a directory document comes from: the [`DocumentSource`] contract
//! and [`FsSource`], the file a `config_center_file` router reads.

use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use crate::error::SourceError;
use crate::limits::{DOCUMENT_READ_BYTES_MAX, DOCUMENT_READ_MS_MAX, DOCUMENT_READS_IN_FLIGHT_MAX};

/// Hands over the current bytes of one directory document.
///
/// A router calls [`read_document`](Self::read_document) once per invocation
/// and once per readiness check, and never otherwise (DIR-3, DIR-6), so a
/// source that counts its reads can prove it. A source has exactly one
/// document: it never falls back to another location or to a copy it kept
/// (DIR-8).
pub trait DocumentSource {
    /// Reads the whole document once, as one snapshot.
    ///
    /// A source need not return more than [`DOCUMENT_READ_BYTES_MAX`]
    /// bytes: anything past the document bound is refused by the parser
    /// without being looked at. A source should bound the time a read takes
    /// and fail rather than block ([`FsSource`] does).
    fn read_document(&self) -> Result<Vec<u8>, SourceError>;

    /// Where the document lives, for error messages.
    fn location(&self) -> &str;
}

impl<S: DocumentSource + ?Sized> DocumentSource for &S {
    fn read_document(&self) -> Result<Vec<u8>, SourceError> {
        (**self).read_document()
    }

    fn location(&self) -> &str {
        (**self).location()
    }
}

/// A document in a file, read whole on every call.
///
/// Deployments should replace the file atomically (write a new file, then
/// rename it over the old one): a reader that meets a half-written file
/// finds it malformed and fails closed, it never guesses.
///
/// Every read fails closed rather than hang or grow:
///
/// - only a regular file (or a link to one) is opened: a FIFO, a device, a
///   socket or a directory is [`SourceError::NotRegularFile`], because
///   opening or reading them can block forever or never end;
/// - at most [`DOCUMENT_READ_BYTES_MAX`] bytes are read;
/// - the whole read, from looking the path up to the last byte, takes at
///   most [`DOCUMENT_READ_MS_MAX`]; past it the answer is
///   [`SourceError::TimedOut`]. The read runs on its own thread so that a
///   hung mount cannot hold the caller; at most
///   [`DOCUMENT_READS_IN_FLIGHT_MAX`] such threads run per source (clones
///   share the bound), and past it a read fails at once.
#[derive(Debug, Clone)]
pub struct FsSource {
    path: PathBuf,
    location: String,
    in_flight: Arc<AtomicUsize>,
}

impl PartialEq for FsSource {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path
    }
}

impl Eq for FsSource {}

impl FsSource {
    /// A source for the file at `path`. Nothing is read until asked.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        let location = path.display().to_string();
        Self {
            path,
            location,
            in_flight: Arc::default(),
        }
    }

    /// The file's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl DocumentSource for FsSource {
    fn read_document(&self) -> Result<Vec<u8>, SourceError> {
        let path = self.path.clone();
        read_within(
            Duration::from_millis(DOCUMENT_READ_MS_MAX),
            &self.in_flight,
            move || read_regular_file(&path),
        )
    }

    fn location(&self) -> &str {
        &self.location
    }
}

/// Reads the regular file at `path`, at most [`DOCUMENT_READ_BYTES_MAX`]
/// bytes of it.
fn read_regular_file(path: &Path) -> Result<Vec<u8>, SourceError> {
    // Checked before opening: opening a FIFO blocks until a writer comes.
    check_regular(&fs::metadata(path)?)?;
    let file = File::open(path)?;
    // And again on what was opened, in case the path was replaced between.
    check_regular(&file.metadata()?)?;
    let mut bytes = Vec::new();
    let bytes_max = u64::try_from(DOCUMENT_READ_BYTES_MAX).unwrap_or(u64::MAX);
    file.take(bytes_max).read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn check_regular(metadata: &fs::Metadata) -> Result<(), SourceError> {
    let file_type = metadata.file_type();
    if file_type.is_file() {
        return Ok(());
    }
    Err(SourceError::NotRegularFile {
        kind: kind_of(file_type),
    })
}

/// What a path that is not a regular file names, in words.
fn kind_of(file_type: fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "fifo";
        }
        if file_type.is_char_device() {
            return "character device";
        }
        if file_type.is_block_device() {
            return "block device";
        }
        if file_type.is_socket() {
            return "socket";
        }
    }
    if file_type.is_dir() {
        return "directory";
    }
    "special file"
}

/// Runs `read` on its own thread and waits at most `timeout` for it.
///
/// A read past its deadline is abandoned: its thread keeps its slot in
/// `in_flight` until the operating system lets it return. With
/// [`DOCUMENT_READS_IN_FLIGHT_MAX`] slots taken, the read is refused at once
/// and nothing is started.
fn read_within<F>(
    timeout: Duration,
    in_flight: &Arc<AtomicUsize>,
    read: F,
) -> Result<Vec<u8>, SourceError>
where
    F: FnOnce() -> Result<Vec<u8>, SourceError> + Send + 'static,
{
    let slot = Slot::take(in_flight).ok_or_else(|| SourceError::Unavailable {
        reason: format!(
            "{DOCUMENT_READS_IN_FLIGHT_MAX} earlier reads of the document have not returned"
        ),
    })?;
    let (sender, receiver) = mpsc::sync_channel(1);
    thread::Builder::new()
        .name("connreg-directory-read".into())
        .spawn(move || {
            let _slot = slot;
            // The caller may have stopped waiting; then nobody needs the answer.
            let _ = sender.send(read());
        })
        .map_err(|error| SourceError::Unavailable {
            reason: format!("cannot start the read: {error}"),
        })?;
    match receiver.recv_timeout(timeout) {
        Ok(answer) => answer,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(SourceError::TimedOut {
            after_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        }),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(SourceError::Unavailable {
            reason: "the read stopped without an answer".into(),
        }),
    }
}

/// One of a source's [`DOCUMENT_READS_IN_FLIGHT_MAX`] read slots, given
/// back when dropped.
struct Slot(Arc<AtomicUsize>);

impl Slot {
    fn take(in_flight: &Arc<AtomicUsize>) -> Option<Self> {
        in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |taken| {
                (taken < DOCUMENT_READS_IN_FLIGHT_MAX).then_some(taken + 1)
            })
            .ok()
            .map(|_| Self(Arc::clone(in_flight)))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::atomic::AtomicBool;
    use std::time::Instant;

    use super::*;

    /// A short deadline: every slow read below is held until the test lets
    /// it go, so the deadline always passes first, however loaded the
    /// machine.
    const SHORT: Duration = Duration::from_millis(50);

    /// A read that answers only when `release` is dropped or sent to.
    fn held_read(
        release: mpsc::Receiver<()>,
    ) -> impl FnOnce() -> Result<Vec<u8>, SourceError> + Send + 'static {
        move || {
            let _ = release.recv();
            Ok(b"too late".to_vec())
        }
    }

    /// Waits, boundedly, for every abandoned read of `in_flight` to return.
    fn wait_for_returned_reads(in_flight: &Arc<AtomicUsize>) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while in_flight.load(Ordering::Acquire) > 0 {
            assert!(Instant::now() < deadline, "abandoned reads never returned");
            thread::yield_now();
        }
    }

    // spec: DIR-3
    #[test]
    fn a_slow_source_fails_closed_at_the_deadline() {
        let in_flight = Arc::default();
        let (release, held) = mpsc::channel();
        let answer = read_within(SHORT, &in_flight, held_read(held));
        assert_eq!(answer, Err(SourceError::TimedOut { after_ms: 50 }));
        drop(release);
        wait_for_returned_reads(&in_flight);
    }

    // spec: DIR-3
    #[cfg(unix)]
    #[test]
    fn an_open_blocked_on_a_fifo_fails_closed_at_the_deadline() {
        // What a FIFO swapped in after the regular-file check would do: the
        // open itself blocks until a writer comes.
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("router-instance-directory.v1.json");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let in_flight = Arc::default();
        let opened = fifo.clone();
        let answer = read_within(SHORT, &in_flight, move || {
            File::open(&opened)?;
            Ok(Vec::new())
        });
        assert_eq!(answer, Err(SourceError::TimedOut { after_ms: 50 }));
        // A writer unblocks the abandoned open, so its thread returns.
        drop(fs::OpenOptions::new().write(true).open(&fifo).unwrap());
        wait_for_returned_reads(&in_flight);
    }

    // spec: DIR-3
    #[test]
    fn abandoned_reads_are_bounded_and_a_read_past_the_bound_starts_nothing() {
        let in_flight = Arc::default();
        let mut releases = Vec::new();
        for _ in 0..DOCUMENT_READS_IN_FLIGHT_MAX {
            let (release, held) = mpsc::channel();
            releases.push(release);
            let answer = read_within(SHORT, &in_flight, held_read(held));
            assert!(matches!(answer, Err(SourceError::TimedOut { .. })));
        }
        let started = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&started);
        let answer = read_within(SHORT, &in_flight, move || {
            flag.store(true, Ordering::Release);
            Ok(Vec::new())
        });
        assert!(
            matches!(&answer, Err(SourceError::Unavailable { reason }) if reason.contains("have not returned")),
            "{answer:?}"
        );
        assert!(
            !started.load(Ordering::Acquire),
            "a read past the bound ran"
        );

        // Once the stuck reads return, reading works again.
        drop(releases);
        wait_for_returned_reads(&in_flight);
        let answer = read_within(SHORT * 100, &in_flight, || Ok(b"{}".to_vec()));
        assert_eq!(answer, Ok(b"{}".to_vec()));
    }

    // spec: DIR-3
    #[test]
    fn a_read_that_panics_is_unavailable_not_a_panic_of_the_caller() {
        let in_flight = Arc::default();
        let answer = read_within(Duration::from_secs(10), &in_flight, || {
            panic!("the reading thread failed")
        });
        assert!(matches!(answer, Err(SourceError::Unavailable { .. })));
    }

    // spec: DIR-3
    #[test]
    fn operating_system_errors_map_to_the_failure_they_mean() {
        let denied = io::Error::from_raw_os_error(13); // EACCES
        assert_eq!(SourceError::from(denied), SourceError::PermissionDenied);
        let missing = io::Error::from_raw_os_error(2); // ENOENT
        assert_eq!(SourceError::from(missing), SourceError::NotFound);
        let broken = io::Error::from_raw_os_error(5); // EIO
        assert!(matches!(
            SourceError::from(broken),
            SourceError::Unavailable { .. }
        ));
    }
}
