//! connreg-sim
