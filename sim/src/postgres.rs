//! The PostgreSQL tier (SIM-4): the same scenarios, hosts, faults and
//! checkers against the registry's PostgreSQL backend on a real server,
//! plus the faults only a real database has.
//!
//! Every run gets a fresh database with its own control and data roles
//! (`connreg::postgres::testing::TestRegistry`, which finds or starts a
//! server through connreg-pgtest and fails, never skips, without one). Both
//! of the registry's pools connect through a fault proxy in this process
//! (`connreg_pgtest::proxy::FaultProxy`), so a scenario can cut, stall or
//! terminate its connections (`db_cut`, `db_stall`, `db_terminate`). A
//! scenario with a `db_restart` runs on a server of its own
//! (`connreg_pgtest::LocalCluster`): a restart ends every session of its
//! server, and the server the process shares belongs to a sweep's other
//! jobs and to other tests too. A scenario with a `db_failover` runs on a
//! primary and a streaming standby of its own
//! (`connreg_pgtest::ReplicatedPair`, synchronous or not as `[registry]
//! database_replication` says); the failover stops the primary
//! immediately, promotes the standby and moves the proxy to it, as a
//! virtual IP or a pooler would, so the registry's pools reconnect to the
//! new primary by the same address.
//!
//! The store is called *offloaded*: backend calls run on a real
//! multi-threaded Tokio runtime and race for real (the calls of one action
//! too), and the world waits for them after every simulated step, so the
//! registry's injected clock (still the simulated one) never runs ahead of
//! the database. Each call's answer carries its commit sequence, and the
//! world writes a step's answers in commit order: the trace is
//! `"commit_ordered": true` and every checker runs, the order-sensitive
//! ones included. The run is seeded but not byte-deterministic
//! (`"deterministic": false`).
//!
//! Plants in the store exist only in the in-memory backend; plants in the
//! hosts run here too.

use std::rc::Rc;

use connreg::ManualClock;

use crate::fleet::FleetPlan;
use crate::run::RunError;
use crate::scenario::Scenario;
use crate::world::{RunReport, WorldParams};

/// Worker threads of the runtime that runs the backend calls.
#[cfg(feature = "postgres")]
const BACKEND_WORKER_THREADS: usize = 2;

