//! Scale qualification (SIM-6): run a named environment contract against a
//! backend and report PASS or FAIL with the measured figures.
//!
//! ```sh
//! cargo run -p connreg-benches --release --bin connreg-qualify -- \
//!   --env benches/environments/smoke.toml [--backend postgres] [--report out.json]
//! ```
//!
//! # Map
//!
//! - [`contract`]: the TOML environment contract, strictly parsed.
//! - [`limits`]: every bound of the runner, named.
//! - [`fleet`]: a fleet's records from its shape; publication, registration.
//! - [`workload`]: the clients and their operation mix.
//! - [`events`]: a zone's lease expiry and an operator's publications
//!   inside a trial's measured run.
//! - [`failover`]: a `[failover]` of the run's own primary and standby.
//! - [`stats`]: counts, errors by kind, latency histograms.
//! - [`check`]: invariants, as answers arrive and over a final inspection.
//! - [`report`]: the JSON report, thresholds and verdict, the summary.
//! - [`run`]: one qualification, start to end, on either backend.
//! - [`server`]: the PostgreSQL server a run qualifies (an operator's, or
//!   a throwaway one) and what the report says about it.
//! - [`beside`]: pgbench TPC-B and select-only beside a PostgreSQL run.
//! - [`dbcheck`]: whole-database invariants computed by the server.
//! - [`cleanup`]: removing a run's rows, and only those, at the end.
//! - [`provenance`]: time, build, machine and contract of a report.
//! - [`trial`]: one trial: warm-up, measured run, timeline, progress.
//! - [`timeline`]: figures over time, per interval.
//! - [`multi`]: many registry processes: the workers and the driver.
//! - [`output`]: the report directory: JSON, Markdown, plots.
//! - [`plot`]: SVG plots of the timelines.
//! - [`progress`]: the progress bar or lines while a trial measures.
//! - [`error`]: errors without a verdict, and the exit codes.
//! - [`cli`]: the `connreg-qualify` command line.

pub mod beside;
pub mod check;
pub mod cleanup;
pub mod cli;
pub mod contract;
pub mod dbcheck;
pub mod error;
pub mod events;
pub mod failover;
pub mod fleet;
pub mod limits;
pub mod multi;
pub mod output;
pub mod plot;
pub mod progress;
pub mod provenance;
pub mod report;
pub mod run;
pub mod server;
pub mod stats;
pub mod timeline;
pub mod trial;
pub mod workload;

pub use contract::{BackendKind, Contract, ContractError};
pub use error::{EXIT_BAD_INPUT, EXIT_FAIL, EXIT_PASS, EXIT_RUN_ERROR, QualifyError};
pub use fleet::{FleetPlan, FleetShape};
pub use report::{Report, Verdict};
pub use run::{RunOptions, qualify};
