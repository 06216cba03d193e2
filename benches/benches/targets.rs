//! The performance targets, measured side by side in one run. This file
//! owns the run (which parts, in which order, the knobs) and the report;
//! each part is a module of `targets/`.
//!
//! ```sh
//! cargo bench -p connreg-benches --bench targets
//! CONNREG_TARGETS_SECS=20 cargo bench -p connreg-benches --bench targets
//! CONNREG_TARGETS_PARTS=fleet CONNREG_TARGETS_SECS=5 cargo bench -p connreg-benches --bench targets
//! ```
//!
//! Four parts, in this order:
//!
//! 1. Criterion benches `backend/<memory|postgres>/<operation>/<replicas>`
//!    (`memory`, `postgres`): new-route resolve, resolve of an existing
//!    route, settle, heartbeat and one catalog page, one caller at a time,
//!    on fleets of 1,000, 10,000 and 100,000 replicas. Every fleet gives the
//!    benched tenants the same ten replicas each; the rest are other
//!    tenants', so the cost at 100,000 ÷ at 1,000 shows whether routing
//!    grows with unrelated replicas (AUTH-4).
//! 2. Throughput at [`CLIENTS`] clients on PostgreSQL (10,000 replicas) beside
//!    pgbench on the same server in the same run, with `fsync` and
//!    `synchronous_commit` on (`pgload`): new-route resolves with their p99,
//!    whole actions (resolve then settle), resolves of existing routes,
//!    TPC-B at a scale of at least the client count and select-only; WAL
//!    bytes per transaction from the server's WAL position before and after
//!    each (`wal`).
//! 3. Fleet-scale bounds on PostgreSQL (`fleet`): lease maintenance over
//!    20,000 and 200,000 held reservations (`maintenance`), and
//!    publications every 100 ms beside [`RESOLVERS`] resolvers of one
//!    tenant (`publication`).
//! 4. Memory per retained route on the in-memory backend, from a counting
//!    allocator in a process of its own (`connreg-route-bytes`, `alloc`),
//!    and the simulator (`sim`): seeds per minute of
//!    the standard scenario on two threads, and the fleet-scale
//!    mass-expiry scenario (1,500 replicas, over 10,000 routes) at seed 1
//!    in a process of its own: simulated seconds per wall second, trace
//!    bytes per simulated second, its largest step and peak resident
//!    memory. `simpg` (not run by default: about six minutes) runs the
//!    same scenario on PostgreSQL.
//!
//! At the end a table and one line per target:
//! `TARGET <name> measured=<value> goal=<value> holds=<yes|no>` (a figure
//! without a documented bound: `goal=none holds=no-goal`).
//!
//! Knobs: `CONNREG_TARGETS_SECS` (measured seconds of each throughput run
//! and of each phase of the publication run, default 5, at most
//! [`SECS_MAX`]), `CONNREG_TARGETS_PARTS` (comma separated subset of
//! `memory,postgres,pgload,alloc,sim,simpg,fleet`; default all but `pgload`
//! and `simpg`; `pgload` alone runs the 16-client PostgreSQL runs without
//! the PostgreSQL criterion benches). The
//! PostgreSQL server comes from connreg-pgtest (`CONNREG_TEST_DATABASE_URL`,
//! else a throwaway local cluster, whose `fsync` the throughput runs turn
//! on).
//!
//! This process has the system allocator: the counting one, which adds an
//! atomic update to every allocation and free, runs only in
//! `connreg-route-bytes`.

#[path = "targets/alloc.rs"]
mod alloc;
#[path = "targets/common.rs"]
mod common;
#[path = "targets/maintenance.rs"]
mod maintenance;
#[path = "targets/memory.rs"]
mod memory;
#[path = "targets/pgload.rs"]
mod pgload;
#[path = "targets/postgres.rs"]
mod postgres;
#[path = "targets/publication.rs"]
mod publication;
#[path = "targets/sim.rs"]
mod sim;
#[path = "targets/wal.rs"]
mod wal;

use std::time::Duration;

use connreg::limits::LEASE_MAINTENANCE_RESERVATIONS_MAX;
use connreg::postgres::PoolOptions;
use criterion::Criterion;
use sqlx::postgres::PgConnectOptions;
use tokio::runtime::Runtime;

