//! Writing calls answered `unavailable`: a lost connection may have come
//! before or after their COMMIT, so a later answer decides.

use connreg::{MemoryRegistry, Timestamp};

use super::{Answer, Oracle, UNKNOWN_CALLS_MAX, UNKNOWN_HORIZON_ANSWERS, comparable};

/// The choice that takes every pending call as committed (the others are
/// keyed by their call's ID).
const ALL_OF_THEM: u64 = u64::MAX;
use crate::backend::{poll_inline, respond_plainly};
use crate::wire::Request;

impl Oracle {
    /// Counts an `unavailable` answer and keeps a writing call pending.
    pub(super) fn note_unknown(&mut self, a: &Answer) {
        self.report.unknown += 1;
        if a.request.mutates() && self.unknown_calls.len() < UNKNOWN_CALLS_MAX {
            let request = self.renaming.request(&a.request);
            self.unknown_calls.push((a.id, a.clock, request));
            self.unknown_since = 0;
        }
    }

    /// One more answer agreed with the pending calls taken as not
    /// committed; past the horizon they are dropped.
    pub(super) fn unknown_agreed(&mut self) {
        if self.unknown_calls.is_empty() {
            return;
        }
        self.unknown_since += 1;
        if self.unknown_since >= UNKNOWN_HORIZON_ANSWERS {
            self.unknown_calls.clear();
        }
    }

    /// The reference holding `a` (an answer it disagreed with) and the
    /// pending calls that make it agree, taken as committed just before
    /// `a` on a copy of `before` (the reference before `a`): each alone
    /// first, else all of them. The fewest first: a caller retries its own
    /// call, and the retry's answer tells of that call only; a call not
    /// taken stays pending for a later answer to decide. A choice taken
    /// while others remain untried may be revised (`backtrack`); one
    /// revised away for this answer is not taken again. `None` when no
    /// such choice agrees.
    pub(super) fn committed_unknown_calls(
        &mut self,
        a: &Answer,
        request: &Request,
        before: &MemoryRegistry,
    ) -> Option<MemoryRegistry> {
        let n = self.unknown_calls.len();
        let mut choices: Vec<(u64, Vec<usize>)> =
            (0..n).map(|i| (self.unknown_calls[i].0, vec![i])).collect();
        if n > 1 {
            choices.push((ALL_OF_THEM, (0..n).collect()));
        }
        if let Some(excluded) = self.excluded.get(&a.line) {
            choices.retain(|(key, _)| !excluded.contains(key));
        }
        let choices_n = choices.len();
        for (at, (key, chosen)) in choices.into_iter().enumerate() {
            let Ok(registry) = before.fork() else {
                return None;
            };
            for &i in &chosen {
                let (_, clock, unknown) = &self.unknown_calls[i];
                if let Some(ms) = clock {
                    self.clock.set(Timestamp(*ms));
                }
                poll_inline(respond_plainly(registry.clone(), unknown.clone()));
            }
            self.set_clock(a);
            let again = poll_inline(respond_plainly(registry.clone(), request.clone()));
            if let Ok(next) = (self.renaming).agree(&comparable(&a.recorded), &comparable(&again)) {
                self.renaming = next;
                self.report.unknown_committed += 1;
                if at + 1 < choices_n {
                    self.open_decision(a.line, key);
                }
                let mut i = 0;
                self.unknown_calls.retain(|_| {
                    i += 1;
                    !chosen.contains(&(i - 1))
                });
                return Some(registry);
            }
        }
        None
    }

    /// `a` disagreed with the reference at its place (a read placed by its
    /// snapshot, or an answer searched within its step): true when it
    /// agrees once pending calls are taken as committed just before it,
    /// the reference then holding them.
    pub(super) fn agrees_with_unknowns(&mut self, a: &Answer) -> bool {
        if self.unknown_calls.is_empty() {
            return false;
        }
        let Ok(before) = self.registry.fork() else {
            return false;
        };
        let request = self.renaming.request(&a.request);
        match self.committed_unknown_calls(a, &request, &before) {
            Some(registry) => {
                self.registry = registry;
                true
            }
            None => false,
        }
    }
}
