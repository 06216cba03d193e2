//! The router's configured instance directory (ADR 0012, rules DIR-1 to
//! DIR-8 of the rule catalogue).
//!
//! A router receives one exact, already authorized [`ReleaseTarget`]: agent
//! ID, card version, release ID, card digest, capability, credential
//! audience and canonical endpoint. A deployment-owned
//! `router-instance-directory.v1` document ([`InstanceDirectory`]) may say
//! which instance of that release to reach. The router uses it to replace
//! the network destination and nothing else.
//!
//! # Map
//!
//! - [`limits`]: every bound, with its unit last.
//! - `mode`: [`Mode`] (`direct` or `config_center_file`), chosen at start
//!   and never changed or inferred; [`Routing`] and [`RoutingParts`].
//! - `document`: the strict parser of [`InstanceDirectory`].
//! - `release`: [`ReleaseTarget`], [`ReleaseIdentity`] and the
//!   [`ImmutableField`]s selection may not change.
//! - `names`, `address`: validated [`PortName`], [`InstanceId`],
//!   [`Address`] and [`NetworkDestination`].
//! - `source`, `memory`: the [`DocumentSource`] contract, the file source
//!   [`FsSource`] and the in-memory [`MemorySource`] for tests.
//! - `select`: the [`Selector`] contract and [`SingleReadyEndpoint`].
//! - `router`: [`Router`], which resolves invocations and reports
//!   [`Readiness`]; `resolved`: its answer, [`ResolvedTarget`].
//! - `stream`: [`StreamInvocation`] and its [`Transport`].
//! - `error`: every error type.
//! - [`cli`]: the `connreg-router` command line, runnable with any selector.
//!
//! # Example
//!
//! ```
//! use connreg_directory::{
//!     FileRouting, MemorySource, PortName, Readiness, ReleaseTarget, Route, Router, Routing,
//! };
//!
//! let directory = br#"{
//!   "version": "router-instance-directory.v1",
//!   "targets": [{
//!     "release": {
//!       "agent_id": "billing-agent", "card_version": "4",
//!       "release_id": "billing-agent-2026-08-08.1",
//!       "card_digest": "sha256:5d41402abc4b2a76b9719d911017c592",
//!       "capability": "invoice.create",
//!       "credential_audience": "https://billing-agent.agents.example"
//!     },
//!     "instances": [{
//!       "instance_id": "billing-agent-a", "address": "10.0.4.17",
//!       "protocol": "tcp", "ready": true, "ports": { "invoke": 8080 }
//!     }]
//!   }]
//! }"#;
//! let target = ReleaseTarget::parse(br#"{
//!   "release": {
//!     "agent_id": "billing-agent", "card_version": "4",
//!     "release_id": "billing-agent-2026-08-08.1",
//!     "card_digest": "sha256:5d41402abc4b2a76b9719d911017c592",
//!     "capability": "invoice.create",
//!     "credential_audience": "https://billing-agent.agents.example"
//!   },
//!   "canonical_endpoint": { "address": "billing-agent.agents.example", "port": 443 }
//! }"#)?;
//!
//! let source = MemorySource::new(directory.as_slice());
//! let router = Router::start(Routing::ConfigCenterFile(FileRouting {
//!     source: &source,
//!     port_name: PortName::new("invoke")?,
//! }))?;
//!
//! let resolved = router.resolve(&target)?;
//! assert_eq!(resolved.destination().to_string(), "10.0.4.17:8080");
//! assert_eq!(resolved.target(), &target);
//! assert!(matches!(resolved.route(), Route::Instance { .. }));
//!
//! // A deleted document fails closed: no copy, no fallback to direct mode.
//! source.delete();
//! assert!(router.resolve(&target).is_err());
//! assert_eq!(router.readiness(&target), Readiness::NotReady);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod cli;
pub mod limits;

mod address;
mod document;
mod error;
mod json;
mod memory;
mod mode;
mod names;
mod path;
mod release;
mod resolved;
mod router;
mod select;
mod source;
mod stream;

pub use address::{Address, NetworkDestination};
pub use document::{DOCUMENT_VERSION, DirectoryTarget, Instance, InstanceDirectory, Protocol};
pub use error::{
    CancelError, ConfigError, DependencyError, DocumentError, NameError, ResolveError, SourceError,
    StartError, TransportError,
};
pub use memory::MemorySource;
pub use mode::{DEFAULT_PORT_NAME, FileRouting, Mode, Routing, RoutingParts, default_port_name};
pub use names::{InstanceId, PortName};
pub use release::{ImmutableField, ReleaseIdentity, ReleaseTarget};
pub use resolved::{ResolvedTarget, Route};
pub use router::{Readiness, Router};
pub use select::{
    Selection, SelectionError, SelectionFault, SelectionRequest, Selector, SingleReadyEndpoint,
};
pub use source::{DocumentSource, FsSource};
pub use stream::{StreamInvocation, Transport};
