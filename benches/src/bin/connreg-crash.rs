//! `connreg-crash`: crash qualification of the PostgreSQL backend.
//!
//! Runs concurrent resolve-then-settle load through a fault proxy
//! (`connreg_pgtest::proxy::FaultProxy`) while a fault loop restarts the
//! server as after a crash (`pg_ctl stop -m immediate`) and cuts
//! connections, some of them right after a commit reached the server and
//! before its answer reached the client (commit unknown). Every call that
//! fails as unavailable is retried with the same action; a retried resolve
//! must return the same route. Afterwards, over a direct connection, the
//! store must agree with every answer the clients got:
//!
//! - every answered action has exactly one assignment, equal to the
//!   answered route, with the last answer's fence (else `lost`);
//! - no action was answered two different routes, and none is stored twice
//!   (else `duplicated`);
//! - every replica's active count and every admission scope's counter equal
//!   the reserved assignments that count in them (else counter mismatches);
//! - no action whose settlement was acknowledged still holds its
//!   reservation (else `held after settle`).
//!
//! That check is `connreg_benches::crash::check`, tested on tampered stores
//! in `benches/tests/crash_check.rs`.
//!
//! ```sh
//! cargo run -p connreg-benches --release --bin connreg-crash -- --restarts 20 --cuts 1000
//! cargo run -p connreg-benches --release --bin connreg-crash -- \
//!   --url postgres://postgres:secret@127.0.0.1:5432/postgres --no-restart --cuts 1000
//! ```
//!
//! Without `--url` it starts a throwaway local cluster of its own with
//! `fsync=on` (`connreg_pgtest::LocalCluster`), removed at the end. With
//! `--url` (a superuser URL; the program creates and drops a database and
//! two roles there) the server cannot be restarted by the harness, so the
//! run is refused unless `--no-restart` is given.
//!
//! Exit status: 0 when every check holds, 1 when one fails, 2 when the run
//! could not be made (bad arguments, no server, setup failed).

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use connreg::contracts::Routing;
use connreg::postgres::{PgConnectOptions, PgOptions, PgRegistry, Roles, create_roles};
use connreg::{
    ActionId, Inspect, ManualClock, Outcome, RegistryConfig, RouteRequest, SettleParams, Timestamp,
};
use connreg_benches::crash::{ActionRecord, DETAILS_MAX, check};
use connreg_benches::qualify::fleet::{self, Admission, FleetPlan, FleetShape};
use connreg_benches::qualify::run::CLOCK_START_MS;
use connreg_pgtest::proxy::FaultProxy;
use connreg_pgtest::{LocalCluster, LocalOptions};
use sqlx::{Connection, PgConnection};

/// Most restarts one run may ask for.
const RESTARTS_MAX: u32 = 1_000;
/// Most connection cuts one run may ask for.
const CUTS_MAX: u32 = 100_000;
/// Most load tasks: each holds at most one data connection.
const TASKS_MAX: u32 = 64;
/// Data-pool connections: one per task, capped here.
const DATA_CONNECTIONS_MAX: u32 = 32;
/// Attempts of one call (a resolve or a settle) before its action is
/// abandoned; with [`RETRY_PAUSE_MS`] about 20 s, past a restart's recovery.
const CALL_ATTEMPTS_MAX: u32 = 800;
/// Pause between attempts of one call.
const RETRY_PAUSE_MS: u64 = 25;
/// Pause between two faults, so load runs between them.
const FAULT_PAUSE_MS: u64 = 15;
/// Pause after a restart before the next fault, so the clients reconnect
/// and load runs on the recovered server.
const AFTER_RESTART_PAUSE_MS: u64 = 500;
/// Longest wait for an armed commit cut to find a commit.
const COMMIT_CUT_WAIT_MS: u64 = 2_000;
/// Most actions one task starts; the run ends long before.
const ACTIONS_PER_TASK_MAX: u64 = 1_000_000;
/// Longest wait for the direct connection used for the final check, after
/// the last restart.
const CHECK_CONNECT_ATTEMPTS_MAX: u32 = 100;

const _: () = {
    assert!(DATA_CONNECTIONS_MAX <= TASKS_MAX);
    assert!(CALL_ATTEMPTS_MAX as u64 * RETRY_PAUSE_MS >= 10_000);
    assert!(COMMIT_CUT_WAIT_MS >= FAULT_PAUSE_MS);
};

