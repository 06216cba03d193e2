//! Goal: scripted scenarios in which the directory document is replaced,
//! corrupted and deleted while streaming invocations are open, run step by
//! step against an in-memory document and a real file, with invariants
//! checked after every step (DIR-3, DIR-6, DIR-7, DIR-8).
//!
//! Invariants, after every step:
//! - an open stream's sends and cancellation reach only the destination it
//!   captured when it was opened;
//! - opening a stream, resolving and checking readiness read the document
//!   exactly once; sends, cancellations and document edits read it never;
//! - no file-mode invocation is ever routed to the canonical endpoint.

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::PathBuf;

use common::{
    CountingSource, RecordingTransport, billing_target, corrupted, file_routing, one_ready,
    replace_file,
};
use connreg_directory::{
    DependencyError, DocumentSource, FsSource, MemorySource, Readiness, ResolveError, Route,
    Router, StreamInvocation,
};
use tempfile::TempDir;

/// A place the document lives, which a scenario can edit.
trait World {
    fn name(&self) -> &'static str;
    fn source(&self) -> &dyn DocumentSource;
    fn reads(&self) -> u64;
    fn write(&self, bytes: &[u8]);
    fn corrupt(&self);
    fn delete(&self);
}

struct MemoryWorld {
    source: MemorySource,
}

impl World for MemoryWorld {
    fn name(&self) -> &'static str {
        "memory"
    }
    fn source(&self) -> &dyn DocumentSource {
        &self.source
    }
    fn reads(&self) -> u64 {
        self.source.reads()
    }
    fn write(&self, bytes: &[u8]) {
        self.source.replace(bytes);
    }
    fn corrupt(&self) {
        self.source.replace(corrupted());
    }
    fn delete(&self) {
        self.source.delete();
    }
}

struct FileWorld {
    _dir: TempDir,
    path: PathBuf,
    source: CountingSource<FsSource>,
}

impl World for FileWorld {
    fn name(&self) -> &'static str {
        "file"
    }
    fn source(&self) -> &dyn DocumentSource {
        &self.source
    }
    fn reads(&self) -> u64 {
        self.source.reads()
    }
    fn write(&self, bytes: &[u8]) {
        replace_file(&self.path, bytes);
    }
    fn corrupt(&self) {
        // What a writer that does not rename leaves behind mid-write.
        fs::write(&self.path, corrupted()).unwrap();
    }
    fn delete(&self) {
        fs::remove_file(&self.path).unwrap();
    }
}

fn worlds(initial: &[u8]) -> Vec<Box<dyn World>> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router-instance-directory.v1.json");
    fs::write(&path, initial).unwrap();
    let file = FileWorld {
        source: CountingSource::new(FsSource::new(&path)),
        path,
        _dir: dir,
    };
    let memory = MemoryWorld {
        source: MemorySource::new(initial),
    };
    vec![Box::new(memory), Box::new(file)]
}

/// Why an invocation is expected to fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    Missing,
    Malformed,
}

