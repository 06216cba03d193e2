//! A registry on a fresh database of its own, for tests, benches and the
//! simulator (feature `postgres-testing`).
//!
//! [`TestRegistry::open`] asks `connreg-pgtest` for a new, empty database
//! (which finds or starts a server: see that crate's README), creates the
//! roles named after the database (`<database>_control`, `<database>_data`,
//! and the protocol owner `<database>_control_protocol`) with
//! [`create_roles`], and connects a [`PgRegistry`] through them, so
//! every PostgreSQL test exercises the two-role split (AUTH-1, AUTH-2). The
//! database goes away when the last clone of the registry drops; on a server
//! named by URL, which outlives the process, its roles are dropped too.
//!
//! Pools are smaller than the production defaults
//! ([`TEST_DATA_CONNECTIONS_MAX`], [`TEST_CONTROL_CONNECTIONS_MAX`]) so that
//! tests running in parallel stay within the test server's connections.

use std::str::FromStr;

use connreg_pgtest::{ServerSource, TestDatabase};
use sqlx::{Connection, PgConnection};

use super::mutants::SqlMutant;
use super::{PgConnectOptions, PgOptions, PgRegistry, Roles, StartError, create_roles};
use crate::clock::Clock;
use crate::request::RegistryConfig;

/// Data-pool connections of one test registry: enough for real races of
/// dozens of tasks, while a few tests in parallel stay far below the test
/// server's 300 connections.
pub const TEST_DATA_CONNECTIONS_MAX: u32 = 16;

/// Control-pool connections of one test registry.
pub const TEST_CONTROL_CONNECTIONS_MAX: u32 = 2;

/// A password for test roles only. The local test cluster trusts loopback;
/// a server named by URL may ask for one.
pub const TEST_ROLE_PASSWORD: &str = "connreg-test-only";

/// One test database with its two roles.
pub struct TestRegistry {
    /// The fresh database's superuser options (`connect` for admin work).
    pub admin: PgConnectOptions,
    /// The two roles of this database.
    pub roles: Roles,
    database: DatabaseGuard,
}

impl std::fmt::Debug for TestRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestRegistry")
            .field("database", &self.database_name())
            .field("roles", &self.roles)
            .finish_non_exhaustive()
    }
}

impl TestRegistry {
    /// A new database and its two roles on the server whose superuser URL
    /// is `server_url` (a server the caller owns, such as the primary of a
    /// `connreg_pgtest::ReplicatedPair`), nothing installed yet. Nothing
    /// is dropped afterwards: the caller's server goes whole.
    pub async fn create_at(server_url: &str) -> Result<TestRegistry, StartError> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let server = PgConnectOptions::from_str(server_url).map_err(|e| StartError::Options {
            reason: format!("server url: {e}"),
        })?;
        let name = format!(
            "{}own_{}_{}",
            connreg_pgtest::DATABASE_NAME_PREFIX,
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let mut conn = PgConnection::connect_with(&server).await?;
        sqlx::raw_sql(&format!("CREATE DATABASE \"{name}\""))
            .execute(&mut conn)
            .await?;
        let _ = conn.close().await;
        let admin = server.clone().database(&name);
        let roles = Roles {
            control: format!("{name}_control"),
            data: format!("{name}_data"),
            control_password: Some(TEST_ROLE_PASSWORD.into()),
            data_password: Some(TEST_ROLE_PASSWORD.into()),
        };
        create_roles(&admin, &roles).await?;
        Ok(TestRegistry {
            admin,
            roles,
            database: DatabaseGuard {
                database: None,
                admin: server,
                roles: [String::new(), String::new(), String::new()],
            },
        })
    }

    /// A new database and its two roles, nothing installed yet.
    pub async fn create() -> Result<TestRegistry, StartError> {
        let database = TestDatabase::create()
            .await
            .map_err(|e| StartError::Setup {
                reason: format!("no PostgreSQL test database: {e}"),
            })?;
        let admin =
            PgConnectOptions::from_str(database.url()).map_err(|e| StartError::Options {
                reason: format!("test database url: {e}"),
            })?;
        let name = database.database_name().to_owned();
        let roles = Roles {
            control: format!("{name}_control"),
            data: format!("{name}_data"),
            control_password: Some(TEST_ROLE_PASSWORD.into()),
            data_password: Some(TEST_ROLE_PASSWORD.into()),
        };
        let guard = DatabaseGuard {
            database: Some(database),
            admin: admin.clone(),
            roles: [
                roles.control.clone(),
                roles.data.clone(),
                roles.protocol_owner(),
            ],
        };
        create_roles(&admin, &roles).await?;
        Ok(TestRegistry {
            admin,
            roles,
            database: guard,
        })
    }

