//! Goal: selection may replace only the network destination; a selector
//! that changes any immutable field of the authorized target is rejected
//! with an error naming that field (DIR-5).

mod common;

use std::net::Ipv4Addr;
use std::num::NonZeroU16;

use common::{InstanceOptions, billing_document, billing_target, file_routing, one_ready};
use connreg_directory::{
    Address, ImmutableField, MemorySource, NetworkDestination, ReleaseTarget, ResolveError, Route,
    Router, Selection, SelectionError, SelectionFault, SelectionRequest, Selector,
    SingleReadyEndpoint,
};

/// Changes `field` of whatever the honest selector chose.
struct HostileSelector {
    field: ImmutableField,
}

fn change(target: &mut ReleaseTarget, field: ImmutableField) {
    let release = &mut target.release;
    match field {
        ImmutableField::AgentId => release.agent_id = "payments-agent".into(),
        ImmutableField::CardVersion => release.card_version = "5".into(),
        ImmutableField::ReleaseId => release.release_id = "billing-agent-2026-08-09.1".into(),
        ImmutableField::CardDigest => {
            release.card_digest = "sha256:ffffffffffffffffffffffffffffffff".into();
        }
        ImmutableField::Capability => release.capability = "invoice.void".into(),
        ImmutableField::CredentialAudience => {
            release.credential_audience = "https://attacker.example".into();
        }
        ImmutableField::CanonicalEndpoint => {
            target.canonical_endpoint = NetworkDestination {
                address: Address::new("attacker.example").unwrap(),
                port: NonZeroU16::new(443).unwrap(),
            };
        }
        other => panic!("no edit for {other}"),
    }
}

impl Selector for HostileSelector {
    fn select(&self, request: &SelectionRequest<'_>) -> Result<Selection, SelectionError> {
        let mut selection = SingleReadyEndpoint.select(request)?;
        change(&mut selection.target, self.field);
        Ok(selection)
    }
}

/// Moves only the destination, to an address no document lists.
struct OtherDestinationSelector;

impl Selector for OtherDestinationSelector {
    fn select(&self, request: &SelectionRequest<'_>) -> Result<Selection, SelectionError> {
        let mut selection = SingleReadyEndpoint.select(request)?;
        selection.destination.address =
            Address::new(&Ipv4Addr::new(10, 9, 9, 9).to_string()).unwrap();
        Ok(selection)
    }
}

/// Chooses the last ready TCP instance with the port, where the honest
/// selector would refuse to choose among several: a different policy, but
/// an answer the snapshot backs.
struct LastReadySelector;

impl Selector for LastReadySelector {
    fn select(&self, request: &SelectionRequest<'_>) -> Result<Selection, SelectionError> {
        let instance = request
            .entry
            .instances()
            .iter()
            .rev()
            .find(|instance| instance.is_ready() && instance.port(request.port_name).is_some())
            .ok_or(SelectionError::NoReadyEndpoint)?;
        Ok(Selection {
            target: request.target.clone(),
            destination: NetworkDestination {
                address: instance.address().clone(),
                port: instance.port(request.port_name).unwrap(),
            },
            instance_id: instance.instance_id().clone(),
        })
    }
}

// spec: DIR-5
#[test]
fn a_selector_changing_any_immutable_field_is_rejected_with_that_field() {
    let source = MemorySource::new(one_ready("billing-agent-a", "10.0.4.17"));
    for field in ImmutableField::ALL {
        let router =
            Router::start_with_selector(file_routing(&source), HostileSelector { field }).unwrap();
        let error = router.resolve(&billing_target()).unwrap_err();
        assert_eq!(error, ResolveError::ImmutableFieldChanged { field });
        assert!(!error.is_dependency_failure());
        assert!(error.to_string().contains(field.as_str()), "{error}");
    }
}

// spec: DIR-5
#[test]
fn the_six_release_fields_and_the_canonical_endpoint_are_all_guarded() {
    let names: Vec<&str> = ImmutableField::ALL.iter().map(|f| f.as_str()).collect();
    assert_eq!(
        names,
        [
            "agent_id",
            "card_version",
            "release_id",
            "card_digest",
            "capability",
            "credential_audience",
            "canonical_endpoint"
        ]
    );
}

// spec: DIR-5
#[test]
fn a_streaming_invocation_is_never_opened_on_a_changed_target() {
    let source = MemorySource::new(one_ready("billing-agent-a", "10.0.4.17"));
    let router = Router::start_with_selector(
        file_routing(&source),
        HostileSelector {
            field: ImmutableField::CredentialAudience,
        },
    )
    .unwrap();
    assert_eq!(
        router.open_stream(&billing_target()).unwrap_err(),
        ResolveError::ImmutableFieldChanged {
            field: ImmutableField::CredentialAudience
        }
    );
}

// spec: DIR-5
// spec: DIR-4
#[test]
fn a_selector_moving_the_destination_off_the_document_is_rejected() {
    let source = MemorySource::new(one_ready("billing-agent-a", "10.0.4.17"));
    let router =
        Router::start_with_selector(file_routing(&source), OtherDestinationSelector).unwrap();
    let error = router.resolve(&billing_target()).unwrap_err();
    assert!(
        matches!(
            error,
            ResolveError::SelectionRejected {
                fault: SelectionFault::WrongAddress,
                ..
            }
        ),
        "{error}"
    );
    assert!(!error.is_dependency_failure());
}

// spec: DIR-5
#[test]
fn a_selector_choosing_another_listed_ready_instance_is_accepted() {
    let source = MemorySource::new(billing_document(&[
        InstanceOptions::ready("billing-agent-a", "10.0.4.17"),
        InstanceOptions::ready("billing-agent-b", "10.0.4.18"),
    ]));
    let router = Router::start_with_selector(file_routing(&source), LastReadySelector).unwrap();
    let target = billing_target();
    let resolved = router.resolve(&target).unwrap();
    assert_eq!(resolved.destination().to_string(), "10.0.4.18:8080");
    assert_eq!(resolved.target(), &target);
}

// spec: DIR-5
#[test]
fn a_resolved_target_keeps_every_authorized_field_and_changes_only_the_destination() {
    let source = MemorySource::new(one_ready("billing-agent-a", "10.0.4.17"));
    let router = Router::start(file_routing(&source)).unwrap();
    let target = billing_target();
    let resolved = router.resolve(&target).unwrap();
    assert_eq!(resolved.target(), &target);
    assert_eq!(resolved.target().changed_field(&target), None);
    assert_ne!(resolved.destination(), &target.canonical_endpoint);
    assert!(matches!(resolved.route(), Route::Instance { .. }));
}

// spec: DIR-5
#[test]
fn changed_field_reports_the_first_difference_in_a_fixed_order() {
    let target = billing_target();
    let mut other = target.clone();
    change(&mut other, ImmutableField::CredentialAudience);
    change(&mut other, ImmutableField::CardVersion);
    assert_eq!(
        target.changed_field(&other),
        Some(ImmutableField::CardVersion)
    );
    assert_eq!(target.changed_field(&target.clone()), None);
}
