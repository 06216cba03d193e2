//! Fuzzes the catalog cursor decoder (CAT-9), through the public
//! `PlannedQuery::plan`. Each input is used three ways:
//!
//! 1. as a cursor a client sent: the decoder does not panic, and refuses it
//!    with `InvalidCursor` and a reason (a valid MAC is out of reach);
//! 2. as the fields of a cursor signed with a key the target knows
//!    (`c2~fuzz~<input>~<mac>`), so that the parsing past the MAC check
//!    (revision, query fingerprint, capability) is reached: whatever the
//!    decoder accepts is exactly what the fields say;
//! 3. as a capability ID and revision: the cursor the registry's own
//!    pagination makes after it is read back as that capability at that
//!    revision, is stale at any other revision, is refused by another query
//!    and by a registry without its key, and an edit of it is never read as
//!    another position.

#![no_main]

use connreg::Error;
use connreg::catalog::{CatalogQuery, CursorKey, CursorKeys, PlannedQuery, Reader};
use connreg::id::CapabilityId;
use connreg::records::{CapabilityDefinition, Revision};
use hmac::{KeyInit, Mac};
use libfuzzer_sys::fuzz_target;

/// The key of the signed mode; the secret is public, as the development
/// key's is.
const FUZZ_KEY_ID: &str = "fuzz";
const FUZZ_SECRET: &[u8] = b"connreg fuzzing cursor key, public";

fuzz_target!(|bytes: &[u8]| {
    let text = String::from_utf8_lossy(bytes);
    as_sent(&text);
    signed(&text);
    round_trip(&text, bytes);
});

/// The query every cursor here belongs to.
fn query(cursor: Option<String>) -> CatalogQuery {
    CatalogQuery {
        cursor,
        ..CatalogQuery::first_page(Reader::Internal {
            include_unbound: false,
        })
    }
}

/// Another query: a cursor of `query` is refused by it.
fn other_query(cursor: Option<String>) -> CatalogQuery {
    CatalogQuery {
        cursor,
        ..CatalogQuery::first_page(Reader::Internal {
            include_unbound: true,
        })
    }
}

fn fuzz_keys() -> CursorKeys {
    CursorKeys {
        current: CursorKey::new(FUZZ_KEY_ID, FUZZ_SECRET).expect("a valid key"),
        previous: None,
    }
}

/// Asserts the refusal of a cursor: `InvalidCursor` with a reason.
fn check_refusal(cursor: &str, error: &Error) {
    let message = error.to_string();
    assert!(
        !message.trim().is_empty(),
        "{cursor:?}: an error without a message"
    );
    match error {
        Error::InvalidCursor { reason } => {
            assert!(!reason.trim().is_empty(), "{cursor:?}: {message:?} has no reason")
        }
        other => panic!("{cursor:?}: refused as {other:?}, not as an invalid cursor"),
    }
}

fn as_sent(text: &str) {
    let keys = CursorKeys::default();
    match PlannedQuery::plan(&query(Some(text.to_owned())), &keys) {
        Ok(planned) => assert!(
            planned.after.is_some(),
            "{text:?}: accepted without a position"
        ),
        Err(error) => check_refusal(text, &error),
    }
}

fn signed(fields: &str) {
    let body = format!("c2~{FUZZ_KEY_ID}~{fields}");
    let mut mac =
        <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(FUZZ_SECRET).expect("any key length");
    mac.update(body.as_bytes());
    let tag: String = mac.finalize().into_bytes()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let cursor = format!("{body}~{tag}");
    match PlannedQuery::plan(&query(Some(cursor.clone())), &fuzz_keys()) {
        Ok(planned) => {
            let (revision, capability) = planned.after.expect("a cursor gives a position");
            let parts: Vec<&str> = fields.split('~').collect();
            let [rev, _fingerprint, last] = parts.as_slice() else {
                panic!("{cursor:?}: accepted with {} fields", parts.len() + 2)
            };
            assert_eq!(
                rev.parse::<u64>().ok(),
                Some(revision.0),
                "{cursor:?}: read at another revision"
            );
            assert_eq!(
                capability.as_str(),
                *last,
                "{cursor:?}: read after another capability"
            );
        }
        Err(error) => check_refusal(&cursor, &error),
    }
}

fn definition(id: CapabilityId) -> CapabilityDefinition {
    CapabilityDefinition {
        summary: format!("{id} (fuzz)"),
        schema: "{}".to_owned(),
        active: true,
        id,
    }
}

fn round_trip(text: &str, bytes: &[u8]) {
    let Ok(first) = CapabilityId::new(text) else {
        return;
    };
    // A second, later capability so that the page has a next one.
    let Ok(second) = CapabilityId::new(format!("{text}.z")) else {
        return;
    };
    let revision = Revision(
        bytes
            .iter()
            .fold(0u64, |h, b| h.rotate_left(5) ^ u64::from(*b)),
    );
    let keys = CursorKeys::default();
    let planned = PlannedQuery::plan(
        &CatalogQuery {
            page_items: Some(1),
            ..query(None)
        },
        &keys,
    )
    .expect("a first page plans");
    let page = planned.paginate(
        revision,
        [definition(first.clone()), definition(second)],
    );
    assert_eq!(page.entries.len(), 1, "{text:?}: one item a page");
    let cursor = page.next.expect("a page with more has a cursor");

    // Read back: the same position, at the same revision.
    let again = PlannedQuery::plan(&query(Some(cursor.clone())), &keys)
        .unwrap_or_else(|e| panic!("{cursor:?}: the registry's own cursor is refused: {e}"));
    assert_eq!(
        again.after,
        Some((revision, first.clone())),
        "{cursor:?}: read back as another position"
    );
    assert_eq!(again.check_revision(revision), Ok(()));
    assert_eq!(
        again.check_revision(Revision(revision.0.wrapping_add(1))),
        Err(Error::StaleCursor),
        "{cursor:?}: not stale at another revision"
    );

    // During a rotation the old key still reads it; without it, refused.
    let rotated = CursorKeys {
        current: CursorKey::new("next", FUZZ_SECRET).expect("a valid key"),
        previous: Some(keys.current.clone()),
    };
    let read = PlannedQuery::plan(&query(Some(cursor.clone())), &rotated)
        .unwrap_or_else(|e| panic!("{cursor:?}: refused during a rotation: {e}"));
    assert_eq!(read.after, again.after);
    match PlannedQuery::plan(&query(Some(cursor.clone())), &fuzz_keys()) {
        Ok(_) => panic!("{cursor:?}: accepted without its key"),
        Err(error) => check_refusal(&cursor, &error),
    }

    // Another query refuses it.
    match PlannedQuery::plan(&other_query(Some(cursor.clone())), &keys) {
        Ok(_) => panic!("{cursor:?}: accepted by another query"),
        Err(error) => check_refusal(&cursor, &error),
    }

    // An edit of one character is never read as another position.
    let at = bytes.len() % cursor.len();
    if let Some(old) = cursor[at..].chars().next() {
        let new = if old == '0' { '1' } else { '0' };
        let mut edited = cursor.clone();
        edited.replace_range(at..at + old.len_utf8(), &new.to_string());
        match PlannedQuery::plan(&query(Some(edited.clone())), &keys) {
            Ok(planned) => assert_eq!(
                planned.after, again.after,
                "{edited:?}: an edited cursor read as another position"
            ),
            Err(error) => check_refusal(&edited, &error),
        }
    }
}
