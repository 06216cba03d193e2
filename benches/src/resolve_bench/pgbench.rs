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
    /// `clients` clients for `secs`: its throughput and the transactions
    /// it committed.
    pub fn run_counted(
        &self,
        clients: u32,
        secs: u64,
        select_only: bool,
    ) -> Result<PgbenchRun, String> {
        let script: &[&str] = if select_only { &["-S"] } else { &[] };
        let stdout = self.run_report(clients, secs, script)?;
        let tps = parse_tps(&stdout)
            .ok_or_else(|| format!("no tps line in pgbench's output:\n{stdout}"))?;
        let transactions = parse_transactions(&stdout)
            .ok_or_else(|| format!("no transaction count in pgbench's output:\n{stdout}"))?;
        Ok(PgbenchRun { tps, transactions })
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
    use super::{parse_tps, parse_transactions};

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
}
