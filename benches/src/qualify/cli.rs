//! The `connreg-qualify` command line: arguments, exit codes, output.
//!
//! The human summary goes to stdout, progress and errors to stderr, the
//! JSON report to `--report FILE`.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use super::contract::{BackendKind, Contract};
use super::error::{EXIT_BAD_INPUT, EXIT_FAIL, EXIT_PASS, EXIT_RUN_ERROR, QualifyError};
use super::limits::{CLIENTS_MAX, CONTRACT_BYTES_MAX, PLOT_REPORTS_MAX};
use super::progress::ProgressMode;
use super::provenance;
use super::report::Verdict;
use super::run::{RunOptions, qualify};
use super::server::PgTarget;

/// Runs a named environment contract against a connreg backend and reports
/// PASS or FAIL with the measured figures (SIM-6).
///
/// Exit codes: 0 pass, 1 fail (a threshold missed, or interrupted), 2 bad
/// input (contract or arguments), 3 the run could not finish (backend
/// unavailable, schema behind without --migrate, setup failed).
///
/// Without URLs the PostgreSQL backend runs on a throwaway database from
/// connreg-pgtest; with --control-url and --data-url it qualifies that
/// server as deployed, creating nothing but its own rows, which it removes
/// at the end.
#[derive(Debug, Parser)]
#[command(name = "connreg-qualify", version, subcommand_negates_reqs = true)]
pub struct Cli {
    /// A worker process of a multi-process run (started by the driver).
    #[command(subcommand)]
    pub command: Option<Sub>,
    /// The environment contract, such as benches/environments/smoke.toml.
    #[arg(long, value_name = "FILE", required = true)]
    pub env: Option<PathBuf>,
    /// Run on this backend instead of the contract's.
    #[arg(long, value_enum)]
    pub backend: Option<BackendKind>,
    /// Write the JSON report here.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Write the report directory here: report.json, report.md and SVG
    /// plots (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Run with this many clients instead of the contract's (one process;
    /// 1 to `CLIENTS_MAX`): runs at several concurrencies feed
    /// `connreg-qualify plot`.
    #[arg(long, value_name = "N")]
    pub clients: Option<u32>,
    /// Only check the contract; run nothing.
    #[arg(long)]
    pub check: bool,
    /// The control role's URL (owns the connreg schema): qualify this
    /// server as deployed. Needs --data-url; implies --backend postgres.
    #[arg(
        long,
        env = "CONNREG_CONTROL_URL",
        value_name = "URL",
        hide_env_values = true
    )]
    pub control_url: Option<String>,
    /// The data role's URL (runs the data-plane functions).
    #[arg(
        long,
        env = "CONNREG_DATA_URL",
        value_name = "URL",
        hide_env_values = true
    )]
    pub data_url: Option<String>,
    /// With the URLs: install or migrate the schema with the control role
    /// when it is behind this build. Without it such a database is refused.
    #[arg(long)]
    pub migrate: bool,
    /// Without URLs: run PostgreSQL on a throwaway cluster of its own
    /// started with fsync=on, instead of the shared test server.
    #[arg(long)]
    pub durable: bool,
    /// Without URLs: run PostgreSQL on a throwaway primary (fsync=on) with
    /// a streaming standby of its own, replicating as named, or on a
    /// pg_auto_failover formation (a monitor and two nodes, the second a
    /// synchronous standby, failed over by the monitor as operators deploy
    /// it); the report records the standby, and a contract's
    /// `synchronous_standbys_min` judges it.
    #[arg(long, value_name = "REPLICATION")]
    pub standby: Option<StandbyArg>,
    /// With the URLs: a database on the same server where pgbench may
    /// create (and afterwards drops) its TPC-B tables.
    #[arg(
        long,
        env = "CONNREG_PGBENCH_URL",
        value_name = "URL",
        hide_env_values = true
    )]
    pub pgbench_url: Option<String>,
    /// Do not run pgbench beside a PostgreSQL run.
    #[arg(long)]
    pub no_pgbench: bool,
    /// Registry processes (PostgreSQL only), each this binary's `worker`
    /// with its own pools and the contract's clients; overrides the
    /// contract's `processes`.
    #[arg(long, value_name = "N")]
    pub processes: Option<u32>,
}

