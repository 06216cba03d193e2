//! How errors name a place in a JSON document (`targets[1].instances[0].ports.grpc`)
//! and quote a value from it, both bounded by
//! [`ERROR_EXCERPT_BYTES_MAX`](crate::limits::ERROR_EXCERPT_BYTES_MAX).

use crate::limits::ERROR_EXCERPT_BYTES_MAX;

/// The written form of the document root.
const ROOT: &str = "$";

/// A place in a document: field names joined by `.`, array indexes in
/// brackets, and keys that are not plain identifiers quoted in brackets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Path(String);

impl Path {
    /// The document root, written `$`.
    pub(crate) fn root() -> Self {
        Self(String::new())
    }

    /// The member `key` of the object at this place.
    pub(crate) fn field(&self, key: &str) -> Self {
        let mut text = self.0.clone();
        if is_plain(key) {
            if !text.is_empty() {
                text.push('.');
            }
            text.push_str(key);
        } else {
            text.push('[');
            text.push_str(&quote(key));
            text.push(']');
        }
        Self(text)
    }

    /// The element `index` of the array at this place.
    pub(crate) fn index(&self, index: usize) -> Self {
        Self(format!("{}[{index}]", self.0))
    }

    /// The written form, `$` for the root.
    pub(crate) fn render(&self) -> String {
        if self.0.is_empty() {
            ROOT.to_owned()
        } else {
            self.0.clone()
        }
    }
}

/// A key that can be written after a dot without ambiguity.
fn is_plain(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= ERROR_EXCERPT_BYTES_MAX
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `text` as a JSON string literal, cut to the excerpt bound (an ellipsis
/// marks the cut), with control characters escaped.
pub(crate) fn quote(text: &str) -> String {
    let mut end = text.len().min(ERROR_EXCERPT_BYTES_MAX);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut excerpt = text[..end].to_owned();
    if end < text.len() {
        excerpt.push('…');
    }
    // Serialising a string cannot fail.
    serde_json::to_string(&excerpt).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_join_fields_and_indexes_like_the_document_reads() {
        let path = Path::root()
            .field("targets")
            .index(1)
            .field("instances")
            .index(0)
            .field("ports")
            .field("grpc");
        assert_eq!(path.render(), "targets[1].instances[0].ports.grpc");
    }

    #[test]
    fn root_is_written_as_dollar() {
        assert_eq!(Path::root().render(), "$");
    }

    #[test]
    fn odd_keys_are_quoted_in_brackets() {
        let path = Path::root().field("ports").field("a.b c");
        assert_eq!(path.render(), r#"ports["a.b c"]"#);
    }

    #[test]
    fn long_keys_are_cut_on_a_character_boundary() {
        let key = "é".repeat(100);
        let quoted = quote(&key);
        assert!(quoted.len() <= ERROR_EXCERPT_BYTES_MAX + 8);
        assert!(quoted.ends_with("…\""));
    }
}
