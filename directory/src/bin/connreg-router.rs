//! `connreg-router`: resolves one authorized release target to the network
//! destination it should be invoked at, or reports whether it could be
//! routed now, in the mode given on the command line.
//!
//! Exit codes: 0 success (`ok` for `ready`); 1 output could not be written;
//! 2 bad input (usage, mode, settings, target file); 3 dependency failure
//! (the directory failed the invocation; `ready` printed `not_ready`);
//! 4 the selection was rejected. The command line lives in
//! [`connreg_directory::cli`].

use std::process::ExitCode;

fn main() -> ExitCode {
    connreg_directory::cli::main()
}
