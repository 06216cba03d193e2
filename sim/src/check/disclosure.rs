//! `no_cross_tenant_disclosure` in catalog pages and conflict answers: a
//! page lists only what its reader may call, at a revision a publication
//! made, and a conflict answer reveals nothing of another tenant's
//! assignment (ROUTE-4).

use std::collections::BTreeSet;

use connreg::catalog::{CatalogPage, Reader};
use connreg::{CapabilityId, RouteRequest};

use super::pages::listing_faults;
use super::{Checker, invariant};

impl Checker {
    pub(super) fn check_page(
        &mut self,
        reader: &Reader,
        page: &CatalogPage,
        listing: Option<&BTreeSet<CapabilityId>>,
    ) {
        let Some(model) = self.catalogs.get(&page.revision) else {
            self.violate(
                invariant::REVISION,
                format!(
                    "a page carries revision {}, which no publication made",
                    page.revision.0
                ),
            );
            return;
        };
        let faults = listing
            .map(|listed| listing_faults(model, reader, page.revision, listed))
            .unwrap_or_default();
        match reader {
            Reader::Tenant(tenant) => {
                let hidden: Vec<String> = page
                    .entries
                    .iter()
                    .filter(|e| !model.tenant_sees(tenant, &e.capability))
                    .map(|e| e.capability.to_string())
                    .collect();
                if !hidden.is_empty() {
                    self.violate(
                        invariant::TENANT,
                        format!(
                            "a page for {tenant} at revision {} lists {hidden:?}, which it cannot call",
                            page.revision.0
                        ),
                    );
                }
            }
            Reader::Anonymous => {
                if !page.entries.is_empty() {
                    self.violate(
                        invariant::TENANT,
                        format!("an anonymous page lists {} entries", page.entries.len()),
                    );
                }
            }
            Reader::Internal { .. } => {}
        }
        for fault in faults {
            self.violate(invariant::PAGES, fault);
        }
    }

    pub(super) fn on_conflict(&mut self, request: &RouteRequest, message: &str) {
        // ROUTE-4: the answer reveals nothing of the other assignment.
        if let Some(truth) = self.truth.get(&request.action) {
            let d = &truth.destination;
            let leaks = [
                truth.identity.tenant.as_str(),
                d.instance.as_str(),
                d.replica.as_str(),
                d.binding.as_str(),
                d.endpoint.as_str(),
            ];
            if request.tenant.as_ref() != Some(&truth.identity.tenant)
                && leaks.iter().any(|s| message.contains(s))
            {
                self.violate(
                    invariant::TENANT,
                    format!(
                        "a conflict answer for {} reveals the other assignment: {message:?}",
                        request.action
                    ),
                );
            }
        }
    }
}