/// Crash qualification: concurrent resolve/settle load through a fault
/// proxy while the server restarts and connections are cut; then the store
/// is checked against every answer.
#[derive(Debug, Parser)]
#[command(name = "connreg-crash", version)]
struct Cli {
    /// Superuser URL of a running server to use instead of a throwaway
    /// local cluster with fsync=on. Such a server cannot be restarted by the
    /// harness: give --no-restart.
    #[arg(long)]
    url: Option<String>,
    /// Run without restarts (required with --url).
    #[arg(long)]
    no_restart: bool,
    /// Immediate-shutdown restarts of the server during the run.
    #[arg(long, default_value_t = 20)]
    restarts: u32,
    /// Connection cuts during the run, half of every connection open, half
    /// of the next commit's connection after the commit reached the server.
    #[arg(long, default_value_t = 1_000)]
    cuts: u32,
    /// Concurrent load tasks.
    #[arg(long, default_value_t = 8)]
    tasks: u32,
}

/// Why a run could not be made (exit 2).
#[derive(Debug)]
struct SetupError(String);

impl<E: std::fmt::Display> From<E> for SetupError {
    fn from(error: E) -> SetupError {
        SetupError(error.to_string())
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("connreg-crash: no runtime: {error}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(SetupError(reason)) => {
            eprintln!("connreg-crash: {reason}");
            ExitCode::from(2)
        }
    }
}

/// Where the database lives, and how it goes away.
enum Target {
    /// A cluster of its own, removed when dropped.
    Local(Arc<LocalCluster>),
    /// A server given by URL: the database and roles are dropped at the end.
    Url,
}

async fn run(cli: Cli) -> Result<bool, SetupError> {
    if cli.restarts > RESTARTS_MAX || cli.cuts > CUTS_MAX || !(1..=TASKS_MAX).contains(&cli.tasks) {
        return Err(SetupError(format!(
            "--restarts at most {RESTARTS_MAX}, --cuts at most {CUTS_MAX}, \
             --tasks from 1 to {TASKS_MAX}"
        )));
    }
    let restarts = if cli.no_restart { 0 } else { cli.restarts };
    let (target, server_url) = match &cli.url {
        Some(_) if restarts > 0 => {
            return Err(SetupError(
                "a server given by URL cannot be restarted by the harness; \
                 give --no-restart to run only connection cuts against it, \
                 or leave out --url for a local cluster of its own"
                    .into(),
            ));
        }
        Some(url) => (Target::Url, url.clone()),
        None => {
            eprintln!("connreg-crash: starting a local cluster with fsync=on");
            let cluster = tokio::task::spawn_blocking(|| {
                LocalCluster::start(LocalOptions {
                    fsync: true,
                    ..LocalOptions::default()
                })
            })
            .await??;
            let url = cluster.url().to_owned();
            (Target::Local(Arc::new(cluster)), url)
        }
    };
    let server = PgConnectOptions::from_str(&server_url)?;
    let database = format!("connreg_crash_{}", std::process::id());
    let mut admin_connection = PgConnection::connect_with(&server).await?;
    sqlx::raw_sql(&format!("CREATE DATABASE {database}"))
        .execute(&mut admin_connection)
        .await?;
    let admin = server.clone().database(&database);
    let roles = Roles {
        control: format!("{database}_control"),
        data: format!("{database}_data"),
        control_password: Some("connreg-crash-only".into()),
        data_password: Some("connreg-crash-only".into()),
    };
    let outcome = qualify(&cli, restarts, &target, &admin, &roles).await;
    if matches!(target, Target::Url) {
        let drop_all = format!(
            "DROP DATABASE IF EXISTS {database} WITH (FORCE); \
             DROP ROLE IF EXISTS {control}; DROP ROLE IF EXISTS {data}",
            control = roles.control,
            data = roles.data
        );
        if let Err(error) = sqlx::raw_sql(&drop_all)
            .execute(&mut admin_connection)
            .await
        {
            eprintln!("connreg-crash: database {database} left on the server: {error}");
        }
    }
    outcome
}

