//! Goal: a database at schema version 7, with a fleet and routes written
//! by that version, upgrades in place when the current registry connects:
//! every route answers as it was written (its fixed part now in a shared
//! snapshot, migration 0012: one per replica, binding and revision), the
//! held one keeps its fence, settles and releases its reservation, and
//! routing goes on, sharing the snapshot of its key.
#![cfg(feature = "postgres")]

use std::borrow::Cow;

use connreg::contracts::Routing;
use connreg::postgres::testing::TestRegistry;
use connreg::postgres::{MIGRATOR, PgDataPlane, PgRegistry, SCHEMA_VERSION};
use connreg::{
    CapacityClass, CrossRegion, ManualClock, Outcome, RegistryConfig, RouteRequest, SettleParams,
    Timestamp, TopologyPreference,
};
use sqlx::migrate::Migrator;
use sqlx::{Connection, PgConnection};

/// The schema version the upgrade starts from.
const PREVIOUS_VERSION: i64 = 7;

/// The fleet and three routes, as version 7's code wrote them, in plain
/// SQL as the control role (the owner): `old-1` held and `old-2` settled on
/// replica r0, `old-3` held on replica r1.
const VERSION_7_FLEET: &str = "
    INSERT INTO connreg.connector_types (type_id, family, owner, enabled)
        VALUES ('crm', 'crm', 'team', true);
    INSERT INTO connreg.capability_definitions (capability_id, summary, schema_json, active)
        VALUES ('crm.contact.create', 'Create a contact', '{}', true);
    INSERT INTO connreg.connector_versions (version_id, type_id, artifact_digest, manifest,
            attestation, active, qualified)
        VALUES ('crm-1', 'crm', 'sha256:1', 'manifest', 'attestation', true, true);
    INSERT INTO connreg.version_capabilities (version_id, capability_id)
        VALUES ('crm-1', 'crm.contact.create');
    INSERT INTO connreg.instances (instance_id, tenant_id, version_id, config_ref,
            config_revision, secret_provider_ref, secret_provider_revision, enabled)
        VALUES ('t0-i0', 't0', 'crm-1', 'config', 1, 'vault:kv/crm', 1, true);
    INSERT INTO connreg.admission_scopes (scope_id, tenant_id, kind, scope_limit)
        VALUES ('t0-s', 't0', 'tenant', 5);
    INSERT INTO connreg.admission_counters (scope_id, in_use) VALUES ('t0-s', 2);
    INSERT INTO connreg.bindings (binding_id, tenant_id, capability_id, instance_id, priority,
            policy_revision, credential_ref, credential_revision, quota_policy_ref,
            quota_policy_revision, enabled)
        VALUES ('t0-b0', 't0', 'crm.contact.create', 't0-i0', 1, 1, 'credential', 1, NULL,
                NULL, true);
    INSERT INTO connreg.binding_scopes (binding_id, scope_id, tenant_id)
        VALUES ('t0-b0', 't0-s', 't0');
    UPDATE connreg.catalog_state SET revision = 1;
    INSERT INTO connreg.replicas (replica_id, instance_id, version_id, endpoint,
            peer_identity, region, zone, capacity_class, capacity, health_seq,
            lease_expires_at_ms, active, state, circuit_open, consecutive_unknown)
        VALUES ('t0-i0-r0', 't0-i0', 'crm-1', 'https://t0-i0-r0', 'spiffe://t0-i0-r0', 'eu',
                'eu-1', 'standard', 4, 1, 600000, 1, 'ready', false, 0),
               ('t0-i0-r1', 't0-i0', 'crm-1', 'https://t0-i0-r1', 'spiffe://t0-i0-r1', 'eu',
                'eu-2', 'standard', 4, 1, 600000, 1, 'ready', false, 0);
    INSERT INTO connreg.assignments (action_id, tenant_id, capability_id, binding_id,
            instance_id, version_id, type_id, replica_id, endpoint, peer_identity, region,
            zone, catalog_revision, binding_priority, policy_revision, credential_ref,
            credential_revision, secret_provider_ref, secret_provider_revision,
            quota_policy_ref, quota_policy_revision, capacity_class, fence, attempt,
            reserved, last_settlement)
        VALUES ('old-1', 't0', 'crm.contact.create', 't0-b0', 't0-i0', 'crm-1', 'crm',
                't0-i0-r0', 'https://t0-i0-r0', 'spiffe://t0-i0-r0', 'eu', 'eu-1', 1, 1, 1,
                'credential', 1, 'vault:kv/crm', 1, NULL, NULL, 'standard',
                nextval('connreg.fence_tokens'), 1, true, NULL),
               ('old-2', 't0', 'crm.contact.create', 't0-b0', 't0-i0', 'crm-1', 'crm',
                't0-i0-r0', 'https://t0-i0-r0', 'spiffe://t0-i0-r0', 'eu', 'eu-1', 1, 1, 1,
                'credential', 1, 'vault:kv/crm', 1, NULL, NULL, 'standard',
                nextval('connreg.fence_tokens'), 2, false, 'completed'),
               ('old-3', 't0', 'crm.contact.create', 't0-b0', 't0-i0', 'crm-1', 'crm',
                't0-i0-r1', 'https://t0-i0-r1', 'spiffe://t0-i0-r1', 'eu', 'eu-2', 1, 1, 1,
                'credential', 1, 'vault:kv/crm', 1, NULL, NULL, 'standard',
                nextval('connreg.fence_tokens'), 1, true, NULL);
    INSERT INTO connreg.assignment_scopes (action_id, scope_id)
        VALUES ('old-1', 't0-s'), ('old-2', 't0-s'), ('old-3', 't0-s');
