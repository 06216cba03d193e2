//! The reservation hold a scenario's registry runs with (PIN-8), and the
//! longest a careful dispatcher can keep a reservation, which the hold
//! must not undercut.
//!
//! A dispatcher holds a reservation from the commit of the resolve that
//! took it until its settlement is answered. Every step in between is
//! bounded by the workload's timeouts and retry counts, so the longest
//! hold is their sum, at worst:
//!
//! - the rest of the resolve: every retry it may still make (`unavailable`
//!   and transport failures up to `RETRIES_MAX`, `no_capacity` and
//!   `replica_unavailable` up to their own counts), each a call timeout and
//!   a backoff at its cap (8 x `backoff_ms`), plus one call timeout for the
//!   copies of a burst it waits for;
//! - the dispatch: `dispatch_retries + 1` attempts, each a dispatch timeout
//!   plus, on a cancelled one, half the longest execution, a route read and
//!   a cancel; between attempts a backoff and a whole resolve again;
//! - the settlement, twice (a repeated settlement), each with every retry;
//!   and a stale settlement's one call.
//!
//! A scenario that names no `registry.reservation_hold_ms` runs with this
//! bound; one that names a shorter hold is refused, since the registry
//! would then release reservations a careful caller still holds.

use crate::limits::RETRIES_MAX;
use crate::scenario::Scenario;

/// The longest a careful dispatcher holds one reservation, in simulated
/// milliseconds (the sum above).
pub fn careful_hold_ms(s: &Scenario) -> u64 {
    let w = &s.workload;
    let backoff_cap = w.backoff_ms.saturating_mul(8);
    let call = w.rpc_timeout_ms.saturating_add(backoff_cap);
    let resolve_calls = u64::from(RETRIES_MAX + w.capacity_retries + w.unavailable_retries + 1);
    let resolve = resolve_calls.saturating_mul(call);
    let attempt = w
        .dispatch_timeout_ms
        .saturating_add(w.exec_ms[1] / 2)
        .saturating_add(2 * w.rpc_timeout_ms);
    let dispatch = u64::from(w.dispatch_retries + 1)
        .saturating_mul(attempt)
        .saturating_add(
            u64::from(w.dispatch_retries).saturating_mul(backoff_cap.saturating_add(resolve)),
        );
    let settle = u64::from(RETRIES_MAX + 1).saturating_mul(call);
    resolve
        .saturating_add(w.rpc_timeout_ms)
        .saturating_add(dispatch)
        .saturating_add(settle.saturating_mul(2))
        .saturating_add(w.rpc_timeout_ms)
}

/// The hold the scenario's registry runs with: the one it names, else the
/// careful bound, kept within the registry's own limits.
pub fn hold_ms(s: &Scenario) -> u64 {
    s.registry
        .reservation_hold_ms
        .unwrap_or_else(|| careful_hold_ms(s))
        .clamp(
            connreg::limits::RESERVATION_HOLD_MS_MIN,
            connreg::limits::RESERVATION_HOLD_MS_MAX,
        )
}
