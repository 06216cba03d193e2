//! Catalog reads: who reads, what they ask, pages and cursors (CAT-5..CAT-10).
//!
//! Cursors are opaque to callers. Inside they are versioned text,
//! `c1~<revision>~<query fingerprint>~<last capability id>~<check>`, where the
//! check is a digest of the rest. A cursor that fails to parse, fails its
//! check, or was made by a different query is [`Error::InvalidCursor`]; one
//! made at another revision is [`Error::StaleCursor`]. A cursor carries no
//! tenant data: reads are always scoped by the reader, never by the cursor.

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
}

impl PlannedQuery {
    /// Validates a query: every limit is applied here (CAT-10).
    pub fn plan(query: &CatalogQuery) -> Result<PlannedQuery> {
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
            Some(c) => Some(decode_cursor(c, fingerprint)?),
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
                .map(|e| encode_cursor(revision, self.fingerprint, &e.capability))
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

const CURSOR_VERSION: &str = "c1";

fn encode_cursor(revision: Revision, fingerprint: u64, last: &CapabilityId) -> String {
    let body = format!("{CURSOR_VERSION}~{}~{fingerprint:016x}~{last}", revision.0);
    let check = &digest_hex(&[body.as_bytes()])[..8];
    format!("{body}~{check}")
}

fn decode_cursor(cursor: &str, expected_fingerprint: u64) -> Result<(Revision, CapabilityId)> {
    if cursor.len() > CURSOR_BYTES_MAX {
        return Err(Error::InvalidCursor { reason: "too long" });
    }
    let Some((body, check)) = cursor.rsplit_once('~') else {
        return Err(Error::InvalidCursor {
            reason: "malformed",
        });
    };
    if digest_hex(&[body.as_bytes()])[..8] != *check {
        return Err(Error::InvalidCursor {
            reason: "check failed",
        });
    }
    let parts: Vec<&str> = body.split('~').collect();
    let [version, revision, fp, last] = parts.as_slice() else {
        return Err(Error::InvalidCursor {
            reason: "malformed",
        });
    };
    if *version != CURSOR_VERSION {
        return Err(Error::InvalidCursor {
            reason: "unknown version",
        });
    }
    let revision = revision.parse::<u64>().map_err(|_| Error::InvalidCursor {
        reason: "malformed revision",
    })?;
    let fp = u64::from_str_radix(fp, 16).map_err(|_| Error::InvalidCursor {
        reason: "malformed",
    })?;
    if fp != expected_fingerprint {
        return Err(Error::InvalidCursor {
            reason: "made by a different query",
        });
    }
    let last = CapabilityId::new(*last).map_err(|_| Error::InvalidCursor {
        reason: "malformed capability",
    })?;
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

    #[test]
    fn cursor_round_trips() {
        let planned = PlannedQuery::plan(&query(None)).unwrap();
        let cap = CapabilityId::new("crm.contact.create").unwrap();
        let c = encode_cursor(Revision(7), planned.fingerprint, &cap);
        let again = PlannedQuery::plan(&query(Some(c))).unwrap();
        assert_eq!(again.after, Some((Revision(7), cap)));
    }

    #[test]
    fn tampered_cursor_is_invalid() {
        let planned = PlannedQuery::plan(&query(None)).unwrap();
        let cap = CapabilityId::new("a").unwrap();
        let c = encode_cursor(Revision(7), planned.fingerprint, &cap).replace("~7~", "~8~");
        assert!(matches!(
            PlannedQuery::plan(&query(Some(c))),
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
                PlannedQuery::plan(&query(Some(junk.to_string()))),
                Err(Error::InvalidCursor { .. })
            ));
        }
    }
}
