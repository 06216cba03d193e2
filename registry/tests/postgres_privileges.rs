//! Goal: an attacker holding the data role's credentials can call the
//! registry protocol and nothing else (issue 14). [`attack`] tries, as the
//! data role on a plain connection, every privilege and statement the issue
//! lists, and reports each breach it finds; the tests around it hold
//! catalog and action locks, check the role defaults that bound sessions,
//! and check that the protocol still works through the data plane.
//!
//! Every check is generic over the schema where it can be (every relation,
//! column, sequence and function of `connreg`), so a new table or function
//! is covered without editing this file.
#![cfg(feature = "postgres")]

mod postgres_common;

use std::collections::BTreeMap;
use std::time::Duration;

use connreg::contracts::{CatalogAdmin, CatalogRead, ReplicaLifecycle, Routing, Status};
use connreg::plant::PgPlant;
use connreg::postgres::{
    CATALOG_KEY, LOCK_CLASS_ACTION, LOCK_CLASS_CATALOG, PgDataPlane, PgRegistry, lock_key,
};
use connreg::{
    CapabilityDefinition, CatalogQuery, Change, HeartbeatOutcome, HeartbeatParams, MaintainParams,
    ManualClock, Outcome, Publication, Reader, RegistryConfig, SettleParams,
};
use postgres_common::{
    AUTH2_FORBIDDEN, FleetOptions, PgFixture, bulk_replicas, publish_fleet, refusal,
    register_params, request,
};
use sqlx::{Connection, PgConnection};

/// A guard against a hang, not a claim about speed: every call below has a
/// server-side or call deadline well under it.
const HANG_GUARD: Duration = Duration::from_secs(15);

/// Runs `statement` as the admin; panics on failure.
async fn admin_exec(conn: &mut PgConnection, statement: &str) {
    sqlx::raw_sql(statement)
        .execute(&mut *conn)
        .await
        .unwrap_or_else(|e| panic!("{statement}: {e}"));
}

/// The statements an attacker with the data role's credentials tries, each
/// on its own (autocommit). Every one must be refused by the database.
/// These are the attacks beyond AUTH-2's writes
/// (`postgres_common::AUTH2_FORBIDDEN`, which `attack` runs too).
const FORBIDDEN: &[&str] = &[
    // spec: AUTH-7 — closing a circuit behind the operator's back, and the
    // audit log, which is append-only and never the data plane's to write
    "UPDATE connreg.replicas SET circuit_open = false",
    "UPDATE connreg.replicas SET circuit_open = false, consecutive_unknown = 0
      WHERE replica_id = 't1-i0-r2'",
    "DELETE FROM connreg.operator_audit",
    "UPDATE connreg.operator_audit SET operator = 'x'",
    "INSERT INTO connreg.operator_audit (at_ms, operator, action, replica_id, reason)
     VALUES (0, 'x', 'circuit_close', 't0-i0-r0', 'forged')",
    // spec: AUTH-6 — reading every tenant's rows
    "SELECT * FROM connreg.assignments",
    "SELECT * FROM connreg.replicas",
    "SELECT * FROM connreg.bindings",
    "SELECT * FROM connreg.instances",
    "SELECT * FROM connreg.admission_counters",
    "SELECT * FROM connreg.eligible_bindings",
    "SELECT * FROM connreg.route_snapshots",
    "SELECT * FROM connreg.routes",
    // a route for tenant t1 through tenant t0's binding, instance and replica
    "INSERT INTO connreg.route_snapshots (tenant_id, capability_id, binding_id,
         instance_id, version_id, type_id, replica_id, endpoint, peer_identity, region, zone,
         catalog_revision, binding_priority, policy_revision, credential_ref,
         credential_revision, secret_provider_ref, secret_provider_revision,
         quota_policy_ref, quota_policy_revision, capacity_class)
     VALUES ('t1', 'crm.contact.create', 't0-b0', 't0-i0', 'crm-1', 'crm',
         't0-i0-r0', 'https://t0-i0-r0', 'spiffe://t0-i0-r0', 'eu', 'eu-0', 1, 1, 1,
         'credential', 1, 'vault:kv/crm', 1, NULL, NULL, 'standard')",
    "INSERT INTO connreg.assignments (snapshot_id, fence, attempt, reserved, action_id)
     VALUES (1, 900000, 1, true, 'stolen')",
    "UPDATE connreg.route_snapshots SET scopes = '{t1-s}'",
    // another tenant's snapshot under a route
    "UPDATE connreg.assignments SET snapshot_id = snapshot_id + 1",
    "SELECT nextval('connreg.route_snapshots_snapshot_id_seq')",
    // a replica with any endpoint
    "INSERT INTO connreg.replicas (replica_id, instance_id, version_id, endpoint,
         peer_identity, region, zone, capacity_class, capacity, health_seq,
         lease_expires_at_ms, active, state, circuit_open, consecutive_unknown)
     VALUES ('t0-i0-evil', 't0-i0', 'crm-1', 'https://attacker.example', 'spiffe://evil',
         'eu', 'eu-1', 'standard', 10000, 1, 9000000000000, 0, 'ready', false, 0)",
    "UPDATE connreg.replicas SET capacity = capacity, active = 0",
    // admission counters to zero
    "UPDATE connreg.admission_counters SET in_use = 0",
    // fences ahead of (or behind) the sequence
    "UPDATE connreg.assignments SET fence = fence + 1000",
    "SELECT setval('connreg.fence_tokens', 1)",
    "SELECT setval('connreg.fence_tokens', 1000000)",
    "SELECT nextval('connreg.fence_tokens')",
    // internal functions of the current schema, called directly (they may
    // no longer exist after a migration: any refusal counts)
    "SELECT connreg.reserve_scopes(ARRAY['t1-s'])",
    "SELECT connreg.lock_scopes_with_room(ARRAY['t1-s'])",
    "SELECT connreg.take_scopes_nowait(ARRAY['t1-s'])",
    // the protocol's lock rows (AUTH-6: an action's or instance's lock is
    // the protocol owner's alone), locked directly or through the helper
    "SELECT 1 FROM connreg.protocol_locks FOR UPDATE",
    "SELECT 1 FROM connreg.protocol_locks FOR KEY SHARE",
    "SELECT connreg.protocol_lock(1668182530, 'victim')",
];

