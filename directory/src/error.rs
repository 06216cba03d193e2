//! Every error the directory returns, from the innermost outwards:
//!
//! - [`NameError`]: a name, ID or address refused on its own.
//! - [`DocumentError`]: a directory document or target file refused, with
//!   the path of the offending place.
//! - [`SourceError`]: a [`DocumentSource`](crate::DocumentSource) could not
//!   hand over the document bytes.
//! - [`DependencyError`]: the directory state failed an invocation (DIR-3).
//! - [`ResolveError`]: what a caller of
//!   [`Router::resolve`](crate::Router::resolve) acts on.
//! - [`StartError`], [`ConfigError`]: the router refused to start.
//! - [`TransportError`], [`CancelError`]: a streaming invocation's sends and
//!   cancellation.
//!
//! Messages are lowercase and carry no cause twice: the cause of a wrapping
//! error is reached through [`std::error::Error::source`].

use std::io;

use crate::release::ImmutableField;
use crate::select::SelectionFault;
use crate::{InstanceId, PortName};

/// Why a name, ID or address was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NameError {
    /// The text is empty.
    #[error("must not be empty")]
    Empty,
    /// The text is longer than its bound.
    #[error("longer than {bytes_max} bytes")]
    TooLong {
        /// The bound, in bytes.
        bytes_max: usize,
    },
    /// The text breaks the rule for its kind of name.
    #[error("{reason}")]
    Invalid {
        /// The rule that was broken.
        reason: &'static str,
    },
}

/// A directory document or release target file was refused.
///
/// Every variant names the offending place with [`DocumentError::path`]:
/// field names joined by dots and array indexes in brackets, for example
/// `targets[1].instances[0].ports.grpc`; `$` is the document root.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DocumentError {
    /// The document is larger than its bound; it was not parsed.
    #[error("document is larger than {bytes_max} bytes")]
    TooLarge {
        /// The bound, in bytes.
        bytes_max: usize,
    },
    /// The bytes are not one well-formed JSON value.
    #[error("document is not valid json: {detail}")]
    Syntax {
        /// Line of the first error, as the JSON parser counts it.
        line: usize,
        /// Column of the first error, as the JSON parser counts it.
        column: usize,
        /// The parser's description, with its position.
        detail: String,
    },
    /// A value has the wrong JSON type.
    #[error("{path}: expected {expected}, found {found}")]
    WrongType {
        /// Where the value is.
        path: String,
        /// The JSON type the schema requires.
        expected: &'static str,
        /// The JSON type that was found.
        found: &'static str,
    },
    /// A required field is absent. Every field of the schema is required.
    #[error("{path}: required field is missing")]
    MissingField {
        /// Where the field should be.
        path: String,
    },
    /// A field outside the schema.
    #[error("{path}: unknown field")]
    UnknownField {
        /// The unknown field.
        path: String,
    },
    /// A key appears twice in one object.
    #[error("{path}: key appears more than once")]
    DuplicateKey {
        /// The second occurrence.
        path: String,
    },
    /// The `version` field is not `router-instance-directory.v1`.
    #[error("{path}: unsupported version {found}, expected \"router-instance-directory.v1\"")]
    UnsupportedVersion {
        /// Where the version is.
        path: String,
        /// The version found, quoted and cut to a bounded excerpt.
        found: String,
    },
    /// A name, ID or identity field is empty.
    #[error("{path}: must not be empty")]
    EmptyName {
        /// The empty value.
        path: String,
    },
    /// A name, ID or identity field breaks its rule.
    #[error("{path}: invalid name: {reason}")]
    InvalidName {
        /// The offending value.
        path: String,
        /// The rule that was broken.
        reason: &'static str,
    },
    /// An address is neither a unicast IP address nor a valid host name.
    #[error("{path}: invalid address: {reason}")]
    InvalidAddress {
        /// The offending address.
        path: String,
        /// The rule that was broken.
        reason: &'static str,
    },
    /// A port is not an integer from 1 to 65535.
    #[error("{path}: invalid port, expected an integer from 1 to 65535")]
    InvalidPort {
        /// The offending port.
        path: String,
    },
    /// A protocol other than `tcp`, `udp` or `sctp`.
    #[error("{path}: unknown protocol {found}, expected \"tcp\", \"udp\" or \"sctp\"")]
    UnknownProtocol {
        /// Where the protocol is.
        path: String,
        /// The protocol found, quoted and cut to a bounded excerpt.
        found: String,
    },
    /// Two targets name the same release.
    #[error("{path}: duplicate target, the same release is listed at {first}")]
    DuplicateTarget {
        /// The second target.
        path: String,
        /// The first target with that release.
        first: String,
    },
    /// Two instances of one target share an instance ID.
    #[error("{path}: duplicate instance id, already used at {first}")]
    DuplicateInstance {
        /// The second instance ID.
        path: String,
        /// The first instance ID.
        first: String,
    },
    /// A list or text is longer than its bound in [`limits`](crate::limits).
    #[error("{path}: more than {max} {what}")]
    LimitExceeded {
        /// The offending list or text.
        path: String,
        /// What was counted (`targets`, `instances`, `ports`, `bytes`).
        what: &'static str,
        /// The bound.
        max: usize,
    },
}

