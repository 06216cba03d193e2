//! One qualification, start to end: open the backend, build the fleet,
//! warm up, run the clients, check the store, weigh the thresholds.
//!
//! The registry's own time is a [`ManualClock`] that stands still for the
//! whole run (LEASE-4): no lease ends while the run measures, so lease
//! expiry, which the simulator covers, never turns into `no_capacity` here.
//! Wall-clock time is used only to time calls and to end runs by duration.

use std::sync::Arc;
use std::time::Instant;

use connreg::contracts::Registry;
use connreg::postgres::PgRegistry;
use connreg::postgres::testing::TestRegistry;
use connreg::{
    CatalogQuery, Inspect, ManualClock, MemoryRegistry, Reader, RegistryConfig, Timestamp,
};

use super::check::{Violations, check_store};
use super::contract::{BackendKind, Contract};
use super::error::QualifyError;
use super::fleet::{self, FleetPlan};
use super::limits::PG_DATA_CONNECTIONS_MAX;
use super::report::{
    BackendFacts, EnvironmentFacts, ErrorCount, FleetFacts, InvariantFacts, LoadFacts,
    MachineFacts, Measured, OperationFigures, REPORT_FORMAT, Report, evaluate, overall,
};
use super::stats::{Operation, Tally};
use super::workload::{self, Shared};

/// Where the registry's clock stands: far from zero, like the fixtures'.
pub const CLOCK_START_MS: u64 = 1_000_000;