use crate::alloc::memory_per_route;
use crate::common::{MEANS, mean_ns};
use crate::maintenance::{HELD, Maintenance, lease_maintenance};
use crate::memory::{memory_benches, memory_flat_side_by_side};
use crate::pgload::{CLIENTS, THROUGHPUT_REPLICAS, pg_throughput};
use crate::postgres::pg_benches;
use crate::publication::{
    PUBLICATION_INTERVAL_MS, PUBLICATION_WAITS_MS_MAX, PublicationLoad, RESOLVERS, publication_load,
};
use crate::sim::{
    MASS_EXPIRY_CHILD, MassExpiry, empty_world_seeds_per_minute, mass_expiry, mass_expiry_child,
    sim_seeds_per_minute,
};

/// Most measured seconds of one throughput run.
const SECS_MAX: u64 = 600;

/// The parts `CONNREG_TARGETS_PARTS` may name.
const PARTS: [&str; 7] = [
    "memory", "postgres", "pgload", "alloc", "sim", "simpg", "fleet",
];

/// The parts run when `CONNREG_TARGETS_PARTS` is not set.
const PARTS_DEFAULT: &str = "memory,postgres,alloc,sim,fleet";

/// One target: its name, what was measured, the goal (none for a figure
/// that is reported beside the others but has no documented bound), and
/// whether the measure must stay at most (`true`) or at least (`false`)
/// the goal.
struct Target {
    name: &'static str,
    measured: Option<f64>,
    goal: Option<f64>,
    at_most: bool,
}

/// The fleet-scale figures on PostgreSQL (part `fleet`): lease maintenance
/// over each fleet of [`HELD`], then publications beside resolvers.
struct FleetFigures {
    maintenance: Vec<Maintenance>,
    publication: PublicationLoad,
}

async fn fleet_figures(secs: u64) -> Result<FleetFigures, String> {
    let mut maintenance = Vec::new();
    for (replicas, routes) in HELD {
        maintenance.push(lease_maintenance(replicas, routes).await?);
    }
    let publication = publication_load(secs).await?;
    Ok(FleetFigures {
        maintenance,
        publication,
    })
}

/// The runtime the PostgreSQL runs share the machine's two cores with.
fn pg_runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// The data pool's statement timeout by default, which a maintenance call
/// of the largest batch must finish far inside (LEASE-2).
fn data_statement_timeout_ms() -> u64 {
    PoolOptions::data(PgConnectOptions::new()).statement_timeout_ms
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(a? / b?)
}

/// The mass-expiry figures on `backend`, or the bench ends with the reason.
fn mass_expiry_or_exit(backend: connreg_sim::BackendKind) -> MassExpiry {
    mass_expiry(backend).unwrap_or_else(|e| {
        eprintln!("targets: simulator mass expiry: {e}");
        std::process::exit(1);
    })
}

/// The figure, or the bench ends with what failed.
fn or_exit<T>(what: &str, figure: Result<T, String>) -> T {
    figure.unwrap_or_else(|e| {
        eprintln!("targets: {what}: {e}");
        std::process::exit(1);
    })
}

