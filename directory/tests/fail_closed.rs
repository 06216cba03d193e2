//! Goal: an invalid update or a deleted document fails closed: no
//! last-known-good copy, no other source, no return to direct mode; only a
//! valid document restores routing (DIR-8).

mod common;

use std::fs;

use common::{
    billing_target, corrupted, destination_of, file_router, one_ready, replace_file, to_bytes,
};
use connreg_directory::{
    DependencyError, DocumentError, FsSource, MemorySource, Readiness, ResolveError,
};
use serde_json::json;

fn assert_fails_closed(result: Result<connreg_directory::ResolvedTarget, ResolveError>) {
    match result {
        Err(ResolveError::Dependency(_)) => {}
        Ok(resolved) => panic!(
            "expected a failure, got a route to {} ({:?})",
            resolved.destination(),
            resolved.route()
        ),
        Err(other) => panic!("expected a dependency failure, got {other}"),
    }
}

// spec: DIR-8
#[test]
fn an_invalid_update_fails_closed_without_a_last_known_good_copy() {
    let source = MemorySource::new(one_ready("billing-agent-a", "10.0.4.17"));
    let router = file_router(&source);
    assert!(router.resolve(&billing_target()).is_ok());

    let invalid_updates = [
        corrupted(),
        to_bytes(&json!({ "version": "router-instance-directory.v2", "targets": [] })),
        String::from_utf8(one_ready("billing-agent-a", "10.0.4.17"))
            .unwrap()
            .replace("8080", "0")
            .into_bytes(),
        String::from_utf8(one_ready("billing-agent-a", "10.0.4.17"))
            .unwrap()
            .replace("\"ready\": true", "\"ready\": true, \"weight\": 1")
            .into_bytes(),
    ];
    for update in invalid_updates {
        source.replace(update);
        assert_fails_closed(router.resolve(&billing_target()));
        assert_eq!(router.readiness(&billing_target()), Readiness::NotReady);
        assert!(router.open_stream(&billing_target()).is_err());
    }
}

// spec: DIR-8
#[test]
fn a_deleted_document_fails_closed_and_never_returns_to_direct_mode() {
    let source = MemorySource::new(one_ready("billing-agent-a", "10.0.4.17"));
    let router = file_router(&source);
    source.delete();
    for _ in 0..3 {
        let error = router.resolve(&billing_target()).unwrap_err();
        assert!(matches!(
            error,
            ResolveError::Dependency(DependencyError::Missing { .. })
        ));
    }
    assert_eq!(router.readiness(&billing_target()), Readiness::NotReady);
}

// spec: DIR-8
#[test]
fn only_a_valid_document_restores_routing_and_it_is_used_as_written() {
    let source = MemorySource::new(one_ready("billing-agent-a", "10.0.4.17"));
    let router = file_router(&source);
    source.replace(corrupted());
    assert_fails_closed(router.resolve(&billing_target()));
    source.replace(one_ready("billing-agent-b", "10.0.4.18"));
    assert_eq!(router.readiness(&billing_target()), Readiness::Ok);
    assert_eq!(
        destination_of(&router.resolve(&billing_target()).unwrap()),
        "10.0.4.18:8080"
    );
}

// spec: DIR-8
#[test]
fn a_real_file_updated_invalidly_then_deleted_fails_closed_until_a_valid_one_returns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router-instance-directory.v1.json");
    fs::write(&path, one_ready("billing-agent-a", "10.0.4.17")).unwrap();
    let router = file_router(FsSource::new(&path));
    assert!(router.resolve(&billing_target()).is_ok());

    replace_file(&path, &corrupted());
    assert!(matches!(
        router.resolve(&billing_target()),
        Err(ResolveError::Dependency(DependencyError::Malformed {
            error: DocumentError::Syntax { .. },
            ..
        }))
    ));
    assert_eq!(router.readiness(&billing_target()), Readiness::NotReady);

    fs::remove_file(&path).unwrap();
    assert!(matches!(
        router.resolve(&billing_target()),
        Err(ResolveError::Dependency(DependencyError::Missing { .. }))
    ));
    assert_eq!(router.readiness(&billing_target()), Readiness::NotReady);

    replace_file(&path, &one_ready("billing-agent-b", "10.0.4.18"));
    assert_eq!(router.readiness(&billing_target()), Readiness::Ok);
    assert_eq!(
        destination_of(&router.resolve(&billing_target()).unwrap()),
        "10.0.4.18:8080"
    );
}

// spec: DIR-8
#[test]
fn a_valid_copy_beside_a_deleted_document_is_never_used() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router-instance-directory.v1.json");
    let valid = one_ready("billing-agent-a", "10.0.4.17");
    fs::write(&path, &valid).unwrap();
    for name in [
        "router-instance-directory.v1.json.bak",
        "router-instance-directory.v1.json~",
        "router-instance-directory.json",
        "directory.json",
    ] {
        fs::write(dir.path().join(name), &valid).unwrap();
    }
    let router = file_router(FsSource::new(&path));
    fs::remove_file(&path).unwrap();
    assert!(matches!(
        router.resolve(&billing_target()),
        Err(ResolveError::Dependency(DependencyError::Missing { .. }))
    ));
}
