//! Roles, schema installation and the schema version check (AUTH-1..AUTH-3).
//!
//! The setup a deployment (and every PostgreSQL test) runs once per
//! database:
//!
//! 1. [`create_roles`], as a role allowed to create roles (a superuser or a
//!    `CREATEROLE` database owner): creates the control and data login roles
//!    if they do not exist, and the `connreg` schema owned by the control
//!    role. Neither role gets any other server-wide power.
//! 2. [`PgRegistry::connect`](super::PgRegistry::connect), as the control
//!    role: applies the migrations in `migrations/` with sqlx's migrator,
//!    then grants the data role exactly its privileges
//!    (`connreg.grant_data_role`, migrations 0003 and 0004).
//!
//! A data-plane process then starts with
//! [`PgDataPlane::connect`](super::PgDataPlane::connect), which only checks
//! [`SCHEMA_VERSION`] through the data role.

use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection, PgPool};

use super::error::StartError;

/// The schema every object lives in.
pub const SCHEMA: &str = "connreg";

/// The schema version this build serves: the number of the last migration,
/// which records it in `connreg.schema_version`.
pub const SCHEMA_VERSION: i32 = 21;

/// `statement_timeout` set on the data role (AUTH-8): what a session of
/// that role gets when it sets none itself. The registry's data pool sets
/// its own ([`PoolOptions::statement_timeout_ms`](super::PoolOptions)).
pub const DATA_ROLE_STATEMENT_TIMEOUT_MS: u32 = 5_000;
/// `lock_timeout` set on the data role (AUTH-8): bounds the data-plane
/// functions' waits for the action and catalog locks.
pub const DATA_ROLE_LOCK_TIMEOUT_MS: u32 = 5_000;
/// `idle_in_transaction_session_timeout` set on the data role (AUTH-8): a
/// session idle inside a transaction, holding the locks of the calls it
/// made, is ended by the server after this long.
pub const DATA_ROLE_IDLE_IN_TRANSACTION_MS: u32 = 5_000;
/// `statement_timeout` set on the control role (AUTH-8).
pub const CONTROL_ROLE_STATEMENT_TIMEOUT_MS: u32 = 60_000;
/// `lock_timeout` set on the control role (AUTH-8).
pub const CONTROL_ROLE_LOCK_TIMEOUT_MS: u32 = 60_000;
/// `idle_in_transaction_session_timeout` set on the control role (AUTH-8).
pub const CONTROL_ROLE_IDLE_IN_TRANSACTION_MS: u32 = 60_000;

/// What [`Roles::protocol_owner`] appends to the control role's name.
const PROTOCOL_OWNER_SUFFIX: &str = "_protocol";

/// The migrations, embedded at build time.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

/// Longest role name PostgreSQL keeps, in bytes.
const ROLE_NAME_BYTES_MAX: usize = 63;

/// The two login roles of one registry database. Its `Debug` form leaves
/// the passwords out.
#[derive(Clone, PartialEq, Eq)]
pub struct Roles {
    /// Owns the schema; installs it and publishes the catalog.
    pub control: String,
    /// Reads the catalog, routes, reserves, runs replica lifecycle.
    pub data: String,
    /// The control role's password, when the server authenticates by one.
    pub control_password: Option<String>,
    /// The data role's password, when the server authenticates by one.
    pub data_password: Option<String>,
}

impl std::fmt::Debug for Roles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Roles")
            .field("control", &self.control)
            .field("data", &self.data)
            .finish_non_exhaustive()
    }
}

impl Roles {
    /// The role that owns the data-plane functions (AUTH-6): cannot log in,
    /// holds only the table privileges those functions need; the control
    /// role is a member, so it can hand them over.
    pub fn protocol_owner(&self) -> String {
        protocol_owner(&self.control)
    }

    fn validate(&self) -> Result<(), StartError> {
        for name in [&self.control, &self.data] {
            if name.is_empty() || name.len() > ROLE_NAME_BYTES_MAX {
                return Err(StartError::Options {
                    reason: format!("role names must be 1 to {ROLE_NAME_BYTES_MAX} bytes"),
                });
            }
        }
        if self.control.len() + PROTOCOL_OWNER_SUFFIX.len() > ROLE_NAME_BYTES_MAX {
            return Err(StartError::Options {
                reason: format!(
                    "the control role's name must be at most {} bytes (its protocol owner \
                     role appends {PROTOCOL_OWNER_SUFFIX:?})",
                    ROLE_NAME_BYTES_MAX - PROTOCOL_OWNER_SUFFIX.len()
                ),
            });
        }
        if self.control == self.data {
            return Err(StartError::Options {
                reason: "the control and data roles must differ".into(),
            });
        }
        Ok(())
    }
}

