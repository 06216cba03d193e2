//! Goal: one seed determines a whole run on the in-memory backend, byte for
//! byte, faults and swarm draws included; different seeds give different
//! runs.

use connreg_sim::{RunOptions, Scenario, TraceTarget, run};

fn scenario(file: &str) -> Scenario {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios")
        .join(file);
    Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn trace(s: &Scenario, seed: u64, swarm: bool) -> (String, Vec<u8>) {
    let opts = RunOptions {
        seed,
        swarm,
        trace: TraceTarget::Memory,
        ..RunOptions::default()
    };
    let report = run(s, &opts).unwrap_or_else(|e| panic!("{e}"));
    assert!(report.ok(), "seed {seed}: {:?}", report.violations);
    let bytes = report.trace.expect("the trace was kept in memory");
    assert_eq!(report.trace_hash, connreg_sim::trace::hash_bytes(&bytes));
    (report.trace_hash, bytes)
}

#[test]
fn the_same_seed_gives_a_byte_identical_trace() {
    // spec: SIM-1
    let s = Scenario::standard();
    let (hash_a, a) = trace(&s, 7, false);
    let (hash_b, b) = trace(&s, 7, false);
    assert_eq!(hash_a, hash_b);
    assert!(a == b, "two runs of seed 7 wrote different traces");
}

#[test]
fn different_seeds_give_different_traces() {
    // spec: SIM-1
    let s = Scenario::standard();
    let (a, _) = trace(&s, 7, false);
    let (b, _) = trace(&s, 8, false);
    assert_ne!(a, b, "seeds 7 and 8 wrote the same trace");
}

#[test]
fn faults_replay_identically() {
    // spec: SIM-1 (crashes, partitions, one-way partitions, clock jumps and
    // lost answers are part of the seed's run)
    for file in [
        "0003_retry_after_lost_answer.toml",
        "0011_partition_with_lease_churn.toml",
        "0013_registry_host_crash_restart.toml",
    ] {
        let s = scenario(file);
        let (a, _) = trace(&s, 3, false);
        let (b, _) = trace(&s, 3, false);
        assert_eq!(a, b, "{file}");
    }
}

#[test]
fn swarm_draws_replay_identically() {
    // spec: SIM-1 (fault probabilities and fleet shape come from the seed)
    let s = Scenario::standard();
    let (a, _) = trace(&s, 11, true);
    let (b, _) = trace(&s, 11, true);
    assert_eq!(a, b);
    let (c, _) = trace(&s, 12, true);
    assert_ne!(a, c);
}
