//! The reference model's state: the replicas, scopes, bindings and routes
//! it tracks, the fleet it starts from, and the counter bookkeeping its
//! transitions share.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use connreg::*;

use crate::fixture;

use super::{BINDINGS, Expect, LEASE_TTL_MS, Step, model_options};

/// A replica as the model sees it.
#[derive(Clone, PartialEq, Eq)]
pub struct ModelReplica {
    pub(super) id: ReplicaId,
    pub(super) instance: String,
    pub(super) region: Region,
    pub(super) zone: Zone,
    pub(super) capacity: u32,
    pub(super) active: u32,
    pub(super) state: ReplicaState,
    pub(super) lease_expires_at: u64,
    pub(super) health_seq: u64,
    pub(super) unknown: u32,
    pub(super) open: bool,
}

/// A route as the model sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRoute {
    pub(super) tenant: usize,
    pub(super) capability: usize,
    pub(super) replica: usize,
    pub(super) scopes: Vec<usize>,
    pub(super) attempts: u32,
    pub(super) reserved: bool,
    pub(super) last: Option<Outcome>,
}

/// The reference state.
#[derive(Clone)]
pub struct ModelState {
    pub(super) now: u64,
    pub(super) revision: u64,
    pub(super) replicas: Vec<ModelReplica>,
    pub(super) scope_limit: [u32; 3],
    pub(super) scope_in_use: [u32; 3],
    pub(super) lowered: BTreeSet<usize>,
    pub(super) binding_enabled: [bool; 3],
    pub(super) instance_enabled: [bool; 2],
    pub(super) routes: BTreeMap<usize, ModelRoute>,
    /// The concrete operation of the last transition, for the backend.
    pub(super) step: Step,
    /// What the backend must answer to `step`.
    pub(super) expect: Expect,
}

impl fmt::Debug for ModelState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The initial state is always the same fleet: keep failure reports
        // short.
        write!(
            f,
            "ModelState(now={}, revision={})",
            self.now, self.revision
        )
    }
}

impl fmt::Debug for ModelReplica {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}[{:?} active={} lease={} seq={} unknown={} open={}]",
            self.id,
            self.state,
            self.active,
            self.lease_expires_at,
            self.health_seq,
            self.unknown,
            self.open
        )
    }
}

impl ModelState {
    pub(super) fn initial() -> ModelState {
        let fleet = fixture::Fleet::new(model_options());
        let replicas = fleet
            .replica_specs()
            .into_iter()
            .map(|s| ModelReplica {
                id: s.id,
                instance: s.instance.to_string(),
                region: s.region,
                zone: s.zone,
                capacity: s.capacity,
                active: 0,
                state: ReplicaState::Ready,
                lease_expires_at: fixture::CLOCK_START_MS + LEASE_TTL_MS,
                health_seq: 1,
                unknown: 0,
                open: false,
            })
            .collect();
        ModelState {
            now: fixture::CLOCK_START_MS,
            revision: 1,
            replicas,
            scope_limit: [3; 3],
            scope_in_use: [0; 3],
            lowered: BTreeSet::new(),
            binding_enabled: [true; 3],
            instance_enabled: [true; 2],
            routes: BTreeMap::new(),
            step: Step::Start,
            expect: Expect::Nothing,
        }
    }

    pub(super) fn binding_for(tenant: usize, capability: usize) -> Option<usize> {
        BINDINGS
            .iter()
            .position(|b| b.tenant == tenant && b.capability == capability)
    }

    pub(super) fn lease_live(&self, r: &ModelReplica) -> bool {
        r.lease_expires_at > self.now
    }

    pub(super) fn scopes_have_room(&self, scopes: &[usize]) -> bool {
        scopes
            .iter()
            .all(|s| self.scope_in_use[*s] < self.scope_limit[*s])
    }

    pub(super) fn take(&mut self, replica: usize, scopes: &[usize]) {
        self.replicas[replica].active += 1;
        for s in scopes {
            self.scope_in_use[*s] += 1;
        }
    }

    pub(super) fn give(&mut self, replica: usize, scopes: &[usize]) {
        self.replicas[replica].active -= 1;
        for s in scopes {
            self.scope_in_use[*s] -= 1;
        }
    }
}
