//! A JSON tree that keeps every object member in document order, duplicates
//! included, so that the typed parsers can refuse a duplicate key with the
//! path where it occurs. Nesting depth is bounded by `serde_json`'s
//! recursion limit; size by the caller.

use std::collections::BTreeSet;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::error::DocumentError;
use crate::path::Path;

/// One JSON value as written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    Unsigned(u64),
    Negative(i64),
    Float(f64),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    /// What kind of value this is, for "expected …, found …" messages.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Self::Null => "null",
            Self::Bool(_) => "a boolean",
            Self::Unsigned(_) | Self::Negative(_) | Self::Float(_) => "a number",
            Self::String(_) => "a string",
            Self::Array(_) => "an array",
            Self::Object(_) => "an object",
        }
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Json, E> {
        Ok(Json::Bool(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Json, E> {
        Ok(match u64::try_from(value) {
            Ok(unsigned) => Json::Unsigned(unsigned),
            Err(_) => Json::Negative(value),
        })
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Json, E> {
        Ok(Json::Unsigned(value))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Json, E> {
        Ok(Json::Float(value))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Json, E> {
        Ok(Json::String(value.to_owned()))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Json, E> {
        Ok(Json::String(value))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Json, D::Error> {
        Json::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut members = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value()?;
            members.push((key, value));
        }
        Ok(Json::Object(members))
    }
}

/// Parses `bytes` as exactly one JSON value, refusing anything longer than
/// `bytes_max` before looking at it.
pub(crate) fn parse(bytes: &[u8], bytes_max: usize) -> Result<Json, DocumentError> {
    if bytes.len() > bytes_max {
        return Err(DocumentError::TooLarge { bytes_max });
    }
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = Json::deserialize(&mut deserializer).map_err(syntax)?;
    deserializer.end().map_err(syntax)?;
    Ok(value)
}

fn syntax(error: serde_json::Error) -> DocumentError {
    DocumentError::Syntax {
        line: error.line(),
        column: error.column(),
        detail: error.to_string(),
    }
}

/// The members of one object whose keys were checked: no key twice and, for
/// a schema object, no key outside the schema.
pub(crate) struct Members<'a> {
    path: &'a Path,
    members: &'a [(String, Json)],
}

impl<'a> Members<'a> {
    /// Checks that `value` is an object with distinct keys drawn from `known`.
    pub(crate) fn of_schema(
        value: &'a Json,
        path: &'a Path,
        known: &[&str],
    ) -> Result<Self, DocumentError> {
        let members = Self::of_map(value, path)?;
        if let Some((key, _)) = members
            .members
            .iter()
            .find(|(key, _)| !known.contains(&key.as_str()))
        {
            return Err(DocumentError::UnknownField {
                path: path.field(key).render(),
            });
        }
        Ok(members)
    }

    /// Checks that `value` is an object with distinct keys, whatever they are.
    pub(crate) fn of_map(value: &'a Json, path: &'a Path) -> Result<Self, DocumentError> {
        let members = object(value, path)?;
        let mut seen = BTreeSet::new();
        for (key, _) in members {
            if !seen.insert(key.as_str()) {
                return Err(DocumentError::DuplicateKey {
                    path: path.field(key).render(),
                });
            }
        }
        Ok(Self { path, members })
    }

    /// The value of the required member `key`.
    pub(crate) fn required(&self, key: &str) -> Result<&'a Json, DocumentError> {
        self.members
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, value)| value)
            .ok_or_else(|| DocumentError::MissingField {
                path: self.path.field(key).render(),
            })
    }

    /// Every member in document order.
    pub(crate) fn iter(&self) -> impl ExactSizeIterator<Item = &'a (String, Json)> {
        self.members.iter()
    }
}

/// The members of `value` if it is an object.
pub(crate) fn object<'a>(
    value: &'a Json,
    path: &Path,
) -> Result<&'a [(String, Json)], DocumentError> {
    match value {
        Json::Object(members) => Ok(members),
        other => Err(wrong_type(path, "an object", other)),
    }
}

/// The elements of `value` if it is an array of at most `max` elements.
pub(crate) fn array<'a>(
    value: &'a Json,
    path: &Path,
    what: &'static str,
    max: usize,
) -> Result<&'a [Json], DocumentError> {
    match value {
        Json::Array(items) if items.len() > max => Err(DocumentError::LimitExceeded {
            path: path.render(),
            what,
            max,
        }),
        Json::Array(items) => Ok(items),
        other => Err(wrong_type(path, "an array", other)),
    }
}

/// The text of `value` if it is a string.
pub(crate) fn string<'a>(value: &'a Json, path: &Path) -> Result<&'a str, DocumentError> {
    match value {
        Json::String(text) => Ok(text),
        other => Err(wrong_type(path, "a string", other)),
    }
}

/// The truth value of `value` if it is a boolean.
pub(crate) fn boolean(value: &Json, path: &Path) -> Result<bool, DocumentError> {
    match value {
        Json::Bool(truth) => Ok(*truth),
        other => Err(wrong_type(path, "a boolean", other)),
    }
}

fn wrong_type(path: &Path, expected: &'static str, found: &Json) -> DocumentError {
    DocumentError::WrongType {
        path: path.render(),
        expected,
        found: found.kind(),
    }
}
