//! The simulator's speed: standard-scenario seeds per minute on two
//! threads, the same figure for an empty world of the scenario's hosts
//! (turmoil's own cost, the floor under the first), and the fleet-scale
//! mass-expiry scenario's simulated seconds per wall second, trace bytes
//! per simulated second and peak memory (`connreg-sim`).

use std::hint::black_box;
use std::time::{Duration, Instant};

/// Standard-scenario seeds per minute on two threads, for `secs`.
pub(crate) fn sim_seeds_per_minute(secs: u64) -> Result<f64, String> {
    let scenario = connreg_sim::Scenario::standard();
    seeds_per_minute_of(secs, move |seed| {
        let options = connreg_sim::RunOptions {
            seed,
            ..connreg_sim::RunOptions::default()
        };
        let report = connreg_sim::run(&scenario, &options).map_err(|e| e.to_string())?;
        black_box(report.trace_hash);
        Ok(())
    })
}

/// Runs `seed_once(seed)` on two threads for `secs`: seeds per minute.
fn seeds_per_minute_of(
    secs: u64,
    seed_once: impl Fn(u64) -> Result<(), String> + Clone + Send + 'static,
) -> Result<f64, String> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();
    let workers: Vec<_> = (0..2u64)
        .map(|w| {
            let seed_once = seed_once.clone();
            std::thread::spawn(move || -> Result<u64, String> {
                let mut seeds = 0;
                let mut seed = w + 1;
                while Instant::now() < deadline {
                    seed_once(seed)?;
                    seeds += 1;
                    seed += 2;
                }
                Ok(seeds)
            })
        })
        .collect();
    let mut seeds = 0;
    for worker in workers {
        seeds += worker
            .join()
            .map_err(|_| "a simulator thread panicked".to_string())??;
    }
    Ok(seeds as f64 * 60.0 / started.elapsed().as_secs_f64())
}

/// Seeds per minute, on two threads for `secs`, of an empty world shaped
/// like the standard scenario's: a turmoil simulation with the same
/// hosts, tick, latency and links, run for as many steps as the
/// scenario's seed 1 takes, whose hosts do nothing but hold one
/// connection over each link a run uses (a dispatcher to every registry
/// host and replica, every other host to every registry host). What it
/// costs is turmoil's and tokio's per-step work alone: no simulator
/// world, registry, trace or checker can make a seed cheaper.
pub(crate) fn empty_world_seeds_per_minute(secs: u64) -> Result<f64, String> {
    use connreg_sim::scenario::{
        ADMIN_HOST, MAINTAINER_HOST, dispatcher_host, reader_host, registry_host, replica_host,
    };
    let scenario = connreg_sim::Scenario::standard();
    let steps = connreg_sim::run(&scenario, &connreg_sim::RunOptions::default())
        .map_err(|e| e.to_string())?
        .steps;
    let registries: Vec<String> = (0..scenario.registry.hosts).map(registry_host).collect();
    let replicas: Vec<String> = scenario
        .fleet
        .replicas
        .iter()
        .map(|r| replica_host(&r.get_ref().id))
        .collect();
    // (host, whether it serves, the hosts it calls).
    let mut hosts: Vec<(String, bool, Vec<String>)> = registries
        .iter()
        .map(|h| (h.clone(), true, Vec::new()))
        .collect();
    hosts.extend(
        replicas
            .iter()
            .map(|h| (h.clone(), true, registries.clone())),
    );
    hosts.extend((0..scenario.workload.dispatchers).map(|i| {
        let peers = [&registries[..], &replicas[..]].concat();
        (dispatcher_host(i), false, peers)
    }));
    let others = (0..scenario.workload.readers.len())
        .map(reader_host)
        .chain([ADMIN_HOST.to_string(), MAINTAINER_HOST.to_string()]);
    hosts.extend(others.map(|h| (h, false, registries.clone())));
    let s = scenario.scenario.clone();
    seeds_per_minute_of(secs, move |seed| {
        let mut sim = turmoil::Builder::new()
            .rng_seed(seed)
            .simulation_duration(Duration::from_secs(3_600))
            .tick_duration(Duration::from_millis(s.tick_ms))
            .min_message_latency(Duration::from_millis(s.latency_ms[0]))
            .max_message_latency(Duration::from_millis(s.latency_ms[1]))
            .build();
        for (name, serves, peers) in &hosts {
            let (serves, peers) = (*serves, peers.clone());
            sim.host(name.as_str(), move || {
                let peers = peers.clone();
                async move { empty_host(serves, peers).await }
            });
        }
        for _ in 0..steps {
            sim.step().map_err(|e| e.to_string())?;
        }
        Ok(())
    })
}

/// The port the empty world's servers listen on.
const EMPTY_PORT: u16 = 7000;

