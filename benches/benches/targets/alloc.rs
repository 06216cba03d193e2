//! Memory per retained route on the in-memory backend: the process's
//! counting allocator ([cap](https://docs.rs/cap)) and the count of bytes
//! held before and after a run of routes. The allocator adds an atomic
//! update to every allocation and free of the bench process, so the
//! in-memory figures of every part include it.

use std::alloc::System;

use cap::Cap;
use connreg::RouteRequest;

use crate::common::{BATCH_CALLS_MAX, FLEET_REPLICAS};
use crate::memory::MemoryBench;

/// The process's allocator, counting the bytes held.
#[global_allocator]
static ALLOCATOR: Cap<System> = Cap::new(System, usize::MAX);

/// Routes created to measure memory per retained route.
const ALLOC_ROUTES: u32 = 100_000;

fn held_bytes() -> i64 {
    ALLOCATOR.allocated() as i64
}

/// Bytes the in-memory registry keeps per route: [`ALLOC_ROUTES`] new
/// routes, each resolved and settled, with the allocator's count of held
/// bytes before and after. Requests are built inside the window, so what
/// the registry keeps of them counts and what it drops does not.
pub(crate) fn memory_per_route() -> f64 {
    let mut bench = MemoryBench::new(FLEET_REPLICAS[0]);
    // Warm the maps a little so the first growth is not all in the window.
    let warm: Vec<RouteRequest> = (0..BATCH_CALLS_MAX).map(|_| bench.new_request()).collect();
    let (_, held) = bench.resolve(warm);
    bench.settle(held);
    let before = held_bytes();
    for _ in 0..ALLOC_ROUTES / BATCH_CALLS_MAX as u32 {
        let requests = (0..BATCH_CALLS_MAX).map(|_| bench.new_request()).collect();
        let (_, held) = bench.resolve(requests);
        bench.settle(held);
    }
    let after = held_bytes();
    drop(bench);
    (after - before) as f64 / f64::from(ALLOC_ROUTES)
}
