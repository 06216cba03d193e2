//! Route resolution, lookup and settlement (ROUTE, PIN, SETTLE).
//!
//! A resolve is one call of `connreg.data_route_resolve` (migration 0013,
//! around the decision rounds of `connreg.route_decide_round`): one round
//! trip and one transaction holding the action's lock, the
//! existing-route check, the pinned re-reservation, the replica choice with
//! a bounded retry, the scope and replica reservation, the fence and the
//! insert. Migrations 0004, 0007 and 0013 document the choice in full. This
//! module binds its inputs (the injected clock's time, the lock keys, the
//! bounds below, which the function fixes and start-up checks) and maps
//! its outcome; settlement is one call of `connreg.data_route_settle`, its
//! own short transaction. The data role can run nothing else (AUTH-6).
//!
//! # Lock order (LOCK-1)
//!
//! One global order, for every transaction of this backend:
//!
//! 1. the action's lock, a row of `connreg.protocol_locks` (resolve,
//!    settle; migration 0013);
//! 2. the catalog lock, a table lock on `connreg.catalog_lock` (ROW SHARE
//!    for resolves, EXCLUSIVE for publications);
//! 3. replica rows;
//! 4. admission counter rows, several at once always in scope order;
//! 5. assignment rows.
//!
//! A transaction waits for a lock only while every row lock it holds comes
//! earlier in the order, so no two can wait for each other in a cycle.
//! The resolve decides in rounds (migration 0013). Under the catalog lock
//! a round waits for no row longer than [`ROUTE_ROW_WAIT_MS`]: a new
//! route's counters and replica are each counted by one `UPDATE` under the
//! round's 1 ms `lock_timeout` (migration 0018: no lock record before the
//! count), a replica held past it is skipped for the next best (ROUTE-6);
//! a pinned re-reservation's counters and replica are taken NOWAIT, an
//! `existing` answer's replica KEY SHARE NOWAIT. A round that meets a held
//! lock past that, or whose attempt must pause, is rolled back whole
//! (catalog lock, counters and replica rows: a savepoint's locks end with
//! it) and the resolve waits for that one lock, or pauses, holding only its
//! action's lock; the next round may then hold that one lock while it
//! takes the catalog lock, which a publication holds exclusively without
//! ever waiting for a row. So a stalled counter holder pins no replica row
//! (LOCK-3) and no catalog lock (LOCK-4). Lease maintenance takes its
//! replicas SKIP LOCKED, then counters, then the routes' rows. Every lock
//! wait of a resolve is bounded by [`ROUTE_LOCK_WAIT_MS`], all its rounds
//! by [`ROUTE_DECISION_MS_MAX`].
//!
//! A route's shared snapshot (`connreg.route_snapshots`, migration 0012)
//! is never locked: a resolve inserts one only while it holds the replica
//! row its key names, so no two inserts of one key overlap and none waits,
//! and a route's row refers to it without a foreign key check. It holds
//! the route's admission scopes too (migration 0020): the binding's at the
//! snapshot's revision, the same for every route that names it, so a new
//! route's row carries only its action, snapshot, fence and reservation.

use sqlx::PgConnection;
use sqlx::postgres::PgRow;

use super::codec::{col, ms, route};
use super::commit;
use super::data::Data;
use super::error::db;
use super::health;
use super::tx;
use crate::error::{Error, Result};
use crate::id::{ActionId, TenantId};
use crate::limits::{ROUTE_LOCK_ATTEMPTS_MAX, TENANT_CAPABILITY_BINDINGS_MAX};
use crate::records::{RouteAssignment, RouteRecord};
use crate::request::{CrossRegion, ResolveKind, Resolved, RouteRequest, SettleParams, Settled};

/// Longest the last choosing attempt waits for a locked candidate, in ms.
/// A routing transaction holds a replica row for a millisecond or so; a
/// wait this long means the store is overloaded, and the answer is
/// `NoCapacity`.
pub const ROUTE_LOCK_WAIT_MS: u32 = 1_000;

