//! Swarm mode: fault probabilities and fleet shape drawn from the seed.
//!
//! A swarm run keeps the scenario's fleet records, schedule and mix, and
//! draws on top of them: more registry hosts and dispatchers (never fewer,
//! so scheduled faults still name real hosts), replica capacities (of
//! replica groups too), scope limits, lease timing, workload ratios and
//! every kind of chaos, fleet-grain faults included when the fleet has
//! replica groups. A fleet (a scenario with replica groups) keeps its
//! lease and heartbeat timing and at least half its concurrency, with no
//! more actions than that concurrency finishes in half the run. Outcome
//! expectations are dropped (the draw decides which faults fire); every
//! invariant and the liveness bound still apply. On PostgreSQL it also
//! draws database cuts, stalls and session terminations, and in a quarter
//! of its seeds a failover to a synchronous standby the run starts itself
//! (never on an asynchronous one, whose scenarios expect the loss, never
//! a second one, and never in a scenario that restarts its server; never
//! a server restart, which costs seconds of real time for no fault a
//! failover does not also make); the in-memory
//! backend has no database to fault.

use std::collections::BTreeMap;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::hosts::mix64;
use crate::scenario::{DatabaseReplication, Expect, Scenario};

/// Liveness bound of a swarm run, at least: room for the drawn faults.
const SWARM_LIVENESS_MS_MIN: u64 = 3_000;

/// Share of PostgreSQL swarm seeds that draw a `db_failover` (each
/// starts a primary and a standby: a few seconds of real time).
const SWARM_FAILOVER_P: f64 = 0.25;

/// What one action costs a dispatcher beyond its execution (resolve,
/// dispatch and settle round trips), for sizing a fleet's swarm load.
const SWARM_ACTION_OVERHEAD_MS: u64 = 50;

/// Every value a swarm run drew, by scenario key (`workload.concurrency`,
/// `fleet.replicas.r1.capacity`): what the trace's `start.swarm_draws`
/// records, so a reader sees the fleet and chaos the seed made.
pub type Draws = BTreeMap<String, serde_json::Value>;

/// The scenario a swarm run of `seed` uses and the values it drew.
pub fn draw_recorded(base: &Scenario, seed: u64, database: bool) -> (Scenario, Draws) {
    let s = draw(base, seed, database);
    let mut d = Draws::new();
    let mut put = |k: String, v: serde_json::Value| {
        d.insert(k, v);
    };
    put("registry.hosts".into(), s.registry.hosts.into());
    for r in &s.fleet.replicas {
        let r = r.get_ref();
        put(
            format!("fleet.replicas.{}.capacity", r.id),
            r.capacity.into(),
        );
    }
    for sc in &s.fleet.scopes {
        let sc = sc.get_ref();
        put(format!("fleet.scopes.{}.limit", sc.id), sc.limit.into());
    }
    let l = &s.lifecycle;
    put("lifecycle.lease_ttl_ms".into(), l.lease_ttl_ms.into());
    put("lifecycle.heartbeat_ms".into(), l.heartbeat_ms.into());
    put("lifecycle.maintenance_ms".into(), l.maintenance_ms.into());
    put(
        "lifecycle.maintenance_batch".into(),
        l.maintenance_batch.into(),
    );
    let w = &s.workload;
    put("workload.dispatchers".into(), w.dispatchers.into());
    put("workload.concurrency".into(), w.concurrency.into());
    if !s.fleet.replica_groups.is_empty() {
        put("workload.actions".into(), w.actions.into());
    }
    put("workload.duplicate_ratio".into(), w.duplicate_ratio.into());
    put("workload.duplicates".into(), w.duplicates.into());
    put("workload.cancel_ratio".into(), w.cancel_ratio.into());
    put("workload.reconcile_ratio".into(), w.reconcile_ratio.into());
    put(
        "workload.repeat_settle_ratio".into(),
        w.repeat_settle_ratio.into(),
    );
    put(
        "workload.stale_settle_ratio".into(),
        w.stale_settle_ratio.into(),
    );
    let c = &s.chaos;
    put("chaos.lose_answer_ratio".into(), c.lose_answer_ratio.into());
    put("chaos.replica_crashes".into(), c.replica_crashes.into());
    put("chaos.registry_crashes".into(), c.registry_crashes.into());
    put("chaos.partitions".into(), c.partitions.into());
    put("chaos.holds".into(), c.holds.into());
    put("chaos.loss_windows".into(), c.loss_windows.into());
    put("chaos.clock_jumps".into(), c.clock_jumps.into());
    if database {
        put("chaos.db_cuts".into(), c.db_cuts.into());
        put("chaos.db_stalls".into(), c.db_stalls.into());
        put("chaos.db_terminates".into(), c.db_terminates.into());
        put("chaos.db_failovers".into(), c.db_failovers.into());
    }
    if !s.fleet.replica_groups.is_empty() {
        for g in &s.fleet.replica_groups {
            let g = g.get_ref();
            put(
                format!("fleet.replica_groups.{}.capacity", g.name),
                g.capacity.into(),
            );
        }
        put("chaos.zone_silences".into(), c.zone_silences.into());
        put("chaos.group_crashes".into(), c.group_crashes.into());
        put("chaos.group_drains".into(), c.group_drains.into());
    }
    put("scenario.liveness_ms".into(), s.scenario.liveness_ms.into());
    (s, d)
}

