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
/// the authorized target (DIR-5); only `destination` may differ from the
/// canonical endpoint.
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

/// Chooses the instance of a release to invoke.
///
/// The router treats a selector as untrusted: whatever it returns is checked
/// against the authorized target before it is used.
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