/// Setup, load with faults, and the check.
async fn qualify(
    cli: &Cli,
    restarts: u32,
    target: &Target,
    admin: &PgConnectOptions,
    roles: &Roles,
) -> Result<bool, SetupError> {
    create_roles(admin, roles).await?;
    let upstream = tokio::net::lookup_host((admin.get_host(), admin.get_port()))
        .await?
        .next()
        .ok_or_else(|| SetupError("the server's host has no TCP address".into()))?;
    let proxy = FaultProxy::start(upstream).await?;

    let clock = ManualClock::new(Timestamp(CLOCK_START_MS));
    let direct = PgOptions::for_roles(admin, roles);
    let mut proxied = direct.clone();
    proxied.data.connect = proxied
        .data
        .connect
        .clone()
        .host("127.0.0.1")
        .port(proxy.local_addr().port());
    proxied.data.max_connections = cli.tasks.min(DATA_CONNECTIONS_MAX);
    let registry = PgRegistry::connect(proxied, clock.clone(), RegistryConfig::default()).await?;
    let plan = Arc::new(FleetPlan::new(&shape()));
    fleet::build(&registry, &plan).await?;
    eprintln!(
        "connreg-crash: {} replicas; {} tasks; {restarts} restarts and {} cuts",
        plan.replicas.len(),
        cli.tasks,
        cli.cuts
    );

    let started = Instant::now();
    let ledger = Arc::new(Ledger::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut load = tokio::task::JoinSet::new();
    for task in 0..cli.tasks {
        load.spawn(client(
            task,
            registry.clone(),
            Arc::clone(&plan),
            Arc::clone(&ledger),
            Arc::clone(&stop),
        ));
    }
    let faults = fault_loop(&proxy, target, restarts, cli.cuts).await;
    stop.store(true, Ordering::SeqCst);
    while load.join_next().await.is_some() {}
    let load_s = started.elapsed().as_secs_f64();
    registry.close().await;
    let faults = faults?;

    let checker = connect_direct(direct, clock).await?;
    let snapshot = checker.inspect().await?;
    checker.close().await;
    let actions = std::mem::take(
        &mut *ledger
            .actions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    let verdict = check(&actions, &snapshot);
    let stats = proxy.stats();
    let answered = actions.values().filter(|a| !a.answers.is_empty()).count();
    println!("connreg-crash summary");
    println!("  restarts done        {}", faults.restarts);
    println!(
        "  cuts done            {} ({} cut_all calls closing {} connections, {} commit cuts)",
        faults.cut_all_calls + stats.commit_cuts,
        faults.cut_all_calls,
        stats.cut,
        stats.commit_cuts
    );
    println!("  proxied connections  {}", stats.accepted);
    println!("  actions              {}", actions.len());
    println!("  answers              {answered}");
    println!(
        "  settles acknowledged {}",
        actions.values().filter(|a| a.settle_acked).count()
    );
    println!(
        "  retries              {}",
        ledger.retries.load(Ordering::Relaxed)
    );
    println!(
        "  abandoned            {}",
        actions.values().filter(|a| a.abandoned).count()
    );
    println!("  routes stored        {}", snapshot.routes.len());
    println!("  lost                 {}", verdict.lost);
    println!("  duplicated           {}", verdict.duplicated);
    println!("  counter mismatches   {}", verdict.counter_mismatches);
    println!("  held after settle    {}", verdict.held_after_settle);
    println!("  duration             {load_s:.1} s of load");
    for detail in verdict.details.iter().take(DETAILS_MAX) {
        println!("  ! {detail}");
    }
    let pass = verdict.total() == 0;
    println!(
        "  verdict              {}",
        if pass { "PASS" } else { "FAIL" }
    );
    Ok(pass)
}

/// A small fleet: two tenants, two capabilities, two bindings each, eight
/// replicas per instance; capacity and limits far above the load, so every
/// refusal would be a fault's doing.
fn shape() -> FleetShape {
    FleetShape {
        tenants: 2,
        capabilities: 2,
        bindings_per_tenant_capability: 2,
        instances_per_tenant: 2,
        replicas_per_instance: 4,
        regions: vec!["eu-west".into(), "us-east".into()],
        zones_per_region: 2,
        replica_capacity: connreg::limits::REPLICA_CAPACITY_MAX,
        lease_ttl_ms: 60_000,
        admission: Admission {
            tenant_limit: Some(connreg::limits::SCOPE_LIMIT_MAX),
            binding_limit: Some(connreg::limits::SCOPE_LIMIT_MAX),
        },
    }
}

/// What the clients were told, action by action.
#[derive(Default)]
struct Ledger {
    actions: Mutex<BTreeMap<ActionId, ActionRecord>>,
    retries: AtomicU64,
}

/// One load task: resolve a new action, settle it `Completed`, again.
async fn client(
    task: u32,
    registry: PgRegistry,
    plan: Arc<FleetPlan>,
    ledger: Arc<Ledger>,
    stop: Arc<AtomicBool>,
) {
    for n in 0..ACTIONS_PER_TASK_MAX {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let t = (task as usize + n as usize) % plan.tenants.len();
        let c = n as usize % plan.capabilities.len();
        let action = ActionId::try_from(format!("crash-{task}-{n}"))
            .unwrap_or_else(|e| panic!("a crash action id is invalid: {e}"));
        let request = RouteRequest {
            action: action.clone(),
            tenant: Some(plan.tenants[t].clone()),
            capability: plan.capabilities[c].clone(),
            topology: plan.topology(task as usize, n as usize),
        };
        let record = |update: &dyn Fn(&mut ActionRecord)| {
            let mut actions = ledger
                .actions
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            update(actions.entry(action.clone()).or_default());
        };
        record(&|_| {});
        let mut assignment = None;
        for attempt in 0..CALL_ATTEMPTS_MAX {
            if attempt > 0 {
                ledger.retries.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(RETRY_PAUSE_MS)).await;
            }
            match registry.route_resolve(request.clone()).await {
                Ok(resolved) => {
                    record(&|a| a.answers.push(resolved.assignment.clone()));
                    assignment = Some(resolved.assignment);
                    break;
                }
                Err(connreg::Error::Unavailable { .. } | connreg::Error::NoCapacity) => {}
                Err(other) => {
                    eprintln!("connreg-crash: resolve of {action}: {other}");
                    break;
                }
            }
        }
        let Some(assignment) = assignment else {
            record(&|a| a.abandoned = true);
            continue;
        };
        let params = SettleParams {
            assignment,
            outcome: Outcome::Completed,
        };
        let mut settled = false;
        for attempt in 0..CALL_ATTEMPTS_MAX {
            if attempt > 0 {
                ledger.retries.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(RETRY_PAUSE_MS)).await;
            }
            match registry.route_settle(params.clone()).await {
                Ok(_) => {
                    settled = true;
                    break;
                }
                Err(connreg::Error::Unavailable { .. }) => {}
                Err(other) => {
                    eprintln!("connreg-crash: settle of {action}: {other}");
                    break;
                }
            }
        }
        record(&|a| {
            a.settle_acked = settled;
            a.abandoned = !settled;
        });
    }
}

