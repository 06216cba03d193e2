//! How a model run is configured and driven: the case count and seed,
//! replaying the checked-in regressions, the random cases, and the
//! failure report that names the command to run them again.

use std::any::Any;
use std::cell::Cell;
use std::hash::{BuildHasher, RandomState};
use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;

use proptest::test_runner::{Config, RngSeed, TestRunner};
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest};

use crate::Harness;

use super::backend::{CONTEXT, Context, ContextGuard};
use super::{
    CASES_DEFAULT, MAINTAIN_BATCH_MAX, Model, ModelState, ModelTest, Regression, SEED_DEFAULT,
    SEED_VAR, TRANSITIONS_MAX, regressions,
};

/// The default configuration: [`CASES_DEFAULT`] cases unless
/// `PROPTEST_CASES` is set; the seed [`SEED_VAR`] picks, else the one
/// `PROPTEST_RNG_SEED` gives, else [`SEED_DEFAULT`]; no failure files (the
/// regressions are checked in as Rust: [`regressions`]).
///
/// # Panics
///
/// When [`SEED_VAR`] is set to neither `random` nor a `u64`.
pub fn config() -> Config {
    let mut config = Config::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = CASES_DEFAULT;
    }
    config.rng_seed = match std::env::var_os(SEED_VAR) {
        Some(value) => parse_seed(&value.to_string_lossy()).unwrap_or_else(|e| panic!("{e}")),
        // Config::default has read PROPTEST_RNG_SEED.
        None if std::env::var_os("PROPTEST_RNG_SEED").is_some() => config.rng_seed,
        None => RngSeed::Fixed(SEED_DEFAULT),
    };
    config.failure_persistence = None;
    config
}

/// Reads a [`SEED_VAR`] value: `random` or a `u64`.
fn parse_seed(value: &str) -> std::result::Result<RngSeed, String> {
    let value = value.trim();
    if value.eq_ignore_ascii_case("random") {
        return Ok(RngSeed::Random);
    }
    value
        .parse::<u64>()
        .map(RngSeed::Fixed)
        .map_err(|_| format!("{SEED_VAR} must be `random` or a u64, not {value:?}"))
}

/// A fresh seed from the operating system's random source, which keys
/// std's `RandomState` (no extra dependency for test code).
fn seed_from_os() -> u64 {
    RandomState::new().hash_one(std::process::id())
}

/// The name of the running test target: Cargo names its binary
/// `<target>-<hash>`.
fn test_target() -> String {
    std::env::args_os()
        .next()
        .and_then(|path| {
            let stem = std::path::Path::new(&path)
                .file_stem()?
                .to_string_lossy()
                .into_owned();
            stem.rsplit_once('-').map(|(name, _)| name.to_string())
        })
        .unwrap_or_else(|| "<backend>".to_string())
}

/// The command that runs exactly these cases again.
fn rerun_command(seed: u64, cases: u32) -> String {
    format!(
        "{SEED_VAR}={seed} PROPTEST_CASES={cases} \
         cargo test -p connreg-conformance --test {} model -- --nocapture",
        test_target()
    )
}

/// The text of a panic's payload.
fn panic_text(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// Replays one regression through the steps a random case takes
/// ([`StateMachineTest::test_sequential`]): the model's transition, the
/// backend's step with its comparisons, and every check after it.
fn replay<H: Harness>(regression: &Regression) -> std::result::Result<(), String> {
    let transitions = &regression.transitions;
    // How many transitions have started: names the one that failed.
    let started = Cell::new(0usize);
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
        let mut state = ModelState::initial();
        let mut sut = ModelTest::<H>::init_test(&state);
        ModelTest::<H>::check_invariants(&sut, &state);
        for t in transitions {
            started.set(started.get() + 1);
            assert!(
                Model::preconditions(&state, t),
                "the model does not allow this transition here: fix the regression"
            );
            state = Model::apply(state, t);
            sut = ModelTest::<H>::apply(sut, &state, t.clone());
            ModelTest::<H>::check_invariants(&sut, &state);
        }
        ModelTest::<H>::teardown(sut, state);
    }));
    outcome.map_err(|payload| {
        let why = panic_text(payload.as_ref());
        match started.get() {
            0 => format!("before its first transition: {why}"),
            n => format!(
                "at transition {n} of {} ({:?}): {why}",
                transitions.len(),
                transitions[n - 1]
            ),
        }
    })
}

/// Runs the model test against `harness` with [`config`].
pub fn run<H: Harness>(harness: H) -> std::result::Result<(), String> {
    run_with(harness, config())
}

/// Runs the model test against `harness` with a given configuration: every
/// [`regressions`] sequence first, then `config.cases` random cases. A
/// random seed is drawn here and printed, so every run names its seed.
pub fn run_with<H: Harness>(harness: H, config: Config) -> std::result::Result<(), String> {
    let (seed, drawn) = match config.rng_seed {
        RngSeed::Fixed(seed) => (seed, "given"),
        RngSeed::Random => (seed_from_os(), "random"),
    };
    let config = Config {
        rng_seed: RngSeed::Fixed(seed),
        ..config
    };
    let regressions = regressions();
    eprintln!(
        "model: checked-in regressions: {}, then random cases: {} from {drawn} seed {seed} \
         ({SEED_VAR}={seed})",
        regressions.len(),
        config.cases
    );
    let rerun = rerun_command(seed, config.cases);
    let fleet = ModelState::initial().replicas.len();
    if fleet as u64 > u64::from(MAINTAIN_BATCH_MAX) {
        return Err(format!(
            "the model's {fleet} replicas exceed MAINTAIN_BATCH_MAX ({MAINTAIN_BATCH_MAX})"
        ));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    let ctx: Rc<dyn Any> = Rc::new(Context { harness, runtime });
    CONTEXT.with(|c| *c.borrow_mut() = Some(ctx));
    let _guard = ContextGuard;
    for regression in &regressions {
        replay::<H>(regression).map_err(|e| {
            format!(
                "regression `{}` (conformance/src/model/regressions.rs): the backend \
                 disagrees with the reference model {e}\nrun it again: {rerun}",
                regression.name
            )
        })?;
    }
    let mut runner = TestRunner::new(config.clone());
    let strategy = Model::sequential_strategy(1..=TRANSITIONS_MAX);
    runner
        .run(&strategy, |(initial, transitions, seen)| {
            ModelTest::<H>::test_sequential(config.clone(), initial, transitions, seen);
            Ok(())
        })
        .map_err(|e| {
            format!(
                "the backend disagrees with the reference model (seed {seed}, {} cases): \
                 {e}\nrun it again: {rerun}\nkeep it: add the transitions of the minimal \
                 failing input to conformance/src/model/regressions.rs (docs/TESTING.md)",
                config.cases
            )
        })
}

/// A fixed-seed configuration with `cases` cases, for reproducible runs.
pub fn seeded(cases: u32, seed: u64) -> Config {
    Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        ..config()
    }
}
