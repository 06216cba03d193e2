//! `connreg-qualify`: runs a named environment contract and writes a
//! pass/fail report with its measured figures (SIM-6). See
//! `benches/README.md` and `connreg_benches::qualify`.

fn main() -> std::process::ExitCode {
    connreg_benches::qualify::cli::main()
}