/// How `--standby` replicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StandbyArg {
    /// Commits wait until the standby applied them (`remote_apply`).
    Synchronous,
    /// Commits do not wait for the standby.
    Asynchronous,
    /// A pg_auto_failover formation (Debian's `postgresql-15-auto-failover`
    /// and `pg-auto-failover-cli`): its monitor detects a dead primary and
    /// promotes the synchronous secondary.
    PgAutoFailover,
}

impl StandbyArg {
    fn ha(self) -> super::server::Ha {
        use super::server::Ha;
        match self {
            StandbyArg::Synchronous => Ha::Pair(connreg_pgtest::Replication::Synchronous),
            StandbyArg::Asynchronous => Ha::Pair(connreg_pgtest::Replication::Asynchronous),
            StandbyArg::PgAutoFailover => Ha::AutoFailover,
        }
    }
}

/// Subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Sub {
    /// One registry process of a multi-process run: connects its own data
    /// plane, says `ready`, runs one trial on `go`, writes its figures.
    Worker(super::multi::WorkerArgs),
    /// Throughput and resolve latency against concurrency, drawn from the
    /// reports of one environment run at several `--clients`
    /// (`throughput_concurrency.svg`, `latency_concurrency.svg`).
    Plot(PlotArgs),
}

/// `connreg-qualify plot --out DIR REPORT...`.
#[derive(Debug, clap::Args)]
pub struct PlotArgs {
    /// Where to write the plots (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// The JSON reports (`--report FILE` of each run), two to
    /// `PLOT_REPORTS_MAX`, one per concurrency.
    #[arg(required = true, value_name = "REPORT")]
    pub reports: Vec<PathBuf>,
}

/// Draws the concurrency plots of `args`.
fn plot_main(args: &PlotArgs) -> ExitCode {
    let bad = |reason: String| fail(&QualifyError::Options { reason });
    if args.reports.len() > PLOT_REPORTS_MAX {
        return bad(format!(
            "{} reports: plot at most {PLOT_REPORTS_MAX} (PLOT_REPORTS_MAX)",
            args.reports.len()
        ));
    }
    let mut reports = Vec::new();
    for path in &args.reports {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => return bad(format!("cannot read {}: {e}", path.display())),
        };
        match serde_json::from_str::<super::report::Report>(&text) {
            Ok(r) => reports.push(r),
            Err(e) => return bad(format!("{} is not a report: {e}", path.display())),
        }
    }
    let plots = match super::plot::concurrency_plots(&reports) {
        Ok(p) => p,
        Err(reason) => return bad(reason),
    };
    if let Err(e) = std::fs::create_dir_all(&args.out) {
        return bad(format!("cannot create {}: {e}", args.out.display()));
    }
    for p in &plots {
        let path = args.out.join(p.file);
        let written = super::plot::svg(p)
            .and_then(|svg| std::fs::write(&path, svg).map_err(|e| e.to_string()));
        if let Err(e) = written {
            return fail(&QualifyError::ReportFile {
                file: path.display().to_string(),
                reason: e,
            });
        }
        println!("{}", path.display());
    }
    ExitCode::from(EXIT_PASS)
}

