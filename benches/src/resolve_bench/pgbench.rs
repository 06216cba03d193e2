//! Running pgbench's built-in TPC-B against a database of the test server.

use std::path::PathBuf;
use std::process::{Command, Output};

use connreg_pgtest::TestDatabase;

/// pgbench, pointed at one database.
#[derive(Debug, Clone)]
pub struct Pgbench {
    program: PathBuf,
    host: String,
    port: u16,
    user: String,
    password: Option<String>,
    database: String,
}

impl Pgbench {
    /// The same pgbench aimed at another port of the same host (the
    /// promoted server after a failover).
    pub fn with_port(&self, port: u16) -> Pgbench {
        Pgbench {
            port,
            ..self.clone()
        }
    }

    /// pgbench from the server's binaries, for `database`.
    pub fn for_database(database: &TestDatabase) -> Result<Pgbench, String> {
        let bindir = connreg_pgtest::bindir()
            .ok_or("no PostgreSQL binaries found for pgbench (set CONNREG_PG_BINDIR)")?;
        let server = database.server();
        Ok(Pgbench {
            program: bindir.join("pgbench"),
            host: server.host().to_owned(),
            port: server.port(),
            user: server.superuser().to_owned(),
            password: server.password().map(str::to_owned),
            database: database.database_name().to_owned(),
        })
    }

    /// pgbench (from the server binaries connreg-pgtest finds, else from
    /// `PATH`) for `database` on `host:port` as `user`.
    pub fn new(
        host: &str,
        port: u16,
        user: &str,
        password: Option<&str>,
        database: &str,
    ) -> Pgbench {
        let program = connreg_pgtest::bindir()
            .map(|dir| dir.join("pgbench"))
            .filter(|p| p.exists())
            .unwrap_or_else(|| PathBuf::from("pgbench"));
        Pgbench {
            program,
            host: host.to_owned(),
            port,
            user: user.to_owned(),
            password: password.map(str::to_owned),
            database: database.to_owned(),
        }
    }

    /// The database it runs against.
    pub fn database(&self) -> &str {
        &self.database
    }

    fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        command
            .args([
                "-h",
                &self.host,
                "-p",
                &self.port.to_string(),
                "-U",
                &self.user,
            ])
            .env("PGAPPNAME", "connreg-bench-pgbench");
        if let Some(password) = &self.password {
            command.env("PGPASSWORD", password);
        }
        command
    }

    /// `pgbench -i -s scale`: creates and fills the TPC-B tables.
    pub fn initialize(&self, scale: u32) -> Result<(), String> {
        let output = self
            .command()
            .args(["-i", "-q", "-s", &scale.to_string()])
            .arg(&self.database)
            .output()
            .map_err(|e| format!("could not run pgbench: {e}"))?;
        check(&output, "pgbench -i")?;
        Ok(())
    }

    /// `pgbench -c clients -j clients -T secs`: the built-in TPC-B; its
    /// transactions per second without connection time.
    pub fn run(&self, clients: u32, secs: u64) -> Result<f64, String> {
        self.run_script(clients, secs, &[])
    }

    /// `pgbench -S …`: the built-in select-only script; its transactions
    /// per second without connection time.
    pub fn run_select_only(&self, clients: u32, secs: u64) -> Result<f64, String> {
        self.run_script(clients, secs, &["-S"])
    }

    /// `pgbench -i -I d`: drops the TPC-B tables.
    pub fn drop_tables(&self) -> Result<(), String> {
        let output = self
            .command()
            .args(["-i", "-I", "d"])
            .arg(&self.database)
            .output()
            .map_err(|e| format!("could not run pgbench: {e}"))?;
        check(&output, "pgbench -i -I d")?;
        Ok(())
    }

    /// The built-in TPC-B (`select_only` false) or select-only script with
    /// `clients` clients for `secs`: its throughput, the transactions it
    /// committed and their 99th percentile latency, from pgbench's
    /// per-transaction log (`-l`), written to a folder of its own and
    /// removed after.
    pub fn run_counted(
        &self,
        clients: u32,
        secs: u64,
        select_only: bool,
    ) -> Result<PgbenchRun, String> {
        let logs = LogDir::create()?;
        let prefix = logs.0.join("tx");
        let prefix = prefix.to_str().ok_or("a log folder that is not UTF-8")?;
        let mut args = vec!["-l", "--log-prefix", prefix];
        if select_only {
            args.push("-S");
        }
        let stdout = self.run_report(clients, secs, &args)?;
        let tps = parse_tps(&stdout)
            .ok_or_else(|| format!("no tps line in pgbench's output:\n{stdout}"))?;
        let transactions = parse_transactions(&stdout)
            .ok_or_else(|| format!("no transaction count in pgbench's output:\n{stdout}"))?;
        let p99_ms = logs.p99_ms()?;
        Ok(PgbenchRun {
            tps,
            transactions,
            p99_ms,
        })
    }

    fn run_script(&self, clients: u32, secs: u64, script: &[&str]) -> Result<f64, String> {
        let stdout = self.run_report(clients, secs, script)?;
        parse_tps(&stdout).ok_or_else(|| format!("no tps line in pgbench's output:\n{stdout}"))
    }

    fn run_report(&self, clients: u32, secs: u64, script: &[&str]) -> Result<String, String> {
        let output = self
            .command()
            .args(script)
            .args(["-c", &clients.to_string(), "-j", &clients.to_string()])
            .args(["-T", &secs.to_string()])
            .arg(&self.database)
            .output()
            .map_err(|e| format!("could not run pgbench: {e}"))?;
        check(&output, "pgbench")
    }
}