/// Where document-level errors without a finer place are located.
const ROOT_PATH: &str = "$";

impl DocumentError {
    /// The place in the document the error is about; `$` for the root.
    #[must_use]
    pub fn path(&self) -> &str {
        match self {
            Self::TooLarge { .. } | Self::Syntax { .. } => ROOT_PATH,
            Self::WrongType { path, .. }
            | Self::MissingField { path }
            | Self::UnknownField { path }
            | Self::DuplicateKey { path }
            | Self::UnsupportedVersion { path, .. }
            | Self::EmptyName { path }
            | Self::InvalidName { path, .. }
            | Self::InvalidAddress { path, .. }
            | Self::InvalidPort { path }
            | Self::UnknownProtocol { path, .. }
            | Self::DuplicateTarget { path, .. }
            | Self::DuplicateInstance { path, .. }
            | Self::LimitExceeded { path, .. } => path,
        }
    }
}

/// A [`DocumentSource`](crate::DocumentSource) could not hand over the
/// document bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// There is no document.
    #[error("document does not exist")]
    NotFound,
    /// The document exists but this process may not read it.
    #[error("permission to read the document is denied")]
    PermissionDenied,
    /// The path names something other than a regular file (a FIFO, a
    /// device, a directory, a socket); it is not opened, since opening a
    /// FIFO or a device can block or never end.
    #[error("document is not a regular file but a {kind}")]
    NotRegularFile {
        /// What the path names: `fifo`, `character device`, `block device`,
        /// `socket`, `directory` or `special file`.
        kind: &'static str,
    },
    /// Reading the document took longer than its bound
    /// ([`DOCUMENT_READ_MS_MAX`](crate::limits::DOCUMENT_READ_MS_MAX)).
    #[error("reading the document took longer than {after_ms} ms")]
    TimedOut {
        /// The bound that was passed, in milliseconds.
        after_ms: u64,
    },
    /// The document could not be read for another reason.
    #[error("document is unavailable: {reason}")]
    Unavailable {
        /// What the operating system or source reported.
        reason: String,
    },
}

impl From<io::Error> for SourceError {
    fn from(error: io::Error) -> Self {
        match error.kind() {
            io::ErrorKind::NotFound => Self::NotFound,
            io::ErrorKind::PermissionDenied => Self::PermissionDenied,
            _ => Self::Unavailable {
                reason: error.to_string(),
            },
        }
    }
}

/// The directory state failed an invocation (DIR-3): the caller should
/// treat it as a failed dependency, not as a bad request.
///
/// `location` is where the document lives, as its source describes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DependencyError {
    /// The document does not exist (never written, or deleted).
    #[error("directory document {location} is missing")]
    Missing {
        /// Where the document should be.
        location: String,
    },
    /// The document exists but may not be read.
    #[error("directory document {location} is unreadable: permission denied")]
    Unreadable {
        /// Where the document is.
        location: String,
    },
    /// The path names something other than a regular file, which is not
    /// opened (a FIFO or a device could block the invocation forever).
    #[error("directory document {location} is not a regular file but a {kind}")]
    NotRegularFile {
        /// Where the document should be.
        location: String,
        /// What the path names instead.
        kind: &'static str,
    },
    /// Reading the document took longer than its bound; the invocation
    /// fails rather than wait on a hung source.
    #[error("directory document {location} could not be read within {after_ms} ms")]
    TimedOut {
        /// Where the document is.
        location: String,
        /// The bound that was passed, in milliseconds.
        after_ms: u64,
    },
    /// The document could not be read for another reason.
    #[error("directory document {location} is unavailable: {reason}")]
    Unavailable {
        /// Where the document is.
        location: String,
        /// What the source reported.
        reason: String,
    },
    /// The document was read but is not a valid
    /// `router-instance-directory.v1` document.
    #[error("directory document {location} is malformed")]
    Malformed {
        /// Where the document is.
        location: String,
        /// What is wrong with it, and where.
        #[source]
        error: DocumentError,
    },
    /// No target of the document is exactly the requested release.
    #[error("directory has no target for release {release_id} of agent {agent_id}")]
    Unmatched {
        /// Agent ID of the requested release.
        agent_id: String,
        /// Release ID of the requested release.
        release_id: String,
    },
    /// The matching target has no ready TCP endpoint for the port name.
    #[error("no ready tcp endpoint for port {port_name} of release {release_id}")]
    NoReadyEndpoint {
        /// Release ID of the requested release.
        release_id: String,
        /// The configured port name.
        port_name: PortName,
    },
    /// The matching target has several ready TCP endpoints for the port
    /// name; choosing among them needs a policy this router does not have.
    #[error(
        "{count} ready tcp endpoints for port {port_name} of release {release_id}, expected exactly one"
    )]
    SeveralReadyEndpoints {
        /// Release ID of the requested release.
        release_id: String,
        /// The configured port name.
        port_name: PortName,
        /// How many ready endpoints were found.
        count: usize,
    },
}

