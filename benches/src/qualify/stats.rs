//! What clients count while they run: operations, outcomes, errors by kind
//! and latency histograms. Each client keeps its own [`Tally`]; the runner
//! merges them when the clients are done, so nothing is shared while the
//! clock runs.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::check::Violations;
use super::limits::{LATENCY_SIGNIFICANT_DIGITS, LATENCY_US_MAX};

/// One kind of operation of the workload mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// A resolve of a new action.
    ResolveNew,
    /// A resolve of an action the client holds.
    ResolveDuplicate,
    /// A settlement of a held reservation.
    Settle,
    /// A replica heartbeat.
    Heartbeat,
    /// A tenant's first catalog page.
    CatalogPage,
}

impl Operation {
    /// Every operation, in report order.
    pub const ALL: [Operation; 5] = [
        Operation::ResolveNew,
        Operation::ResolveDuplicate,
        Operation::Settle,
        Operation::Heartbeat,
        Operation::CatalogPage,
    ];

    /// The operation's name in contracts and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::ResolveNew => "resolve_new",
            Operation::ResolveDuplicate => "resolve_duplicate",
            Operation::Settle => "settle",
            Operation::Heartbeat => "heartbeat",
            Operation::CatalogPage => "catalog_page",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    /// Whether an error of `kind` is a normal answer to this operation
    /// under load: only `no_capacity` to a new resolve, when the fleet or
    /// an admission scope is full. Everything else is unexpected.
    pub fn expects(self, kind: &str) -> bool {
        self == Operation::ResolveNew && kind == "no_capacity"
    }
}

/// The quantiles of a latency distribution the report keeps per
/// operation (and plots): the median to the slowest call.
pub const DISTRIBUTION_QUANTILES: [f64; 9] =
    [0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9999, 1.0];

/// A latency histogram in microseconds.
#[derive(Debug, Clone)]
pub struct Latency(Histogram<u64>);

impl Default for Latency {
    fn default() -> Self {
        Latency(
            Histogram::new_with_bounds(1, LATENCY_US_MAX, LATENCY_SIGNIFICANT_DIGITS)
                .expect("the latency bounds are valid"),
        )
    }
}

impl Latency {
    /// Records one call; beyond [`LATENCY_US_MAX`] it counts as that.
    pub fn record(&mut self, elapsed: Duration) {
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.0.saturating_record(us.clamp(1, LATENCY_US_MAX));
    }

    /// Adds another histogram's counts.
    pub fn merge(&mut self, other: &Latency) {
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.0.add(&other.0);
    }

    /// The recorded values and their counts, for another process to
    /// rebuild the same histogram ([`Latency::from_wire`]).
    pub fn to_wire(&self) -> Vec<(u64, u64)> {
        self.0
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect()
    }

    /// The histogram [`Latency::to_wire`] described.
    pub fn from_wire(values: &[(u64, u64)]) -> Latency {
        let mut l = Latency::default();
        for (value, count) in values {
            let _ = l.0.record_n((*value).clamp(1, LATENCY_US_MAX), *count);
        }
        l
    }

    /// Calls recorded.
    pub fn count(&self) -> u64 {
        self.0.len()
    }

    /// The latency at each of [`DISTRIBUTION_QUANTILES`], in
    /// milliseconds, as `[quantile, ms]` pairs (none without calls).
    pub fn distribution(&self) -> Vec<[f64; 2]> {
        if self.0.is_empty() {
            return Vec::new();
        }
        DISTRIBUTION_QUANTILES
            .iter()
            .map(|&q| [q, self.0.value_at_quantile(q) as f64 / 1000.0])
            .collect()
    }

    /// Count, median, 99th percentile and maximum, in milliseconds.
    pub fn summary(&self) -> LatencySummary {
        if self.0.is_empty() {
            return LatencySummary::default();
        }
        let ms = |us: u64| us as f64 / 1000.0;
        LatencySummary {
            count: self.0.len(),
            p50_ms: ms(self.0.value_at_quantile(0.50)),
            p99_ms: ms(self.0.value_at_quantile(0.99)),
            max_ms: ms(self.0.max()),
        }
    }
}

/// A latency histogram's summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Calls.
    pub count: u64,
    /// Median, in milliseconds.
    pub p50_ms: f64,
    /// 99th percentile, in milliseconds.
    pub p99_ms: f64,
    /// Slowest, in milliseconds.
    pub max_ms: f64,
}

