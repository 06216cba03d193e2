//! Goal: `connreg-qualify` qualifies a server as an operator deploys it
//! (issue 10, item 1): a cluster started with `fsync=on`, a database an
//! admin prepared with `create_roles`, and two ordinary roles (no
//! superuser, no CREATEDB, no CREATEROLE). The runner migrates only when
//! asked, refuses a database at another schema version, writes its fleet
//! under a run-specific prefix, removes exactly that at the end, and leaves
//! another tenant's rows untouched.

mod common;

use std::str::FromStr;

use common::{contract_file, qualify, smoke_text};
use connreg::contracts::{CatalogAdmin, ReplicaLifecycle, Routing};
use connreg::postgres::{PgConnectOptions, PgOptions, PgRegistry, Roles, create_roles};
use connreg::{ManualClock, RegistryConfig, Timestamp};
use connreg_benches::qualify::fleet::FleetPlan;
use connreg_pgtest::{LocalCluster, LocalOptions};
use sqlx::{Connection, PgConnection};

const DATABASE: &str = "qualify_operator";
const CONTROL: &str = "op_control";
const DATA: &str = "op_data";
const PASSWORD: &str = "op-test-password";

/// The tables a fleet and its routes live in, children first.
const FLEET_TABLES: [&str; 13] = [
    "assignments",
    "route_snapshots",
    "replicas",
    "binding_scopes",
    "bindings",
    "admission_counters",
    "admission_scopes",
    "instances",
    "version_profiles",
    "version_capabilities",
    "connector_versions",
    "capability_definitions",
    "connector_types",
];

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

fn url(cluster: &LocalCluster, role: &str) -> String {
    format!(
        "postgres://{role}:{PASSWORD}@{}:{}/{DATABASE}",
        cluster.host(),
        cluster.port()
    )
}

/// Rows per fleet table, as the control role (which owns them) sees them.
async fn row_counts(control_url: &str) -> Vec<(String, i64)> {
    let mut conn = PgConnection::connect(control_url).await.expect("control");
    let mut out = Vec::new();
    for table in FLEET_TABLES {
        let n: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM connreg.{table}"))
            .fetch_one(&mut conn)
            .await
            .expect("count");
        out.push((table.to_string(), n));
    }
    out
}

/// Rows whose identifier starts with `prefix`, over the fleet tables' key
/// columns.
async fn rows_with_prefix(control_url: &str, prefix: &str) -> i64 {
    let mut conn = PgConnection::connect(control_url).await.expect("control");
    let mut total = 0;
    for (table, column) in [
        ("assignments", "action_id"),
        ("route_snapshots", "replica_id"),
        ("replicas", "replica_id"),
        ("bindings", "binding_id"),
        ("admission_scopes", "scope_id"),
        ("instances", "instance_id"),
        ("connector_versions", "version_id"),
        ("capability_definitions", "capability_id"),
        ("connector_types", "type_id"),
    ] {
        let n: i64 = sqlx::query_scalar(&format!(
            "SELECT count(*) FROM connreg.{table} WHERE starts_with({column}, $1)"
        ))
        .bind(prefix)
        .fetch_one(&mut conn)
        .await
        .expect("count");
        total += n;
    }
    total
}

/// A small contract: the smoke fleet, 600 operations, pgbench for 1 s.
fn small_contract() -> std::path::PathBuf {
    let text = smoke_text().replacen("operations = 2000", "operations = 600\npgbench_secs = 1", 1);
    contract_file("operator", &text)
}

