//! The `connreg-router` command line: resolves one authorized release
//! target to the network destination it should be invoked at, or reports
//! whether it could be routed now, in the mode given on the command line.
//!
//! It lives in the library so that it can run with any [`Selector`]: the
//! binary runs [`main`] with [`SingleReadyEndpoint`], and tests run [`run`]
//! with hostile selectors to reach the guard's exit code end to end.
//!
//! Each process is one invocation: a directory document that is missing,
//! unreadable, not a regular file, too slow to read or invalid is a
//! dependency failure of that invocation (exit 3, `ready` prints
//! `not_ready`), never bad input. Exit 2 is for what the operator typed.

use std::error::Error;
use std::ffi::OsString;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::error::{ResolveError, StartError};
use crate::mode::{Mode, Routing, RoutingParts};
use crate::names::PortName;
use crate::release::ReleaseTarget;
use crate::resolved::ResolvedTarget;
use crate::router::Router;
use crate::select::{Selector, SingleReadyEndpoint};
use crate::source::{DocumentSource, FsSource};

/// Success: `resolve` printed the target, `ready` printed `ok`.
pub const EXIT_OK: u8 = 0;
/// The answer could not be written to standard output.
pub const EXIT_OUTPUT: u8 = 1;
/// Bad input: usage, mode, settings that do not fit the mode, or the target
/// file. The same code clap uses for usage errors.
pub const EXIT_BAD_INPUT: u8 = 2;
/// Dependency failure: the directory failed the invocation; `ready` printed
/// `not_ready`.
pub const EXIT_DEPENDENCY: u8 = 3;
/// The router rejected the selection: it would change the authorized target
/// or is not backed by the document; `ready` printed `not_ready`.
pub const EXIT_REJECTED: u8 = 4;

const EXIT_CODES_HELP: &str = "\
Exit codes:
  0  success; `ready` printed ok
  1  the answer could not be written to standard output
  2  bad input: usage, mode, settings that do not fit the mode, or the
     target file
  3  dependency failure: the directory failed the invocation (missing,
     unreadable, not a regular file, too slow to read, malformed,
     unmatched, no or several ready endpoints); `ready` printed not_ready
  4  the selection was rejected: it would change the authorized target or
     is not backed by the directory; `ready` printed not_ready";

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

    /// The authorized release target, a JSON file.
    #[arg(long, value_name = "FILE")]
    target: PathBuf,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, Subcommand)]
enum Command {
    /// Prints the resolved target as JSON.
    Resolve,
    /// Prints `ok` if an invocation of the target could be routed now,
    /// `not_ready` (with the reason on standard error) if not.
    Ready,
}

fn parse_mode(text: &str) -> Result<Mode, String> {
    text.parse().map_err(|error| format!("{error}"))
}

fn parse_port_name(text: &str) -> Result<PortName, String> {
    PortName::new(text).map_err(|error| format!("invalid port name: {error}"))
}

/// The binary: [`run`] with the process's arguments, standard output and
/// error, and the [`SingleReadyEndpoint`] selector.
#[must_use]
pub fn main() -> ExitCode {
    let code = run(
        std::env::args_os(),
        SingleReadyEndpoint,
        &mut io::stdout().lock(),
        &mut io::stderr().lock(),
    );
    ExitCode::from(code)
}

/// Runs one command line (`args` starts with the program name) with
/// `selector`, writing the answer to `stdout` and errors to `stderr`, and
/// returns the exit code.
pub fn run<I, T, L>(args: I, selector: L, stdout: &mut dyn Write, stderr: &mut dyn Write) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
    L: Selector,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(error) => {
            // Help and version go to stdout with 0; usage errors to stderr with 2.
            let rendered = error.render();
            let _ = if error.use_stderr() {
                write!(stderr, "{rendered}")
            } else {
                write!(stdout, "{rendered}")
            };
            return u8::try_from(error.exit_code()).unwrap_or(EXIT_BAD_INPUT);
        }
    };
    let routing = match Routing::from_parts(RoutingParts {
        mode: cli.mode,
        directory: cli.directory,
        port_name: cli.port_name,
    }) {
        Ok(routing) => routing,
        Err(error) => return fail(stderr, EXIT_BAD_INPUT, &error),
    };
    let target = match read_target(&cli.target) {
        Ok(target) => target,
        Err(message) => return fail_message(stderr, EXIT_BAD_INPUT, &message),
    };
    // One process, one invocation: a document that fails the start fails
    // the invocation, as a dependency failure.
    let outcome = Router::start_with_selector(routing, selector)
        .map_err(|StartError::DirectoryUnusable(error)| ResolveError::Dependency(error))
        .and_then(|router| router.resolve(&target));
    match cli.command {
        Command::Resolve => answer_resolve(outcome, stdout, stderr),
        Command::Ready => answer_ready(outcome, stdout, stderr),
    }
}

fn answer_resolve(
    outcome: Result<ResolvedTarget, ResolveError>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> u8 {
    match outcome {
        Ok(resolved) => match serde_json::to_string_pretty(&resolved) {
            Ok(json) => print_line(stdout, stderr, &json),
            Err(error) => fail(stderr, EXIT_OUTPUT, &error),
        },
        Err(error) => fail(stderr, failure_code(&error), &error),
    }
}

/// `ok` exactly when the invocation resolved, which is what
/// [`Router::readiness`] answers; the reason of `not_ready` goes to stderr.
fn answer_ready(
    outcome: Result<ResolvedTarget, ResolveError>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> u8 {
    match outcome {
        Ok(_) => print_line(stdout, stderr, "ok"),
        Err(error) => match print_line(stdout, stderr, "not_ready") {
            EXIT_OK => fail(stderr, failure_code(&error), &error),
            code => code,
        },
    }
}

fn failure_code(error: &ResolveError) -> u8 {
    if error.is_dependency_failure() {
        EXIT_DEPENDENCY
    } else {
        EXIT_REJECTED
    }
}

/// Reads and parses the target file with the same file source as the
/// directory: regular files only, bounded in size and time.
fn read_target(path: &Path) -> Result<ReleaseTarget, String> {
    let bytes = FsSource::new(path)
        .read_document()
        .map_err(|error| format!("cannot read target file {}: {error}", path.display()))?;
    ReleaseTarget::parse(&bytes)
        .map_err(|error| format!("invalid target file {}: {error}", path.display()))
}

fn print_line(stdout: &mut dyn Write, stderr: &mut dyn Write, text: &str) -> u8 {
    match writeln!(stdout, "{text}").and_then(|()| stdout.flush()) {
        Ok(()) => EXIT_OK,
        Err(error) => fail(stderr, EXIT_OUTPUT, &error),
    }
}

/// Prints `error` and its causes on one line of `stderr`.
fn fail(stderr: &mut dyn Write, code: u8, error: &dyn Error) -> u8 {
    let mut message = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        message.push_str(": ");
        message.push_str(&inner.to_string());
        cause = inner.source();
    }
    fail_message(stderr, code, &message)
}

fn fail_message(stderr: &mut dyn Write, code: u8, message: &str) -> u8 {
    let _ = writeln!(stderr, "connreg-router: {message}");
    code
}
