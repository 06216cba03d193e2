//! Typed identifiers that cannot be mixed up.
//!
//! Every identifier is a validated string: 1 to [`ID_BYTES_MAX`] bytes of
//! ASCII letters, digits and `.`, `_`, `-`, `:`. The character set excludes
//! `/`, which the route ordering hash uses as a separator, and anything a
//! cursor or a log line would have to escape.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::Error;
use crate::limits::ID_BYTES_MAX;

/// Checks one identifier against the documented character set and length.
pub fn validate_id(kind: &'static str, value: &str) -> Result<(), Error> {
    if value.is_empty() {
        return Err(Error::InvalidRequest {
            what: kind,
            reason: "must not be empty".into(),
        });
    }
    if value.len() > ID_BYTES_MAX {
        return Err(Error::LimitExceeded {
            what: kind,
            max: ID_BYTES_MAX as u64,
        });
    }
    if let Some(bad) = value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':')))
    {
        return Err(Error::InvalidRequest {
            what: kind,
            reason: format!("character {bad:?} is outside [A-Za-z0-9._:-]"),
        });
    }
    Ok(())
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        ///
        /// The text is shared: a clone bumps a reference count, so records
        /// that name the same identifier hold one copy of its text. Equality,
        /// order and hash are those of the text.
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(Arc<str>);

        impl $name {
            /// Validates and wraps an identifier.
            pub fn new(value: impl Into<String>) -> Result<Self, Error> {
                let value = value.into();
                validate_id($kind, &value)?;
                Ok(Self(Arc::from(value)))
            }

            /// The identifier as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The kind of identifier, as used in error messages.
            pub const KIND: &'static str = $kind;
        }

        impl TryFrom<String> for $name {
            type Error = Error;
            fn try_from(value: String) -> Result<Self, Error> {
                Self::new(value)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = Error;
            fn try_from(value: &str) -> Result<Self, Error> {
                validate_id($kind, value)?;
                Ok(Self(Arc::from(value)))
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> String {
                String::from(&*value.0)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let value = String::deserialize(deserializer)?;
                Self::new(value).map_err(serde::de::Error::custom)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), &*self.0)
            }
        }
    };
}

id_type!(
    /// A verified tenant.
    TenantId, "tenant"
);
id_type!(
    /// A callable capability, such as `crm.contact.create`.
    CapabilityId, "capability"
);
id_type!(
    /// A capability profile a version may support.
    ProfileId, "profile"
);
id_type!(
    /// A connector type: one implementation family.
    ConnectorTypeId, "connector type"
);
id_type!(
    /// One admitted, immutable connector version.
    VersionId, "version"
);
id_type!(
    /// One tenant's installation of one version.
    InstanceId, "instance"
);
id_type!(
    /// One capability binding.
    BindingId, "binding"
);
id_type!(
    /// One hard admission scope (a counter with a limit).
    ScopeId, "admission scope"
);
id_type!(
    /// One pre-provisioned replica host identity.
    ReplicaId, "replica"
);
id_type!(
    /// One action: the unit that gets exactly one route.
    ActionId, "action"
);
id_type!(
    /// A region of the fleet's topology.
    Region, "region"
);
id_type!(
    /// A zone within a region.
    Zone, "zone"
);
id_type!(
    /// A replica capacity class, such as `standard` or `large`.
    CapacityClass, "capacity class"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_identifier_is_rejected() {
        assert!(matches!(
            TenantId::new(""),
            Err(Error::InvalidRequest { what: "tenant", .. })
        ));
    }

    #[test]
    fn oversized_identifier_is_rejected_with_its_limit() {
        let long = "a".repeat(ID_BYTES_MAX + 1);
        assert_eq!(
            ActionId::new(long).unwrap_err(),
            Error::LimitExceeded {
                what: "action",
                max: ID_BYTES_MAX as u64
            }
        );
        assert!(ActionId::new("a".repeat(ID_BYTES_MAX)).is_ok());
    }

    #[test]
    fn identifier_outside_the_character_set_is_rejected() {
        for bad in ["a/b", "a b", "é", "a\0"] {
            assert!(ReplicaId::new(bad).is_err(), "{bad:?}");
        }
        assert!(ReplicaId::new("eu-1.r_2:x").is_ok());
    }

    #[test]
    fn identifiers_deserialize_only_when_valid() {
        assert!(serde_json::from_str::<TenantId>("\"t1\"").is_ok());
        assert!(serde_json::from_str::<TenantId>("\"\"").is_err());
    }
}
