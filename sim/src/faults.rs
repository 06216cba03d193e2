//! The fault schedule: the scenario's scheduled faults and the ones chaos
//! draws from the seed, as one time-ordered list of world actions.
//!
//! Network faults act through turmoil (partitions, one-way partitions,
//! holds, latency, random link breaks); crashes and restarts through
//! turmoil's host crash and bounce; lost answers through the registry
//! hosts; clock jumps through the registry's injected clock; database
//! faults (PostgreSQL only) through the fault proxy in front of the server,
//! an administrator connection and the server itself. Every fault ends by
//! the end of the workload phase, when the world heals.

use rand::Rng;
use rand::rngs::SmallRng;

use crate::scenario::{CutMode, FaultKind, Scenario, select_hosts};

/// One thing the world does at a time.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Action {
    Crash(Vec<String>),
    Restart(Vec<String>),
    Partition {
        a: Vec<String>,
        b: Vec<String>,
        oneway: bool,
    },
    Repair {
        a: Vec<String>,
        b: Vec<String>,
        oneway: bool,
    },
    Hold {
        a: Vec<String>,
        b: Vec<String>,
    },
    Release {
        a: Vec<String>,
        b: Vec<String>,
    },
    Latency {
        a: Vec<String>,
        b: Vec<String>,
        max_ms: u64,
    },
    LatencyRestore {
        a: Vec<String>,
        b: Vec<String>,
    },
    Loss(f64),
    LossEnd,
    LoseAnswers {
        ops: Vec<String>,
        count: u32,
    },
    LoseAnswersEnd {
        ops: Vec<String>,
    },
    LoseRatio(f64),
    ClockJump(i64),
    DbCut(CutMode),
    DbStall(u64),
    DbTerminate,
    DbRestart,
    DbFailover,
    /// The standby is cut off from the primary's WAL.
    DbDetachStandby,
    /// The window of a database fault of this kind ended.
    DbEnd(FaultKind),
    ZoneSilence(String),
    ZoneSilenceEnd(String),
    GroupCrash {
        group: String,
        members: Vec<u32>,
    },
    GroupRestart {
        group: String,
        members: Vec<u32>,
    },
    GroupDrain {
        group: String,
        members: Vec<u32>,
    },
}

/// `fraction` of a group of `count` replicas, spread evenly over it (at
/// least one).
pub(crate) fn spread(count: u32, fraction: f64) -> Vec<u32> {
    let n = ((f64::from(count) * fraction).ceil() as u32).clamp(1, count.max(1));
    (0..n)
        .map(|k| (u64::from(k) * u64::from(count) / u64::from(n)) as u32)
        .collect()
}

impl Action {
    /// Ends sort before starts at the same instant, so a window that ends
    /// when another begins does not overlap it.
    fn order(&self) -> u8 {
        match self {
            Action::Repair { .. }
            | Action::Release { .. }
            | Action::LatencyRestore { .. }
            | Action::LossEnd
            | Action::LoseAnswersEnd { .. }
            | Action::DbEnd(_)
            | Action::ZoneSilenceEnd(_)
            | Action::GroupRestart { .. }
            | Action::Restart(_) => 0,
            _ => 1,
        }
    }

    /// True for the start of a fault (what "faults fired" counts).
    pub(crate) fn is_fault(&self) -> bool {
        self.order() == 1 && !matches!(self, Action::LoseRatio(r) if *r == 0.0)
    }
}

/// A scheduled action.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Scheduled {
    pub(crate) at_ms: u64,
    pub(crate) action: Action,
}

/// The generator `[chaos]` draws from for `seed`: apart from turmoil's,
/// so resolving chaos into scheduled faults (`shrink`) draws the same.
pub(crate) fn chaos_rng(seed: u64) -> SmallRng {
    use rand::SeedableRng;
    SmallRng::seed_from_u64(crate::hosts::mix64(seed ^ 0xc4a0_5c4a_05c4_a05c))
}