/// Faults done.
#[derive(Debug, Default)]
struct FaultsDone {
    restarts: u32,
    cut_all_calls: u64,
}

/// `restarts` restarts spread evenly among `cuts` cuts, alternating
/// `cut_all` with `cut_next_commit`, a short pause after each.
async fn fault_loop(
    proxy: &FaultProxy,
    target: &Target,
    restarts: u32,
    cuts: u32,
) -> Result<FaultsDone, SetupError> {
    let mut done = FaultsDone::default();
    let total = u64::from(restarts) + u64::from(cuts);
    let mut cuts_done = 0u32;
    for step in 0..total {
        // A restart whenever the restarts done so far fall behind their
        // even share of the steps.
        let restart_due = u64::from(done.restarts) * total < (step + 1) * u64::from(restarts);
        if restart_due {
            let Target::Local(cluster) = target else {
                return Err(SetupError("a restart of a server given by URL".into()));
            };
            let cluster = Arc::clone(cluster);
            tokio::task::spawn_blocking(move || cluster.restart_immediate()).await??;
            done.restarts += 1;
            tokio::time::sleep(Duration::from_millis(AFTER_RESTART_PAUSE_MS)).await;
        } else {
            if cuts_done.is_multiple_of(2) {
                proxy.cut_all();
                done.cut_all_calls += 1;
            } else {
                proxy.cut_next_commit();
                let deadline = Instant::now() + Duration::from_millis(COMMIT_CUT_WAIT_MS);
                while proxy.commit_cut_armed() && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
            cuts_done += 1;
        }
        tokio::time::sleep(Duration::from_millis(FAULT_PAUSE_MS)).await;
    }
    Ok(done)
}

/// A registry on direct connections, retried while the server recovers.
async fn connect_direct(options: PgOptions, clock: ManualClock) -> Result<PgRegistry, SetupError> {
    let mut last = String::new();
    for _ in 0..CHECK_CONNECT_ATTEMPTS_MAX {
        match PgRegistry::connect(options.clone(), clock.clone(), RegistryConfig::default()).await {
            Ok(registry) => return Ok(registry),
            Err(error) => last = error.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(SetupError(format!(
        "no direct connection for the check: {last}"
    )))
}
