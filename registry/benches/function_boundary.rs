//! The cost of the data role's function boundary (AUTH-6): a new-route
//! resolve through `connreg.data_route_resolve` (migrations 0008, 0009: a
//! `SECURITY DEFINER` function with a fixed `search_path`, the catalog lock
//! as a table lock) beside the same decision through 0007's
//! `connreg.route_resolve` (an invoker's function with advisory locks, which
//! the data role called directly before 0008), on one database, in one run.
//!
//! ```sh
//! cargo bench -p connreg --bench function_boundary
//! CONNREG_BOUNDARY_ROUNDS=40 CONNREG_BOUNDARY_CLIENTS=16 cargo bench -p connreg --bench function_boundary
//! ```
//!
//! Both paths run as the same role on the same pool with the same
//! arguments; rounds alternate the two (so drift of a shared machine falls
//! on both), each round a fixed number of resolves per client; the figure
//! is the median over rounds of the per-round throughput ratio, with its
//! minimum and maximum.
#![cfg(feature = "postgres")]

#[path = "../tests/postgres_common/mod.rs"]
mod postgres_common;

use std::time::Instant;

use postgres_common::{FleetOptions, PgFixture, bulk_replicas, publish_fleet};
use sqlx::postgres::PgPoolOptions;

/// 0007's resolve, as the backend called it before 0008.
const BEFORE: &str = "SELECT outcome FROM connreg.route_resolve($1, 't0', 'crm.contact.create',
    1, 'standard', true, 'eu', 'eu-1', 1668182530, ('x' || left(md5($1), 8))::bit(32)::integer,
    1668182529, 0, 8, 1, 1000, 16, false)";

/// The data role's function, as the backend calls it now.
const AFTER: &str = "SELECT outcome FROM connreg.data_route_resolve($1, 't0', 'crm.contact.create',
    1, 'standard', true, 'eu', 'eu-1', false)";

/// Most rounds a run may ask for.
const ROUNDS_MAX: usize = 1_000;
/// Most clients a run may ask for (the test server allows 300 sessions).
const CLIENTS_MAX: usize = 64;

fn setting(name: &str, default: usize, max: usize) -> usize {
    match std::env::var(name) {
        Err(_) => default,
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if (1..=max).contains(&n) => n,
            _ => panic!("{name}: {v:?} is not a number from 1 to {max}"),
        },
    }
}

fn main() {
    let rounds = setting("CONNREG_BOUNDARY_ROUNDS", 20, ROUNDS_MAX);
    let clients = setting("CONNREG_BOUNDARY_CLIENTS", 16, CLIENTS_MAX);
    let per_client = setting("CONNREG_BOUNDARY_RESOLVES", 25, 10_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(run(rounds, clients, per_client));
}

#[allow(
    clippy::disallowed_methods,
    reason = "a benchmark measures elapsed wall time; nothing here decides by it"
)]
async fn run(rounds: usize, clients: usize, per_client: usize) {
    let fx = PgFixture::new().await;
    let (registry, _clock) = fx.registry_at_zero().await;
    publish_fleet(
        &registry,
        &FleetOptions {
            tenants: 1,
            tenant_scope_limit: Some(1_000_000),
            ..FleetOptions::default()
        },
    )
    .await;
    let mut admin = fx.admin_conn().await;
    bulk_replicas(&mut admin, "t0-i0", 8, 10_000, 600_000).await;
    let pool = PgPoolOptions::new()
        .max_connections(clients as u32)
        .min_connections(clients as u32)
        .connect_with(fx.admin.clone())
        .await
        .expect("a pool");
    let mut ratios = Vec::with_capacity(rounds);
    let mut totals = [0.0f64; 2];
    for round in 0..rounds {
        let mut tps = [0.0f64; 2];
        // Alternate which path goes first.
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for which in order {
            let statement = [BEFORE, AFTER][which];
            let started = Instant::now();
            let tasks: Vec<_> = (0..clients)
                .map(|c| {
                    let pool = pool.clone();
                    tokio::spawn(async move {
                        for k in 0..per_client {
                            let action = format!("b{round}-{which}-{c}-{k}");
                            let outcome: String = sqlx::query_scalar(statement)
                                .bind(&action)
                                .fetch_one(&pool)
                                .await
                                .expect("a resolve");
                            assert_eq!(outcome, "created");
                        }
                    })
                })
                .collect();
            for task in tasks {
                task.await.expect("a client");
            }
            let secs = started.elapsed().as_secs_f64();
            tps[which] = (clients * per_client) as f64 / secs;
            totals[which] += secs;
        }
        ratios.push(tps[1] / tps[0]);
    }
    ratios.sort_by(f64::total_cmp);
    let resolves = (rounds * clients * per_client) as f64;
    println!(
        "function_boundary: {rounds} rounds x {clients} clients x {per_client} new-route resolves per path"
    );
    println!(
        "before (0007 route_resolve): {:.1} resolves/s; after (data_route_resolve): {:.1} resolves/s",
        resolves / totals[0],
        resolves / totals[1]
    );
    println!(
        "after / before throughput per round: median {:.3}, min {:.3}, max {:.3}",
        ratios[ratios.len() / 2],
        ratios[0],
        ratios[ratios.len() - 1]
    );
}
