//! What a scenario needs to be able to make progress at all, checked with
//! the rest of its validation: a run that cannot complete a single call by
//! construction is bad input, not a run that passes having done nothing.
//!
//! The simulation moves in steps of `scenario.tick_ms`: a message sent in
//! one step is delivered in a later one, so a call is answered two steps
//! after it is sent at the earliest (the request arrives at the next step,
//! the answer at the one after), and never sooner than twice the shortest
//! link latency.

use crate::scenario::Scenario;

/// Steps between a call and its answer, at the earliest.
const ROUND_TRIP_STEPS_MIN: u64 = 2;

/// The shortest time in which any call can be answered, in milliseconds.
fn round_trip_ms_min(s: &Scenario) -> u64 {
    let m = &s.scenario;
    (ROUND_TRIP_STEPS_MIN * m.tick_ms).max(2 * m.latency_ms[0])
}

/// Refuses timings under which no call, no dispatch or no lease can ever
/// succeed, naming the keys. Errors carry the key the line points at.
pub(crate) fn check(s: &Scenario) -> Result<(), (&'static str, String)> {
    let m = &s.scenario;
    let w = &s.workload;
    let l = &s.lifecycle;
    let round_trip = round_trip_ms_min(s);
    if w.rpc_timeout_ms <= round_trip {
        return Err((
            "workload.rpc_timeout_ms",
            format!(
                "workload.rpc_timeout_ms ({}) must be above the shortest round trip, {round_trip} ms \
                 (2 x scenario.tick_ms = {}, 2 x scenario.latency_ms[0] = {}): no registry call \
                 could ever be answered in time",
                w.rpc_timeout_ms,
                ROUND_TRIP_STEPS_MIN * m.tick_ms,
                2 * m.latency_ms[0]
            ),
        ));
    }
    let dispatch = round_trip + w.exec_ms[0];
    if w.dispatch_timeout_ms <= dispatch {
        return Err((
            "workload.dispatch_timeout_ms",
            format!(
                "workload.dispatch_timeout_ms ({}) must be above the shortest dispatch, {dispatch} ms \
                 (workload.exec_ms[0] = {} plus the shortest round trip of scenario.tick_ms and \
                 scenario.latency_ms, {round_trip}): no dispatch could ever be answered in time",
                w.dispatch_timeout_ms, w.exec_ms[0]
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
