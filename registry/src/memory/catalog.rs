//! Published records, their indexes, publication and catalog pages.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use crate::catalog::{CatalogPage, PlannedQuery, Reader};
use crate::error::{Error, Result};
use crate::id::{
    BindingId, CapabilityId, ConnectorTypeId, InstanceId, ProfileId, ScopeId, TenantId, VersionId,
};
use crate::limits::TENANT_CAPABILITY_BINDINGS_MAX;
use crate::records::{
    AdmissionScope, Binding, CapabilityDefinition, ConnectorType, ConnectorVersion, Instance,
    Revision,
};
use crate::request::{Change, Publication};

use super::live::LiveState;

/// The published catalog. Replaced whole by each publication.
#[derive(Debug, Default, Clone)]
pub(crate) struct CatalogState {
    pub(crate) revision: Revision,
    pub(crate) types: BTreeMap<ConnectorTypeId, ConnectorType>,
    pub(crate) versions: BTreeMap<VersionId, ConnectorVersion>,
    pub(crate) definitions: BTreeMap<CapabilityId, CapabilityDefinition>,
    pub(crate) instances: BTreeMap<InstanceId, Instance>,
    pub(crate) bindings: BTreeMap<BindingId, Binding>,
    pub(crate) scopes: BTreeMap<ScopeId, AdmissionScope>,
    /// (tenant, capability) → bindings: the routing and tenant-read index.
    pub(crate) bindings_by_tenant_capability:
        BTreeMap<(TenantId, CapabilityId), BTreeSet<BindingId>>,
    /// capability → bindings of any tenant: internal reads.
    pub(crate) bindings_by_capability: BTreeMap<CapabilityId, BTreeSet<BindingId>>,
    /// capability → versions implementing it: internal unbound reads.
    pub(crate) versions_by_capability: BTreeMap<CapabilityId, BTreeSet<VersionId>>,
}

impl CatalogState {
    /// Applies a publication to a copy; the copy replaces the catalog only
    /// when every change and reference checks out (CAT-2).
    pub(crate) fn apply(
        &self,
        publication: &Publication,
        _live: &LiveState,
    ) -> Result<CatalogState> {
        let mut next = self.clone();
        for change in &publication.changes {
            next.apply_one(change)?;
        }
        for change in &publication.changes {
            next.check_references(change)?;
        }
        next.revision = Revision(self.revision.0 + 1);
        Ok(next)
    }

    fn apply_one(&mut self, change: &Change) -> Result<()> {
        match change {
            Change::UpsertType(t) => {
                self.types.insert(t.id.clone(), t.clone());
            }
            Change::AdmitVersion(v) => {
                if let Some(old) = self.versions.get(&v.id)
                    && !old.same_artifact(v)
                {
                    return Err(Error::Conflict {
                        reason: "an admitted version is immutable",
                    });
                }
                for cap in &v.capabilities {
                    self.versions_by_capability
                        .entry(cap.clone())
                        .or_default()
                        .insert(v.id.clone());
                }
                self.versions.insert(v.id.clone(), v.clone());
            }
            Change::SetVersionStatus {
                version,
                active,
                qualified,
            } => {
                let v = self
                    .versions
                    .get_mut(version)
                    .ok_or_else(|| Error::NotFound {
                        what: "version",
                        id: version.to_string(),
                    })?;
                v.active = *active;
                v.qualified = *qualified;
            }
            Change::UpsertDefinition(d) => {
                self.definitions.insert(d.id.clone(), d.clone());
            }
            Change::UpsertInstance(i) => {
                if let Some(old) = self.instances.get(&i.id)
                    && old.tenant != i.tenant
                {
                    return Err(Error::Conflict {
                        reason: "an instance cannot move to another tenant",
                    });
                }
                self.instances.insert(i.id.clone(), i.clone());
            }
            Change::UpsertBinding(b) => {
                if let Some(old) = self.bindings.get(&b.id).cloned()
                    && (old.tenant != b.tenant || old.capability != b.capability)
                {
                    return Err(Error::Conflict {
                        reason: "a binding cannot change its tenant or capability",
                    });
                }
                let set = self
                    .bindings_by_tenant_capability
                    .entry((b.tenant.clone(), b.capability.clone()))
                    .or_default();
                set.insert(b.id.clone());
                if set.len() > TENANT_CAPABILITY_BINDINGS_MAX {
                    return Err(Error::limit(
                        "bindings per tenant and capability",
                        TENANT_CAPABILITY_BINDINGS_MAX,
                    ));
                }
                self.bindings_by_capability
                    .entry(b.capability.clone())
                    .or_default()
                    .insert(b.id.clone());
                self.bindings.insert(b.id.clone(), b.clone());
            }
            Change::UpsertScope(s) => {
                if let Some(old) = self.scopes.get(&s.id)
                    && old.tenant != s.tenant
                {
                    return Err(Error::Conflict {
                        reason: "an admission scope cannot move to another tenant",
                    });
                }
                self.scopes.insert(s.id.clone(), s.clone());
            }
        }
        Ok(())
    }