/// The whole schedule, in time order.
pub(crate) fn schedule(s: &Scenario, hosts: &[String], rng: &mut SmallRng) -> Vec<Scheduled> {
    let mut out = Vec::new();
    let mut push = |at_ms: u64, action: Action| out.push(Scheduled { at_ms, action });
    for f in &s.faults {
        let f = f.get_ref();
        let until = f.until_ms.unwrap_or(s.scenario.duration_ms);
        let a = select_hosts(&f.a, hosts);
        let b = select_hosts(&f.b, hosts);
        match f.kind {
            FaultKind::Crash => {
                let h = select_hosts(&f.hosts, hosts);
                push(f.at_ms, Action::Crash(h.clone()));
                if let Some(r) = f.restart_ms {
                    push(r, Action::Restart(h));
                }
            }
            FaultKind::Partition => {
                let oneway = f.oneway;
                push(
                    f.at_ms,
                    Action::Partition {
                        a: a.clone(),
                        b: b.clone(),
                        oneway,
                    },
                );
                push(until, Action::Repair { a, b, oneway });
            }
            FaultKind::Hold => {
                push(
                    f.at_ms,
                    Action::Hold {
                        a: a.clone(),
                        b: b.clone(),
                    },
                );
                push(until, Action::Release { a, b });
            }
            FaultKind::Latency => {
                let max_ms = f.max_ms.unwrap_or(s.scenario.latency_ms[1]);
                push(
                    f.at_ms,
                    Action::Latency {
                        a: a.clone(),
                        b: b.clone(),
                        max_ms,
                    },
                );
                push(until, Action::LatencyRestore { a, b });
            }
            FaultKind::Loss => {
                push(f.at_ms, Action::Loss(f.rate.unwrap_or(0.0)));
                push(until, Action::LossEnd);
            }
            FaultKind::LoseAnswers => {
                push(
                    f.at_ms,
                    Action::LoseAnswers {
                        ops: f.ops.clone(),
                        count: f.count.unwrap_or(1),
                    },
                );
                push(until, Action::LoseAnswersEnd { ops: f.ops.clone() });
            }
            FaultKind::ClockJump => push(f.at_ms, Action::ClockJump(f.by_ms.unwrap_or(0))),
            FaultKind::DbCut
            | FaultKind::DbStall
            | FaultKind::DbTerminate
            | FaultKind::DbRestart
            | FaultKind::DbFailover => {
                let start = match f.kind {
                    FaultKind::DbCut => Action::DbCut(f.cut.unwrap_or_default()),
                    FaultKind::DbStall => Action::DbStall(f.stall_ms.unwrap_or(1)),
                    FaultKind::DbTerminate => Action::DbTerminate,
                    FaultKind::DbFailover => Action::DbFailover,
                    _ => Action::DbRestart,
                };
                if let Some(detach) = f.detach_ms {
                    push(detach, Action::DbDetachStandby);
                }
                push(f.at_ms, start);
                // The window ends at `until_ms`, or one tick after the start.
                let end = f.until_ms.unwrap_or(f.at_ms + s.scenario.tick_ms);
                push(end, Action::DbEnd(f.kind));
            }
            FaultKind::ZoneSilence => {
                let zone = f.zone.clone().unwrap_or_default();
                push(f.at_ms, Action::ZoneSilence(zone.clone()));
                push(until, Action::ZoneSilenceEnd(zone));
            }
            FaultKind::GroupCrash | FaultKind::GroupDrain => {
                let group = f.group.clone().unwrap_or_default();
                let count = group_count(s, &group);
                let members = spread(count, f.fraction.unwrap_or(1.0));
                if f.kind == FaultKind::GroupDrain {
                    push(f.at_ms, Action::GroupDrain { group, members });
                    continue;
                }
                push(
                    f.at_ms,
                    Action::GroupCrash {
                        group: group.clone(),
                        members: members.clone(),
                    },
                );
                if let Some(r) = f.restart_ms {
                    push(r, Action::GroupRestart { group, members });
                }
            }
        }
    }
    chaos(s, hosts, rng, &mut push);
    out.sort_by_key(|x| (x.at_ms, x.action.order()));
    out
}

