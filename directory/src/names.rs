//! Validated names: [`PortName`] and [`InstanceId`], and the rule for the
//! text of a release identity field.

use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

use crate::error::{DocumentError, NameError};
use crate::json::{self, Json};
use crate::limits::{IDENTITY_FIELD_BYTES_MAX, INSTANCE_ID_BYTES_MAX, PORT_NAME_BYTES_MAX};
use crate::path::Path;

/// The name of an instance's port, such as `invoke` or `grpc`.
///
/// It follows the IANA service name rule (RFC 6335): 1 to
/// [`PORT_NAME_BYTES_MAX`] bytes of lowercase ASCII letters, digits and
/// hyphens, with at least one letter, no hyphen at either end and no two
/// hyphens in a row.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortName(String);

impl PortName {
    /// Checks `text` against the port name rule.
    pub fn new(text: &str) -> Result<Self, NameError> {
        if text.is_empty() {
            return Err(NameError::Empty);
        }
        if text.len() > PORT_NAME_BYTES_MAX {
            return Err(NameError::TooLong {
                bytes_max: PORT_NAME_BYTES_MAX,
            });
        }
        let invalid = |reason| Err(NameError::Invalid { reason });
        if !text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return invalid("only lowercase letters, digits and hyphens are allowed");
        }
        if !text.bytes().any(|b| b.is_ascii_lowercase()) {
            return invalid("must contain a letter");
        }
        if text.starts_with('-') || text.ends_with('-') || text.contains("--") {
            return invalid("hyphens may not lead, trail or repeat");
        }
        Ok(Self(text.to_owned()))
    }

    /// The name as text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for PortName {
    type Err = NameError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::new(text)
    }
}

impl fmt::Display for PortName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for PortName {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

/// The ID of one instance of a release, such as a pod, container or host
/// name.
///
/// 1 to [`INSTANCE_ID_BYTES_MAX`] bytes of ASCII letters, digits, `.`, `_`,
/// `:` and `-`, starting with a letter or digit.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InstanceId(String);

impl InstanceId {
    /// Checks `text` against the instance ID rule.
    pub fn new(text: &str) -> Result<Self, NameError> {
        if text.is_empty() {
            return Err(NameError::Empty);
        }
        if text.len() > INSTANCE_ID_BYTES_MAX {
            return Err(NameError::TooLong {
                bytes_max: INSTANCE_ID_BYTES_MAX,
            });
        }
        if !text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
        {
            return Err(NameError::Invalid {
                reason: "only ascii letters, digits, '.', '_', ':' and '-' are allowed",
            });
        }
        if !text.as_bytes()[0].is_ascii_alphanumeric() {
            return Err(NameError::Invalid {
                reason: "must start with a letter or digit",
            });
        }
        Ok(Self(text.to_owned()))
    }

    /// The ID as text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for InstanceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for InstanceId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

/// Checks the text of a release identity field: 1 to
/// [`IDENTITY_FIELD_BYTES_MAX`] bytes, no control characters and no
/// surrounding whitespace, so that two fields that print alike compare alike.
pub(crate) fn check_identity_text(text: &str) -> Result<(), NameError> {
    if text.is_empty() {
        return Err(NameError::Empty);
    }
    if text.len() > IDENTITY_FIELD_BYTES_MAX {
        return Err(NameError::TooLong {
            bytes_max: IDENTITY_FIELD_BYTES_MAX,
        });
    }
    if text.chars().any(char::is_control) {
        return Err(NameError::Invalid {
            reason: "control characters are not allowed",
        });
    }
    if text.trim() != text {
        return Err(NameError::Invalid {
            reason: "leading or trailing whitespace is not allowed",
        });
    }
    Ok(())
}

/// Places a name error at `path` in a document.
pub(crate) fn name_error_at(path: &Path, error: NameError) -> DocumentError {
    let path = path.render();
    match error {
        NameError::Empty => DocumentError::EmptyName { path },
        NameError::TooLong { bytes_max } => DocumentError::LimitExceeded {
            path,
            what: "bytes",
            max: bytes_max,
        },
        NameError::Invalid { reason } => DocumentError::InvalidName { path, reason },
    }
}

/// Reads a release identity field at `path`.
pub(crate) fn identity_text(value: &Json, path: &Path) -> Result<String, DocumentError> {
    let text = json::string(value, path)?;
    check_identity_text(text).map_err(|error| name_error_at(path, error))?;
    Ok(text.to_owned())
}

/// Reads an instance ID at `path`.
pub(crate) fn instance_id(value: &Json, path: &Path) -> Result<InstanceId, DocumentError> {
    let text = json::string(value, path)?;
    InstanceId::new(text).map_err(|error| name_error_at(path, error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_names_follow_the_service_name_rule() {
        for good in ["invoke", "grpc", "http-2", "a", "h2c"] {
            assert!(PortName::new(good).is_ok(), "{good}");
        }
        assert_eq!(PortName::new(""), Err(NameError::Empty));
        assert!(matches!(
            PortName::new("a-very-long-port-name"),
            Err(NameError::TooLong { bytes_max: 15 })
        ));
        for bad in ["GRPC", "8080", "-grpc", "grpc-", "gr--pc", "gr pc", "gr.pc"] {
            assert!(
                matches!(PortName::new(bad), Err(NameError::Invalid { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn instance_ids_allow_pod_and_container_names() {
        for good in ["billing-7f9c6d-x2k4p", "stack_billing_1", "10.0.0.7:8080"] {
            assert!(InstanceId::new(good).is_ok(), "{good}");
        }
        assert_eq!(InstanceId::new(""), Err(NameError::Empty));
        for bad in ["-a", "a b", "a/b", "é"] {
            assert!(
                matches!(InstanceId::new(bad), Err(NameError::Invalid { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn identity_text_refuses_control_characters_and_padding() {
        assert!(check_identity_text("sha256:ab").is_ok());
        assert_eq!(check_identity_text(""), Err(NameError::Empty));
        assert!(matches!(
            check_identity_text("a\nb"),
            Err(NameError::Invalid { .. })
        ));
        assert!(matches!(
            check_identity_text(" a"),
            Err(NameError::Invalid { .. })
        ));
    }
}
