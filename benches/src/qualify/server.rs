//! Which PostgreSQL server a run qualifies, how it is reached, and what the
//! report says about it.
//!
//! - [`PgTarget::Operator`]: a server as deployed, through the control and
//!   data roles' URLs (`--control-url`, `--data-url`). Nothing is created
//!   but the run's own rows: no database, no role. The schema must be at
//!   [`SCHEMA_VERSION`] unless `--migrate` lets the control role migrate it.
//! - [`PgTarget::Throwaway`]: a fresh database from connreg-pgtest (its
//!   throwaway local cluster with `fsync=off`, Docker, or the server of
//!   `CONNREG_TEST_DATABASE_URL`), or with `durable` a cluster of the run's
//!   own started with `fsync=on`. Dropped at the end.
//!
//! Either way the server's version and durability settings are read
//! through the control role and put in the report ([`ServerFacts`]).

use std::collections::BTreeMap;
use std::str::FromStr;

use connreg::postgres::testing::{TEST_ROLE_PASSWORD, TestRegistry};
use connreg::postgres::{
    PgConnectOptions, PgOptions, PgRegistry, PoolOptions, Roles, SCHEMA_VERSION, create_roles,
};
use connreg::{ManualClock, RegistryConfig};
use connreg_pgtest::{
    AutoFailoverFormation, LocalCluster, LocalOptions, ReplicatedPair, Replication, TestDatabase,
};
use serde::{Deserialize, Serialize};
use sqlx::{Connection, PgConnection};

use super::failover::{FailoverTarget, HaNode};
use super::limits::{PG_CONTROL_CONNECTIONS, PG_DATA_CONNECTIONS_MAX, STANDBYS_REPORTED_MAX};
use crate::resolve_bench::pgbench::Pgbench;

/// The server settings every PostgreSQL report records, in report order.
pub const REPORTED_SETTINGS: [&str; 7] = [
    "fsync",
    "synchronous_commit",
    "synchronous_standby_names",
    "full_page_writes",
    "wal_level",
    "shared_buffers",
    "max_connections",
];

/// The `synchronous_commit` values with which a commit waits until the
/// synchronous standbys hold it durably: flushed (`on`) or also replayed
/// (`remote_apply`). `remote_write` waits only for the standby's write to
/// its operating system, and `local` and `off` do not wait at all
/// (docs/OPERATIONS.md).
const WAITING_COMMITS: [&str; 2] = ["on", "remote_apply"];

/// The database a durable throwaway cluster gets.
const DURABLE_DATABASE: &str = "connreg_qualify";

/// Where the proxy in front of a failover pair listens.
const LOCAL_HOST: &str = "127.0.0.1";

/// `max_connections` of a durable throwaway cluster.
const DURABLE_CONNECTIONS_MAX: u32 = 200;

/// Where a PostgreSQL run goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PgTarget {
    /// A server as deployed, reached through two roles' URLs.
    Operator {
        /// The control role's URL (owns the schema, migrates, publishes).
        control_url: String,
        /// The data role's URL.
        data_url: String,
        /// Migrate the schema with the control role if it is behind.
        migrate: bool,
        /// A database on the same server where pgbench may create its
        /// tables (`--pgbench-url`); without it pgbench is skipped.
        pgbench_url: Option<String>,
    },
    /// A fresh database that goes away with the run.
    Throwaway {
        /// A cluster of the run's own with `fsync=on` instead of the
        /// shared test server.
        durable: bool,
    },
    /// A primary and a streaming standby of the run's own (`fsync=on`),
    /// replicating as asked; both go away with the run.
    Pair {
        /// A pair replicating synchronously (`remote_apply`) or
        /// asynchronously, or a pg_auto_failover formation.
        ha: Ha,
        /// The pools reach the primary through a proxy that can move to
        /// the promoted standby (a contract's `[failover]`).
        failover: bool,
    },
}

/// What a [`PgTarget::Pair`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ha {
    /// A primary and a streaming standby started by the run, promoted by
    /// it (`ReplicatedPair`).
    Pair(Replication),
    /// A pg_auto_failover formation: a monitor, a primary and a
    /// synchronous secondary, run by `pg_autoctl` (`AutoFailoverFormation`);
    /// the monitor promotes.
    AutoFailover,
}

