//! How the generated tests run an async conformance test: on a fresh
//! multi-threaded runtime, under a time limit so a hung backend fails
//! instead of stalling the run.

use std::future::Future;
use std::time::Duration;

/// Worker threads of each test's runtime: enough for real races on a
/// small machine.
pub const WORKER_THREADS: usize = 4;

/// Longest one conformance test may take, in seconds.
pub const TEST_TIMEOUT_S: u64 = 300;

/// Runs one test future to completion on its own runtime.
pub fn block_on<F: Future>(test: F) -> F::Output {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKER_THREADS)
        .enable_all()
        .build()
        .expect("a test runtime");
    runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(TEST_TIMEOUT_S), test)
            .await
            .expect("the conformance test finished within its time limit")
    })
}
