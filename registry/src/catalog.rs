//! Catalog reads: who reads, what they ask, pages and cursors (CAT-5..CAT-10).
//!
//! Cursors are opaque to callers. Inside they are versioned text,
//! `c2~<key id>~<revision>~<query fingerprint>~<last capability id>~<mac>`,
//! where the MAC is HMAC-SHA-256 of the rest under the registry's cursor
//! key ([`CursorKeys`], from [`RegistryConfig`](crate::RegistryConfig)),
//! truncated to 128 bits: a caller who edits any part cannot make a valid
//! one without the secret (CAT-9). A cursor that fails to parse, fails its
//! MAC, names an unknown key, or was made by a different query is
//! [`Error::InvalidCursor`]; one made at another revision is
//! [`Error::StaleCursor`]. A cursor carries no tenant data: reads are
//! always scoped by the reader, never by the cursor.
//!
//! # Rotating the cursor key
//!
//! Give every registry process `current` = the new key and `previous` =
//! the old one; cursors signed with either are accepted, new ones are
//! signed with the new key. Once every process runs the new configuration
//! and the overlap has lasted longer than a client keeps a cursor (a
//! cursor is stale after the next publication anyway), drop `previous`.

use hmac::{KeyInit, Mac};
use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::id::{CapabilityId, ProfileId, TenantId};
use crate::limits::{
    CURSOR_BYTES_MAX, PAGE_BYTES_DEFAULT, PAGE_BYTES_MAX, PAGE_BYTES_MIN, PAGE_ITEMS_DEFAULT,
    PAGE_ITEMS_MAX, SEARCH_TEXT_BYTES_MAX,
};
use crate::records::{CapabilityDefinition, Revision};

/// Who is reading the catalog (CAT-5..CAT-7).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reader {
    /// A verified tenant: sees only what it can call.
    Tenant(TenantId),
    /// An internal administrator with the explicit internal permission.
    Internal {
        /// Also list active definitions that no binding uses (CAT-6).
        include_unbound: bool,
    },
    /// Neither: sees nothing (CAT-7).
    Anonymous,
}

/// One catalog read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogQuery {
    /// Who reads.
    pub reader: Reader,
    /// ASCII-case-insensitive substring of the capability ID or summary.
    pub search: Option<String>,
    /// Only this capability.
    pub capability: Option<CapabilityId>,
    /// Only capabilities some eligible version supports with this profile.
    pub profile: Option<ProfileId>,
    /// Most items on the page (default [`PAGE_ITEMS_DEFAULT`]).
    pub page_items: Option<u32>,
    /// Most serialized bytes on the page (default [`PAGE_BYTES_DEFAULT`]).
    pub page_bytes: Option<u32>,
    /// Where to continue, from the previous page.
    pub cursor: Option<String>,
}

impl CatalogQuery {
    /// A first-page query for `reader` with defaults.
    pub fn first_page(reader: Reader) -> CatalogQuery {
        CatalogQuery {
            reader,
            search: None,
            capability: None,
            profile: None,
            page_items: None,
            page_bytes: None,
            cursor: None,
        }
    }
}

/// Most bytes of a cursor key's id.
pub const CURSOR_KEY_ID_BYTES_MAX: usize = 16;
/// Fewest bytes of a cursor key's secret.
pub const CURSOR_SECRET_BYTES_MIN: usize = 16;
/// Most bytes of a cursor key's secret.
pub const CURSOR_SECRET_BYTES_MAX: usize = 64;

/// One key cursors are signed with: an id, written into every cursor so a
/// rotated key is still recognized, and its secret.
#[derive(Clone, PartialEq, Eq)]
pub struct CursorKey {
    id: String,
    secret: Vec<u8>,
}