impl Ha {
    /// `synchronous`, `asynchronous` or `pg_auto_failover`.
    pub fn as_str(self) -> &'static str {
        match self {
            Ha::Pair(r) => r.as_str(),
            Ha::AutoFailover => "pg_auto_failover",
        }
    }
}

/// A standby connected to the server, as `pg_stat_replication` shows it
/// to the control role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StandbyFacts {
    /// Its `application_name`.
    pub name: String,
    /// `streaming`, `catchup`, ...; `?` where the control role may not see
    /// it (grant it `pg_monitor`).
    pub state: String,
    /// `sync`, `quorum`, `potential` or `async`; `?` where not visible.
    pub sync_state: String,
    /// How far its replay trails the primary's flush, in microseconds
    /// (none: not visible, or nothing to replay lately).
    pub replay_lag_us: Option<i64>,
}

/// What the report says about the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerFacts {
    /// `operator` (a server as deployed) or `throwaway` (a fresh database
    /// dropped at the end).
    pub kind: String,
    /// `url` (named by a URL), `local` (a cluster started from local
    /// binaries) or `docker`.
    pub source: String,
    /// `host:port/database`, never a password.
    pub address: String,
    /// The role the control pool logs in as.
    pub control_role: String,
    /// The role the data pool logs in as.
    pub data_role: String,
    /// `server_version`.
    pub version: String,
    /// [`REPORTED_SETTINGS`], as the server reports them.
    pub settings: BTreeMap<String, String>,
    /// The schema version found before the run (`None`: no schema).
    pub schema_version_found: Option<i32>,
    /// The schema version the run used ([`SCHEMA_VERSION`]).
    pub schema_version: i32,
    /// Whether this run installed or migrated the schema.
    pub migrated: bool,
    /// Control-pool connections.
    pub control_connections: u32,
    /// Data-pool connections.
    pub data_connections: u32,
    /// The standbys connected to the server when the run began (at most
    /// `STANDBYS_REPORTED_MAX`).
    #[serde(default)]
    pub standbys: Vec<StandbyFacts>,
}

impl ServerFacts {
    /// A setting as reported, or `?`.
    pub fn setting(&self, name: &str) -> &str {
        self.settings.get(name).map_or("?", String::as_str)
    }

    /// Connected standbys every commit waits for: `synchronous_commit`
    /// waits for their flush (`on`, `remote_apply`),
    /// `synchronous_standby_names` names standbys, and these stream as
    /// `sync` or `quorum`. Zero means an answered write can be lost with
    /// the primary.
    pub fn synchronous_standbys(&self) -> u32 {
        if self.replication_gap().is_some() {
            return 0;
        }
        self.standbys.iter().filter(|s| waits_for(s)).count() as u32
    }