    /// A fresh database, its roles and a registry on it, in one call; the
    /// database lives as long as the registry. When
    /// [`SQL_MUTANT_VAR`](super::mutants::SQL_MUTANT_VAR) names a SQL
    /// mutant, the database gets it (an unknown name is an error).
    pub async fn open(clock: impl Clock, config: RegistryConfig) -> Result<PgRegistry, StartError> {
        let mutant = super::mutants::mutant_from_env()?;
        TestRegistry::open_mutated(clock, config, mutant).await
    }

    /// [`open`](Self::open) with `mutant` applied to the fresh database
    /// once its schema is installed, whatever the environment says.
    pub async fn open_mutated(
        clock: impl Clock,
        config: RegistryConfig,
        mutant: Option<&SqlMutant>,
    ) -> Result<PgRegistry, StartError> {
        let test = TestRegistry::create().await?;
        let registry = PgRegistry::connect(test.options(), clock, config).await?;
        if let Some(mutant) = mutant {
            super::mutants::apply(&test.admin, mutant).await?;
        }
        Ok(registry.keep_alive(test))
    }

    /// Both pools as the two roles, with the test pool sizes.
    pub fn options(&self) -> PgOptions {
        let mut options = PgOptions::for_roles(&self.admin, &self.roles);
        options.data.max_connections = TEST_DATA_CONNECTIONS_MAX;
        options.control.max_connections = TEST_CONTROL_CONNECTIONS_MAX;
        options
    }

    /// The database's name.
    pub fn database_name(&self) -> &str {
        self.database
            .database
            .as_ref()
            .map_or("", |d| d.database_name())
    }

    /// The test database handle (server, host, port for tools).
    pub fn database(&self) -> Option<&TestDatabase> {
        self.database.database.as_ref()
    }

    /// A plain connection as the superuser.
    pub async fn admin_connection(&self) -> Result<PgConnection, StartError> {
        Ok(PgConnection::connect_with(&self.admin).await?)
    }

    /// A plain connection as the data role.
    pub async fn data_connection(&self) -> Result<PgConnection, StartError> {
        Ok(PgConnection::connect_with(&self.options().data.connect).await?)
    }

    /// A plain connection as the control role.
    pub async fn control_connection(&self) -> Result<PgConnection, StartError> {
        Ok(PgConnection::connect_with(&self.options().control.connect).await?)
    }
}

/// Drops the database, then (on a server that outlives the process) the
/// roles, which cannot go while the database holds their objects.
struct DatabaseGuard {
    database: Option<TestDatabase>,
    admin: PgConnectOptions,
    roles: [String; 3],
}

impl Drop for DatabaseGuard {
    fn drop(&mut self) {
        let Some(database) = self.database.take() else {
            return;
        };
        let source = database.server().source();
        drop(database);
        // Throwaway servers drop databases in the background and vanish,
        // roles included, with the process. A URL server has finished the
        // database drop by now.
        if source != ServerSource::Url {
            return;
        }
        let admin = self.admin.clone().database("postgres");
        let roles = self.roles.clone();
        #[allow(
            clippy::disallowed_methods,
            reason = "test cleanup runs async work from Drop, outside any runtime's reach"
        )]
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime
                .block_on(async move {
                    let mut conn = PgConnection::connect_with(&admin).await?;
                    for role in roles {
                        let statement: String =
                            sqlx::query_scalar("SELECT format('DROP ROLE IF EXISTS %I', $1::text)")
                                .bind(role)
                                .fetch_one(&mut conn)
                                .await?;
                        sqlx::query(&statement)
                            .persistent(false)
                            .execute(&mut conn)
                            .await?;
                    }
                    conn.close().await
                })
                .map_err(|e| e.to_string())
        })
        .join();
        match dropped {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("connreg: test roles left on the server: {e}"),
            Err(_) => eprintln!("connreg: test roles left on the server"),
        }
    }
}