/// One operation's counts.
#[derive(Debug, Clone, Default)]
pub struct OpTally {
    /// Calls.
    pub count: u64,
    /// Calls that succeeded.
    pub ok: u64,
    /// Latency of every call, successful or not.
    pub latency: Latency,
}

/// Everything one client counted.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Per operation, indexed as [`Operation::ALL`].
    pub ops: [OpTally; 5],
    /// Resolves that created a route.
    pub resolves_created: u64,
    /// Resolves that returned a held route as it was.
    pub resolves_existing: u64,
    /// Resolves that re-reserved a released route (PIN-3).
    pub resolves_reserved: u64,
    /// Settlements that released a reservation.
    pub settlements_released: u64,
    /// Heartbeats ignored as not newer than the stored one.
    pub heartbeats_ignored: u64,
    /// Picks replaced by another operation: a new resolve with the client's
    /// reservations at their maximum became a settlement; a duplicate or a
    /// settlement with none held became a new resolve.
    pub substitutions: u64,
    /// Errors by operation and kind (`connreg::Error::kind`).
    pub errors: BTreeMap<(Operation, &'static str), u64>,
    /// Calls that answered `unavailable` (also in `errors`).
    pub unavailable: u64,
    /// Invariant violations seen while running.
    pub violations: Violations,
}

impl Tally {
    /// One operation's counts.
    pub fn op(&self, op: Operation) -> &OpTally {
        &self.ops[op.index()]
    }

    /// Records one call of `op` that took `elapsed`; `error` is its error
    /// kind when it failed.
    pub fn record(&mut self, op: Operation, elapsed: Duration, error: Option<&'static str>) {
        let t = &mut self.ops[op.index()];
        t.count += 1;
        t.latency.record(elapsed);
        match error {
            None => t.ok += 1,
            Some(kind) => {
                *self.errors.entry((op, kind)).or_default() += 1;
                if kind == "unavailable" {
                    self.unavailable += 1;
                }
            }
        }
    }

    /// Adds another client's counts.
    pub fn merge(&mut self, other: &Tally) {
        for (mine, theirs) in self.ops.iter_mut().zip(&other.ops) {
            mine.count += theirs.count;
            mine.ok += theirs.ok;
            mine.latency.merge(&theirs.latency);
        }
        self.resolves_created += other.resolves_created;
        self.resolves_existing += other.resolves_existing;
        self.resolves_reserved += other.resolves_reserved;
        self.settlements_released += other.settlements_released;
        self.heartbeats_ignored += other.heartbeats_ignored;
        self.substitutions += other.substitutions;
        self.unavailable += other.unavailable;
        for (key, n) in &other.errors {
            *self.errors.entry(*key).or_default() += n;
        }
        self.violations.merge(&other.violations);
    }

    /// Operations of every kind.
    pub fn operations(&self) -> u64 {
        self.ops.iter().map(|o| o.count).sum()
    }

    /// Errors no operation expects.
    pub fn unexpected_errors(&self) -> u64 {
        self.errors
            .iter()
            .filter(|((op, kind), _)| !op.expects(kind))
            .map(|(_, n)| n)
            .sum()
    }

    /// Latency of every resolve call, new and duplicate.
    pub fn resolve_latency(&self) -> Latency {
        let mut all = self.op(Operation::ResolveNew).latency.clone();
        all.merge(&self.op(Operation::ResolveDuplicate).latency);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_no_capacity_on_a_new_resolve_is_expected() {
        // spec: SIM-6
        assert!(Operation::ResolveNew.expects("no_capacity"));
        assert!(!Operation::ResolveDuplicate.expects("no_capacity"));
        assert!(!Operation::ResolveNew.expects("conflict"));
        let mut t = Tally::default();
        t.record(
            Operation::ResolveNew,
            Duration::from_micros(5),
            Some("no_capacity"),
        );
        t.record(
            Operation::Settle,
            Duration::from_micros(5),
            Some("fence_lost"),
        );
        t.record(Operation::Heartbeat, Duration::from_micros(5), None);
        assert_eq!((t.operations(), t.unexpected_errors()), (3, 1));
    }

    #[test]
    fn latency_summary_reads_in_milliseconds() {
        let mut l = Latency::default();
        for us in [1_000, 2_000, 3_000] {
            l.record(Duration::from_micros(us));
        }
        let s = l.summary();
        assert_eq!(s.count, 3);
        assert!((1.9..=2.1).contains(&s.p50_ms), "{s:?}");
        assert!((2.9..=3.1).contains(&s.max_ms), "{s:?}");
    }
}
