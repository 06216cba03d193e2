//! Pool options: where each pool connects, as whom, and its bounds (AUTH-1).

use std::str::FromStr;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use super::error::StartError;
use super::health::Health;
use super::setup::{Roles, SCHEMA};
use crate::limits::CALL_DEADLINE_MS_MAX;

/// One pool's connection target and bounds.
///
/// Defaults ([`PoolOptions::control`], [`PoolOptions::data`]):
///
/// | field                  | control            | data            |
/// |------------------------|--------------------|-----------------|
/// | `application_name`     | `connreg-control`  | `connreg-data`  |
/// | `max_connections`      | 4                  | 32              |
/// | `min_connections`      | 0                  | 0               |
/// | `acquire_timeout_ms`   | 5 000              | 5 000           |
/// | `idle_timeout_ms`      | 60 000             | 60 000          |
/// | `statement_timeout_ms` | 60 000             | 5 000           |
/// | `call_deadline_ms`     | 120 000            | 10 000          |
///
/// The control pool runs migrations and publications of up to
/// [`PUBLICATION_CHANGES_MAX`](crate::limits::PUBLICATION_CHANGES_MAX)
/// changes, hence its longer statement timeout; the data pool serves short
/// routing transactions. Every connection sets `search_path` to the
/// `connreg` schema, its `application_name` and its `statement_timeout`,
/// ends transactions left idle for longer than the statement timeout, and
/// asks the server to probe the client (TCP keepalive after
/// [`SERVER_KEEPALIVE_IDLE_S`], and a check of the connection every
/// [`CLIENT_CHECK_INTERVAL_MS`] while a statement runs), so a vanished
/// client's locks are released. The call deadline bounds each contract
/// call on the client (LOCK-6; at most
/// [`CALL_DEADLINE_MS_MAX`](crate::limits::CALL_DEADLINE_MS_MAX)); it is
/// kept above the statement timeout, so the server's own bound normally
/// answers first.
#[derive(Clone)]
pub struct PoolOptions {
    /// Server, database, role and password.
    pub connect: PgConnectOptions,
    /// Shown in `pg_stat_activity`, so operators can tell the pools apart.
    pub application_name: String,
    /// Most connections the pool opens.
    pub max_connections: u32,
    /// Connections the pool keeps open when idle.
    pub min_connections: u32,
    /// Longest wait for a free connection before a call fails as unavailable.
    pub acquire_timeout_ms: u64,
    /// An idle connection above `min_connections` closes after this long.
    pub idle_timeout_ms: u64,
    /// The server cancels any statement running longer than this.
    pub statement_timeout_ms: u64,
    /// Longest a contract call on this pool may take, connection wait,
    /// retries and round trips included; past it the call answers
    /// `Unavailable` (LOCK-6).
    pub call_deadline_ms: u64,
}

/// Idle seconds before the server starts TCP keepalive probes of a client.
pub const SERVER_KEEPALIVE_IDLE_S: u32 = 10;

/// Seconds between the server's keepalive probes, and probes lost before
/// it drops the client.
pub const SERVER_KEEPALIVE_INTERVAL_S: u32 = 5;

/// Probes the server may lose before it ends the session.
pub const SERVER_KEEPALIVE_COUNT: u32 = 3;

/// How often the server checks, while a statement runs, that its client is
/// still connected, in ms.
pub const CLIENT_CHECK_INTERVAL_MS: u32 = 1_000;

/// Names the server, database and role, never the password.
impl std::fmt::Debug for PoolOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolOptions")
            .field("host", &self.connect.get_host())
            .field("port", &self.connect.get_port())
            .field("database", &self.connect.get_database())
            .field("role", &self.connect.get_username())
            .field("application_name", &self.application_name)
            .field("max_connections", &self.max_connections)
            .field("min_connections", &self.min_connections)
            .field("acquire_timeout_ms", &self.acquire_timeout_ms)
            .field("idle_timeout_ms", &self.idle_timeout_ms)
            .field("statement_timeout_ms", &self.statement_timeout_ms)
            .field("call_deadline_ms", &self.call_deadline_ms)
            .finish_non_exhaustive()
    }
}

