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
use super::report::Verdict;
use super::run::qualify;

/// Runs a named environment contract against a connreg backend and reports
/// PASS or FAIL with the measured figures (SIM-6).
///
/// Exit codes: 0 pass, 1 fail (a threshold missed), 2 bad input (contract
/// or arguments), 3 the run could not finish (backend unavailable, setup
/// failed).
#[derive(Debug, Parser)]
#[command(name = "connreg-qualify", version)]
pub struct Cli {
    /// The environment contract, such as benches/environments/smoke.toml.
    #[arg(long, value_name = "FILE")]
    pub env: PathBuf,
    /// Run on this backend instead of the contract's.
    #[arg(long, value_enum)]
    pub backend: Option<BackendKind>,
    /// Write the JSON report here.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Only check the contract; run nothing.
    #[arg(long)]
    pub check: bool,
}

fn fail(e: &QualifyError) -> ExitCode {
    eprintln!("connreg-qualify: error: {e}");
    ExitCode::from(e.exit_code())
}

/// The whole command: parse, run, report, exit.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let file = cli.env.display().to_string();
    let contract = match Contract::load(&cli.env) {
        Ok(c) => c,
        Err(e) => return fail(&QualifyError::Contract(e)),
    };
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
    let backend = cli.backend.unwrap_or(contract.backend);
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
    let report = match runtime.block_on(qualify(&contract, backend, &file, &progress)) {
        Ok(r) => r,
        Err(e) => return fail(&e),
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
    ExitCode::from(match report.verdict {
        Verdict::Pass => EXIT_PASS,
        Verdict::Fail => EXIT_FAIL,
    })
}

const _: () = assert!(EXIT_BAD_INPUT == 2 && EXIT_FAIL == 1);