    /// Why no commit waits for a standby, in one sentence; `None` when
    /// one does.
    pub fn replication_gap(&self) -> Option<String> {
        let commit = self.setting("synchronous_commit");
        let names = self.setting("synchronous_standby_names");
        if !WAITING_COMMITS.contains(&commit) {
            return Some(format!(
                "synchronous_commit = {commit}: commits do not wait until a standby holds them \
                 (on or remote_apply do)"
            ));
        }
        if names.is_empty() || names == "?" {
            return Some(
                "synchronous_standby_names is empty: replication is asynchronous, and a \
                 failover can lose answered commits"
                    .into(),
            );
        }
        if !self.standbys.iter().any(waits_for) {
            let seen = if self.standbys.is_empty() {
                "no standby is connected".to_string()
            } else if self.standbys.iter().all(|s| s.sync_state == "?") {
                "the control role cannot see the standbys' state (grant it pg_monitor)".to_string()
            } else {
                format!(
                    "no connected standby streams as sync or quorum ({})",
                    (self.standbys.iter())
                        .map(|s| format!("{}: {} {}", s.name, s.state, s.sync_state))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            return Some(format!(
                "synchronous_standby_names = '{names}', but {seen}: commits wait for a standby that is not there"
            ));
        }
        None
    }

    /// One line that says loudly which server ran.
    pub fn banner(&self) -> String {
        let durability = format!(
            "fsync={} synchronous_commit={} full_page_writes={}",
            self.setting("fsync"),
            self.setting("synchronous_commit"),
            self.setting("full_page_writes")
        );
        let what = match (self.kind.as_str(), self.source.as_str()) {
            ("operator", _) => "OPERATOR SERVER".to_string(),
            (_, source) => format!("THROWAWAY {} SERVER", source.to_uppercase()),
        };
        let warning = if self.setting("fsync") != "on" {
            " -- NOT DURABLE: figures say nothing about a server that syncs to disk"
        } else {
            ""
        };
        format!(
            "{what} {} (PostgreSQL {}, {durability}, synchronous standbys {}){warning}",
            self.address,
            self.version,
            self.synchronous_standbys()
        )
    }
}

/// One `pg_stat_replication` row: name, state, sync state, replay lag
/// in microseconds.
type StandbyRow = (String, Option<String>, Option<String>, Option<i64>);

/// A standby that confirms commits before they are answered.
fn waits_for(s: &StandbyFacts) -> bool {
    s.state == "streaming" && (s.sync_state == "sync" || s.sync_state == "quorum")
}

/// A registry on the target, with the control role's connect options
/// (for facts, cleanup and whole-database checks).
pub struct Opened {
    /// Both pools.
    pub registry: PgRegistry,
    /// The control role's options: owns every table.
    pub control: PgConnectOptions,
    /// The data role's options.
    pub data: PgConnectOptions,
    /// The data role's URL, password included: for worker processes.
    pub data_url: String,
    /// What the report says.
    pub facts: ServerFacts,
    /// pgbench on the same server, or why there is none.
    pub pgbench: Result<Pgbench, String>,
    /// Keeps pgbench's throwaway database alive.
    pub pgbench_guard: Option<TestDatabase>,
    /// With [`PgTarget::Pair`] `failover`: the pair behind the pools'
    /// proxy.
    pub failover: Option<FailoverTarget>,
}

/// Why a target could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// A URL or an option is unusable (exit 2).
    #[error("{0}")]
    Options(String),
    /// The server, the roles or the schema are not usable (exit 3).
    #[error("{0}")]
    Unavailable(String),
}

fn unavailable(what: &str) -> impl FnOnce(String) -> OpenError + '_ {
    move |e| OpenError::Unavailable(format!("{what}: {e}"))
}

