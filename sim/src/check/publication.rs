//! `publication_progress` (LOCK-4, CAT-3): a publication lands. While the
//! registry is reachable and the database healthy, the operator's
//! publication commits within `expect.publish_within_ms`
//! ([`PUBLISH_WITHIN_MS`] when unset), measured from its first attempt to
//! the first answer that commits it (an answer counts even when a fault
//! drops it on the way back: the revision exists).
//!
//! The time an excuse is in force is not counted, and nothing else is:
//!
//! - a database fault window, from its start to [`DB_FAULT_SETTLE_MS`]
//!   after its end (as for `no_spurious_unavailable`);
//! - a partition, hold or latency spike between the publishing operator
//!   and a registry host, and a random message loss window;
//! - a registry host crashed and not restarted (the operator's call to it
//!   times out before it tries another).
//!
//! Retries send the same publication again: an attempt equal to one not
//! yet committed is that publication's retry, and an attempt equal to the
//! operator's last committed one is a retry after a lost answer. An error
//! answer ends the operator's attempts at that publication. A refusal
//! (invalid, conflict, a limit) is the answer the publication deserved and
//! is dropped; an `unavailable` answer that no fault excuses means the
//! publication never lands (on PostgreSQL, a publication that waited out
//! its lock attempts behind routing) and is a violation here too.
//! A publication not committed by the end of the run is a violation once
//! its unexcused wait passed the bound (online, so a run that ends later
//! reports it at once); one still in flight within its bound is not.
//!
//! Incremental: the excused time is one running total, and the operator's
//! publications in flight are a short list.

use std::collections::BTreeMap;

use connreg::Publication;

use super::{Checker, invariant};
use crate::limits::{DB_FAULT_SETTLE_MS, PUBLISH_WITHIN_MS};
use crate::scenario::ADMIN_HOST;
use crate::trace::FaultEvent;

/// Most publications in flight kept per operator: the operator sends one
/// at a time, so more can only come from attempts a registry host holds
/// long after the operator gave up on them. Past this, the oldest is
/// reported and dropped (a bounded list).
pub(super) const PUBLICATIONS_IN_FLIGHT_MAX: usize = 64;

/// The time excused from the publication bound, as a running total.
#[derive(Debug, Default)]
pub(super) struct Excuses {
    /// Database fault windows started and not ended.
    db_active: u32,
    /// The end of the settle time after the last database window.
    db_settle_until: Option<u64>,
    /// Registry hosts crashed and not restarted.
    crashed: BTreeMap<String, u32>,
    /// Network faults between the operator and a registry host, by kind
    /// and sides, counted.
    network: BTreeMap<(String, Vec<String>, Vec<String>), u32>,
    /// A random message loss window is open.
    loss: bool,
    /// The time the total was last brought up to.
    last_ms: u64,
    /// Excused milliseconds up to `last_ms`.
    total_ms: u64,
}

/// True when a host side (`name` or `prefix*`) can name `host`.
fn names(side: &[String], host: &str) -> bool {
    side.iter().any(|s| match s.strip_suffix('*') {
        Some(prefix) => host.starts_with(prefix),
        None => s == host,
    })
}

fn names_registry(side: &[String]) -> bool {
    side.iter().any(|s| match s.strip_suffix('*') {
        Some(prefix) => "registry-".starts_with(prefix) || prefix.starts_with("registry-"),
        None => s.starts_with("registry-"),
    })
}

/// True when a fault between sides `a` and `b` stands between the
/// operator and a registry host.
fn between_operator_and_registry(a: &[String], b: &[String]) -> bool {
    (names(a, ADMIN_HOST) && names_registry(b)) || (names(b, ADMIN_HOST) && names_registry(a))
}

impl Excuses {
    pub(super) fn excused_now(&self) -> bool {
        self.db_active > 0 || !self.crashed.is_empty() || !self.network.is_empty() || self.loss
    }

    /// Brings the total up to `t`.
    pub(super) fn advance(&mut self, t: u64) {
        if t <= self.last_ms {
            return;
        }
        if self.excused_now() {
            self.total_ms += t - self.last_ms;
        } else if let Some(until) = self.db_settle_until
            && until > self.last_ms
        {
            self.total_ms += until.min(t) - self.last_ms;
        }
        self.last_ms = t;
    }

    /// Excused milliseconds up to `t` (at least the last record's time).
    fn total_at(&mut self, t: u64) -> u64 {
        self.advance(t);
        self.total_ms
    }

    fn add(&mut self, key: (String, Vec<String>, Vec<String>)) {
        *self.network.entry(key).or_default() += 1;
    }