";

fn request(action: &str) -> RouteRequest {
    RouteRequest {
        action: action.try_into().unwrap(),
        tenant: Some("t0".try_into().unwrap()),
        capability: "crm.contact.create".try_into().unwrap(),
        topology: TopologyPreference {
            preferred_region: Some("eu".try_into().unwrap()),
            preferred_zone: Some("eu-1".try_into().unwrap()),
            capacity_class: CapacityClass::try_from("standard").unwrap(),
            cross_region: CrossRegion::Allowed,
        },
    }
}

/// The scope's reservations and the replica's active count, as the admin.
async fn held(admin: &mut PgConnection) -> (i64, i64) {
    sqlx::query_as(
        "SELECT (SELECT in_use FROM connreg.admission_counters WHERE scope_id = 't0-s'),
                (SELECT active FROM connreg.replicas WHERE replica_id = 't0-i0-r0')",
    )
    .fetch_one(admin)
    .await
    .unwrap()
}

/// The shared route snapshots (migration 0012 on), as the admin.
async fn snapshots(admin: &mut PgConnection) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM connreg.route_snapshots")
        .fetch_one(admin)
        .await
        .unwrap()
}

/// Migrations up to `version` only, through the control role with the
/// schema as search_path (where the migrator keeps its own table).
async fn migrate_to(control: &mut PgConnection, version: i64) {
    let previous = Migrator {
        migrations: Cow::Owned(
            MIGRATOR
                .migrations
                .iter()
                .filter(|m| m.version <= version)
                .cloned()
                .collect(),
        ),
        ..Migrator::DEFAULT
    };
    assert_eq!(previous.migrations.len(), version as usize);
    previous
        .run(&mut *control)
        .await
        .unwrap_or_else(|e| panic!("version {version} installs: {e}"));
    let installed: i32 = sqlx::query_scalar("SELECT version FROM connreg.schema_version")
        .fetch_one(&mut *control)
        .await
        .unwrap();
    assert_eq!(i64::from(installed), version);
}