/// Opens a registry on `target` with `clients` data connections (at most
/// [`PG_DATA_CONNECTIONS_MAX`]).
pub async fn open(
    target: &PgTarget,
    clock: ManualClock,
    config: RegistryConfig,
    clients: u32,
) -> Result<Opened, OpenError> {
    let data_connections = clients.clamp(1, PG_DATA_CONNECTIONS_MAX);
    match target {
        PgTarget::Operator {
            control_url,
            data_url,
            migrate,
            pgbench_url,
        } => {
            let mut options = PgOptions::from_urls(control_url, data_url)
                .map_err(|e| OpenError::Options(format!("--control-url/--data-url: {e}")))?;
            let found = schema_version(&options.control.connect).await?;
            if found != Some(SCHEMA_VERSION) {
                let found_text = found.map_or_else(
                    || "no connreg schema".to_string(),
                    |v| format!("version {v}"),
                );
                if found.is_some_and(|v| v > SCHEMA_VERSION) {
                    return Err(OpenError::Unavailable(format!(
                        "the database holds schema {found_text}, newer than this build's \
                         {SCHEMA_VERSION}: qualify it with the build that migrated it"
                    )));
                }
                if !migrate {
                    return Err(OpenError::Unavailable(format!(
                        "the database holds {found_text}; this build serves schema version \
                         {SCHEMA_VERSION}: run again with --migrate to install or migrate it \
                         with the control role"
                    )));
                }
            }
            options.data.max_connections = data_connections;
            options.control.max_connections = PG_CONTROL_CONNECTIONS;
            let control = options.control.connect.clone();
            let data = options.data.connect.clone();
            let registry = PgRegistry::connect(options, clock, config)
                .await
                .map_err(|e| unavailable("connect")(e.to_string()))?;
            let facts = facts(
                &control,
                &data,
                "operator",
                "url",
                found,
                found != Some(SCHEMA_VERSION),
                data_connections,
            )
            .await;
            let pgbench = match pgbench_url {
                None => Err(
                    "no --pgbench-url: pgbench needs a database on the same server \
                             where it may create its tables"
                        .to_string(),
                ),
                Some(url) => PgConnectOptions::from_str(url)
                    .map(|o| {
                        Pgbench::new(
                            o.get_host(),
                            o.get_port(),
                            o.get_username(),
                            super::beside::url_password(url).as_deref(),
                            o.get_database().unwrap_or(""),
                        )
                    })
                    .map_err(|e| format!("--pgbench-url: {e}")),
            };
            match facts {
                Ok(facts) => Ok(Opened {
                    registry,
                    control,
                    data_url: data_url.clone(),
                    data,
                    facts,
                    pgbench,
                    pgbench_guard: None,
                    failover: None,
                }),
                Err(e) => {
                    registry.close().await;
                    Err(e)
                }
            }
        }
        PgTarget::Throwaway { durable: false } => {
            let test = TestRegistry::create()
                .await
                .map_err(|e| unavailable("no test database")(e.to_string()))?;
            let source = test
                .database()
                .map_or("url", |d| d.server().source().as_str())
                .to_string();
            let mut options = test.options();
            options.data.max_connections = data_connections;
            options.control.max_connections = PG_CONTROL_CONNECTIONS;
            let control = options.control.connect.clone();
            let data = options.data.connect.clone();
            let registry = PgRegistry::connect(options, clock, config)
                .await
                .map_err(|e| unavailable("connect")(e.to_string()))?
                .keep_alive(test);
            let facts = facts(
                &control,
                &data,
                "throwaway",
                &source,
                None,
                true,
                data_connections,
            )
            .await?;
            let (pgbench, pgbench_guard) = match TestDatabase::create().await {
                Ok(db) => (Pgbench::for_database(&db), Some(db)),
                Err(e) => (Err(format!("no database for pgbench: {e}")), None),
            };
            Ok(Opened {
                registry,
                control,
                data_url: test_url(&data),
                data,
                facts,
                pgbench,
                pgbench_guard,
                failover: None,
            })
        }
        PgTarget::Throwaway { durable: true } => {
            let cluster = tokio::task::spawn_blocking(|| {
                LocalCluster::start(LocalOptions {
                    fsync: true,
                    connections_max: DURABLE_CONNECTIONS_MAX,
                })
            })
            .await
            .map_err(|e| unavailable("start a cluster with fsync=on")(e.to_string()))?
            .map_err(|e| unavailable("start a cluster with fsync=on")(e.to_string()))?;
            let server = OwnServer {
                url: cluster.url().to_string(),
                database_url: cluster.database_url(DURABLE_DATABASE),
                host: cluster.host().to_string(),
                port: cluster.port(),
                superuser: cluster.superuser().to_string(),
                source: "local",
            };
            own_server(server, cluster, clock, config, data_connections, None).await
        }
        PgTarget::Pair { ha, failover } => {
            let what = format!("start {}", ha.as_str());
            let options = LocalOptions {
                fsync: true,
                connections_max: DURABLE_CONNECTIONS_MAX,
            };
            let node: HaNode = match *ha {
                Ha::Pair(replication) => HaNode::Pair(std::sync::Arc::new(
                    tokio::task::spawn_blocking(move || {
                        ReplicatedPair::start(options, replication)
                    })
                    .await
                    .map_err(|e| unavailable(&what)(e.to_string()))?
                    .map_err(|e| unavailable(&what)(e.to_string()))?,
                )),
                Ha::AutoFailover => HaNode::Formation(std::sync::Arc::new(
                    tokio::task::spawn_blocking(move || AutoFailoverFormation::start(options))
                        .await
                        .map_err(|e| unavailable(&what)(e.to_string()))?
                        .map_err(|e| unavailable(&what)(e.to_string()))?,
                )),
            };
            let url = node
                .primary_url()
                .map_err(unavailable("the primary's URL"))?;
            let primary = PgConnectOptions::from_str(&url)
                .map_err(|e| unavailable("the primary's URL")(e.to_string()))?;
            let server = OwnServer {
                database_url: node
                    .primary_database_url(DURABLE_DATABASE)
                    .map_err(unavailable("the primary's URL"))?,
                host: primary.get_host().to_string(),
                port: primary.get_port(),
                superuser: primary.get_username().to_string(),
                url,
                source: match ha {
                    Ha::Pair(_) => "local-pair",
                    Ha::AutoFailover => "local-pg_auto_failover",
                },
            };
            let through = if *failover {
                Some(
                    FailoverTarget::start(node.clone())
                        .await
                        .map_err(OpenError::Unavailable)?,
                )
            } else {
                None
            };
            own_server(server, node, clock, config, data_connections, through).await
        }
    }
}

