//! Network destinations: an [`Address`] (unicast IP address or host name)
//! and a port.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::num::NonZeroU16;
use std::str::FromStr;

use serde::{Serialize, Serializer};

use crate::error::{DocumentError, NameError};
use crate::json::{self, Json, Members};
use crate::limits::{HOSTNAME_BYTES_MAX, HOSTNAME_LABEL_BYTES_MAX};
use crate::path::Path;

/// Where an instance listens: a unicast IP address, or a host name of
/// letters, digits and hyphens in dot-separated labels (RFC 1123), at most
/// [`HOSTNAME_BYTES_MAX`] bytes.
///
/// IPv6 addresses are written without brackets. Unspecified, broadcast and
/// multicast IP addresses are refused: nothing can be invoked there. An
/// IPv4-mapped IPv6 address (`::ffff:10.0.4.17`) is judged as the IPv4
/// address it carries. A host name may not end in a numeric label, so that
/// no name reaches the resolver that it would read as an IPv4 address
/// (`0x7f000001`, `0177.0.0.1`, `127.1`, `2130706433`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Address {
    text: String,
    ip: Option<IpAddr>,
}

impl Address {
    /// Checks `text` against the address rule.
    pub fn new(text: &str) -> Result<Self, NameError> {
        if text.is_empty() {
            return Err(NameError::Empty);
        }
        if let Ok(ip) = IpAddr::from_str(text) {
            check_unicast(ip)?;
            return Ok(Self {
                text: ip.to_string(),
                ip: Some(ip),
            });
        }
        check_hostname(text)?;
        Ok(Self {
            text: text.to_owned(),
            ip: None,
        })
    }

    /// The IP address, when the address is one.
    #[must_use]
    pub fn ip(&self) -> Option<IpAddr> {
        self.ip
    }

    /// The address as text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

fn check_unicast(ip: IpAddr) -> Result<(), NameError> {
    let refused_v4 = |v4: Ipv4Addr| v4.is_unspecified() || v4.is_broadcast() || v4.is_multicast();
    let refused = match ip {
        IpAddr::V4(v4) => refused_v4(v4),
        // An IPv4-mapped address (`::ffff:a.b.c.d`) is dialled as its IPv4
        // address, so it is judged as one: `::ffff:0.0.0.0` is unspecified.
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => refused_v4(v4),
            None => v6.is_unspecified() || v6.is_multicast(),
        },
    };
    if refused {
        return Err(NameError::Invalid {
            reason: "unspecified, broadcast and multicast addresses cannot be invoked",
        });
    }
    Ok(())
}

fn check_hostname(text: &str) -> Result<(), NameError> {
    if text.len() > HOSTNAME_BYTES_MAX {
        return Err(NameError::TooLong {
            bytes_max: HOSTNAME_BYTES_MAX,
        });
    }
    let invalid = |reason| Err(NameError::Invalid { reason });
    for label in text.split('.') {
        if label.is_empty() {
            return invalid("a host name label is empty");
        }
        if label.len() > HOSTNAME_LABEL_BYTES_MAX {
            return invalid("a host name label is longer than 63 bytes");
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return invalid("neither an ip address nor a host name of letters, digits and hyphens");
        }
        if label.starts_with('-') || label.ends_with('-') {
            return invalid("a host name label starts or ends with a hyphen");
        }
    }
    // The C library's resolver (`inet_aton`, which `getaddrinfo` tries
    // first) reads a name whose labels are all numbers, in decimal, octal
    // (`0177`) or hex (`0x7f`), as an IPv4 address: `0x7f000001`, `127.1`,
    // `1.0x1` and `2130706433` all dial 127.0.0.1 or 1.0.0.1. Such a name
    // can only end in a numeric label, so refusing every name that does
    // refuses them all, and with them malformed addresses like `10.0.0.256`.
    if text.rsplit('.').next().is_some_and(is_numeric_label) {
        return invalid(
            "not a valid ip address, and a host name cannot end in a numeric label \
             (decimal, octal or 0x hex)",
        );
    }
    Ok(())
}

/// Whether `label` is a number as `inet_aton` reads one: decimal or octal
/// digits, or `0x`/`0X` and hex digits (glibc reads a bare `0x` as 0).
fn is_numeric_label(label: &str) -> bool {
    let digits = match label
        .strip_prefix("0x")
        .or_else(|| label.strip_prefix("0X"))
    {
        Some(hex) => return hex.bytes().all(|b| b.is_ascii_hexdigit()),
        None => label,
    };
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

impl FromStr for Address {
    type Err = NameError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::new(text)
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for Address {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

/// A network destination: the only part of a target that selection may
/// replace (DIR-5).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct NetworkDestination {
    /// The host.
    pub address: Address,
    /// The TCP port.
    pub port: NonZeroU16,
}

impl fmt::Display for NetworkDestination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.address.ip() {
            Some(IpAddr::V6(_)) => write!(f, "[{}]:{}", self.address, self.port),
            _ => write!(f, "{}:{}", self.address, self.port),
        }
    }
}

/// Reads an address at `path`.
pub(crate) fn address(value: &Json, path: &Path) -> Result<Address, DocumentError> {
    let text = json::string(value, path)?;
    Address::new(text).map_err(|error| {
        let path = path.render();
        match error {
            NameError::Empty => DocumentError::EmptyName { path },
            NameError::TooLong { bytes_max } => DocumentError::LimitExceeded {
                path,
                what: "bytes",
                max: bytes_max,
            },
            NameError::Invalid { reason } => DocumentError::InvalidAddress { path, reason },
        }
    })
}

/// Reads a port number at `path`.
pub(crate) fn port(value: &Json, path: &Path) -> Result<NonZeroU16, DocumentError> {
    match value {
        Json::Unsigned(number) => u16::try_from(*number).ok().and_then(NonZeroU16::new),
        _ => None,
    }
    .ok_or_else(|| DocumentError::InvalidPort {
        path: path.render(),
    })
}

/// Reads a destination object `{"address": …, "port": …}` at `path`.
pub(crate) fn destination(value: &Json, path: &Path) -> Result<NetworkDestination, DocumentError> {
    let members = Members::of_schema(value, path, &["address", "port"])?;
    Ok(NetworkDestination {
        address: address(members.required("address")?, &path.field("address"))?,
        port: port(members.required("port")?, &path.field("port"))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_accept_unicast_ips_and_host_names() {
        for good in [
            "10.0.4.17",
            "::1",
            "fd00::17",
            "billing-a.stack.internal",
            "localhost",
        ] {
            assert!(Address::new(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn addresses_refuse_what_cannot_be_dialled() {
        assert_eq!(Address::new(""), Err(NameError::Empty));
        for bad in [
            "0.0.0.0",
            "::",
            "255.255.255.255",
            "224.0.0.1",
            "10.0.0.256",
            "010.0.0.1",
            "[::1]",
            "host:8080",
            "http://host",
            "a..b",
            "-a.b",
            "a b",
            "host.",
        ] {
            assert!(
                matches!(Address::new(bad), Err(NameError::Invalid { .. })),
                "{bad}"
            );
        }
        let long = format!("{}.internal", "a".repeat(250));
        assert!(matches!(
            Address::new(&long),
            Err(NameError::TooLong { .. })
        ));
    }

    #[test]
    fn ipv6_destinations_print_with_brackets() {
        let destination = NetworkDestination {
            address: Address::new("fd00::17").unwrap(),
            port: NonZeroU16::new(8080).unwrap(),
        };
        assert_eq!(destination.to_string(), "[fd00::17]:8080");
    }
}