/// One host of the empty world: it listens when it `serves`, holds one
/// connection to each of `peers` (retried until the peer listens), and
/// otherwise waits.
async fn empty_host(serves: bool, peers: Vec<String>) -> turmoil::Result {
    let listener = if serves {
        Some(turmoil::net::TcpListener::bind((std::net::Ipv4Addr::UNSPECIFIED, EMPTY_PORT)).await?)
    } else {
        None
    };
    let mut held = Vec::new();
    for peer in peers {
        loop {
            match turmoil::net::TcpStream::connect((peer.as_str(), EMPTY_PORT)).await {
                Ok(stream) => {
                    held.push(stream);
                    break;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
            }
        }
    }
    match listener {
        Some(listener) => {
            while let Ok((stream, _)) = listener.accept().await {
                held.push(stream);
            }
        }
        None => std::future::pending::<()>().await,
    }
    Ok(())
}

/// The environment variable that makes this bench binary run the
/// mass-expiry scenario once, in its own process, and print its figures:
/// the process's peak resident memory is then the run's alone.
pub(crate) const MASS_EXPIRY_CHILD: &str = "CONNREG_TARGETS_MASS_EXPIRY";

/// The fleet-scale scenario the figures come from (`scenarios/`).
const MASS_EXPIRY_FILE: &str = "0022_mass_expiry.toml";

/// One run of the mass-expiry scenario at seed 1.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MassExpiry {
    /// Simulated seconds per wall second.
    pub(crate) sim_per_wall: f64,
    /// Trace bytes per simulated second.
    pub(crate) trace_bytes_per_sim_s: f64,
    /// The largest step's trace bytes.
    pub(crate) largest_step_bytes: u64,
    /// Peak resident memory of the process that ran it, in MiB.
    pub(crate) peak_rss_mib: f64,
}

/// Runs the mass-expiry scenario on `backend` in a child process (this
/// binary, with [`MASS_EXPIRY_CHILD`] set) and reads its figures.
pub(crate) fn mass_expiry(backend: connreg_sim::BackendKind) -> Result<MassExpiry, String> {
    let exe = std::env::current_exe().map_err(|e| format!("this bench's path: {e}"))?;
    let out = std::process::Command::new(exe)
        .env(MASS_EXPIRY_CHILD, backend.name())
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("the mass-expiry run did not start: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("MASS_EXPIRY "))
        .ok_or_else(|| {
            format!(
                "the mass-expiry run on {} printed no figures (exit {:?}): {}{}",
                backend.name(),
                out.status.code(),
                text,
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
    let field = |name: &str| -> Result<f64, String> {
        line.split(' ')
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("the mass-expiry figures lack {name}: {line}"))
    };
    let (sim_ms, wall_ms) = (field("sim_ms")?, field("wall_ms")?);
    Ok(MassExpiry {
        sim_per_wall: sim_ms / wall_ms.max(1.0),
        trace_bytes_per_sim_s: field("trace_bytes")? * 1000.0 / sim_ms.max(1.0),
        largest_step_bytes: field("largest_step_bytes")? as u64,
        peak_rss_mib: field("peak_rss_kib")? / 1024.0,
    })
}

/// The child's side of [`mass_expiry`]: one run at seed 1, its trace
/// hashed only, then one `MASS_EXPIRY key=value ...` line; exits 1 when the
/// run was not clean, since a figure of a failing run means nothing.
pub(crate) fn mass_expiry_child(backend: &str) -> ! {
    let backend = match backend {
        "memory" => connreg_sim::BackendKind::Memory,
        "postgres" => connreg_sim::BackendKind::Postgres,
        other => {
            eprintln!("{MASS_EXPIRY_CHILD}: memory or postgres, got {other:?}");
            std::process::exit(2);
        }
    };
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios")
        .join(MASS_EXPIRY_FILE);
    let scenario = connreg_sim::Scenario::load(&path).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2);
    });
    let options = connreg_sim::RunOptions {
        seed: 1,
        backend,
        ..connreg_sim::RunOptions::default()
    };
    let started = Instant::now();
    let report = connreg_sim::run(&scenario, &options).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2);
    });
    let wall_ms = started.elapsed().as_secs_f64() * 1000.0;
    if !report.ok() {
        eprintln!(
            "{MASS_EXPIRY_FILE} seed 1 on {}: {} violation(s): {:#?}",
            backend.name(),
            report.violation_count,
            report.violations
        );
        std::process::exit(1);
    }
    println!(
        "MASS_EXPIRY sim_ms={} wall_ms={wall_ms:.0} trace_bytes={} largest_step_bytes={} peak_rss_kib={}",
        report.sim_ms,
        report.trace_bytes,
        report.largest_step.bytes,
        peak_rss_kib().unwrap_or(0)
    );
    std::process::exit(0);
}

/// This process's peak resident memory (`VmHWM`), in KiB.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}