/// A server the run started itself, reached as its superuser.
struct OwnServer {
    url: String,
    database_url: String,
    host: String,
    port: u16,
    superuser: String,
    /// The report's `source`.
    source: &'static str,
}

/// A registry on a database of a server the run started (`guard` stops
/// it when the registry goes): the database, a second one for pgbench,
/// the two roles, the control role allowed to see the standbys
/// (`pg_monitor`). With `through`, the pools connect through its proxy.
async fn own_server(
    server: OwnServer,
    guard: impl Send + Sync + 'static,
    clock: ManualClock,
    config: RegistryConfig,
    data_connections: u32,
    through: Option<FailoverTarget>,
) -> Result<Opened, OpenError> {
    let mut admin = PgConnection::connect(&server.url)
        .await
        .map_err(|e| unavailable("connect as the cluster's superuser")(e.to_string()))?;
    sqlx::query(&format!("CREATE DATABASE {DURABLE_DATABASE}"))
        .execute(&mut admin)
        .await
        .map_err(|e| unavailable("create the database")(e.to_string()))?;
    let pgbench = match sqlx::query(&format!("CREATE DATABASE {DURABLE_DATABASE}_pgbench"))
        .execute(&mut admin)
        .await
    {
        Ok(_) => Ok(Pgbench::new(
            &server.host,
            server.port,
            &server.superuser,
            None,
            &format!("{DURABLE_DATABASE}_pgbench"),
        )),
        Err(e) => Err(format!("no database for pgbench: {e}")),
    };
    let _ = admin.close().await;
    let admin_db = PgConnectOptions::from_str(&server.database_url)
        .map_err(|e| unavailable("the cluster's URL")(e.to_string()))?;
    let roles = Roles {
        control: "qualify_control".into(),
        data: "qualify_data".into(),
        control_password: Some(TEST_ROLE_PASSWORD.into()),
        data_password: Some(TEST_ROLE_PASSWORD.into()),
    };
    create_roles(&admin_db, &roles)
        .await
        .map_err(|e| unavailable("create the roles")(e.to_string()))?;
    let mut admin = PgConnection::connect_with(&admin_db)
        .await
        .map_err(|e| unavailable("connect as the cluster's superuser")(e.to_string()))?;
    sqlx::query(&format!("GRANT pg_monitor TO {}", roles.control))
        .execute(&mut admin)
        .await
        .map_err(|e| unavailable("let the control role see the standbys")(e.to_string()))?;
    let _ = admin.close().await;
    let mut options = PgOptions::for_roles(&admin_db, &roles);
    options.data.max_connections = data_connections;
    options.control.max_connections = PG_CONTROL_CONNECTIONS;
    if let Some(proxy) = &through {
        let port = proxy.proxy_port();
        options.control.connect = options.control.connect.clone().host(LOCAL_HOST).port(port);
        options.data.connect = options.data.connect.clone().host(LOCAL_HOST).port(port);
    }
    let control = options.control.connect.clone();
    let data = options.data.connect.clone();
    let registry = PgRegistry::connect(options, clock, config)
        .await
        .map_err(|e| unavailable("connect")(e.to_string()))?
        .keep_alive(guard);
    let facts = facts(
        &control,
        &data,
        "throwaway",
        server.source,
        None,
        true,
        data_connections,
    )
    .await?;
    Ok(Opened {
        registry,
        control,
        data_url: test_url(&data),
        data,
        facts,
        pgbench,
        pgbench_guard: None,
        failover: through,
    })
}

