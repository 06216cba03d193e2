//! A full read of the store, for invariant checkers and tests, and a
//! change feed that reads only the rows written since a cursor.
//!
//! Not part of any serving path: a full read reads every replica, scope
//! and route, bounded by [`INSPECT_ROWS_MAX`], as is a read of the feed.

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

/// A position in a store's change feed: the reads up to it have seen
/// every write made before it. Only the store that handed it out reads it.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct ChangeCursor(pub u64);

/// What a store wrote since a [`ChangeCursor`].
///
/// Rows are never deleted from a store (replicas, scopes and routes are
/// only ever written), so a row not listed is unchanged since the cursor.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct StoreChanges {
    /// The current revision and, in identifier order, every row written
    /// since the cursor, each as it is now; every row when `complete`. A
    /// row written with the value it already had may be listed too.
    pub snapshot: StoreSnapshot,
    /// True when `snapshot` is the whole store, as [`Inspect::inspect`]
    /// reads it: the first read, a cursor the store did not hand out, and
    /// every read of a backend without a feed of its own.
    pub complete: bool,
    /// Where the next read starts.
    pub cursor: ChangeCursor,
}

/// Reads the whole store at once, or what changed in it.
pub trait Inspect: Send + Sync {
    /// A consistent snapshot of replicas, scopes and routes.
    fn inspect(&self) -> impl Future<Output = Result<StoreSnapshot>> + Send;

    /// The rows written since `cursor` (all of them without one), and the
    /// cursor to read from next, in one consistent read.
    ///
    /// The default answers every read with the whole store, marked
    /// `complete`: correct for any backend, and as costly as
    /// [`Inspect::inspect`]. The in-memory backend overrides it with a
    /// feed that lists only the rows written since the cursor, reading
    /// nothing else; the PostgreSQL backend keeps the default.
    fn inspect_changes(
        &self,
        cursor: Option<ChangeCursor>,
    ) -> impl Future<Output = Result<StoreChanges>> + Send {
        let _ = cursor;
        async move {
            Ok(StoreChanges {
                snapshot: self.inspect().await?,
                complete: true,
                cursor: ChangeCursor(0),
            })
        }
    }
}
