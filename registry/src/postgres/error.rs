//! Errors: the one mapping from database failures to [`Error`], and the
//! start-up error of the constructors.
//!
//! No SQL text, server message or other tenant's data reaches a caller:
//! [`db`] keeps only the class of failure, and logs the detail through
//! `tracing` for operators.

use crate::error::Error;

/// Why a PostgreSQL registry could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The options are incoherent.
    #[error("invalid options: {reason}")]
    Options {
        /// What is wrong.
        reason: String,
    },
    /// The installed schema is not the one this build serves (AUTH-3).
    /// `found` is `None` when no schema is installed or it cannot be read.
    #[error("schema version mismatch: this build needs version {expected}, the database has {}",
        found.map_or_else(|| "none".to_string(), |v| v.to_string()))]
    SchemaMismatch {
        /// The version this build needs.
        expected: i32,
        /// The version installed.
        found: Option<i32>,
    },
    /// Applying migrations failed.
    #[error("migration failed: {reason}")]
    Migration {
        /// The migrator's account.
        reason: String,
    },
    /// The role and schema setup failed.
    #[error("setup failed: {reason}")]
    Setup {
        /// Which step failed.
        reason: String,
    },
    /// The server could not be reached or refused the connection.
    #[error("database unavailable: {reason}")]
    Unavailable {
        /// A short reason.
        reason: String,
    },
}

impl From<sqlx::Error> for StartError {
    fn from(e: sqlx::Error) -> StartError {
        StartError::Unavailable {
            reason: db(e).to_string(),
        }
    }
}

/// Maps a database failure onto the domain error: the one place where
/// SQLSTATEs and driver failures become outcomes.
pub(crate) fn db(e: sqlx::Error) -> Error {
    let unavailable = |reason: &str| Error::Unavailable {
        reason: reason.to_string(),
    };
    match &e {
        sqlx::Error::Database(d) => {
            let code = d.code().map(|c| c.into_owned()).unwrap_or_default();
            tracing::debug!(sqlstate = %code, constraint = ?d.constraint(), error = %d, "postgres error");
            match code.as_str() {
                // A replica id registered concurrently with another identity.
                "23505" if d.constraint() == Some("replicas_pk") => Error::Conflict {
                    reason: "a registered replica must present the same identity",
                },
                // Text PostgreSQL cannot store (a NUL character).
                "22021" | "22P05" => Error::InvalidRequest {
                    what: "text",
                    reason: "contains a character the store cannot hold".into(),
                },
                "40001" | "40P01" => unavailable("transaction conflict; retry"),
                "55P03" => unavailable("lock wait timed out; retry"),
                "57014" => unavailable("statement timed out"),
                "25P03" => unavailable("transaction idle too long"),
                "42501" => unavailable("permission denied to the registry's role"),
                "53300" | "53000" | "53100" | "53200" => unavailable("server out of resources"),
                c if c.starts_with("08") || c.starts_with("57P") => {
                    unavailable(super::health::CONNECTION_LOST)
                }
                _ => {
                    tracing::warn!(sqlstate = %code, error = %d, "unexpected postgres error");
                    unavailable("store error")
                }
            }
        }
        sqlx::Error::PoolTimedOut => unavailable("no store connection free in time"),
        sqlx::Error::PoolClosed => unavailable("store connection pool closed"),
        sqlx::Error::Io(_) | sqlx::Error::Tls(_) | sqlx::Error::Protocol(_) => {
            tracing::warn!(error = %e, "postgres connection failure");
            unavailable(super::health::CONNECTION_LOST)
        }
        _ => {
            tracing::warn!(error = %e, "postgres driver failure");
            unavailable("store error")
        }
    }
}

/// A stored value that does not decode into a record: the store was
/// changed behind the registry's back.
pub(crate) fn corrupt(what: &str) -> Error {
    tracing::error!(what, "stored record does not decode");
    Error::Unavailable {
        reason: "stored record is malformed".into(),
    }
}
