//! Goal: the in-memory backend is deterministic: the same call sequence on
//! two fresh stores with the same clock start gives byte-identical results
//! and final state.

use connreg_conformance::memory::MemoryHarness;
use connreg_conformance::{determinism, run};

// spec: LEASE-4
#[test]
fn same_calls_give_same_results() {
    run::block_on(determinism::same_calls_give_same_results(&MemoryHarness));
}
