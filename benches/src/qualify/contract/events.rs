//! The contract's optional event tables, `[expiry]`, `[publications]`
//! and `[failover]`: their types, their validation against the rest of
//! the contract, and what an `[expiry]` implies for the other replicas'
//! leases. Running them inside a trial is `qualify::events`.

use connreg::limits::{LEASE_MAINTENANCE_BATCH_MAX, LEASE_TTL_MS_MAX};
use serde::{Deserialize, Serialize};

use super::{Contract, Invalid, check_positive, check_range, invalid};
use crate::qualify::limits::{
    EXPIRY_MS_MAX, EXPIRY_ZONES_MAX, FAILOVER_MS_MAX, PUBLICATION_INTERVAL_MS_MAX,
    PUBLICATION_INTERVAL_MS_MIN,
};

/// A zone's lease expiry inside each trial's measured run: the replicas
/// of `zones` stop heartbeating at `at_ms`, their leases run out, and
/// lease maintenance (`ReplicaLifecycle::lease_maintain`) runs in batches
/// of `batch` until it finds no expired replica left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expiry {
    /// The zones (`<region>-z<k>`) whose replicas stop heartbeating.
    pub zones: Vec<String>,
    /// When, in milliseconds after the start of the measured run.
    pub at_ms: u64,
    /// Most replicas per maintenance call, 1..=`LEASE_MAINTENANCE_BATCH_MAX`.
    pub batch: u32,
    /// Every expired replica must be offline within this many
    /// milliseconds of `at_ms` (a threshold).
    pub offline_within_ms_max: u64,
}

/// An operator's publications inside each trial's measured run: one every
/// `interval_ms`, alternately disabling a binding (the last in priority of
/// its tenant and capability) while raising its tenant's admission limit
/// by one, and enabling it again.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Publications {
    /// Milliseconds between publications.
    pub interval_ms: u64,
    /// Most failed publications per trial (a threshold). Default 0.
    #[serde(default)]
    pub failures_max: u64,
    /// Optional: highest 99th percentile latency of a publication, in
    /// milliseconds (a threshold).
    pub p99_ms_max: Option<f64>,
}

/// A failover of the registry's database inside the first trial's
/// measured run, on a primary and standby the run starts itself
/// (`--standby`): at `at_ms` the primary stops as a crash would, the
/// standby is promoted, and the proxy the pools connect through moves to
/// it, as a virtual IP would. Calls in flight answer `unavailable`; the
/// run goes on against the promoted server, and the end check holds it to
/// every answer a client was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Failover {
    /// When, in milliseconds after the start of the first trial's
    /// measured run.
    pub at_ms: u64,
    /// Optional: longest time without a primary that accepts writes, in
    /// milliseconds (a threshold), from the stop to the promoted server
    /// taking connections through the proxy.
    pub without_primary_ms_max: Option<u64>,
    /// Optional, `--standby asynchronous` only: the standby stops
    /// receiving WAL this many milliseconds before the failover, as a
    /// network fault between the servers would, so the commits of that
    /// window are on the old primary only and the failover loses them.
    /// Shows that the run sees lost routes (`failover_lost_routes_max`
    /// FAILs).
    pub detach_ms: Option<u64>,
}

impl Contract {
    /// The lease of replicas outside the expiring zones when the contract
    /// has an `[expiry]`: long enough to outlive every trial's expiry
    /// (each moves the registry's clock past one fleet lease).
    pub fn survivor_lease_ms(&self) -> Option<u64> {
        self.expiry.as_ref().map(|_| LEASE_TTL_MS_MAX)
    }

