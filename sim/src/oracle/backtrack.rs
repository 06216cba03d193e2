//! Revising a choice among pending `unavailable` calls.
//!
//! When an answer agrees only once some pending calls are taken as
//! committed, the oracle takes the first choice that agrees (each call
//! alone, then all of them). Two choices may both agree with that answer
//! and differ later: two lost settlements that each free the scope a new
//! route takes, of which only one committed, as its caller's retry shows.
//! So a choice taken while others remain untried is remembered with the
//! oracle as it was before the record that led to it, and the records
//! since. When a later answer disagrees, the oracle goes back to that
//! point, excludes the choice for that answer and takes in the records
//! again: the next choice is tried. The latest such choice is revised
//! first, then the one before it (each one's copy holds the one before).
//! What this costs is bounded: at most [`DECISIONS_OPEN_MAX`] choices are
//! open at once, each standing once [`UNKNOWN_HORIZON_ANSWERS`] replies
//! (to any call, a replica's too) came after it or it kept
//! [`DECISION_RECORDS_MAX`] records, and at most [`REVISIONS_MAX`]
//! revisions are made in one trace. Of the divergences found, the one
//! furthest in the trace is reported.

use super::{Oracle, UNKNOWN_HORIZON_ANSWERS};
use crate::trace::{Event, Record};

/// Most choices among pending calls open at once (each holds a copy of
/// the reference).
pub const DECISIONS_OPEN_MAX: usize = 4;

/// Most records kept for replaying one open choice; past it the choice
/// stands.
pub const DECISION_RECORDS_MAX: usize = 20_000;

/// Most choices revised in one trace.
pub const REVISIONS_MAX: u64 = 16;

/// The oracle before a record was taken in, with that record (none for
/// the trace's end).
pub(super) struct Checkpoint {
    restore: Box<Oracle>,
    record: Option<(u64, Record)>,
}

/// A choice among pending calls that another could replace.
pub(super) struct Decision {
    /// The oracle before the record whose step made the choice.
    restore: Box<Oracle>,
    /// The trace line of the answer the choice was made for.
    line: u64,
    /// The choice (`committed_unknown_calls`'s key).
    key: u64,
    /// The records since the restore point, that one included.
    records: Vec<(u64, Record)>,
    /// Replies among them (to any call).
    answers: u32,
}

impl Decision {
    fn copy(&self) -> Result<Decision, String> {
        Ok(Decision {
            restore: Box::new(self.restore.copy()?),
            line: self.line,
            key: self.key,
            records: self.records.clone(),
            answers: self.answers,
        })
    }
}

impl Oracle {
    /// A copy of the oracle, its reference forked, its open choices
    /// copied.
    fn copy(&self) -> Result<Oracle, String> {
        Ok(Oracle {
            registry: (self.registry.fork()).map_err(|e| format!("copying the reference: {e}"))?,
            clock: self.clock.clone(),
            trace_ordered: self.trace_ordered,
            calls: self.calls.clone(),
            step: self.step.clone(),
            step_t: self.step_t,
            renaming: self.renaming.clone(),
            report: self.report.clone(),
            records: self.records,
            step_touches: self.step_touches.clone(),
            unknown_calls: self.unknown_calls.clone(),
            unknown_since: self.unknown_since,
            routes: self.routes.clone(),
            replicas: self.replicas.clone(),
            stale_ranked: self.stale_ranked.clone(),
            stale_reads: self.stale_reads,
            highest_commit: self.highest_commit,
            unrecorded_commits: self.unrecorded_commits,
            error: self.error.clone(),
            excluded: self.excluded.clone(),
            checkpoint: None,
            decision: match &self.decision {
                Some(d) => Some(d.copy()?),
                None => None,
            },
        })
    }

    fn decisions_open(&self) -> usize {
        self.decision
            .as_ref()
            .map_or(0, |d| 1 + d.restore.decisions_open())
    }

    /// Before taking in `record` (`None`: the trace's end), keeps a copy
    /// of the oracle when the record ends a step in which a choice among
    /// several pending calls may be made.
    pub(super) fn take_checkpoint(&mut self, record: Option<(u64, &Record)>) {
        let ends_step = match record {
            None => true,
            Some((_, r)) => match &r.event {
                Event::Reply { .. } => self.step_t != Some(r.t),
                Event::Setup { .. } | Event::Snapshot(_) | Event::Check { .. } | Event::End(_) => {
                    true
                }
                _ => false,
            },
        };
        // A step that answers a writing call `unavailable` chooses where
        // it committed (`commit_where_answered`).
        let lost = (self.step.iter()).any(|a| Self::unknown(a) && a.request.mutates());
        if self.trace_ordered
            || !ends_step
            || self.step.is_empty()
            || (self.unknown_calls.len() < 2 && !lost)
            || self.report.revised >= REVISIONS_MAX
            || self.decisions_open() >= DECISIONS_OPEN_MAX
        {
            return;
        }
        match self.copy() {
            Ok(restore) => {
                self.checkpoint = Some(Checkpoint {
                    restore: Box::new(restore),
                    record: record.map(|(line, r)| (line, r.clone())),
                })
            }
            Err(e) => self.error = Some(e),
        }
    }

    /// Keeps `record` for replaying the open choice, if any. Past
    /// [`UNKNOWN_HORIZON_ANSWERS`] replies or [`DECISION_RECORDS_MAX`]
    /// records the choices stand.
    pub(super) fn remember(&mut self, line: u64, record: &Record) {
        if let Some(d) = &mut self.decision {
            d.answers += u32::from(matches!(record.event, Event::Reply { .. }));
            if d.records.len() >= DECISION_RECORDS_MAX || d.answers > UNKNOWN_HORIZON_ANSWERS {
                self.decision = None;
            } else {
                d.records.push((line, record.clone()));
            }
        }
    }

    /// The choice `key` was taken for the answer on `line` while others
    /// remained: it becomes the open one, revisable from the checkpoint.
    pub(super) fn open_decision(&mut self, line: u64, key: u64) {
        if let Some(Checkpoint { restore, record }) = self.checkpoint.take() {
            self.decision = Some(Decision {
                restore,
                line,
                key,
                records: record.into_iter().collect(),
                answers: 0,
            });
        }
    }

    /// After a divergence: the open choice revised, the records since
    /// taken in again. The revised oracle replaces this one unless it
    /// diverged earlier in the trace. True when it replaced it.
    pub(super) fn revise(&mut self) -> bool {
        let Some(d) = self.decision.take() else {
            return false;
        };
        let mut next = *d.restore;
        next.report.revised = self.report.revised + 1;
        next.excluded.entry(d.line).or_default().insert(d.key);
        for (line, record) in &d.records {
            next.observe(*line, record);
            if next.diverged() || next.error.is_some() {
                break;
            }
        }
        let reached = |o: &Oracle| o.report.divergence.as_ref().map_or(u64::MAX, |d| d.line);
        if next.error.is_none() && reached(&next) >= reached(self) {
            *self = next;
            true
        } else {
            false
        }
    }
}