fn main() {
    if let Ok(backend) = std::env::var(MASS_EXPIRY_CHILD) {
        mass_expiry_child(&backend);
    }
    let secs = match std::env::var("CONNREG_TARGETS_SECS") {
        Err(_) => 5,
        Ok(v) => match v.parse::<u64>() {
            Ok(s) if (1..=SECS_MAX).contains(&s) => s,
            _ => {
                eprintln!("targets: CONNREG_TARGETS_SECS must be 1..={SECS_MAX}, got {v:?}");
                std::process::exit(2);
            }
        },
    };
    let parts = std::env::var("CONNREG_TARGETS_PARTS").unwrap_or_else(|_| PARTS_DEFAULT.into());
    let parts: Vec<&str> = parts.split(',').map(str::trim).collect();
    for part in &parts {
        if !PARTS.contains(part) {
            eprintln!(
                "targets: CONNREG_TARGETS_PARTS names {part:?}; the parts are memory, postgres, pgload, alloc, sim, simpg and fleet"
            );
            std::process::exit(2);
        }
    }
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
        .configure_from_args();
    let mut memory_flat = None;
    if parts.contains(&"memory") {
        memory_benches(&mut criterion);
        memory_flat = Some(memory_flat_side_by_side());
    }
    let mut pg = None;
    if parts.contains(&"postgres")
        && let Err(e) = pg_benches(&mut criterion)
    {
        eprintln!("targets: PostgreSQL benches: {e}");
        std::process::exit(1);
    }
    if parts.contains(&"postgres") || parts.contains(&"pgload") {
        match pg_runtime().block_on(pg_throughput(secs)) {
            Ok(figures) => pg = Some(figures),
            Err(e) => {
                eprintln!("targets: PostgreSQL throughput: {e}");
                std::process::exit(1);
            }
        }
    }
    let mut fleet = None;
    if parts.contains(&"fleet") {
        match pg_runtime().block_on(fleet_figures(secs)) {
            Ok(figures) => fleet = Some(figures),
            Err(e) => {
                eprintln!("targets: PostgreSQL fleet-scale bounds: {e}");
                std::process::exit(1);
            }
        }
    }
    criterion.final_summary();
    let per_route = parts
        .contains(&"alloc")
        .then(|| or_exit("memory per route", memory_per_route()));
    let seeds_per_minute = parts
        .contains(&"sim")
        .then(|| or_exit("simulator", sim_seeds_per_minute(secs.max(10))));
    let empty_world = parts
        .contains(&"sim")
        .then(|| or_exit("empty world", empty_world_seeds_per_minute(secs.max(10))));
    let expiry_memory = parts
        .contains(&"sim")
        .then(|| mass_expiry_or_exit(connreg_sim::BackendKind::Memory));
    let expiry_postgres = parts
        .contains(&"simpg")
        .then(|| mass_expiry_or_exit(connreg_sim::BackendKind::Postgres));

    println!();
    println!("| bench | mean per call |");
    println!("|---|---:|");
    for (name, (ns, n)) in MEANS.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        println!(
            "| backend/{name} | {:.2} µs |",
            *ns as f64 / *n as f64 / 1_000.0
        );
    }
    if let Some(pg) = &pg {
        println!();
        println!(
            "PostgreSQL at {CLIENTS} clients, fsync={}, synchronous_commit={}, {} replicas:",
            pg.fsync, pg.synchronous_commit, THROUGHPUT_REPLICAS
        );
        println!("| run | tps | p99 | WAL bytes per transaction (records, all) | errors |");
        println!("|---|---:|---:|---:|---:|");
        for (name, t) in [
            ("new-route resolve", &pg.new_route),
            ("resolve + settle", &pg.action),
            ("existing resolve", &pg.existing),
        ] {
            println!(
                "| {name} | {:.0} | {:.2} ms | {} | {} of {} |",
                t.tps,
                t.p99_ms,
                t.wal.show(),
                t.errors,
                t.ops
            );
        }
        println!(
            "| pgbench TPC-B, scale {CLIENTS} | {:.0} | {:.2} ms | {} | |",
            pg.tpcb.tps,
            pg.tpcb.p99_ms,
            pg.tpcb_wal.show()
        );
        println!(
            "| pgbench select-only | {:.0} | {:.2} ms | | |",
            pg.select_only.tps, pg.select_only.p99_ms
        );
        for (name, kinds) in [
            ("new-route resolve", &pg.new_route.wal_kinds),
            ("resolve + settle", &pg.action.wal_kinds),
            ("pgbench TPC-B", &pg.tpcb_wal_kinds),
        ] {
            if !kinds.is_empty() {
                println!();
                println!("WAL per transaction by record kind, {name}:");
                for line in kinds {
                    println!("  {line}");
                }
            }
        }
    }
    if let Some(fleet) = &fleet {
        print_fleet(fleet);
    }
    if let Some(b) = per_route {
        println!();
        println!("in-memory bytes held per retained route: {b:.0}");
    }
    if let Some(s) = seeds_per_minute {
        println!("simulator standard-scenario seeds per minute, 2 threads: {s:.0}");
    }
    if let Some(s) = empty_world {
        println!(
            "an empty turmoil world of the standard scenario's hosts and links, same steps, \
             2 threads: {s:.0} seeds per minute"
        );
    }
    for (backend, run) in [("memory", &expiry_memory), ("postgres", &expiry_postgres)] {
        if let Some(m) = run {
            println!(
                "simulator mass expiry (0022, seed 1) on {backend}: {:.1} simulated s per wall s, \
                 {:.0} trace bytes per simulated s, largest step {} bytes, peak memory {:.0} MiB",
                m.sim_per_wall, m.trace_bytes_per_sim_s, m.largest_step_bytes, m.peak_rss_mib
            );
        }
    }

    let flat = |backend: &str| {
        ratio(
            mean_ns(&format!("{backend}/resolve_new/100000")),
            mean_ns(&format!("{backend}/resolve_new/1000")),
        )
    };
    if let Some(r) = flat("memory") {
        println!(
            "in-memory new-route resolve at 100,000 ÷ 1,000 replicas from the criterion means \
             above, each fleet measured in turn after the last was dropped: {r:.3} \
             (the target is measured side by side)"
        );
    }
    let targets = [
        Target {
            name: "postgres_resolve_vs_tpcb",
            measured: pg.as_ref().map(|p| p.new_route.tps / p.tpcb.tps),
            goal: Some(0.9),
            at_most: false,
        },
        Target {
            name: "postgres_resolve_p99_ms",
            measured: pg.as_ref().map(|p| p.new_route.p99_ms),
            goal: Some(20.0),
            at_most: true,
        },
        // The same percentile of pgbench's TPC-B on the same server, for
        // scale: a commit waits for its flush either way.
        Target {
            name: "postgres_tpcb_p99_ms",
            measured: pg.as_ref().map(|p| p.tpcb.p99_ms),
            goal: None,
            at_most: true,
        },
        Target {
            name: "postgres_action_vs_tpcb",
            measured: pg.as_ref().map(|p| p.action.tps / p.tpcb.tps),
            goal: Some(0.5),
            at_most: false,
        },
        Target {
            name: "postgres_existing_vs_select_only",
            measured: pg.as_ref().map(|p| p.existing.tps / p.select_only.tps),
            goal: Some(0.5),
            at_most: false,
        },
        Target {
            name: "postgres_wal_vs_tpcb",
            measured: pg
                .as_ref()
                .map(|p| match (p.new_route.wal.records, p.tpcb_wal.records) {
                    (Some(resolve), Some(tpcb)) => resolve / tpcb,
                    _ => p.new_route.wal.total / p.tpcb_wal.total,
                }),
            goal: Some(1.0),
            at_most: true,
        },
        Target {
            name: "memory_resolves_per_s",
            measured: mean_ns("memory/resolve_new/1000").map(|ns| 1e9 / ns),
            goal: Some(1_000_000.0),
            at_most: false,
        },
        Target {
            name: "memory_bytes_per_route",
            measured: per_route,
            goal: Some(300.0),
            at_most: true,
        },
        Target {
            name: "memory_flat_100k_vs_1k",
            measured: memory_flat,
            goal: Some(1.2),
            at_most: true,
        },
        Target {
            name: "postgres_flat_100k_vs_1k",
            measured: flat("postgres"),
            goal: Some(1.2),
            at_most: true,
        },
        Target {
            name: "sim_seeds_per_minute",
            measured: seeds_per_minute,
            goal: Some(20_000.0),
            at_most: false,
        },
        Target {
            name: "sim_empty_world_seeds_per_minute",
            measured: empty_world,
            goal: None,
            at_most: false,
        },
        Target {
            name: "sim_mass_expiry_memory_sim_s_per_wall_s",
            measured: expiry_memory.map(|m| m.sim_per_wall),
            goal: Some(100.0),
            at_most: false,
        },
        Target {
            name: "sim_mass_expiry_memory_trace_bytes_per_sim_s",
            measured: expiry_memory.map(|m| m.trace_bytes_per_sim_s),
            goal: None,
            at_most: true,
        },
        Target {
            name: "sim_mass_expiry_memory_peak_mib",
            measured: expiry_memory.map(|m| m.peak_rss_mib),
            goal: None,
            at_most: true,
        },
        Target {
            name: "sim_mass_expiry_postgres_sim_s_per_wall_s",
            measured: expiry_postgres.map(|m| m.sim_per_wall),
            goal: None,
            at_most: false,
        },
    ];
    let targets = targets.into_iter().chain(fleet_targets(fleet.as_ref()));
    println!();
    for t in targets {
        let goal = t.goal.map_or_else(|| "none".to_owned(), figure);
        match (t.measured, t.goal) {
            (Some(m), Some(g)) => {
                let holds = if t.at_most { m <= g } else { m >= g };
                println!(
                    "TARGET {} measured={} goal={goal} holds={}",
                    t.name,
                    figure(m),
                    if holds { "yes" } else { "no" }
                );
            }
            (Some(m), None) => println!(
                "TARGET {} measured={} goal=none holds=no-goal",
                t.name,
                figure(m)
            ),
            (None, _) => println!(
                "TARGET {} measured=none goal={goal} holds=not-measured",
                t.name
            ),
        }
    }
    if pg
        .as_ref()
        .is_some_and(|p| p.new_route.errors + p.action.errors + p.existing.errors > 0)
    {
        eprintln!("targets: some calls failed (see above)");
        std::process::exit(1);
    }
    if fleet.as_ref().is_some_and(|f| {
        let p = &f.publication;
        p.failed + p.quiet.failed + p.busy.failed > 0
    }) {
        eprintln!("targets: some publications or resolves failed (see above)");
        std::process::exit(1);
    }
}

