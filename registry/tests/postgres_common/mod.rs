//! Shared setup of the PostgreSQL tests: a fresh database, its two roles,
//! and a registry on it, built in one place.

#![allow(dead_code, unreachable_pub)]

use std::str::FromStr;

use connreg::postgres::{PgConnectOptions, PgOptions, PgRegistry, Roles, create_roles};
use connreg::{ManualClock, RegistryConfig, Timestamp};
use connreg_pgtest::TestDatabase;
use sqlx::{Connection, PgConnection};

/// A password for the test roles only; the local test cluster trusts
/// loopback, a server named by URL may ask for it.
pub const TEST_ROLE_PASSWORD: &str = "connreg-test-only";

/// One test's database and roles. Dropping it drops the database, then
/// (best effort) the two roles.
pub struct PgFixture {
    db: Option<TestDatabase>,
    pub admin: PgConnectOptions,
    pub roles: Roles,
}

impl PgFixture {
    /// A new database with its control and data roles and the schema
    /// owned by the control role; nothing installed yet.
    pub async fn new() -> PgFixture {
        let db = TestDatabase::create().await.unwrap_or_else(|e| {
            panic!("a PostgreSQL test database (see pgtest/README or connreg_pgtest docs): {e}")
        });
        let admin = PgConnectOptions::from_str(db.url()).expect("the test database url parses");
        let roles = Roles {
            control: format!("{}_control", db.database_name()),
            data: format!("{}_data", db.database_name()),
            control_password: Some(TEST_ROLE_PASSWORD.into()),
            data_password: Some(TEST_ROLE_PASSWORD.into()),
        };
        create_roles(&admin, &roles)
            .await
            .expect("the admin role creates the test roles");
        PgFixture {
            db: Some(db),
            admin,
            roles,
        }
    }

    /// Both pools with their defaults, as the fixture's roles.
    pub fn options(&self) -> PgOptions {
        PgOptions::for_roles(&self.admin, &self.roles)
    }

    /// A registry with the schema installed, time from `clock`.
    pub async fn registry(&self, clock: ManualClock) -> PgRegistry {
        PgRegistry::connect(self.options(), clock, RegistryConfig::default())
            .await
            .expect("the registry starts on a fresh database")
    }

    /// A registry at time 0 and its clock.
    pub async fn registry_at_zero(&self) -> (PgRegistry, ManualClock) {
        let clock = ManualClock::new(Timestamp(0));
        (self.registry(clock.clone()).await, clock)
    }

    /// A plain connection as the superuser.
    pub async fn admin_conn(&self) -> PgConnection {
        PgConnection::connect_with(&self.admin)
            .await
            .expect("the admin connects")
    }

    /// A plain connection as the data role, `search_path` unset.
    pub async fn data_conn(&self) -> PgConnection {
        PgConnection::connect_with(&self.options().data.connect)
            .await
            .expect("the data role connects")
    }

    pub fn database_name(&self) -> &str {
        self.db.as_ref().map_or("", |d| d.database_name())
    }
}

impl Drop for PgFixture {
    fn drop(&mut self) {
        // The database first: a role that owns objects cannot be dropped.
        let Some(db) = self.db.take() else { return };
        let server = db.server();
        drop(db);
        // Throwaway servers drop databases in the background and vanish
        // with the process, roles included; only a server named by URL
        // outlives us, and there the database drop has finished by now.
        if server.source() != connreg_pgtest::ServerSource::Url {
            return;
        }
        let admin = self.admin.clone().database("postgres");
        let roles = [self.roles.control.clone(), self.roles.data.clone()];
        #[allow(
            clippy::disallowed_methods,
            reason = "test cleanup runs async work from Drop, outside any runtime's reach"
        )]
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            Some(runtime.block_on(async move {
                let mut conn = PgConnection::connect_with(&admin).await?;
                for role in roles {
                    let statement: String =
                        sqlx::query_scalar("SELECT format('DROP ROLE IF EXISTS %I', $1::text)")
                            .bind(role)
                            .fetch_one(&mut conn)
                            .await?;
                    sqlx::raw_sql(&statement).execute(&mut conn).await?;
                }
                Ok::<(), sqlx::Error>(())
            }))
        })
        .join();
        match dropped {
            Ok(Some(Ok(()))) => {}
            Ok(Some(Err(e))) => {
                let detail = e
                    .as_database_error()
                    .and_then(|d| d.try_downcast_ref::<sqlx::postgres::PgDatabaseError>())
                    .and_then(|d| d.detail().map(str::to_owned))
                    .unwrap_or_default();
                eprintln!("postgres tests: test roles left on the server: {e} {detail}")
            }
            _ => eprintln!("postgres tests: test roles left on the server"),
        }
    }
}

