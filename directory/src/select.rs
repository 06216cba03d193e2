//! Choosing the instance of a release to invoke: the [`Selector`] contract
//! and [`SingleReadyEndpoint`], the only policy this router has (DIR-4).

use crate::address::NetworkDestination;
use crate::document::{DirectoryTarget, Protocol};
use crate::names::{InstanceId, PortName};
use crate::release::ReleaseTarget;

/// What a selector is asked: which instance of `entry` should serve
/// `target` on `port_name`.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct SelectionRequest<'a> {
    /// The authorized target of the invocation.
    pub target: &'a ReleaseTarget,
    /// The directory's target for exactly that release.
    pub entry: &'a DirectoryTarget,
    /// The configured port name.
    pub port_name: &'a PortName,
}

/// A selector's answer. The router accepts it only if `target` is exactly
/// the authorized target (DIR-5), and the snapshot lists `instance_id` for
/// the release, ready, over TCP, at exactly `destination` on the configured
/// port (DIR-4); only `destination` may differ from the canonical endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// The target the selector claims to serve.
    pub target: ReleaseTarget,
    /// Where to send the invocation.
    pub destination: NetworkDestination,
    /// The instance behind `destination`.
    pub instance_id: InstanceId,
}

/// Why a selector chose nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SelectionError {
    /// No instance is a ready TCP endpoint for the port name.
    #[error("no ready tcp endpoint")]
    NoReadyEndpoint,
    /// Several instances are; choosing among them needs a load-balancing
    /// policy this router does not have.
    #[error("{count} ready tcp endpoints, expected exactly one")]
    SeveralReadyEndpoints {
        /// How many ready endpoints there are.
        count: usize,
    },
}

/// Why the router refused a selector's answer: the snapshot the selector
/// was given does not back it (see [`Selection::check_against`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum SelectionFault {
    /// The release lists no instance with the selected ID.
    #[error("is not listed for the release")]
    UnknownInstance,
    /// The instance is listed but not ready.
    #[error("is not ready")]
    NotReady,
    /// The instance is listed but does not speak TCP.
    #[error("does not speak tcp")]
    NotTcp,
    /// The instance has no port with the configured name.
    #[error("has no port with the configured name")]
    NoSuchPort,
    /// The destination address is not the instance's address.
    #[error("does not listen at the selected address")]
    WrongAddress,
    /// The destination port is not the instance's port with the configured
    /// name.
    #[error("does not listen on the selected port under the configured name")]
    WrongPort,
}

impl Selection {
    /// Checks this answer against the snapshot in `request`: the instance
    /// must be listed for the release, ready, over TCP, with a port of the
    /// configured name, and the destination must be exactly its address and
    /// that port. The first fault found, in that order, is returned.
    pub fn check_against(&self, request: &SelectionRequest<'_>) -> Result<(), SelectionFault> {
        let instance = request
            .entry
            .instances()
            .iter()
            .find(|instance| *instance.instance_id() == self.instance_id)
            .ok_or(SelectionFault::UnknownInstance)?;
        if !instance.is_ready() {
            return Err(SelectionFault::NotReady);
        }
        if instance.protocol() != Protocol::Tcp {
            return Err(SelectionFault::NotTcp);
        }
        let port = instance
            .port(request.port_name)
            .ok_or(SelectionFault::NoSuchPort)?;
        if self.destination.address != *instance.address() {
            return Err(SelectionFault::WrongAddress);
        }
        if self.destination.port != port {
            return Err(SelectionFault::WrongPort);
        }
        Ok(())
    }
}

/// Chooses the instance of a release to invoke.
///
/// The router treats a selector as untrusted: whatever it returns is checked
/// before it is used, against the authorized target (DIR-5) and against the
/// snapshot the selector was given ([`Selection::check_against`], DIR-4).
pub trait Selector {
    /// Chooses one instance for `request`, or says why none.
    fn select(&self, request: &SelectionRequest<'_>) -> Result<Selection, SelectionError>;
}

/// Selects a target only when exactly one instance is ready, speaks TCP and
/// has a port with the configured name. Zero fails; more than one fails,
/// because weighting, zones and failover are not policies of this router.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SingleReadyEndpoint;

impl Selector for SingleReadyEndpoint {
    fn select(&self, request: &SelectionRequest<'_>) -> Result<Selection, SelectionError> {
        let mut endpoints = request.entry.instances().iter().filter_map(|instance| {
            let port = instance.port(request.port_name)?;
            (instance.is_ready() && instance.protocol() == Protocol::Tcp)
                .then_some((instance, port))
        });
        let Some((instance, port)) = endpoints.next() else {
            return Err(SelectionError::NoReadyEndpoint);
        };
        let others = endpoints.count();
        if others > 0 {
            return Err(SelectionError::SeveralReadyEndpoints { count: others + 1 });
        }
        Ok(Selection {
            target: request.target.clone(),
            destination: NetworkDestination {
                address: instance.address().clone(),
                port,
            },
            instance_id: instance.instance_id().clone(),
        })
    }
}
