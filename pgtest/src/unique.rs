//! Unique names for test databases and cluster folders.
//!
//! This is test infrastructure, not the deterministic core: uniqueness across
//! processes and machines sharing one server matters here, reproducibility
//! does not.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// The next number of a per-process sequence, starting at 1.
pub(crate) fn next_number() -> u64 {
    COUNTER.fetch_add(1, Ordering::Relaxed) + 1
}

/// Eight random lowercase hex digits.
///
/// `RandomState` is seeded randomly by the standard library, which avoids a
/// dependency on a random number crate; the clock and the counter are mixed
/// in so that two calls never hash the same input.
pub(crate) fn random_suffix() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or_default();
    let hash = RandomState::new().hash_one((std::process::id(), nanos, next_number()));
    format!("{:08x}", hash as u32)
}
