//! Goal: the file source reads only regular files, at most one byte past
//! the document bound and within a bounded time, and fails closed
//! otherwise: a FIFO, a device or a directory at the document path is a
//! dependency failure at once, never a hang and never a document (DIR-3,
//! DIR-7, DIR-8).

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use common::{billing_target, file_routing, one_ready};
use connreg_directory::limits::{DOCUMENT_BYTES_MAX, DOCUMENT_READ_BYTES_MAX};
use connreg_directory::{
    DependencyError, DocumentError, DocumentSource, FsSource, Readiness, ResolveError, Router,
    SourceError, StartError,
};

/// How long a test waits for a read before it calls the read blocked. Far
/// past any honest read of a local file, and past the source's own bound.
const TEST_READ_WAIT: Duration = Duration::from_secs(20);

/// Reads `path` through a file source on another thread, so that a read
/// that blocks fails the test instead of hanging it.
fn read_or_report_blocked(path: &Path) -> Result<Vec<u8>, SourceError> {
    let source = FsSource::new(path);
    let (sender, receiver) = mpsc::channel();
    thread::spawn(move || {
        let _ = sender.send(source.read_document());
    });
    receiver
        .recv_timeout(TEST_READ_WAIT)
        .unwrap_or_else(|_| panic!("reading {} blocked", path.display()))
}

/// Makes a FIFO at `path` with the system's `mkfifo`.
fn make_fifo(path: &Path) {
    let status = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(status.success(), "mkfifo {}", path.display());
}

fn fifo_in(dir: &tempfile::TempDir) -> PathBuf {
    let path = dir.path().join("router-instance-directory.v1.json");
    make_fifo(&path);
    path
}

fn refused_kind(result: Result<Vec<u8>, SourceError>) -> &'static str {
    match result {
        Err(SourceError::NotRegularFile { kind }) => kind,
        Ok(bytes) => panic!("read {} bytes from a file that is not regular", bytes.len()),
        Err(other) => panic!("expected NotRegularFile, got {other}"),
    }
}

// spec: DIR-3
#[cfg(unix)]
#[test]
fn a_fifo_at_the_document_path_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = fifo_in(&dir);
    assert_eq!(refused_kind(read_or_report_blocked(&fifo)), "fifo");
}

// spec: DIR-7
// spec: DIR-8
#[cfg(unix)]
#[test]
fn a_fifo_refuses_the_start_and_fails_every_invocation_closed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router-instance-directory.v1.json");
    fs::write(&path, one_ready("billing-agent-a", "10.0.4.17")).unwrap();
    let router = Router::start(file_routing(FsSource::new(&path))).unwrap();

    fs::remove_file(&path).unwrap();
    make_fifo(&path);
    let error = router.resolve(&billing_target()).unwrap_err();
    assert!(
        matches!(
            &error,
            ResolveError::Dependency(DependencyError::NotRegularFile { kind: "fifo", .. })
        ),
        "{error}"
    );
    assert!(error.is_dependency_failure());
    assert_eq!(router.readiness(&billing_target()), Readiness::NotReady);
    assert!(matches!(
        Router::start(file_routing(FsSource::new(&path))),
        Err(StartError::DirectoryUnusable(
            DependencyError::NotRegularFile { .. }
        ))
    ));
}

// spec: DIR-3
#[cfg(unix)]
#[test]
fn character_devices_are_refused_not_read() {
    // /dev/null would read as an empty document, /dev/zero as an endless one.
    for device in ["/dev/null", "/dev/zero"] {
        let kind = refused_kind(read_or_report_blocked(Path::new(device)));
        assert_eq!(kind, "character device", "{device}");
    }
}

// spec: DIR-3
#[test]
fn a_directory_at_the_document_path_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        refused_kind(read_or_report_blocked(dir.path())),
        "directory"
    );
}

// spec: DIR-3
#[cfg(unix)]
#[test]
fn a_link_to_a_regular_file_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("published.json");
    let link = dir.path().join("router-instance-directory.v1.json");
    let bytes = one_ready("billing-agent-a", "10.0.4.17");
    fs::write(&target, &bytes).unwrap();
    std::os::unix::fs::symlink(&target, &link).unwrap();
    assert_eq!(read_or_report_blocked(&link).unwrap(), bytes);
}

// spec: DIR-3
#[test]
fn a_read_stops_one_byte_past_the_document_bound() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router-instance-directory.v1.json");
    // A sparse file far past the bound: reading it whole would take 64 MiB.
    let file = fs::File::create(&path).unwrap();
    file.set_len(64 * 1024 * 1024).unwrap();
    drop(file);
    let bytes = read_or_report_blocked(&path).unwrap();
    assert_eq!(bytes.len(), DOCUMENT_READ_BYTES_MAX);
    assert_eq!(DOCUMENT_READ_BYTES_MAX, DOCUMENT_BYTES_MAX + 1);

    let router_error = Router::start(file_routing(FsSource::new(&path))).unwrap_err();
    assert!(
        matches!(
            router_error,
            StartError::DirectoryUnusable(DependencyError::Malformed {
                error: DocumentError::TooLarge { .. },
                ..
            })
        ),
        "{router_error}"
    );
}

// spec: DIR-3
#[test]
fn a_document_exactly_at_the_bound_is_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router-instance-directory.v1.json");
    fs::write(&path, vec![b' '; DOCUMENT_BYTES_MAX]).unwrap();
    assert_eq!(
        read_or_report_blocked(&path).unwrap().len(),
        DOCUMENT_BYTES_MAX
    );
}
