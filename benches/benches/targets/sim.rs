//! The simulator's speed: standard-scenario seeds per minute on two
//! threads (`connreg-sim`).

use std::hint::black_box;
use std::time::{Duration, Instant};

/// Standard-scenario seeds per minute on two threads, for `secs`.
pub(crate) fn sim_seeds_per_minute(secs: u64) -> Result<f64, String> {
    let scenario = connreg_sim::Scenario::standard();
    let deadline = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();
    let workers: Vec<_> = (0..2u64)
        .map(|w| {
            let scenario = scenario.clone();
            std::thread::spawn(move || -> Result<u64, String> {
                let mut seeds = 0;
                let mut seed = w + 1;
                while Instant::now() < deadline {
                    let options = connreg_sim::RunOptions {
                        seed,
                        ..connreg_sim::RunOptions::default()
                    };
                    let report =
                        connreg_sim::run(&scenario, &options).map_err(|e| e.to_string())?;
                    black_box(report.trace_hash);
                    seeds += 1;
                    seed += 2;
                }
                Ok(seeds)
            })
        })
        .collect();
    let mut seeds = 0;
    for worker in workers {
        seeds += worker
            .join()
            .map_err(|_| "a simulator thread panicked".to_string())??;
    }
    Ok(seeds as f64 * 60.0 / started.elapsed().as_secs_f64())
}
