//! A full read of the store, for invariant checkers and tests.
//!
//! Not part of any serving path: it reads every replica, scope and route,
//! bounded by [`INSPECT_ROWS_MAX`].

use std::future::Future;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::records::{AdmissionScope, Replica, Revision, RouteRecord};

/// Most rows one inspection returns; larger stores get `LimitExceeded`.
pub const INSPECT_ROWS_MAX: usize = 200_000;

/// A scope with its live counter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScopeUsage {
    /// The scope.
    pub scope: AdmissionScope,
    /// Reservations it currently counts.
    pub in_use: u32,
}

/// Everything an invariant checker needs, in identifier order.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct StoreSnapshot {
    /// The catalog revision.
    pub revision: Revision,
    /// Every replica, by ID.
    pub replicas: Vec<Replica>,
    /// Every admission scope, by ID.
    pub scopes: Vec<ScopeUsage>,
    /// Every route, by action ID.
    pub routes: Vec<RouteRecord>,
}

/// Reads the whole store at once.
pub trait Inspect: Send + Sync {
    /// A consistent snapshot of replicas, scopes and routes.
    fn inspect(&self) -> impl Future<Output = Result<StoreSnapshot>> + Send;
}