/// The protocol owner role of `control` ([`Roles::protocol_owner`]).
pub(crate) fn protocol_owner(control: &str) -> String {
    format!("{control}{PROTOCOL_OWNER_SUFFIX}")
}

/// Creates the control and data roles (if missing), the protocol owner
/// role ([`Roles::protocol_owner`], `NOLOGIN`, granted to the control
/// role), and the `connreg` schema owned by the control role, in the
/// database `admin` names; sets both login roles' session defaults
/// (AUTH-8: [`DATA_ROLE_STATEMENT_TIMEOUT_MS`] and the others). Idempotent:
/// run it again before upgrading a database created before the owner role
/// existed.
///
/// `admin` must be allowed to create roles and schemas in that database.
/// Passwords, when given, are set (again) on every call. Role names and
/// passwords reach the server as bound parameters and are quoted there.
///
/// The same, as statements an operator runs (names as deployed):
///
/// ```sql
/// CREATE ROLE connreg_control LOGIN PASSWORD '…';
/// CREATE ROLE connreg_data LOGIN PASSWORD '…';
/// CREATE ROLE connreg_control_protocol NOLOGIN NOINHERIT;
/// GRANT connreg_control_protocol TO connreg_control;
/// GRANT CONNECT ON DATABASE registry TO connreg_control, connreg_data;
/// CREATE SCHEMA connreg AUTHORIZATION connreg_control;
/// ALTER ROLE connreg_data SET statement_timeout = '5000ms';
/// ALTER ROLE connreg_data SET lock_timeout = '5000ms';
/// ALTER ROLE connreg_data SET idle_in_transaction_session_timeout = '5000ms';
/// ALTER ROLE connreg_control SET statement_timeout = '60000ms';
/// ALTER ROLE connreg_control SET lock_timeout = '60000ms';
/// ALTER ROLE connreg_control SET idle_in_transaction_session_timeout = '60000ms';
/// ```
pub async fn create_roles(admin: &PgConnectOptions, roles: &Roles) -> Result<(), StartError> {
    roles.validate()?;
    let step = |what: &'static str| {
        move |e: sqlx::Error| StartError::Setup {
            reason: format!("{what}: {}", super::error::db(e)),
        }
    };
    let mut conn = PgConnection::connect_with(admin)
        .await
        .map_err(step("connect as the admin role"))?;
    for (role, password) in [
        (&roles.control, &roles.control_password),
        (&roles.data, &roles.data_password),
    ] {
        let exists: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)")
                .bind(role)
                .fetch_one(&mut conn)
                .await
                .map_err(step("look up a role"))?;
        if !exists {
            execute_formatted(
                &mut conn,
                "SELECT format('CREATE ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE', $1::text)",
                role,
                None,
            )
            .await
            .or_else(|e| match &e {
                // Another process created it meanwhile.
                sqlx::Error::Database(d) if d.code().as_deref() == Some("42710") => Ok(()),
                _ => Err(e),
            })
            .map_err(step("create a role"))?;
        }
        if let Some(password) = password {
            execute_formatted(
                &mut conn,
                "SELECT format('ALTER ROLE %I PASSWORD %L', $1::text, $2::text)",
                role,
                Some(password),
            )
            .await
            .map_err(step("set a role password"))?;
        }
        execute_formatted(
            &mut conn,
            "SELECT format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), $1::text)",
            role,
            None,
        )
        .await
        .map_err(step("grant connect"))?;
    }
    let owner = roles.protocol_owner();
    let owner_exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)")
            .bind(&owner)
            .fetch_one(&mut conn)
            .await
            .map_err(step("look up the protocol owner role"))?;
    if !owner_exists {
        execute_formatted(
            &mut conn,
            "SELECT format('CREATE ROLE %I NOLOGIN NOINHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE', \
             $1::text)",
            &owner,
            None,
        )
        .await
        .or_else(|e| match &e {
            sqlx::Error::Database(d) if d.code().as_deref() == Some("42710") => Ok(()),
            _ => Err(e),
        })
        .map_err(step("create the protocol owner role"))?;
    }
    execute_formatted(
        &mut conn,
        "SELECT format('GRANT %I TO %I', $1::text, $2::text)",
        &owner,
        Some(&roles.control),
    )
    .await
    .map_err(step("grant the protocol owner role to the control role"))?;
    for (role, settings) in [
        (
            &roles.data,
            [
                ("statement_timeout", DATA_ROLE_STATEMENT_TIMEOUT_MS),
                ("lock_timeout", DATA_ROLE_LOCK_TIMEOUT_MS),
                (
                    "idle_in_transaction_session_timeout",
                    DATA_ROLE_IDLE_IN_TRANSACTION_MS,
                ),
            ],
        ),
        (
            &roles.control,
            [
                ("statement_timeout", CONTROL_ROLE_STATEMENT_TIMEOUT_MS),
                ("lock_timeout", CONTROL_ROLE_LOCK_TIMEOUT_MS),
                (
                    "idle_in_transaction_session_timeout",
                    CONTROL_ROLE_IDLE_IN_TRANSACTION_MS,
                ),
            ],
        ),
    ] {
        for (setting, ms) in settings {
            // The setting's name is one of the fixed names above.
            execute_formatted(
                &mut conn,
                &format!("SELECT format('ALTER ROLE %I SET {setting} = %L', $1::text, $2::text)"),
                role,
                Some(&format!("{ms}ms")),
            )
            .await
            .map_err(step("set a role's session defaults"))?;
        }
    }
    let schema_exists: bool = sqlx::query_scalar("SELECT to_regnamespace($1) IS NOT NULL")
        .bind(SCHEMA)
        .fetch_one(&mut conn)
        .await
        .map_err(step("look up the schema"))?;
    if !schema_exists {
        // The admin role must be able to act as the owner it names.
        execute_formatted(
            &mut conn,
            "SELECT format('CREATE SCHEMA IF NOT EXISTS connreg AUTHORIZATION %I', $1::text)",
            &roles.control,
            None,
        )
        .await
        .map_err(step("create the schema"))?;
    }
    conn.close().await.map_err(step("disconnect"))?;
    Ok(())
}