/// The backend and target the arguments name, or why they do not fit.
fn target(cli: &Cli, contract: &Contract) -> Result<(BackendKind, PgTarget), String> {
    let contract_backend = contract.backend;
    let failover = contract.failover.is_some();
    if failover && cli.standby.is_none() {
        return Err(
            "the contract's [failover] fails over a primary and standby the run starts \
                    itself: pass --standby synchronous (or asynchronous, or pg-auto-failover); a server named by URL \
                    or a single throwaway server is never failed over"
                .into(),
        );
    }
    if contract.failover.is_some_and(|f| f.detach_ms.is_some())
        && cli.standby != Some(StandbyArg::Asynchronous)
    {
        return Err(
            "the contract's failover.detach_ms cuts an asynchronous standby off before \
                    the failover: pass --standby asynchronous (a synchronous primary would hold \
                    every commit waiting for it)"
                .into(),
        );
    }
    match (&cli.control_url, &cli.data_url) {
        (Some(control_url), Some(data_url)) => {
            if cli.backend == Some(BackendKind::Memory) {
                return Err("--control-url and --data-url name a PostgreSQL server; \
                            they cannot go with --backend memory"
                    .into());
            }
            if cli.durable || cli.standby.is_some() {
                return Err(
                    "--durable and --standby start throwaway servers; they cannot go \
                            with --control-url and --data-url (the server's own fsync and \
                            standbys are reported)"
                        .into(),
                );
            }
            super::server::parse_urls(control_url, data_url).map_err(|e| e.to_string())?;
            Ok((
                BackendKind::Postgres,
                PgTarget::Operator {
                    control_url: control_url.clone(),
                    data_url: data_url.clone(),
                    migrate: cli.migrate,
                    pgbench_url: cli.pgbench_url.clone(),
                },
            ))
        }
        (Some(_), None) => Err("--control-url needs --data-url (or CONNREG_DATA_URL)".into()),
        (None, Some(_)) => Err("--data-url needs --control-url (or CONNREG_CONTROL_URL)".into()),
        (None, None) => {
            if cli.migrate {
                return Err("--migrate applies to a server named by --control-url and \
                            --data-url; a throwaway database is always migrated"
                    .into());
            }
            let backend = cli.backend.unwrap_or(contract_backend);
            if (cli.durable || cli.standby.is_some()) && backend == BackendKind::Memory {
                return Err("--durable and --standby apply to the postgres backend".into());
            }
            if let Some(standby) = cli.standby {
                if cli.durable {
                    return Err("--standby starts its own primary with fsync=on; \
                                --durable adds nothing to it"
                        .into());
                }
                return Ok((
                    backend,
                    PgTarget::Pair {
                        ha: standby.ha(),
                        failover,
                    },
                ));
            }
            Ok((
                backend,
                PgTarget::Throwaway {
                    durable: cli.durable,
                },
            ))
        }
    }
}

fn fail(e: &QualifyError) -> ExitCode {
    eprintln!("connreg-qualify: error: {e}");
    ExitCode::from(e.exit_code())
}