use std::collections::BTreeSet;

use connreg::contracts::CatalogAdmin;
use connreg::{
    AdmissionScope, Binding, CapabilityDefinition, Change, ConnectorType, ConnectorVersion,
    CrossRegion, Instance, OpaqueRef, Publication, Revision, RouteRequest, ScopeKind,
    TopologyPreference,
};

/// The capability every fixture fleet serves.
pub const CAPABILITY: &str = "crm.contact.create";
/// The connector version every fixture instance runs.
pub const VERSION: &str = "crm-1";
/// The capacity class of fixture replicas.
pub const CLASS: &str = "standard";

/// What [`publish_fleet`] publishes.
#[derive(Debug, Clone)]
pub struct FleetOptions {
    /// Tenants `t0`, `t1`, ...
    pub tenants: usize,
    /// Instances per tenant, `t0-i0`, ...; one binding each, `t0-b0`, ...
    pub instances_per_tenant: usize,
    /// A tenant scope `t0-s` with this limit on every binding, if any.
    pub tenant_scope_limit: Option<u32>,
}

impl Default for FleetOptions {
    fn default() -> Self {
        FleetOptions {
            tenants: 1,
            instances_per_tenant: 1,
            tenant_scope_limit: None,
        }
    }
}

pub fn opaque(reference: &str) -> OpaqueRef {
    OpaqueRef {
        reference: reference.into(),
        revision: 1,
    }
}

/// The catalog of a fleet: one type, one definition, one version, and per
/// tenant its instances, bindings and optional scope.
pub fn fleet_publication(options: &FleetOptions) -> Publication {
    let mut changes = vec![
        Change::UpsertType(ConnectorType {
            id: "crm".try_into().unwrap(),
            family: "crm".into(),
            owner: "team".into(),
            enabled: true,
        }),
        Change::UpsertDefinition(CapabilityDefinition {
            id: CAPABILITY.try_into().unwrap(),
            summary: "Create a contact".into(),
            schema: "{}".into(),
            active: true,
        }),
        Change::AdmitVersion(ConnectorVersion {
            id: VERSION.try_into().unwrap(),
            connector_type: "crm".try_into().unwrap(),
            artifact_digest: "sha256:1".into(),
            manifest: "manifest".into(),
            capabilities: BTreeSet::from([CAPABILITY.try_into().unwrap()]),
            profiles: BTreeSet::new(),
            attestation: "attestation".into(),
            active: true,
            qualified: true,
        }),
    ];
    for t in 0..options.tenants {
        let tenant = format!("t{t}");
        let scopes = match options.tenant_scope_limit {
            Some(limit) => {
                changes.push(Change::UpsertScope(AdmissionScope {
                    id: format!("{tenant}-s").try_into().unwrap(),
                    tenant: tenant.clone().try_into().unwrap(),
                    kind: ScopeKind::Tenant,
                    limit,
                }));
                BTreeSet::from([format!("{tenant}-s").try_into().unwrap()])
            }
            None => BTreeSet::new(),
        };
        for i in 0..options.instances_per_tenant {
            changes.push(Change::UpsertInstance(Instance {
                id: format!("{tenant}-i{i}").try_into().unwrap(),
                tenant: tenant.clone().try_into().unwrap(),
                version: VERSION.try_into().unwrap(),
                config: opaque("config"),
                secret_provider: opaque("vault:kv/crm"),
                enabled: true,
            }));
            changes.push(Change::UpsertBinding(Binding {
                id: format!("{tenant}-b{i}").try_into().unwrap(),
                tenant: tenant.clone().try_into().unwrap(),
                capability: CAPABILITY.try_into().unwrap(),
                instance: format!("{tenant}-i{i}").try_into().unwrap(),
                priority: 1,
                policy_revision: 1,
                credential: opaque("credential"),
                quota_policy: None,
                admission_scopes: scopes.clone(),
                enabled: true,
            }));
        }
    }
    Publication { changes }
}