/// The scenario a swarm run of `seed` uses; `database` when the backend is
/// a real database (PostgreSQL), whose faults are drawn too.
pub fn draw(base: &Scenario, seed: u64, database: bool) -> Scenario {
    let mut s = base.clone();
    let mut rng = SmallRng::seed_from_u64(mix64(seed ^ 0x5a4a_12d5_a4a1_2d00));
    let maybe = |rng: &mut SmallRng, p: f64| rng.random_bool(p);

    s.registry.hosts = s.registry.hosts.max(rng.random_range(1..=3));
    s.workload.dispatchers = s.workload.dispatchers.max(rng.random_range(1..=3));
    let fleet = !s.fleet.replica_groups.is_empty();
    if fleet {
        // A fleet's load is its point: keep at least half of it, and no
        // more actions than the drawn concurrency finishes in half the
        // run, so the liveness bound judges the registry, not the draw.
        let w = &mut s.workload;
        w.concurrency = rng.random_range(w.concurrency.div_ceil(2)..=w.concurrency);
        let per_action = (w.exec_ms[0] + w.exec_ms[1]) / 2 + SWARM_ACTION_OVERHEAD_MS;
        let fits = u64::from(w.concurrency) * s.scenario.duration_ms / (2 * per_action);
        w.actions = w.actions.min(fits.clamp(1, u64::from(u32::MAX)) as u32);
    } else {
        s.workload.concurrency = rng.random_range(1..=4);
    }
    for r in &mut s.fleet.replicas {
        r.get_mut().capacity = rng.random_range(1..=6);
    }
    for sc in &mut s.fleet.scopes {
        sc.get_mut().limit = rng.random_range(1..=12);
    }
    if fleet {
        // Thousands of replicas beating every 100 ms is not a fleet's
        // timing: keep the scenario's lease and heartbeat, draw how fast
        // and in what batches maintenance runs.
        let l = &mut s.lifecycle;
        l.maintenance_ms = rng.random_range(l.maintenance_ms.div_ceil(4)..=l.maintenance_ms);
        l.maintenance_batch =
            rng.random_range(l.maintenance_batch.div_ceil(8)..=l.maintenance_batch);
    } else {
        let lease = rng.random_range(200..=800u64);
        s.lifecycle.lease_ttl_ms = lease;
        s.lifecycle.heartbeat_ms = lease / rng.random_range(3..=5u64);
        s.lifecycle.maintenance_ms = rng.random_range(20..=200);
        s.lifecycle.maintenance_batch = rng.random_range(1..=4);
    }

    let w = &mut s.workload;
    let pick = |rng: &mut SmallRng, choices: &[f64]| choices[rng.random_range(0..choices.len())];
    w.duplicate_ratio = pick(&mut rng, &[0.0, 0.2, 0.5]);
    w.duplicates = rng.random_range(1..=3);
    w.cancel_ratio = pick(&mut rng, &[0.0, 0.1, 0.3]);
    w.reconcile_ratio = pick(&mut rng, &[0.0, 0.2, 0.5]);
    w.repeat_settle_ratio = pick(&mut rng, &[0.0, 0.2]);
    w.stale_settle_ratio = pick(&mut rng, &[0.0, 0.5]);

    let c = &mut s.chaos;
    if maybe(&mut rng, 0.5) {
        c.lose_answer_ratio = pick(&mut rng, &[0.02, 0.1, 0.2]);
    }
    if maybe(&mut rng, 0.5) {
        c.replica_crashes = rng.random_range(1..=2);
    }
    if maybe(&mut rng, 0.3) {
        c.registry_crashes = 1;
    }
    if maybe(&mut rng, 0.5) {
        c.partitions = rng.random_range(1..=2);
    }
    if maybe(&mut rng, 0.3) {
        c.holds = rng.random_range(1..=2);
    }
    if maybe(&mut rng, 0.3) {
        c.loss_windows = 1;
    }
    if maybe(&mut rng, 0.3) {
        c.clock_jumps = 1;
    }
    if database {
        if maybe(&mut rng, 0.5) {
            c.db_cuts = rng.random_range(1..=2);
        }
        if maybe(&mut rng, 0.3) {
            c.db_stalls = 1;
        }
        if maybe(&mut rng, 0.3) {
            c.db_terminates = 1;
        }
    }
    // Fleet grain, drawn last so scenarios without groups draw as before.
    if !s.fleet.replica_groups.is_empty() {
        let beat = s.lifecycle.heartbeat_ms;
        for g in &mut s.fleet.replica_groups {
            let g = g.get_mut();
            g.capacity = rng.random_range(1..=8);
            g.heartbeat_ms = None;
            g.heartbeat_jitter_ms = g.heartbeat_jitter_ms.min(beat / 2);
        }
        let c = &mut s.chaos;
        if maybe(&mut rng, 0.5) {
            c.zone_silences = 1;
        }
        if maybe(&mut rng, 0.5) {
            c.group_crashes = 1;
        }
        if maybe(&mut rng, 0.3) {
            c.group_drains = 1;
        }
    }
    // A failover, drawn after everything else so the other draws stay
    // as they were: on a synchronous standby only (an asynchronous one
    // may lose answered routes, which its own scenarios expect), never a
    // second one (`DB_FAILOVERS_MAX`), and never beside a restart (a
    // restart runs on a server of the run's own, not on a pair).
    if database
        && s.registry.database_replication == DatabaseReplication::Synchronous
        && !s.fails_over_database()
        && !s.restarts_database()
        && maybe(&mut rng, SWARM_FAILOVER_P)
    {
        s.chaos.db_failovers = 1;
    }
    s.scenario.liveness_ms = s.scenario.liveness_ms.max(SWARM_LIVENESS_MS_MIN);
    s.expect = Expect::default();
    s
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn scenario(file: &str) -> Scenario {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../scenarios")
            .join(file);
        Scenario::load(&path).expect("a shipped scenario")
    }

    #[test]
    fn a_swarm_on_postgres_draws_a_failover_on_a_synchronous_standby_only() {
        // spec: SIM-4
        let steady = scenario("0001_steady_state.toml");
        let drawn = |base: &Scenario, database: bool| {
            (1..=200u64)
                .filter(|&seed| draw(base, seed, database).chaos.db_failovers > 0)
                .count()
        };
        let on_postgres = drawn(&steady, true);
        assert!(
            (20..=80).contains(&on_postgres),
            "{on_postgres} of 200 seeds draw a failover"
        );
        assert_eq!(drawn(&steady, false), 0, "memory never fails over");
        // The draw is recorded, and one seed always draws the same.
        let seed = (1..=200u64)
            .find(|&seed| draw(&steady, seed, true).chaos.db_failovers > 0)
            .unwrap();
        let (again, draws) = draw_recorded(&steady, seed, true);
        assert_eq!(again.chaos.db_failovers, 1);
        assert_eq!(draws["chaos.db_failovers"], 1);
        assert!(again.fails_over_database());
        // A scenario that already fails over draws no second one.
        assert_eq!(
            drawn(&scenario("0026_db_failover_mid_resolve.toml"), true),
            0
        );
        let mut asynchronous = steady;
        asynchronous.registry.database_replication = DatabaseReplication::Asynchronous;
        assert_eq!(
            drawn(&asynchronous, true),
            0,
            "no failover of an asynchronous standby"
        );
    }

    #[test]
    fn every_draw_of_every_shipped_scenario_is_a_valid_scenario() {
        // spec: SIM-4
        // What a seed draws on top of a scenario must be a scenario the
        // loader accepts: a failover drawn beside a scheduled restart was
        // not (validation refuses the pair), and its runs failed.
        for path in crate::scenario::shipped_files() {
            let base = Scenario::load(&path).expect("a shipped scenario");
            for database in [false, true] {
                for seed in 1..=40u64 {
                    if let Err(message) = draw(&base, seed, database).validate_made() {
                        panic!(
                            "{} seed {seed} (database {database}): {message}",
                            path.display()
                        );
                    }
                }
            }
        }
    }
}