/// One pgbench run's figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PgbenchRun {
    /// Transactions per second without connection time.
    pub tps: f64,
    /// Transactions committed.
    pub transactions: u64,
    /// 99th percentile of the transactions' latency, in milliseconds.
    pub p99_ms: f64,
}

/// Longest transaction latency the percentile counts, in microseconds: a
/// minute; a longer one is counted as a minute.
const LOG_LATENCY_US_MAX: u64 = 60_000_000;

/// A folder for one run's per-transaction logs, removed when dropped.
struct LogDir(PathBuf);

impl LogDir {
    fn create() -> Result<LogDir, String> {
        let dir = std::env::temp_dir().join(format!(
            "connreg-pgbench-{}-{}",
            std::process::id(),
            LOG_DIRS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("could not create {}: {e}", dir.display()))?;
        Ok(LogDir(dir))
    }

    /// The 99th percentile of the latencies every log in the folder holds.
    fn p99_ms(&self) -> Result<f64, String> {
        let mut latencies =
            hdrhistogram::Histogram::<u64>::new_with_bounds(1, LOG_LATENCY_US_MAX, 3)
                .map_err(|e| e.to_string())?;
        let entries = std::fs::read_dir(&self.0)
            .map_err(|e| format!("could not list {}: {e}", self.0.display()))?;
        for entry in entries {
            let path = entry.map_err(|e| e.to_string())?.path();
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("could not read {}: {e}", path.display()))?;
            for line in text.lines() {
                let us = log_latency_us(line)
                    .ok_or_else(|| format!("a pgbench log line without a latency: {line:?}"))?;
                latencies.saturating_record(us.clamp(1, LOG_LATENCY_US_MAX));
            }
        }
        if latencies.is_empty() {
            return Err("pgbench logged no transaction".into());
        }
        Ok(latencies.value_at_quantile(0.99) as f64 / 1_000.0)
    }
}

impl Drop for LogDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

static LOG_DIRS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The latency of one line of pgbench's per-transaction log
/// (`client transaction latency_us script epoch epoch_us ...`).
pub fn log_latency_us(line: &str) -> Option<u64> {
    line.split_whitespace().nth(2)?.parse().ok()
}

/// The `number of transactions actually processed: N` count of a pgbench
/// report (`N/M` when a transaction limit was set).
pub fn parse_transactions(report: &str) -> Option<u64> {
    report
        .lines()
        .find_map(|l| {
            l.trim_start()
                .strip_prefix("number of transactions actually processed: ")
        })?
        .split(['/', ' '])
        .next()?
        .parse()
        .ok()
}

fn check(output: &Output, what: &str) -> Result<String, String> {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if output.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "{what} failed ({}):\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// The throughput of a pgbench report: the `tps = N (without initial
/// connection time)` line (PostgreSQL 14 and later), else the first.
pub fn parse_tps(report: &str) -> Option<f64> {
    let tps_lines: Vec<&str> = report
        .lines()
        .filter(|l| l.trim_start().starts_with("tps = "))
        .collect();
    let line = tps_lines
        .iter()
        .find(|l| l.contains("without initial connection time"))
        .or_else(|| tps_lines.first())?;
    line.trim_start()
        .strip_prefix("tps = ")?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::{log_latency_us, parse_tps, parse_transactions};

    #[test]
    fn tps_is_read_from_a_pgbench_report() {
        let report = "transaction type: <builtin: TPC-B (sort of)>\n\
                      latency average = 1.234 ms\n\
                      initial connection time = 3.210 ms\n\
                      tps = 812.345678 (without initial connection time)\n";
        assert_eq!(parse_tps(report), Some(812.345678));
        assert_eq!(parse_tps("nothing here"), None);
    }

    #[test]
    fn the_transaction_count_is_read_from_a_pgbench_report() {
        let report = "number of clients: 16\n\
                      number of transactions actually processed: 48213\n\
                      number of failed transactions: 0 (0.000%)\n";
        assert_eq!(parse_transactions(report), Some(48213));
        let limited = "number of transactions actually processed: 100/100\n";
        assert_eq!(parse_transactions(limited), Some(100));
        assert_eq!(parse_transactions("tps = 1.0\n"), None);
    }

    #[test]
    fn a_latency_is_read_from_a_pgbench_log_line() {
        // client, transaction, latency in µs, script, epoch s, epoch µs.
        assert_eq!(
            log_latency_us("3 1177 2718 0 1765051200 123456"),
            Some(2718)
        );
        assert_eq!(log_latency_us("3 1177 failed 0 1765051200 123456"), None);
        assert_eq!(log_latency_us("3 1177"), None);
    }
}