pub async fn publish_fleet(registry: &impl CatalogAdmin, options: &FleetOptions) -> Revision {
    registry
        .catalog_publish(fleet_publication(options))
        .await
        .expect("the fleet catalog publishes")
}

/// Inserts `count` ready replicas of `instance`, `{instance}-r{n}`, in one
/// statement as the admin (a large fleet without thousands of calls).
pub async fn bulk_replicas(
    conn: &mut PgConnection,
    instance: &str,
    count: usize,
    capacity: u32,
    lease_expires_at_ms: i64,
) {
    sqlx::query(
        "INSERT INTO connreg.replicas (replica_id, instance_id, version_id, endpoint,
             peer_identity, region, zone, capacity_class, capacity, health_seq,
             lease_expires_at_ms, active, state, circuit_open, consecutive_unknown)
         SELECT $1 || '-r' || n, $1, $2, 'https://' || $1 || '-r' || n,
                'spiffe://' || $1 || '-r' || n, 'eu', 'eu-' || (n % 3), $3, $4, 1, $5, 0,
                'ready', false, 0
         FROM generate_series(0, $6 - 1) AS n",
    )
    .bind(instance)
    .bind(VERSION)
    .bind(CLASS)
    .bind(i64::from(capacity))
    .bind(lease_expires_at_ms)
    .bind(count as i64)
    .execute(conn)
    .await
    .expect("bulk replicas insert");
}

/// A request of `tenant` for the fixture capability, anywhere.
pub fn request(action: &str, tenant: &str) -> RouteRequest {
    RouteRequest {
        action: action.try_into().unwrap(),
        tenant: Some(tenant.try_into().unwrap()),
        capability: CAPABILITY.try_into().unwrap(),
        topology: TopologyPreference {
            preferred_region: Some("eu".try_into().unwrap()),
            preferred_zone: Some("eu-1".try_into().unwrap()),
            capacity_class: CLASS.try_into().unwrap(),
            cross_region: CrossRegion::Allowed,
        },
    }
}

/// Registration of replica `id` of `instance` in the fixture's region and
/// zone, with `capacity`.
pub fn register_params(
    id: &str,
    instance: &str,
    capacity: u32,
    health_seq: u64,
    lease_ttl_ms: u64,
) -> connreg::RegisterParams {
    connreg::RegisterParams {
        spec: connreg::ReplicaSpec {
            id: id.try_into().unwrap(),
            instance: instance.try_into().unwrap(),
            version: VERSION.try_into().unwrap(),
            endpoint: format!("https://{id}").into(),
            peer_identity: format!("spiffe://{id}").into(),
            region: "eu".try_into().unwrap(),
            zone: "eu-1".try_into().unwrap(),
            capacity_class: CLASS.try_into().unwrap(),
            capacity,
        },
        health_seq,
        lease_ttl_ms,
    }
}

