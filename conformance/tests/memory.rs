//! The in-memory backend runs the whole conformance suite.
connreg_conformance::conformance_tests!(connreg_conformance::memory::MemoryHarness);
