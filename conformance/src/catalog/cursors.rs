//! Catalog cursors: signed, pinned to one revision, stale after a
//! publication, and refused when tampered with, foreign or forged; key
//! rotation keeps cursors of the previous key readable (CAT-9, CAT-10).

use connreg::contracts::CatalogRead;
use connreg::*;

use crate::Harness;
use crate::fixture::{self, FleetOptions, acme, crm_create, globex};
use crate::support::assert_err;

use super::{internal, query};

// spec: CAT-9
/// During a key rotation a cursor signed with the previous key still reads
/// its next page; a registry that no longer holds that key answers
/// InvalidCursor; a configuration whose two keys share an id is refused.
pub async fn cursors_signed_with_the_previous_key_survive_a_rotation<H: Harness>(harness: &H) {
    use connreg::catalog::{CursorKey, CursorKeys};
    use connreg::limits::CIRCUIT_THRESHOLD_MAX;

    let old_key = CursorKey::new("key-2025", &[7; 32]).unwrap();
    let new_key = CursorKey::new("key-2026", &[9; 32]).unwrap();
    assert_eq!((old_key.id(), new_key.id()), ("key-2025", "key-2026"));
    let with_keys = |current: &CursorKey, previous: Option<&CursorKey>| FleetOptions {
        config: RegistryConfig {
            cursor_keys: CursorKeys {
                current: current.clone(),
                previous: previous.cloned(),
            },
            ..RegistryConfig::default()
        },
        ..FleetOptions::default()
    };
    let q = CatalogQuery {
        page_items: Some(1),
        ..query(Reader::Tenant(acme()))
    };

    // The same fleet, at the same revision, in three registries.
    let before = fixture::open(harness, with_keys(&old_key, None)).await;
    let rotating = fixture::open(harness, with_keys(&new_key, Some(&old_key))).await;
    let after = fixture::open(harness, with_keys(&new_key, None)).await;
    let first = before.store.catalog_page(q.clone()).await.unwrap();
    let next = CatalogQuery {
        cursor: first.next.clone(),
        ..q.clone()
    };
    let second = before.store.catalog_page(next.clone()).await.unwrap();
    assert_eq!(
        rotating
            .store
            .catalog_page(next.clone())
            .await
            .unwrap()
            .entries,
        second.entries
    );
    assert_err!(
        after.store.catalog_page(next).await,
        Error::InvalidCursor { .. }
    );
    // The rotating registry signs with the new key only.
    let renewed = rotating.store.catalog_page(q.clone()).await.unwrap();
    let next = CatalogQuery {
        cursor: renewed.next.clone(),
        ..q
    };
    assert_eq!(
        after
            .store
            .catalog_page(next.clone())
            .await
            .unwrap()
            .entries,
        second.entries
    );
    assert_err!(
        before.store.catalog_page(next).await,
        Error::InvalidCursor { .. }
    );

    // Configuration checks, shared by every backend.
    let config = |previous: Option<&CursorKey>, threshold: u32| RegistryConfig {
        circuit: CircuitPolicy {
            enabled: true,
            threshold,
        },
        cursor_keys: CursorKeys {
            current: new_key.clone(),
            previous: previous.cloned(),
        },
        ..RegistryConfig::default()
    };
    assert!(
        config(Some(&old_key), CIRCUIT_THRESHOLD_MAX)
            .validate()
            .is_ok()
    );
    let same_id = CursorKey::new("key-2026", &[1; 32]).unwrap();
    assert_err!(
        config(Some(&same_id), 3).validate(),
        Error::InvalidRequest { .. }
    );
    assert_err!(config(None, 0).validate(), Error::InvalidRequest { .. });
    assert_err!(
        config(None, CIRCUIT_THRESHOLD_MAX + 1).validate(),
        Error::LimitExceeded { max, .. } if max == u64::from(CIRCUIT_THRESHOLD_MAX)
    );
}

// spec: CAT-9
/// A cursor presented after a publication fails with StaleCursor; the
/// caller restarts from the first page at the new revision.
pub async fn cursor_after_a_publication_is_stale<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let q = CatalogQuery {
        page_items: Some(1),
        ..query(Reader::Tenant(acme()))
    };
    let first = s.store.catalog_page(q.clone()).await.unwrap();
    let cursor = first.next.clone().expect("more pages");
    let second = s
        .store
        .catalog_page(CatalogQuery {
            cursor: Some(cursor.clone()),
            ..q.clone()
        })
        .await
        .unwrap();
    assert_eq!(second.revision, first.revision);
    assert_eq!(second.entries[0].capability.as_str(), "crm.contact.read");

    s.publish(vec![Change::UpsertType(s.fleet.connector_type("ty-mail"))])
        .await
        .unwrap();
    assert_err!(
        s.store
            .catalog_page(CatalogQuery {
                cursor: Some(cursor),
                ..q.clone()
            })
            .await,
        Error::StaleCursor
    );
    let restarted = s.store.catalog_page(q).await.unwrap();
    assert_eq!(restarted.revision, Revision(2));
    assert_eq!(restarted.entries[0].capability, crm_create());
}