impl PoolOptions {
    /// Control-pool defaults for `connect`.
    pub fn control(connect: PgConnectOptions) -> PoolOptions {
        PoolOptions {
            connect,
            application_name: "connreg-control".into(),
            max_connections: 4,
            min_connections: 0,
            acquire_timeout_ms: 5_000,
            idle_timeout_ms: 60_000,
            statement_timeout_ms: 60_000,
            call_deadline_ms: 120_000,
        }
    }

    /// Data-pool defaults for `connect`.
    pub fn data(connect: PgConnectOptions) -> PoolOptions {
        PoolOptions {
            connect,
            application_name: "connreg-data".into(),
            max_connections: 32,
            min_connections: 0,
            acquire_timeout_ms: 5_000,
            idle_timeout_ms: 60_000,
            statement_timeout_ms: 5_000,
            call_deadline_ms: 10_000,
        }
    }

    /// Parses a `postgres://` (or `postgresql://`) URL into connect
    /// options; a URL of another scheme is refused, which the parser
    /// alone would read as PostgreSQL's.
    pub fn parse_url(url: &str) -> Result<PgConnectOptions, StartError> {
        let unreadable = |reason: String| StartError::Options {
            reason: format!("unreadable connection url: {reason}"),
        };
        let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
        if !matches!(scheme.as_deref(), Some("postgres" | "postgresql")) {
            return Err(unreadable(
                "it must begin with postgres:// or postgresql://".into(),
            ));
        }
        PgConnectOptions::from_str(url).map_err(|e| unreadable(e.to_string()))
    }

    /// The role this pool logs in as.
    pub fn role(&self) -> &str {
        self.connect.get_username()
    }

    fn validate(&self, which: &'static str) -> Result<(), StartError> {
        let bad = |reason: &str| StartError::Options {
            reason: format!("{which} pool: {reason}"),
        };
        if self.max_connections == 0 {
            return Err(bad("max_connections must be at least 1"));
        }
        if self.min_connections > self.max_connections {
            return Err(bad("min_connections exceeds max_connections"));
        }
        if self.acquire_timeout_ms == 0 || self.statement_timeout_ms == 0 {
            return Err(bad("timeouts must be at least 1 ms"));
        }
        if self.call_deadline_ms == 0 || self.call_deadline_ms > CALL_DEADLINE_MS_MAX {
            return Err(StartError::Options {
                reason: format!(
                    "{which} pool: call_deadline_ms must be 1 to {CALL_DEADLINE_MS_MAX} ms"
                ),
            });
        }
        if self.application_name.is_empty() || self.application_name.len() > 63 {
            return Err(bad("application_name must be 1 to 63 bytes"));
        }
        Ok(())
    }

    /// Opens the pool with its minimum of connections (at least one, which
    /// proves the server and role answer).
    pub(crate) async fn open(
        &self,
        which: &'static str,
        health: &Health,
    ) -> Result<PgPool, StartError> {
        self.validate(which)?;
        let statement_timeout = self.statement_timeout_ms.to_string();
        let keepalive_idle = SERVER_KEEPALIVE_IDLE_S.to_string();
        let keepalive_interval = SERVER_KEEPALIVE_INTERVAL_S.to_string();
        let keepalive_count = SERVER_KEEPALIVE_COUNT.to_string();
        let check_interval = CLIENT_CHECK_INTERVAL_MS.to_string();
        let connect = self
            .connect
            .clone()
            .application_name(&self.application_name)
            .options([
                ("search_path", SCHEMA),
                ("statement_timeout", statement_timeout.as_str()),
                (
                    "idle_in_transaction_session_timeout",
                    statement_timeout.as_str(),
                ),
                ("tcp_keepalives_idle", keepalive_idle.as_str()),
                ("tcp_keepalives_interval", keepalive_interval.as_str()),
                ("tcp_keepalives_count", keepalive_count.as_str()),
                ("client_connection_check_interval", check_interval.as_str()),
            ]);
        let suspect = health.clone();
        PgPoolOptions::new()
            .max_connections(self.max_connections)
            .min_connections(self.min_connections)
            .acquire_timeout(Duration::from_millis(self.acquire_timeout_ms))
            .idle_timeout(Some(Duration::from_millis(self.idle_timeout_ms)))
            // A ping before every acquire would double the round trips of a
            // short routing transaction. Only after a call lost its
            // connection are the next ones tested (see `health`).
            .test_before_acquire(false)
            .before_acquire(move |conn, _meta| {
                let test = suspect.take_suspect();
                Box::pin(async move {
                    if test {
                        Ok(sqlx::Connection::ping(conn).await.is_ok())
                    } else {
                        Ok(true)
                    }
                })
            })
            .connect_with(connect)
            .await
            .map_err(|e| StartError::Unavailable {
                reason: format!("{which} pool: {}", super::error::db(e)),
            })
    }
}

