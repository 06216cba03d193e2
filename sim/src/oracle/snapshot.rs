//! Answers placed by the snapshot they read, and the comparison every
//! answer tried at a place shares.

use serde_json::Value;

use super::{Answer, Oracle, Renaming, comparable, retried_after_lost_commit};
use crate::backend::{poll_inline, respond_plainly};
use crate::wire::Response;

/// One lock-free read of a step, waiting for its place.
pub(super) struct SnapshotRead {
    answer: Answer,
    /// How many of the step's commits (in replay order) precede it: those
    /// with a sequence at most its `read_at`.
    place: usize,
    /// The earliest place it may agree at: the place of the first of the
    /// step's commits below its snapshot's highest that the snapshot did
    /// not show (`read_unseen`), else its own place.
    lowest: usize,
    /// The reference's answer at the last earlier place that agreed.
    earlier: Option<Response>,
    /// Compared already (a retried call taken before its place).
    done: bool,
}

/// How an answer compares with the reference's at one place.
pub(super) enum Compared {
    /// They agree under `next` (the renaming with what this answer named);
    /// `keep` when the agreement is a retried call finding its lost first
    /// commit, whose effect the reference must keep.
    Agrees { next: Renaming, keep: bool },
    /// They differ: the reference's answer, and why.
    Differs {
        replayed: Box<Response>,
        detail: String,
    },
}

impl Oracle {
    /// `a` at the registry's current place, on a copy when it may write,
    /// compared with its recorded answer. A resolve the backend retried
    /// after a lost connection that answers `existing` where the reference
    /// creates the route or reserves it again found its first attempt's
    /// commit (ROUTE-3, PIN-3).
    pub(super) fn compare_here(&self, a: &Answer) -> Result<Compared, String> {
        let replayed = self.try_here(a)?;
        Ok(self.compare(a, replayed))
    }

    fn compare(&self, a: &Answer, replayed: Response) -> Compared {
        let recorded = comparable(&a.recorded);
        let mut value = comparable(&replayed);
        let keep = a.retried && retried_after_lost_commit(&recorded, &value);
        if keep {
            value["result"]["Ok"]["kind"] = Value::from("existing");
        }
        match self.renaming.agree(&recorded, &value) {
            Ok(next) => Compared::Agrees { next, keep },
            Err(detail) => Compared::Differs {
                replayed: Box::new(replayed),
                detail,
            },
        }
    }

    /// Takes in an answer that agreed at the current place: its renaming,
    /// and, for a retried call's lost first commit, its effect.
    pub(super) fn accept(&mut self, a: &Answer, next: Renaming, keep: bool) {
        self.renaming = next;
        if keep {
            self.set_clock(a);
            let request = self.renaming.request(&a.request);
            let held = match self.held_for_retried(a, &request) {
                Ok(held) => held,
                Err(e) => {
                    self.error = Some(e);
                    return;
                }
            };
            poll_inline(respond_plainly(
                self.registry.clone().holding(held),
                request,
            ));
            self.report.retried += 1;
        }
    }

    /// The step's lock-free reads with their places among `committed`
    /// (the step's answers with a commit position, in replay order).
    /// `unrecorded` is true when some commit may have gone unrecorded so
    /// far (an `unavailable` or a retried answer). A snapshot past every
    /// commit made so far is a divergence (`None`).
    pub(super) fn snapshot_reads(
        &mut self,
        positioned: Vec<Answer>,
        committed: &[Answer],
        unrecorded: bool,
    ) -> Option<Vec<SnapshotRead>> {
        let highest = committed.iter().filter_map(|c| c.commit).max();
        self.highest_commit = self.highest_commit.max(highest.unwrap_or(0));
        self.unrecorded_commits |= unrecorded;
        let mut reads = Vec::with_capacity(positioned.len());
        for answer in positioned {
            let read_at = answer.read_at.unwrap_or(0);
            if read_at > self.highest_commit && !self.unrecorded_commits {
                let detail = format!(
                    "its snapshot shows commit {read_at}, not made yet: the highest so far is {}",
                    self.highest_commit
                );
                self.diverge(&answer, &answer.recorded.clone(), detail);
                return None;
            }
            let place = (committed.iter())
                .position(|c| c.commit.is_some_and(|s| s > read_at))
                .unwrap_or(committed.len());
            let lowest = (committed.iter())
                .position(|c| c.commit.is_some_and(|s| answer.read_unseen.contains(&s)))
                .map_or(place, |p| p.min(place));
            reads.push(SnapshotRead {
                answer,
                place,
                lowest,
                earlier: None,
                done: false,
            });
        }
        // A retried call's first attempt committed what the others may
        // have read (its sequence, lost with the reply, is below their
        // `read_at`): at one place, the reference takes it first.
        reads.sort_by_key(|r| !r.answer.retried);
        Some(reads)
    }

