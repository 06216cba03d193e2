//! One trial: a warm-up, then the measured run of every client, sampled
//! into a timeline once per interval and shown as progress.

use std::sync::Arc;
use std::time::{Duration, Instant};

use connreg::contracts::DataPlane;

use super::check::Tracked;
use super::contract::Contract;
use super::fleet::FleetPlan;
use super::progress::{Progress, ProgressMode};
use super::stats::Tally;
use super::timeline::{self, Probe, Timeline};
use super::workload::{self, Shared, StopReason, TrialParams};

/// What one trial measured.
#[derive(Debug)]
pub struct TrialOutcome {
    /// Every client's measured counts, merged (violations include the
    /// warm-up's and the drain's).
    pub tally: Tally,
    /// Every new action, warm-up included.
    pub tracked: Vec<Tracked>,
    /// From the end of the warm-up to the last client's last answer.
    pub elapsed: Duration,
    /// Why it ended.
    pub stopped_by: StopReason,
    /// Operations during the warm-up.
    pub warmup_operations: u64,
    /// Figures over time.
    pub timeline: Timeline,
    /// Where the next trial's heartbeats start.
    pub next_heartbeat_seq: u64,
}

/// How to show a trial.
#[derive(Debug, Clone, Copy)]
pub struct Display {
    /// Bar, lines or nothing.
    pub mode: ProgressMode,
    /// This trial, from 1.
    pub trial: u32,
    /// Of how many.
    pub trials: u32,
    /// With many processes: this worker, from 0.
    pub worker: Option<u32>,
}

/// Runs one trial of `contract` on `registry`; `params.probes` may be
/// empty (one is made per client).
pub async fn run<R>(
    registry: R,
    plan: Arc<FleetPlan>,
    contract: &Contract,
    mut params: TrialParams,
    display: Display,
) -> Result<TrialOutcome, String>
where
    R: DataPlane + Clone + 'static,
{
    let clients = contract.load.clients;
    if params.probes.is_empty() {
        params.probes = (0..clients).map(|_| Probe::default()).collect();
    }
    let probes = params.probes.clone();
    let shared = Arc::new(Shared::new(registry, plan, contract, params));
    let measure_from = shared.measure_from();
    let mut set = tokio::task::JoinSet::new();
    for index in 0..clients {
        set.spawn(workload::client(shared.clone(), index));
    }
    let interval = Duration::from_millis(timeline::interval_ms(contract.load.duration_ms));
    let mut timeline = Timeline::new(interval.as_millis() as u64);
    let mut progress = Progress::start(
        display.mode,
        contract.load.length(),
        display.trial,
        display.trials,
        display.worker,
    );
    let mut ticks = tokio::time::interval_at((measure_from + interval).into(), interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_sample = measure_from;
    let mut tally = Tally::default();
    let mut tracked = Vec::new();
    let mut warmup_operations = 0;
    let mut ended = measure_from;
    loop {
        tokio::select! {
            joined = set.join_next() => match joined {
                None => break,
                Some(Ok(result)) => {
                    tally.merge(&result.tally);
                    tracked.extend(result.tracked);
                    warmup_operations += result.warmup_operations;
                    ended = ended.max(result.ended.unwrap_or(measure_from));
                }
                Some(Err(e)) => return Err(format!("a client failed: {e}")),
            },
            _ = ticks.tick() => {
                let now = Instant::now();
                let point = timeline.sample(
                    &probes,
                    ms(now.saturating_duration_since(measure_from)),
                    ms(now.saturating_duration_since(last_sample)),
                );
                last_sample = now;
                progress.update(&point, now.saturating_duration_since(measure_from));
            }
        }
    }
    let end = Instant::now();
    // The measured run ends with the last counted answer, not the drain.
    let elapsed = ended.saturating_duration_since(measure_from);
    if end > last_sample {
        let point = timeline.sample(&probes, ms(elapsed), ms(end - last_sample));
        progress.update(&point, elapsed);
    }
    progress.finish();
    Ok(TrialOutcome {
        tally,
        tracked,
        elapsed,
        stopped_by: shared.stop_reason(),
        warmup_operations,
        timeline,
        next_heartbeat_seq: shared.next_heartbeat_seq(),
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