/// Runs a utility statement built by the server's `format()` from bound
/// parameters (utility statements cannot take parameters themselves).
async fn execute_formatted(
    conn: &mut PgConnection,
    format_query: &str,
    first: &str,
    second: Option<&str>,
) -> Result<(), sqlx::Error> {
    let mut query = sqlx::query_scalar::<_, String>(format_query).bind(first);
    if let Some(second) = second {
        query = query.bind(second);
    }
    let statement = query.fetch_one(&mut *conn).await?;
    sqlx::query(&statement)
        .persistent(false)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Applies the migrations through the control pool, then (unless one role
/// serves both pools, the single-role development mode) hands the
/// data-plane functions to the protocol owner and grants the data role
/// exactly EXECUTE on them (AUTH-2, AUTH-6).
pub(crate) async fn install(
    control: &PgPool,
    control_role: &str,
    data_role: &str,
) -> Result<(), StartError> {
    let schema_exists: bool = sqlx::query_scalar("SELECT to_regnamespace($1) IS NOT NULL")
        .bind(SCHEMA)
        .fetch_one(control)
        .await?;
    if !schema_exists {
        sqlx::query("CREATE SCHEMA IF NOT EXISTS connreg")
            .execute(control)
            .await
            .map_err(|e| StartError::Setup {
                reason: format!(
                    "the connreg schema is missing and the control role cannot create it ({}); \
                     run postgres::create_roles first",
                    super::error::db(e)
                ),
            })?;
    }
    // Functions the control role creates from now on (later migrations
    // included) are nobody's to run until a grant says so (AUTH-6).
    // Under the setup lock: two control planes starting at once would
    // otherwise race on the same catalog row ("tuple concurrently updated").
    let defaults = async {
        let mut tx = control.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1, 0)")
            .bind(super::locks::LOCK_CLASS_SETUP)
            .execute(&mut *tx)
            .await?;
        sqlx::query("ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC")
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    };
    defaults.await.map_err(|e| StartError::Setup {
        reason: format!("revoke PUBLIC's default EXECUTE: {}", super::error::db(e)),
    })?;
    MIGRATOR
        .run(control)
        .await
        .map_err(|e| StartError::Migration {
            reason: e.to_string(),
        })?;
    if data_role != control_role {
        let grant = async {
            let mut tx = control.begin().await?;
            // Two control planes starting at once would otherwise race on
            // the same privilege rows ("tuple concurrently updated").
            sqlx::query("SELECT pg_advisory_xact_lock($1, 0)")
                .bind(super::locks::LOCK_CLASS_SETUP)
                .execute(&mut *tx)
                .await?;
            sqlx::query("SELECT connreg.install_protocol_owner($1)")
                .bind(protocol_owner(control_role))
                .execute(&mut *tx)
                .await?;
            sqlx::query("SELECT connreg.grant_data_role($1)")
                .bind(data_role)
                .execute(&mut *tx)
                .await?;
            tx.commit().await
        };
        grant.await.map_err(|e| StartError::Setup {
            reason: format!(
                "hand the data-plane functions to {} and grant the data role: {} \
                 (run postgres::create_roles, which creates that role, first)",
                protocol_owner(control_role),
                super::error::db(e)
            ),
        })?;
    }
    Ok(())
}

/// Checks the installed schema version through `pool` (AUTH-3).
pub(crate) async fn verify(pool: &PgPool) -> Result<(), StartError> {
    let found = sqlx::query_scalar::<_, i32>("SELECT version FROM connreg.schema_version")
        .fetch_optional(pool)
        .await;
    let found = match found {
        Ok(v) => v,
        // No schema (42P01 undefined table, 3F000 undefined schema) or no
        // right to read it (42501): no usable schema.
        Err(sqlx::Error::Database(d))
            if matches!(d.code().as_deref(), Some("42P01" | "3F000" | "42501")) =>
        {
            None
        }
        Err(e) => return Err(e.into()),
    };
    if found != Some(SCHEMA_VERSION) {
        return Err(StartError::SchemaMismatch {
            expected: SCHEMA_VERSION,
            found,
        });
    }
    verify_limits(pool).await
}

/// The constants the data-plane functions fix (migration 0008) are this
/// build's: lock classes and the resolve's bounds.
async fn verify_limits(pool: &PgPool) -> Result<(), StartError> {
    use crate::limits::{
        ID_BYTES_MAX, INSTANCE_REPLICAS_MAX, LEASE_MAINTENANCE_BATCH_MAX,
        LEASE_MAINTENANCE_RESERVATIONS_MAX, ROUTE_LOCK_ATTEMPTS_MAX,
        TENANT_CAPABILITY_BINDINGS_MAX, TEXT_BYTES_MAX,
    };
    let row: Vec<i32> = sqlx::query_scalar(
        "SELECT ARRAY[action_lock_class, instance_lock_class, route_lock_wait_ms,
                      route_lock_attempts_max, route_lock_backoff_ms_per_attempt,
                      tenant_capability_bindings_max, instance_replicas_max,
                      lease_maintenance_batch_max, id_bytes_max, text_bytes_max,
                      lease_maintenance_reservations_max, route_decision_ms_max,
                      protocol_lock_wait_ms]
           FROM connreg.data_protocol_limits()",
    )
    .fetch_one(pool)
    .await?;
    let expected = vec![
        super::locks::LOCK_CLASS_ACTION,
        super::locks::LOCK_CLASS_INSTANCE,
        super::routing::ROUTE_LOCK_WAIT_MS as i32,
        ROUTE_LOCK_ATTEMPTS_MAX as i32,
        super::routing::ROUTE_LOCK_BACKOFF_MS_PER_ATTEMPT as i32,
        TENANT_CAPABILITY_BINDINGS_MAX as i32,
        INSTANCE_REPLICAS_MAX as i32,
        LEASE_MAINTENANCE_BATCH_MAX as i32,
        ID_BYTES_MAX as i32,
        TEXT_BYTES_MAX as i32,
        LEASE_MAINTENANCE_RESERVATIONS_MAX as i32,
        super::routing::ROUTE_DECISION_MS_MAX as i32,
        super::locks::PROTOCOL_LOCK_WAIT_MS as i32,
    ];
    if row != expected {
        return Err(StartError::Setup {
            reason: format!(
                "the installed data-plane functions fix other limits than this build \
                 ({row:?}, expected {expected:?})"
            ),
        });
    }
    // The round's row wait, the `lock_timeout` it counts under (0018).
    let source: String = sqlx::query_scalar(
        "SELECT prosrc FROM pg_catalog.pg_proc
          WHERE oid = 'connreg.route_decide_round(text, text, text, bigint, text, boolean, \
                       text, text, integer, integer, integer, boolean)'::regprocedure",
    )
    .fetch_one(pool)
    .await?;
    let wait = format!(
        "set_config('lock_timeout', '{}', true)",
        super::routing::ROUTE_ROW_WAIT_MS
    );
    if !source.contains(&wait) {
        return Err(StartError::Setup {
            reason: format!("the installed decision round does not run with {wait}"),
        });
    }
    Ok(())
}

