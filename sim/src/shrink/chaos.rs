//! `[chaos]` resolved into the scheduled faults it draws at a seed, so a
//! shrink can take single faults out.

use toml::Spanned;

use crate::faults::{Action, chaos_rng, schedule};
use crate::scenario::{Chaos, FaultKind, FaultSpec, Scenario};

/// The `[chaos]` faults drawn at `seed` as scheduled faults, in the order
/// they start. `None` when chaos draws something no scheduled fault says
/// (database faults).
fn chaos_as_faults(s: &Scenario, seed: u64) -> Option<Vec<FaultSpec>> {
    if s.chaos.has_database_faults() {
        return None;
    }
    let mut only = s.clone();
    only.faults.clear();
    let drawn = schedule(&only, &s.host_names(), &mut chaos_rng(seed));
    // Faults started and not yet ended, each with its start's position.
    let mut open: Vec<(usize, FaultSpec)> = Vec::new();
    let mut done: Vec<(usize, FaultSpec)> = Vec::new();
    for (position, x) in drawn.into_iter().enumerate() {
        let at = x.at_ms;
        let start = |kind: FaultKind| FaultSpec {
            at_ms: at,
            kind,
            until_ms: None,
            hosts: Vec::new(),
            restart_ms: None,
            a: Vec::new(),
            b: Vec::new(),
            oneway: false,
            max_ms: None,
            rate: None,
            ops: Vec::new(),
            count: None,
            by_ms: None,
            cut: None,
            stall_ms: None,
            zone: None,
            group: None,
            fraction: None,
            detach_ms: None,
        };
        // An end closes the first open fault of its kind on its hosts:
        // the starts and ends are the same either way.
        let mut close = |matches: &dyn Fn(&FaultSpec) -> bool| -> Option<()> {
            let i = open.iter().position(|(_, f)| matches(f))?;
            let (p, mut f) = open.remove(i);
            if f.kind == FaultKind::Crash {
                f.restart_ms = Some(at);
            } else {
                f.until_ms = Some(at);
            }
            done.push((p, f));
            Some(())
        };
        match x.action {
            Action::Crash(hosts) => open.push((
                position,
                FaultSpec {
                    hosts,
                    ..start(FaultKind::Crash)
                },
            )),
            Action::Restart(hosts) => {
                close(&|f| f.kind == FaultKind::Crash && f.hosts == hosts)?;
            }
            Action::Partition { a, b, oneway } => open.push((
                position,
                FaultSpec {
                    a,
                    b,
                    oneway,
                    ..start(FaultKind::Partition)
                },
            )),
            Action::Repair { a, b, oneway } => {
                close(&|f| {
                    f.kind == FaultKind::Partition && f.a == a && f.b == b && f.oneway == oneway
                })?;
            }
            Action::Hold { a, b } => open.push((
                position,
                FaultSpec {
                    a,
                    b,
                    ..start(FaultKind::Hold)
                },
            )),
            Action::Release { a, b } => {
                close(&|f| f.kind == FaultKind::Hold && f.a == a && f.b == b)?;
            }
            Action::Loss(rate) => open.push((
                position,
                FaultSpec {
                    rate: Some(rate),
                    ..start(FaultKind::Loss)
                },
            )),
            Action::LossEnd => {
                close(&|f| f.kind == FaultKind::Loss)?;
            }
            Action::ClockJump(by) => done.push((
                position,
                FaultSpec {
                    by_ms: Some(by),
                    ..start(FaultKind::ClockJump)
                },
            )),
            // The loss-of-answers ratio stays in `[chaos]`: no scheduled
            // fault says it.
            Action::LoseRatio(_) => {}
            _ => return None,
        }
    }
    if !open.is_empty() {
        return None;
    }
    done.sort_by_key(|(p, _)| *p);
    Some(done.into_iter().map(|(_, f)| f).collect())
}

/// A scenario with `[chaos]` resolved into scheduled faults for `seed`.
pub(super) fn resolve_chaos(s: &Scenario, seed: u64) -> Option<Scenario> {
    let c = &s.chaos;
    if c.replica_crashes
        + c.registry_crashes
        + c.partitions
        + c.holds
        + c.loss_windows
        + c.clock_jumps
        == 0
    {
        return None;
    }
    let faults = chaos_as_faults(s, seed)?;
    let mut r = s.clone();
    r.faults
        .extend(faults.into_iter().map(|f| Spanned::new(0..0, f)));
    r.chaos = Chaos {
        lose_answer_ratio: c.lose_answer_ratio,
        ..Chaos::default()
    };
    Some(r)
}