    /// Compares each read whose places include `place` at the registry's
    /// current place: at its own place it must agree, or have agreed at an
    /// earlier one its snapshot allows (one where a commit it did not show
    /// was still to come). False once the oracle diverged or failed.
    pub(super) fn read_snapshots_at(&mut self, place: usize, reads: &mut [SnapshotRead]) -> bool {
        for i in 0..reads.len() {
            let read = &reads[i];
            if read.done || !(read.lowest..=read.place).contains(&place) {
                continue;
            }
            if read.place == place
                && !read.answer.retried
                && !matches!(self.compare_here(&read.answer), Ok(Compared::Agrees { .. }))
                && !self.retried_reads_first(place, reads)
            {
                return false;
            }
            let read = &mut reads[i];
            let replayed = match self.try_here(&read.answer) {
                Ok(r) => r,
                Err(e) => {
                    self.error = Some(e);
                    return false;
                }
            };
            let compared = self.compare(&read.answer, replayed.clone());
            let own = read.place == place;
            match compared {
                Compared::Agrees { next, keep } if own => {
                    self.accept(&read.answer, next, keep);
                    self.report.positioned += 1;
                }
                Compared::Agrees { .. } => read.earlier = Some(replayed),
                Compared::Differs { .. } if own && read.earlier.is_some() => {
                    // A commit below the snapshot's highest had not
                    // committed when it was taken.
                    let earlier = read.earlier.take();
                    match earlier.map(|e| self.compare(&read.answer, e)) {
                        Some(Compared::Agrees { next, .. }) => {
                            self.renaming = next;
                            self.report.read_earlier += 1;
                        }
                        _ => {
                            let detail = "its answer agreed at an earlier place only".into();
                            self.diverge(&read.answer, &replayed, detail);
                            return false;
                        }
                    }
                }
                Compared::Differs { .. } if own && self.agrees_with_unknowns(&read.answer) => {
                    self.report.positioned += 1;
                }
                Compared::Differs { replayed, detail } if own => {
                    let read_at = read.answer.read_at.unwrap_or(0);
                    let detail =
                        format!("placed by its snapshot (after commit {read_at}): {detail}");
                    self.diverge(&read.answer, &replayed, detail);
                    return false;
                }
                Compared::Differs { .. } => {}
            }
        }
        true
    }

    /// Before the step's commit `c` at `place`, when it disagrees there:
    /// the step's retried reads still to come, taken now. A duplicate call
    /// that answered under the action's lock may have found the route a
    /// retried call's first attempt made, with its reply lost; replayed
    /// first, the reference would make that route for the duplicate. False
    /// once the oracle failed.
    pub(super) fn retried_reads_before(
        &mut self,
        c: &Answer,
        place: usize,
        reads: &mut [SnapshotRead],
    ) -> bool {
        let waiting = |r: &SnapshotRead| !r.done && r.answer.retried && r.place > place;
        if !reads.iter().any(waiting) {
            return true;
        }
        match self.compare_here(c) {
            Ok(Compared::Agrees { .. }) => true,
            Ok(Compared::Differs { .. }) => self.retried_reads_first(place, reads),
            Err(e) => {
                self.error = Some(e);
                false
            }
        }
    }

    /// Before a read at `place` that disagrees: the step's retried calls
    /// still to come, taken now. Each one's first attempt committed at a
    /// sequence that went unrecorded with its reply, below its own
    /// `read_at` but possibly below this read's too; one that disagrees
    /// here stays for its own place. False once the oracle failed.
    fn retried_reads_first(&mut self, place: usize, reads: &mut [SnapshotRead]) -> bool {
        for read in reads.iter_mut() {
            if read.done || !read.answer.retried || read.place <= place {
                continue;
            }
            match self.compare_here(&read.answer) {
                Ok(Compared::Agrees { next, keep }) => {
                    read.done = true;
                    self.accept(&read.answer, next, keep);
                    self.report.positioned += 1;
                }
                // Not here: it stays for its own place.
                Ok(Compared::Differs { .. }) => {}
                Err(e) => {
                    self.error = Some(e);
                    return false;
                }
            }
        }
        true
    }
}
