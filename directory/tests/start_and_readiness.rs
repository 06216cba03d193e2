//! Goal: file mode starts only with a readable, valid document, and
//! readiness revalidates the current document and reports only `ok` or
//! `not_ready` (DIR-7).

mod common;

use std::fs;

use common::{
    InstanceOptions, billing_document, billing_target, corrupted, document_json, file_routing,
    one_ready, search_release, target_json, to_bytes,
};
use connreg_directory::{
    DependencyError, DocumentError, FsSource, MemorySource, Readiness, Router, Routing, StartError,
};

fn refusal(result: Result<Router<&MemorySource>, StartError>) -> DependencyError {
    match result {
        Err(StartError::DirectoryUnusable(error)) => error,
        Ok(_) => panic!("the router must refuse to start"),
        Err(other) => panic!("unexpected refusal {other}"),
    }
}

// spec: DIR-7
#[test]
fn file_mode_refuses_to_start_without_a_readable_valid_document() {
    let source = MemorySource::missing();
    assert!(matches!(
        refusal(Router::start(file_routing(&source))),
        DependencyError::Missing { .. }
    ));

    let source = MemorySource::new(one_ready("billing-agent-a", "10.0.4.17"));
    source.deny_reads();
    assert!(matches!(
        refusal(Router::start(file_routing(&source))),
        DependencyError::Unreadable { .. }
    ));

    source.make_unavailable("device not ready");
    assert!(matches!(
        refusal(Router::start(file_routing(&source))),
        DependencyError::Unavailable { .. }
    ));

    for bytes in [Vec::new(), corrupted(), b"{}".to_vec()] {
        source.replace(bytes);
        assert!(matches!(
            refusal(Router::start(file_routing(&source))),
            DependencyError::Malformed { .. }
        ));
    }
}

// spec: DIR-7
#[test]
fn file_mode_refuses_to_start_on_bad_real_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router-instance-directory.v1.json");
    let start = || Router::start(file_routing(FsSource::new(&path)));

    assert!(matches!(
        start(),
        Err(StartError::DirectoryUnusable(
            DependencyError::Missing { .. }
        ))
    ));
    fs::create_dir(&path).unwrap();
    assert!(matches!(
        start(),
        Err(StartError::DirectoryUnusable(
            DependencyError::NotRegularFile {
                kind: "directory",
                ..
            }
        ))
    ));
    fs::remove_dir(&path).unwrap();
    fs::write(&path, "{\"version\": \"router-instance-directory.v2\"}").unwrap();
    assert!(matches!(
        start(),
        Err(StartError::DirectoryUnusable(DependencyError::Malformed {
            error: DocumentError::UnsupportedVersion { .. },
            ..
        }))
    ));
    fs::write(&path, one_ready("billing-agent-a", "10.0.4.17")).unwrap();
    assert!(start().is_ok());
}

// spec: DIR-7
#[cfg(unix)]
#[test]
fn file_mode_refuses_to_start_on_an_unreadable_real_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router-instance-directory.v1.json");
    fs::write(&path, one_ready("billing-agent-a", "10.0.4.17")).unwrap();
    let technique = common::make_unreadable(&path);
    let result = Router::start(file_routing(FsSource::new(&path)));
    assert!(
        matches!(
            result,
            Err(StartError::DirectoryUnusable(
                DependencyError::Unreadable { .. }
            ))
        ),
        "{technique}: {result:?}"
    );
}

// spec: DIR-7
#[test]
fn starting_reads_the_document_once_and_keeps_nothing_of_it() {
    let source = MemorySource::new(one_ready("billing-agent-a", "10.0.4.17"));
    let router = Router::start(file_routing(&source)).unwrap();
    assert_eq!(source.reads(), 1);
    source.delete();
    assert!(router.resolve(&billing_target()).is_err());
}

// spec: DIR-7
#[test]
fn readiness_revalidates_the_current_document_at_every_check() {
    let source = MemorySource::new(one_ready("billing-agent-a", "10.0.4.17"));
    let router = Router::start(file_routing(&source)).unwrap();
    let mut reads = source.reads();
    let mut check = |expected: Readiness| {
        assert_eq!(router.readiness(&billing_target()), expected);
        reads += 1;
        assert_eq!(source.reads(), reads, "one read per readiness check");
    };
    check(Readiness::Ok);
    source.replace(corrupted());
    check(Readiness::NotReady);
    source.replace(one_ready("billing-agent-b", "10.0.4.18"));
    check(Readiness::Ok);
    source.delete();
    check(Readiness::NotReady);
    source.replace(one_ready("billing-agent-a", "10.0.4.17"));
    source.deny_reads();
    check(Readiness::NotReady);
    source.make_unavailable("stale file handle");
    check(Readiness::NotReady);
    source.replace(one_ready("billing-agent-a", "10.0.4.17"));
    check(Readiness::Ok);
}

/// Readiness of the billing release over `document`, and whether resolving
/// it succeeds.
fn readiness_and_resolve(document: Vec<u8>) -> (Readiness, bool) {
    let source = MemorySource::new(document);
    let router = Router::start(file_routing(&source)).unwrap();
    (
        router.readiness(&billing_target()),
        router.resolve(&billing_target()).is_ok(),
    )
}

// spec: DIR-7
// spec: DIR-4
#[test]
fn readiness_is_not_ready_when_no_target_matches_the_release() {
    let unmatched = to_bytes(&document_json(vec![target_json(
        search_release(),
        &[InstanceOptions::ready("search-agent-a", "10.0.5.21")],
    )]));
    assert_eq!(
        readiness_and_resolve(unmatched),
        (Readiness::NotReady, false)
    );
}

// spec: DIR-7
// spec: DIR-4
#[test]
fn readiness_is_not_ready_when_no_endpoint_is_ready() {
    let not_ready = InstanceOptions {
        ready: false,
        ..InstanceOptions::ready("billing-agent-a", "10.0.4.17")
    };
    for document in [billing_document(&[]), billing_document(&[not_ready])] {
        assert_eq!(
            readiness_and_resolve(document),
            (Readiness::NotReady, false)
        );
    }
}

// spec: DIR-7
// spec: DIR-4
#[test]
fn readiness_is_not_ready_when_two_endpoints_are_ready() {
    let two = billing_document(&[
        InstanceOptions::ready("billing-agent-a", "10.0.4.17"),
        InstanceOptions::ready("billing-agent-b", "10.0.4.18"),
    ]);
    assert_eq!(readiness_and_resolve(two), (Readiness::NotReady, false));
}

// spec: DIR-7
#[test]
fn readiness_is_ok_exactly_when_an_invocation_could_be_routed_now() {
    let one = one_ready("billing-agent-a", "10.0.4.17");
    assert_eq!(readiness_and_resolve(one), (Readiness::Ok, true));
}

// spec: DIR-7
#[test]
fn readiness_reports_only_ok_or_not_ready() {
    assert_eq!(Readiness::Ok.to_string(), "ok");
    assert_eq!(Readiness::NotReady.to_string(), "not_ready");
    let router = Router::<MemorySource>::start(Routing::Direct).unwrap();
    assert_eq!(router.readiness(&billing_target()), Readiness::Ok);
}