/// One step of a scenario.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Writes a valid document whose one ready instance is at this address.
    Write(&'static str),
    Corrupt,
    Delete,
    /// Opens stream `n`, which must capture this destination.
    Open(usize, &'static str),
    /// Opening a stream must fail.
    OpenFails(Failure),
    Send(usize),
    Cancel(usize),
    /// A one-shot invocation must route to this destination.
    Resolves(&'static str),
    /// A one-shot invocation must fail.
    Fails(Failure),
    Ready(Readiness),
}

const A: &str = "10.0.4.17";
const B: &str = "10.0.4.18";
const C: &str = "10.0.4.19";

fn document_at(address: &'static str) -> Vec<u8> {
    one_ready("billing-agent", address)
}

fn destination(address: &str) -> String {
    format!("{address}:8080")
}

fn failure_of(error: &ResolveError) -> Option<Failure> {
    match error {
        ResolveError::Dependency(DependencyError::Missing { .. }) => Some(Failure::Missing),
        ResolveError::Dependency(DependencyError::Malformed { .. }) => Some(Failure::Malformed),
        _ => None,
    }
}

struct OpenStream {
    stream: Option<StreamInvocation>,
    captured: String,
    transport: RecordingTransport,
}

/// Runs `steps` in every world, starting from a document at `initial`.
fn run(initial: &'static str, steps: &[Step]) {
    for world in worlds(&document_at(initial)) {
        run_in(world.as_ref(), steps);
    }
}

fn run_in(world: &dyn World, steps: &[Step]) {
    let mut trace = format!("world: {}\n", world.name());
    let router = Router::start(file_routing(world.source())).unwrap();
    let target = billing_target();
    let mut streams: BTreeMap<usize, OpenStream> = BTreeMap::new();
    let frame = b"frame";

    for (index, step) in steps.iter().enumerate() {
        let _ = writeln!(trace, "step {index}: {step:?}");
        let reads_before = world.reads();
        let check = |ok: bool, what: &str| {
            assert!(ok, "{what}\n{trace}");
        };
        let expected_reads = match *step {
            Step::Write(address) => {
                world.write(&document_at(address));
                0
            }
            Step::Corrupt => {
                world.corrupt();
                0
            }
            Step::Delete => {
                world.delete();
                0
            }
            Step::Open(n, address) => {
                let stream = router
                    .open_stream(&target)
                    .unwrap_or_else(|error| panic!("opening stream {n} failed: {error}\n{trace}"));
                let captured = stream.target().destination().to_string();
                check(
                    captured == destination(address),
                    "stream captured the wrong destination",
                );
                streams.insert(
                    n,
                    OpenStream {
                        stream: Some(stream),
                        captured,
                        transport: RecordingTransport::default(),
                    },
                );
                1
            }
            Step::OpenFails(failure) => {
                let error = router.open_stream(&target).err();
                check(
                    error.as_ref().and_then(failure_of) == Some(failure),
                    "opening a stream did not fail as expected",
                );
                1
            }
            Step::Send(n) => {
                let open = streams.get_mut(&n).expect("the stream was opened");
                let stream = open.stream.as_ref().expect("the stream is not cancelled");
                stream.send(&mut open.transport, frame).unwrap();
                0
            }
            Step::Cancel(n) => {
                let open = streams.get_mut(&n).expect("the stream was opened");
                let stream = open.stream.take().expect("the stream is not cancelled");
                stream.cancel(&mut open.transport).unwrap();
                0
            }
            Step::Resolves(address) => {
                let resolved = router.resolve(&target);
                check(
                    resolved.as_ref().is_ok_and(|r| {
                        r.destination().to_string() == destination(address)
                            && matches!(r.route(), Route::Instance { .. })
                    }),
                    &format!("resolve gave {resolved:?}"),
                );
                1
            }
            Step::Fails(failure) => {
                let resolved = router.resolve(&target);
                check(
                    resolved.as_ref().err().and_then(failure_of) == Some(failure),
                    &format!("resolve gave {resolved:?}"),
                );
                1
            }
            Step::Ready(expected) => {
                check(router.readiness(&target) == expected, "readiness was wrong");
                1
            }
        };
        check(
            world.reads() - reads_before == expected_reads,
            &format!(
                "step read the document {} times, expected {expected_reads}",
                world.reads() - reads_before
            ),
        );
        for (n, open) in &streams {
            check(
                open.transport
                    .destinations()
                    .iter()
                    .all(|reached| *reached == open.captured),
                &format!("stream {n} reached a destination it did not capture"),
            );
        }
    }
}

// spec: DIR-6
// spec: DIR-3
#[test]
fn a_document_replaced_during_a_stream_moves_only_later_invocations() {
    use Step::*;
    run(
        A,
        &[
            Open(1, A),
            Send(1),
            Write(B),
            Send(1),
            Send(1),
            Resolves(B),
            Ready(Readiness::Ok),
            Open(2, B),
            Send(2),
            Send(1),
            Cancel(1),
            Cancel(2),
        ],
    );
}

// spec: DIR-6
// spec: DIR-7
// spec: DIR-8
#[test]
fn a_document_corrupted_during_a_stream_fails_the_next_invocation_closed() {
    use Step::*;
    run(
        A,
        &[
            Open(1, A),
            Corrupt,
            Send(1),
            Fails(Failure::Malformed),
            OpenFails(Failure::Malformed),
            Ready(Readiness::NotReady),
            Send(1),
            Cancel(1),
            Write(A),
            Ready(Readiness::Ok),
            Resolves(A),
        ],
    );
}

// spec: DIR-6
// spec: DIR-7
// spec: DIR-8
#[test]
fn a_document_deleted_during_a_stream_fails_the_next_invocation_closed() {
    use Step::*;
    run(
        A,
        &[
            Open(1, A),
            Delete,
            Send(1),
            Fails(Failure::Missing),
            Ready(Readiness::NotReady),
            OpenFails(Failure::Missing),
            Cancel(1),
            Write(B),
            Ready(Readiness::Ok),
            Open(2, B),
            Send(2),
            Cancel(2),
        ],
    );
}

// spec: DIR-3
// spec: DIR-6
// spec: DIR-7
// spec: DIR-8
#[test]
fn overlapping_streams_each_keep_their_target_through_replacement_corruption_and_deletion() {
    use Step::*;
    run(
        A,
        &[
            Open(1, A),
            Write(B),
            Open(2, B),
            Corrupt,
            Send(1),
            Send(2),
            Ready(Readiness::NotReady),
            Fails(Failure::Malformed),
            Write(C),
            Ready(Readiness::Ok),
            Open(3, C),
            Delete,
            Send(3),
            Send(2),
            Send(1),
            Fails(Failure::Missing),
            Ready(Readiness::NotReady),
            Cancel(2),
            Write(A),
            Ready(Readiness::Ok),
            Resolves(A),
            Send(3),
            Cancel(3),
            Cancel(1),
        ],
    );
}
