//! Goal: every scenario file is well formed, named after the one behaviour
//! it proves, and passes a short seed sweep on the in-memory backend with
//! every invariant and expectation holding; a scenario with database
//! faults is refused there as bad input (it runs on PostgreSQL).

use std::path::PathBuf;

use connreg_sim::{RunOptions, Scenario, run};

/// Seeds each scenario runs here; CI sweeps more through the CLI.
const SEEDS: std::ops::RangeInclusive<u64> = 1..=3;

fn scenario_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
}

#[test]
fn there_are_seventeen_scenarios_named_nnnn_slug() {
    let files = scenario_files();
    assert!(files.len() >= 17, "{} scenario files", files.len());
    for (i, path) in files.iter().enumerate() {
        let stem = path.file_stem().unwrap().to_str().unwrap();
        let (number, slug) = stem.split_once('_').expect("NNNN_slug.toml");
        assert_eq!(number, format!("{:04}", i + 1), "{}", path.display());
        let s = Scenario::load(path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            s.scenario.name,
            slug,
            "{}: name differs from the slug",
            path.display()
        );
        assert!(!s.scenario.summary.is_empty());
    }
}

#[test]
fn the_standard_scenario_is_the_first_file() {
    let built_in = Scenario::standard();
    let first = Scenario::load(&scenario_files()[0]).unwrap();
    assert_eq!(built_in.scenario.name, first.scenario.name);
}

/// The scenarios the in-memory backend runs: those without database faults.
fn memory_scenarios() -> Vec<(PathBuf, Scenario)> {
    scenario_files()
        .into_iter()
        .map(|p| {
            let s = Scenario::load(&p).unwrap_or_else(|e| panic!("{e}"));
            (p, s)
        })
        .filter(|(_, s)| !s.has_database_faults())
        .collect()
}

#[test]
fn database_faults_are_refused_on_the_memory_backend() {
    // spec: SIM-4 (the in-memory backend has no database to fault)
    let mut refused = 0;
    for path in scenario_files() {
        let s = Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
        if !s.has_database_faults() {
            continue;
        }
        let err = run(&s, &RunOptions::default()).expect_err("refused");
        assert!(
            matches!(err, connreg_sim::RunError::Input(_)),
            "{}: {err}",
            path.display()
        );
        assert!(err.to_string().contains("--backend postgres"), "{err}");
        refused += 1;
    }
    assert!(refused >= 4, "{refused} scenarios with database faults");
}

#[test]
fn every_scenario_passes_a_short_sweep() {
    // spec: SIM-2, SIM-3
    for (path, s) in memory_scenarios() {
        // A fleet-sized world runs one seed here (CI sweeps more in release).
        let seeds = if s.fleet.replica_groups.is_empty() {
            SEEDS
        } else {
            1..=1
        };
        for seed in seeds {
            let opts = RunOptions {
                seed,
                ..RunOptions::default()
            };
            let report = run(&s, &opts).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(
                report.ok(),
                "{} seed {seed}: {:#?}",
                path.display(),
                report.violations
            );
        }
    }
}

#[test]
fn every_scenario_holds_its_invariants_in_swarm_mode() {
    // spec: SIM-2, SIM-3 (faults and fleet shape drawn from the seed)
    for (path, s) in memory_scenarios() {
        let opts = RunOptions {
            seed: 5,
            swarm: true,
            ..RunOptions::default()
        };
        let report = run(&s, &opts).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            report.ok(),
            "{} swarm: {:#?}",
            path.display(),
            report.violations
        );
    }
}