/// Version 7, installed as version 7's registry did (its migrations, then
/// the data role's grants), with [`VERSION_7_FLEET`] written; the control
/// connection that wrote it.
async fn version_7_with_routes(test: &TestRegistry) -> PgConnection {
    let control_options = test
        .options()
        .control
        .connect
        .clone()
        .options([("search_path", "connreg")]);
    let mut control = PgConnection::connect_with(&control_options).await.unwrap();
    migrate_to(&mut control, PREVIOUS_VERSION).await;
    sqlx::query("SELECT connreg.grant_data_role($1)")
        .bind(&test.roles.data)
        .execute(&mut control)
        .await
        .unwrap();
    sqlx::raw_sql(&format!("BEGIN; {VERSION_7_FLEET} COMMIT;"))
        .execute(&mut control)
        .await
        .expect("version 7's fleet is written");
    control
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_7_database_upgrades_and_keeps_its_routes() {
    // spec: AUTH-3
    let test = TestRegistry::create().await.expect("a test database");
    let mut admin = test.admin_connection().await.unwrap();
    let mut control = version_7_with_routes(&test).await;
    let old_fence: i64 =
        sqlx::query_scalar("SELECT fence FROM connreg.assignments WHERE action_id = 'old-1'")
            .fetch_one(&mut control)
            .await
            .unwrap();
    control.close().await.unwrap();
    assert_eq!(held(&mut admin).await, (2, 1));

    // The current registry connects: the newer migrations apply.
    let clock = ManualClock::new(Timestamp(0));
    let registry = PgRegistry::connect(test.options(), clock.clone(), RegistryConfig::default())
        .await
        .expect("the registry upgrades a version 7 database");
    let version: i32 = sqlx::query_scalar("SELECT version FROM connreg.schema_version")
        .fetch_one(&mut admin)
        .await
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);

    // Past version 7 the data role reaches tables only through the
    // protocol's functions (AUTH-6): the upgrade took version 7's direct
    // grants away.
    if i64::from(SCHEMA_VERSION) > PREVIOUS_VERSION {
        let writes: Vec<String> = sqlx::query_scalar(
            "SELECT format('%s on connreg.%I', p.privilege, c.relname)
               FROM pg_class c
               JOIN pg_namespace n ON n.oid = c.relnamespace
              CROSS JOIN unnest(ARRAY['INSERT', 'UPDATE', 'DELETE', 'TRUNCATE'])
                         AS p(privilege)
              WHERE n.nspname = 'connreg' AND c.relkind IN ('r', 'p', 'v')
                AND (has_table_privilege($1, c.oid, p.privilege)
                     OR (p.privilege IN ('INSERT', 'UPDATE')
                         AND has_any_column_privilege($1, c.oid, p.privilege)))
              ORDER BY 1",
        )
        .bind(&test.roles.data)
        .fetch_all(&mut admin)
        .await
        .unwrap();
        assert!(
            writes.is_empty(),
            "after the upgrade the data role still writes: {writes:?}"
        );
    }

    // Version 7's route, read and settled through the data plane alone.
    let plane = PgDataPlane::connect(test.options().data, clock, RegistryConfig::default())
        .await
        .expect("the data plane starts on the upgraded schema");
    let old = plane
        .route_get("t0".try_into().unwrap(), "old-1".try_into().unwrap())
        .await
        .unwrap()
        .expect("version 7's route is readable");
    assert!(old.reserved);
    assert_eq!(
        i64::try_from(old.assignment.reservation.fence.0).unwrap(),
        old_fence
    );
    assert_eq!(old.assignment.destination.replica.as_str(), "t0-i0-r0");
    assert_eq!(
        old.assignment.destination.endpoint.as_str(),
        "https://t0-i0-r0"
    );
    assert_eq!(old.assignment.destination.zone.as_str(), "eu-1");
    assert_eq!(old.assignment.policy.catalog_revision.0, 1);
    assert_eq!(
        old.assignment.policy.credential.reference.as_str(),
        "credential"
    );
    assert_eq!(old.assignment.policy.quota_policy, None);
    assert_eq!(
        old.assignment
            .reservation
            .scopes
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>(),
        ["t0-s"]
    );
    // The settled route on the same key shares its snapshot; the route
    // to the other replica has its own.
    let settled_before = plane
        .route_get("t0".try_into().unwrap(), "old-2".try_into().unwrap())
        .await
        .unwrap()
        .expect("version 7's settled route is readable");
    assert!(!settled_before.reserved);
    assert_eq!(settled_before.last_settlement, Some(Outcome::Completed));
    assert_eq!(settled_before.assignment.reservation.attempt, 2);
    assert_eq!(
        settled_before.assignment.destination,
        old.assignment.destination
    );
    assert_eq!(settled_before.assignment.policy, old.assignment.policy);
    let other = plane
        .route_get("t0".try_into().unwrap(), "old-3".try_into().unwrap())
        .await
        .unwrap()
        .expect("version 7's route to the other replica is readable");
    assert!(other.reserved);
    assert_eq!(
        other.assignment.destination.endpoint.as_str(),
        "https://t0-i0-r1"
    );
    assert_eq!(other.assignment.destination.zone.as_str(), "eu-2");
    assert_eq!(snapshots(&mut admin).await, 2);
    let settled = plane
        .route_settle(SettleParams {
            assignment: old.assignment.clone(),
            outcome: Outcome::Completed,
        })
        .await
        .unwrap();
    assert!(settled.released);
    assert_eq!(
        held(&mut admin).await,
        (1, 0),
        "the reservation is released"
    );

    // And a new route, with a fence after the old one, to the idle
    // replica (r1 holds old-3), through the snapshot the old routes share.
    let new = plane.route_resolve(request("new-1")).await.unwrap();
    assert!(i64::try_from(new.assignment.reservation.fence.0).unwrap() > old_fence);
    assert_eq!(held(&mut admin).await, (2, 1));
    assert_eq!(new.assignment.destination, old.assignment.destination);
    assert_eq!(new.assignment.policy, old.assignment.policy);
    assert_eq!(snapshots(&mut admin).await, 2);
    plane.close().await;
    registry.close().await;
}

