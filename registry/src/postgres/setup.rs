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
pub const SCHEMA_VERSION: i32 = 7;

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
    fn validate(&self) -> Result<(), StartError> {
        for name in [&self.control, &self.data] {
            if name.is_empty() || name.len() > ROLE_NAME_BYTES_MAX {
                return Err(StartError::Options {
                    reason: format!("role names must be 1 to {ROLE_NAME_BYTES_MAX} bytes"),
                });
            }
        }
        if self.control == self.data {
            return Err(StartError::Options {
                reason: "the control and data roles must differ".into(),
            });
        }
        Ok(())
    }
}

/// Creates the control and data roles (if missing) and the `connreg` schema
/// owned by the control role, in the database `admin` names. Idempotent.
///
/// `admin` must be allowed to create roles and schemas in that database.
/// Passwords, when given, are set (again) on every call. Role names and
/// passwords reach the server as bound parameters and are quoted there.
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

/// Applies the migrations through the control pool, then grants the data
/// role its privileges when it is another role.
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
            sqlx::query("SELECT connreg.grant_data_role($1)")
                .bind(data_role)
                .execute(&mut *tx)
                .await?;
            tx.commit().await
        };
        grant.await.map_err(|e| StartError::Setup {
            reason: format!("grant the data role: {}", super::error::db(e)),
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
    Ok(())
}
