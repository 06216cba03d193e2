//! Support of `benches/resolve_vs_pgbench.rs`: PostgreSQL route resolution
//! against pgbench's built-in TPC-B on the same server.
//!
//! - [`settings`]: every knob, read from the environment, with its default.
//! - [`fleet`]: loading a large fleet quickly.
//! - [`pgbench`]: running pgbench and reading its throughput.

pub mod fleet;
pub mod pgbench;
pub mod settings;