// spec: CAT-9, CAT-10
/// Malformed, tampered, oversized and foreign cursors get InvalidCursor
/// and reveal nothing; none of them changes anything.
pub async fn tampered_or_foreign_cursors_are_rejected<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let q = CatalogQuery {
        page_items: Some(1),
        ..query(Reader::Tenant(acme()))
    };
    let cursor = s
        .store
        .catalog_page(q.clone())
        .await
        .unwrap()
        .next
        .expect("more pages");
    let before = s.observe().await;
    let mut bad: Vec<String> = vec![
        String::new(),
        "~".into(),
        "garbage".into(),
        "\u{0}\u{1}".into(),
        "x".repeat(10_000),
        format!("{cursor}x"),
        cursor[1..].to_string(),
    ];
    // Flip each character in turn: any edit must be caught.
    for i in 0..cursor.len() {
        let mut bytes = cursor.clone().into_bytes();
        bytes[i] = if bytes[i] == b'0' { b'1' } else { b'0' };
        if let Ok(t) = String::from_utf8(bytes)
            && t != cursor
        {
            bad.push(t);
        }
    }
    for c in bad {
        let result = s
            .store
            .catalog_page(CatalogQuery {
                cursor: Some(c.clone()),
                ..q.clone()
            })
            .await;
        assert_err!(
            result,
            Error::InvalidCursor { .. } | Error::StaleCursor,
            "cursor {c:?}"
        );
    }
    // Another reader or another filter cannot reuse the cursor.
    for other in [
        CatalogQuery {
            cursor: Some(cursor.clone()),
            ..CatalogQuery {
                page_items: Some(1),
                ..query(Reader::Tenant(globex()))
            }
        },
        CatalogQuery {
            cursor: Some(cursor.clone()),
            search: Some("crm".into()),
            ..q.clone()
        },
        CatalogQuery {
            cursor: Some(cursor.clone()),
            ..query(internal(true))
        },
    ] {
        assert_err!(
            s.store.catalog_page(other).await,
            Error::InvalidCursor { .. }
        );
    }
    s.assert_unchanged(&before, "bad cursors").await;
}

// spec: CAT-9
/// A client that edits a cursor's revision past a publication and signs it
/// again with everything it can know (the unkeyed digest of the first
/// cursor format, or a MAC under a key of its own, with the registry's key
/// id) gets InvalidCursor: neither a page nor StaleCursor.
pub async fn forged_cursors_are_invalid<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let q = CatalogQuery {
        page_items: Some(1),
        ..query(Reader::Tenant(acme()))
    };
    let cursor = s
        .store
        .catalog_page(q.clone())
        .await
        .unwrap()
        .next
        .expect("more pages");
    let stale_at = s.store.catalog_revision().await.unwrap();
    s.publish(vec![Change::UpsertType(s.fleet.connector_type("ty-mail"))])
        .await
        .unwrap();
    let now = s.store.catalog_revision().await.unwrap();
    assert_ne!(now, stale_at);
    // The honest cursor is stale now.
    assert_err!(
        s.store
            .catalog_page(CatalogQuery {
                cursor: Some(cursor.clone()),
                ..q.clone()
            })
            .await,
        Error::StaleCursor
    );
    for forged in forgeries(&cursor, stale_at.0, now.0) {
        let answer = s
            .store
            .catalog_page(CatalogQuery {
                cursor: Some(forged.clone()),
                ..q.clone()
            })
            .await;
        assert_err!(
            answer,
            Error::InvalidCursor { .. },
            "forged cursor {forged:?}"
        );
    }
}

/// `cursor` with its revision field `from` replaced by `to`, re-signed
/// every way a client could: by the unkeyed digest (first format), and by
/// HMAC-SHA-256 under keys of its own.
fn forgeries(cursor: &str, from: u64, to: u64) -> Vec<String> {
    use hmac::{KeyInit, Mac};
    use md5::{Digest, Md5};
    let Some((body, _)) = cursor.rsplit_once('~') else {
        return vec![];
    };
    let edited: Vec<String> = body
        .split('~')
        .map(|part| {
            if part == from.to_string() {
                to.to_string()
            } else {
                part.to_owned()
            }
        })
        .collect();
    let edited = edited.join("~");
    assert_ne!(edited, body, "the cursor carries its revision");
    let hex = |bytes: &[u8]| -> String { bytes.iter().map(|b| format!("{b:02x}")).collect() };
    let mut out = Vec::new();
    // The first format's check: MD5 over the length-prefixed body.
    let mut md5 = Md5::new();
    md5.update((edited.len() as u64).to_be_bytes());
    md5.update(edited.as_bytes());
    let digest = hex(&md5.finalize());
    for len in [8, 32] {
        out.push(format!("{edited}~{}", &digest[..len]));
    }
    // A MAC under keys the client chose, including empty and the text the
    // key id suggests.
    for key in [&b""[..], b"dev", b"connreg", &[0u8; 32]] {
        let mut mac =
            <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key");
        mac.update(edited.as_bytes());
        let tag = hex(&mac.finalize().into_bytes());
        out.push(format!("{edited}~{}", &tag[..32]));
    }
    out
}
