//! Goal: an address is dialled as what it says: an IPv4-mapped IPv6 address
//! is checked as the IPv4 address it carries, and no host name is accepted
//! that the C library would read as a numeric IPv4 address instead (hex,
//! octal, short dotted and bare decimal forms) (DIR-1).

mod common;

use common::{InstanceOptions, billing_document};
use connreg_directory::{Address, DocumentError, InstanceDirectory, NameError};

fn refused(text: &str) -> bool {
    matches!(Address::new(text), Err(NameError::Invalid { .. }))
}

/// The billing example with one instance at `address`.
fn document_with(address: &str) -> Result<InstanceDirectory, DocumentError> {
    InstanceDirectory::parse(&billing_document(&[InstanceOptions::ready(
        "billing-agent-a",
        address,
    )]))
}

// spec: DIR-1
#[test]
fn ipv4_mapped_ipv6_addresses_are_checked_as_their_ipv4_address() {
    for (mapped, why) in [
        ("::ffff:0.0.0.0", "unspecified"),
        ("::ffff:0:0", "unspecified, hex form"),
        ("::ffff:255.255.255.255", "broadcast"),
        ("::FFFF:ffff:ffff", "broadcast, hex form"),
        ("::ffff:224.0.0.1", "multicast"),
        ("::ffff:239.255.255.250", "multicast"),
        ("0:0:0:0:0:ffff:0.0.0.0", "unspecified, long form"),
    ] {
        assert!(refused(mapped), "{mapped} ({why}) must be refused");
    }
}

// spec: DIR-1
#[test]
fn ipv4_mapped_ipv6_unicast_addresses_are_accepted() {
    for mapped in ["::ffff:10.0.4.17", "::ffff:a00:411"] {
        let address = Address::new(mapped).unwrap_or_else(|e| panic!("{mapped}: {e}"));
        assert!(address.ip().is_some(), "{mapped} is an ip address");
    }
}

// spec: DIR-1
#[test]
fn hex_ipv4_forms_are_refused_as_host_names() {
    for hex in [
        "0x7f000001",
        "0X7F000001",
        "0x7f.1",
        "0x7f.0.0.1",
        "127.0.0.0x1",
        "0x0a.0x00.0x04.0x11",
        "0x",
    ] {
        assert!(refused(hex), "{hex} reads as an ipv4 address in libc");
    }
}

// spec: DIR-1
#[test]
fn octal_ipv4_forms_are_refused_as_host_names() {
    for octal in ["0177.0.0.1", "0177.1", "017700000001", "010.0.0.1"] {
        assert!(refused(octal), "{octal} reads as an ipv4 address in libc");
    }
}

// spec: DIR-1
#[test]
fn short_dotted_ipv4_forms_are_refused_as_host_names() {
    for short in ["1.0x1", "127.1", "10.1.1", "1.0X1"] {
        assert!(refused(short), "{short} reads as an ipv4 address in libc");
    }
}

// spec: DIR-1
#[test]
fn bare_decimal_ipv4_forms_are_refused_as_host_names() {
    for decimal in ["2130706433", "167773201", "0", "4294967295"] {
        assert!(
            refused(decimal),
            "{decimal} reads as an ipv4 address in libc"
        );
    }
}

// spec: DIR-1
#[test]
fn host_names_that_merely_start_with_digits_or_hex_are_still_accepted() {
    for name in [
        "0x7f.example",
        "3com.internal",
        "billing-0x1.stack.internal",
        "a.0xg",
        "ab12",
    ] {
        assert!(Address::new(name).is_ok(), "{name} is a host name");
    }
}

// spec: DIR-1
#[test]
fn a_document_with_a_numeric_or_mapped_address_is_refused_at_its_path() {
    for address in [
        "0x7f000001",
        "1.0x1",
        "0177.0.0.1",
        "127.1",
        "2130706433",
        "::ffff:0.0.0.0",
        "::ffff:255.255.255.255",
    ] {
        let error = document_with(address).expect_err(address);
        assert!(
            matches!(error, DocumentError::InvalidAddress { .. }),
            "{address}: {error}"
        );
        assert_eq!(error.path(), "targets[0].instances[0].address");
    }
}
