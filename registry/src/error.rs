//! The one public error type: domain outcomes a caller acts on.
//!
//! Messages are lowercase and never carry another tenant's data, SQL text or
//! a backend's internal detail. Backends map their own failures onto these
//! variants in one place each.

/// A domain outcome other than success.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request is malformed: a field is missing, empty or out of shape.
    #[error("invalid {what}: {reason}")]
    InvalidRequest {
        /// Which input is wrong.
        what: &'static str,
        /// Why, in words that reveal nothing beyond the caller's own input.
        reason: String,
    },
    /// An input is over one of the registry's named limits.
    #[error("{what} exceeds its limit of {max}")]
    LimitExceeded {
        /// Which bound was exceeded.
        what: &'static str,
        /// The documented maximum.
        max: u64,
    },
    /// A record the request names does not exist (administration only).
    #[error("unknown {what} {id:?}")]
    NotFound {
        /// The kind of record.
        what: &'static str,
        /// The identifier the caller gave.
        id: String,
    },
    /// The continuation cursor was read at an older catalog revision.
    #[error("stale cursor: the catalog changed since this page; restart from the first page")]
    StaleCursor,
    /// The continuation cursor is malformed, tampered with or from another query.
    #[error("invalid cursor: {reason}")]
    InvalidCursor {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The request contradicts durable state: the action is assigned under
    /// other coordinates, or an immutable record would change.
    #[error("conflict: {reason}")]
    Conflict {
        /// A reason that names only the caller's own input.
        reason: &'static str,
    },
    /// The tenant has no enabled binding for the capability.
    #[error("no eligible binding for this tenant and capability")]
    NoEligibleBinding,
    /// Bindings exist, but no eligible replica or admission capacity is free.
    #[error("no capacity: no eligible replica or admission scope has room")]
    NoCapacity,
    /// The action's pinned replica cannot take the action again now.
    #[error("replica unavailable: the assigned replica cannot serve this action now")]
    ReplicaUnavailable,
    /// The assignment given differs from the stored one (fence included).
    #[error("fence lost: the assignment does not match the stored one")]
    FenceLost,
    /// The backend could not answer; retrying later may succeed.
    #[error("registry unavailable: {reason}")]
    Unavailable {
        /// A short, non-sensitive reason.
        reason: String,
    },
}

impl Error {
    /// A short, stable name of the variant, for traces and counters.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::InvalidRequest { .. } => "invalid_request",
            Error::LimitExceeded { .. } => "limit_exceeded",
            Error::NotFound { .. } => "not_found",
            Error::StaleCursor => "stale_cursor",
            Error::InvalidCursor { .. } => "invalid_cursor",
            Error::Conflict { .. } => "conflict",
            Error::NoEligibleBinding => "no_eligible_binding",
            Error::NoCapacity => "no_capacity",
            Error::ReplicaUnavailable => "replica_unavailable",
            Error::FenceLost => "fence_lost",
            Error::Unavailable { .. } => "unavailable",
        }
    }

    pub(crate) fn invalid(what: &'static str, reason: impl Into<String>) -> Error {
        Error::InvalidRequest {
            what,
            reason: reason.into(),
        }
    }

    pub(crate) fn limit(what: &'static str, max: usize) -> Error {
        Error::LimitExceeded {
            what,
            max: max as u64,
        }
    }
}

/// The registry's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
