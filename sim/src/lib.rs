//! connreg-sim: the deterministic simulator of a connector fleet around the
//! registry.
//!
//! A seeded [turmoil](https://docs.rs/turmoil) world holds registry hosts
//! (the contracts over a small RPC, all in front of one shared store that
//! outlives their crashes), dispatcher hosts, replica hosts that record
//! every provider side effect in a ledger, a catalog administrator, catalog
//! readers and a lease maintenance job. Faults come from the scenario's
//! schedule or from the seed. After every step the checkers read the
//! step's trace events and a snapshot of the store; at the end they check
//! liveness and the scenario's expected outcome counts.
//!
//! One seed determines a whole run on the in-memory backend: the same
//! scenario and seed give a byte-identical trace (SIM-1).
//!
//! ```no_run
//! use connreg_sim::{RunOptions, Scenario, run};
//!
//! let scenario = Scenario::standard();
//! let report = run(&scenario, &RunOptions { seed: 1, ..RunOptions::default() }).unwrap();
//! assert!(report.ok(), "{:?}", report.violations);
//! println!("trace hash {}", report.trace_hash);
//! ```
//!
//! # Map
//!
//! - [`scenario`]: the scenario file schema and its strict parser.
//! - `feasible`: the timings a scenario needs to make progress at all.
//! - [`fleet`]: a scenario's fleet as registry records.
//! - [`wire`]: the RPC messages and framing.
//! - [`backend`]: the shared store and how hosts call it.
//! - `hosts`: registry, dispatcher, replica and operator hosts.
//! - `faults`: the fault schedule (scheduled and drawn from the seed).
//! - `world`: the simulation loop, snapshots and checks.
//! - [`check`]: the invariant checkers, which read only the trace.
//! - [`trace`]: the trace format (`sim/TRACE.md`).
//! - [`counters`]: outcome counters and expectation bounds.
//! - [`swarm`]: fault probabilities and fleet shape drawn from the seed.
//! - [`run`]: options, backends, seed ranges, the repro command.
//! - [`plant`]: the catalogue of planted bugs, in the store and in the
//!   hosts.
//! - `postgres`: the PostgreSQL tier: the fault proxy in front of the
//!   server, database faults, commit order.
//! - [`sweep`]: seed sweeps on worker threads, shards, JUnit and JSON
//!   reports.
//! - [`shrink`]: from a failing seed to a smaller scenario file that
//!   fails the same way.
//! - [`explain`]: a failing trace told as a story, and drawn as a page.
//! - [`replay`]: running again what a trace recorded.
//! - [`limits`]: every bound, named.

pub mod backend;
pub mod check;
pub mod counters;
pub mod explain;
pub mod fleet;
pub mod hold;
pub mod limits;
pub mod oracle;
pub mod plant;
pub mod probes;
pub mod replay;
pub mod run;
pub mod scenario;
pub mod shrink;
pub mod swarm;
pub mod sweep;
pub mod trace;
pub mod wire;

mod faults;
mod feasible;
mod hosts;
mod postgres;
mod world;

pub use check::{Checker, Recheck, recheck};
pub use counters::{CounterBounds, Counters};
pub use plant::PlantedBug;
pub use run::{
    BackendKind, RunError, RunOptions, TraceTarget, parse_seed_range, repro_command,
    resolve_scenario_path, run, trace_file_name,
};
pub use scenario::{Scenario, ScenarioError};
pub use world::{RunReport, StepBytes};
