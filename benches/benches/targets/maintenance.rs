//! Lease maintenance throughput on PostgreSQL (part `fleet`): reservations
//! released per second when every replica of a fleet has expired while
//! holding reservations, with [`HELD`] fleets of 20,000 and 200,000 held
//! reservations. Maintenance is called with the largest batch
//! ([`LEASE_MAINTENANCE_BATCH_MAX`]) until it answers that no expired
//! replica remains; each call releases at most
//! [`LEASE_MAINTENANCE_RESERVATIONS_MAX`] (LEASE-2). The held reservations
//! are seeded by set-based SQL as the admin, in the shape the decision
//! writes (one route snapshot per replica, held routes on it, the replicas'
//! and the scope's counts to match), as `registry/tests/postgres_fleet_scale.rs`
//! seeds them.

use std::time::{Duration, Instant};

use connreg::MaintainParams;
use connreg::contracts::ReplicaLifecycle;
use connreg::limits::{LEASE_MAINTENANCE_BATCH_MAX, LEASE_MAINTENANCE_RESERVATIONS_MAX};
use connreg::postgres::PgRegistry;
use sqlx::{Connection, PgConnection};

use crate::common::{CLOCK_MS, one_tenant_fleet};

/// The measured fleets: expired replicas of the one tenant's instance, and
/// the reservations each holds (20,000 and 200,000 in all).
pub(crate) const HELD: [(u32, u32); 2] = [(1_000, 20), (1_000, 200)];

/// Where every seeded replica's lease ends: long before the bench clock.
const SEEDED_LEASE_END_MS: i64 = 1;

const _: () = assert!(SEEDED_LEASE_END_MS < CLOCK_MS as i64);

/// The fleet's one tenant's instance, binding and tenant scope (as
/// `connreg_benches::resolve_bench::fleet` names them).
const INSTANCE: &str = "t0-i";
const BINDING: &str = "t0-b";
const SCOPE: &str = "t0-s";

/// One drained fleet's figures.
pub(crate) struct Maintenance {
    /// Reservations held before the first call.
    pub(crate) held: u64,
    pub(crate) calls: u64,
    pub(crate) released: u64,
    /// Released per second of time spent in maintenance calls.
    pub(crate) per_s: f64,
    pub(crate) slowest_ms: f64,
    /// The data pool's statement timeout the calls ran under.
    pub(crate) statement_timeout_ms: u64,
}

/// Seeds `replicas` expired replicas holding `routes` reservations each
/// on a fresh database and drains them with maintenance calls.
pub(crate) async fn lease_maintenance(replicas: u32, routes: u32) -> Result<Maintenance, String> {
    let mut statement_timeout_ms = 0;
    let (test, registry, mut admin) = one_tenant_fleet(
        |options| statement_timeout_ms = options.data.statement_timeout_ms,
        replicas,
    )
    .await?;
    seed_held_reservations(&mut admin, routes)
        .await
        .map_err(|e| format!("seeding held reservations: {e}"))?;
    if let Err(e) = sqlx::query("CHECKPOINT").execute(&mut admin).await {
        eprintln!("targets: no CHECKPOINT after seeding ({e}); figures may be noisier");
    }
    let held = u64::from(replicas) * u64::from(routes);
    eprintln!("targets: lease maintenance over {held} held reservations");
    let drained = drain(&registry, replicas).await;
    registry.close().await;
    admin.close().await.map_err(|e| e.to_string())?;
    drop(test);
    let (calls, released, in_calls, slowest) = drained?;
    if released != held {
        return Err(format!(
            "maintenance released {released} of {held} held reservations"
        ));
    }
    Ok(Maintenance {
        held,
        calls,
        released,
        per_s: released as f64 / in_calls.as_secs_f64(),
        slowest_ms: slowest.as_secs_f64() * 1_000.0,
        statement_timeout_ms,
    })
}