/// Waits (bounded) until `n` sessions of the registry's data pool wait for
/// a lock; panics if they never do.
pub async fn until_waiting(admin: &mut PgConnection, n: i64) {
    for _ in 0..500 {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
              WHERE datname = current_database() AND application_name = 'connreg-data'
                AND wait_event_type = 'Lock'",
        )
        .fetch_one(&mut *admin)
        .await
        .unwrap();
        if waiting >= n {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    panic!("{n} registry sessions never waited for a lock together");
}

/// Catalog, admission, route, replica and schema writes the data role must
/// be refused by the database's own grants (AUTH-2), one statement each.
pub const AUTH2_FORBIDDEN: &[&str] = &[
    // catalog records
    "INSERT INTO connreg.connector_types VALUES ('x', 'f', 'o', true)",
    "UPDATE connreg.connector_types SET enabled = false",
    "INSERT INTO connreg.connector_versions VALUES ('v9', 'crm', 'd', 'm', 'a', true, true)",
    "UPDATE connreg.connector_versions SET qualified = false",
    "INSERT INTO connreg.version_capabilities VALUES ('crm-1', 'other')",
    "INSERT INTO connreg.capability_definitions VALUES ('c9', 's', '{}', true)",
    "UPDATE connreg.capability_definitions SET active = false",
    "INSERT INTO connreg.instances VALUES ('i9', 't0', 'crm-1', 'c', 1, 's', 1, true)",
    "UPDATE connreg.instances SET enabled = false",
    "UPDATE connreg.instances SET tenant_id = 't1'",
    "INSERT INTO connreg.bindings VALUES
        ('b9', 't0', 'crm.contact.create', 't0-i0', 0, 1, 'c', 1, NULL, NULL, true)",
    "UPDATE connreg.bindings SET priority = 0",
    "DELETE FROM connreg.bindings",
    "INSERT INTO connreg.binding_scopes VALUES ('t0-b0', 'x', 't0')",
    "UPDATE connreg.catalog_state SET revision = revision + 1",
    // admission records: limits and new counters
    "UPDATE connreg.admission_scopes SET scope_limit = 1000000",
    "INSERT INTO connreg.admission_scopes VALUES ('s9', 't0', 'tenant', 10)",
    "INSERT INTO connreg.admission_counters VALUES ('t0-s', 0)",
    "DELETE FROM connreg.admission_counters",
    // the immutable parts of routes and replicas
    "UPDATE connreg.route_snapshots SET replica_id = 't0-i0-r1'",
    "UPDATE connreg.route_snapshots SET endpoint = 'https://elsewhere'",
    "UPDATE connreg.assignments SET snapshot_id = 0",
    "DELETE FROM connreg.assignments",
    "DELETE FROM connreg.route_snapshots",
    "UPDATE connreg.replicas SET endpoint = 'https://elsewhere'",
    "UPDATE connreg.replicas SET capacity = 10000",
    "DELETE FROM connreg.replicas",
    // schema
    "UPDATE connreg.schema_version SET version = 99",
    "CREATE TABLE connreg.intruder (id int)",
    "ALTER TABLE connreg.replicas ADD COLUMN intruder int",
    "ALTER TABLE connreg.admission_scopes DROP CONSTRAINT admission_scopes_limit_ck",
    "CREATE INDEX intruder_ix ON connreg.replicas (endpoint)",
    "DROP TABLE connreg.bindings",
    "TRUNCATE connreg.assignments",
    "TRUNCATE connreg.route_snapshots",
    "CREATE FUNCTION connreg.intruder() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    "SELECT connreg.grant_data_role(current_user)",
];

/// Runs `statement` as the connection's role; the SQLSTATE of its refusal,
/// or `None` when the database accepted it.
pub async fn refusal(conn: &mut PgConnection, statement: &str) -> Option<String> {
    match sqlx::raw_sql(statement).execute(&mut *conn).await {
        Ok(_) => None,
        Err(sqlx::Error::Database(e)) => Some(e.code().unwrap_or_default().into_owned()),
        Err(e) => panic!("{statement}: not a database refusal: {e}"),
    }
}
