//! Goal: the same scenario files, hosts, faults and checkers run against
//! the PostgreSQL backend on a real server, database faults included, and
//! every invariant (the commit-order-sensitive ones too) and expectation
//! holds (SIM-4). One seed of each scenario; without a server
//! these tests fail with connreg-pgtest's message, they never skip.

use std::path::PathBuf;

use connreg_sim::{BackendKind, RunOptions, Scenario, run};

mod common;

fn run_on_postgres(file: &str) {
    // spec: SIM-4
    let report = common::run_on_postgres(file);
    assert!(report.counters.actions_started > 0);
}

macro_rules! on_postgres {
    ($($name:ident => $file:literal,)*) => {
        $(
            #[test]
            fn $name() {
                run_on_postgres($file);
            }
        )*

        #[test]
        fn every_scenario_file_runs_on_postgres() {
            // db_restart restarts the server shared by this test process,
            // so its scenario runs in a test binary of its own.
            // A fleet-sized scenario (replica groups) takes minutes on
            // PostgreSQL even in a release build: CI runs it there in
            // release (`.ci/run`, `fleet_on_postgres`), not here.
            let listed = [$($file,)* "0018_db_server_restart.toml"];
            let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
            let ci = std::fs::read_to_string(root.join(".ci/run")).unwrap();
            let fleet_on_postgres = ci.contains("fleet_on_postgres+=(\"$scenario\")")
                && ci.lines().any(|l| {
                    l.contains("--backend postgres")
                        && l.contains("sweep --scenario \"$scenario\" --seeds 1..2")
                });
            for entry in std::fs::read_dir(root.join("scenarios")).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_str().unwrap().to_string();
                if !name.ends_with(".toml") || listed.contains(&name.as_str()) {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                assert!(
                    text.contains("[[fleet.replica_groups]]") && fleet_on_postgres,
                    "{name} has no PostgreSQL test"
                );
            }
        }
    };
}

on_postgres! {
    steady_state_on_postgres => "0001_steady_state.toml",
    duplicate_resolve_storm_on_postgres => "0002_duplicate_resolve_storm.toml",
    retry_after_lost_answer_on_postgres => "0003_retry_after_lost_answer.toml",
    replica_crash_mid_action_on_postgres => "0004_replica_crash_mid_action.toml",
    draining_pinned_retries_on_postgres => "0005_draining_pinned_retries.toml",
    circuit_opens_after_unknowns_on_postgres => "0006_circuit_opens_after_unknowns.toml",
    publications_during_paged_reads_on_postgres => "0007_publications_during_paged_reads.toml",
    binding_disabled_mid_run_on_postgres => "0008_binding_disabled_mid_run.toml",
    capacity_exhaustion_and_scopes_on_postgres => "0009_capacity_exhaustion_and_scopes.toml",
    one_action_two_tenants_on_postgres => "0010_one_action_two_tenants.toml",
    partition_with_lease_churn_on_postgres => "0011_partition_with_lease_churn.toml",
    region_zone_preference_on_postgres => "0012_region_zone_preference.toml",
    registry_host_crash_restart_on_postgres => "0013_registry_host_crash_restart.toml",
    db_cut_mid_transaction_on_postgres => "0014_db_cut_mid_transaction.toml",
    db_commit_reply_lost_on_postgres => "0015_db_commit_reply_lost.toml",
    db_stall_on_postgres => "0016_db_stall.toml",
    db_session_terminate_on_postgres => "0017_db_session_terminate.toml",
    db_chaos_on_postgres => "0019_db_chaos.toml",
    // spec: LOCK-1, LOCK-2
    full_binding_lock_order_on_postgres => "0020_full_binding_lock_order.toml",
    // spec: PIN-5, PIN-6, PIN-7
    dispatcher_crash_reconciliation_on_postgres => "0021_dispatcher_crash_reconciliation.toml",
    // spec: SIM-4, ROUTE-3, ROUTE-8 (a synchronous standby promoted mid-run)
    db_failover_mid_resolve_on_postgres => "0026_db_failover_mid_resolve.toml",
    // spec: SIM-4, SETTLE-2, SETTLE-4
    db_failover_mid_settle_on_postgres => "0027_db_failover_mid_settle.toml",
    // spec: SIM-4, LEASE-2
    db_failover_during_maintenance_on_postgres => "0028_db_failover_during_maintenance.toml",
    // spec: ROUTE-8, PIN-7
    late_created_after_refusal_on_postgres => "0029_late_created_after_refusal.toml",
    // spec: ROUTE-3, PIN-5, PIN-6
    dispatcher_crash_mid_burst_on_postgres => "0030_dispatcher_crash_mid_burst.toml",
    // spec: PIN-2, ROUTE-4, SETTLE-4
    two_tenants_retry_lost_answers_on_postgres => "0033_two_tenants_retry_lost_answers.toml",
    // spec: PIN-8, PIN-7
    resolve_after_caller_gave_up_on_postgres => "0034_resolve_after_caller_gave_up.toml",
    // spec: EVID-4, EVID-9
    shared_action_cancelled_on_postgres => "0035_shared_action_cancelled.toml",
    // spec: SETTLE-5
    circuit_counts_reset_on_postgres => "0036_circuit_counts_reset.toml",
    // spec: SIM-4 (database faults after a failover act on the promoted server)
    db_faults_after_failover_on_postgres => "0037_db_faults_after_failover.toml",
}

