//! [`Router`]: resolves an authorized release target to a network
//! destination in the mode it was started with, and reports readiness.

use std::fmt;

use crate::document::InstanceDirectory;
use crate::error::{DependencyError, ResolveError, StartError};
use crate::mode::{FileRouting, Mode, Routing};
use crate::release::ReleaseTarget;
use crate::resolved::{ResolvedTarget, Route};
use crate::select::{SelectionError, SelectionRequest, Selector, SingleReadyEndpoint};
use crate::source::{DocumentSource, FsSource};
use crate::stream::StreamInvocation;

/// What a readiness check of a release target reports, and all it reports
/// (DIR-7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Readiness {
    /// `ok`: an invocation of the target could be routed now, that is
    /// [`Router::resolve`] on the current document would succeed: the
    /// document is readable and valid, lists the exact release, and exactly
    /// one ready TCP endpoint with the port name, which the selector chose
    /// and the router accepted. In direct mode, always.
    Ok,
    /// `not_ready`: an invocation of the target would fail now, for any of
    /// the reasons [`Router::resolve`] gives (a missing, unreadable,
    /// blocked or invalid document, no target for the release, zero or
    /// several ready endpoints, a rejected selection).
    NotReady,
}

impl Readiness {
    /// `ok` or `not_ready`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::NotReady => "not_ready",
        }
    }
}

impl fmt::Display for Readiness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A started router.
///
/// It keeps its mode, its one document source and its selector, and nothing
/// it has read: every invocation reads one fresh snapshot of the document
/// (DIR-3), and a document that turns invalid or disappears fails every
/// invocation until a valid one returns, with no last-known-good copy, no
/// other source and no return to direct mode (DIR-8).
#[derive(Debug)]
pub struct Router<S = FsSource, L = SingleReadyEndpoint> {
    routing: Routing<S>,
    selector: L,
}

impl<S: DocumentSource> Router<S, SingleReadyEndpoint> {
    /// Starts a router with the [`SingleReadyEndpoint`] selector.
    ///
    /// In `config_center_file` mode the document is read and validated once;
    /// a missing, unreadable, unavailable or invalid document refuses the
    /// start (DIR-7).
    pub fn start(routing: Routing<S>) -> Result<Self, StartError> {
        Self::start_with_selector(routing, SingleReadyEndpoint)
    }
}

impl<S: DocumentSource, L: Selector> Router<S, L> {
    /// Starts a router that chooses instances with `selector`.
    pub fn start_with_selector(routing: Routing<S>, selector: L) -> Result<Self, StartError> {
        if let Routing::ConfigCenterFile(file) = &routing {
            read_snapshot(&file.source).map_err(StartError::DirectoryUnusable)?;
        }
        Ok(Self { routing, selector })
    }

    /// The mode the router was started with; it never changes.
    #[must_use]
    pub fn mode(&self) -> Mode {
        self.routing.mode()
    }

    /// Resolves one invocation of `target`.
    ///
    /// In direct mode the destination is the canonical endpoint. In file mode
    /// the document is read once, its target for exactly this release is
    /// found, the selector chooses one instance, and the choice is accepted
    /// only if it leaves the authorized target unchanged and the snapshot
    /// lists that instance, ready, over TCP, at exactly that destination
    /// (DIR-4, DIR-5).
    pub fn resolve(&self, target: &ReleaseTarget) -> Result<ResolvedTarget, ResolveError> {
        match &self.routing {
            Routing::Direct => Ok(ResolvedTarget::new(
                target.clone(),
                target.canonical_endpoint.clone(),
                Route::Direct,
            )),
            Routing::ConfigCenterFile(file) => self.resolve_from_file(file, target),
        }
    }

    fn resolve_from_file(
        &self,
        file: &FileRouting<S>,
        target: &ReleaseTarget,
    ) -> Result<ResolvedTarget, ResolveError> {
        let directory = read_snapshot(&file.source)?;
        let release = &target.release;
        let entry = directory
            .target_for(release)
            .ok_or_else(|| DependencyError::Unmatched {
                agent_id: release.agent_id.clone(),
                release_id: release.release_id.clone(),
            })?;
        let request = SelectionRequest {
            target,
            entry,
            port_name: &file.port_name,
        };
        let selection = self.selector.select(&request).map_err(|error| {
            let release_id = release.release_id.clone();
            let port_name = file.port_name.clone();
            match error {
                SelectionError::NoReadyEndpoint => DependencyError::NoReadyEndpoint {
                    release_id,
                    port_name,
                },
                SelectionError::SeveralReadyEndpoints { count } => {
                    DependencyError::SeveralReadyEndpoints {
                        release_id,
                        port_name,
                        count,
                    }
                }
            }
        })?;
        // The selector is untrusted: its answer must leave the authorized
        // target as it is and name what this snapshot lists.
        if let Some(field) = target.changed_field(&selection.target) {
            return Err(ResolveError::ImmutableFieldChanged { field });
        }
        selection
            .check_against(&request)
            .map_err(|fault| ResolveError::SelectionRejected {
                instance_id: selection.instance_id.clone(),
                fault,
            })?;
        // The authorized target is kept, not the selector's equal copy.
        Ok(ResolvedTarget::new(
            target.clone(),
            selection.destination,
            Route::Instance {
                instance_id: selection.instance_id,
            },
        ))
    }

    /// Opens a streaming invocation of `target`: resolves it once, here,
    /// and hands the result to the stream, which never consults the
    /// directory again (DIR-6).
    pub fn open_stream(&self, target: &ReleaseTarget) -> Result<StreamInvocation, ResolveError> {
        self.resolve(target).map(StreamInvocation::new)
    }

    /// Whether an invocation of `target` could be routed now: `ok` exactly
    /// when [`resolve`](Self::resolve) would succeed on the current
    /// document, which it rereads and revalidates once. Direct mode reads
    /// nothing and is always `ok`.
    pub fn readiness(&self, target: &ReleaseTarget) -> Readiness {
        match self.resolve(target) {
            Ok(_) => Readiness::Ok,
            Err(_) => Readiness::NotReady,
        }
    }
}

/// Reads and parses one snapshot of the document.
fn read_snapshot<S: DocumentSource>(source: &S) -> Result<InstanceDirectory, DependencyError> {
    let location = source.location();
    let bytes = source
        .read_document()
        .map_err(|error| DependencyError::from_source(location, error))?;
    InstanceDirectory::parse(&bytes).map_err(|error| DependencyError::Malformed {
        location: location.to_owned(),
        error,
    })
}
