//! What a scenario needs to be able to make progress at all, checked with
//! the rest of its validation: a run that cannot complete a single call by
//! construction is bad input, not a run that passes having done nothing.
//!
//! The simulation moves in steps of `scenario.tick_ms`, and a message is
//! delivered at the first step at or after its link latency, so every trip
//! over a link takes whole ticks. How long a call takes at the least was
//! measured, not reasoned out: the standard scenario, with timeouts far
//! above any answer, was run at every tick of 1, 2, 5, 10 and 50 ms with
//! the shortest latency at 0, 1, 4, 7, 10, 25, 60 and 100 ms (the longest
//! 3 ms above it), taking the shortest time from each `rpc` to its
//! `delivered` line in the trace. Every registry call took at least three
//! trips of the shortest latency, each rounded up to whole ticks, and with
//! no latency at all still two ticks:
//!
//! | tick | shortest latency | shortest round trip | 3 x ceil(latency / tick) x tick |
//! |---:|---:|---:|---:|
//! | 1 | 1, 4, 7, 25 | 3, 12, 21, 75 | the same |
//! | 2 | 0, 1, 25 | 4, 6, 78 | 0 (two ticks: 4), 6, 78 |
//! | 10 | 1, 7, 25 | 30, 30, 90 | the same |
//! | 50 | 0, 1, 25, 60 | 100, 150, 150, 300 | 0 (two ticks: 100), 150, 150, 300 |
//!
//! At a 50 ms tick and a 1 ms latency a call is answered 150 ms after it is
//! sent, never sooner: in the standard scenario at that tick (lengthened
//! to 3 s, fault-free) a timeout of 150 ms loses no call, one of 149 ms
//! loses 90 and one of 101 ms 1,285. A dispatch adds the replica's
//! execution, but only in whole ticks: an execution that ends within the
//! step it started in costs nothing (at a 10 ms tick, one of 5 ms adds 0
//! and one of 30 ms adds 30; at 50 ms, one of 120 ms adds 100).

use crate::scenario::Scenario;

/// One-way trips over a link in one call, at the least (measured: above).
const ROUND_TRIP_HOPS: u64 = 3;

/// Steps between a call and its answer, at the least, however short the
/// links (measured at a latency of 0: above).
const ROUND_TRIP_STEPS_MIN: u64 = 2;

/// The shortest time in which any call can be answered, in milliseconds:
/// three trips of the shortest latency, each rounded up to whole ticks,
/// and at least two ticks.
fn round_trip_ms_min(s: &Scenario) -> u64 {
    let m = &s.scenario;
    let tick = m.tick_ms.max(1);
    let hop_ticks = m.latency_ms[0].div_ceil(tick);
    (ROUND_TRIP_HOPS * hop_ticks).max(ROUND_TRIP_STEPS_MIN) * tick
}

/// The shortest time in which a dispatch can be answered: a round trip
/// plus the shortest execution's whole ticks.
fn dispatch_ms_min(s: &Scenario) -> u64 {
    let tick = s.scenario.tick_ms.max(1);
    round_trip_ms_min(s) + s.workload.exec_ms[0] / tick * tick
}

/// Refuses timings under which no call, no dispatch or no lease can ever
/// succeed, naming the keys and the bound. Errors carry the key the line
/// points at.
pub(crate) fn check(s: &Scenario) -> Result<(), (&'static str, String)> {
    let m = &s.scenario;
    let w = &s.workload;
    let l = &s.lifecycle;
    if let Some(hold) = s.registry.reservation_hold_ms {
        let careful = crate::hold::careful_hold_ms(s);
        let max = connreg::limits::RESERVATION_HOLD_MS_MAX;
        if hold < careful || hold > max {
            return Err((
                "registry.reservation_hold_ms",
                format!(
                    "registry.reservation_hold_ms ({hold}) must be between {careful} and {max} ms: \
                     a careful dispatcher of this workload may hold a reservation for {careful} ms \
                     (its timeouts, retries and backoffs summed), and a shorter hold would release \
                     reservations it still holds"
                ),
            ));
        }
    }
    let round_trip = round_trip_ms_min(s);
    if w.rpc_timeout_ms < round_trip {
        return Err((
            "workload.rpc_timeout_ms",
            format!(
                "workload.rpc_timeout_ms ({}) must be at least the shortest round trip, {round_trip} ms \
                 (3 trips of scenario.latency_ms[0] = {} rounded up to whole ticks of \
                 scenario.tick_ms = {}, and at least 2 ticks): a call is never answered sooner",
                w.rpc_timeout_ms, m.latency_ms[0], m.tick_ms,
            ),
        ));
    }
    let dispatch = dispatch_ms_min(s);
    if w.dispatch_timeout_ms < dispatch {
        return Err((
            "workload.dispatch_timeout_ms",
            format!(
                "workload.dispatch_timeout_ms ({}) must be at least the shortest dispatch, {dispatch} ms \
                 (the shortest round trip of scenario.tick_ms and scenario.latency_ms, {round_trip}, \
                 plus workload.exec_ms[0] = {} in whole ticks of {}): a dispatch is never answered sooner",
                w.dispatch_timeout_ms, w.exec_ms[0], m.tick_ms,
            ),
        ));
    }
    if l.lease_ttl_ms <= l.heartbeat_ms {
        return Err((
            "lifecycle.lease_ttl_ms",
            format!(
                "lifecycle.lease_ttl_ms ({}) must be above lifecycle.heartbeat_ms ({}): every \
                 lease would lapse before the heartbeat that renews it",
                l.lease_ttl_ms, l.heartbeat_ms
            ),
        ));
    }
    Ok(())
}
