//! The end-of-run checks: `no_orphan_reservation`, `no_leaked_reservation`,
//! `liveness` and `expectation`; and what the orphan check learns from the
//! answers along the way.

use connreg::{ActionId, FenceToken, ResolveKind};

use super::{Checker, invariant, leak};
use crate::wire::{Request, Response};

impl Checker {
    pub(super) fn finish_checks(&mut self) {
        self.run_deferred(true);
        self.check_publications_overdue(self.now_ms);
        let carried = |f: FenceToken| self.issued_by_answer.contains(&f);
        let orphans = self
            .fates
            .orphans(&self.store_routes, self.open_actions.values(), carried);
        for detail in orphans {
            self.violate(invariant::ORPHAN, detail);
        }
        if self.deadline_ms.is_some() {
            let carried = |f: FenceToken| self.issued_by_answer.contains(&f);
            let leaks = leak::leaked(
                &self.store_routes,
                |action, r| self.fates.owed(action, r, carried),
                self.open_actions.values(),
                &self.abandoned,
                &self.reconciled,
            );
            for detail in leaks {
                self.violate(invariant::LEAK, detail);
            }
        }
        let open: Vec<((String, u64), ActionId)> =
            std::mem::take(&mut self.open_actions).into_iter().collect();
        for ((dispatcher, _), action) in open {
            let deadline = self
                .deadline_ms
                .map(|d| format!("{d} ms"))
                .unwrap_or_else(|| "the end of the run".into());
            self.violate(
                invariant::LIVENESS,
                format!("{dispatcher} action {action} had not ended by {deadline}"),
            );
        }
    }

    /// The scenario's `[expect]` counts, judged at the very end of the run
    /// (a drain included).
    pub(super) fn check_expectations(&mut self) {
        let counters = self.counters.pairs();
        let value = |name: &str| counters.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
        for (name, min) in self.expect.at_least.pairs() {
            let v = value(name).unwrap_or(0);
            if v < min {
                self.violate(
                    invariant::EXPECTATION,
                    format!("expected at least {min} {name}, saw {v}"),
                );
            }
        }
        for (name, max) in self.expect.at_most.pairs() {
            let v = value(name).unwrap_or(0);
            if v > max {
                self.violate(
                    invariant::EXPECTATION,
                    format!("expected at most {max} {name}, saw {v}"),
                );
            }
        }
    }

    /// What `no_orphan_reservation` learns from an answer to call `call`.
    pub(super) fn follow_fates(&mut self, call: u64, req: &Request, resp: &Response) {
        match (req, resp) {
            (Request::Resolve { request }, Response::Resolve { result: Ok(r) }) => {
                if self.failed.contains(&call) {
                    // Its caller had stopped waiting before the registry
                    // answered: nobody can know of what this call
                    // reserved, which the registry's hold ends (PIN-8,
                    // `reservations_end`). A later answer that carries the
                    // fence makes its receiver owe it.
                    return;
                }
                // An `existing` answer is the first to carry a reservation
                // whose creating answer was lost with its COMMIT reply.
                let fence = r.assignment.reservation.fence;
                if self.issued_by_answer.insert(fence) || r.kind != ResolveKind::Existing {
                    self.fates.reserved(&request.action, call, fence);
                }
            }
            (Request::Resolve { request }, Response::Resolve { result: Err(e) })
                if e.kind == "unavailable" =>
            {
                self.fates.unknown(&request.action, call);
                self.fates.resolve_failed(&request.action);
            }
            (Request::Settle { params }, Response::Settle { result: Ok(s) }) if s.released => {
                self.fates
                    .released(&params.assignment.identity.action, self.last_call);
            }
            _ => {}
        }
    }
}