impl std::fmt::Debug for CursorKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CursorKey")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl CursorKey {
    /// A key: `id` is 1 to [`CURSOR_KEY_ID_BYTES_MAX`] ASCII letters,
    /// digits, `-` or `_`; `secret` is [`CURSOR_SECRET_BYTES_MIN`] to
    /// [`CURSOR_SECRET_BYTES_MAX`] bytes, random and shared by every
    /// process of one registry.
    pub fn new(id: &str, secret: &[u8]) -> Result<CursorKey> {
        if id.is_empty()
            || id.len() > CURSOR_KEY_ID_BYTES_MAX
            || !id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(Error::invalid(
                "cursor key id",
                format!("must be 1 to {CURSOR_KEY_ID_BYTES_MAX} of [A-Za-z0-9_-]"),
            ));
        }
        if secret.len() < CURSOR_SECRET_BYTES_MIN {
            return Err(Error::invalid(
                "cursor key secret",
                format!("must be at least {CURSOR_SECRET_BYTES_MIN} bytes"),
            ));
        }
        if secret.len() > CURSOR_SECRET_BYTES_MAX {
            return Err(Error::limit("cursor key secret", CURSOR_SECRET_BYTES_MAX));
        }
        Ok(CursorKey {
            id: id.to_owned(),
            secret: secret.to_vec(),
        })
    }

    /// The key's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    fn mac(&self, body: &str) -> hmac::Hmac<sha2::Sha256> {
        // Any key length is valid for HMAC.
        let mut mac = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(&self.secret)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        mac.update(body.as_bytes());
        mac
    }
}

/// The id of the development key [`CursorKeys::default`] signs with.
pub const DEVELOPMENT_CURSOR_KEY_ID: &str = "dev";

/// The keys of one registry's cursors (CAT-9): new cursors are signed with
/// `current`; cursors signed with `previous` are still accepted, for the
/// overlap of a rotation (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CursorKeys {
    /// Signs new cursors and checks them.
    pub current: CursorKey,
    /// Still checks cursors during a rotation.
    pub previous: Option<CursorKey>,
}

impl Default for CursorKeys {
    /// A fixed development key, id [`DEVELOPMENT_CURSOR_KEY_ID`]: anyone
    /// who reads this source can sign cursors with it. Tests and embedded
    /// single-process use only; a deployment configures its own secret.
    fn default() -> CursorKeys {
        CursorKeys {
            current: CursorKey {
                id: DEVELOPMENT_CURSOR_KEY_ID.into(),
                secret: b"connreg development cursor key; never deploy".to_vec(),
            },
            previous: None,
        }
    }
}

impl CursorKeys {
    /// Checks the two keys can be told apart.
    pub fn validate(&self) -> Result<()> {
        if self
            .previous
            .as_ref()
            .is_some_and(|p| p.id == self.current.id)
        {
            return Err(Error::invalid(
                "cursor keys",
                "the previous key must have another id than the current one",
            ));
        }
        Ok(())
    }

    fn by_id(&self, id: &str) -> Option<&CursorKey> {
        std::iter::once(&self.current)
            .chain(self.previous.as_ref())
            .find(|k| k.id == id)
    }
}

/// A validated query, with its limits resolved and its cursor decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedQuery {
    /// Who reads.
    pub reader: Reader,
    /// Lowercased search text.
    pub search: Option<String>,
    /// Exact capability filter.
    pub capability: Option<CapabilityId>,
    /// Profile filter.
    pub profile: Option<ProfileId>,
    /// Page size in items.
    pub page_items: u32,
    /// Page size in bytes.
    pub page_bytes: u32,
    /// Where to continue and at which revision, when a cursor was given.
    pub after: Option<(Revision, CapabilityId)>,
    fingerprint: u64,
    keys: CursorKeys,
}

