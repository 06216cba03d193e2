//! Checks that wait for the publication of the catalog revision they read:
//! on a real database a reader's answer can be recorded before the
//! publication that made its revision.

use std::collections::BTreeSet;

use connreg::catalog::{CatalogPage, Reader};
use connreg::{CapabilityId, Revision, RouteAssignment, RouteRequest};

use super::Checker;

/// A check that waits for the publication of the revision it read.
#[derive(Debug)]
pub(super) enum Deferred {
    /// A page, with its read's whole listing when it ended a paged read.
    Page(Reader, CatalogPage, Option<BTreeSet<CapabilityId>>),
    Route(Box<(RouteRequest, RouteAssignment)>),
}

impl Checker {
    /// True when an answer read at `revision` may be checked only once the
    /// publication that made it is in the trace: on a real database a
    /// reader's answer can be recorded just before the publisher's. Commit
    /// order does not help here: reads take no commit sequence, so a page
    /// read right after a publication committed can come back, and keep its
    /// place, ahead of the publication's own answer.
    pub(super) fn awaits_publication(&self, revision: Revision) -> bool {
        !self.deterministic
            && revision > self.max_published
            && !self.catalogs.contains_key(&revision)
    }

    /// Runs the checks that waited for a publication: those whose revision
    /// is known now, or all of them when `all` (every answer committed so
    /// far is in the trace: at a snapshot and at the end).
    pub(super) fn run_deferred(&mut self, all: bool) {
        let waiting = std::mem::take(&mut self.deferred);
        for d in waiting {
            let revision = match &d {
                Deferred::Page(_, page, _) => page.revision,
                Deferred::Route(r) => r.1.policy.catalog_revision,
            };
            if !all && !self.catalogs.contains_key(&revision) {
                self.deferred.push(d);
                continue;
            }
            match d {
                Deferred::Page(reader, page, listing) => {
                    self.check_page(&reader, &page, listing.as_ref());
                }
                Deferred::Route(r) => self.check_eligible(&r.0, &r.1),
            }
        }
    }
}
