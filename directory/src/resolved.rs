//! [`ResolvedTarget`]: the authorized target, unchanged, with the network
//! destination an invocation uses.

use serde::Serialize;

use crate::address::NetworkDestination;
use crate::names::InstanceId;
use crate::release::ReleaseTarget;

/// How a destination was chosen.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Route {
    /// The canonical endpoint, in `direct` mode.
    Direct,
    /// The one ready instance the directory lists, in `config_center_file`
    /// mode.
    Instance {
        /// The instance selected.
        instance_id: InstanceId,
    },
}

/// Where one invocation goes. Built only by a router: the target is the
/// authorized one, field for field, and only the destination may differ from
/// its canonical endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct ResolvedTarget {
    target: ReleaseTarget,
    destination: NetworkDestination,
    route: Route,
}

impl ResolvedTarget {
    pub(crate) fn new(
        target: ReleaseTarget,
        destination: NetworkDestination,
        route: Route,
    ) -> Self {
        Self {
            target,
            destination,
            route,
        }
    }

    /// The authorized target, unchanged: its identity carries the credential
    /// audience the invocation is authorized for.
    #[must_use]
    pub fn target(&self) -> &ReleaseTarget {
        &self.target
    }

    /// Where to send the invocation.
    #[must_use]
    pub fn destination(&self) -> &NetworkDestination {
        &self.destination
    }

    /// How the destination was chosen.
    #[must_use]
    pub fn route(&self) -> &Route {
        &self.route
    }
}