/// Expands `[chaos]` into concrete faults drawn from the seed.
fn chaos(s: &Scenario, hosts: &[String], rng: &mut SmallRng, push: &mut impl FnMut(u64, Action)) {
    let c = &s.chaos;
    let d = s.scenario.duration_ms;
    let pick = |rng: &mut SmallRng, prefix: &str| -> Option<String> {
        let candidates: Vec<&String> = hosts.iter().filter(|h| h.starts_with(prefix)).collect();
        if candidates.is_empty() {
            None
        } else {
            Some(candidates[rng.random_range(0..candidates.len())].clone())
        }
    };
    let start = |rng: &mut SmallRng| rng.random_range(d / 10..=(d * 7 / 10).max(d / 10));
    if c.lose_answer_ratio > 0.0 {
        push(0, Action::LoseRatio(c.lose_answer_ratio));
        push(d, Action::LoseRatio(0.0));
    }
    for _ in 0..c.replica_crashes {
        if let Some(h) = pick(rng, "replica-") {
            let at = start(rng);
            push(at, Action::Crash(vec![h.clone()]));
            push(at + rng.random_range(100..=600), Action::Restart(vec![h]));
        }
    }
    for _ in 0..c.registry_crashes {
        if let Some(h) = pick(rng, "registry-") {
            let at = start(rng);
            push(at, Action::Crash(vec![h.clone()]));
            push(at + rng.random_range(50..=300), Action::Restart(vec![h]));
        }
    }
    for _ in 0..c.partitions {
        let side = if rng.random_bool(0.5) {
            "dispatcher-"
        } else {
            "replica-"
        };
        if let (Some(a), Some(b)) = (pick(rng, side), pick(rng, "registry-")) {
            let at = start(rng);
            let until = (at + rng.random_range(50..=300)).min(d);
            let oneway = rng.random_bool(0.3);
            let (a, b) = (vec![a], vec![b]);
            push(
                at,
                Action::Partition {
                    a: a.clone(),
                    b: b.clone(),
                    oneway,
                },
            );
            push(until.max(at + 1), Action::Repair { a, b, oneway });
        }
    }
    for _ in 0..c.holds {
        if let (Some(a), Some(b)) = (pick(rng, "dispatcher-"), pick(rng, "registry-")) {
            let at = start(rng);
            let until = (at + rng.random_range(20..=150)).min(d);
            let (a, b) = (vec![a], vec![b]);
            push(
                at,
                Action::Hold {
                    a: a.clone(),
                    b: b.clone(),
                },
            );
            push(until.max(at + 1), Action::Release { a, b });
        }
    }
    for _ in 0..c.loss_windows {
        let at = start(rng);
        let rate = rng.random_range(0.01..=0.1);
        push(at, Action::Loss(rate));
        push(
            (at + rng.random_range(50..=200)).min(d).max(at + 1),
            Action::LossEnd,
        );
    }
    let mut db = |rng: &mut SmallRng, kind: FaultKind, start_action: Action| {
        let at = start(rng);
        let until = (at + rng.random_range(20..=100)).min(d).max(at + 1);
        push(at, start_action);
        push(until, Action::DbEnd(kind));
    };
    for _ in 0..c.db_cuts {
        let mode = if rng.random_bool(0.5) {
            CutMode::All
        } else {
            CutMode::NextCommit
        };
        db(rng, FaultKind::DbCut, Action::DbCut(mode));
    }
    for _ in 0..c.db_stalls {
        let ms = rng.random_range(50..=500);
        db(rng, FaultKind::DbStall, Action::DbStall(ms));
    }
    for _ in 0..c.db_terminates {
        db(rng, FaultKind::DbTerminate, Action::DbTerminate);
    }
    for _ in 0..c.db_restarts {
        db(rng, FaultKind::DbRestart, Action::DbRestart);
    }
    for _ in 0..c.db_failovers {
        db(rng, FaultKind::DbFailover, Action::DbFailover);
    }
    let lease = s.lifecycle.lease_ttl_ms;
    for _ in 0..c.clock_jumps {
        let at = start(rng);
        let by = rng.random_range(lease / 2..=lease * 2).max(1);
        push(at, Action::ClockJump(i64::try_from(by).unwrap_or(i64::MAX)));
    }
    // Fleet grain: drawn last, so the draws above stay as they were.
    let zones: Vec<String> = s.zones().into_iter().collect();
    for _ in 0..c.zone_silences {
        if zones.is_empty() {
            break;
        }
        let zone = zones[rng.random_range(0..zones.len())].clone();
        let at = start(rng);
        let until = (at + rng.random_range(lease..=lease * 3))
            .min(d)
            .max(at + 1);
        push(at, Action::ZoneSilence(zone.clone()));
        push(until, Action::ZoneSilenceEnd(zone));
    }
    let groups: Vec<(String, u32)> = s
        .fleet
        .replica_groups
        .iter()
        .map(|g| (g.get_ref().name.clone(), g.get_ref().count))
        .collect();
    for _ in 0..c.group_crashes {
        if groups.is_empty() {
            break;
        }
        let (group, count) = groups[rng.random_range(0..groups.len())].clone();
        let members = spread(count, rng.random_range(0.1..=0.5));
        let at = start(rng);
        push(
            at,
            Action::GroupCrash {
                group: group.clone(),
                members: members.clone(),
            },
        );
        let back = at + rng.random_range(lease..=lease * 3);
        push(back, Action::GroupRestart { group, members });
    }
    for _ in 0..c.group_drains {
        if groups.is_empty() {
            break;
        }
        let (group, count) = groups[rng.random_range(0..groups.len())].clone();
        let members = spread(count, rng.random_range(0.1..=0.34));
        push(start(rng), Action::GroupDrain { group, members });
    }
}

fn group_count(s: &Scenario, group: &str) -> u32 {
    s.fleet
        .replica_groups
        .iter()
        .find(|g| g.get_ref().name == group)
        .map(|g| g.get_ref().count)
        .unwrap_or(0)
}

/// The database behind the store, as database faults reach it (the
/// PostgreSQL tier provides it; the in-memory backend has none).
pub(crate) trait Database {
    /// Closes every connection through the proxy; returns how many.
    fn cut_all(&self) -> usize;
    /// Arms a cut of the next connection that commits.
    fn cut_next_commit(&self);
    /// True while a `cut_next_commit` has not fired yet.
    fn commit_cut_armed(&self) -> bool;
    /// Holds every byte through the proxy for `ms` real milliseconds.
    fn stall(&self, ms: u64);
    /// Terminates the registry's sessions; returns how many.
    fn terminate(&self) -> Result<u64, String>;
    /// Shuts the server down immediately and starts it again.
    fn restart(&self) -> Result<(), String>;
    /// Stops the primary immediately, promotes its standby and points the
    /// proxy at it; returns the real milliseconds without a primary.
    fn fail_over(&self) -> Result<u64, String>;
    /// Cuts the standby off from the primary's WAL (asynchronous pairs).
    fn detach_standby(&self) -> Result<(), String>;
}
