//! What a scenario's groups stand for: the tenants, instances, scopes and
//! bindings a `[[fleet.tenant_groups]]` entry generates, and the replicas
//! of a `[[fleet.replica_groups]]` entry. Generated records carry their
//! group entry's span, so an error in one names the group's line.
//!
//! Counts are checked against their bounds before anything is generated:
//! a typo of a few zeros is refused, not allocated.

use std::collections::BTreeMap;

use toml::Spanned;

use super::location::At;
use super::{BindingSpec, InstanceSpec, ReplicaGroup, Scenario, ScopeSpec};
use crate::limits::{
    GENERATED_RECORDS_MAX, GROUP_PORT_BASE, GROUP_REPLICAS_MAX, REPLICA_GROUPS_MAX,
    TENANT_GROUPS_MAX,
};

/// The records the tenant groups generate.
#[derive(Debug, Clone, Default)]
pub struct Generated {
    /// Instances, in group then tenant then instance order.
    pub instances: Vec<Spanned<InstanceSpec>>,
    /// One scope per tenant of a group with `scope_limit`.
    pub scopes: Vec<Spanned<ScopeSpec>>,
    /// Bindings.
    pub bindings: Vec<Spanned<BindingSpec>>,
    /// Each group's tenants, in order.
    pub tenants: BTreeMap<String, Vec<String>>,
    /// Each group's instances, in order.
    pub instances_of: BTreeMap<String, Vec<String>>,
}

/// One replica of a replica group.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupMember {
    /// The replica's ID, `<group>-<i>`.
    pub id: String,
    /// Its number in the group, from 0.
    pub index: u32,
    /// The instance it serves.
    pub instance: String,
    /// Region.
    pub region: String,
    /// Zone.
    pub zone: String,
    /// The port it answers on, on its group's host.
    pub port: u16,
}

/// `{i}` of a pattern, zero-padded to the width of the largest number.
fn numbered(pattern: &str, i: u32, count: u32) -> String {
    let width = count.saturating_sub(1).max(1).to_string().len();
    pattern.replacen("{i}", &format!("{i:0width$}"), 1)
}

/// The host that simulates replica group `name`.
pub fn group_host(name: &str) -> String {
    format!("fleet-{name}")
}

impl ReplicaGroup {
    /// The group's replicas, in order. `instances_of` gives a tenant
    /// group's instances.
    pub fn members(&self, instances_of: &BTreeMap<String, Vec<String>>) -> Vec<GroupMember> {
        let instances: Vec<String> = match (&self.instance, &self.tenants) {
            (Some(i), _) => vec![i.clone()],
            (None, Some(g)) => instances_of.get(g).cloned().unwrap_or_default(),
            (None, None) => Vec::new(),
        };
        if instances.is_empty() || self.spread.is_empty() {
            return Vec::new();
        }
        (0..self.count)
            .map(|i| {
                let place = &self.spread[i as usize % self.spread.len()];
                GroupMember {
                    id: numbered(&format!("{}-{{i}}", self.name), i, self.count),
                    index: i,
                    instance: instances[i as usize % instances.len()].clone(),
                    region: place.region.clone(),
                    zone: place.zone.clone(),
                    port: GROUP_PORT_BASE + i as u16,
                }
            })
            .collect()
    }
}