/// Longest a decision round waits for one counter or replica row under the
/// catalog lock, in ms: `route_decide_round`'s `lock_timeout` (migration
/// 0018). Past it a held counter is waited for between rounds and a held
/// replica skipped. PostgreSQL's smallest lock timeout; it must stay below
/// the server's `deadlock_timeout` (1,000 ms by default), so a cycle
/// through a round's wait ends before deadlock detection.
pub const ROUTE_ROW_WAIT_MS: u32 = 1;

/// Pause before choosing attempt `n` (from 2) after every eligible replica
/// was held by other decisions: `n` times this, so all pauses together stay
/// far below [`ROUTE_LOCK_WAIT_MS`].
pub const ROUTE_LOCK_BACKOFF_MS_PER_ATTEMPT: u32 = 1;

/// Longest a resolve's decision runs once it holds its action's lock, in
/// ms, on the server's clock: all its rounds, waits and pauses together.
/// Past it the answer is `NoCapacity` (ROUTE-6). With
/// [`PROTOCOL_LOCK_WAIT_MS`](super::locks::PROTOCOL_LOCK_WAIT_MS) for the
/// action's lock it stays inside the data role's default statement
/// timeout (5,000 ms).
pub const ROUTE_DECISION_MS_MAX: u32 = 2_000;

const _: () = assert!(ROUTE_LOCK_WAIT_MS <= ROUTE_DECISION_MS_MAX);
const _: () = assert!(ROUTE_DECISION_MS_MAX < super::locks::PROTOCOL_LOCK_WAIT_MS);

const _: () = assert!(ROUTE_LOCK_ATTEMPTS_MAX >= 1);
const _: () = assert!(
    ROUTE_LOCK_BACKOFF_MS_PER_ATTEMPT * ROUTE_LOCK_ATTEMPTS_MAX * ROUTE_LOCK_ATTEMPTS_MAX
        < ROUTE_LOCK_WAIT_MS
);
const _: () = assert!(ROUTE_LOCK_ATTEMPTS_MAX <= i32::MAX as u32);
const _: () = assert!(TENANT_CAPABILITY_BINDINGS_MAX <= i32::MAX as usize);

/// The whole resolve, one call of the data role's function (migration
/// 0015, around the decision rounds).
const RESOLVE: &str =
    "SELECT * FROM connreg.data_route_resolve($1, $2, $3, $4, $5, $6, $7, $8, $9)";

/// PIN-5, PIN-6: one tenant's route.
const SELECT_TENANT_ROUTE: &str = "SELECT * FROM connreg.data_route_get($1, $2)";

/// SETTLE-1..SETTLE-5, one call: the given assignment as JSON, compared
/// whole with the stored one (migration 0008).
const SETTLE: &str = "SELECT connreg.data_route_settle($1::text::jsonb, $2, $3, $4)";

/// The settlement of the `settle-locks-counters-first` plant (installed by
/// `PgRegistry::with_plant`).
#[cfg(feature = "plant")]
const SETTLE_PLANTED: &str = "SELECT connreg.planted_route_settle($1::text::jsonb, $2, $3, $4)";

impl Data {
    /// ROUTE-2..ROUTE-7, PIN-2..PIN-4.
    pub(crate) async fn route_resolve(&self, request: RouteRequest) -> Result<Resolved> {
        let once = async || {
            tx::single(&self.pool, async |conn: &mut PgConnection| {
                self.resolve_on(conn, &request).await
            })
            .await
        };
        // A decision is idempotent by action ID (ROUTE-3, ROUTE-4): after a
        // lost connection, once more on a fresh one is always safe. If the
        // first attempt committed, the second finds its route (`existing`).
        let row = match once().await {
            Err(e) if health::lost_connection(&e) => {
                self.calls.health.suspect(self.calls.pool_size);
                commit::record_retry();
                once().await?
            }
            answer => answer?,
        };
        let answer = resolved(&row)?;
        if let Some(seq) = col::<Option<i64>>(&row, "commit_seq")? {
            commit::record(seq);
        }
        if let Some(seq) = col::<Option<i64>>(&row, "read_seq")? {
            let unseen = col::<Option<Vec<i64>>>(&row, "read_unseen")?;
            commit::record_read(seq, &unseen.unwrap_or_default());
        }
        Ok(answer)
    }