/// Calls maintenance with the largest batch until it reports no more,
/// at most once per replica and once more: the calls, the reservations
/// released, the time spent in calls and the slowest call.
async fn drain(
    registry: &PgRegistry,
    replicas: u32,
) -> Result<(u64, u64, Duration, Duration), String> {
    let (mut calls, mut released) = (0u64, 0u64);
    let (mut in_calls, mut slowest) = (Duration::ZERO, Duration::ZERO);
    loop {
        calls += 1;
        let started = Instant::now();
        let maintained = registry
            .lease_maintain(MaintainParams {
                max: LEASE_MAINTENANCE_BATCH_MAX,
            })
            .await
            .map_err(|e| format!("maintenance call {calls} answered {e}"))?;
        let took = started.elapsed();
        in_calls += took;
        slowest = slowest.max(took);
        if maintained.released > LEASE_MAINTENANCE_RESERVATIONS_MAX {
            return Err(format!(
                "maintenance call {calls} released {}, more than {LEASE_MAINTENANCE_RESERVATIONS_MAX}",
                maintained.released
            ));
        }
        released += u64::from(maintained.released);
        if !maintained.more {
            return Ok((calls, released, in_calls, slowest));
        }
        if calls > u64::from(replicas) {
            return Err(format!(
                "maintenance still reported more after {calls} calls"
            ));
        }
    }
}

/// Makes every replica of the fleet's instance expired and full of
/// `routes` held reservations, in one transaction: leases end at
/// [`SEEDED_LEASE_END_MS`], each replica gets the route snapshot a decision
/// would write for the binding at the current catalog revision (every
/// value read from the catalog and the replica), `routes` held routes
/// point at it (fences from the store's sequence, attempt 1, the tenant
/// scope), and the replicas' `active` and the scope's counter match.
async fn seed_held_reservations(admin: &mut PgConnection, routes: u32) -> Result<(), sqlx::Error> {
    let routes = i64::from(routes);
    let mut tx = admin.begin().await?;
    sqlx::query(
        "UPDATE connreg.replicas SET lease_expires_at_ms = $1, active = $2 WHERE instance_id = $3",
    )
    .bind(SEEDED_LEASE_END_MS)
    .bind(routes)
    .bind(INSTANCE)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO connreg.route_snapshots (
             tenant_id, capability_id, binding_id, instance_id, version_id, type_id,
             replica_id, endpoint, peer_identity, region, zone, capacity_class,
             catalog_revision, binding_priority, policy_revision,
             credential_ref, credential_revision,
             secret_provider_ref, secret_provider_revision,
             quota_policy_ref, quota_policy_revision, scopes)
         SELECT b.tenant_id, b.capability_id, b.binding_id, r.instance_id, r.version_id,
                v.type_id, r.replica_id, r.endpoint, r.peer_identity, r.region, r.zone,
                r.capacity_class, cs.revision, b.priority, b.policy_revision,
                b.credential_ref, b.credential_revision,
                i.secret_provider_ref, i.secret_provider_revision,
                b.quota_policy_ref, b.quota_policy_revision, ARRAY[$2]::text[]
           FROM connreg.bindings b
           JOIN connreg.instances i USING (instance_id)
           JOIN connreg.replicas r USING (instance_id)
           JOIN connreg.connector_versions v ON v.version_id = r.version_id
          CROSS JOIN connreg.catalog_state cs
          WHERE b.binding_id = $1
          ORDER BY r.replica_id",
    )
    .bind(BINDING)
    .bind(SCOPE)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO connreg.assignments (
             snapshot_id, fence, attempt, reserved, action_id, last_settlement)
         SELECT s.snapshot_id, nextval('connreg.fence_tokens'), 1, true,
                'held-' || s.replica_id || '-' || k, NULL
           FROM connreg.route_snapshots s
          CROSS JOIN generate_series(1, $2) AS k
          WHERE s.binding_id = $1
          ORDER BY s.replica_id, k",
    )
    .bind(BINDING)
    .bind(routes)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "UPDATE connreg.admission_counters
            SET in_use = in_use + (SELECT count(*) FROM connreg.assignments WHERE reserved)
          WHERE scope_id = $1",
    )
    .bind(SCOPE)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    // A store this size has been analyzed by autovacuum; the bench does
    // not wait for autovacuum's schedule.
    sqlx::raw_sql(
        "ANALYZE connreg.replicas; ANALYZE connreg.route_snapshots;
         ANALYZE connreg.assignments; ANALYZE connreg.admission_counters",
    )
    .execute(&mut *admin)
    .await?;
    Ok(())
}
