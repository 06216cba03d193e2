//! The order of eligible replicas for a new route (ROUTE-10).
//!
//! Candidates sort by, in turn: lower binding priority; preferred region
//! match; preferred zone match; fewer active reservations; the route hash of
//! (action, replica); then instance ID and replica ID, as bytes.
//!
//! The route hash is the first 16 hex digits of
//! `md5(action_id || "/" || replica_id)`, compared as text. MD5 is used as a
//! fixed, well-known mixing function, not for security: it is the same on
//! every process and release, and PostgreSQL computes the same value with
//! `substr(md5(action || '/' || replica), 1, 16)`, so both backends order
//! identically. `/` cannot appear in an identifier, so the input is
//! unambiguous.

use md5::{Digest, Md5};

use crate::id::{ActionId, InstanceId, ReplicaId};

/// The route hash of (action, replica): 16 lowercase hex digits.
pub fn route_hash(action: &ActionId, replica: &ReplicaId) -> String {
    let mut h = Md5::new();
    h.update(action.as_str().as_bytes());
    h.update(b"/");
    h.update(replica.as_str().as_bytes());
    h.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The sort key of one eligible candidate; smaller sorts first.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct CandidateKey {
    /// Binding priority, lower first.
    pub priority: u32,
    /// False (0) when the region matches the preference, so matches sort first.
    pub region_mismatch: bool,
    /// False when the zone matches the preference.
    pub zone_mismatch: bool,
    /// Active reservations, fewer first.
    pub active: u32,
    /// The route hash.
    pub hash: String,
    /// Instance tie-breaker.
    pub instance: InstanceId,
    /// Replica tie-breaker.
    pub replica: ReplicaId,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_hash_is_a_fixed_function() {
        // spec: ROUTE-10 (the hash never depends on the process)
        let a = ActionId::new("act-1").unwrap();
        let r = ReplicaId::new("rep-1").unwrap();
        // md5("act-1/rep-1"), first 8 bytes.
        assert_eq!(route_hash(&a, &r), "d77839c7a51b2c57");
    }
}
