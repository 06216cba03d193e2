//! Goal: each file-mode invocation reads exactly one snapshot of the
//! document, and every kind of bad directory state fails that invocation as
//! its own dependency failure, with in-memory and real files (DIR-3).

mod common;

use std::cell::Cell;
use std::fs;

use common::{
    CountingSource, InstanceOptions, billing_document, billing_target, corrupted, destination_of,
    file_router, one_ready, replace_file, search_release, target_json, to_bytes,
};
use connreg_directory::limits::DOCUMENT_BYTES_MAX;
use connreg_directory::{
    DependencyError, DocumentError, DocumentSource, FsSource, MemorySource, ResolveError,
    SourceError,
};

fn dependency(result: Result<connreg_directory::ResolvedTarget, ResolveError>) -> DependencyError {
    match result {
        Err(ResolveError::Dependency(error)) => error,
        other => panic!("expected a dependency failure, got {other:?}"),
    }
}

// spec: DIR-3
#[test]
fn each_invocation_reads_the_document_exactly_once() {
    let source = MemorySource::new(one_ready("billing-agent-a", "10.0.4.17"));
    let router = file_router(&source);
    let after_start = source.reads();
    assert_eq!(after_start, 1);
    for n in 1..=5 {
        router.resolve(&billing_target()).unwrap();
        assert_eq!(source.reads(), after_start + n);
    }
    source.delete();
    let _ = router.resolve(&billing_target());
    assert_eq!(
        source.reads(),
        after_start + 6,
        "a failed read is one read too"
    );
}

// spec: DIR-3
#[test]
fn a_change_between_invocations_is_seen_by_the_next_invocation() {
    let source = MemorySource::new(one_ready("billing-agent-a", "10.0.4.17"));
    let router = file_router(&source);
    assert_eq!(
        destination_of(&router.resolve(&billing_target()).unwrap()),
        "10.0.4.17:8080"
    );
    source.replace(one_ready("billing-agent-b", "10.0.4.18"));
    assert_eq!(
        destination_of(&router.resolve(&billing_target()).unwrap()),
        "10.0.4.18:8080"
    );
}

/// A source whose document changes at every read, as if it were rewritten
/// while an invocation runs.
struct ChangingSource {
    reads: Cell<u64>,
}

impl DocumentSource for ChangingSource {
    fn read_document(&self) -> Result<Vec<u8>, SourceError> {
        let n = self.reads.get();
        self.reads.set(n + 1);
        Ok(if n.is_multiple_of(2) {
            one_ready("billing-agent-a", "10.0.4.17")
        } else {
            one_ready("billing-agent-b", "10.0.4.18")
        })
    }

    fn location(&self) -> &str {
        "changing"
    }
}

// spec: DIR-3
#[test]
fn an_invocation_uses_one_snapshot_even_when_the_document_changes_at_every_read() {
    let source = ChangingSource {
        reads: Cell::new(0),
    };
    let router = file_router(&source);
    for expected in ["10.0.4.18:8080", "10.0.4.17:8080", "10.0.4.18:8080"] {
        let before = source.reads.get();
        let resolved = router.resolve(&billing_target()).unwrap();
        assert_eq!(source.reads.get(), before + 1);
        assert_eq!(destination_of(&resolved), expected);
    }
}

// spec: DIR-3
#[test]
fn each_bad_state_fails_the_invocation_with_its_own_dependency_error() {
    let source = MemorySource::new(one_ready("billing-agent-a", "10.0.4.17"));
    let router = file_router(&source);
    let target = billing_target();

    source.delete();
    assert!(matches!(
        dependency(router.resolve(&target)),
        DependencyError::Missing { .. }
    ));

    source.replace(one_ready("billing-agent-a", "10.0.4.17"));
    source.deny_reads();
    assert!(matches!(
        dependency(router.resolve(&target)),
        DependencyError::Unreadable { .. }
    ));

    source.make_unavailable("input/output error");
    let error = dependency(router.resolve(&target));
    assert!(
        matches!(&error, DependencyError::Unavailable { reason, .. } if reason == "input/output error"),
        "{error}"
    );

    source.replace(corrupted());
    assert!(matches!(
        dependency(router.resolve(&target)),
        DependencyError::Malformed {
            error: DocumentError::Syntax { .. },
            ..
        }
    ));

    source.replace(to_bytes(&common::document_json(vec![target_json(
        search_release(),
        &[InstanceOptions::default()],
    )])));
    assert!(matches!(
        dependency(router.resolve(&target)),
        DependencyError::Unmatched { .. }
    ));

    source.replace(one_ready("billing-agent-a", "10.0.4.17"));
    assert!(router.resolve(&target).is_ok());
}

