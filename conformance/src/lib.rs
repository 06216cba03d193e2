//! connreg-conformance
