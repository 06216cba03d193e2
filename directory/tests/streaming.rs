//! Goal: a streaming invocation captures its target before the stream
//! starts; its sends and its bounded cancellation use that target whatever
//! happens to the document, and the directory is not read again (DIR-6).

mod common;

use std::fs;

use common::{
    Carried, CountingSource, RecordingTransport, billing_target, corrupted, file_router, one_ready,
    replace_file,
};
use std::time::Duration;

use connreg_directory::limits::{CANCEL_ATTEMPTS_MAX, CANCEL_MS_MAX};
use connreg_directory::{CancelError, FsSource, MemorySource};

const CAPTURED: &str = "10.0.4.17:8080";

// spec: DIR-6
#[test]
fn sends_keep_the_captured_target_when_the_document_is_replaced() {
    let source = MemorySource::new(one_ready("billing-agent-a", "10.0.4.17"));
    let router = file_router(&source);
    let stream = router.open_stream(&billing_target()).unwrap();
    let reads_at_open = source.reads();

    source.replace(one_ready("billing-agent-b", "10.0.4.18"));
    let mut transport = RecordingTransport::default();
    for frame in [b"one".as_slice(), b"two", b"three"] {
        stream.send(&mut transport, frame).unwrap();
    }
    assert_eq!(transport.destinations(), [CAPTURED; 3]);
    assert_eq!(source.reads(), reads_at_open, "the stream read nothing");
    assert!(transport.carried.iter().all(|carried| matches!(
        carried,
        Carried::Send { audience, .. } if audience == "https://billing-agent.agents.example"
    )));

    // A new invocation sees the new document; the open stream does not.
    let next = router.resolve(&billing_target()).unwrap();
    assert_eq!(next.destination().to_string(), "10.0.4.18:8080");
    assert_eq!(stream.target().destination().to_string(), CAPTURED);
}

// spec: DIR-6
#[test]
fn cancellation_goes_to_the_captured_target_after_the_document_is_deleted() {
    let source = MemorySource::new(one_ready("billing-agent-a", "10.0.4.17"));
    let router = file_router(&source);
    let stream = router.open_stream(&billing_target()).unwrap();
    let reads_at_open = source.reads();
    source.delete();

    let mut transport = RecordingTransport::default();
    stream.send(&mut transport, b"frame").unwrap();
    assert_eq!(stream.cancel(&mut transport), Ok(1));
    assert_eq!(transport.destinations(), [CAPTURED; 2]);
    assert_eq!(source.reads(), reads_at_open);
}

// spec: DIR-6
#[test]
fn cancellation_is_attempted_at_most_the_bound_and_only_at_the_captured_target() {
    let source = MemorySource::new(one_ready("billing-agent-a", "10.0.4.17"));
    let router = file_router(&source);
    let stream = router.open_stream(&billing_target()).unwrap();
    source.replace(corrupted());

    let mut transport = RecordingTransport {
        cancel_failures: u32::MAX,
        ..RecordingTransport::default()
    };
    let error = stream.cancel(&mut transport).unwrap_err();
    assert!(matches!(
        error,
        CancelError::AttemptsExhausted { attempts, .. } if attempts == CANCEL_ATTEMPTS_MAX
    ));
    assert_eq!(transport.cancel_attempts(), CANCEL_ATTEMPTS_MAX as usize);
    assert!(transport.destinations().iter().all(|d| d == CAPTURED));
}

// spec: DIR-6
#[test]
fn cancellation_stops_at_the_first_attempt_that_succeeds() {
    let source = MemorySource::new(one_ready("billing-agent-a", "10.0.4.17"));
    let stream = file_router(&source).open_stream(&billing_target()).unwrap();
    let mut transport = RecordingTransport {
        cancel_failures: CANCEL_ATTEMPTS_MAX - 1,
        ..RecordingTransport::default()
    };
    assert_eq!(stream.cancel(&mut transport), Ok(CANCEL_ATTEMPTS_MAX));
    assert_eq!(transport.cancel_attempts(), CANCEL_ATTEMPTS_MAX as usize);
}

// spec: DIR-6
#[test]
fn opening_a_stream_reads_the_directory_once_and_never_again() {
    let source = MemorySource::new(one_ready("billing-agent-a", "10.0.4.17"));
    let router = file_router(&source);
    let before = source.reads();
    let stream = router.open_stream(&billing_target()).unwrap();
    assert_eq!(source.reads(), before + 1);
    let mut transport = RecordingTransport::default();
    for step in 0..10_u8 {
        match step % 3 {
            0 => source.replace(one_ready("billing-agent-b", "10.0.4.18")),
            1 => source.delete(),
            _ => source.replace(corrupted()),
        }
        stream.send(&mut transport, &[step]).unwrap();
    }
    stream.cancel(&mut transport).unwrap();
    assert_eq!(source.reads(), before + 1);
    assert!(transport.destinations().iter().all(|d| d == CAPTURED));
}

