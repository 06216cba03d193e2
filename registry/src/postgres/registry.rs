//! The two handles: [`PgRegistry`] (both planes) and [`PgDataPlane`]
//! (data plane only, AUTH-3), and their contract implementations.

use std::sync::Arc;

use sqlx::PgPool;

use super::config::{PgOptions, PoolOptions};
use super::data::{Calls, Data};
use super::error::StartError;
use super::health::Health;
use super::routing::ReplicaReads;
use super::{catalog, lifecycle, setup, status};
use crate::catalog::{CatalogPage, CatalogQuery};
use crate::clock::Clock;
use crate::contracts::{CatalogAdmin, CatalogRead, Operations, ReplicaLifecycle, Routing, Status};
use crate::error::Result;
use crate::id::{ActionId, ReplicaId, TenantId};
use crate::inspect::{Inspect, StoreSnapshot};
use crate::records::{Replica, Revision, RouteRecord};
use crate::request::{
    AuditEntry, AuditPage, AuditQuery, CircuitCloseParams, HeartbeatOutcome, HeartbeatParams,
    MaintainParams, Maintained, Publication, RegisterParams, RegistryConfig, Resolved,
    RouteRequest, SettleParams, Settled, StatusReport,
};

/// A registry on PostgreSQL with both pools: every contract (AUTH-1).
/// Clones share the pools.
#[derive(Clone)]
pub struct PgRegistry {
    data: Data,
    control: PgPool,
    control_calls: Calls,
    /// The role the data pool logs in as.
    #[cfg_attr(not(feature = "plant"), allow(dead_code))]
    data_role: String,
    /// The role the control pool logs in as: the authority of its operator
    /// acts (AUTH-7).
    control_role: String,
    /// Whatever must live as long as the registry, such as a test database.
    guard: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

impl std::fmt::Debug for PgRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgRegistry")
            .field("config", &self.data.config)
            .finish_non_exhaustive()
    }
}

impl PgRegistry {
    /// Opens both pools, installs or upgrades the schema through the control
    /// pool (sqlx's migrator, under its own lock), grants the data role its
    /// privileges, and checks the schema version through the data pool.
    ///
    /// The control role must own the `connreg` schema (see
    /// [`create_roles`](super::create_roles)).
    pub async fn connect(
        options: PgOptions,
        clock: impl Clock,
        config: RegistryConfig,
    ) -> std::result::Result<PgRegistry, StartError> {
        config.validate().map_err(|e| StartError::Options {
            reason: e.to_string(),
        })?;
        let one_role = options.control.role() == options.data.role();
        if one_role && !options.single_role_development {
            return Err(StartError::Options {
                reason: format!(
                    "AUTH-1: the control and data pools both log in as {:?}, which would give \
                     the data plane the control role's powers; give the data pool its own \
                     role (postgres::create_roles), or choose \
                     PgOptions::single_role_development explicitly",
                    options.control.role()
                ),
            });
        }
        if !one_role && options.single_role_development {
            return Err(StartError::Options {
                reason: "single_role_development names one role for both pools, but they \
                         log in as two"
                    .into(),
            });
        }
        let control_health = Health::default();
        let data_health = Health::default();
        let control = options.control.open("control", &control_health).await?;
        let data = match options.data.open("data", &data_health).await {
            Ok(data) => data,
            Err(e) => {
                close_pool(&control).await;
                return Err(e);
            }
        };
        let started = async {
            setup::install(&control, options.control.role(), options.data.role()).await?;
            setup::verify(&data).await
        }
        .await;
        if let Err(e) = started {
            close_pool(&control).await;
            close_pool(&data).await;
            return Err(e);
        }
        Ok(PgRegistry {
            data: Data {
                pool: data,
                clock: Arc::new(clock),
                config,
                calls: Calls::of(&options.data, data_health),
                #[cfg(feature = "plant")]
                plant: None,
            },
            control,
            control_calls: Calls::of(&options.control, control_health),
            data_role: options.data.role().to_owned(),
            control_role: options.control.role().to_owned(),
            guard: None,
        })
    }