/// Runs `contract` on `backend`; `file` names the contract in the report,
/// `progress` hears one line per phase.
pub async fn qualify(
    contract: &Contract,
    backend: BackendKind,
    file: &str,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<Report, QualifyError> {
    let clock = ManualClock::new(Timestamp(CLOCK_START_MS));
    let config = contract.registry.config();
    match backend {
        BackendKind::Memory => {
            let registry =
                MemoryRegistry::new(clock, config).map_err(|e| QualifyError::Backend {
                    backend,
                    reason: e.to_string(),
                })?;
            let facts = BackendFacts {
                kind: backend,
                server_source: None,
                data_connections: None,
            };
            run_on(registry, facts, contract, file, progress).await
        }
        BackendKind::Postgres => {
            progress("opening a fresh PostgreSQL database (connreg-pgtest)");
            let (registry, facts) = open_postgres(clock, config, contract.load.clients).await?;
            let result = run_on(registry.clone(), facts, contract, file, progress).await;
            registry.close().await;
            result
        }
    }
}

/// A registry on a fresh test database, with one data connection per
/// client up to [`PG_DATA_CONNECTIONS_MAX`].
async fn open_postgres(
    clock: ManualClock,
    config: RegistryConfig,
    clients: u32,
) -> Result<(PgRegistry, BackendFacts), QualifyError> {
    let unavailable = |reason: String| QualifyError::Backend {
        backend: BackendKind::Postgres,
        reason,
    };
    let test = TestRegistry::create()
        .await
        .map_err(|e| unavailable(e.to_string()))?;
    let server_source = test
        .database()
        .map(|d| d.server().source().as_str().to_string());
    let mut options = test.options();
    let data_connections = clients.min(PG_DATA_CONNECTIONS_MAX);
    options.data.max_connections = data_connections;
    let registry = PgRegistry::connect(options, clock, config)
        .await
        .map_err(|e| unavailable(e.to_string()))?
        .keep_alive(test);
    Ok((
        registry,
        BackendFacts {
            kind: BackendKind::Postgres,
            server_source,
            data_connections: Some(data_connections),
        },
    ))
}

async fn run_on<R>(
    registry: R,
    backend: BackendFacts,
    contract: &Contract,
    file: &str,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<Report, QualifyError>
where
    R: Registry + Inspect + Clone + 'static,
{
    let plan = Arc::new(FleetPlan::new(&contract.fleet));
    progress(&format!(
        "setting up {} replicas and {} bindings on {}",
        plan.replicas.len(),
        contract.fleet.bindings(),
        backend.kind
    ));
    let setup_started = Instant::now();
    let published_at = fleet::build(&registry, &plan).await?;
    let setup_ms = setup_started.elapsed().as_millis() as u64;

    // Unmeasured: one catalog read per client opens the connections the
    // clients will use, so connection setup does not count as latency.
    let mut warm = tokio::task::JoinSet::new();
    for t in 0..contract.load.clients as usize {
        let registry = registry.clone();
        let tenant = plan.tenants[t % plan.tenants.len()].clone();
        warm.spawn(async move {
            let _ = registry
                .catalog_page(CatalogQuery::first_page(Reader::Tenant(tenant)))
                .await;
        });
    }
    while warm.join_next().await.is_some() {}

    progress(&format!(
        "running {} clients{}",
        contract.load.clients,
        match (contract.load.duration_ms, contract.load.operations) {
            (Some(ms), _) => format!(" for {:.1} s", ms as f64 / 1000.0),
            (None, Some(n)) => format!(" for {n} operations"),
            (None, None) => String::new(),
        }
    ));
    let start = Instant::now();
    let shared = Arc::new(Shared::new(registry.clone(), plan.clone(), contract, start));
    let mut clients = tokio::task::JoinSet::new();
    for index in 0..contract.load.clients {
        clients.spawn(workload::client(shared.clone(), index));
    }
    let mut tally = Tally::default();
    let mut tracked = Vec::new();
    while let Some(joined) = clients.join_next().await {
        let result = joined.map_err(|e| QualifyError::Run {
            reason: format!("a client failed: {e}"),
        })?;
        tally.merge(&result.tally);
        tracked.extend(result.tracked);
    }
    let elapsed = start.elapsed();
    let stopped_by = shared.stop_reason();
    drop(shared);

    progress("checking invariants over a full inspection");
    let inspect_failed = |e: connreg::Error| QualifyError::Run {
        reason: format!("the end inspection failed: {e}"),
    };
    let snapshot = registry.inspect().await.map_err(inspect_failed)?;
    let status = registry.status().await.map_err(inspect_failed)?;
    let mut violations = Violations::default();
    violations.merge(&tally.violations);
    let checked = check_store(&snapshot, &status, published_at, &tracked, &mut violations);

    let measured = measure(&tally, elapsed.as_secs_f64(), stopped_by);
    let thresholds = evaluate(&contract.thresholds, &measured, violations.total());
    let verdict = overall(&thresholds);
    let f = &contract.fleet;
    Ok(Report {
        format: REPORT_FORMAT.into(),
        environment: EnvironmentFacts {
            name: contract.name.clone(),
            description: contract.description.clone(),
            file: file.into(),
        },
        backend,
        machine: MachineFacts::here(),
        fleet: FleetFacts {
            tenants: u64::from(f.tenants),
            capabilities: u64::from(f.capabilities),
            bindings: f.bindings(),
            instances: f.instances(),
            replicas: f.replicas(),
            scopes: f.scopes(),
            catalog_revision: published_at.0,
            setup_ms,
        },
        load: LoadFacts {
            clients: contract.load.clients,
            duration_ms: contract.load.duration_ms,
            operations: contract.load.operations,
            actions_max: contract.load.actions_budget(),
            seed: contract.seed,
        },
        measured,
        invariants: InvariantFacts {
            checked,
            violations: violations.total(),
            by_kind: violations
                .counts()
                .iter()
                .map(|(k, n)| (k.as_str().to_string(), *n))
                .collect(),
            details: violations.details().to_vec(),
        },
        thresholds,
        verdict,
    })
}

/// The figures of a merged tally over `secs` seconds.
fn measure(tally: &Tally, secs: f64, stopped_by: workload::StopReason) -> Measured {
    let secs = secs.max(1e-9);
    let operations = tally.operations();
    let resolves_ok = tally.op(Operation::ResolveNew).ok + tally.op(Operation::ResolveDuplicate).ok;
    let new = tally.op(Operation::ResolveNew).count;
    let no_capacity = tally
        .errors
        .get(&(Operation::ResolveNew, "no_capacity"))
        .copied()
        .unwrap_or(0);
    let unexpected = tally.unexpected_errors();
    let share = |n: u64, of: u64| if of == 0 { 0.0 } else { n as f64 / of as f64 };
    Measured {
        elapsed_ms: secs * 1000.0,
        stopped_by,
        operations,
        operations_per_s: operations as f64 / secs,
        resolves_ok,
        resolves_per_s: resolves_ok as f64 / secs,
        resolve_latency: tally.resolve_latency().summary(),
        by_operation: Operation::ALL
            .iter()
            .map(|op| {
                let t = tally.op(*op);
                (
                    op.as_str().to_string(),
                    OperationFigures {
                        count: t.count,
                        ok: t.ok,
                        latency: t.latency.summary(),
                    },
                )
            })
            .collect(),
        resolves_created: tally.resolves_created,
        resolves_existing: tally.resolves_existing,
        settlements_released: tally.settlements_released,
        heartbeats_ignored: tally.heartbeats_ignored,
        mix_substitutions: tally.substitutions,
        errors: tally
            .errors
            .iter()
            .map(|((op, kind), n)| ErrorCount {
                operation: op.as_str().into(),
                kind: (*kind).into(),
                expected: op.expects(kind),
                count: *n,
            })
            .collect(),
        unexpected_errors: unexpected,
        unexpected_error_rate: share(unexpected, operations),
        no_capacity_rate: share(no_capacity, new),
    }
}
