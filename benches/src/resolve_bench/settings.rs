//! The bench's knobs: each from an environment variable, with a default
//! chosen to finish in about a minute on a small machine.
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `CONNREG_BENCH_SECS` | 5 | measured seconds per client count, for each side |
//! | `CONNREG_BENCH_WARMUP_SECS` | 1 | unmeasured seconds before each resolve run |
//! | `CONNREG_BENCH_CLIENTS` | `1,4,16` | client counts, comma separated |
//! | `CONNREG_BENCH_TENANTS` | 100 | tenants, one instance and binding each |
//! | `CONNREG_BENCH_REPLICAS_PER_TENANT` | 100 | replicas per instance (at most 1024) |
//! | `CONNREG_BENCH_PGBENCH_SCALE` | 1 | `pgbench -i -s`: 1 is plain `pgbench -i`, whose 16 clients share one branch row; the largest client count or more measures TPC-B without that contention |
//! | `CONNREG_BENCH_FSYNC` | `on` | `on`: turn `fsync` on for the run when the server is the bench's own throwaway cluster (started with it off), so commits are durable; `keep`: leave the server as it is. A server named by URL is never changed. |

use std::env;

/// Most seconds one measurement may take: the bench stays a bench.
pub const SECS_MAX: u64 = 600;

/// Everything the bench can be told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Measured seconds per client count and side.
    pub secs: u64,
    /// Warm-up seconds before each resolve measurement.
    pub warmup_secs: u64,
    /// Client counts.
    pub clients: Vec<u32>,
    /// Tenants.
    pub tenants: u32,
    /// Replicas per tenant.
    pub replicas_per_tenant: u32,
    /// pgbench scale factor.
    pub pgbench_scale: u32,
    /// Turn `fsync` on for the bench's own throwaway cluster.
    pub durable: bool,
}

impl Settings {
    /// Reads the environment; an unreadable value is an error naming it.
    pub fn from_env() -> Result<Settings, String> {
        let settings = Settings {
            secs: number("CONNREG_BENCH_SECS", 5)?,
            warmup_secs: number("CONNREG_BENCH_WARMUP_SECS", 1)?,
            clients: match env::var("CONNREG_BENCH_CLIENTS") {
                Ok(list) if !list.trim().is_empty() => list
                    .split(',')
                    .map(|c| {
                        c.trim()
                            .parse::<u32>()
                            .map_err(|_| format!("CONNREG_BENCH_CLIENTS: {c:?} is not a number"))
                    })
                    .collect::<Result<Vec<u32>, String>>()?,
                _ => vec![1, 4, 16],
            },
            tenants: number("CONNREG_BENCH_TENANTS", 100)?,
            replicas_per_tenant: number("CONNREG_BENCH_REPLICAS_PER_TENANT", 100)?,
            pgbench_scale: number("CONNREG_BENCH_PGBENCH_SCALE", 1)?,
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
        if settings.clients.is_empty() || settings.clients.iter().any(|c| *c == 0 || *c > 256) {
            return Err("client counts must be 1 to 256".into());
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
        if settings.pgbench_scale == 0 {
            return Err("CONNREG_BENCH_PGBENCH_SCALE must be at least 1".into());
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