/// Every breach of least privilege the data role of `fx` has, as one line
/// each: a privilege it holds, a function boundary it can step around, a
/// statement the database accepted from it, or a change of stored state the
/// statements made. Empty when the data role can call the protocol and
/// nothing else. `registry` must have been connected (grants applied).
async fn attack(fx: &PgFixture, registry: &PgRegistry) -> Vec<String> {
    let mut admin = fx.admin_conn().await;
    let data_role = fx.roles.data.as_str();
    let mut breaches = Vec::new();

    breaches.extend(relation_privileges(&mut admin, data_role).await);
    breaches.extend(function_boundary(&mut admin, data_role).await);
    breaches.extend(role_powers(&mut admin, data_role).await);

    // spec: AUTH-2, AUTH-6, AUTH-7 — the statements, on a plain connection
    // as the data role, each on its own; then stored state unchanged.
    let before = state_snapshot(&mut admin).await;
    let mut data = fx.data_conn().await;
    let exclusive_catalog_lock = "SELECT connreg.catalog_lock_exclusive(1)".to_string();
    let statements = AUTH2_FORBIDDEN
        .iter()
        .chain(FORBIDDEN)
        .copied()
        .chain([exclusive_catalog_lock.as_str()]);
    for statement in statements {
        let one_line = statement.split_whitespace().collect::<Vec<_>>().join(" ");
        match refusal(&mut data, statement).await {
            None => breaches.push(format!("accepted: {one_line}")),
            Some(code) if code == "42501" => {}
            Some(code) => eprintln!("refused with {code} (not 42501): {one_line}"),
        }
    }
    data.close().await.ok();
    let after = state_snapshot(&mut admin).await;
    breaches.extend(state_changes(&before, &after));

    // The registry's own data plane still does its work.
    if let Err(e) = registry.route_resolve(request("after-attack", "t0")).await {
        breaches.push(format!(
            "protocol: a resolve after the attack failed: {e:?}"
        ));
    }
    breaches
}