/// Both pools of a full registry (AUTH-1). They may name one database
/// through two roles, and must log in as two roles unless
/// [`single_role_development`](PgOptions::single_role_development) says
/// otherwise.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// Installs the schema and changes catalog and admission state.
    pub control: PoolOptions,
    /// Catalog reads, routing, reservations, replica lifecycle, status.
    pub data: PoolOptions,
    /// Both pools log in as one role, and the data plane's grants are not
    /// installed: for a developer's throwaway database only. Without it,
    /// one role for both pools is refused (AUTH-1).
    pub single_role_development: bool,
}

impl PgOptions {
    /// Both pools with their defaults, on the server and database `admin`
    /// names, logging in as the two roles of `roles`.
    pub fn for_roles(admin: &PgConnectOptions, roles: &Roles) -> PgOptions {
        let login = |role: &str, password: &Option<String>| {
            let options = admin.clone().username(role);
            match password {
                Some(p) => options.password(p),
                None => options,
            }
        };
        PgOptions {
            control: PoolOptions::control(login(&roles.control, &roles.control_password)),
            data: PoolOptions::data(login(&roles.data, &roles.data_password)),
            single_role_development: false,
        }
    }

    /// Both pools through one URL and one role: the single-role
    /// development mode, named so it is never chosen by accident. The data
    /// pool can then do anything the control role can; never deploy it.
    pub fn single_role_development(url: &str) -> Result<PgOptions, StartError> {
        let connect = PoolOptions::parse_url(url)?;
        Ok(PgOptions {
            control: PoolOptions::control(connect.clone()),
            data: PoolOptions::data(connect),
            single_role_development: true,
        })
    }