/// Runs `scenario` against a fresh PostgreSQL database.
#[cfg(feature = "postgres")]
pub(crate) fn run(
    scenario: Rc<Scenario>,
    plan: &FleetPlan,
    clock: ManualClock,
    mut params: WorldParams,
) -> Result<RunReport, RunError> {
    use crate::backend::Store;
    use crate::world::simulate;

    let own = if scenario.fails_over_database() {
        Some(faulty::Own::Pair(start_pair(&scenario)?))
    } else if scenario.restarts_database() {
        Some(faulty::Own::Cluster(start_own(&scenario)?))
    } else {
        None
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(BACKEND_WORKER_THREADS)
        .enable_all()
        .build()
        .map_err(|e| RunError::Backend(format!("backend runtime: {e}")))?;
    let (registry, database) = runtime.block_on(faulty::open(
        clock.clone(),
        plan.config.clone(),
        runtime.handle().clone(),
        own,
    ))?;
    params.database = Some(Box::new(database));
    let store = Store::offloaded(registry, runtime.handle().clone());
    // The last clone of the registry (and with it the test database) goes
    // when the world ends, outside any async context.
    let report = simulate(scenario, store, clock, params).map_err(RunError::Input);
    runtime.shutdown_timeout(std::time::Duration::from_secs(10));
    report
}

/// Refuses a run that must start servers of its own (`what` says why)
/// where the servers come from a URL or Docker.
#[cfg(feature = "postgres")]
fn own_servers_allowed(scenario: &Scenario, what: &str) -> Result<(), RunError> {
    use connreg_pgtest::{DATABASE_URL_VAR, FORCE_SOURCE_VAR};

    let forced = std::env::var(FORCE_SOURCE_VAR).unwrap_or_default();
    if std::env::var_os(DATABASE_URL_VAR).is_some() || matches!(forced.as_str(), "url" | "docker") {
        return Err(RunError::Input(format!(
            "scenario {}: {what}, which the run starts itself from the installed PostgreSQL; a server given by URL or run by Docker ({DATABASE_URL_VAR} or {FORCE_SOURCE_VAR}={forced}) is never used for it",
            scenario.scenario.name
        )));
    }
    Ok(())
}

/// A server of the run's own for a scenario that restarts it: a restart
/// ends every session of its server, so it must not be the one the
/// process's other runs share (a sweep's other jobs, other tests).
#[cfg(feature = "postgres")]
fn start_own(scenario: &Scenario) -> Result<connreg_pgtest::LocalCluster, RunError> {
    own_servers_allowed(scenario, "db_restart restarts a server")?;
    connreg_pgtest::LocalCluster::start(connreg_pgtest::LocalOptions::default())
        .map_err(|e| RunError::Backend(format!("a server of its own for db_restart: {e}")))
}

/// A primary and a standby for a scenario that fails over. A server given
/// by URL (or forced to Docker) is never failed over: the run is refused.
#[cfg(feature = "postgres")]
fn start_pair(scenario: &Scenario) -> Result<connreg_pgtest::ReplicatedPair, RunError> {
    use connreg_pgtest::{LocalOptions, Replication};

    own_servers_allowed(
        scenario,
        "db_failover stops a primary and promotes its standby",
    )?;
    let replication = match scenario.registry.database_replication {
        crate::scenario::DatabaseReplication::Synchronous => Replication::Synchronous,
        crate::scenario::DatabaseReplication::Asynchronous => Replication::Asynchronous,
    };
    connreg_pgtest::ReplicatedPair::start(
        LocalOptions {
            fsync: true,
            ..LocalOptions::default()
        },
        replication,
    )
    .map_err(|e| RunError::Backend(format!("a primary and a standby for db_failover: {e}")))
}

/// Without the `postgres` feature there is no PostgreSQL tier.
#[cfg(not(feature = "postgres"))]
pub(crate) fn run(
    _scenario: Rc<Scenario>,
    _plan: &FleetPlan,
    _clock: ManualClock,
    _params: WorldParams,
) -> Result<RunReport, RunError> {
    Err(RunError::Backend(
        "this build has no PostgreSQL tier: build connreg-sim with its `postgres` feature".into(),
    ))
}

/// The registry behind a fault proxy, and the database faults.
#[cfg(feature = "postgres")]
mod faulty {
    use connreg::postgres::testing::TestRegistry;
    use connreg::postgres::{PgConnectOptions, PgRegistry};
    use connreg::{ManualClock, RegistryConfig};
    use connreg_pgtest::proxy::FaultProxy;
    use sqlx::Connection;

    use crate::faults::Database;
    use crate::run::RunError;

    /// Servers a run starts for itself, for the faults that reach past
    /// its own database.
    pub(super) enum Own {
        /// A primary and a standby, for `db_failover`.
        Pair(connreg_pgtest::ReplicatedPair),
        /// One server, for `db_restart`.
        Cluster(connreg_pgtest::LocalCluster),
    }

    /// The database of one run, as the world's database faults reach it.
    pub(super) struct PgDatabase {
        proxy: FaultProxy,
        /// The test database's superuser, connected directly (not through
        /// the proxy), for `pg_terminate_backend`.
        admin: PgConnectOptions,
        /// The registry's two roles, whose sessions `terminate` ends.
        roles: Vec<String>,
        /// The run's own server, which `db_restart` restarts.
        server: Option<connreg_pgtest::LocalCluster>,
        /// The primary and standby `db_failover` switches.
        pair: Option<std::sync::Arc<connreg_pgtest::ReplicatedPair>>,
        handle: tokio::runtime::Handle,
    }

    /// A fresh test database, and a registry whose pools connect through a
    /// fault proxy in front of its server.
    pub(super) async fn open(
        clock: ManualClock,
        config: RegistryConfig,
        handle: tokio::runtime::Handle,
        own: Option<Own>,
    ) -> Result<(PgRegistry, PgDatabase), RunError> {
        let backend = |e: &dyn std::fmt::Display| RunError::Backend(e.to_string());
        let local = |port: u16| std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let (test, server, pair, upstream) = match own {
            Some(Own::Pair(pair)) => {
                let test = TestRegistry::create_at(&pair.primary_url())
                    .await
                    .map_err(|e| backend(&e))?;
                let upstream = local(pair.primary_port());
                (test, None, Some(std::sync::Arc::new(pair)), upstream)
            }
            Some(Own::Cluster(cluster)) => {
                let test = TestRegistry::create_at(cluster.url())
                    .await
                    .map_err(|e| backend(&e))?;
                let upstream = local(cluster.port());
                (test, Some(cluster), None, upstream)
            }
            None => {
                let test = TestRegistry::create().await.map_err(|e| backend(&e))?;
                let server = test
                    .database()
                    .map(|d| d.server())
                    .ok_or_else(|| RunError::Backend("the test database has no server".into()))?;
                let upstream = tokio::net::lookup_host((server.host(), server.port()))
                    .await
                    .map_err(|e| backend(&format!("{}:{}: {e}", server.host(), server.port())))?
                    .next()
                    .ok_or_else(|| {
                        RunError::Backend(format!("{} has no address", server.host()))
                    })?;
                (test, None, None, upstream)
            }
        };
        let proxy = FaultProxy::start(upstream)
            .await
            .map_err(|e| backend(&format!("fault proxy: {e}")))?;
        let at = proxy.local_addr();
        let host = at.ip().to_string();
        let mut options = test.options();
        for pool in [&mut options.data, &mut options.control] {
            pool.connect = pool.connect.clone().host(&host).port(at.port());
        }
        let admin = test.admin.clone();
        let roles = vec![test.roles.control.clone(), test.roles.data.clone()];
        let registry = PgRegistry::connect(options, clock, config)
            .await
            .map_err(|e| backend(&e))?;
        // A SQL mutant named by CONNREG_SQL_MUTANT (docs/TESTING.md) goes
        // into this run's database too, so a scenario can be shown to
        // catch it.
        if let Some(mutant) =
            connreg::postgres::mutants::mutant_from_env().map_err(|e| backend(&e))?
        {
            connreg::postgres::mutants::apply(&admin, mutant)
                .await
                .map_err(|e| backend(&e))?;
        }
        let registry = registry.keep_alive(test);
        Ok((
            registry,
            PgDatabase {
                proxy,
                admin,
                roles,
                server,
                pair,
                handle,
            },
        ))
    }

    impl Database for PgDatabase {
        fn cut_all(&self) -> usize {
            self.proxy.cut_all()
        }

        fn cut_next_commit(&self) {
            self.proxy.cut_next_commit();
        }

        fn commit_cut_armed(&self) -> bool {
            self.proxy.commit_cut_armed()
        }

        fn stall(&self, ms: u64) {
            self.proxy.stall(std::time::Duration::from_millis(ms));
        }

        fn terminate(&self) -> Result<u64, String> {
            // After a failover the sessions to end are on the promoted
            // server.
            let admin = match &self.pair {
                Some(pair) => self.admin.clone().port(pair.primary_port()),
                None => self.admin.clone(),
            };
            let roles = self.roles.clone();
            self.handle.block_on(async move {
                let mut conn = sqlx::PgConnection::connect_with(&admin)
                    .await
                    .map_err(|e| e.to_string())?;
                // The victims are chosen first (MATERIALIZED), so the
                // planner cannot terminate a session before filtering it.
                let ended: i64 = sqlx::query_scalar(
                    "WITH victims AS MATERIALIZED ( \
                       SELECT pid FROM pg_stat_activity \
                       WHERE datname = current_database() AND usename = ANY($1) \
                       AND pid <> pg_backend_pid()) \
                     SELECT count(*) FROM victims WHERE pg_terminate_backend(pid)",
                )
                .bind(roles)
                .fetch_one(&mut conn)
                .await
                .map_err(|e| e.to_string())?;
                let _ = conn.close().await;
                Ok(u64::try_from(ended).unwrap_or(0))
            })
        }

        fn restart(&self) -> Result<(), String> {
            // Blocks for about a second; no call is in flight meanwhile
            // except the step's own, which the restart is meant to break.
            match &self.server {
                Some(server) => server.restart_immediate().map_err(|e| e.to_string()),
                None => Err("db_restart needs the run's own server".into()),
            }
        }

        fn fail_over(&self) -> Result<u64, String> {
            let Some(pair) = &self.pair else {
                return Err("db_failover needs the run's own primary and standby".into());
            };
            // Blocks for the stop and the promotion (about a second); the
            // step's calls in flight fail with their connections.
            let without = pair.fail_over().map_err(|e| e.to_string())?;
            let to = std::net::SocketAddr::from(([127, 0, 0, 1], pair.primary_port()));
            self.proxy.switch_upstream(to);
            Ok(u64::try_from(without.as_millis()).unwrap_or(u64::MAX))
        }

        fn detach_standby(&self) -> Result<(), String> {
            let Some(pair) = &self.pair else {
                return Err("detach_ms needs the run's own primary and standby".into());
            };
            pair.detach_standby().map_err(|e| e.to_string())
        }
    }
}