/// spec: AUTH-6 — privileges on every relation of the schema: none at all,
/// except SELECT on `schema_version` (the data plane's start check).
async fn relation_privileges(admin: &mut PgConnection, data_role: &str) -> Vec<String> {
    let mut breaches: Vec<String> = sqlx::query_scalar(
        "SELECT format('privilege: %s on table connreg.%I', p.privilege, c.relname)
           FROM pg_class c
           JOIN pg_namespace n ON n.oid = c.relnamespace
          CROSS JOIN unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE',
                                  'REFERENCES', 'TRIGGER']) AS p(privilege)
          WHERE n.nspname = 'connreg' AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
            AND has_table_privilege($1, c.oid, p.privilege)
            AND NOT (c.relname = 'schema_version' AND p.privilege = 'SELECT')
          ORDER BY 1",
    )
    .bind(data_role)
    .fetch_all(&mut *admin)
    .await
    .unwrap();
    // Column grants, where the table-level privilege is not held (already
    // reported above when it is).
    breaches.extend(
        sqlx::query_scalar::<_, String>(
            "SELECT format('privilege: %s on column connreg.%I.%I', p.privilege, c.relname,
                           a.attname)
               FROM pg_class c
               JOIN pg_namespace n ON n.oid = c.relnamespace
               JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
                                  AND NOT a.attisdropped
              CROSS JOIN unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'REFERENCES'])
                         AS p(privilege)
              WHERE n.nspname = 'connreg' AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
                AND has_column_privilege($1, c.oid, a.attnum, p.privilege)
                AND NOT has_table_privilege($1, c.oid, p.privilege)
              ORDER BY 1",
        )
        .bind(data_role)
        .fetch_all(&mut *admin)
        .await
        .unwrap(),
    );
    breaches.extend(
        sqlx::query_scalar::<_, String>(
            "SELECT format('privilege: %s on sequence connreg.%I', p.privilege, c.relname)
               FROM pg_class c
               JOIN pg_namespace n ON n.oid = c.relnamespace
              CROSS JOIN unnest(ARRAY['USAGE', 'SELECT', 'UPDATE']) AS p(privilege)
              WHERE n.nspname = 'connreg' AND c.relkind = 'S'
                AND has_sequence_privilege($1, c.oid, p.privilege)
              ORDER BY 1",
        )
        .bind(data_role)
        .fetch_all(&mut *admin)
        .await
        .unwrap(),
    );
    let create: bool = sqlx::query_scalar("SELECT has_schema_privilege($1, 'connreg', 'CREATE')")
        .bind(data_role)
        .fetch_one(&mut *admin)
        .await
        .unwrap();
    if create {
        breaches.push("privilege: CREATE on schema connreg".into());
    }
    breaches
}