#[test]
fn an_fsync_on_server_with_two_plain_roles_qualifies_and_keeps_nothing() {
    // spec: SIM-6, AUTH-1
    let cluster = LocalCluster::start(LocalOptions {
        fsync: true,
        connections_max: 100,
    })
    .expect("a local cluster with fsync=on");
    let rt = runtime();
    rt.block_on(async {
        let mut admin = PgConnection::connect(cluster.url()).await.expect("admin");
        sqlx::query(&format!("CREATE DATABASE {DATABASE}"))
            .execute(&mut admin)
            .await
            .expect("create database");
        let admin_db = PgConnectOptions::from_str(&cluster.database_url(DATABASE)).unwrap();
        let roles = Roles {
            control: CONTROL.into(),
            data: DATA.into(),
            control_password: Some(PASSWORD.into()),
            data_password: Some(PASSWORD.into()),
        };
        create_roles(&admin_db, &roles).await.expect("create_roles");
        // A scratch database where pgbench may create its tables.
        sqlx::query(&format!(
            "CREATE DATABASE {DATABASE}_pgbench OWNER {CONTROL}"
        ))
        .execute(&mut admin)
        .await
        .expect("create the pgbench database");
        let plain: Vec<(String, bool, bool, bool)> = sqlx::query_as(
            "SELECT rolname::text, rolsuper, rolcreatedb, rolcreaterole FROM pg_roles \
             WHERE rolname IN ($1, $2) ORDER BY rolname",
        )
        .bind(CONTROL)
        .bind(DATA)
        .fetch_all(&mut admin)
        .await
        .unwrap();
        assert_eq!(plain.len(), 2);
        for (role, superuser, createdb, createrole) in plain {
            assert!(!(superuser || createdb || createrole), "{role} is ordinary");
        }
    });
    let control = url(&cluster, CONTROL);
    let data = url(&cluster, DATA);
    let env = small_contract();
    let urls = [
        "--backend",
        "postgres",
        "--control-url",
        control.as_str(),
        "--data-url",
        data.as_str(),
    ];

    // No schema yet, and no --migrate: refused before anything is written.
    let refused = qualify(&env, &urls);
    assert_eq!(refused.code, 3, "{}", refused.said());
    assert!(refused.stderr.contains("--migrate"), "{}", refused.said());

    // --migrate: the control role installs the schema, then the run.
    let pgbench_url = format!(
        "postgres://{CONTROL}:{PASSWORD}@{}:{}/{DATABASE}_pgbench",
        cluster.host(),
        cluster.port()
    );
    let mut migrate = urls.to_vec();
    migrate.extend(["--migrate", "--pgbench-url", pgbench_url.as_str()]);
    let first = qualify(&env, &migrate);
    assert_eq!(first.code, 0, "{}", first.said());
    let report = first.report.as_ref().expect("a report");
    let server = &report["backend"]["server"];
    assert_eq!(server["source"], "url", "{server}");
    assert_eq!(server["kind"], "operator", "{server}");
    assert_eq!(server["settings"]["fsync"], "on", "{server}");
    assert_eq!(server["control_role"], CONTROL, "{server}");
    assert_eq!(server["data_role"], DATA, "{server}");
    assert!(first.stdout.contains("fsync=on"), "{}", first.said());
    let pgbench = &report["pgbench"];
    assert!(pgbench["skipped"].is_null(), "{pgbench}");
    assert!(pgbench["tpcb_tps"].as_f64().unwrap() > 0.0, "{pgbench}");
    assert!(
        pgbench["select_only_tps"].as_f64().unwrap() > 0.0,
        "{pgbench}"
    );
    assert!(pgbench["scale"].as_u64().unwrap() >= report["load"]["clients"].as_u64().unwrap());
    let prefix = report["run"]["prefix"]
        .as_str()
        .expect("a prefix")
        .to_string();
    assert!(!prefix.is_empty());
    assert_eq!(report["cleanup"]["rows_left"], 0, "{}", first.said());
    assert!(report["cleanup"]["rows_removed"].as_u64().unwrap() > 0);
    let after_first = rt.block_on(row_counts(&control));
    assert!(
        after_first.iter().all(|(_, n)| *n == 0),
        "rows left behind: {after_first:?}"
    );

    // Another tenant's fleet, with a live route, beside the next run.
    rt.block_on(async {
        let registry = PgRegistry::connect(
            PgOptions::from_urls(&control, &data).unwrap(),
            ManualClock::new(Timestamp(1_000_000)),
            RegistryConfig::default(),
        )
        .await
        .expect("the operator's own registry");
        let shape = connreg_benches::qualify::contract::Contract::parse("x", &smoke_text())
            .unwrap()
            .fleet;
        let plan = FleetPlan::with_prefix(&shape, "other-");
        for p in plan.publications() {
            registry.catalog_publish(p).await.unwrap();
        }
        for spec in &plan.replicas {
            registry
                .replica_register(plan.register_params(spec.clone()))
                .await
                .unwrap();
        }
        registry
            .route_resolve(connreg::RouteRequest {
                action: connreg::ActionId::new("other-a1").unwrap(),
                tenant: Some(plan.tenants[0].clone()),
                capability: plan.capabilities[0].clone(),
                topology: plan.topology(0, 0),
            })
            .await
            .expect("a route");
        registry.close().await;
    });
    let foreign = rt.block_on(row_counts(&control));
    assert!(foreign.iter().any(|(_, n)| *n > 0));

    // Without --migrate on a migrated database: runs, and removes only its own.
    let mut second_args = urls.to_vec();
    second_args.push("--no-pgbench");
    let second = qualify(&env, &second_args);
    assert_eq!(second.code, 0, "{}", second.said());
    let report = second.report.as_ref().expect("a report");
    let prefix2 = report["run"]["prefix"].as_str().unwrap().to_string();
    assert_ne!(prefix, prefix2, "each run has its own prefix");
    assert_eq!(
        rt.block_on(row_counts(&control)),
        foreign,
        "foreign rows kept"
    );
    assert_eq!(rt.block_on(rows_with_prefix(&control, &prefix2)), 0);
}
