//! Shared immutable text for record fields that are copied into every
//! answer (endpoints, peer identities, opaque references).

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Immutable text whose clone bumps a reference count instead of copying.
///
/// It reads, compares, orders, hashes, prints and serializes exactly as
/// the `String` it holds, so records that carry it answer the same bytes;
/// a route's snapshot then shares its replica's endpoint instead of
/// copying it into every answer.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct SharedText(Arc<str>);

impl SharedText {
    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for SharedText {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for SharedText {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl From<String> for SharedText {
    fn from(value: String) -> Self {
        SharedText(Arc::from(value))
    }
}

impl From<&str> for SharedText {
    fn from(value: &str) -> Self {
        SharedText(Arc::from(value))
    }
}

impl fmt::Display for SharedText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for SharedText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl Serialize for SharedText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for SharedText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(SharedText::from)
    }
}

#[cfg(test)]
mod tests {
    use super::SharedText;

    #[test]
    fn reads_prints_and_serializes_as_its_string() {
        let s = String::from("https://r0.internal:8443 \"q\"");
        let t = SharedText::from(s.clone());
        assert_eq!(t.as_str(), s);
        assert_eq!(&*t, s);
        assert_eq!(AsRef::<str>::as_ref(&t), s);
        assert_eq!(format!("{t}"), format!("{s}"));
        assert_eq!(format!("{t:?}"), format!("{s:?}"));
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            serde_json::to_string(&s).unwrap()
        );
        let back: SharedText = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, t);
        assert_eq!(back, SharedText::from(s.as_str()));
        let (a, b) = (SharedText::from("a"), SharedText::from("b"));
        assert!(a < b);
    }

    #[test]
    fn a_clone_shares_the_text() {
        let t = SharedText::from("vault:kv/crm");
        let u = t.clone();
        assert!(std::ptr::eq(t.as_str(), u.as_str()));
    }
}
