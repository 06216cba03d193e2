//! connreg-conformance: one suite every backend must pass.

pub mod harness;
pub use harness::Harness;