    pub(super) fn validate_expiry(&self) -> Result<(), Invalid> {
        let Some(e) = &self.expiry else {
            return Ok(());
        };
        let Some(duration) = self.load.duration_ms else {
            return invalid(
                "expiry",
                "an [expiry] needs load.duration_ms: the expiry happens at a time of the measured run",
            );
        };
        if e.zones.is_empty() || e.zones.len() > EXPIRY_ZONES_MAX {
            return invalid(
                "expiry.zones",
                format!("expiry.zones must list 1 to {EXPIRY_ZONES_MAX} zones (EXPIRY_ZONES_MAX)"),
            );
        }
        let f = &self.fleet;
        let zones: Vec<String> = f
            .regions
            .iter()
            .flat_map(|r| (0..f.zones_per_region).map(move |z| format!("{r}-z{z}")))
            .collect();
        for (i, zone) in e.zones.iter().enumerate() {
            if !zones.contains(zone) {
                return invalid(
                    "expiry.zones",
                    format!(
                        "expiry.zones[{i}]: {zone:?} is not a zone of the fleet (zones are <region>-z0 to <region>-z{})",
                        f.zones_per_region - 1
                    ),
                );
            }
            if e.zones[..i].contains(zone) {
                return invalid(
                    "expiry.zones",
                    format!("expiry.zones[{i}]: zone {zone:?} is listed twice"),
                );
            }
        }
        // Replica k of an instance is in zone (k div R) mod Z of region k mod R.
        let r = f.regions.len() as u64;
        let z = u64::from(f.zones_per_region);
        let expiring = (0..u64::from(f.replicas_per_instance))
            .filter(|k| {
                let name = format!("{}-z{}", f.regions[(k % r) as usize], (k / r) % z);
                e.zones.contains(&name)
            })
            .count();
        if expiring == 0 {
            return invalid(
                "expiry.zones",
                "expiry.zones holds no replica of the fleet: give each instance more replicas or other zones",
            );
        }
        if expiring as u64 == u64::from(f.replicas_per_instance) {
            return invalid(
                "expiry.zones",
                "expiry.zones holds every replica of the fleet: at least one zone must keep serving",
            );
        }
        check_range(
            "expiry.at_ms",
            e.at_ms,
            0,
            duration.saturating_sub(1),
            "load.duration_ms",
        )?;
        check_range(
            "expiry.batch",
            e.batch,
            1,
            LEASE_MAINTENANCE_BATCH_MAX,
            "connreg::limits::LEASE_MAINTENANCE_BATCH_MAX",
        )?;
        check_range(
            "expiry.offline_within_ms_max",
            e.offline_within_ms_max,
            1,
            EXPIRY_MS_MAX,
            "EXPIRY_MS_MAX",
        )?;
        // Each trial moves the registry's clock one fleet lease and a
        // millisecond; the other replicas' lease must outlive them all.
        let moved = u64::from(self.load.trials()) * (f.lease_ttl_ms + 1);
        if moved >= LEASE_TTL_MS_MAX {
            return invalid(
                "fleet.lease_ttl_ms",
                format!(
                    "with an [expiry], load.trials x (fleet.lease_ttl_ms + 1) = {moved} must stay below \
                     connreg::limits::LEASE_TTL_MS_MAX ({LEASE_TTL_MS_MAX}): the serving zones' leases must outlive every trial's expiry"
                ),
            );
        }
        if self.load.processes() > 1 {
            return invalid(
                "load.processes",
                "an [expiry] runs in one registry process: load.processes must be 1",
            );
        }
        Ok(())
    }

    pub(super) fn validate_failover(&self) -> Result<(), Invalid> {
        let Some(f) = &self.failover else {
            return Ok(());
        };
        if self.backend != super::BackendKind::Postgres {
            return invalid(
                "failover",
                "a [failover] fails over a PostgreSQL primary: backend must be \"postgres\"",
            );
        }
        let Some(duration) = self.load.duration_ms else {
            return invalid(
                "failover",
                "a [failover] needs load.duration_ms: it happens at a time of the measured run",
            );
        };
        check_range(
            "failover.at_ms",
            f.at_ms,
            0,
            duration.saturating_sub(1),
            "load.duration_ms",
        )?;
        if let Some(ms) = f.without_primary_ms_max {
            check_range(
                "failover.without_primary_ms_max",
                ms,
                1,
                FAILOVER_MS_MAX,
                "FAILOVER_MS_MAX",
            )?;
        }
        if let Some(ms) = f.detach_ms {
            check_range("failover.detach_ms", ms, 1, f.at_ms, "failover.at_ms")?;
        }
        if self.load.processes() > 1 {
            return invalid(
                "load.processes",
                "a [failover] runs in one registry process: load.processes must be 1",
            );
        }
        if self.load.trials() > 1 {
            return invalid(
                "load.trials",
                "a [failover] happens once: after it the promoted server has no standby, so a \
                 second trial would qualify another setup; load.trials must be 1",
            );
        }
        Ok(())
    }

    pub(super) fn validate_publications(&self) -> Result<(), Invalid> {
        let Some(p) = &self.publications else {
            return Ok(());
        };
        if self.load.duration_ms.is_none() {
            return invalid(
                "publications",
                "[publications] needs load.duration_ms: they happen at intervals of the measured run",
            );
        }
        check_range(
            "publications.interval_ms",
            p.interval_ms,
            PUBLICATION_INTERVAL_MS_MIN,
            PUBLICATION_INTERVAL_MS_MAX,
            "PUBLICATION_INTERVAL_MS_MAX",
        )?;
        if let Some(v) = p.p99_ms_max {
            check_positive("publications.p99_ms_max", v)?;
        }
        if self.fleet.bindings_per_tenant_capability < 2 {
            return invalid(
                "fleet.bindings_per_tenant_capability",
                "[publications] disables one binding of a tenant's capability at a time: \
                 fleet.bindings_per_tenant_capability must be at least 2",
            );
        }
        if self.load.processes() > 1 {
            return invalid(
                "load.processes",
                "[publications] run in one registry process: load.processes must be 1",
            );
        }
        Ok(())
    }
}