/// The fleet-scale tables: lease maintenance per fleet, publications
/// beside resolvers of one tenant, and those resolves in both phases.
fn print_fleet(fleet: &FleetFigures) {
    println!();
    println!("PostgreSQL lease maintenance, largest batch, until no more:");
    println!("| held reservations | calls | released | released/s | slowest call |");
    println!("|---|---:|---:|---:|---:|");
    for m in &fleet.maintenance {
        println!(
            "| {} | {} | {} | {:.0} | {:.1} ms (statement timeout {} ms) |",
            m.held, m.calls, m.released, m.per_s, m.slowest_ms, m.statement_timeout_ms
        );
    }
    let p = &fleet.publication;
    println!();
    println!(
        "PostgreSQL publications every {PUBLICATION_INTERVAL_MS} ms beside {RESOLVERS} resolvers of one tenant:"
    );
    println!("| publications | failed | p50 | p99 | max |");
    println!("|---:|---:|---:|---:|---:|");
    println!(
        "| {} | {} | {:.1} ms | {:.1} ms | {:.1} ms |",
        p.published + p.failed,
        p.failed,
        p.p50_ms,
        p.p99_ms,
        p.max_ms
    );
    println!("| resolves | created | no capacity | failed | p99 |");
    println!("|---|---:|---:|---:|---:|");
    for (name, r) in [
        ("without publications", &p.quiet),
        ("with publications", &p.busy),
    ] {
        println!(
            "| {name} | {} | {} | {} | {:.2} ms |",
            r.created, r.no_capacity, r.failed, r.p99_ms
        );
    }
    println!("resolve p99 with publications ÷ without: {:.2}", p.stall());
}

