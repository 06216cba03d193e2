//! Scenario validation: everything the types alone do not check (ranges
//! and limits, references between records, schedules, hosts and fault
//! parameters), each error with where it is.
//!
//! This file holds the entry point, the shared checks (`ensure`, `id_ok`,
//! `bounded` and the like) and the validation of `[scenario]`,
//! `[registry]`, `[lifecycle]`, the fleet's listed records and the
//! workload with its operations. The other files:
//!
//! - `groups`: tenant and replica groups and the records they generate.
//! - `faults`: the fault schedule and chaos.

mod faults;
mod groups;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use connreg::CrossRegion;

use super::location::At;
use super::{InstanceSpec, Operation, OperationKind, Scenario, ScopeSpec, VersionSpec};
use crate::limits::{
    ACTIONS_PER_DISPATCHER_MAX, DISPATCHER_CONCURRENCY_MAX, DISPATCHERS_MAX, DUPLICATES_MAX,
    DURATION_MS_MAX, FLEET_RECORDS_MAX, FLEET_REPLICAS_MAX, LATENCY_MS_MAX, LIVENESS_MS_MAX,
    MIX_ENTRIES_MAX, OPERATIONS_EXPANDED_MAX, REACH_MAX, READERS_MAX, REGISTRY_HOSTS_MAX,
    REPLICAS_MAX, RETRIES_MAX, SCHEDULE_ENTRIES_MAX, SETUP_PUBLICATIONS_MAX, TICK_MS_MAX,
};

impl Scenario {
    /// Checks everything the types alone do not. Errors carry where the
    /// fault is: a byte offset of the entry, or the key's path.
    pub(super) fn validate(&self) -> Result<(), (At, String)> {
        let v = Validator { s: self };
        v.meta()?;
        v.fleet()?;
        v.workload()?;
        v.faults()?;
        v.chaos()?;
        crate::feasible::check(self).map_err(|(key, message)| (At::Key(key.into()), message))
    }
}

impl Scenario {
    /// [`validate`](Self::validate) for a scenario made in code (a swarm
    /// draw), which has no text for an error to point into.
    pub(crate) fn validate_made(&self) -> Result<(), String> {
        self.validate().map_err(|(_, message)| message)
    }
}

struct Validator<'a> {
    s: &'a Scenario,
}

type Check = Result<(), (At, String)>;

fn fail<T>(at: impl Into<At>, message: impl fmt::Display) -> Result<T, (At, String)> {
    Err((at.into(), message.to_string()))
}

fn ensure(cond: bool, at: impl Into<At>, message: impl FnOnce() -> String) -> Check {
    if cond {
        Ok(())
    } else {
        Err((at.into(), message()))
    }
}

fn id_ok<T>(at: usize, what: &str, value: &str, make: fn(String) -> connreg::Result<T>) -> Check {
    match make(value.to_string()) {
        Ok(_) => Ok(()),
        Err(e) => fail(at, format!("{what} {value:?}: {e}")),
    }
}

fn ratio_ok(at: impl Into<At>, what: &str, v: f64) -> Check {
    let at = at.into().or_named(what);
    ensure((0.0..=1.0).contains(&v), at, || {
        format!("{what} must be between 0 and 1, got {v}")
    })
}

fn range_ok(at: impl Into<At>, what: &str, r: [u64; 2], max: u64) -> Check {
    let at = at.into().or_named(what);
    ensure(r[0] <= r[1], at.clone(), || {
        format!("{what} must be [min, max] with min <= max")
    })?;
    ensure(r[1] <= max, at, || {
        format!("{what} exceeds its limit of {max}")
    })
}

fn bounded(at: impl Into<At>, what: &str, v: u64, min: u64, max: u64) -> Check {
    let at = at.into().or_named(what);
    ensure(v >= min && v <= max, at, || {
        format!("{what} must be between {min} and {max}, got {v}")
    })
}