/// The schema version a database holds, read as the control role (`None`:
/// no schema or no version row).
pub async fn schema_version(control: &PgConnectOptions) -> Result<Option<i32>, OpenError> {
    let mut conn = PgConnection::connect_with(control)
        .await
        .map_err(|e| unavailable("connect as the control role")(e.to_string()))?;
    let found = sqlx::query_scalar::<_, i32>("SELECT version FROM connreg.schema_version")
        .fetch_optional(&mut conn)
        .await;
    let _ = conn.close().await;
    match found {
        Ok(v) => Ok(v),
        // No schema (undefined table or schema).
        Err(sqlx::Error::Database(d)) if matches!(d.code().as_deref(), Some("42P01" | "3F000")) => {
            Ok(None)
        }
        Err(e) => Err(unavailable(
            "read connreg.schema_version as the control role",
        )(e.to_string())),
    }
}

/// A URL for `options` with the test roles' password.
fn test_url(options: &PgConnectOptions) -> String {
    format!(
        "postgres://{}:{TEST_ROLE_PASSWORD}@{}:{}/{}",
        options.get_username(),
        options.get_host(),
        options.get_port(),
        options.get_database().unwrap_or("")
    )
}

/// `host:port/database` of `options`.
pub fn address(options: &PgConnectOptions) -> String {
    format!(
        "{}:{}/{}",
        options.get_host(),
        options.get_port(),
        options.get_database().unwrap_or("")
    )
}

async fn facts(
    control: &PgConnectOptions,
    data: &PgConnectOptions,
    kind: &str,
    source: &str,
    found: Option<i32>,
    migrated: bool,
    data_connections: u32,
) -> Result<ServerFacts, OpenError> {
    let mut conn = PgConnection::connect_with(control)
        .await
        .map_err(|e| unavailable("connect as the control role")(e.to_string()))?;
    let version: String = sqlx::query_scalar("SELECT current_setting('server_version')")
        .fetch_one(&mut conn)
        .await
        .map_err(|e| unavailable("read the server version")(e.to_string()))?;
    let mut settings = BTreeMap::new();
    for name in REPORTED_SETTINGS {
        let value: String = sqlx::query_scalar("SELECT current_setting($1)")
            .bind(name)
            .fetch_one(&mut conn)
            .await
            .map_err(|e| unavailable("read the server's settings")(e.to_string()))?;
        settings.insert(name.to_string(), value);
    }
    let rows: Vec<StandbyRow> = sqlx::query_as(
        "SELECT coalesce(application_name, ''), state, sync_state, \
                (extract(epoch FROM replay_lag) * 1000000)::int8 \
           FROM pg_stat_replication ORDER BY application_name, pid LIMIT $1",
    )
    .bind(STANDBYS_REPORTED_MAX as i64)
    .fetch_all(&mut conn)
    .await
    .map_err(|e| unavailable("read pg_stat_replication")(e.to_string()))?;
    let standbys = rows
        .into_iter()
        .map(|(name, state, sync_state, replay_lag_us)| StandbyFacts {
            name,
            state: state.unwrap_or_else(|| "?".into()),
            sync_state: sync_state.unwrap_or_else(|| "?".into()),
            replay_lag_us,
        })
        .collect();
    let _ = conn.close().await;
    Ok(ServerFacts {
        kind: kind.into(),
        source: source.into(),
        address: address(control),
        control_role: control.get_username().into(),
        data_role: data.get_username().into(),
        version,
        settings,
        schema_version_found: found,
        schema_version: SCHEMA_VERSION,
        migrated,
        control_connections: PG_CONTROL_CONNECTIONS,
        data_connections,
        standbys,
    })
}

/// Both pools' options from two URLs, checking only that they parse.
pub fn parse_urls(control: &str, data: &str) -> Result<(), OpenError> {
    PoolOptions::parse_url(control)
        .map_err(|e| OpenError::Options(format!("--control-url: {e}")))?;
    PoolOptions::parse_url(data).map_err(|e| OpenError::Options(format!("--data-url: {e}")))?;
    Ok(())
}