    fn remove(&mut self, key: (String, Vec<String>, Vec<String>)) {
        if let Some(n) = self.network.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                self.network.remove(&key);
            }
        }
    }

    /// Follows a fault event at `t` (after [`Excuses::advance`] to `t`).
    pub(super) fn on_fault(&mut self, f: &FaultEvent, t: u64) {
        self.advance(t);
        let key =
            |kind: &str, a: &[String], b: &[String]| (kind.to_string(), a.to_vec(), b.to_vec());
        match f {
            FaultEvent::DbCut { .. }
            | FaultEvent::DbStall { .. }
            | FaultEvent::DbTerminate { .. }
            | FaultEvent::DbRestart => self.db_active += 1,
            FaultEvent::DbFaultEnd { .. } => {
                self.db_active = self.db_active.saturating_sub(1);
                self.db_settle_until = Some(t.saturating_add(DB_FAULT_SETTLE_MS));
            }
            FaultEvent::Crash { hosts } => {
                for h in hosts.iter().filter(|h| h.starts_with("registry-")) {
                    *self.crashed.entry(h.clone()).or_default() += 1;
                }
            }
            FaultEvent::Restart { hosts } => {
                for h in hosts {
                    self.crashed.remove(h);
                }
            }
            FaultEvent::Partition { a, b, oneway } if between_operator_and_registry(a, b) => {
                self.add(key(if *oneway { "oneway" } else { "partition" }, a, b))
            }
            FaultEvent::Repair { a, b, oneway } => {
                self.remove(key(if *oneway { "oneway" } else { "partition" }, a, b))
            }
            FaultEvent::Hold { a, b } if between_operator_and_registry(a, b) => {
                self.add(key("hold", a, b))
            }
            FaultEvent::Release { a, b } => self.remove(key("hold", a, b)),
            FaultEvent::Latency { a, b, .. } if between_operator_and_registry(a, b) => {
                self.add(key("latency", a, b))
            }
            FaultEvent::LatencyRestore { a, b } => self.remove(key("latency", a, b)),
            FaultEvent::Loss { .. } => self.loss = true,
            FaultEvent::LossEnd => self.loss = false,
            _ => {}
        }
    }
}

/// A publication sent and not committed yet.
#[derive(Debug)]
struct InFlight {
    from: String,
    publication: Publication,
    first_ms: u64,
    excused_at_first: u64,
    reported: bool,
}

/// The publications in flight and the time excused.
#[derive(Debug, Default)]
pub(super) struct PublicationProgress {
    pub(super) excuses: Excuses,
    in_flight: Vec<InFlight>,
    /// Each operator's last committed publication.
    landed: BTreeMap<String, Publication>,
}

impl Checker {
    fn publish_bound(&self) -> u64 {
        self.expect.publish_within_ms.unwrap_or(PUBLISH_WITHIN_MS)
    }

    /// `from` sent `publication` at `t`.
    pub(super) fn publication_sent(&mut self, from: &str, publication: &Publication, t: u64) {
        let p = &mut self.publication_progress;
        let known = p
            .in_flight
            .iter()
            .any(|x| x.from == from && &x.publication == publication)
            || p.landed.get(from) == Some(publication);
        if known {
            return;
        }
        if p.in_flight.len() >= PUBLICATIONS_IN_FLIGHT_MAX {
            let oldest = p.in_flight.remove(0);
            if !oldest.reported {
                self.violate(
                    invariant::PUBLICATION_PROGRESS,
                    format!(
                        "{PUBLICATIONS_IN_FLIGHT_MAX} publications of {} are in flight, the oldest \
                         first sent at {} ms: none of them commits",
                        oldest.from, oldest.first_ms
                    ),
                );
            }
        }
        let p = &mut self.publication_progress;
        let excused_at_first = p.excuses.total_at(t);
        p.in_flight.push(InFlight {
            from: from.to_string(),
            publication: publication.clone(),
            first_ms: t,
            excused_at_first,
            reported: false,
        });
    }

    /// An answer to `from`'s `publication` at `t`: committed or not.
    pub(super) fn publication_answered(
        &mut self,
        from: &str,
        publication: &Publication,
        error: Option<&str>,
        t: u64,
    ) {
        let bound = self.publish_bound();
        let excused_now =
            self.db_faults.allows_unavailable(t) || self.publication_progress.excuses.excused_now();
        let p = &mut self.publication_progress;
        let Some(at) = p
            .in_flight
            .iter()
            .position(|x| x.from == from && &x.publication == publication)
        else {
            return;
        };
        let x = p.in_flight.remove(at);
        match error {
            None => {}
            Some("unavailable") if !x.reported && !excused_now => {
                self.violate(
                    invariant::PUBLICATION_PROGRESS,
                    format!(
                        "a publication {from} first sent at {} ms was answered unavailable at {t} ms with no fault in force: it never lands",
                        x.first_ms
                    ),
                );
                return;
            }
            Some(_) => return,
        }
        let p = &mut self.publication_progress;
        p.landed.insert(from.to_string(), publication.clone());
        let excused = p.excuses.total_at(t) - x.excused_at_first;
        let waited = t.saturating_sub(x.first_ms);
        let unexcused = waited.saturating_sub(excused);
        if unexcused > bound && !x.reported {
            self.violate(
                invariant::PUBLICATION_PROGRESS,
                format!(
                    "a publication {from} first sent at {} ms committed at {t} ms: {unexcused} ms \
                     unexcused ({waited} ms in all, {excused} ms under a fault), past \
                     publish_within_ms = {bound}",
                    x.first_ms
                ),
            );
        }
    }

    /// Reports the publications in flight past their bound at `t`, once
    /// each.
    pub(super) fn check_publications_overdue(&mut self, t: u64) {
        if self.publication_progress.in_flight.is_empty() {
            return;
        }
        let bound = self.publish_bound();
        let total = self.publication_progress.excuses.total_at(t);
        let mut late = Vec::new();
        for x in &mut self.publication_progress.in_flight {
            let unexcused = (t - x.first_ms.min(t)).saturating_sub(total - x.excused_at_first);
            if unexcused > bound && !x.reported {
                x.reported = true;
                late.push((x.from.clone(), x.first_ms, unexcused));
            }
        }
        for (from, first, unexcused) in late {
            self.violate(
                invariant::PUBLICATION_PROGRESS,
                format!(
                    "a publication {from} first sent at {first} ms has not committed at {t} ms: \
                     {unexcused} ms unexcused, past publish_within_ms = {bound}"
                ),
            );
        }
    }
}