    /// Keeps `guard` alive until the last clone of this registry drops: for
    /// a test or bench database that should go away with the store.
    pub fn keep_alive(mut self, guard: impl Send + Sync + 'static) -> PgRegistry {
        self.guard = Some(Arc::new(guard));
        self
    }

    /// The same registry with one planted bug switched on; a plant that
    /// lives in the database is installed through the control pool.
    #[cfg(feature = "plant")]
    pub async fn with_plant(
        mut self,
        plant: crate::plant::PgPlant,
    ) -> std::result::Result<PgRegistry, StartError> {
        setup::install_plant(&self.control, plant, &self.data_role).await?;
        self.data.plant = Some(plant);
        Ok(self)
    }

    /// The role the control pool logs in as: operator acts are recorded
    /// under it (AUTH-7).
    pub fn control_role(&self) -> &str {
        &self.control_role
    }

    /// A handle on the same data pool that cannot publish.
    pub fn data_plane(&self) -> PgDataPlane {
        PgDataPlane {
            data: self.data.clone(),
        }
    }

    /// Sizes of both pools now.
    pub fn pool_status(&self) -> PoolStatus {
        PoolStatus {
            control: PoolSize::of(&self.control),
            data: PoolSize::of(&self.data.pool),
        }
    }

    /// Rows of the replicas table one resolve of `request` reads, by
    /// PostgreSQL's own per-transaction statistics, in a transaction that
    /// is rolled back. Evidence for AUTH-4 tests; not a serving path.
    #[doc(hidden)]
    pub async fn resolve_replica_reads(&self, request: &RouteRequest) -> Result<ReplicaReads> {
        self.data.resolve_replica_reads(request).await
    }

    /// Closes both pools, waiting for connections in use to return.
    pub async fn close(&self) {
        close_pool(&self.control).await;
        close_pool(&self.data.pool).await;
    }
}

/// A data-plane-only registry (AUTH-3): catalog reads, routing, replica
/// lifecycle and status through the data role. It holds no control pool and
/// cannot publish: it does not implement [`CatalogAdmin`].
#[derive(Clone)]
pub struct PgDataPlane {
    data: Data,
}

impl std::fmt::Debug for PgDataPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgDataPlane")
            .field("config", &self.data.config)
            .finish_non_exhaustive()
    }
}

impl PgDataPlane {
    /// Opens the data pool and refuses to start unless the schema version
    /// installed is [`SCHEMA_VERSION`](super::SCHEMA_VERSION)
    /// ([`StartError::SchemaMismatch`]). Installs nothing.
    pub async fn connect(
        data: PoolOptions,
        clock: impl Clock,
        config: RegistryConfig,
    ) -> std::result::Result<PgDataPlane, StartError> {
        config.validate().map_err(|e| StartError::Options {
            reason: e.to_string(),
        })?;
        let health = Health::default();
        let pool = data.open("data", &health).await?;
        if let Err(e) = setup::verify(&pool).await {
            close_pool(&pool).await;
            return Err(e);
        }
        Ok(PgDataPlane {
            data: Data {
                pool,
                clock: Arc::new(clock),
                config,
                calls: Calls::of(&data, health),
                #[cfg(feature = "plant")]
                plant: None,
            },
        })
    }

    /// Size of the data pool now.
    pub fn pool_status(&self) -> PoolSize {
        PoolSize::of(&self.data.pool)
    }

    /// Closes the pool, waiting for connections in use to return.
    pub async fn close(&self) {
        close_pool(&self.data.pool).await;
    }
}

/// Most rounds [`close_pool`] closes connections that came back late.
const CLOSE_ROUNDS_MAX: u32 = 100;