/// The whole command: parse, run, report, exit.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Some(Sub::Worker(args)) => return super::multi::worker_main(args),
        Some(Sub::Plot(args)) => return plot_main(args),
        None => {}
    }
    let Some(env) = cli.env.clone() else {
        return fail(&QualifyError::Options {
            reason: "--env FILE is required".into(),
        });
    };
    let file = env.display().to_string();
    let mut contract = match Contract::load(&env) {
        Ok(c) => c,
        Err(e) => return fail(&QualifyError::Contract(e)),
    };
    if let Some(clients) = cli.clients {
        if clients == 0 || clients > CLIENTS_MAX {
            return fail(&QualifyError::Options {
                reason: format!("--clients {clients} must be 1 to {CLIENTS_MAX} (CLIENTS_MAX)"),
            });
        }
        if contract.load.processes() > 1 || cli.processes.is_some_and(|p| p > 1) {
            return fail(&QualifyError::Options {
                reason: "--clients overrides one process's clients; a multi-process run's \
                         workers read theirs from the contract file"
                    .into(),
            });
        }
        contract.load.clients = clients;
    }
    if cli.check {
        println!("{file}: contract {:?} is valid", contract.name);
        return ExitCode::from(EXIT_PASS);
    }
    // Open the report file first: a bad path is bad input, found before
    // the run rather than after it.
    let mut report_file = match &cli.report {
        None => None,
        Some(path) => match std::fs::File::create(path) {
            Ok(f) => Some(f),
            Err(e) => {
                return fail(&QualifyError::ReportFile {
                    file: path.display().to_string(),
                    reason: e.to_string(),
                });
            }
        },
    };
    // The report directory too: found unusable before the run.
    if let Some(dir) = &cli.out
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        return fail(&QualifyError::ReportFile {
            file: dir.display().to_string(),
            reason: e.to_string(),
        });
    }
    let (backend, target) = match target(&cli, &contract) {
        Ok(t) => t,
        Err(reason) => return fail(&QualifyError::Options { reason }),
    };
    if backend == BackendKind::Memory && contract.thresholds.synchronous_standbys_min.is_some() {
        return fail(&QualifyError::Options {
            reason: "the contract's thresholds.synchronous_standbys_min judges a PostgreSQL \
                     server's replication; run it with --backend postgres"
                .into(),
        });
    }
    let processes = cli.processes.unwrap_or(contract.load.processes());
    if processes == 0 || processes > super::limits::PROCESSES_MAX {
        return fail(&QualifyError::Options {
            reason: format!(
                "--processes {processes} must be 1 to {} (PROCESSES_MAX)",
                super::limits::PROCESSES_MAX
            ),
        });
    }
    if processes > 1 && contract.failover.is_some() {
        return fail(&QualifyError::Options {
            reason: "the contract's [failover] runs in one registry process: drop --processes"
                .into(),
        });
    }
    if processes > 1 && backend == BackendKind::Memory {
        return fail(&QualifyError::Options {
            reason: "many processes share a PostgreSQL database; the memory backend lives in one \
                     process (use --backend postgres)"
                .into(),
        });
    }
    let contract_sha256 = std::fs::read(&env)
        .map(|bytes| provenance::sha256_hex(&bytes[..bytes.len().min(CONTRACT_BYTES_MAX)]))
        .unwrap_or_default();
    let options = RunOptions {
        backend,
        target,
        file: file.clone(),
        contract_sha256,
        progress: ProgressMode::for_stderr(),
        pgbench: !cli.no_pgbench,
        processes,
        contract_path: env.clone(),
        ..RunOptions::new(backend, &file)
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cores)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("connreg-qualify: error: cannot start the runtime: {e}");
            return ExitCode::from(EXIT_RUN_ERROR);
        }
    };
    let progress = |line: &str| eprintln!("connreg-qualify: {line}");
    // Ctrl-C ends the run: the clients stop after their current call, the
    // store is checked, the run's rows are removed, and the report says
    // the run is incomplete. A second Ctrl-C ends the process at once.
    let interrupted = options.interrupted.clone();
    runtime.spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            interrupted.store(true, std::sync::atomic::Ordering::Relaxed);
            eprintln!(
                "connreg-qualify: interrupted: ending the run, checking the store, removing its \
                 rows and writing a report marked incomplete (Ctrl-C again aborts at once and \
                 leaves the run's rows behind)"
            );
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("connreg-qualify: aborted");
                std::process::exit(130);
            }
        }
    });
    let report = match runtime.block_on(qualify(&contract, &options, &progress)) {
        Ok(r) => r,
        Err(e) => {
            // No verdict, no report: the file opened early goes again, so
            // an empty file is never mistaken for one.
            if let Some(path) = &cli.report {
                drop(report_file.take());
                let _ = std::fs::remove_file(path);
            }
            return fail(&e);
        }
    };
    // Ends the runtime (and with it a PostgreSQL test database) before
    // printing, so nothing is left running when the process exits.
    drop(runtime);
    println!("{}", report.summary());
    if let (Some(f), Some(path)) = (report_file.as_mut(), &cli.report) {
        let written = serde_json::to_writer_pretty(&mut *f, &report)
            .map_err(|e| e.to_string())
            .and_then(|()| writeln!(f).map_err(|e| e.to_string()));
        if let Err(reason) = written {
            eprintln!(
                "connreg-qualify: error: cannot write the report to {}: {reason}",
                path.display()
            );
            return ExitCode::from(EXIT_RUN_ERROR);
        }
    }
    if let Some(dir) = &cli.out {
        match super::output::write_dir(dir, &report) {
            Ok(files) => eprintln!(
                "connreg-qualify: wrote {} files to {}",
                files.len(),
                dir.display()
            ),
            Err(reason) => {
                eprintln!("connreg-qualify: error: cannot write the report directory: {reason}");
                return ExitCode::from(EXIT_RUN_ERROR);
            }
        }
    }
    ExitCode::from(match report.verdict {
        Verdict::Pass => EXIT_PASS,
        Verdict::Fail => EXIT_FAIL,
    })
}

const _: () = assert!(EXIT_BAD_INPUT == 2 && EXIT_FAIL == 1);