impl PlannedQuery {
    /// Validates a query: every limit is applied here (CAT-10).
    /// `keys` sign the next page's cursor and check the given one.
    pub fn plan(query: &CatalogQuery, keys: &CursorKeys) -> Result<PlannedQuery> {
        let search = match &query.search {
            None => None,
            Some(s) if s.len() > SEARCH_TEXT_BYTES_MAX => {
                return Err(Error::limit("search text bytes", SEARCH_TEXT_BYTES_MAX));
            }
            Some(s) if s.chars().any(char::is_control) => {
                return Err(Error::invalid(
                    "search text",
                    "must not contain control characters",
                ));
            }
            Some(s) if s.is_empty() => None,
            Some(s) => Some(s.to_ascii_lowercase()),
        };
        let page_items = query.page_items.unwrap_or(PAGE_ITEMS_DEFAULT);
        if page_items == 0 {
            return Err(Error::invalid("page items", "must be at least 1"));
        }
        if page_items > PAGE_ITEMS_MAX {
            return Err(Error::limit("page items", PAGE_ITEMS_MAX as usize));
        }
        let page_bytes = query.page_bytes.unwrap_or(PAGE_BYTES_DEFAULT);
        if page_bytes < PAGE_BYTES_MIN {
            return Err(Error::invalid(
                "page bytes",
                format!("must be at least {PAGE_BYTES_MIN}"),
            ));
        }
        if page_bytes > PAGE_BYTES_MAX {
            return Err(Error::limit("page bytes", PAGE_BYTES_MAX as usize));
        }
        let fingerprint = fingerprint(&query.reader, &search, &query.capability, &query.profile);
        let after = match &query.cursor {
            None => None,
            Some(c) => Some(decode_cursor(c, fingerprint, keys)?),
        };
        Ok(PlannedQuery {
            reader: query.reader.clone(),
            search,
            capability: query.capability.clone(),
            profile: query.profile.clone(),
            page_items,
            page_bytes,
            after,
            fingerprint,
            keys: keys.clone(),
        })
    }

    /// Checks the cursor's revision against the current one (CAT-9).
    pub fn check_revision(&self, current: Revision) -> Result<()> {
        match &self.after {
            Some((rev, _)) if *rev != current => Err(Error::StaleCursor),
            _ => Ok(()),
        }
    }

    /// The capability to continue after, if any.
    pub fn after_capability(&self) -> Option<&CapabilityId> {
        self.after.as_ref().map(|(_, c)| c)
    }

    /// True when `definition` passes the search text filter.
    pub fn matches_search(&self, definition: &CapabilityDefinition) -> bool {
        match &self.search {
            None => true,
            Some(s) => {
                definition
                    .id
                    .as_str()
                    .to_ascii_lowercase()
                    .contains(s.as_str())
                    || definition.summary.to_ascii_lowercase().contains(s.as_str())
            }
        }
    }

    /// Builds the page from candidates that already passed every filter,
    /// in capability order, starting after the cursor. Reads at most
    /// `page_items + 1` candidates.
    pub fn paginate(
        &self,
        revision: Revision,
        candidates: impl IntoIterator<Item = CapabilityDefinition>,
    ) -> CatalogPage {
        let mut entries = Vec::new();
        let mut bytes: u64 = 0;
        let mut more = false;
        for definition in candidates {
            let entry = CatalogEntry::from(definition);
            let size = entry.serialized_bytes();
            if entries.len() as u32 >= self.page_items || bytes + size > u64::from(self.page_bytes)
            {
                more = true;
                break;
            }
            bytes += size;
            entries.push(entry);
        }
        let next = if more {
            entries
                .last()
                .map(|e| encode_cursor(&self.keys, revision, self.fingerprint, &e.capability))
        } else {
            None
        };
        CatalogPage {
            revision,
            entries,
            next,
        }
    }
}

/// One capability as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogEntry {
    /// The capability.
    pub capability: CapabilityId,
    /// Its summary.
    pub summary: String,
    /// Its schema.
    pub schema: String,
}

impl From<CapabilityDefinition> for CatalogEntry {
    fn from(d: CapabilityDefinition) -> Self {
        CatalogEntry {
            capability: d.id,
            summary: d.summary,
            schema: d.schema,
        }
    }
}

impl CatalogEntry {
    /// The entry's size as serialized JSON, which is what page byte limits count.
    pub fn serialized_bytes(&self) -> u64 {
        serde_json::to_vec(self)
            .map(|v| v.len() as u64)
            .unwrap_or(u64::MAX)
    }
}

/// One page of the catalog, all read at one revision (CAT-8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogPage {
    /// The revision every entry was read at.
    pub revision: Revision,
    /// Entries in capability order.
    pub entries: Vec<CatalogEntry>,
    /// The cursor for the next page, when there is one.
    pub next: Option<String>,
}

