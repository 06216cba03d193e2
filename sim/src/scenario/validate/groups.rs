//! Validation of the fleet's groups: `[[fleet.tenant_groups]]` and
//! `[[fleet.replica_groups]]`, the records they generate (the replica
//! group members) and those records' bounds, beside the fleet's listed
//! records checked in the parent module.

use std::collections::{BTreeMap, BTreeSet};

use super::{Check, Validator, bounded, ensure, fail, id_ok, ratio_ok};
use crate::limits::{DURATION_MS_MAX, REPLICAS_MAX};
use crate::scenario::location::At;
use crate::scenario::{InstanceSpec, VersionSpec, group_host, replica_host};

impl Validator<'_> {
    pub(super) fn tenant_groups(&self, versions: &BTreeMap<&str, &VersionSpec>) -> Check {
        let mut names = BTreeSet::new();
        for (n, g) in self.s.fleet.tenant_groups.iter().enumerate() {
            let at = g.span().start;
            let g = g.get_ref();
            id_ok(at, "tenant group", &g.name, connreg::TenantId::new)?;
            ensure(names.insert(g.name.as_str()), at, || {
                format!("duplicate tenant group {:?}", g.name)
            })?;
            let Some(version) = versions.get(g.version.as_str()) else {
                return fail(
                    at,
                    format!(
                        "tenant group {:?} names unknown version {:?}",
                        g.name, g.version
                    ),
                );
            };
            for c in &g.capabilities {
                ensure(version.capabilities.contains(c), at, || {
                    format!(
                        "tenant group {:?}: version {:?} does not implement {c:?}",
                        g.name, g.version
                    )
                })?;
            }
            if let Some(limit) = g.scope_limit {
                bounded(
                    At::Key(format!("fleet.tenant_groups.{n}.scope_limit")),
                    "scope_limit",
                    limit.into(),
                    1,
                    connreg::limits::SCOPE_LIMIT_MAX.into(),
                )?;
            }
        }
        Ok(())
    }

    pub(super) fn replica_groups(
        &self,
        instances: &BTreeMap<&str, &InstanceSpec>,
        replicas: &mut BTreeSet<String>,
        per_instance: &mut BTreeMap<String, (usize, usize)>,
    ) -> Check {
        let mut names = BTreeSet::new();
        let hosts: BTreeSet<String> = self
            .s
            .fleet
            .replicas
            .iter()
            .map(|r| replica_host(&r.get_ref().id))
            .collect();
        for ((n, entry), (_, members)) in self
            .s
            .fleet
            .replica_groups
            .iter()
            .enumerate()
            .zip(self.s.group_members())
        {
            let at = entry.span().start;
            let key = |name: &str| At::Key(format!("fleet.replica_groups.{n}.{name}"));
            let g = entry.get_ref();
            id_ok(at, "replica group", &g.name, connreg::ReplicaId::new)?;
            ensure(names.insert(g.name.as_str()), at, || {
                format!("duplicate replica group {:?}", g.name)
            })?;
            ensure(!hosts.contains(&group_host(&g.name)), at, || {
                format!("replica group {:?}: its host name is taken", g.name)
            })?;
            match (&g.instance, &g.tenants) {
                (Some(i), None) => ensure(instances.contains_key(i.as_str()), at, || {
                    format!("replica group {:?} names unknown instance {i:?}", g.name)
                })?,
                (None, Some(t)) => ensure(!self.s.group_tenants(t).is_empty(), at, || {
                    format!(
                        "replica group {:?} names unknown tenant group {t:?}",
                        g.name
                    )
                })?,
                _ => {
                    return fail(
                        at,
                        format!(
                            "replica group {:?} needs exactly one of `instance` and `tenants`",
                            g.name
                        ),
                    );
                }
            }
            ensure(
                !g.spread.is_empty() && g.spread.len() <= REPLICAS_MAX,
                key("spread"),
                || {
                    format!(
                        "replica group {:?}: spread must have 1 to {REPLICAS_MAX} placements",
                        g.name
                    )
                },
            )?;
            for p in &g.spread {
                id_ok(at, "region", &p.region, connreg::Region::new)?;
                id_ok(at, "zone", &p.zone, connreg::Zone::new)?;
            }
            id_ok(at, "class", &g.class, connreg::CapacityClass::new)?;
            bounded(
                key("capacity"),
                "capacity",
                g.capacity.into(),
                1,
                connreg::limits::REPLICA_CAPACITY_MAX.into(),
            )?;
            let beat = g.heartbeat_ms.unwrap_or(self.s.lifecycle.heartbeat_ms);
            bounded(
                key("heartbeat_ms"),
                "heartbeat_ms",
                beat,
                1,
                DURATION_MS_MAX,
            )?;
            ensure(
                beat < self.s.lifecycle.lease_ttl_ms,
                key("heartbeat_ms"),
                || {
                    format!(
                        "replica group {:?}: heartbeat_ms ({beat}) must be below lifecycle.lease_ttl_ms ({})",
                        g.name, self.s.lifecycle.lease_ttl_ms
                    )
                },
            )?;
            ensure(
                g.heartbeat_jitter_ms < beat,
                key("heartbeat_jitter_ms"),
                || {
                    format!(
                        "replica group {:?}: heartbeat_jitter_ms must be below heartbeat_ms ({beat})",
                        g.name
                    )
                },
            )?;
            ratio_ok(key("unknown_ratio"), "unknown_ratio", g.unknown_ratio)?;
            for m in &members {
                id_ok(at, "replica", &m.id, connreg::ReplicaId::new)?;
                ensure(replicas.insert(m.id.clone()), at, || {
                    format!("replica group {:?}: duplicate replica {:?}", g.name, m.id)
                })?;
                let e = per_instance.entry(m.instance.clone()).or_default();
                *e = (e.0 + 1, at);
            }
        }
        Ok(())
    }
}