// spec: DIR-3
#[test]
fn every_dependency_error_says_which_failure_and_where() {
    let source = MemorySource::new(one_ready("billing-agent-a", "10.0.4.17"));
    let router = file_router(&source);
    let target = billing_target();
    source.delete();
    let message = dependency(router.resolve(&target)).to_string();
    assert!(message.contains("missing"), "{message}");
    assert!(message.contains(source.location()), "{message}");
    source.deny_reads();
    let message = dependency(router.resolve(&target)).to_string();
    assert!(message.contains("permission denied"), "{message}");
    let error = router.resolve(&target).unwrap_err();
    assert!(error.is_dependency_failure());
}

// spec: DIR-3
#[test]
fn a_release_that_differs_in_any_identity_field_is_unmatched() {
    let source = MemorySource::new(one_ready("billing-agent-a", "10.0.4.17"));
    let router = file_router(&source);
    let edits: [fn(&mut connreg_directory::ReleaseIdentity); 6] = [
        |r| r.agent_id.push('x'),
        |r| r.card_version = "5".into(),
        |r| r.release_id.push('x'),
        |r| r.card_digest = "sha256:00".into(),
        |r| r.capability = "invoice.void".into(),
        |r| r.credential_audience.push('/'),
    ];
    for edit in edits {
        let mut target = billing_target();
        edit(&mut target.release);
        assert!(matches!(
            dependency(router.resolve(&target)),
            DependencyError::Unmatched { .. }
        ));
    }
}

// spec: DIR-3
#[test]
fn a_real_file_changed_between_invocations_is_seen_by_the_next_invocation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router-instance-directory.v1.json");
    fs::write(&path, one_ready("billing-agent-a", "10.0.4.17")).unwrap();
    let source = CountingSource::new(FsSource::new(&path));
    let router = file_router(&source);
    assert_eq!(
        destination_of(&router.resolve(&billing_target()).unwrap()),
        "10.0.4.17:8080"
    );
    replace_file(&path, &one_ready("billing-agent-b", "10.0.4.18"));
    assert_eq!(
        destination_of(&router.resolve(&billing_target()).unwrap()),
        "10.0.4.18:8080"
    );
    // In-place rewrite, not only rename.
    fs::write(&path, one_ready("billing-agent-c", "10.0.4.19")).unwrap();
    assert_eq!(
        destination_of(&router.resolve(&billing_target()).unwrap()),
        "10.0.4.19:8080"
    );
    assert_eq!(source.reads(), 4, "one read at start, one per invocation");
}

// spec: DIR-3
#[test]
fn bad_real_files_fail_the_invocation_with_their_own_dependency_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router-instance-directory.v1.json");
    fs::write(&path, one_ready("billing-agent-a", "10.0.4.17")).unwrap();
    let router = file_router(FsSource::new(&path));
    let target = billing_target();

    fs::remove_file(&path).unwrap();
    let error = dependency(router.resolve(&target));
    assert!(
        matches!(&error, DependencyError::Missing { location } if location == &path.display().to_string()),
        "{error}"
    );

    fs::create_dir(&path).unwrap();
    assert!(matches!(
        dependency(router.resolve(&target)),
        DependencyError::NotRegularFile {
            kind: "directory",
            ..
        }
    ));
    fs::remove_dir(&path).unwrap();

    let bytes = one_ready("billing-agent-a", "10.0.4.17");
    fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
    assert!(matches!(
        dependency(router.resolve(&target)),
        DependencyError::Malformed {
            error: DocumentError::Syntax { .. },
            ..
        }
    ));

    let mut huge = bytes.clone();
    huge.resize(DOCUMENT_BYTES_MAX + 4096, b' ');
    fs::write(&path, &huge).unwrap();
    assert!(matches!(
        dependency(router.resolve(&target)),
        DependencyError::Malformed {
            error: DocumentError::TooLarge { .. },
            ..
        }
    ));

    fs::write(
        &path,
        billing_document(&[InstanceOptions {
            address: "10.0.0.256".into(),
            ..InstanceOptions::default()
        }]),
    )
    .unwrap();
    let error = dependency(router.resolve(&target));
    let DependencyError::Malformed { error: inner, .. } = &error else {
        panic!("expected a malformed document, got {error}");
    };
    assert_eq!(inner.path(), "targets[0].instances[0].address");

    fs::write(&path, &bytes).unwrap();
    assert!(router.resolve(&target).is_ok());
}

// spec: DIR-3
#[cfg(unix)]
#[test]
fn an_unreadable_real_file_fails_the_invocation_as_unreadable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router-instance-directory.v1.json");
    fs::write(&path, one_ready("billing-agent-a", "10.0.4.17")).unwrap();
    let router = file_router(FsSource::new(&path));
    let technique = common::make_unreadable(&path);
    let error = dependency(router.resolve(&billing_target()));
    assert!(
        matches!(error, DependencyError::Unreadable { .. }),
        "{technique}: {error}"
    );
}
