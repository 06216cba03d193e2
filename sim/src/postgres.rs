//! The PostgreSQL tier (SIM-4): the same scenarios, hosts, faults and
//! checkers against the registry's PostgreSQL backend on a real server.
//!
//! Every run gets a fresh database with its own control and data roles
//! (`connreg::postgres::testing::TestRegistry`, which finds or starts a
//! server through connreg-pgtest and fails, never skips, without one). The
//! store is called *offloaded*: backend calls run on a real multi-threaded
//! Tokio runtime and race for real, and the world waits for them after
//! every simulated step, so the registry's injected clock (still the
//! simulated one) never runs ahead of the database. The run is seeded but
//! not byte-deterministic: the trace says `"deterministic": false` and the
//! order-sensitive checks are skipped (see `sim/TRACE.md`).
//!
//! Faults that make sense here are all of them: they act on the simulated
//! network and hosts in front of the database, and a registry host crash
//! drops its in-flight calls while the database commits them. Plants exist
//! only in the in-memory backend.

use std::rc::Rc;

use connreg::ManualClock;

use crate::fleet::FleetPlan;
use crate::run::RunError;
use crate::scenario::Scenario;
use crate::world::{RunReport, WorldParams};

/// Worker threads of the runtime that runs the backend calls.
#[cfg(feature = "postgres")]
const BACKEND_WORKER_THREADS: usize = 2;

/// Runs `scenario` against a fresh PostgreSQL database.
#[cfg(feature = "postgres")]
pub(crate) fn run(
    scenario: Rc<Scenario>,
    plan: &FleetPlan,
    clock: ManualClock,
    params: WorldParams,
) -> Result<RunReport, RunError> {
    use connreg::postgres::testing::TestRegistry;

    use crate::backend::Store;
    use crate::world::simulate;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(BACKEND_WORKER_THREADS)
        .enable_all()
        .build()
        .map_err(|e| RunError::Backend(format!("backend runtime: {e}")))?;
    let registry = runtime
        .block_on(TestRegistry::open(clock.clone(), plan.config.clone()))
        .map_err(|e| RunError::Backend(e.to_string()))?;
    let store = Store::offloaded(registry, runtime.handle().clone());
    // The last clone of the registry (and with it the test database) goes
    // when the world ends, outside any async context.
    let report = simulate(scenario, store, clock, params).map_err(RunError::Input);
    runtime.shutdown_timeout(std::time::Duration::from_secs(10));
    report
}

/// Without the `postgres` feature there is no PostgreSQL tier.
#[cfg(not(feature = "postgres"))]
pub(crate) fn run(
    _scenario: Rc<Scenario>,
    _plan: &FleetPlan,
    _clock: ManualClock,
    _params: WorldParams,
) -> Result<RunReport, RunError> {
    Err(RunError::Backend(
        "this build has no PostgreSQL tier: build connreg-sim with its `postgres` feature".into(),
    ))
}
