//! Where in a scenario file an error is: the line of a byte offset, and
//! of a key named by its path.

pub(super) fn line_of(text: &str, offset: usize) -> usize {
    let offset = offset.min(text.len());
    text.as_bytes()[..offset]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// Where a validation error is: the line it names is the key's own when
/// the file spells the key, else its entry's or table's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum At {
    /// A byte offset (an entry's start).
    Offset(usize),
    /// A key path, dot separated, array entries by index
    /// (`fleet.scopes.0.limit`).
    Key(String),
    /// The key the check's `what` names (`scenario.duration_ms`).
    Named,
}

impl From<usize> for At {
    fn from(offset: usize) -> At {
        At::Offset(offset)
    }
}

impl At {
    /// `what` for [`At::Named`].
    pub(super) fn or_named(self, what: &str) -> At {
        match self {
            At::Named => At::Key(what.to_string()),
            at => at,
        }
    }

    /// The byte offset in `text`: a key's value, or the deepest table or
    /// entry of its path the file spells, or 0.
    pub(super) fn offset(&self, text: &str) -> usize {
        match self {
            At::Offset(o) => *o,
            At::Named => 0,
            At::Key(path) => key_offset(text, path).unwrap_or(0),
        }
    }
}

/// The offset of the value at `path` in `text`, or of the deepest part of
/// the path that `text` spells.
fn key_offset(text: &str, path: &str) -> Option<usize> {
    use toml::de::{DeTable, DeValue};
    let doc = DeTable::parse(text).ok()?;
    let mut found = None;
    let mut here: &DeTable<'_> = doc.get_ref();
    let mut segments = path.split('.').peekable();
    while let Some(seg) = segments.next() {
        let (_, value) = here.iter().find(|(k, _)| k.get_ref() == seg)?;
        found = Some(value.span().start);
        let mut value = value;
        if let (DeValue::Array(items), Some(index)) = (
            value.get_ref(),
            segments.peek().and_then(|s| s.parse::<usize>().ok()),
        ) {
            segments.next();
            value = items.get(index)?;
            found = Some(value.span().start);
        }
        match value.get_ref() {
            DeValue::Table(t) => here = t,
            _ => break,
        }
    }
    found
}