fn digest_hex(parts: &[&[u8]]) -> String {
    let mut h = Md5::new();
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn fingerprint(
    reader: &Reader,
    search: &Option<String>,
    capability: &Option<CapabilityId>,
    profile: &Option<ProfileId>,
) -> u64 {
    let reader = match reader {
        Reader::Tenant(t) => format!("tenant:{t}"),
        Reader::Internal { include_unbound } => format!("internal:{include_unbound}"),
        Reader::Anonymous => "anonymous".to_string(),
    };
    let hex = digest_hex(&[
        reader.as_bytes(),
        search.as_deref().unwrap_or("\u{0}").as_bytes(),
        capability
            .as_ref()
            .map_or("\u{0}", |c| c.as_str())
            .as_bytes(),
        profile.as_ref().map_or("\u{0}", |p| p.as_str()).as_bytes(),
    ]);
    u64::from_str_radix(&hex[..16], 16).unwrap_or(0)
}

const CURSOR_VERSION: &str = "c2";

/// Bytes of the MAC a cursor carries (hex: twice as many characters).
const CURSOR_MAC_BYTES: usize = 16;

fn encode_cursor(
    keys: &CursorKeys,
    revision: Revision,
    fingerprint: u64,
    last: &CapabilityId,
) -> String {
    let key = &keys.current;
    let body = format!(
        "{CURSOR_VERSION}~{}~{}~{fingerprint:016x}~{last}",
        key.id, revision.0
    );
    let tag = key.mac(&body).finalize().into_bytes();
    let hex: String = tag[..CURSOR_MAC_BYTES]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{body}~{hex}")
}

fn invalid(reason: &'static str) -> Error {
    Error::InvalidCursor { reason }
}

fn decode_cursor(
    cursor: &str,
    expected_fingerprint: u64,
    keys: &CursorKeys,
) -> Result<(Revision, CapabilityId)> {
    if cursor.len() > CURSOR_BYTES_MAX {
        return Err(invalid("too long"));
    }
    let Some((body, tag)) = cursor.rsplit_once('~') else {
        return Err(invalid("malformed"));
    };
    let parts: Vec<&str> = body.split('~').collect();
    let [version, key_id, revision, fp, last] = parts.as_slice() else {
        return Err(invalid("malformed"));
    };
    if *version != CURSOR_VERSION {
        return Err(invalid("unknown version"));
    }
    let Some(key) = keys.by_id(key_id) else {
        return Err(invalid("signed with an unknown key"));
    };
    // Lower-case hex only: one cursor has one spelling.
    if tag.len() != 2 * CURSOR_MAC_BYTES
        || !tag
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(invalid("malformed"));
    }
    let tag: Vec<u8> = (0..CURSOR_MAC_BYTES)
        .map(|i| u8::from_str_radix(&tag[2 * i..2 * i + 2], 16).unwrap_or(0))
        .collect();
    key.mac(body)
        .verify_truncated_left(&tag)
        .map_err(|_| invalid("check failed"))?;
    let revision = revision
        .parse::<u64>()
        .map_err(|_| invalid("malformed revision"))?;
    let fp = u64::from_str_radix(fp, 16).map_err(|_| invalid("malformed"))?;
    if fp != expected_fingerprint {
        return Err(invalid("made by a different query"));
    }
    let last = CapabilityId::new(*last).map_err(|_| invalid("malformed capability"))?;
    Ok((Revision(revision), last))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(cursor: Option<String>) -> CatalogQuery {
        CatalogQuery {
            cursor,
            ..CatalogQuery::first_page(Reader::Tenant(TenantId::new("t1").unwrap()))
        }
    }

    fn keys() -> CursorKeys {
        CursorKeys::default()
    }

    #[test]
    fn cursor_round_trips() {
        let planned = PlannedQuery::plan(&query(None), &keys()).unwrap();
        let cap = CapabilityId::new("crm.contact.create").unwrap();
        let c = encode_cursor(&keys(), Revision(7), planned.fingerprint, &cap);
        let again = PlannedQuery::plan(&query(Some(c)), &keys()).unwrap();
        assert_eq!(again.after, Some((Revision(7), cap)));
    }

    #[test]
    fn a_cursor_forged_without_the_secret_is_invalid() {
        // spec: CAT-9
        // Everything a client can see, recomputed: the old unkeyed check
        // over an edited revision, and a MAC under a key of its own.
        let planned = PlannedQuery::plan(&query(None), &keys()).unwrap();
        let cap = CapabilityId::new("a").unwrap();
        let real = encode_cursor(&keys(), Revision(7), planned.fingerprint, &cap);
        let (body, _) = real.rsplit_once('~').unwrap();
        let edited = body.replace("~7~", "~8~");
        let unkeyed = format!("{edited}~{}", &digest_hex(&[edited.as_bytes()])[..32]);
        let other = CursorKeys {
            current: CursorKey::new(DEVELOPMENT_CURSOR_KEY_ID, &[7u8; 32]).unwrap(),
            previous: None,
        };
        let own_key = encode_cursor(&other, Revision(8), planned.fingerprint, &cap);
        for forged in [unkeyed, own_key] {
            assert!(
                matches!(
                    PlannedQuery::plan(&query(Some(forged.clone())), &keys()),
                    Err(Error::InvalidCursor { .. })
                ),
                "{forged} accepted"
            );
        }
    }

    #[test]
    fn a_rotated_key_still_reads_its_cursors_until_dropped() {
        // spec: CAT-9
        let old = keys();
        let planned = PlannedQuery::plan(&query(None), &old).unwrap();
        let cap = CapabilityId::new("a").unwrap();
        let c = encode_cursor(&old, Revision(7), planned.fingerprint, &cap);
        let rotated = CursorKeys {
            current: CursorKey::new("k2", &[9u8; 32]).unwrap(),
            previous: Some(old.current.clone()),
        };
        rotated.validate().unwrap();
        assert!(PlannedQuery::plan(&query(Some(c.clone())), &rotated).is_ok());
        let dropped = CursorKeys {
            previous: None,
            ..rotated
        };
        assert!(matches!(
            PlannedQuery::plan(&query(Some(c)), &dropped),
            Err(Error::InvalidCursor { .. })
        ));
        assert!(CursorKey::new("", &[1; 32]).is_err());
        assert!(CursorKey::new("k~1", &[1; 32]).is_err());
        assert!(CursorKey::new("k", &[1; 8]).is_err());
        assert!(CursorKey::new("k", &[1; 65]).is_err());
    }

    #[test]
    fn a_cursor_has_one_spelling() {
        // spec: CAT-9
        let planned = PlannedQuery::plan(&query(None), &keys()).unwrap();
        let cap = CapabilityId::new("a").unwrap();
        let c = encode_cursor(&keys(), Revision(7), planned.fingerprint, &cap);
        let (body, tag) = c.rsplit_once('~').unwrap();
        let upper = format!("{body}~{}", tag.to_ascii_uppercase());
        assert_ne!(upper, c, "the tag has letters");
        assert!(matches!(
            PlannedQuery::plan(&query(Some(upper)), &keys()),
            Err(Error::InvalidCursor { .. })
        ));
    }

    #[test]
    fn tampered_cursor_is_invalid() {
        let planned = PlannedQuery::plan(&query(None), &keys()).unwrap();
        let cap = CapabilityId::new("a").unwrap();
        let c =
            encode_cursor(&keys(), Revision(7), planned.fingerprint, &cap).replace("~7~", "~8~");
        assert!(matches!(
            PlannedQuery::plan(&query(Some(c)), &keys()),
            Err(Error::InvalidCursor { .. })
        ));
        for junk in [
            "",
            "~",
            "c1~~~~",
            "\u{0}",
            &"x".repeat(CURSOR_BYTES_MAX + 1),
        ] {
            assert!(matches!(
                PlannedQuery::plan(&query(Some(junk.to_string())), &keys()),
                Err(Error::InvalidCursor { .. })
            ));
        }
    }
}
