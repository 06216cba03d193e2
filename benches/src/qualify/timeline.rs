//! Figures over time: every client also counts into a [`Probe`] of its
//! own, which the runner empties once per interval into a
//! [`TimelinePoint`] (throughput and latency percentiles per operation,
//! errors by kind). The points feed the progress display, the report and
//! the plots.
//!
//! A probe's lock is taken by its client once per operation and by the
//! runner once per interval, so it is almost never contended.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::limits::{TIMELINE_INTERVAL_MS_MAX, TIMELINE_INTERVAL_MS_MIN, TIMELINE_POINTS_MAX};
use super::stats::{Latency, Operation};

/// One operation's counts during one interval.
#[derive(Debug, Clone, Default)]
struct OpInterval {
    count: u64,
    errors: u64,
    latency: Latency,
}

/// What one client counted since the runner last looked.
#[derive(Debug, Default)]
pub struct Interval {
    ops: [OpInterval; 5],
    errors: BTreeMap<&'static str, u64>,
}

impl Interval {
    /// Counts one call.
    pub fn record(&mut self, op: Operation, elapsed: Duration, error: Option<&'static str>) {
        let o = &mut self.ops[op as usize];
        o.count += 1;
        o.latency.record(elapsed);
        if let Some(kind) = error {
            o.errors += 1;
            *self.errors.entry(kind).or_default() += 1;
        }
    }

    fn merge(&mut self, other: &Interval) {
        for (mine, theirs) in self.ops.iter_mut().zip(&other.ops) {
            mine.count += theirs.count;
            mine.errors += theirs.errors;
            mine.latency.merge(&theirs.latency);
        }
        for (kind, n) in &other.errors {
            *self.errors.entry(kind).or_default() += n;
        }
    }
}

/// A client's interval, shared with the runner.
pub type Probe = Arc<Mutex<Interval>>;

/// One operation's figures in one interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PointFigures {
    /// Calls that ended in the interval.
    pub count: u64,
    /// Calls per second.
    pub per_s: f64,
    /// Median latency, in milliseconds (0 without calls).
    pub p50_ms: f64,
    /// 99th percentile latency, in milliseconds (0 without calls).
    pub p99_ms: f64,
    /// Calls that answered an error.
    pub errors: u64,
}

/// The figures of one interval of the measured run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelinePoint {
    /// End of the interval, in milliseconds since the measured run began.
    pub t_ms: f64,
    /// Its length, in milliseconds.
    pub span_ms: f64,
    /// Calls of every kind.
    pub operations: u64,
    /// Calls of every kind per second.
    pub operations_per_s: f64,
    /// 99th percentile latency of every resolve, in milliseconds.
    pub resolve_p99_ms: f64,
    /// Per operation, by name.
    pub by_operation: BTreeMap<String, PointFigures>,
    /// Errors by kind (`connreg::Error::kind`).
    pub errors: BTreeMap<String, u64>,
}

/// The points of one trial.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    /// The interval, in milliseconds.
    pub interval_ms: u64,
    /// The points, oldest first.
    pub points: Vec<TimelinePoint>,
    /// True when points past [`TIMELINE_POINTS_MAX`] were dropped.
    pub truncated: bool,
}

/// The interval for a run of `duration_ms` (about 60 points), or for a
/// run by operation count (`None`): the shortest.
pub fn interval_ms(duration_ms: Option<u64>) -> u64 {
    duration_ms.map_or(TIMELINE_INTERVAL_MS_MIN, |ms| {
        (ms / 60).clamp(TIMELINE_INTERVAL_MS_MIN, TIMELINE_INTERVAL_MS_MAX)
    })
}

impl Timeline {
    /// An empty timeline sampled every `interval_ms`.
    pub fn new(interval_ms: u64) -> Timeline {
        Timeline {
            interval_ms,
            points: Vec::new(),
            truncated: false,
        }
    }

    /// Empties every probe into one point ending `t_ms` after the measured
    /// run began, `span_ms` long; returns it (also when the timeline is
    /// full and it is not kept).
    pub fn sample(&mut self, probes: &[Probe], t_ms: f64, span_ms: f64) -> TimelinePoint {
        let mut all = Interval::default();
        for probe in probes {
            let taken = {
                let mut guard = probe.lock().unwrap_or_else(|p| p.into_inner());
                std::mem::take(&mut *guard)
            };
            all.merge(&taken);
        }
        let secs = (span_ms / 1000.0).max(1e-9);
        let mut resolves = all.ops[Operation::ResolveNew as usize].latency.clone();
        resolves.merge(&all.ops[Operation::ResolveDuplicate as usize].latency);
        let point = TimelinePoint {
            t_ms,
            span_ms,
            operations: all.ops.iter().map(|o| o.count).sum(),
            operations_per_s: all.ops.iter().map(|o| o.count).sum::<u64>() as f64 / secs,
            resolve_p99_ms: resolves.summary().p99_ms,
            by_operation: Operation::ALL
                .iter()
                .map(|op| {
                    let o = &all.ops[*op as usize];
                    let s = o.latency.summary();
                    (
                        op.as_str().to_string(),
                        PointFigures {
                            count: o.count,
                            per_s: o.count as f64 / secs,
                            p50_ms: s.p50_ms,
                            p99_ms: s.p99_ms,
                            errors: o.errors,
                        },
                    )
                })
                .collect(),
            errors: all
                .errors
                .iter()
                .map(|(k, n)| ((*k).to_string(), *n))
                .collect(),
        };
        if self.points.len() < TIMELINE_POINTS_MAX {
            self.points.push(point.clone());
        } else {
            self.truncated = true;
        }
        point
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_empties_the_probes_and_counts_per_second() {
        let probe: Probe = Arc::default();
        {
            let mut i = probe.lock().unwrap();
            i.record(Operation::ResolveNew, Duration::from_millis(2), None);
            i.record(
                Operation::ResolveNew,
                Duration::from_millis(4),
                Some("no_capacity"),
            );
            i.record(Operation::Settle, Duration::from_millis(1), None);
        }
        let mut t = Timeline::new(500);
        let p = t.sample(std::slice::from_ref(&probe), 500.0, 500.0);
        assert_eq!(p.operations, 3);
        assert!((p.operations_per_s - 6.0).abs() < 1e-9);
        assert_eq!(p.by_operation["resolve_new"].errors, 1);
        assert_eq!(p.errors["no_capacity"], 1);
        let again = t.sample(&[probe], 1000.0, 500.0);
        assert_eq!(again.operations, 0, "the probe was emptied");
        assert_eq!(t.points.len(), 2);
    }

    #[test]
    fn about_sixty_points_per_run() {
        assert_eq!(interval_ms(Some(60_000)), 1_000);
        assert_eq!(interval_ms(Some(1_000)), TIMELINE_INTERVAL_MS_MIN);
        assert_eq!(interval_ms(None), TIMELINE_INTERVAL_MS_MIN);
        assert_eq!(interval_ms(Some(3_600_000)), TIMELINE_INTERVAL_MS_MAX);
    }
}