    /// Validates `request` (ROUTE-2 first) and runs the resolve function on
    /// `executor`: its own transaction on a pool, or the caller's.
    async fn resolve_on<'e, E>(&self, executor: E, request: &RouteRequest) -> Result<PgRow>
    where
        E: sqlx::PgExecutor<'e>,
    {
        // ROUTE-2: no tenant, nothing else happens.
        let Some(tenant) = &request.tenant else {
            return Err(Error::InvalidRequest {
                what: "route request",
                reason: "a verified tenant is required".into(),
            });
        };
        request.topology.validate()?;
        let topo = &request.topology;
        sqlx::query(RESOLVE)
            .bind(request.action.as_str())
            .bind(tenant.as_str())
            .bind(request.capability.as_str())
            .bind(ms(self.now()))
            .bind(topo.capacity_class.as_str())
            .bind(topo.cross_region == CrossRegion::Allowed)
            .bind(topo.preferred_region.as_ref().map(|r| r.as_str()))
            .bind(topo.preferred_zone.as_ref().map(|z| z.as_str()))
            .bind(commit::observed())
            .fetch_one(executor)
            .await
            .map_err(db)
    }

    /// Rows of `connreg.replicas` one resolve of `request` reads, counted by
    /// PostgreSQL's own statistics for a transaction that is then rolled
    /// back. Evidence for AUTH-4 tests; not a serving path.
    pub(crate) async fn resolve_replica_reads(
        &self,
        request: &RouteRequest,
    ) -> Result<ReplicaReads> {
        tx::rolled_back(&self.pool, async |tx: &mut PgConnection| {
            let before = replica_reads(&mut *tx).await?;
            let row = self.resolve_on(&mut *tx, request).await?;
            let after = replica_reads(&mut *tx).await?;
            Ok(ReplicaReads {
                outcome: col(&row, "outcome")?,
                rows: after.rows - before.rows,
                scans: after.scans - before.scans,
            })
        })
        .await
    }

    /// PIN-5, PIN-6: the action's route, only for its own tenant.
    pub(crate) async fn route_get(
        &self,
        tenant: TenantId,
        action: ActionId,
    ) -> Result<Option<RouteRecord>> {
        let row = tx::read_one(&self.pool, async |conn: &mut PgConnection| {
            sqlx::query(SELECT_TENANT_ROUTE)
                .bind(tenant.as_str())
                .bind(action.as_str())
                .fetch_optional(conn)
                .await
                .map_err(db)
        })
        .await?;
        row.as_ref().map(route).transpose()
    }

    /// SETTLE-1..SETTLE-5: one statement, its own transaction.
    pub(crate) async fn route_settle(&self, params: SettleParams) -> Result<Settled> {
        let given = assignment_json(&params.assignment).to_string();
        let policy = self.config.circuit;
        #[cfg(feature = "plant")]
        let statement = if self.planted(crate::plant::PgPlant::SettleLocksCountersFirst) {
            SETTLE_PLANTED
        } else {
            SETTLE
        };
        #[cfg(not(feature = "plant"))]
        let statement = SETTLE;
        tx::call(&self.pool, async |conn: &mut PgConnection| {
            let outcome: String = sqlx::query_scalar(statement)
                .bind(&given)
                .bind(params.outcome.as_str())
                .bind(policy.enabled)
                .bind(i64::from(policy.threshold))
                .fetch_one(conn)
                .await
                .map_err(db)?;
            match outcome.as_str() {
                "released" => Ok(Settled { released: true }),
                // SETTLE-4: already released; nothing changes.
                "not_reserved" => Ok(Settled { released: false }),
                // SETTLE-2: no such route, or another assignment.
                "fence_lost" => Err(Error::FenceLost),
                _ => Err(super::error::corrupt("data_route_settle outcome")),
            }
        })
        .await
    }
}