/// Closes `pool` until no connection is left. sqlx's `close` can miss a
/// connection whose return to the pool was still in flight (it is then
/// parked idle in the closed pool); closing again catches it.
async fn close_pool(pool: &PgPool) {
    for _ in 0..CLOSE_ROUNDS_MAX {
        pool.close().await;
        if pool.size() == 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// Connections of one pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolSize {
    /// Open connections, idle or in use.
    pub open: u32,
    /// Open and idle.
    pub idle: u32,
    /// The configured maximum.
    pub max: u32,
}

impl PoolSize {
    fn of(pool: &PgPool) -> PoolSize {
        PoolSize {
            open: pool.size(),
            idle: u32::try_from(pool.num_idle()).unwrap_or(u32::MAX),
            max: pool.options().get_max_connections(),
        }
    }
}

/// Connections of both pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStatus {
    /// The control pool.
    pub control: PoolSize,
    /// The data pool.
    pub data: PoolSize,
}

impl Operations for PgRegistry {
    async fn circuit_close(&self, params: CircuitCloseParams) -> Result<AuditEntry> {
        self.control_calls
            .within(lifecycle::circuit_close(
                &self.control,
                self.data.now(),
                params,
            ))
            .await
    }

    async fn audit_page(&self, query: AuditQuery) -> Result<AuditPage> {
        self.control_calls
            .within(lifecycle::audit_page(&self.control, query))
            .await
    }
}

/// Reads every table, so through the control pool (AUTH-6): for checkers
/// and tests, not a serving path.
impl Inspect for PgRegistry {
    async fn inspect(&self) -> Result<StoreSnapshot> {
        self.control_calls
            .within(status::inspect(&self.control))
            .await
    }
}

impl CatalogAdmin for PgRegistry {
    async fn catalog_publish(&self, publication: Publication) -> Result<Revision> {
        self.control_calls
            .within(catalog::publish(&self.control, publication))
            .await
    }
}

/// The data-plane contracts, for both handles, through their `data`.
macro_rules! data_plane_contracts {
    ($ty:ty) => {
        impl CatalogRead for $ty {
            async fn catalog_page(&self, query: CatalogQuery) -> Result<CatalogPage> {
                self.data.calls.within(self.data.catalog_page(query)).await
            }
            async fn catalog_revision(&self) -> Result<Revision> {
                self.data.calls.within(self.data.catalog_revision()).await
            }
        }

        impl Routing for $ty {
            async fn route_resolve(&self, request: RouteRequest) -> Result<Resolved> {
                self.data
                    .calls
                    .within(self.data.route_resolve(request))
                    .await
            }
            async fn route_get(
                &self,
                tenant: TenantId,
                action: ActionId,
            ) -> Result<Option<RouteRecord>> {
                self.data
                    .calls
                    .within(self.data.route_get(tenant, action))
                    .await
            }
            async fn route_settle(&self, params: SettleParams) -> Result<Settled> {
                self.data.calls.within(self.data.route_settle(params)).await
            }
        }

        impl ReplicaLifecycle for $ty {
            async fn replica_register(&self, params: RegisterParams) -> Result<Replica> {
                self.data
                    .calls
                    .within(self.data.replica_register(params))
                    .await
            }
            async fn replica_heartbeat(&self, params: HeartbeatParams) -> Result<HeartbeatOutcome> {
                self.data
                    .calls
                    .within(self.data.replica_heartbeat(params))
                    .await
            }
            async fn replica_drain(&self, replica: ReplicaId) -> Result<Replica> {
                self.data
                    .calls
                    .within(self.data.replica_drain(replica))
                    .await
            }
            async fn replica_get(&self, replica: ReplicaId) -> Result<Option<Replica>> {
                self.data.calls.within(self.data.replica_get(replica)).await
            }
            async fn lease_maintain(&self, params: MaintainParams) -> Result<Maintained> {
                self.data
                    .calls
                    .within(self.data.lease_maintain(params))
                    .await
            }
        }

        impl Status for $ty {
            async fn status(&self) -> Result<StatusReport> {
                self.data.calls.within(self.data.status()).await
            }
        }
    };
}

data_plane_contracts!(PgRegistry);
data_plane_contracts!(PgDataPlane);
