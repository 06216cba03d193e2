//! connreg-benches