/// spec: AUTH-6 — every function of the schema the data role may execute
/// is SECURITY DEFINER, owned by a role that cannot log in (and is no
/// superuser), with a fixed `search_path` that cannot be shadowed by the
/// caller's temporary schema; PUBLIC may execute none of them.
async fn function_boundary(admin: &mut PgConnection, data_role: &str) -> Vec<String> {
    #[derive(sqlx::FromRow)]
    struct Function {
        signature: String,
        definer: bool,
        owner: String,
        owner_logs_in: bool,
        owner_is_super: bool,
        search_path: Option<String>,
        data_executes: bool,
        public_executes: bool,
    }
    let functions: Vec<Function> = sqlx::query_as(
        "SELECT p.oid::regprocedure::text AS signature,
                p.prosecdef AS definer,
                o.rolname::text AS owner,
                o.rolcanlogin AS owner_logs_in,
                (o.rolsuper OR o.rolbypassrls) AS owner_is_super,
                (SELECT substr(c, length('search_path=') + 1) FROM unnest(p.proconfig) AS c
                  WHERE c LIKE 'search_path=%') AS search_path,
                has_function_privilege($1, p.oid, 'EXECUTE') AS data_executes,
                has_function_privilege('public', p.oid, 'EXECUTE') AS public_executes
           FROM pg_proc p
           JOIN pg_namespace n ON n.oid = p.pronamespace
           JOIN pg_roles o ON o.oid = p.proowner
          WHERE n.nspname = 'connreg'
          ORDER BY 1",
    )
    .bind(data_role)
    .fetch_all(&mut *admin)
    .await
    .unwrap();
    // A definer function whose search_path does not name pg_temp last is
    // searched in the caller's temporary schema first for relations, which
    // the data role can create unless TEMPORARY on the database is revoked.
    let temporary: bool =
        sqlx::query_scalar("SELECT has_database_privilege($1, current_database(), 'TEMPORARY')")
            .bind(data_role)
            .fetch_one(&mut *admin)
            .await
            .unwrap();
    let mut breaches = Vec::new();
    for f in functions {
        let name = &f.signature;
        if f.public_executes {
            breaches.push(format!("function: PUBLIC may execute {name}"));
        }
        if !f.data_executes {
            continue;
        }
        if !f.definer {
            breaches.push(format!(
                "function: the data role executes {name}, which is SECURITY INVOKER"
            ));
        }
        if f.owner_logs_in {
            breaches.push(format!(
                "function: the data role executes {name}, owned by {}, a role that can log in",
                f.owner
            ));
        }
        if f.owner_is_super {
            breaches.push(format!(
                "function: the data role executes {name}, owned by a superuser or BYPASSRLS role"
            ));
        }
        match &f.search_path {
            None => breaches.push(format!(
                "function: the data role executes {name}, which has no fixed search_path"
            )),
            Some(path) => {
                let last = path.rsplit(',').next().unwrap_or("").trim();
                if f.definer && temporary && last != "pg_temp" {
                    breaches.push(format!(
                        "function: {name} runs with search_path={path} (pg_temp not last) \
                         and the data role may create temporary tables"
                    ));
                }
            }
        }
    }
    breaches
}

/// spec: AUTH-6 — the data role has no role powers and inherits from no
/// other role (a membership would carry that role's privileges).
async fn role_powers(admin: &mut PgConnection, data_role: &str) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT 'role: ' || x FROM (
             SELECT 'the data role is a superuser' AS x FROM pg_roles
              WHERE rolname = $1 AND rolsuper
             UNION ALL SELECT 'the data role may create roles' FROM pg_roles
              WHERE rolname = $1 AND rolcreaterole
             UNION ALL SELECT 'the data role may create databases' FROM pg_roles
              WHERE rolname = $1 AND rolcreatedb
             UNION ALL SELECT 'the data role bypasses row level security' FROM pg_roles
              WHERE rolname = $1 AND rolbypassrls
             UNION ALL SELECT 'the data role is a member of ' || g.rolname
               FROM pg_auth_members m
               JOIN pg_roles g ON g.oid = m.roleid
               JOIN pg_roles r ON r.oid = m.member
              WHERE r.rolname = $1) AS breaches
          ORDER BY 1",
    )
    .bind(data_role)
    .fetch_all(admin)
    .await
    .unwrap()
}

/// Per relation of the schema (tables and sequences), its row count and a
/// digest of its rows, read as the admin.
async fn state_snapshot(admin: &mut PgConnection) -> BTreeMap<String, String> {
    let relations: Vec<(String, String)> = sqlx::query_as(
        "SELECT c.relname::text, c.relkind::text
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = 'connreg' AND c.relkind IN ('r', 'p', 'S')
          ORDER BY 1",
    )
    .fetch_all(&mut *admin)
    .await
    .unwrap();
    let mut snapshot = BTreeMap::new();
    for (name, kind) in relations {
        let quoted = format!("connreg.\"{}\"", name.replace('"', "\"\""));
        let query = if kind == "S" {
            format!(
                "SELECT format('last_value %s, is_called %s', last_value, is_called) FROM {quoted}"
            )
        } else {
            format!(
                "SELECT format('%s rows, md5 %s', count(*),
                               md5(COALESCE(string_agg(t::text, E'\\n' ORDER BY t::text), '')))
                   FROM {quoted} AS t"
            )
        };
        let digest: String = sqlx::query_scalar(&query)
            .fetch_one(&mut *admin)
            .await
            .unwrap_or_else(|e| panic!("{query}: {e}"));
        snapshot.insert(name, digest);
    }
    snapshot
}