impl DependencyError {
    /// Maps what a source reported onto the dependency failure it causes.
    pub(crate) fn from_source(location: &str, error: SourceError) -> Self {
        let location = location.to_owned();
        match error {
            SourceError::NotFound => Self::Missing { location },
            SourceError::PermissionDenied => Self::Unreadable { location },
            SourceError::NotRegularFile { kind } => Self::NotRegularFile { location, kind },
            SourceError::TimedOut { after_ms } => Self::TimedOut { location, after_ms },
            SourceError::Unavailable { reason } => Self::Unavailable { location, reason },
        }
    }
}

/// An invocation could not be routed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveError {
    /// The directory state failed the invocation (DIR-3, DIR-4, DIR-8).
    #[error("dependency failure")]
    Dependency(#[from] DependencyError),
    /// The selector proposed a target that differs from the authorized one
    /// in more than its network destination (DIR-5).
    #[error("selection rejected: it would change the {field} of the authorized target")]
    ImmutableFieldChanged {
        /// The first field found changed.
        field: ImmutableField,
    },
    /// The selector chose something the snapshot it was given does not
    /// back: an unlisted, unready or non-TCP instance, or a destination that
    /// is not the instance's address and configured port (DIR-4).
    #[error("selection rejected: instance {instance_id} {fault}")]
    SelectionRejected {
        /// The instance the selector named.
        instance_id: InstanceId,
        /// What the snapshot says against the answer.
        fault: SelectionFault,
    },
}

impl ResolveError {
    /// Whether the failure comes from the directory state, as opposed to a
    /// selection the router refused (the identity guard, or an answer the
    /// snapshot does not back).
    #[must_use]
    pub fn is_dependency_failure(&self) -> bool {
        matches!(self, Self::Dependency(_))
    }
}

/// The router refused to start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// File mode needs a readable, valid document at start (DIR-7).
    #[error("config_center_file mode refused to start")]
    DirectoryUnusable(#[source] DependencyError),
}

/// The routing configuration is contradictory or incomplete (DIR-2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The mode is not exactly `direct` or `config_center_file`.
    #[error("unknown mode {given}, expected \"direct\" or \"config_center_file\"")]
    UnknownMode {
        /// The mode given, quoted and cut to a bounded excerpt.
        given: String,
    },
    /// File mode was chosen without a document path.
    #[error("mode config_center_file needs a directory document path")]
    DirectoryMissing,
    /// Direct mode was chosen with a document path: the path would be
    /// ignored, so it is refused instead.
    #[error("mode direct reads no directory document, but a path was given")]
    DirectoryWithDirectMode,
    /// Direct mode was chosen with a port name: it would be ignored, so it is
    /// refused instead.
    #[error("mode direct selects no port, but a port name was given")]
    PortNameWithDirectMode,
}

/// A transport could not deliver a send or a cancellation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("transport failed: {reason}")]
pub struct TransportError {
    reason: String,
}

impl TransportError {
    /// A transport failure described by `reason`.
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
        }
    }

    /// What the transport reported.
    #[must_use]
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

/// A streaming invocation could not cancel its stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CancelError {
    /// Every allowed attempt failed
    /// ([`CANCEL_ATTEMPTS_MAX`](crate::limits::CANCEL_ATTEMPTS_MAX)).
    #[error("cancellation failed after {attempts} attempts")]
    AttemptsExhausted {
        /// How many attempts were made.
        attempts: u32,
        /// The failure of the last attempt.
        #[source]
        last: TransportError,
    },
    /// The cancellation's time ([`CANCEL_MS_MAX`](crate::limits::CANCEL_MS_MAX))
    /// was spent before an attempt succeeded; no further attempt was made.
    #[error("cancellation failed: {attempts} attempts did not succeed within {after_ms} ms")]
    DeadlinePassed {
        /// How many attempts were made.
        attempts: u32,
        /// The bound that was passed, in milliseconds.
        after_ms: u64,
        /// The failure of the last attempt.
        #[source]
        last: TransportError,
    },
}
