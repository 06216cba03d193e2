//! connreg-benches: the scale qualification runner and the benchmarks.
//!
//! - `connreg-qualify` (`src/bin/`, logic in [`qualify`]): runs a named
//!   environment contract (`benches/environments/*.toml`) on the in-memory
//!   or the PostgreSQL backend and writes a PASS/FAIL report with its
//!   measured figures (SIM-6).
//! - `benches/targets.rs`: every performance target measured side by side
//!   in one run (criterion benches of both backends on fleets of 1,000 to
//!   100,000 replicas, PostgreSQL throughput beside pgbench, memory per
//!   route, simulator seeds per minute), one `TARGET` line each.
//! - `benches/resolve_vs_pgbench.rs`: new-route resolves per second on the
//!   PostgreSQL backend at several client counts against a large fleet,
//!   beside pgbench's built-in TPC-B on the same server, and their ratio.
//! - `connreg-crash` (`src/bin/`, its end-of-run check in [`crash`]):
//!   resolve/settle load on PostgreSQL through a fault proxy with server
//!   restarts and connection cuts, then the store against every answer.
//! - `connreg-route-bytes` (`src/bin/`): bytes the in-memory registry holds
//!   per retained route, from a counting allocator, in a process of its
//!   own; `benches/targets.rs` runs it.
//! - `connreg-bench-guard` (`src/bin/`, its judgement in [`guard`]): the
//!   regression guard CI runs, the in-memory figures as ratios against
//!   those recorded in `benches/README.md`.
//!
//! # Map
//!
//! - [`crash`]: the end-of-run check of `connreg-crash`, a pure function of
//!   a store snapshot and the answers the clients got.
//! - [`guard`]: the recorded figures and their bounds.
//! - [`memory_fleet`]: the in-memory registry and fleet of the targets
//!   bench's in-memory figures, shared with `connreg-route-bytes`.
//! - [`qualify`]: contracts, fleets, the workload, invariant checks and
//!   reports of `connreg-qualify`; its fleet builder also serves
//!   `benches/targets.rs`.
//! - [`resolve_bench`]: settings, fleet loading and the pgbench runner of
//!   `resolve_vs_pgbench` and `targets`.

pub mod crash;
pub mod guard;
pub mod memory_fleet;
pub mod qualify;
pub mod resolve_bench;