fn state_changes(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut names: Vec<&String> = before.keys().chain(after.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|n| before.get(*n) != after.get(*n))
        .map(|n| {
            format!(
                "state: connreg.{n} changed: {} -> {}",
                before.get(n).map_or("(absent)", String::as_str),
                after.get(n).map_or("(absent)", String::as_str)
            )
        })
        .collect()
}

/// Two tenants with a scope each, replicas, one route each, an open circuit
/// and an audit entry: something for every attack to change.
async fn hostile_fleet() -> (PgFixture, PgRegistry, ManualClock) {
    let fx = PgFixture::new().await;
    let (registry, clock) = fx.registry_at_zero().await;
    publish_fleet(
        &registry,
        &FleetOptions {
            tenants: 2,
            tenant_scope_limit: Some(5),
            ..FleetOptions::default()
        },
    )
    .await;
    let mut admin = fx.admin_conn().await;
    bulk_replicas(&mut admin, "t0-i0", 3, 4, 600_000).await;
    bulk_replicas(&mut admin, "t1-i0", 3, 4, 600_000).await;
    registry
        .route_resolve(request("t0-route", "t0"))
        .await
        .unwrap();
    registry
        .route_resolve(request("t1-route", "t1"))
        .await
        .unwrap();
    admin_exec(
        &mut admin,
        "UPDATE connreg.replicas SET circuit_open = true, consecutive_unknown = 3
          WHERE replica_id = 't1-i0-r2'",
    )
    .await;
    // The audit table may gain columns; an entry is only there to be
    // deleted, so a failure here is reported and the test goes on.
    if let Err(e) = sqlx::raw_sql(
        "INSERT INTO connreg.operator_audit (at_ms, operator, action, replica_id, reason)
         VALUES (1, 'oncall', 'circuit_close', 't1-i0-r1', 'test entry')",
    )
    .execute(&mut admin)
    .await
    {
        eprintln!("hostile fleet: no audit entry written ({e})");
    }
    (fx, registry, clock)
}