impl Scenario {
    /// Generates the tenant groups' records into `self.generated`, after
    /// checking the groups' counts against their bounds.
    pub(super) fn generate(&mut self) -> Result<(), (At, String)> {
        let f = &self.fleet;
        if f.tenant_groups.len() > TENANT_GROUPS_MAX {
            return Err((
                At::Key("fleet.tenant_groups".into()),
                format!(
                    "fleet.tenant_groups has {} entries, more than {TENANT_GROUPS_MAX}",
                    f.tenant_groups.len()
                ),
            ));
        }
        if f.replica_groups.len() > REPLICA_GROUPS_MAX {
            return Err((
                At::Key("fleet.replica_groups".into()),
                format!(
                    "fleet.replica_groups has {} entries, more than {REPLICA_GROUPS_MAX}",
                    f.replica_groups.len()
                ),
            ));
        }
        for (n, g) in f.replica_groups.iter().enumerate() {
            let count = g.get_ref().count;
            if count == 0 || count as usize > GROUP_REPLICAS_MAX {
                return Err((
                    At::Key(format!("fleet.replica_groups.{n}.count")),
                    format!(
                        "replica group {:?} count must be 1 to {GROUP_REPLICAS_MAX}, got {count}",
                        g.get_ref().name
                    ),
                ));
            }
        }
        let mut total: u64 = 0;
        for (n, g) in f.tenant_groups.iter().enumerate() {
            let g = g.get_ref();
            let caps = if g.capabilities.is_empty() {
                f.versions
                    .iter()
                    .find(|v| v.get_ref().id == g.version)
                    .map(|v| v.get_ref().capabilities.len())
                    .unwrap_or(1)
            } else {
                g.capabilities.len()
            } as u64;
            let per_tenant = 1 + u64::from(g.instances) * (1 + caps);
            total = total.saturating_add(u64::from(g.count).saturating_mul(per_tenant));
            if g.count == 0 || g.instances == 0 || total > GENERATED_RECORDS_MAX as u64 {
                return Err((
                    At::Key(format!("fleet.tenant_groups.{n}.count")),
                    format!(
                        "tenant group {:?}: count and instances must be at least 1, and the \
                         groups may generate at most {GENERATED_RECORDS_MAX} records (tenants, \
                         instances, scopes and bindings); this one brings the total to {total}",
                        g.name
                    ),
                ));
            }
            if let Some(p) = &g.pattern
                && p.matches("{i}").count() != 1
            {
                return Err((
                    At::Key(format!("fleet.tenant_groups.{n}.pattern")),
                    format!("tenant group {:?}: pattern must hold `{{i}}` once", g.name),
                ));
            }
        }
        let mut out = Generated::default();
        for entry in &f.tenant_groups {
            let span = entry.span();
            let g = entry.get_ref();
            let capabilities: Vec<String> = if g.capabilities.is_empty() {
                f.versions
                    .iter()
                    .find(|v| v.get_ref().id == g.version)
                    .map(|v| v.get_ref().capabilities.clone())
                    .unwrap_or_default()
            } else {
                g.capabilities.clone()
            };
            let pattern = g
                .pattern
                .clone()
                .unwrap_or_else(|| format!("{}-{{i}}", g.name));
            let mut tenants = Vec::new();
            let mut instances = Vec::new();
            for t in 0..g.count {
                let tenant = numbered(&pattern, t, g.count);
                let scope = g.scope_limit.map(|limit| ScopeSpec {
                    id: format!("{tenant}-scope"),
                    tenant: tenant.clone(),
                    kind: connreg::ScopeKind::Tenant,
                    limit,
                });
                for k in 0..g.instances {
                    let instance = format!("{tenant}-i{k}");
                    out.instances.push(Spanned::new(
                        span.clone(),
                        InstanceSpec {
                            id: instance.clone(),
                            tenant: tenant.clone(),
                            version: g.version.clone(),
                            enabled: true,
                        },
                    ));
                    for (c, capability) in capabilities.iter().enumerate() {
                        out.bindings.push(Spanned::new(
                            span.clone(),
                            BindingSpec {
                                id: format!("{tenant}-b{c}-{k}"),
                                tenant: tenant.clone(),
                                capability: capability.clone(),
                                instance: instance.clone(),
                                priority: k,
                                scopes: scope.iter().map(|s| s.id.clone()).collect(),
                                enabled: true,
                            },
                        ));
                    }
                    instances.push(instance);
                }
                if let Some(scope) = scope {
                    out.scopes.push(Spanned::new(span.clone(), scope));
                }
                tenants.push(tenant);
            }
            out.tenants.insert(g.name.clone(), tenants);
            out.instances_of.insert(g.name.clone(), instances);
        }
        self.generated = out;
        Ok(())
    }

    /// Every instance: listed, then generated.
    pub fn all_instances(&self) -> impl Iterator<Item = &Spanned<InstanceSpec>> {
        self.fleet.instances.iter().chain(&self.generated.instances)
    }

    /// Every scope: listed, then generated.
    pub fn all_scopes(&self) -> impl Iterator<Item = &Spanned<ScopeSpec>> {
        self.fleet.scopes.iter().chain(&self.generated.scopes)
    }

    /// Every binding: listed, then generated.
    pub fn all_bindings(&self) -> impl Iterator<Item = &Spanned<BindingSpec>> {
        self.fleet.bindings.iter().chain(&self.generated.bindings)
    }

    /// The tenants of tenant group `name`.
    pub fn group_tenants(&self, name: &str) -> &[String] {
        self.generated
            .tenants
            .get(name)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// Every replica group with its members.
    pub fn group_members(&self) -> Vec<(&ReplicaGroup, Vec<GroupMember>)> {
        self.fleet
            .replica_groups
            .iter()
            .map(|g| {
                let g = g.get_ref();
                (g, g.members(&self.generated.instances_of))
            })
            .collect()
    }

    /// How many replicas the scenario runs, listed and in groups.
    pub fn replica_count(&self) -> usize {
        self.fleet.replicas.len()
            + self
                .fleet
                .replica_groups
                .iter()
                .map(|g| g.get_ref().count as usize)
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::numbered;

    #[test]
    fn numbers_are_padded_to_the_widest() {
        assert_eq!(numbered("t-{i}", 7, 100), "t-07");
        assert_eq!(numbered("t-{i}", 99, 100), "t-99");
        assert_eq!(numbered("t-{i}", 0, 1), "t-0");
        assert_eq!(numbered("a{i}b", 3, 1000), "a003b");
    }
}