/// Installs the database side of a planted bug (feature `plant`), as the
/// control role.
#[cfg(feature = "plant")]
pub(crate) async fn install_plant(
    control: &PgPool,
    plant: crate::plant::PgPlant,
    data_role: &str,
) -> Result<(), StartError> {
    use crate::plant::PgPlant;
    let statements: Vec<String> = match plant {
        // Counters first, then the real settlement (replica row, counters
        // again, route): against LOCK-1.
        PgPlant::SettleLocksCountersFirst => vec![
            "CREATE OR REPLACE FUNCTION connreg.planted_route_settle(
                p_given jsonb, p_outcome text, p_circuit_enabled boolean,
                p_circuit_threshold bigint) RETURNS text
             LANGUAGE plpgsql SECURITY DEFINER
             SET search_path = pg_catalog, connreg, pg_temp
             AS $$
             BEGIN
                 PERFORM 1 FROM connreg.admission_counters c
                   WHERE c.scope_id IN (SELECT jsonb_array_elements_text(p_given->'scopes'))
                   ORDER BY c.scope_id FOR UPDATE;
                 RETURN connreg.data_route_settle(p_given, p_outcome, p_circuit_enabled,
                     p_circuit_threshold);
             END
             $$"
            .into(),
            "REVOKE ALL ON FUNCTION connreg.planted_route_settle(jsonb, text, boolean, bigint) \
             FROM PUBLIC"
                .into(),
            format!(
                "GRANT EXECUTE ON FUNCTION connreg.planted_route_settle(jsonb, text, boolean, \
                 bigint) TO \"{}\"",
                data_role.replace('"', "\"\"")
            ),
        ],
        PgPlant::GrantTooWide => vec![format!(
            "GRANT UPDATE ON connreg.replicas TO \"{}\"",
            data_role.replace('"', "\"\"")
        )],
    };
    for statement in statements {
        sqlx::raw_sql(&statement)
            .execute(control)
            .await
            .map_err(|e| StartError::Setup {
                reason: format!(
                    "install the plant {}: {}",
                    plant.name(),
                    super::error::db(e)
                ),
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roles(control: &str, data: &str) -> Roles {
        Roles {
            control: control.into(),
            data: data.into(),
            control_password: Some("control-secret".into()),
            data_password: Some("data-secret".into()),
        }
    }

    // spec: AUTH-1, AUTH-6
    #[test]
    fn role_names_within_their_bounds_are_accepted_and_others_refused() {
        let longest_control = "c".repeat(ROLE_NAME_BYTES_MAX - PROTOCOL_OWNER_SUFFIX.len());
        let longest_data = "d".repeat(ROLE_NAME_BYTES_MAX);
        for ok in [
            roles("connreg_control", "connreg_data"),
            roles(&longest_control, &longest_data),
            roles("c", "d"),
        ] {
            assert!(ok.validate().is_ok(), "{ok:?}");
            assert_eq!(ok.protocol_owner(), format!("{}_protocol", ok.control));
            assert!(ok.protocol_owner().len() <= ROLE_NAME_BYTES_MAX);
        }
        let too_long = format!("{longest_control}x");
        for (bad, expected) in [
            (roles("", "data"), "role names must be 1 to 63 bytes"),
            (roles("control", ""), "role names must be 1 to 63 bytes"),
            (
                roles("control", &format!("{longest_data}d")),
                "role names must be 1 to 63 bytes",
            ),
            (
                roles(&too_long, "data"),
                "the control role's name must be at most 54 bytes",
            ),
            (
                roles("same", "same"),
                "the control and data roles must differ",
            ),
        ] {
            match bad.validate() {
                Err(StartError::Options { reason }) => {
                    assert!(reason.starts_with(expected), "{bad:?}: {reason}");
                }
                other => panic!("{bad:?} was not refused as options: {other:?}"),
            }
        }
    }

    #[test]
    fn the_debug_form_of_roles_names_them_never_their_passwords() {
        let shown = format!("{:?}", roles("connreg_control", "connreg_data"));
        assert!(shown.contains("connreg_control") && shown.contains("connreg_data"));
        assert!(!shown.contains("secret"), "{shown}");
    }
}