/// Every protocol call of the data plane once, through a data-plane-only
/// handle; each failure as one line.
async fn protocol_round(plane: &PgDataPlane) -> Vec<String> {
    let mut failures = Vec::new();
    let mut fail = |what: &str, detail: String| failures.push(format!("{what}: {detail}"));

    match plane.catalog_revision().await {
        Ok(r) if r.0 >= 1 => {}
        other => fail("catalog_revision", format!("{other:?}")),
    }
    match plane
        .catalog_page(CatalogQuery::first_page(Reader::Tenant(
            "t0".try_into().unwrap(),
        )))
        .await
    {
        Ok(page) if !page.entries.is_empty() => {}
        other => fail("catalog_page", format!("{other:?}")),
    }
    let replica = "t0-i0-p9";
    if let Err(e) = plane
        .replica_register(register_params(replica, "t0-i0", 4, 1, 600_000))
        .await
    {
        fail("replica_register", e.to_string());
    }
    match plane
        .replica_heartbeat(HeartbeatParams {
            replica: replica.try_into().unwrap(),
            health_seq: 2,
            lease_ttl_ms: 600_000,
        })
        .await
    {
        Ok(HeartbeatOutcome::Applied) => {}
        other => fail("replica_heartbeat", format!("{other:?}")),
    }
    match plane.route_resolve(request("protocol-1", "t0")).await {
        Ok(resolved) => {
            match plane
                .route_get("t0".try_into().unwrap(), "protocol-1".try_into().unwrap())
                .await
            {
                Ok(Some(record)) if record.assignment == resolved.assignment => {}
                other => fail("route_get", format!("{other:?}")),
            }
            match plane
                .route_settle(SettleParams {
                    assignment: resolved.assignment,
                    outcome: Outcome::Completed,
                })
                .await
            {
                Ok(settled) if settled.released => {}
                other => fail("route_settle", format!("{other:?}")),
            }
        }
        Err(e) => fail("route_resolve", e.to_string()),
    }
    if let Err(e) = plane.replica_drain(replica.try_into().unwrap()).await {
        fail("replica_drain", e.to_string());
    }
    match plane.replica_get(replica.try_into().unwrap()).await {
        Ok(Some(_)) => {}
        other => fail("replica_get", format!("{other:?}")),
    }
    if let Err(e) = plane.lease_maintain(MaintainParams { max: 10 }).await {
        fail("lease_maintain", e.to_string());
    }
    if let Err(e) = plane.status().await {
        fail("status", e.to_string());
    }
    failures
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_role_breaches_nothing_and_still_serves_the_protocol() {
    // spec: AUTH-2
    // spec: AUTH-6
    // spec: AUTH-7
    let (fx, registry, clock) = hostile_fleet().await;
    let breaches = attack(&fx, &registry).await;

    let plane = PgDataPlane::connect(fx.options().data, clock, RegistryConfig::default())
        .await
        .expect("the data plane starts");
    let failures = protocol_round(&plane).await;
    plane.close().await;

    assert!(
        breaches.is_empty() && failures.is_empty(),
        "{} breaches by the data role:\n  {}\n{} protocol calls failed:\n  {}",
        breaches.len(),
        breaches.join("\n  "),
        failures.len(),
        failures.join("\n  ")
    );
}

/// A publication of one more capability definition (a new revision).
fn one_more_definition(id: &str) -> Publication {
    Publication {
        changes: vec![Change::UpsertDefinition(CapabilityDefinition {
            id: id.try_into().unwrap(),
            summary: "Another capability".into(),
            schema: "{}".into(),
            active: true,
        })],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_session_holding_every_lock_it_can_stalls_neither_publication_nor_resolve() {
    // spec: AUTH-6
    // spec: AUTH-8
    let (fx, registry, _clock) = hostile_fleet().await;
    let mut admin = fx.admin_conn().await;
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = 'connreg' AND c.relkind IN ('r', 'p') ORDER BY 1",
    )
    .fetch_all(&mut admin)
    .await
    .unwrap();

    // The attacker: the catalog's advisory lock, held for the session, then
    // every table lock and row lock the database grants it, in one open
    // transaction.
    let mut hostile = fx.data_conn().await;
    let mut held = Vec::new();
    admin_exec(&mut hostile, "BEGIN").await;
    let modes = [
        "ACCESS SHARE",
        "ROW EXCLUSIVE",
        "EXCLUSIVE",
        "ACCESS EXCLUSIVE",
    ];
    // The advisory lock functions are PUBLIC's in pg_catalog, beyond what
    // a migration can revoke: the old catalog lock may well be granted, and
    // must no longer matter.
    let catalog_hold = format!("SELECT pg_advisory_lock({LOCK_CLASS_CATALOG}, {CATALOG_KEY})");
    admin_exec(&mut hostile, "SAVEPOINT attempt").await;
    match refusal(&mut hostile, &catalog_hold).await {
        None => eprintln!("the data role holds the old catalog advisory lock"),
        Some(code) => {
            admin_exec(&mut hostile, "ROLLBACK TO SAVEPOINT attempt").await;
            eprintln!("the old catalog advisory lock was refused with {code}");
        }
    }
    let mut attempts: Vec<(String, String)> = Vec::new();
    for table in &tables {
        attempts.extend(modes.iter().map(|mode| {
            (
                format!("LOCK TABLE connreg.\"{table}\" IN {mode} MODE NOWAIT"),
                format!("{mode} on {table}"),
            )
        }));
        attempts.push((
            format!("SELECT 1 FROM connreg.\"{table}\" FOR UPDATE NOWAIT"),
            format!("row locks FOR UPDATE on {table}"),
        ));
    }
    // Each attempt in a savepoint, so a refusal leaves the transaction and
    // what it holds in place.
    for (statement, what) in attempts {
        admin_exec(&mut hostile, "SAVEPOINT attempt").await;
        match refusal(&mut hostile, &statement).await {
            None => {
                admin_exec(&mut hostile, "RELEASE SAVEPOINT attempt").await;
                // Reading the start check's table is the data role's
                // right; its ACCESS SHARE lock blocks only DDL.
                if what != "ACCESS SHARE on schema_version" {
                    held.push(what);
                }
            }
            Some(code) => {
                admin_exec(&mut hostile, "ROLLBACK TO SAVEPOINT attempt").await;
                if code != "42501" {
                    eprintln!("refused with {code} (not 42501): {statement}");
                }
            }
        }
    }

    // While it holds all that: a publication through the control plane and
    // a resolve through the data plane both complete.
    let (published, resolved) = tokio::join!(
        tokio::time::timeout(
            HANG_GUARD,
            registry.catalog_publish(one_more_definition("crm.contact.update"))
        ),
        tokio::time::timeout(HANG_GUARD, registry.route_resolve(request("held-1", "t0"))),
    );
    admin_exec(&mut hostile, "ROLLBACK").await;
    admin_exec(&mut hostile, "SELECT pg_advisory_unlock_all()").await;
    hostile.close().await.ok();

    let mut breaches: Vec<String> = held.into_iter().map(|h| format!("held: {h}")).collect();
    match published {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => breaches.push(format!("publication under the hold failed: {e:?}")),
        Err(_) => breaches.push(format!(
            "publication under the hold hung past {HANG_GUARD:?}"
        )),
    }
    match resolved {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => breaches.push(format!("resolve under the hold failed: {e:?}")),
        Err(_) => breaches.push(format!("resolve under the hold hung past {HANG_GUARD:?}")),
    }
    assert!(
        breaches.is_empty(),
        "{} breaches:\n  {}",
        breaches.len(),
        breaches.join("\n  ")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_hold_of_one_actions_lock_delays_only_that_action() {
    // spec: AUTH-8
    let (fx, registry, _clock) = hostile_fleet().await;
    let mut hostile = fx.data_conn().await;
    let hold = format!(
        "SELECT pg_advisory_lock({LOCK_CLASS_ACTION}, {})",
        lock_key("victim")
    );
    let taken = refusal(&mut hostile, &hold).await;
    eprintln!("the data role's session hold of the action lock: {taken:?} (None: granted)");

    let victim = {
        let registry = registry.clone();
        tokio::spawn(async move {
            tokio::time::timeout(HANG_GUARD, registry.route_resolve(request("victim", "t0"))).await
        })
    };
    // Meanwhile, another action resolves.
    let bystander = tokio::time::timeout(
        HANG_GUARD,
        registry.route_resolve(request("bystander", "t0")),
    )
    .await;
    let victim = victim.await.unwrap();
    hostile.close().await.ok();

    assert!(
        matches!(bystander, Ok(Ok(_))),
        "another action resolves while one action's lock is held: {bystander:?}"
    );
    // spec: AUTH-6, LOCK-6
    // The protocol's lock for an action is a row only its owner can lock
    // (migration 0013): an advisory hold of the old key delays nothing.
    assert!(
        matches!(victim, Ok(Ok(_))),
        "the action whose old advisory key is held resolves: {victim:?}"
    );
}

/// The role's own defaults for `setting`, in any database or this one.
async fn role_defaults(admin: &mut PgConnection, role: &str) -> BTreeMap<String, String> {
    let settings: Vec<String> = sqlx::query_scalar(
        "SELECT c FROM pg_db_role_setting s
           JOIN pg_roles r ON r.oid = s.setrole
          CROSS JOIN unnest(s.setconfig) AS c
          WHERE r.rolname = $1
            AND s.setdatabase IN (0, (SELECT oid FROM pg_database
                                       WHERE datname = current_database()))
          ORDER BY s.setdatabase",
    )
    .bind(role)
    .fetch_all(admin)
    .await
    .unwrap();
    // Ordered by database: a database-specific value (read last) wins, as
    // it does in the server.
    settings
        .into_iter()
        .filter_map(|c| c.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
        .collect()
}

const BOUNDS: [&str; 3] = [
    "statement_timeout",
    "lock_timeout",
    "idle_in_transaction_session_timeout",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_roles_carry_session_bounds_as_role_defaults() {
    // spec: AUTH-8
    let fx = PgFixture::new().await;
    let (_registry, _clock) = fx.registry_at_zero().await;
    let mut admin = fx.admin_conn().await;
    let mut missing = Vec::new();
    for role in [&fx.roles.data, &fx.roles.control] {
        let defaults = role_defaults(&mut admin, role).await;
        for bound in BOUNDS {
            match defaults.get(bound).map(String::as_str) {
                Some(v) if !is_zero(v) => {}
                other => missing.push(format!("role {role}: {bound} default {other:?}")),
            }
        }
    }
    // A plain session, no options of the registry's: the server's bounds.
    let control_connect = fx.options().control.connect;
    let mut data = fx.data_conn().await;
    let mut control = PgConnection::connect_with(&control_connect).await.unwrap();
    for (who, conn) in [("data", &mut data), ("control", &mut control)] {
        for bound in BOUNDS {
            let shown: String = sqlx::query_scalar(&format!("SHOW {bound}"))
                .fetch_one(&mut *conn)
                .await
                .unwrap();
            if is_zero(&shown) {
                missing.push(format!("a plain {who} session shows {bound} = {shown}"));
            }
        }
    }
    assert!(missing.is_empty(), "unbounded:\n  {}", missing.join("\n  "));
}

fn is_zero(setting: &str) -> bool {
    setting
        .trim()
        .trim_end_matches(|c: char| c.is_ascii_alphabetic())
        .parse::<f64>()
        .is_ok_and(|v| v == 0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_data_transaction_is_ended_by_the_server_and_its_locks_released() {
    // spec: AUTH-8
    let (fx, registry, _clock) = hostile_fleet().await;
    let mut admin = fx.admin_conn().await;
    // Short for the test (a database-specific value wins over any role-wide
    // one the migration set).
    let shorten: String = sqlx::query_scalar(
        "SELECT format('ALTER ROLE %I IN DATABASE %I SET idle_in_transaction_session_timeout = %L',
                       $1::text, current_database(), '1s')",
    )
    .bind(&fx.roles.data)
    .fetch_one(&mut admin)
    .await
    .unwrap();
    admin_exec(&mut admin, &shorten).await;

    // The hostile session: a resolve inside a transaction left open, so
    // it holds what a protocol call takes (the action's lock, the catalog
    // lock in its shared form, the replica and counter rows it reserved),
    // then idle.
    let mut hostile = fx.data_conn().await;
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut hostile)
        .await
        .unwrap();
    admin_exec(&mut hostile, "BEGIN").await;
    admin_exec(
        &mut hostile,
        "SELECT outcome FROM connreg.data_route_resolve('idle-1', 't0', 'crm.contact.create',
             1, 'standard', false, NULL, NULL, false)",
    )
    .await;
    let held: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_locks WHERE pid = $1 AND locktype <> 'virtualxid'",
    )
    .bind(pid)
    .fetch_one(&mut admin)
    .await
    .unwrap();
    assert!(held >= 1, "the hostile transaction holds locks");

    // The server ends the session; bounded wait.
    let mut gone = false;
    for _ in 0..300 {
        let alive: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)")
                .bind(pid)
                .fetch_one(&mut admin)
                .await
                .unwrap();
        if !alive {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gone, "the idle data transaction's session was not ended");
    let held: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_locks WHERE pid = $1")
        .bind(pid)
        .fetch_one(&mut admin)
        .await
        .unwrap();
    assert_eq!(held, 0, "the ended session's locks are released");
    assert!(
        sqlx::raw_sql("SELECT 1")
            .execute(&mut hostile)
            .await
            .is_err(),
        "the ended session answers no more"
    );

    let published = tokio::time::timeout(
        HANG_GUARD,
        registry.catalog_publish(one_more_definition("crm.contact.update")),
    )
    .await;
    assert!(matches!(published, Ok(Ok(_))), "{published:?}");
    let resolved = tokio::time::timeout(
        HANG_GUARD,
        registry.route_resolve(request("after-idle", "t0")),
    )
    .await;
    assert!(matches!(resolved, Ok(Ok(_))), "{resolved:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_too_wide_is_caught_by_the_attack_suite() {
    // spec: AUTH-6
    // The planted bug gives the data role UPDATE on connreg.replicas: the
    // suite must report it (and the circuit reopened by SQL).
    let (fx, registry, _clock) = hostile_fleet().await;
    let registry = registry
        .with_plant(PgPlant::GrantTooWide)
        .await
        .expect("the plant installs");
    let breaches = attack(&fx, &registry).await;
    assert!(
        breaches.iter().any(|b| b.contains("replicas")),
        "the too-wide grant went unnoticed: {breaches:?}"
    );
}
