//! Goal: random sequences of publications, resolves, settlements,
//! heartbeats, drains, registrations, clock moves, lease maintenance and
//! circuit closes give exactly the results a small reference model
//! predicts, with the invariants checked after every step and failures
//! shrunk to a minimal sequence (proptest-state-machine).
//!
//! The reference model predicts everything a backend must agree on: the
//! chosen replica (by the ROUTE-10 order and the stable route hash), every
//! result and error kind, every counter, state and circuit. It does not
//! predict fence values, only that they are fresh.
//!
//! Runs are reproducible: [`run`] first replays the checked-in
//! [`regressions`], then draws [`config`]'s cases from a fixed seed
//! ([`SEED_DEFAULT`]) unless `CONNREG_MODEL_SEED` names another seed or asks
//! for a `random` one. `docs/TESTING.md` gives the CI and nightly commands
//! and how a failure becomes a regression.
//!
//! [`StateMachineTest`] is synchronous and has no `self`; the backend's
//! [`Harness`] and a current-thread runtime reach it through a
//! thread-local that [`run_with`] sets for the duration of the run.

use connreg::Outcome;
#[cfg(doc)]
use proptest_state_machine::StateMachineTest;

#[cfg(doc)]
use crate::Harness;
use crate::fixture::FleetOptions;

mod backend;
mod machine;
mod regressions;
mod runner;
mod state;
mod transition;

pub use backend::{ModelTest, Sut};
pub use machine::Model;
pub use runner::{config, run, run_with, seeded};
pub use state::{ModelReplica, ModelRoute, ModelState};
pub use transition::{Copy, Expect, PublishOp, Step, Transition};

/// Cases per run unless `PROPTEST_CASES` says otherwise: modest, so the
/// PostgreSQL backend runs it quickly too.
pub const CASES_DEFAULT: u32 = 32;

/// The seed of every run unless `CONNREG_MODEL_SEED` (or proptest's own
/// `PROPTEST_RNG_SEED`) says otherwise, so CI draws the same cases every
/// time and a red build is a change, not luck. Changing it swaps every
/// case CI runs: do it on purpose, with a green run on both backends.
pub const SEED_DEFAULT: u64 = 1_618_033_988;

/// The environment variable that picks the seed: unset for
/// [`SEED_DEFAULT`], `random` for a fresh one from the operating system,
/// or a `u64` to replay a run.
pub const SEED_VAR: &str = "CONNREG_MODEL_SEED";

/// The `max` of every maintenance call: above the model's fleet (checked
/// when a run starts), so one call can take every expired replica and the
/// model predicts the whole batch.
pub const MAINTAIN_BATCH_MAX: u32 = 100;

const _: () = assert!(MAINTAIN_BATCH_MAX <= connreg::limits::LEASE_MAINTENANCE_BATCH_MAX);

/// Most transitions in one case.
pub const TRANSITIONS_MAX: usize = 30;

/// Action IDs the model draws from: few, so duplicates and retries happen.
pub const ACTIONS: usize = 5;

const TENANTS: [&str; 2] = ["t-acme", "t-globex"];
const CAPABILITIES: [&str; 2] = ["crm.contact.create", "crm.contact.read"];
const SCOPES: [&str; 3] = ["s-acme", "s-acme-crm", "s-globex"];
const INSTANCES: [&str; 2] = ["i-acme-crm", "i-globex-crm"];
const OUTCOMES: [Outcome; 4] = [
    Outcome::Completed,
    Outcome::OutcomeUnknown,
    Outcome::Cancelled,
    Outcome::LeaseExpired,
];
const ADVANCES_MS: [u64; 5] = [1_000, 10_000, 29_999, 30_000, 45_000];
const LEASE_TTL_MS: u64 = 30_000;
const CIRCUIT_THRESHOLD: u32 = 2;

/// One binding the model routes through.
#[derive(Debug, Clone, Copy)]
struct BindingShape {
    id: &'static str,
    tenant: usize,
    capability: usize,
    instance: usize,
    scopes: &'static [usize],
}

const BINDINGS: [BindingShape; 3] = [
    BindingShape {
        id: "b-acme-crm-create",
        tenant: 0,
        capability: 0,
        instance: 0,
        scopes: &[0, 1],
    },
    BindingShape {
        id: "b-acme-crm-read",
        tenant: 0,
        capability: 1,
        instance: 0,
        scopes: &[0],
    },
    BindingShape {
        id: "b-globex-crm-create",
        tenant: 1,
        capability: 0,
        instance: 1,
        scopes: &[2],
    },
];

/// The fleet the model runs on: two replicas per instance, capacity 2,
/// scope limits 3, circuit threshold 2.
pub fn model_options() -> FleetOptions {
    FleetOptions {
        replicas_per_instance: 2,
        replica_capacity: 2,
        scope_limit: 3,
        lease_ttl_ms: LEASE_TTL_MS,
        ..FleetOptions::default().with_circuit(true, CIRCUIT_THRESHOLD)
    }
}

fn action_id(a: usize) -> String {
    format!("act-{a}")
}

/// A checked-in sequence of transitions that once made a backend disagree
/// with the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Regression {
    /// The name a failure repeats.
    pub name: &'static str,
    /// The transitions, applied in order from the initial fleet.
    pub transitions: Vec<Transition>,
}

/// The checked-in regression sequences (`conformance/src/model/regressions.rs`),
/// which [`run_with`] replays before any random case.
pub fn regressions() -> Vec<Regression> {
    regressions::list()
}
