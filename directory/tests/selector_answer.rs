//! Goal: a selector is untrusted; the router uses its answer only when the
//! snapshot it was given lists that instance for the release, ready, over
//! TCP, at exactly that address and on the configured port. Every other
//! answer is refused, field by field (DIR-4, DIR-5).

mod common;

use std::num::NonZeroU16;

use common::{InstanceOptions, billing_document, billing_target, file_routing};
use connreg_directory::{
    Address, InstanceId, MemorySource, ResolveError, Router, Selection, SelectionError,
    SelectionFault, SelectionRequest, Selector, SingleReadyEndpoint,
};

/// One way a selector can lie about what it chose.
#[derive(Debug, Clone, Copy)]
enum Lie {
    /// An instance ID the release does not list.
    UnknownInstance,
    /// The chosen instance, at an address no document lists.
    AddressInNoDocument,
    /// The chosen instance, at the address of another instance.
    AddressOfAnotherInstance,
    /// The chosen instance, on its port with another name.
    PortOfAnotherName,
    /// The chosen instance, on a port it does not have.
    PortInNoDocument,
    /// An instance that is not ready, as the document lists it.
    InstanceNotReady,
    /// A ready instance that speaks UDP, as the document lists it.
    InstanceNotTcp,
    /// A ready TCP instance without the configured port, on another port.
    InstanceWithoutThePort,
}

impl Lie {
    const ALL: [Self; 8] = [
        Self::UnknownInstance,
        Self::AddressInNoDocument,
        Self::AddressOfAnotherInstance,
        Self::PortOfAnotherName,
        Self::PortInNoDocument,
        Self::InstanceNotReady,
        Self::InstanceNotTcp,
        Self::InstanceWithoutThePort,
    ];

    /// The fault the router must name.
    fn fault(self) -> SelectionFault {
        match self {
            Self::UnknownInstance => SelectionFault::UnknownInstance,
            Self::AddressInNoDocument | Self::AddressOfAnotherInstance => {
                SelectionFault::WrongAddress
            }
            Self::PortOfAnotherName | Self::PortInNoDocument => SelectionFault::WrongPort,
            Self::InstanceNotReady => SelectionFault::NotReady,
            Self::InstanceNotTcp => SelectionFault::NotTcp,
            Self::InstanceWithoutThePort => SelectionFault::NoSuchPort,
        }
    }
}

/// Starts from the honest choice and tells `lie` about it.
struct LyingSelector(Lie);

fn instance_id(text: &str) -> InstanceId {
    InstanceId::new(text).unwrap()
}

fn port(number: u16) -> NonZeroU16 {
    NonZeroU16::new(number).unwrap()
}

impl Selector for LyingSelector {
    fn select(&self, request: &SelectionRequest<'_>) -> Result<Selection, SelectionError> {
        let mut selection = SingleReadyEndpoint.select(request)?;
        let destination = &mut selection.destination;
        match self.0 {
            Lie::UnknownInstance => selection.instance_id = instance_id("billing-agent-z"),
            Lie::AddressInNoDocument => destination.address = Address::new("10.9.9.9").unwrap(),
            Lie::AddressOfAnotherInstance => {
                destination.address = Address::new("10.0.4.18").unwrap();
            }
            Lie::PortOfAnotherName => destination.port = port(9090),
            Lie::PortInNoDocument => destination.port = port(1),
            Lie::InstanceNotReady => {
                selection.instance_id = instance_id("billing-agent-b");
                destination.address = Address::new("10.0.4.18").unwrap();
            }
            Lie::InstanceNotTcp => {
                selection.instance_id = instance_id("billing-agent-c");
                destination.address = Address::new("10.0.4.19").unwrap();
            }
            Lie::InstanceWithoutThePort => {
                selection.instance_id = instance_id("billing-agent-d");
                destination.address = Address::new("10.0.4.20").unwrap();
                destination.port = port(9090);
            }
        }
        Ok(selection)
    }
}

/// One ready TCP instance with an `invoke` port (`a`), and three that the
/// honest selector passes over: not ready (`b`), UDP (`c`), no `invoke`
/// port (`d`).
fn document() -> Vec<u8> {
    billing_document(&[
        InstanceOptions::ready("billing-agent-a", "10.0.4.17"),
        InstanceOptions {
            ready: false,
            ..InstanceOptions::ready("billing-agent-b", "10.0.4.18")
        },
        InstanceOptions {
            protocol: "udp".into(),
            ..InstanceOptions::ready("billing-agent-c", "10.0.4.19")
        },
        InstanceOptions {
            ports: vec![("metrics".into(), 9090)],
            ..InstanceOptions::ready("billing-agent-d", "10.0.4.20")
        },
    ])
}

// spec: DIR-4
#[test]
fn the_honest_selector_is_accepted_over_the_same_document() {
    let source = MemorySource::new(document());
    let router = Router::start(file_routing(&source)).unwrap();
    let resolved = router.resolve(&billing_target()).unwrap();
    assert_eq!(resolved.destination().to_string(), "10.0.4.17:8080");
}

// spec: DIR-4
// spec: DIR-5
#[test]
fn every_answer_the_snapshot_does_not_back_is_refused_naming_its_fault() {
    let source = MemorySource::new(document());
    for lie in Lie::ALL {
        let router =
            Router::start_with_selector(file_routing(&source), LyingSelector(lie)).unwrap();
        let result = router.resolve(&billing_target());
        let Err(error) = result else {
            panic!("{lie:?}: the router used {result:?}");
        };
        let ResolveError::SelectionRejected { fault, .. } = &error else {
            panic!("{lie:?}: expected a rejected selection, got {error}");
        };
        assert_eq!(*fault, lie.fault(), "{lie:?}: {error}");
        assert!(!error.is_dependency_failure(), "{lie:?}");
        assert!(
            error.to_string().starts_with("selection rejected"),
            "{error}"
        );
        assert!(router.open_stream(&billing_target()).is_err(), "{lie:?}");
    }
}

// spec: DIR-5
#[test]
fn an_address_in_no_document_is_refused() {
    let source = MemorySource::new(document());
    let router = Router::start_with_selector(
        file_routing(&source),
        LyingSelector(Lie::AddressInNoDocument),
    )
    .unwrap();
    let error = router.resolve(&billing_target()).unwrap_err();
    assert_eq!(
        error,
        ResolveError::SelectionRejected {
            instance_id: instance_id("billing-agent-a"),
            fault: SelectionFault::WrongAddress,
        }
    );
    assert!(error.to_string().contains("billing-agent-a"), "{error}");
}