    /// Both pools with their defaults, from one URL per role.
    pub fn from_urls(control_url: &str, data_url: &str) -> Result<PgOptions, StartError> {
        Ok(PgOptions {
            control: PoolOptions::control(PoolOptions::parse_url(control_url)?),
            data: PoolOptions::data(PoolOptions::parse_url(data_url)?),
            single_role_development: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data() -> PoolOptions {
        let connect = PoolOptions::parse_url("postgres://connreg_data@db.example:5433/fleet")
            .expect("a readable url");
        PoolOptions::data(connect)
    }

    fn refused(options: &PoolOptions) -> String {
        match options.validate("data") {
            Err(StartError::Options { reason }) => reason,
            other => panic!("{options:?} was not refused as options: {other:?}"),
        }
    }

    // spec: AUTH-1
    #[test]
    fn a_url_names_the_server_database_and_role_of_a_pool() {
        let options = data();
        let long = PoolOptions::parse_url("PostgreSQL://u@h/d").expect("either scheme, any case");
        assert_eq!((long.get_host(), long.get_username()), ("h", "u"));
        assert_eq!(options.connect.get_host(), "db.example");
        assert_eq!(options.connect.get_port(), 5433);
        assert_eq!(options.connect.get_database(), Some("fleet"));
        assert_eq!(options.role(), "connreg_data");

        let both = PgOptions::from_urls(
            "postgres://connreg_control@db.example/fleet",
            "postgres://connreg_data@db.example/fleet",
        )
        .expect("two readable urls");
        assert_eq!(
            (both.control.role(), both.data.role()),
            ("connreg_control", "connreg_data")
        );
        assert_eq!(both.control.application_name, "connreg-control");
        assert_eq!(both.data.application_name, "connreg-data");
        assert!(!both.single_role_development);
        let one = PgOptions::single_role_development("postgres://dev@localhost/dev")
            .expect("a readable url");
        assert!(one.single_role_development);
        assert_eq!((one.control.role(), one.data.role()), ("dev", "dev"));
    }

    #[test]
    fn an_unreadable_url_is_refused_with_the_reason() {
        for url in [
            "postgres://db.example:not-a-port/fleet",
            "mysql://db.example/fleet",
            "db.example/fleet",
            "",
        ] {
            match PoolOptions::parse_url(url) {
                Err(StartError::Options { reason }) => {
                    assert!(reason.starts_with("unreadable connection url"), "{reason}");
                }
                Err(other) => panic!("{url}: {other}"),
                Ok(o) => panic!("{url} was read as {:?}", o.get_host()),
            }
            assert!(PgOptions::from_urls(url, "postgres://d@h/db").is_err());
            assert!(PgOptions::from_urls("postgres://c@h/db", url).is_err());
            assert!(PgOptions::single_role_development(url).is_err());
        }
    }

    #[test]
    fn the_debug_form_names_the_server_and_role_never_the_password() {
        let mut options = data();
        options.connect = options.connect.password("s3cret-pass");
        let shown = format!("{options:?}");
        for part in [
            "db.example",
            "5433",
            "fleet",
            "connreg_data",
            "connreg-data",
        ] {
            assert!(shown.contains(part), "{part} missing from {shown}");
        }
        assert!(!shown.contains("s3cret-pass"), "{shown}");
    }

    #[test]
    fn a_pool_outside_its_bounds_is_refused_and_its_bounds_are_accepted() {
        let defaults = [data(), PoolOptions::control(data().connect)];
        for options in &defaults {
            assert!(options.validate("data").is_ok(), "{options:?}");
        }
        let mut edge = data();
        edge.min_connections = edge.max_connections;
        edge.max_connections = 1;
        edge.min_connections = 1;
        edge.acquire_timeout_ms = 1;
        edge.statement_timeout_ms = 1;
        edge.call_deadline_ms = CALL_DEADLINE_MS_MAX;
        edge.application_name = "a".repeat(63);
        assert!(edge.validate("data").is_ok(), "{edge:?}");
        edge.call_deadline_ms = 1;
        edge.application_name = "a".into();
        assert!(edge.validate("data").is_ok(), "{edge:?}");

        type Change = fn(&mut PoolOptions);
        let cases: [(Change, &str); 8] = [
            (
                |o| o.max_connections = 0,
                "max_connections must be at least 1",
            ),
            (
                |o| o.min_connections = o.max_connections + 1,
                "min_connections exceeds max_connections",
            ),
            (
                |o| o.acquire_timeout_ms = 0,
                "timeouts must be at least 1 ms",
            ),
            (
                |o| o.statement_timeout_ms = 0,
                "timeouts must be at least 1 ms",
            ),
            (|o| o.call_deadline_ms = 0, "call_deadline_ms must be 1 to"),
            (
                |o| o.call_deadline_ms = CALL_DEADLINE_MS_MAX + 1,
                "call_deadline_ms must be 1 to",
            ),
            (
                |o| o.application_name.clear(),
                "application_name must be 1 to 63 bytes",
            ),
            (
                |o| o.application_name = "a".repeat(64),
                "application_name must be 1 to 63 bytes",
            ),
        ];
        for (change, expected) in cases {
            let mut options = data();
            change(&mut options);
            let reason = refused(&options);
            assert!(reason.starts_with("data pool: "), "{reason}");
            assert!(reason.contains(expected), "{reason} should say {expected}");
        }
    }
}