/// The fleet-scale targets: released per second at each fleet of [`HELD`]
/// (at least a full call's reservations per data statement timeout), the
/// slowest maintenance call (inside the data statement timeout), the
/// slowest publication (inside its lock waits' bound), failed
/// publications (none), and the resolve stall (no documented bound).
fn fleet_targets(fleet: Option<&FleetFigures>) -> Vec<Target> {
    let timeout_ms = data_statement_timeout_ms() as f64;
    let per_s_goal = f64::from(LEASE_MAINTENANCE_RESERVATIONS_MAX) * 1_000.0 / timeout_ms;
    let maintenance = |i: usize| fleet.and_then(|f| f.maintenance.get(i));
    let publication = fleet.map(|f| &f.publication);
    vec![
        Target {
            name: "postgres_maintenance_20k_released_per_s",
            measured: maintenance(0).map(|m| m.per_s),
            goal: Some(per_s_goal),
            at_most: false,
        },
        Target {
            name: "postgres_maintenance_200k_released_per_s",
            measured: maintenance(1).map(|m| m.per_s),
            goal: Some(per_s_goal),
            at_most: false,
        },
        Target {
            name: "postgres_maintenance_slowest_call_ms",
            measured: fleet.map(|f| {
                f.maintenance
                    .iter()
                    .map(|m| m.slowest_ms)
                    .fold(0.0, f64::max)
            }),
            goal: Some(timeout_ms),
            at_most: true,
        },
        Target {
            name: "postgres_publication_max_ms",
            measured: publication.map(|p| p.max_ms),
            goal: Some(f64::from(PUBLICATION_WAITS_MS_MAX)),
            at_most: true,
        },
        Target {
            name: "postgres_publication_failed",
            measured: publication.map(|p| p.failed as f64),
            goal: Some(0.0),
            at_most: true,
        },
        Target {
            name: "postgres_publication_resolve_p99_ratio",
            measured: publication.map(PublicationLoad::stall),
            goal: None,
            at_most: true,
        },
    ]
}

/// A figure with as many decimals as its size needs.
fn figure(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}
