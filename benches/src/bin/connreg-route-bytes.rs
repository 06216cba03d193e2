//! Bytes the in-memory registry holds per retained route, counted by the
//! process's allocator ([cap](https://docs.rs/cap)): routes created, each
//! resolved and settled, with the count of held bytes before and after.
//!
//! A process of its own: the counting allocator adds an atomic update to
//! every allocation and free, which the throughput figures of
//! `benches/targets.rs` must not carry. That bench runs this binary and
//! reads its one line of output, `bytes_per_route=<figure>`.
//!
//! ```sh
//! cargo run -p connreg-benches --release --bin connreg-route-bytes
//! ```

use std::alloc::System;

use cap::Cap;
use connreg::RouteRequest;
use connreg_benches::memory_fleet::{BATCH_CALLS_MAX, FLEET_REPLICAS, MemoryBench};

/// The process's allocator, counting the bytes held.
#[global_allocator]
static ALLOCATOR: Cap<System> = Cap::new(System, usize::MAX);

/// Routes created to measure memory per retained route.
const ALLOC_ROUTES: u32 = 100_000;

fn held_bytes() -> i64 {
    ALLOCATOR.allocated() as i64
}

/// [`ALLOC_ROUTES`] new routes, each resolved and settled. Requests are
/// built inside the window, so what the registry keeps of them counts and
/// what it drops does not.
fn bytes_per_route() -> f64 {
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

fn main() {
    println!("bytes_per_route={:.1}", bytes_per_route());
}