impl Validator<'_> {
    fn meta(&self) -> Check {
        let m = &self.s.scenario;
        bounded(
            At::Named,
            "scenario.duration_ms",
            m.duration_ms,
            1,
            DURATION_MS_MAX,
        )?;
        bounded(
            At::Named,
            "scenario.liveness_ms",
            m.liveness_ms,
            1,
            LIVENESS_MS_MAX,
        )?;
        bounded(At::Named, "scenario.tick_ms", m.tick_ms, 1, TICK_MS_MAX)?;
        range_ok(
            At::Named,
            "scenario.latency_ms",
            m.latency_ms,
            LATENCY_MS_MAX,
        )?;
        let r = &self.s.registry;
        bounded(
            At::Named,
            "registry.hosts",
            r.hosts.into(),
            1,
            REGISTRY_HOSTS_MAX.into(),
        )?;
        bounded(
            At::Named,
            "registry.circuit_threshold",
            r.circuit_threshold.into(),
            1,
            connreg::limits::CIRCUIT_THRESHOLD_MAX.into(),
        )?;
        if let Some(within) = self.s.expect.offline_within_ms {
            bounded(
                At::Named,
                "expect.offline_within_ms",
                within,
                1,
                DURATION_MS_MAX,
            )?;
        }
        self.reach()?;
        if let Some(within) = self.s.expect.publish_within_ms {
            bounded(
                At::Named,
                "expect.publish_within_ms",
                within,
                1,
                crate::limits::PUBLISH_WITHIN_MS,
            )?;
        }
        let l = &self.s.lifecycle;
        bounded(
            At::Named,
            "lifecycle.heartbeat_ms",
            l.heartbeat_ms,
            1,
            DURATION_MS_MAX,
        )?;
        bounded(
            At::Named,
            "lifecycle.lease_ttl_ms",
            l.lease_ttl_ms,
            1,
            connreg::limits::LEASE_TTL_MS_MAX,
        )?;
        bounded(
            At::Named,
            "lifecycle.maintenance_ms",
            l.maintenance_ms,
            1,
            DURATION_MS_MAX,
        )?;
        bounded(
            At::Named,
            "lifecycle.maintenance_batch",
            l.maintenance_batch.into(),
            1,
            connreg::limits::LEASE_MAINTENANCE_BATCH_MAX.into(),
        )
    }

    /// `[expect] reach`: every name a probe of the catalogue, none twice,
    /// at most `REACH_MAX`.
    fn reach(&self) -> Check {
        let reach = &self.s.expect.reach;
        ensure(
            reach.len() <= REACH_MAX,
            At::Key("expect.reach".into()),
            || {
                format!(
                    "expect.reach has {} entries, more than {REACH_MAX}",
                    reach.len()
                )
            },
        )?;
        let mut seen = BTreeSet::new();
        for (i, name) in reach.iter().enumerate() {
            let at = At::Key(format!("expect.reach.{i}"));
            ensure(crate::probes::known(name), at.clone(), || {
                let names: Vec<String> = crate::probes::catalog().into_iter().collect();
                format!(
                    "expect.reach: unknown probe {name:?}; the probes are: {}",
                    names.join(", ")
                )
            })?;
            ensure(seen.insert(name), at, || {
                format!("expect.reach names {name:?} twice")
            })?;
        }
        Ok(())
    }

    fn fleet(&self) -> Check {
        let f = &self.s.fleet;
        for (what, n) in [
            ("fleet.types", f.types.len()),
            ("fleet.versions", f.versions.len()),
            ("fleet.instances", f.instances.len()),
            ("fleet.scopes", f.scopes.len()),
            ("fleet.bindings", f.bindings.len()),
        ] {
            ensure(n <= FLEET_RECORDS_MAX, 0, || {
                format!("{what} has {n} entries, more than {FLEET_RECORDS_MAX}")
            })?;
        }
        ensure(f.replicas.len() <= REPLICAS_MAX, 0, || {
            format!(
                "fleet.replicas has more than {REPLICAS_MAX} entries (use fleet.replica_groups for more)"
            )
        })?;
        let total = self.s.replica_count();
        ensure((1..=FLEET_REPLICAS_MAX).contains(&total), 0, || {
            format!(
                "the fleet must have 1 to {FLEET_REPLICAS_MAX} replicas (fleet.replicas and fleet.replica_groups), got {total}"
            )
        })?;
        let mut seen = BTreeSet::new();
        let mut types = BTreeSet::new();
        for t in &f.types {
            let at = t.span().start;
            id_ok(at, "type", &t.get_ref().id, connreg::ConnectorTypeId::new)?;
            ensure(types.insert(t.get_ref().id.clone()), at, || {
                format!("duplicate type {:?}", t.get_ref().id)
            })?;
        }
        let mut versions: BTreeMap<&str, &VersionSpec> = BTreeMap::new();
        for v in &f.versions {
            let at = v.span().start;
            let v = v.get_ref();
            id_ok(at, "version", &v.id, connreg::VersionId::new)?;
            ensure(types.contains(&v.connector_type), at, || {
                format!(
                    "version {:?} names unknown type {:?}",
                    v.id, v.connector_type
                )
            })?;
            ensure(!v.capabilities.is_empty(), at, || {
                format!("version {:?} implements no capability", v.id)
            })?;
            ensure(
                v.capabilities.len() <= connreg::limits::VERSION_CAPABILITIES_MAX,
                at,
                || format!("version {:?} has too many capabilities", v.id),
            )?;
            for c in &v.capabilities {
                id_ok(at, "capability", c, connreg::CapabilityId::new)?;
            }
            for p in &v.profiles {
                id_ok(at, "profile", p, connreg::ProfileId::new)?;
            }
            ensure(versions.insert(&v.id, v).is_none(), at, || {
                format!("duplicate version {:?}", v.id)
            })?;
        }
        self.tenant_groups(&versions)?;
        let mut instances: BTreeMap<&str, &InstanceSpec> = BTreeMap::new();
        for i in self.s.all_instances() {
            let at = i.span().start;
            let i = i.get_ref();
            id_ok(at, "instance", &i.id, connreg::InstanceId::new)?;
            id_ok(at, "tenant", &i.tenant, connreg::TenantId::new)?;
            ensure(versions.contains_key(i.version.as_str()), at, || {
                format!("instance {:?} names unknown version {:?}", i.id, i.version)
            })?;
            ensure(instances.insert(&i.id, i).is_none(), at, || {
                format!("duplicate instance {:?}", i.id)
            })?;
        }
        let mut scopes: BTreeMap<&str, &ScopeSpec> = BTreeMap::new();
        for (i, s) in self.s.all_scopes().enumerate() {
            let at = s.span().start;
            let s = s.get_ref();
            id_ok(at, "scope", &s.id, connreg::ScopeId::new)?;
            id_ok(at, "tenant", &s.tenant, connreg::TenantId::new)?;
            // A limit of 0 admits nothing: every route through the scope
            // fails, which is a scenario mistake, not a behaviour to prove.
            ensure(
                s.limit >= 1 && s.limit <= connreg::limits::SCOPE_LIMIT_MAX,
                At::Key(format!("fleet.scopes.{i}.limit")),
                || {
                    format!(
                        "scope {:?} limit must be 1 to {}, got {}",
                        s.id,
                        connreg::limits::SCOPE_LIMIT_MAX,
                        s.limit
                    )
                },
            )?;
            ensure(scopes.insert(&s.id, s).is_none(), at, || {
                format!("duplicate scope {:?}", s.id)
            })?;
        }
        let mut per_capability: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        for b in self.s.all_bindings() {
            let at = b.span().start;
            let b = b.get_ref();
            id_ok(at, "binding", &b.id, connreg::BindingId::new)?;
            ensure(seen.insert(b.id.clone()), at, || {
                format!("duplicate binding {:?}", b.id)
            })?;
            let Some(instance) = instances.get(b.instance.as_str()) else {
                return fail(
                    at,
                    format!("binding {:?} names unknown instance {:?}", b.id, b.instance),
                );
            };
            ensure(instance.tenant == b.tenant, at, || {
                format!(
                    "binding {:?}: tenant {:?} does not own instance {:?}",
                    b.id, b.tenant, b.instance
                )
            })?;
            let declared = versions
                .values()
                .any(|v| v.capabilities.contains(&b.capability));
            ensure(declared, at, || {
                format!(
                    "binding {:?} names capability {:?}, which no version implements",
                    b.id, b.capability
                )
            })?;
            let n = per_capability
                .entry((b.tenant.as_str(), b.capability.as_str()))
                .or_default();
            *n += 1;
            ensure(
                *n <= connreg::limits::TENANT_CAPABILITY_BINDINGS_MAX,
                at,
                || {
                    format!(
                        "binding {:?}: tenant {:?} has more than {} bindings of capability {:?} \
                         (connreg::limits::TENANT_CAPABILITY_BINDINGS_MAX)",
                        b.id,
                        b.tenant,
                        connreg::limits::TENANT_CAPABILITY_BINDINGS_MAX,
                        b.capability
                    )
                },
            )?;
            ensure(
                b.scopes.len() <= connreg::limits::BINDING_SCOPES_MAX,
                at,
                || format!("binding {:?} has too many scopes", b.id),
            )?;
            for s in &b.scopes {
                let Some(scope) = scopes.get(s.as_str()) else {
                    return fail(at, format!("binding {:?} names unknown scope {s:?}", b.id));
                };
                ensure(scope.tenant == b.tenant, at, || {
                    format!("binding {:?}: scope {s:?} belongs to another tenant", b.id)
                })?;
            }
        }
        let mut replicas = BTreeSet::new();
        for (i, r) in f.replicas.iter().enumerate() {
            let at = r.span().start;
            let r = r.get_ref();
            id_ok(at, "replica", &r.id, connreg::ReplicaId::new)?;
            id_ok(at, "region", &r.region, connreg::Region::new)?;
            id_ok(at, "zone", &r.zone, connreg::Zone::new)?;
            id_ok(at, "class", &r.class, connreg::CapacityClass::new)?;
            ensure(instances.contains_key(r.instance.as_str()), at, || {
                format!("replica {:?} names unknown instance {:?}", r.id, r.instance)
            })?;
            ensure(
                r.capacity >= 1 && r.capacity <= connreg::limits::REPLICA_CAPACITY_MAX,
                At::Key(format!("fleet.replicas.{i}.capacity")),
                || {
                    format!(
                        "replica {:?} capacity must be 1 to {}",
                        r.id,
                        connreg::limits::REPLICA_CAPACITY_MAX
                    )
                },
            )?;
            ratio_ok(
                At::Key(format!("fleet.replicas.{i}.unknown_ratio")),
                "unknown_ratio",
                r.unknown_ratio,
            )?;
            ensure(replicas.insert(r.id.clone()), at, || {
                format!("duplicate replica {:?}", r.id)
            })?;
        }
        // Replicas per instance, and where the last one was declared.
        let mut per_instance: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for r in &f.replicas {
            let e = per_instance
                .entry(r.get_ref().instance.clone())
                .or_default();
            *e = (e.0 + 1, r.span().start);
        }
        self.replica_groups(&instances, &mut replicas, &mut per_instance)?;
        for (instance, (n, at)) in per_instance {
            ensure(n <= connreg::limits::INSTANCE_REPLICAS_MAX, at, || {
                format!(
                    "instance {instance:?} has {n} replicas, more than {} (connreg::limits::INSTANCE_REPLICAS_MAX)",
                    connreg::limits::INSTANCE_REPLICAS_MAX
                )
            })?;
        }
        let definitions: BTreeSet<&String> = f
            .versions
            .iter()
            .flat_map(|v| &v.get_ref().capabilities)
            .collect();
        let changes = f.types.len()
            + definitions.len()
            + f.versions.len()
            + instances.len()
            + scopes.len()
            + seen.len();
        let most = SETUP_PUBLICATIONS_MAX * connreg::limits::PUBLICATION_CHANGES_MAX;
        ensure(changes <= most, 0, || {
            format!(
                "the fleet's setup takes {changes} changes, more than {SETUP_PUBLICATIONS_MAX} publications of {} (connreg::limits::PUBLICATION_CHANGES_MAX)",
                connreg::limits::PUBLICATION_CHANGES_MAX
            )
        })
    }

    fn workload(&self) -> Check {
        let w = &self.s.workload;
        bounded(
            At::Named,
            "workload.dispatchers",
            w.dispatchers.into(),
            1,
            DISPATCHERS_MAX.into(),
        )?;
        bounded(
            At::Named,
            "workload.actions",
            w.actions.into(),
            1,
            ACTIONS_PER_DISPATCHER_MAX.into(),
        )?;
        let mut listed = std::collections::BTreeSet::new();
        for entry in &w.only_actions {
            let what = "workload.only_actions";
            let Some((index, n)) = super::schema::only_action(entry) else {
                return fail(
                    At::Named.or_named(what),
                    format!("{what}: {entry:?} is not of the form \"dispatcher-<i>:<n>\""),
                );
            };
            ensure(index < w.dispatchers, At::Named.or_named(what), || {
                format!(
                    "{what}: {entry:?} names a dispatcher past the {} the workload has (dispatcher-0 to dispatcher-{})",
                    w.dispatchers,
                    w.dispatchers.saturating_sub(1)
                )
            })?;
            ensure(n >= 1 && n <= w.actions, At::Named.or_named(what), || {
                format!(
                    "{what}: {entry:?} names action {n}; each dispatcher starts actions 1 to {}",
                    w.actions
                )
            })?;
            ensure(listed.insert((index, n)), At::Named.or_named(what), || {
                format!("{what}: {entry:?} is listed twice")
            })?;
        }
        bounded(
            At::Named,
            "workload.concurrency",
            w.concurrency.into(),
            1,
            DISPATCHER_CONCURRENCY_MAX.into(),
        )?;
        bounded(
            At::Named,
            "workload.start_ms",
            w.start_ms,
            0,
            self.s.scenario.duration_ms,
        )?;
        range_ok(
            At::Named,
            "workload.start_gap_ms",
            w.start_gap_ms,
            DURATION_MS_MAX,
        )?;
        range_ok(At::Named, "workload.exec_ms", w.exec_ms, DURATION_MS_MAX)?;
        bounded(
            At::Named,
            "workload.rpc_timeout_ms",
            w.rpc_timeout_ms,
            1,
            DURATION_MS_MAX,
        )?;
        bounded(
            At::Named,
            "workload.dispatch_timeout_ms",
            w.dispatch_timeout_ms,
            1,
            DURATION_MS_MAX,
        )?;
        bounded(
            At::Named,
            "workload.backoff_ms",
            w.backoff_ms,
            1,
            DURATION_MS_MAX,
        )?;
        bounded(
            At::Named,
            "workload.duplicates",
            w.duplicates.into(),
            1,
            DUPLICATES_MAX.into(),
        )?;
        bounded(
            At::Named,
            "workload.shared_pool",
            w.shared_pool.into(),
            0,
            1_000_000,
        )?;
        for (what, r) in [
            ("workload.duplicate_ratio", w.duplicate_ratio),
            ("workload.shared_ratio", w.shared_ratio),
            ("workload.cancel_ratio", w.cancel_ratio),
            ("workload.reconcile_ratio", w.reconcile_ratio),
            ("workload.repeat_settle_ratio", w.repeat_settle_ratio),
            ("workload.stale_settle_ratio", w.stale_settle_ratio),
        ] {
            ratio_ok(At::Named, what, r)?;
        }
        ensure(w.shared_ratio == 0.0 || w.shared_pool > 0, 0, || {
            "workload.shared_ratio needs workload.shared_pool > 0".into()
        })?;
        for (what, n) in [
            ("workload.capacity_retries", w.capacity_retries),
            ("workload.unavailable_retries", w.unavailable_retries),
            ("workload.dispatch_retries", w.dispatch_retries),
        ] {
            bounded(At::Named, what, n.into(), 0, RETRIES_MAX.into())?;
        }
        ensure(
            !w.mix.is_empty() && w.mix.len() <= MIX_ENTRIES_MAX,
            0,
            || format!("workload.mix must have 1 to {MIX_ENTRIES_MAX} entries"),
        )?;
        let tenants: BTreeSet<&str> = self
            .s
            .all_instances()
            .map(|i| i.get_ref().tenant.as_str())
            .collect();
        let group = |at: usize, name: &Option<String>| -> Check {
            match name {
                Some(g) => ensure(!self.s.group_tenants(g).is_empty(), at, || {
                    format!("unknown tenant group {g:?}")
                }),
                None => Ok(()),
            }
        };
        for m in &w.mix {
            let at = m.span().start;
            let m = m.get_ref();
            ensure(m.tenant.is_empty() != m.tenants.is_none(), at, || {
                "a mix entry needs exactly one of `tenant` and `tenants`".into()
            })?;
            group(at, &m.tenants)?;
            if m.tenants.is_none() {
                id_ok(at, "tenant", &m.tenant, connreg::TenantId::new)?;
            }
            id_ok(at, "capability", &m.capability, connreg::CapabilityId::new)?;
            id_ok(at, "class", &m.class, connreg::CapacityClass::new)?;
            if let Some(r) = &m.region {
                id_ok(at, "region", r, connreg::Region::new)?;
            }
            if let Some(z) = &m.zone {
                id_ok(at, "zone", z, connreg::Zone::new)?;
            }
            ensure(m.weight >= 1, at, || "mix weight must be at least 1".into())?;
            ensure(
                m.cross_region == CrossRegion::Allowed || m.region.is_some(),
                at,
                || "cross_region = \"forbidden\" needs a region".into(),
            )?;
        }
        ensure(w.readers.len() <= READERS_MAX, 0, || {
            format!("workload.readers has more than {READERS_MAX} entries")
        })?;
        for (i, r) in w.readers.iter().enumerate() {
            let at = r.span().start;
            let r = r.get_ref();
            ensure(r.reader.is_empty() != r.tenants.is_none(), at, || {
                "a reader needs exactly one of `reader` and `tenants`".into()
            })?;
            group(at, &r.tenants)?;
            if r.tenants.is_none()
                && !matches!(
                    r.reader.as_str(),
                    "internal" | "internal-unbound" | "anonymous"
                )
            {
                id_ok(at, "reader tenant", &r.reader, connreg::TenantId::new)?;
                ensure(tenants.contains(r.reader.as_str()), at, || {
                    format!("reader {:?} is no tenant of the fleet", r.reader)
                })?;
            }
            bounded(
                At::Key(format!("workload.readers.{i}.page_items")),
                "page_items",
                r.page_items.into(),
                1,
                connreg::limits::PAGE_ITEMS_MAX.into(),
            )?;
            bounded(
                At::Key(format!("workload.readers.{i}.every_ms")),
                "every_ms",
                r.every_ms,
                1,
                DURATION_MS_MAX,
            )?;
        }
        ensure(w.operations.len() <= SCHEDULE_ENTRIES_MAX, 0, || {
            format!("workload.operations has more than {SCHEDULE_ENTRIES_MAX} entries")
        })?;
        let mut expanded = 0usize;
        for o in &w.operations {
            let at = o.span().start;
            let o = o.get_ref();
            self.operation(at, o)?;
            expanded = expanded.saturating_add(o.times(self.s.scenario.duration_ms));
            ensure(expanded <= OPERATIONS_EXPANDED_MAX, at, || {
                format!(
                    "workload.operations expand to more than {OPERATIONS_EXPANDED_MAX} operator actions with their repeats"
                )
            })?;
        }
        Ok(())
    }

    fn operation(&self, at: usize, o: &Operation) -> Check {
        let f = &self.s.fleet;
        ensure(o.at_ms <= self.s.scenario.duration_ms, at, || {
            "operation at_ms is after scenario.duration_ms".into()
        })?;
        if let Some(every) = o.every_ms {
            ensure(every >= 1, at, || {
                "operation every_ms must be at least 1".into()
            })?;
        }
        if let Some(until) = o.until_ms {
            ensure(o.every_ms.is_some(), at, || {
                "operation until_ms needs every_ms".into()
            })?;
            ensure(
                until >= o.at_ms && until <= self.s.scenario.duration_ms,
                at,
                || "operation until_ms must be from at_ms to scenario.duration_ms".into(),
            )?;
        }
        let has = |name: &str, present: bool| -> Check {
            ensure(present, at, || {
                format!("operation {:?} needs `{name}`", o.op)
            })
        };
        let allowed: &[&str] = match o.op {
            OperationKind::Drain | OperationKind::CircuitClose => {
                let r = o.replica.as_deref().unwrap_or_default();
                has("replica", o.replica.is_some())?;
                let listed = f.replicas.iter().any(|x| x.get_ref().id == r);
                let grouped = || {
                    self.s
                        .group_members()
                        .iter()
                        .any(|(_, m)| m.iter().any(|m| m.id == r))
                };
                ensure(listed || grouped(), at, || format!("unknown replica {r:?}"))?;
                &["replica"]
            }
            OperationKind::SetBinding => {
                let b = o.binding.as_deref().unwrap_or_default();
                has("binding", o.binding.is_some())?;
                has("enabled", o.enabled.is_some())?;
                ensure(
                    self.s.all_bindings().any(|x| x.get_ref().id == b),
                    at,
                    || format!("unknown binding {b:?}"),
                )?;
                &["binding", "enabled"]
            }
            OperationKind::SetInstance => {
                let i = o.instance.as_deref().unwrap_or_default();
                has("instance", o.instance.is_some())?;
                has("enabled", o.enabled.is_some())?;
                ensure(
                    self.s.all_instances().any(|x| x.get_ref().id == i),
                    at,
                    || format!("unknown instance {i:?}"),
                )?;
                &["instance", "enabled"]
            }
            OperationKind::SetType => {
                let t = o.connector_type.as_deref().unwrap_or_default();
                has("type", o.connector_type.is_some())?;
                has("enabled", o.enabled.is_some())?;
                ensure(f.types.iter().any(|x| x.get_ref().id == t), at, || {
                    format!("unknown type {t:?}")
                })?;
                &["type", "enabled"]
            }
            OperationKind::SetVersion => {
                let v = o.version.as_deref().unwrap_or_default();
                has("version", o.version.is_some())?;
                has("active", o.active.is_some())?;
                has("qualified", o.qualified.is_some())?;
                ensure(f.versions.iter().any(|x| x.get_ref().id == v), at, || {
                    format!("unknown version {v:?}")
                })?;
                &["version", "active", "qualified"]
            }
            OperationKind::Touch => {
                let c = o.capability.as_deref().unwrap_or_default();
                has("capability", o.capability.is_some())?;
                let known = f
                    .versions
                    .iter()
                    .any(|v| v.get_ref().capabilities.iter().any(|x| x == c));
                ensure(known, at, || format!("unknown capability {c:?}"))?;
                &["capability"]
            }
            OperationKind::SetScope => {
                let sc = o.scope.as_deref().unwrap_or_default();
                has("scope", o.scope.is_some())?;
                has("limit", o.limit.is_some())?;
                ensure(
                    self.s.all_scopes().any(|x| x.get_ref().id == sc),
                    at,
                    || format!("unknown scope {sc:?}"),
                )?;
                let limit = o.limit.unwrap_or(0);
                ensure(
                    (1..=connreg::limits::SCOPE_LIMIT_MAX).contains(&limit),
                    at,
                    || {
                        format!(
                            "set_scope limit must be 1 to {}, got {limit}",
                            connreg::limits::SCOPE_LIMIT_MAX
                        )
                    },
                )?;
                &["scope", "limit"]
            }
        };
        let present = [
            ("replica", o.replica.is_some()),
            ("binding", o.binding.is_some()),
            ("instance", o.instance.is_some()),
            ("type", o.connector_type.is_some()),
            ("version", o.version.is_some()),
            ("capability", o.capability.is_some()),
            ("scope", o.scope.is_some()),
            ("limit", o.limit.is_some()),
            ("enabled", o.enabled.is_some()),
            ("active", o.active.is_some()),
            ("qualified", o.qualified.is_some()),
        ];
        for (name, is) in present {
            ensure(!is || allowed.contains(&name), at, || {
                format!("operation {:?} does not take `{name}`", o.op)
            })?;
        }
        Ok(())
    }
}