/// The assignment as `connreg.assignment_json` builds it from the stored
/// row (migration 0008): the route's columns without its reservation state.
fn assignment_json(a: &RouteAssignment) -> serde_json::Value {
    let p = &a.policy;
    serde_json::json!({
        "action_id": a.identity.action.as_str(),
        "tenant_id": a.identity.tenant.as_str(),
        "capability_id": a.identity.capability.as_str(),
        "binding_id": a.destination.binding.as_str(),
        "instance_id": a.destination.instance.as_str(),
        "version_id": a.destination.version.as_str(),
        "type_id": a.destination.connector_type.as_str(),
        "replica_id": a.destination.replica.as_str(),
        "endpoint": a.destination.endpoint,
        "peer_identity": a.destination.peer_identity,
        "region": a.destination.region.as_str(),
        "zone": a.destination.zone.as_str(),
        "catalog_revision": p.catalog_revision.0,
        "binding_priority": p.binding_priority,
        "policy_revision": p.policy_revision,
        "credential_ref": p.credential.reference,
        "credential_revision": p.credential.revision,
        "secret_provider_ref": p.secret_provider.reference,
        "secret_provider_revision": p.secret_provider.revision,
        "quota_policy_ref": p.quota_policy.as_ref().map(|q| q.reference.as_str()),
        "quota_policy_revision": p.quota_policy.as_ref().map(|q| q.revision),
        "capacity_class": p.capacity_class.as_str(),
        "fence": a.reservation.fence.0,
        "attempt": a.reservation.attempt,
        "scopes": a.reservation.scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
    })
}

/// What one resolve read of the replicas table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaReads {
    /// The resolve's outcome, as the function names it.
    pub outcome: String,
    /// Rows returned by scans plus rows fetched through indexes.
    pub rows: i64,
    /// Scans started on the table.
    pub scans: i64,
}

async fn replica_reads(conn: &mut PgConnection) -> Result<ReplicaReads> {
    let row = sqlx::query(
        "SELECT pg_stat_get_xact_tuples_returned('connreg.replicas'::regclass)
              + pg_stat_get_xact_tuples_fetched('connreg.replicas'::regclass) AS rows,
                pg_stat_get_xact_numscans('connreg.replicas'::regclass) AS scans",
    )
    .fetch_one(conn)
    .await
    .map_err(db)?;
    Ok(ReplicaReads {
        outcome: String::new(),
        rows: col(&row, "rows")?,
        scans: col(&row, "scans")?,
    })
}

/// The function's outcome: a route or the domain error.
fn resolved(row: &PgRow) -> Result<Resolved> {
    let outcome: String = col(row, "outcome")?;
    let kind = match outcome.as_str() {
        "created" => ResolveKind::Created,
        "existing" => ResolveKind::Existing,
        "reserved" => ResolveKind::Reserved,
        // ROUTE-4: reveal nothing of the other assignment.
        "conflict" => {
            return Err(Error::Conflict {
                reason: "the action is already assigned under other coordinates",
            });
        }
        "no_eligible_binding" => return Err(Error::NoEligibleBinding),
        "no_capacity" => return Err(Error::NoCapacity),
        "replica_unavailable" => return Err(Error::ReplicaUnavailable),
        _ => return Err(super::error::corrupt("route_resolve outcome")),
    };
    Ok(Resolved {
        assignment: route(row)?.assignment,
        kind,
    })
}