// spec: DIR-6
#[test]
fn a_stream_over_a_real_file_keeps_its_target_while_the_file_changes_and_disappears() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router-instance-directory.v1.json");
    fs::write(&path, one_ready("billing-agent-a", "10.0.4.17")).unwrap();
    let source = CountingSource::new(FsSource::new(&path));
    let router = file_router(&source);
    let stream = router.open_stream(&billing_target()).unwrap();
    let reads_at_open = source.reads();
    let mut transport = RecordingTransport::default();

    replace_file(&path, &one_ready("billing-agent-b", "10.0.4.18"));
    stream.send(&mut transport, b"after replace").unwrap();
    fs::write(&path, corrupted()).unwrap();
    stream.send(&mut transport, b"after corruption").unwrap();
    fs::remove_file(&path).unwrap();
    stream.send(&mut transport, b"after deletion").unwrap();
    stream.cancel(&mut transport).unwrap();

    assert_eq!(transport.destinations(), [CAPTURED; 4]);
    assert_eq!(source.reads(), reads_at_open);
    assert!(router.resolve(&billing_target()).is_err());
}

// spec: DIR-6
#[test]
fn finishing_a_stream_returns_the_target_it_captured() {
    let source = MemorySource::new(one_ready("billing-agent-a", "10.0.4.17"));
    let stream = file_router(&source).open_stream(&billing_target()).unwrap();
    let captured = stream.target().clone();
    source.delete();
    assert_eq!(stream.finish(), captured);
}

/// Cancels `stream` on the transport's own fake clock.
fn cancel_on_fake_clock(
    stream: connreg_directory::StreamInvocation,
    transport: &mut RecordingTransport,
) -> Result<u32, CancelError> {
    let clock = transport.clock.clone();
    stream.cancel_with_clock(transport, || clock.now())
}

fn budget() -> Duration {
    Duration::from_millis(CANCEL_MS_MAX)
}

// spec: DIR-6
#[test]
fn cancellation_starts_no_attempt_once_its_time_is_spent() {
    let source = MemorySource::new(one_ready("billing-agent-a", "10.0.4.17"));
    let stream = file_router(&source).open_stream(&billing_target()).unwrap();
    // The first failed attempt uses up the whole budget.
    let mut transport = RecordingTransport {
        cancel_failures: u32::MAX,
        cancel_cost: budget(),
        ..RecordingTransport::default()
    };
    let error = cancel_on_fake_clock(stream, &mut transport).unwrap_err();
    assert!(
        matches!(
            &error,
            CancelError::DeadlinePassed { attempts: 1, after_ms, .. } if *after_ms == CANCEL_MS_MAX
        ),
        "{error}"
    );
    assert_eq!(transport.cancel_attempts(), 1);
    assert!(error.to_string().contains("ms"), "{error}");
}

// spec: DIR-6
#[test]
fn slow_failed_attempts_are_cut_short_by_the_time_bound_before_the_attempt_bound() {
    let source = MemorySource::new(one_ready("billing-agent-a", "10.0.4.17"));
    let stream = file_router(&source).open_stream(&billing_target()).unwrap();
    // Each attempt takes a little more than half the budget: two fit, a
    // third would start past it.
    let mut transport = RecordingTransport {
        cancel_failures: u32::MAX,
        cancel_cost: budget() / 2 + Duration::from_millis(1),
        ..RecordingTransport::default()
    };
    let error = cancel_on_fake_clock(stream, &mut transport).unwrap_err();
    assert!(
        matches!(error, CancelError::DeadlinePassed { attempts: 2, .. }),
        "{error}"
    );
    const { assert!(CANCEL_ATTEMPTS_MAX > 2) };
    assert_eq!(transport.cancel_attempts(), 2);
    assert!(transport.destinations().iter().all(|d| d == CAPTURED));
}

// spec: DIR-6
#[test]
fn each_cancellation_attempt_is_told_the_time_it_has_left() {
    let source = MemorySource::new(one_ready("billing-agent-a", "10.0.4.17"));
    let stream = file_router(&source).open_stream(&billing_target()).unwrap();
    let cost = Duration::from_millis(CANCEL_MS_MAX / 4);
    let mut transport = RecordingTransport {
        cancel_failures: CANCEL_ATTEMPTS_MAX - 1,
        cancel_cost: cost,
        ..RecordingTransport::default()
    };
    assert_eq!(
        cancel_on_fake_clock(stream, &mut transport),
        Ok(CANCEL_ATTEMPTS_MAX)
    );
    let expected: Vec<Duration> = (0..CANCEL_ATTEMPTS_MAX)
        .map(|n| budget() - cost * n)
        .collect();
    assert_eq!(transport.time_left, expected);
}

// spec: DIR-6
#[test]
fn a_real_clock_cancellation_is_given_the_whole_budget_first() {
    let source = MemorySource::new(one_ready("billing-agent-a", "10.0.4.17"));
    let stream = file_router(&source).open_stream(&billing_target()).unwrap();
    let mut transport = RecordingTransport::default();
    assert_eq!(stream.cancel(&mut transport), Ok(1));
    assert_eq!(transport.time_left.len(), 1);
    assert!(transport.time_left[0] <= budget());
    assert!(transport.time_left[0] > Duration::ZERO);
}
