//! The in-memory criterion benches, `backend/memory/<operation>/<replicas>`:
//! new-route resolve, existing resolve, settle, heartbeat and one catalog
//! page, one caller at a time, on each fleet of [`FLEET_REPLICAS`], each on
//! a [`MemoryBench`].

use std::hint::black_box;
use std::time::Instant;

use connreg::contracts::{CatalogRead, ReplicaLifecycle};
use connreg::limits::LEASE_TTL_MS_MAX;
use connreg::{CatalogQuery, HeartbeatParams, Reader};
use connreg_benches::guard;
use connreg_benches::memory_fleet::{FLAT_ROUNDS, MemoryBench, flat_side_by_side};
use criterion::{BenchmarkId, Criterion};

use crate::common::{FLEET_REPLICAS, batched, record};

pub(crate) fn memory_benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("backend");
    for replicas in FLEET_REPLICAS {
        eprintln!("targets: in-memory fleet of {replicas} replicas");
        let mut bench = MemoryBench::new(replicas);
        let name = format!("memory/resolve_new/{replicas}");
        group.bench_function(BenchmarkId::new("memory/resolve_new", replicas), |b| {
            b.iter_custom(|iters| {
                let elapsed = batched(iters, |n| {
                    bench.room_for(n as u64);
                    let requests = (0..n).map(|_| bench.new_request()).collect();
                    let (elapsed, held) = bench.resolve(requests);
                    bench.settle(held);
                    elapsed
                });
                record(&name, elapsed, iters);
                elapsed
            });
        });

        let existing = bench.new_request();
        bench.resolve(vec![existing.clone()]);
        let name = format!("memory/resolve_existing/{replicas}");
        group.bench_function(BenchmarkId::new("memory/resolve_existing", replicas), |b| {
            b.iter_custom(|iters| {
                let elapsed = batched(iters, |n| {
                    let (elapsed, _) = bench.resolve(vec![existing.clone(); n]);
                    bench.routes -= n as u64;
                    elapsed
                });
                record(&name, elapsed, iters);
                elapsed
            });
        });

        let name = format!("memory/settle/{replicas}");
        group.bench_function(BenchmarkId::new("memory/settle", replicas), |b| {
            b.iter_custom(|iters| {
                let elapsed = batched(iters, |n| {
                    bench.room_for(n as u64);
                    let requests = (0..n).map(|_| bench.new_request()).collect();
                    let (_, held) = bench.resolve(requests);
                    bench.settle(held)
                });
                record(&name, elapsed, iters);
                elapsed
            });
        });

        let replica = bench.plan.replicas[0].id.clone();
        let name = format!("memory/heartbeat/{replicas}");
        group.bench_function(BenchmarkId::new("memory/heartbeat", replicas), |b| {
            b.iter_custom(|iters| {
                let elapsed = batched(iters, |n| {
                    let first = bench.health_seq + 1;
                    bench.health_seq += n as u64;
                    let registry = &bench.registry;
                    let replica = &replica;
                    bench.runtime.block_on(async {
                        let started = Instant::now();
                        for seq in first..first + n as u64 {
                            let params = HeartbeatParams {
                                replica: replica.clone(),
                                health_seq: seq,
                                lease_ttl_ms: LEASE_TTL_MS_MAX,
                            };
                            black_box(registry.replica_heartbeat(params).await.expect("beats"));
                        }
                        started.elapsed()
                    })
                });
                record(&name, elapsed, iters);
                elapsed
            });
        });

        let query = CatalogQuery::first_page(Reader::Tenant(bench.plan.tenants[0].clone()));
        let name = format!("memory/catalog_page/{replicas}");
        group.bench_function(BenchmarkId::new("memory/catalog_page", replicas), |b| {
            b.iter_custom(|iters| {
                let elapsed = batched(iters, |n| {
                    let registry = &bench.registry;
                    let query = &query;
                    bench.runtime.block_on(async {
                        let started = Instant::now();
                        for _ in 0..n {
                            black_box(registry.catalog_page(query.clone()).await.expect("a page"));
                        }
                        started.elapsed()
                    })
                });
                record(&name, elapsed, iters);
                elapsed
            });
        });
    }
    group.finish();
}

/// `memory_flat_100k_vs_1k`: the median of [`FLAT_ROUNDS`] ratios of a
/// new-route resolve on the largest fleet ÷ on the smallest, measured side
/// by side ([`flat_side_by_side`]), with every round's ratio on stderr.
pub(crate) fn memory_flat_side_by_side() -> f64 {
    let (small, large) = (FLEET_REPLICAS[0], FLEET_REPLICAS[FLEET_REPLICAS.len() - 1]);
    eprintln!("targets: in-memory fleets of {small} and {large} replicas side by side");
    let mut ratios = flat_side_by_side(
        &mut MemoryBench::new(small),
        &mut MemoryBench::new(large),
        FLAT_ROUNDS,
    );
    let shown: Vec<String> = ratios.iter().map(|r| format!("{r:.3}")).collect();
    eprintln!("targets: {large} ÷ {small} by round: {}", shown.join(" "));
    guard::median(&mut ratios)
}
