//! Why a qualification could not produce a verdict, and the exit code each
//! reason maps to.

use super::contract::{BackendKind, ContractError};
use super::fleet::SetupError;

/// Exit code: every threshold met.
pub const EXIT_PASS: u8 = 0;
/// Exit code: the run finished and at least one threshold was missed.
pub const EXIT_FAIL: u8 = 1;
/// Exit code: the contract or the command line is unusable.
pub const EXIT_BAD_INPUT: u8 = 2;
/// Exit code: the run could not finish (backend unavailable, setup failed,
/// the end inspection failed); there is no verdict.
pub const EXIT_RUN_ERROR: u8 = 3;

/// A qualification that produced no verdict.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QualifyError {
    /// The contract is unusable.
    #[error(transparent)]
    Contract(#[from] ContractError),
    /// The report file cannot be written.
    #[error("cannot write the report to {file}: {reason}")]
    ReportFile {
        /// The path given.
        file: String,
        /// Why.
        reason: String,
    },
    /// The command line's options are unusable.
    #[error("{reason}")]
    Options {
        /// Why.
        reason: String,
    },
    /// The backend could not be opened.
    #[error("the {backend} backend is unavailable: {reason}")]
    Backend {
        /// Which backend.
        backend: BackendKind,
        /// Why, as the backend (or connreg-pgtest) said it.
        reason: String,
    },
    /// Publishing or registering the fleet failed.
    #[error("fleet setup failed: {0}")]
    Setup(#[from] SetupError),
    /// The run itself failed.
    #[error("the run failed: {reason}")]
    Run {
        /// Why.
        reason: String,
    },
}

impl QualifyError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            QualifyError::Contract(_)
            | QualifyError::ReportFile { .. }
            | QualifyError::Options { .. } => EXIT_BAD_INPUT,
            QualifyError::Backend { .. } | QualifyError::Setup(_) | QualifyError::Run { .. } => {
                EXIT_RUN_ERROR
            }
        }
    }
}