#[test]
fn an_asynchronous_failover_loses_answered_commits_and_the_checkers_see_it() {
    // spec: SIM-3, SIM-4
    // 0026 on an asynchronous standby cut off 100 ms before the failover:
    // the promoted standby lacks what the old primary committed since, and
    // the answers said. The checkers must see the store go back: the
    // reason a fleet runs a synchronous standby or accepts the risk.
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios/0026_db_failover_mid_resolve.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let text = text
        .replacen(
            "[registry]\nhosts = 2\n",
            "[registry]\nhosts = 2\ndatabase_replication = \"asynchronous\"\n",
            1,
        )
        .replacen(
            "kind = \"db_failover\"\n",
            "kind = \"db_failover\"\ndetach_ms = 200\n",
            1,
        );
    let scenario = Scenario::parse("async_failover.toml", &text).unwrap();
    let opts = RunOptions {
        seed: 1,
        backend: BackendKind::Postgres,
        ..RunOptions::default()
    };
    let report = run(&scenario, &opts).unwrap();
    let seen: std::collections::BTreeSet<&str> = report
        .violations
        .iter()
        .map(|v| v.invariant.as_str())
        .collect();
    assert!(
        seen.contains("capacity_accounting") && seen.contains("revision_by_publication"),
        "the lost commits went unseen: {seen:?}"
    );
    assert!(
        report
            .violations
            .iter()
            .any(|v| v.detail.contains("again, after an answer released it")),
        "{:#?}",
        report.violations
    );
}

#[test]
fn a_failover_is_refused_where_it_cannot_happen() {
    // spec: SIM-4
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios/0026_db_failover_mid_resolve.toml");
    let text = std::fs::read_to_string(path).unwrap();
    // Detaching a synchronous standby would hold every commit.
    let sync_detach = text.replacen(
        "kind = \"db_failover\"\n",
        "kind = \"db_failover\"\ndetach_ms = 200\n",
        1,
    );
    let e = Scenario::parse("sync_detach.toml", &sync_detach)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("detach_ms needs [registry] database_replication"),
        "{e}"
    );
    // A second failover has no standby to promote.
    let twice = format!("{text}\n[chaos]\ndb_failovers = 1\n");
    let e = Scenario::parse("twice.toml", &twice)
        .unwrap_err()
        .to_string();
    assert!(e.contains("fails over at most 1"), "{e}");
    // A restart restarts the shared test server, not the run's pair.
    let restart = format!("{text}\n[chaos]\ndb_restarts = 1\n");
    let e = Scenario::parse("restart.toml", &restart)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("db_restart and db_failover in one scenario"),
        "{e}"
    );
    // The in-memory backend has no database to fail over.
    let scenario = Scenario::parse("memory.toml", &text).unwrap();
    let e = run(&scenario, &RunOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("need --backend postgres"), "{e}");
}

#[test]
fn host_plants_run_on_postgres_and_are_caught() {
    // spec: SIM-3, SIM-4 (a plant in the hosts is backend-independent)
    let opts = RunOptions {
        seed: 1,
        backend: BackendKind::Postgres,
        plant: Some(connreg_sim::PlantedBug::SpuriousUnavailable),
        ..RunOptions::default()
    };
    let report = run(&Scenario::standard(), &opts).unwrap();
    assert!(
        report
            .violations
            .iter()
            .any(|v| v.invariant == "no_spurious_unavailable"),
        "{:#?}",
        report.violations
    );
}

#[test]
fn plants_are_refused_on_postgres() {
    let opts = RunOptions {
        seed: 1,
        backend: BackendKind::Postgres,
        plant: Some(connreg::plant::Plant::DoubleRelease.into()),
        ..RunOptions::default()
    };
    assert!(run(&Scenario::standard(), &opts).is_err());
}
