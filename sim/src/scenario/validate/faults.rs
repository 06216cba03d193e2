//! Validation of the fault schedule and of chaos: each `[[faults]]`
//! entry's times (`at_ms`, `until_ms`, `restart_ms`), host selectors and
//! the parameters its kind takes (and no other), and the `[chaos]`
//! ratios and counts.

use super::{Check, Validator, bounded, ensure, fail, ratio_ok};
use crate::limits::{
    CHAOS_FAULTS_MAX, DB_FAILOVERS_MAX, DB_STALL_MS_MAX, DURATION_MS_MAX, LATENCY_MS_MAX,
    SCHEDULE_ENTRIES_MAX,
};
use crate::scenario::location::At;
use crate::scenario::{FaultKind, REGISTRY_OPS, select_hosts};

impl Validator<'_> {
    pub(super) fn faults(&self) -> Check {
        let hosts = self.s.host_names();
        let duration = self.s.scenario.duration_ms;
        ensure(self.s.faults.len() <= SCHEDULE_ENTRIES_MAX, 0, || {
            format!("faults has more than {SCHEDULE_ENTRIES_MAX} entries")
        })?;
        let failovers = self
            .s
            .faults
            .iter()
            .filter(|f| f.get_ref().kind == FaultKind::DbFailover)
            .count()
            + self.s.chaos.db_failovers as usize;
        if failovers > DB_FAILOVERS_MAX {
            let at = self
                .s
                .faults
                .iter()
                .filter(|f| f.get_ref().kind == FaultKind::DbFailover)
                .nth(DB_FAILOVERS_MAX)
                .map_or(0, |f| f.span().start);
            return fail(
                at,
                format!(
                    "{failovers} db_failover faults (scheduled and chaos.db_failovers); a run fails over at most {DB_FAILOVERS_MAX} time (the old primary is not rebuilt as a standby)"
                ),
            );
        }
        if failovers > 0 && self.s.restarts_database() {
            let at = self
                .s
                .faults
                .iter()
                .find(|f| f.get_ref().kind == FaultKind::DbRestart)
                .map_or(0, |f| f.span().start);
            return fail(
                at,
                "db_restart and db_failover in one scenario: a failover runs on a primary and standby the run starts, a restart on a single server of the run's own; fail over instead of restarting",
            );
        }
        for (i, f) in self.s.faults.iter().enumerate() {
            let at = f.span().start;
            let key = |name: &str| At::Key(format!("faults.{i}.{name}"));
            let f = f.get_ref();
            ensure(f.at_ms <= duration, at, || {
                "fault at_ms is after scenario.duration_ms".into()
            })?;
            let needs_until = matches!(
                f.kind,
                FaultKind::Partition | FaultKind::Hold | FaultKind::Latency | FaultKind::Loss
            );
            if needs_until {
                ensure(f.until_ms.is_some(), at, || {
                    format!("fault {:?} needs until_ms", f.kind)
                })?;
            }
            if let Some(until) = f.until_ms {
                ensure(until > f.at_ms && until <= duration, at, || {
                    "until_ms must be after at_ms and at most scenario.duration_ms".into()
                })?;
            }
            let sel = |list: &[String], side: &str| -> Check {
                ensure(!list.is_empty(), at, || {
                    format!("fault {:?} needs `{side}`", f.kind)
                })?;
                for s in list {
                    ensure(
                        !select_hosts(std::slice::from_ref(s), &hosts).is_empty(),
                        at,
                        || format!("host selector {s:?} matches no host"),
                    )?;
                }
                Ok(())
            };
            let allowed: &[&str] = match f.kind {
                FaultKind::Crash => {
                    sel(&f.hosts, "hosts")?;
                    if let Some(r) = f.restart_ms {
                        ensure(r > f.at_ms, at, || "restart_ms must be after at_ms".into())?;
                    }
                    &["hosts", "restart_ms"]
                }
                FaultKind::Partition => {
                    sel(&f.a, "a")?;
                    sel(&f.b, "b")?;
                    &["a", "b", "oneway", "until_ms"]
                }
                FaultKind::Hold => {
                    sel(&f.a, "a")?;
                    sel(&f.b, "b")?;
                    &["a", "b", "until_ms"]
                }
                FaultKind::Latency => {
                    sel(&f.a, "a")?;
                    sel(&f.b, "b")?;
                    let m = f.max_ms.unwrap_or(0);
                    ensure(f.max_ms.is_some(), at, || "latency needs max_ms".into())?;
                    bounded(
                        key("max_ms"),
                        "max_ms",
                        m,
                        self.s.scenario.latency_ms[0],
                        LATENCY_MS_MAX,
                    )?;
                    &["a", "b", "max_ms", "until_ms"]
                }
                FaultKind::Loss => {
                    let r = f.rate.unwrap_or(-1.0);
                    ratio_ok(key("rate"), "rate", r)?;
                    &["rate", "until_ms"]
                }
                FaultKind::LoseAnswers => {
                    ensure(!f.ops.is_empty(), at, || "lose_answers needs ops".into())?;
                    for op in &f.ops {
                        ensure(REGISTRY_OPS.contains(&op.as_str()), at, || {
                            format!("unknown op {op:?}; one of {}", REGISTRY_OPS.join(", "))
                        })?;
                    }
                    let c = f.count.unwrap_or(0);
                    bounded(key("count"), "count", c.into(), 1, 10_000)?;
                    &["ops", "count", "until_ms"]
                }
                FaultKind::ClockJump => {
                    let by = f.by_ms.unwrap_or(0);
                    ensure(by != 0, at, || "clock_jump needs a non-zero by_ms".into())?;
                    ensure(by.unsigned_abs() <= DURATION_MS_MAX, at, || {
                        format!("by_ms exceeds {DURATION_MS_MAX}")
                    })?;
                    &["by_ms"]
                }
                FaultKind::DbCut => &["cut", "until_ms"],
                FaultKind::DbStall => {
                    ensure(f.stall_ms.is_some(), at, || {
                        "db_stall needs stall_ms".into()
                    })?;
                    bounded(
                        key("stall_ms"),
                        "stall_ms",
                        f.stall_ms.unwrap_or(0),
                        1,
                        DB_STALL_MS_MAX,
                    )?;
                    &["stall_ms", "until_ms"]
                }
                FaultKind::DbTerminate | FaultKind::DbRestart => &["until_ms"],
                FaultKind::DbFailover => {
                    if let Some(detach) = f.detach_ms {
                        ensure(detach < f.at_ms, key("detach_ms"), || {
                            "detach_ms must be before at_ms (the standby is cut off before the failover)".into()
                        })?;
                        ensure(
                            self.s.registry.database_replication
                                == crate::scenario::DatabaseReplication::Asynchronous,
                            key("detach_ms"),
                            || {
                                "detach_ms needs [registry] database_replication = \"asynchronous\": a synchronous primary would hold every commit waiting for the cut-off standby".into()
                            },
                        )?;
                    }
                    &["until_ms", "detach_ms"]
                }
                FaultKind::ZoneSilence => {
                    let zone = f.zone.as_deref().unwrap_or_default();
                    ensure(f.zone.is_some(), at, || "zone_silence needs zone".into())?;
                    ensure(self.s.zones().contains(zone), at, || {
                        format!("zone {zone:?} has no replica")
                    })?;
                    ensure(f.until_ms.is_some(), at, || {
                        "zone_silence needs until_ms".into()
                    })?;
                    &["zone", "until_ms"]
                }
                FaultKind::GroupCrash | FaultKind::GroupDrain => {
                    let group = f.group.as_deref().unwrap_or_default();
                    ensure(f.group.is_some(), at, || {
                        format!("{} needs group", f.kind.name())
                    })?;
                    ensure(
                        self.s
                            .fleet
                            .replica_groups
                            .iter()
                            .any(|g| g.get_ref().name == group),
                        at,
                        || format!("unknown replica group {group:?}"),
                    )?;
                    let fraction = f.fraction.unwrap_or(-1.0);
                    ensure(fraction > 0.0 && fraction <= 1.0, key("fraction"), || {
                        format!(
                            "{} needs a fraction above 0 and at most 1, got {fraction}",
                            f.kind.name()
                        )
                    })?;
                    if f.kind == FaultKind::GroupCrash {
                        if let Some(r) = f.restart_ms {
                            ensure(r > f.at_ms, at, || "restart_ms must be after at_ms".into())?;
                        }
                        &["group", "fraction", "restart_ms"]
                    } else {
                        &["group", "fraction"]
                    }
                }
            };
            let present = [
                ("until_ms", f.until_ms.is_some()),
                ("hosts", !f.hosts.is_empty()),
                ("restart_ms", f.restart_ms.is_some()),
                ("a", !f.a.is_empty()),
                ("b", !f.b.is_empty()),
                ("oneway", f.oneway),
                ("max_ms", f.max_ms.is_some()),
                ("rate", f.rate.is_some()),
                ("ops", !f.ops.is_empty()),
                ("count", f.count.is_some()),
                ("by_ms", f.by_ms.is_some()),
                ("cut", f.cut.is_some()),
                ("stall_ms", f.stall_ms.is_some()),
                ("zone", f.zone.is_some()),
                ("group", f.group.is_some()),
                ("fraction", f.fraction.is_some()),
                ("detach_ms", f.detach_ms.is_some()),
            ];
            for (name, is) in present {
                ensure(!is || allowed.contains(&name), at, || {
                    format!("fault {:?} does not take `{name}`", f.kind)
                })?;
            }
        }
        Ok(())
    }

    pub(super) fn chaos(&self) -> Check {
        let c = &self.s.chaos;
        ratio_ok(At::Named, "chaos.lose_answer_ratio", c.lose_answer_ratio)?;
        for (what, n) in [
            ("chaos.replica_crashes", c.replica_crashes),
            ("chaos.registry_crashes", c.registry_crashes),
            ("chaos.partitions", c.partitions),
            ("chaos.holds", c.holds),
            ("chaos.loss_windows", c.loss_windows),
            ("chaos.clock_jumps", c.clock_jumps),
            ("chaos.db_cuts", c.db_cuts),
            ("chaos.db_stalls", c.db_stalls),
            ("chaos.db_terminates", c.db_terminates),
            ("chaos.db_restarts", c.db_restarts),
            ("chaos.db_failovers", c.db_failovers),
            ("chaos.zone_silences", c.zone_silences),
            ("chaos.group_crashes", c.group_crashes),
            ("chaos.group_drains", c.group_drains),
        ] {
            bounded(At::Named, what, n.into(), 0, CHAOS_FAULTS_MAX.into())?;
        }
        Ok(())
    }
}
