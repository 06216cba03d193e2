//! The checkers' model of the published catalog, rebuilt from the
//! publications in the trace, one version per revision.
//!
//! It answers two questions the trace raises: was a new route's binding
//! chain eligible at the revision the route says it read (ROUTE-5, ROUTE-9),
//! and may a tenant see a capability at a page's revision (CAT-5).

use std::collections::{BTreeMap, BTreeSet};

use connreg::{
    AdmissionScope, Binding, BindingId, CapabilityId, Change, ConnectorType, ConnectorTypeId,
    ConnectorVersion, Instance, InstanceId, Publication, Reader, RouteAssignment, ScopeId,
    TenantId, VersionId,
};

/// The catalog at one revision.
#[derive(Debug, Clone, Default)]
pub struct CatalogModel {
    types: BTreeMap<ConnectorTypeId, ConnectorType>,
    versions: BTreeMap<VersionId, ConnectorVersion>,
    definitions: BTreeMap<CapabilityId, bool>,
    instances: BTreeMap<InstanceId, Instance>,
    bindings: BTreeMap<BindingId, Binding>,
    scopes: BTreeMap<ScopeId, AdmissionScope>,
}

impl CatalogModel {
    /// This catalog with a publication applied.
    pub fn apply(&self, publication: &Publication) -> CatalogModel {
        let mut next = self.clone();
        for change in &publication.changes {
            match change {
                Change::UpsertType(t) => {
                    next.types.insert(t.id.clone(), t.clone());
                }
                Change::AdmitVersion(v) => {
                    next.versions.insert(v.id.clone(), v.clone());
                }
                Change::SetVersionStatus {
                    version,
                    active,
                    qualified,
                } => {
                    if let Some(v) = next.versions.get_mut(version) {
                        v.active = *active;
                        v.qualified = *qualified;
                    }
                }
                Change::UpsertDefinition(d) => {
                    next.definitions.insert(d.id.clone(), d.active);
                }
                Change::UpsertInstance(i) => {
                    next.instances.insert(i.id.clone(), i.clone());
                }
                Change::UpsertBinding(b) => {
                    next.bindings.insert(b.id.clone(), b.clone());
                }
                Change::UpsertScope(s) => {
                    next.scopes.insert(s.id.clone(), s.clone());
                }
            }
        }
        next
    }

    /// Why `binding` cannot serve `capability` for `tenant`, or `None` when
    /// its whole chain is eligible (CAT-5, ROUTE-9 catalog half).
    pub fn chain_refusal(
        &self,
        binding: &BindingId,
        tenant: &TenantId,
        capability: &CapabilityId,
    ) -> Option<String> {
        let Some(b) = self.bindings.get(binding) else {
            return Some(format!("binding {binding} does not exist"));
        };
        if !b.enabled {
            return Some(format!("binding {binding} is disabled"));
        }
        if &b.tenant != tenant || &b.capability != capability {
            return Some(format!(
                "binding {binding} is not for this tenant and capability"
            ));
        }
        let Some(i) = self.instances.get(&b.instance) else {
            return Some(format!("instance {} does not exist", b.instance));
        };
        if !i.enabled {
            return Some(format!("instance {} is disabled", i.id));
        }
        if &i.tenant != tenant {
            return Some(format!("instance {} belongs to another tenant", i.id));
        }
        let Some(v) = self.versions.get(&i.version) else {
            return Some(format!("version {} does not exist", i.version));
        };
        if !v.active || !v.qualified {
            return Some(format!("version {} is not active and qualified", v.id));
        }
        if !v.capabilities.contains(capability) {
            return Some(format!("version {} does not implement {capability}", v.id));
        }
        match self.types.get(&v.connector_type) {
            Some(t) if t.enabled => None,
            _ => Some(format!("type {} is disabled", v.connector_type)),
        }
    }

    /// Why a new route's destination was ineligible at this revision, or
    /// `None`.
    pub fn route_refusal(&self, a: &RouteAssignment) -> Option<String> {
        if let Some(why) = self.chain_refusal(
            &a.destination.binding,
            &a.identity.tenant,
            &a.identity.capability,
        ) {
            return Some(why);
        }
        let b = &self.bindings[&a.destination.binding];
        if b.instance != a.destination.instance {
            return Some(format!(
                "binding {} serves instance {}, not {}",
                b.id, b.instance, a.destination.instance
            ));
        }
        let i = &self.instances[&b.instance];
        if i.version != a.destination.version {
            return Some(format!(
                "instance {} runs {}, not {}",
                i.id, i.version, a.destination.version
            ));
        }
        if b.priority != a.policy.binding_priority || b.admission_scopes != a.reservation.scopes {
            return Some(format!(
                "the policy snapshot does not match binding {}",
                b.id
            ));
        }
        None
    }

    /// The limit of admission scope `id` in this catalog.
    pub fn scope_limit(&self, id: &ScopeId) -> Option<u32> {
        self.scopes.get(id).map(|s| s.limit)
    }

    /// Every capability `reader` may see listed (CAT-5, CAT-7, CAT-8): a
    /// tenant's through one of its eligible binding chains; an internal
    /// reader's through anyone's, or every active one when it reads
    /// unbound capabilities too; an anonymous reader's, none.
    pub fn visible_to(&self, reader: &Reader) -> BTreeSet<CapabilityId> {
        self.definitions
            .iter()
            .filter(|(_, active)| **active)
            .map(|(id, _)| id)
            .filter(|id| match reader {
                Reader::Anonymous => false,
                Reader::Tenant(tenant) => self.tenant_sees(tenant, id),
                Reader::Internal { include_unbound } => {
                    *include_unbound
                        || self.bindings.values().any(|b| {
                            &b.capability == *id
                                && self.chain_refusal(&b.id, &b.tenant, id).is_none()
                        })
                }
            })
            .cloned()
            .collect()
    }

    /// True when `tenant` may see `capability` in its catalog (CAT-5).
    pub fn tenant_sees(&self, tenant: &TenantId, capability: &CapabilityId) -> bool {
        self.definitions.get(capability).copied().unwrap_or(false)
            && self
                .bindings
                .values()
                .filter(|b| &b.tenant == tenant && &b.capability == capability)
                .any(|b| self.chain_refusal(&b.id, tenant, capability).is_none())
    }
}