/// A version 19 database (scopes in every route's row) with version 7's
/// routes, and a snapshot no route names for another capacity class.
async fn version_19_with_routes(test: &TestRegistry) -> PgConnection {
    let mut control = version_7_with_routes(test).await;
    migrate_to(&mut control, 19).await;
    sqlx::query(
        "INSERT INTO connreg.route_snapshots (tenant_id, capability_id, binding_id,
             instance_id, version_id, type_id, replica_id, endpoint, peer_identity, region,
             zone, catalog_revision, binding_priority, policy_revision, credential_ref,
             credential_revision, secret_provider_ref, secret_provider_revision,
             quota_policy_ref, quota_policy_revision, capacity_class)
         SELECT tenant_id, capability_id, binding_id, instance_id, version_id, type_id,
                replica_id, endpoint, peer_identity, region, zone, catalog_revision,
                binding_priority, policy_revision, credential_ref, credential_revision,
                secret_provider_ref, secret_provider_revision, quota_policy_ref,
                quota_policy_revision, 'bulk'
           FROM connreg.route_snapshots WHERE replica_id = 't0-i0-r1'",
    )
    .execute(&mut control)
    .await
    .expect("a snapshot no route names");
    control
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrading_moves_the_routes_scopes_into_their_snapshots() {
    // spec: AUTH-3 — migration 0020: every snapshot takes its routes'
    // scopes, or with none, its binding's as published.
    let test = TestRegistry::create().await.expect("a test database");
    let mut control = version_19_with_routes(&test).await;
    migrate_to(&mut control, i64::from(SCHEMA_VERSION)).await;
    let t0_s = vec!["t0-s".to_string()];
    let snapshots: Vec<(String, Vec<String>)> = sqlx::query_as(
        "SELECT capacity_class || '/' || replica_id, scopes FROM connreg.route_snapshots
          ORDER BY 1",
    )
    .fetch_all(&mut control)
    .await
    .unwrap();
    assert_eq!(
        snapshots,
        [
            ("bulk/t0-i0-r1".to_string(), t0_s.clone()),
            ("standard/t0-i0-r0".to_string(), t0_s.clone()),
            ("standard/t0-i0-r1".to_string(), t0_s.clone()),
        ]
    );
    let routes: Vec<(String, Vec<String>)> =
        sqlx::query_as("SELECT action_id, scopes FROM connreg.routes ORDER BY 1")
            .fetch_all(&mut control)
            .await
            .unwrap();
    assert_eq!(
        routes,
        [
            ("old-1".to_string(), t0_s.clone()),
            ("old-2".to_string(), t0_s.clone()),
            ("old-3".to_string(), t0_s),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_of_one_snapshot_with_other_scopes_stop_the_upgrade() {
    // spec: AUTH-3 — a store the migration cannot keep whole is refused,
    // named, and left as it was.
    let test = TestRegistry::create().await.expect("a test database");
    let mut control = version_19_with_routes(&test).await;
    sqlx::query("UPDATE connreg.assignments SET scopes = '{}' WHERE action_id = 'old-2'")
        .execute(&mut control)
        .await
        .unwrap();
    let message = match PgRegistry::connect(
        test.options(),
        ManualClock::new(Timestamp(0)),
        RegistryConfig::default(),
    )
    .await
    {
        Ok(_) => panic!("the upgrade is refused"),
        Err(refused) => refused.to_string(),
    };
    assert!(
        message.contains("route old-2 has other scopes"),
        "the refusal names the route: {message}"
    );
    let version: i32 = sqlx::query_scalar("SELECT version FROM connreg.schema_version")
        .fetch_one(&mut control)
        .await
        .unwrap();
    assert_eq!(version, 19, "nothing of migration 0020 is kept");
}