    fn check_references(&self, change: &Change) -> Result<()> {
        let missing = |what: &'static str, id: &dyn std::fmt::Display| Error::NotFound {
            what,
            id: id.to_string(),
        };
        match change {
            Change::UpsertType(_) | Change::UpsertScope(_) | Change::SetVersionStatus { .. } => {}
            Change::UpsertDefinition(_) => {}
            Change::AdmitVersion(v) => {
                if !self.types.contains_key(&v.connector_type) {
                    return Err(missing("connector type", &v.connector_type));
                }
                for cap in &v.capabilities {
                    if !self.definitions.contains_key(cap) {
                        return Err(missing("capability definition", cap));
                    }
                }
            }
            Change::UpsertInstance(i) => {
                if !self.versions.contains_key(&i.version) {
                    return Err(missing("version", &i.version));
                }
            }
            Change::UpsertBinding(b) => {
                let instance = self
                    .instances
                    .get(&b.instance)
                    .ok_or_else(|| missing("instance", &b.instance))?;
                if instance.tenant != b.tenant {
                    return Err(Error::invalid(
                        "binding",
                        "the binding's tenant must own its instance",
                    ));
                }
                if !self.definitions.contains_key(&b.capability) {
                    return Err(missing("capability definition", &b.capability));
                }
                for scope in &b.admission_scopes {
                    let s = self
                        .scopes
                        .get(scope)
                        .ok_or_else(|| missing("admission scope", scope))?;
                    if s.tenant != b.tenant {
                        return Err(Error::invalid(
                            "binding",
                            "an admission scope must belong to the binding's tenant",
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// The version, type and instance behind a binding when the whole chain
    /// is eligible for `capability` (CAT-5, ROUTE-9, catalog half).
    pub(crate) fn eligible_chain(
        &self,
        binding: &Binding,
        capability: &CapabilityId,
    ) -> Option<(&Instance, &ConnectorVersion)> {
        if !binding.enabled || &binding.capability != capability {
            return None;
        }
        let instance = self.instances.get(&binding.instance)?;
        if !instance.enabled || instance.tenant != binding.tenant {
            return None;
        }
        let version = self.versions.get(&instance.version)?;
        if !version.active || !version.qualified || !version.capabilities.contains(capability) {
            return None;
        }
        let ty = self.types.get(&version.connector_type)?;
        if !ty.enabled {
            return None;
        }
        Some((instance, version))
    }

    fn chain_offers(
        &self,
        binding: &BindingId,
        capability: &CapabilityId,
        profile: Option<&ProfileId>,
    ) -> bool {
        let Some(binding) = self.bindings.get(binding) else {
            return false;
        };
        match self.eligible_chain(binding, capability) {
            Some((_, version)) => profile.is_none_or(|p| version.profiles.contains(p)),
            None => false,
        }
    }

    fn version_offers(
        &self,
        version: &VersionId,
        capability: &CapabilityId,
        profile: &ProfileId,
    ) -> bool {
        let Some(v) = self.versions.get(version) else {
            return false;
        };
        v.active
            && v.qualified
            && v.capabilities.contains(capability)
            && v.profiles.contains(profile)
            && self.types.get(&v.connector_type).is_some_and(|t| t.enabled)
    }

    fn listable(&self, q: &PlannedQuery, d: &CapabilityDefinition) -> bool {
        d.active
            && q.matches_search(d)
            && q.capability.as_ref().is_none_or(|c| c == &d.id)
            && q.after_capability().is_none_or(|after| &d.id > after)
    }

    /// One page at the current revision (CAT-5..CAT-9).
    pub(crate) fn page(&self, q: &PlannedQuery, ignore_stale: bool) -> Result<CatalogPage> {
        if !ignore_stale {
            q.check_revision(self.revision)?;
        }
        let profile = q.profile.as_ref();
        match &q.reader {
            Reader::Anonymous => Ok(q.paginate(self.revision, std::iter::empty())),
            Reader::Tenant(tenant) => {
                let start = match q.after_capability() {
                    Some(after) => Bound::Excluded((tenant.clone(), after.clone())),
                    None => Bound::Included((tenant.clone(), min_capability())),
                };
                let candidates = self
                    .bindings_by_tenant_capability
                    .range((start, Bound::Unbounded))
                    .take_while(|((t, _), _)| t == tenant)
                    .filter(|((_, cap), bindings)| {
                        q.after_capability().is_none_or(|after| cap > after)
                            && bindings.iter().any(|b| self.chain_offers(b, cap, profile))
                    })
                    .filter_map(|((_, cap), _)| self.definitions.get(cap))
                    .filter(|d| self.listable(q, d))
                    .cloned();
                Ok(q.paginate(self.revision, candidates))
            }
            Reader::Internal { include_unbound } => {
                let start = match q.after_capability() {
                    Some(after) => Bound::Excluded(after.clone()),
                    None => Bound::Unbounded,
                };
                let candidates = self
                    .definitions
                    .range((start, Bound::Unbounded))
                    .map(|(_, d)| d)
                    .filter(|d| self.listable(q, d))
                    .filter(|d| {
                        let bound = self.bindings_by_capability.get(&d.id).is_some_and(|bs| {
                            bs.iter().any(|b| self.chain_offers(b, &d.id, profile))
                        });
                        if bound {
                            return true;
                        }
                        if !include_unbound {
                            return false;
                        }
                        match profile {
                            None => true,
                            Some(p) => self.versions_by_capability.get(&d.id).is_some_and(|vs| {
                                vs.iter().any(|v| self.version_offers(v, &d.id, p))
                            }),
                        }
                    })
                    .cloned();
                Ok(q.paginate(self.revision, candidates))
            }
        }
    }
}

fn min_capability() -> CapabilityId {
    // "-" is the smallest byte in the identifier character set, so every
    // capability sorts at or after it.
    CapabilityId::new("-").unwrap_or_else(|_| unreachable!("'-' is a valid identifier"))
}
