//! The bench's knobs: each from an environment variable, with a default
//! chosen to finish in about a minute on a small machine.
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `CONNREG_BENCH_SECS` | 3 | measured seconds per client count, for each of the three measurements |
//! | `CONNREG_BENCH_WARMUP_SECS` | 1 | unmeasured seconds before each resolve run |
//! | `CONNREG_BENCH_CLIENTS` | `1,4,16` | client counts, comma separated |
//! | `CONNREG_BENCH_TENANTS` | 100 | tenants, one instance and binding each |
//! | `CONNREG_BENCH_REPLICAS_PER_TENANT` | 100 | replicas per instance (at most 1024) |
//! | `CONNREG_BENCH_PGBENCH_SCALE` | the largest client count | `pgbench -i -s` of the second TPC-B database, at least the largest client count, so that no two clients need share a branch row |
//! | `CONNREG_BENCH_FSYNC` | `on` | `on`: turn `fsync` on for the run when the server is the bench's own throwaway cluster (started with it off), so commits are durable; `keep`: leave the server as it is. A server named by URL is never changed. |
//!
//! TPC-B always runs twice: at [`PGBENCH_DEFAULT_SCALE`] (plain
//! `pgbench -i`, one branch row that every client's transaction updates, so
//! its clients serialise on that row and TPC-B looks slow) and at
//! `CONNREG_BENCH_PGBENCH_SCALE` (the fair comparison at every client count).

use std::env;

/// Most seconds one measurement may take: the bench stays a bench.
pub const SECS_MAX: u64 = 600;

/// The scale of plain `pgbench -i`: one branch row for all clients.
pub const PGBENCH_DEFAULT_SCALE: u32 = 1;

/// Most clients one measurement may run.
pub const CLIENTS_MAX: u32 = 256;

/// Largest pgbench scale accepted: one branch row for each of the most
/// clients. A unit is 100,000 accounts, about 15 MB of tables, so loading
/// stays within minutes.
pub const PGBENCH_SCALE_MAX: u32 = CLIENTS_MAX;

const _: () = assert!(PGBENCH_DEFAULT_SCALE <= PGBENCH_SCALE_MAX);

/// Everything the bench can be told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Measured seconds per client count and measurement.
    pub secs: u64,
    /// Warm-up seconds before each resolve measurement.
    pub warmup_secs: u64,
    /// Client counts.
    pub clients: Vec<u32>,
    /// Tenants.
    pub tenants: u32,
    /// Replicas per tenant.
    pub replicas_per_tenant: u32,
    /// Scale factor of the second TPC-B database (the first is always
    /// [`PGBENCH_DEFAULT_SCALE`]): at least the largest client count.
    pub pgbench_scale: u32,
    /// Turn `fsync` on for the bench's own throwaway cluster.
    pub durable: bool,
}

impl Settings {
    /// Reads the environment; an unreadable value is an error naming it.
    pub fn from_env() -> Result<Settings, String> {
        let clients = match env::var("CONNREG_BENCH_CLIENTS") {
            Ok(list) if !list.trim().is_empty() => list
                .split(',')
                .map(|c| {
                    c.trim()
                        .parse::<u32>()
                        .map_err(|_| format!("CONNREG_BENCH_CLIENTS: {c:?} is not a number"))
                })
                .collect::<Result<Vec<u32>, String>>()?,
            _ => vec![1, 4, 16],
        };
        let clients_max = clients.iter().copied().max().unwrap_or(1);
        let settings = Settings {
            secs: number("CONNREG_BENCH_SECS", 3)?,
            warmup_secs: number("CONNREG_BENCH_WARMUP_SECS", 1)?,
            clients,
            tenants: number("CONNREG_BENCH_TENANTS", 100)?,
            replicas_per_tenant: number("CONNREG_BENCH_REPLICAS_PER_TENANT", 100)?,
            pgbench_scale: number("CONNREG_BENCH_PGBENCH_SCALE", clients_max)?,
            durable: match env::var("CONNREG_BENCH_FSYNC").as_deref().map(str::trim) {
                Err(_) | Ok("") | Ok("on") => true,
                Ok("keep") => false,
                Ok(other) => {
                    return Err(format!(
                        "CONNREG_BENCH_FSYNC: {other:?} is not `on` or `keep`"
                    ));
                }
            },
        };
        if settings.secs == 0 || settings.secs > SECS_MAX || settings.warmup_secs > SECS_MAX {
            return Err(format!("seconds must be 1 to {SECS_MAX}"));
        }
        if settings.clients.is_empty()
            || settings.clients.iter().any(|c| *c == 0 || *c > CLIENTS_MAX)
        {
            return Err(format!("client counts must be 1 to {CLIENTS_MAX}"));
        }
        if settings.tenants == 0
            || settings.replicas_per_tenant == 0
            || settings.replicas_per_tenant as usize > connreg::limits::INSTANCE_REPLICAS_MAX
        {
            return Err(format!(
                "tenants must be at least 1, replicas per tenant 1 to {}",
                connreg::limits::INSTANCE_REPLICAS_MAX
            ));
        }
        if settings.pgbench_scale < clients_max || settings.pgbench_scale > PGBENCH_SCALE_MAX {
            return Err(format!(
                "CONNREG_BENCH_PGBENCH_SCALE must be {clients_max} (the largest client count) \
                 to {PGBENCH_SCALE_MAX}"
            ));
        }
        Ok(settings)
    }

    /// Replicas in the fleet.
    pub fn replicas(&self) -> u64 {
        u64::from(self.tenants) * u64::from(self.replicas_per_tenant)
    }
}

fn number<T: std::str::FromStr>(name: &str, default: T) -> Result<T, String> {
    match env::var(name) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .map_err(|_| format!("{name}: {v:?} is not a number")),
        _ => Ok(default),
    }
}
