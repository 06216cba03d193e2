//! Writing calls answered `unavailable`: a lost connection may have come
//! before or after their COMMIT, so a later answer decides.

use connreg::{MemoryRegistry, Timestamp};
use serde_json::Value;

use super::{
    Answer, Oracle, UNKNOWN_CALLS_MAX, UNKNOWN_HORIZON_ANSWERS, UNKNOWN_SUBSETS_CALLS_MAX,
    comparable, retried_after_lost_commit,
};

/// The choice that takes every pending call as committed. A choice of one
/// call is keyed by that call's ID, one of several but not all by
/// [`SOME_OF_THEM`] with the bits of their places among the pending calls.
const ALL_OF_THEM: u64 = u64::MAX;

/// The choice that takes none of a step's pending calls as committed
/// where they were answered.
const NONE_OF_THEM: u64 = u64::MAX - 1;

/// The mark of a key of a choice of several pending calls, not all (call
/// IDs stay below it).
const SOME_OF_THEM: u64 = 1 << 62;

/// The choices among `n` pending calls (keyed as [`ALL_OF_THEM`] says),
/// the fewest calls first: every combination when `n` is at most
/// [`UNKNOWN_SUBSETS_CALLS_MAX`], else each alone and then all.
fn choices(ids: &[u64]) -> Vec<(u64, Vec<usize>)> {
    let n = ids.len();
    let mut choices: Vec<(u64, Vec<usize>)> = (0..n).map(|i| (ids[i], vec![i])).collect();
    if n <= UNKNOWN_SUBSETS_CALLS_MAX {
        for size in 2..n {
            for mask in 1u64..(1 << n) {
                if mask.count_ones() as usize == size {
                    let chosen = (0..n).filter(|i| mask & (1 << i) != 0).collect();
                    choices.push((SOME_OF_THEM | mask, chosen));
                }
            }
        }
    }
    if n > 1 {
        choices.push((ALL_OF_THEM, (0..n).collect()));
    }
    choices
}
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
    /// `a` on a copy of `before` (the reference before `a`): the
    /// [`choices`], the fewest calls first. The fewest first: a caller retries its own
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
        let ids: Vec<u64> = self.unknown_calls.iter().map(|c| c.0).collect();
        let mut choices = choices(&ids);
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
            let recorded = comparable(&a.recorded);
            let mut again = comparable(&again);
            // A retry that found its lost first commit (ROUTE-3, PIN-3):
            // the reference's decision, made now, is kept.
            let retried = a.retried && retried_after_lost_commit(&recorded, &again);
            if retried {
                again["result"]["Ok"]["kind"] = Value::from("existing");
            }
            if let Ok(next) = self.renaming.agree(&recorded, &again) {
                self.renaming = next;
                self.report.unknown_committed += 1;
                self.report.retried += u64::from(retried);
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

    /// At the end of a step: which of its writing calls answered
    /// `unavailable` (`ids`, the first answered on `line`), pending still,
    /// are taken as committed here, where they were answered. None at
    /// first: a later answer that needs one takes it just before itself.
    /// When a later answer disagrees however the pending calls are taken
    /// there, the choice is revised (`backtrack`): the step is replayed
    /// with the next of [`choices`], so a call that committed before
    /// commits that came after it (a publication, routes that moved the
    /// counts) is found where it committed.
    pub(super) fn commit_where_answered(&mut self, line: u64, ids: &[u64]) {
        let ids: Vec<u64> = (ids.iter().copied())
            .filter(|id| self.unknown_calls.iter().any(|c| c.0 == *id))
            .collect();
        if ids.is_empty() {
            return;
        }
        let mut options = vec![(NONE_OF_THEM, Vec::new())];
        options.extend(choices(&ids));
        if let Some(excluded) = self.excluded.get(&line) {
            options.retain(|(key, _)| !excluded.contains(key));
        }
        let Some((key, chosen)) = options.first().cloned() else {
            return;
        };
        if options.len() > 1 {
            self.open_decision(line, key);
        }
        for i in chosen {
            let Some(at) = self.unknown_calls.iter().position(|c| c.0 == ids[i]) else {
                continue;
            };
            let (_, clock, request) = self.unknown_calls.remove(at);
            if let Some(ms) = clock {
                self.clock.set(Timestamp(ms));
            }
            poll_inline(respond_plainly(self.registry.clone(), request));
            self.report.unknown_committed += 1;
            self.report.unknown_where_answered += 1;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_combination_of_a_few_pending_calls_is_a_choice_the_fewest_first() {
        let three = choices(&[7, 8, 9]);
        let sets: Vec<&[usize]> = three.iter().map(|(_, c)| c.as_slice()).collect();
        let expected: [&[usize]; 7] = [&[0], &[1], &[2], &[0, 1], &[0, 2], &[1, 2], &[0, 1, 2]];
        assert_eq!(sets, expected);
        let keys: Vec<u64> = three.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys[..3], [7, 8, 9]);
        assert_eq!(keys[6], ALL_OF_THEM);
        let mut distinct = keys.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), keys.len());
        let ids: Vec<u64> = (0..UNKNOWN_SUBSETS_CALLS_MAX as u64).collect();
        assert_eq!(choices(&ids).len(), (1 << ids.len()) - 1);
        assert!(
            choices(&ids)
                .windows(2)
                .all(|w| w[0].1.len() <= w[1].1.len())
        );
        // Past the bound: each alone, then all.
        let many: Vec<u64> = (0..=UNKNOWN_SUBSETS_CALLS_MAX as u64).collect();
        assert_eq!(choices(&many).len(), many.len() + 1);
        assert_eq!(choices(&[4]), vec![(4, vec![0])]);
        assert!(choices(&[]).is_empty());
    }
}
