//! `connreg-router`: resolves one authorized release target to the network
//! destination it should be invoked at, or reports readiness, in the mode
//! given on the command line.
//!
//! Exit codes: 0 success (`ok` for `ready`); 1 output could not be written;
//! 2 bad input or start refused (usage, mode, target file, or a file-mode
//! directory that is not readable and valid at start); 3 dependency failure
//! (the directory failed the invocation, or `ready` reports `not_ready`);
//! 4 the selection tried to change the authorized target.

use std::error::Error;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use connreg_directory::limits::TARGET_BYTES_MAX;
use connreg_directory::{Mode, PortName, Readiness, ReleaseTarget, Router, Routing, RoutingParts};

/// Success; `ready` printed `ok`.
const EXIT_OK: u8 = 0;
/// The answer could not be written to standard output.
const EXIT_OUTPUT: u8 = 1;
/// Bad input or start refused; the same code clap uses for usage errors.
const EXIT_BAD_INPUT: u8 = 2;
/// The directory failed the invocation, or readiness is `not_ready`.
const EXIT_DEPENDENCY: u8 = 3;
/// The selection tried to change the authorized target.
const EXIT_REJECTED: u8 = 4;

const EXIT_CODES_HELP: &str = "\
Exit codes:
  0  success; `ready` printed ok
  1  the answer could not be written to standard output
  2  bad input or start refused: usage, mode, target file, or a
     config_center_file directory that is not readable and valid at start
  3  dependency failure: the directory failed the invocation
     (missing, unreadable, unavailable, malformed, unmatched, no or several
     ready endpoints); `ready` printed not_ready
  4  the selection tried to change the authorized target";

/// Resolves an authorized release target to a network destination.
#[derive(Debug, Parser)]
#[command(name = "connreg-router", version, after_help = EXIT_CODES_HELP)]
struct Cli {
    /// Routing mode, exactly `direct` or `config_center_file`.
    #[arg(long, value_name = "MODE", value_parser = parse_mode)]
    mode: Mode,

    /// The router-instance-directory.v1 document (config_center_file only).
    #[arg(long, value_name = "FILE")]
    directory: Option<PathBuf>,

    /// The port name to select (config_center_file only) [default: invoke].
    #[arg(long, value_name = "NAME", value_parser = parse_port_name)]
    port_name: Option<PortName>,

    /// The authorized release target, a JSON file (`resolve` only).
    #[arg(long, value_name = "FILE")]
    target: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Prints the resolved target as JSON.
    Resolve,
    /// Revalidates the directory and prints `ok` or `not_ready`.
    Ready,
}

fn parse_mode(text: &str) -> Result<Mode, String> {
    text.parse().map_err(|error| format!("{error}"))
}

fn parse_port_name(text: &str) -> Result<PortName, String> {
    PortName::new(text).map_err(|error| format!("invalid port name: {error}"))
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            // Help and version go to stdout with 0; usage errors to stderr with 2.
            let _ = error.print();
            return ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(EXIT_BAD_INPUT));
        }
    };
    ExitCode::from(run(cli))
}

fn run(cli: Cli) -> u8 {
    let routing = match Routing::from_parts(RoutingParts {
        mode: cli.mode,
        directory: cli.directory,
        port_name: cli.port_name,
    }) {
        Ok(routing) => routing,
        Err(error) => return fail(EXIT_BAD_INPUT, &error),
    };
    match cli.command {
        Command::Resolve => {
            let Some(path) = cli.target else {
                return fail_message(EXIT_BAD_INPUT, "resolve needs --target FILE");
            };
            let target = match read_target(&path) {
                Ok(target) => target,
                Err(error) => return fail(EXIT_BAD_INPUT, error.as_ref()),
            };
            let router = match Router::start(routing) {
                Ok(router) => router,
                Err(error) => return fail(EXIT_BAD_INPUT, &error),
            };
            match router.resolve(&target) {
                Ok(resolved) => match serde_json::to_string_pretty(&resolved) {
                    Ok(json) => print_line(&json),
                    Err(error) => fail(EXIT_OUTPUT, &error),
                },
                Err(error) => {
                    let code = if error.is_dependency_failure() {
                        EXIT_DEPENDENCY
                    } else {
                        EXIT_REJECTED
                    };
                    fail(code, &error)
                }
            }
        }
        Command::Ready => {
            if cli.target.is_some() {
                return fail_message(EXIT_BAD_INPUT, "ready takes no --target");
            }
            let router = match Router::start(routing) {
                Ok(router) => router,
                Err(error) => return fail(EXIT_BAD_INPUT, &error),
            };
            let readiness = router.readiness();
            match print_line(readiness.as_str()) {
                EXIT_OK if readiness == Readiness::NotReady => EXIT_DEPENDENCY,
                code => code,
            }
        }
    }
}

/// Reads and parses the target file, reading at most one byte past its
/// bound.
fn read_target(path: &Path) -> Result<ReleaseTarget, Box<dyn Error>> {
    let context = |error: io::Error| format!("cannot read target file {}: {error}", path.display());
    let file = File::open(path).map_err(context)?;
    let mut bytes = Vec::new();
    let bytes_max = u64::try_from(TARGET_BYTES_MAX + 1).unwrap_or(u64::MAX);
    file.take(bytes_max)
        .read_to_end(&mut bytes)
        .map_err(context)?;
    ReleaseTarget::parse(&bytes)
        .map_err(|error| format!("invalid target file {}: {error}", path.display()).into())
}

fn print_line(text: &str) -> u8 {
    let mut stdout = io::stdout().lock();
    match writeln!(stdout, "{text}").and_then(|()| stdout.flush()) {
        Ok(()) => EXIT_OK,
        Err(error) => fail(EXIT_OUTPUT, &error),
    }
}

/// Prints `error` and its causes on one line of standard error.
fn fail(code: u8, error: &dyn Error) -> u8 {
    let mut message = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        message.push_str(": ");
        message.push_str(&inner.to_string());
        cause = inner.source();
    }
    fail_message(code, &message)
}

fn fail_message(code: u8, message: &str) -> u8 {
    let _ = writeln!(io::stderr().lock(), "connreg-router: {message}");
    code
}
