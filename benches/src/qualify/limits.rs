//! Every bound of the qualification runner, named, with its unit last and
//! the reason for its value. A contract past one of them is bad input
//! (exit 2) with a message naming the bound; the relations between bounds
//! are asserted at compile time at the bottom.
//!
//! Replica capacity, admission scope limits and lease lengths are bounded
//! by the registry's own limits (`connreg::limits`), which the contract
//! checks directly.

use connreg::inspect::INSPECT_ROWS_MAX;
use connreg::limits::{
    INSTANCE_REPLICAS_MAX, TENANT_CAPABILITY_BINDINGS_MAX, VERSION_CAPABILITIES_MAX,
};

/// Largest contract file, in bytes. Contracts are a page of settings.
pub const CONTRACT_BYTES_MAX: usize = 64 * 1024;

/// Longest environment name, in bytes: it names reports and files.
pub const NAME_BYTES_MAX: usize = 64;

/// Longest environment description, in bytes.
pub const DESCRIPTION_BYTES_MAX: usize = 1024;

/// Most tenants in one fleet.
pub const TENANTS_MAX: u32 = 1_000;

/// Most capabilities: the fleet's one version implements all of them, so
/// the registry's own bound per version applies.
pub const CAPABILITIES_MAX: u32 = VERSION_CAPABILITIES_MAX as u32;

/// Most bindings per (tenant, capability): the registry's own bound.
pub const BINDINGS_PER_TENANT_CAPABILITY_MAX: u32 = TENANT_CAPABILITY_BINDINGS_MAX as u32;

/// Most bindings in one fleet (tenants × capabilities × bindings each).
pub const BINDINGS_MAX: u64 = 10_000;

/// Most instances per tenant.
pub const INSTANCES_PER_TENANT_MAX: u32 = 64;

/// Most instances in one fleet.
pub const INSTANCES_MAX: u64 = 10_000;

/// Most replicas per instance: the registry's own bound.
pub const REPLICAS_PER_INSTANCE_MAX: u32 = INSTANCE_REPLICAS_MAX as u32;

/// Most replicas in one fleet: `fleet-100k`'s 100,000, and small enough
/// that a full inspection still has room for 80,000 routes.
pub const REPLICAS_MAX: u64 = 100_000;

/// Most admission scopes in one fleet: one per tenant and one per binding.
pub const SCOPES_MAX: u64 = TENANTS_MAX as u64 + BINDINGS_MAX;

/// Most regions.
pub const REGIONS_MAX: usize = 16;

/// Most zones per region.
pub const ZONES_PER_REGION_MAX: u32 = 8;

/// Most concurrent clients. Each holds its own latency histograms; 256
/// already saturates a database server of a few dozen cores.
pub const CLIENTS_MAX: u32 = 256;

/// Shortest run by duration, in milliseconds: below it the figures are noise.
pub const DURATION_MS_MIN: u64 = 100;

/// Longest run by duration, in milliseconds (one hour).
pub const DURATION_MS_MAX: u64 = 60 * 60 * 1000;

/// Most operations in a run by operation count.
pub const OPERATIONS_MAX: u64 = 100_000_000;

/// Replicas up to which a fleet leaves a run the whole [`ACTIONS_MAX`].
pub const REPLICAS_FULL_BUDGET_MAX: u64 = 50_000;

/// Most new actions (routes) one run creates. Routes are never deleted
/// (REC-6), and the final check reads the whole store in one inspection
/// of at most `INSPECT_ROWS_MAX` rows: replicas, scopes and routes must
/// all fit. A fleet above [`REPLICAS_FULL_BUDGET_MAX`] replicas gets what
/// is left of the inspection (`Contract::actions_budget`). A run that
/// reaches its budget stops early and says so.
pub const ACTIONS_MAX: u64 = INSPECT_ROWS_MAX as u64 - REPLICAS_FULL_BUDGET_MAX - SCOPES_MAX;

/// Most reservations one client holds unsettled before a new resolve is
/// replaced by a settlement.
pub const OUTSTANDING_PER_CLIENT_MAX: u32 = 1_024;

/// Largest weight of one entry of the operation or outcome mix.
pub const MIX_WEIGHT_MAX: u32 = 1_000_000;

/// Replica registrations in flight at once while the fleet is set up.
pub const REGISTER_CONCURRENCY: usize = 16;

/// Most data-pool connections of a PostgreSQL run; the pool gets one per
/// client up to this. Well inside the test server's 300 connections.
pub const PG_DATA_CONNECTIONS_MAX: u32 = 64;

/// Longest run prefix, in bytes: `q` and 16 hex digits and `-` (18) with
/// room to spare. With the longest fleet identifier (`t999-c255-b15-s`,
/// 15 bytes) and action identifier (`w63-r99-c255-a99999999`) it stays far
/// below the registry's `ID_BYTES_MAX` (128).
pub const RUN_PREFIX_BYTES_MAX: usize = 32;

/// Control-pool connections of a PostgreSQL run: setup publishes one
/// publication at a time, and the end check, the whole-database checks
/// and the cleanup run one after another.
pub const PG_CONTROL_CONNECTIONS: u32 = 2;

/// Shortest timeline interval, in milliseconds: runs by operation count,
/// and runs shorter than a minute, are sampled this often.
pub const TIMELINE_INTERVAL_MS_MIN: u64 = 100;

/// Longest timeline interval, in milliseconds: a run of the longest
/// duration (one hour) still gets 60 points.
pub const TIMELINE_INTERVAL_MS_MAX: u64 = 60_000;

/// Most timeline points one trial keeps; later ones are counted in the
/// progress display but not kept (the timeline says `truncated`). At the
/// shortest interval, about seven minutes.
pub const TIMELINE_POINTS_MAX: usize = 4_096;

/// Interval between progress lines when stderr is not a terminal, in
/// milliseconds.
pub const PROGRESS_LINE_MS: u64 = 5_000;

/// Warm-up of a run by duration when the contract names none, in
/// milliseconds; runs by operation count have none unless they ask.
pub const WARMUP_MS_DEFAULT: u64 = 1_000;

/// Longest warm-up, in milliseconds (ten minutes).
pub const WARMUP_MS_MAX: u64 = 600_000;

/// Most trials of one contract: each repeats the measured run on the same
/// fleet, and they share the run's budget of new actions.
pub const TRIALS_MAX: u32 = 20;

/// pgbench's time per script when a run by operation count names none,
/// in seconds.
pub const PGBENCH_SECS_DEFAULT: u64 = 5;

/// Longest pgbench script beside a run, in seconds; a run by duration
/// gives pgbench its duration up to this.
pub const PGBENCH_SECS_MAX: u64 = 600;

/// Most registry worker processes of one run (`processes`,
/// `--processes`): each opens `clients` data connections.
pub const PROCESSES_MAX: u32 = 16;

/// Longest a worker may take to connect and say it is ready, in
/// milliseconds.
pub const WORKER_READY_MS_MAX: u64 = 60_000;

/// How long past its trial (warm-up and duration) a worker may take to
/// finish (drain, write its result) before it is killed, in milliseconds.
pub const WORKER_GRACE_MS: u64 = 120_000;

/// Longest wait between the start of a trial's measured run and its
/// zone's lease expiry (`[expiry] at_ms`), and longest bound on the time
/// until every expired replica is offline (`offline_within_ms_max`).
pub const EXPIRY_MS_MAX: u64 = DURATION_MS_MAX;

/// Most zones one contract lets expire: every zone of the largest region.
pub const EXPIRY_ZONES_MAX: usize = ZONES_PER_REGION_MAX as usize * REGIONS_MAX;

/// Most consecutive failed lease-maintenance calls before the expiry
/// gives up for the trial (the report then says replicas were left).
pub const MAINTENANCE_ERRORS_MAX: u32 = 100;

/// Shortest interval between an operator's publications during a trial.
pub const PUBLICATION_INTERVAL_MS_MIN: u64 = 10;

/// How long a client pauses after a call answered `unavailable` before
/// its next call, as a careful client backs off from a server that is
/// restarting or failing over.
pub const UNAVAILABLE_PAUSE_MS: u64 = 10;

/// Most reports `connreg-qualify plot` draws from.
pub const PLOT_REPORTS_MAX: usize = 64;

/// Highest bound a contract may set on the time without a primary during
/// a `[failover]` (`without_primary_ms_max`).
pub const FAILOVER_MS_MAX: u64 = 600_000;

/// Longest interval between an operator's publications during a trial.
pub const PUBLICATION_INTERVAL_MS_MAX: u64 = 600_000;

/// Largest latency the histograms hold, in microseconds (one minute);
/// slower calls are recorded at this value.
pub const LATENCY_US_MAX: u64 = 60 * 1_000_000;

/// Significant digits of the latency histograms: 1% resolution.
pub const LATENCY_SIGNIFICANT_DIGITS: u8 = 2;

/// Most violations a report lists one by one; all are counted.
pub const VIOLATION_DETAILS_MAX: usize = 20;

const _: () = {
    assert!(ACTIONS_MAX >= 100_000);
    assert!(REPLICAS_FULL_BUDGET_MAX + SCOPES_MAX + ACTIONS_MAX <= INSPECT_ROWS_MAX as u64);
    // The largest fleet still leaves room for a run of 80,000 routes.
    assert!(REPLICAS_MAX + SCOPES_MAX + 80_000 <= INSPECT_ROWS_MAX as u64);
    assert!(REPLICAS_PER_INSTANCE_MAX as u64 <= REPLICAS_MAX);
    assert!(INSTANCES_PER_TENANT_MAX as u64 * TENANTS_MAX as u64 >= INSTANCES_MAX);
    assert!(DURATION_MS_MIN < DURATION_MS_MAX);
    assert!(PG_DATA_CONNECTIONS_MAX <= connreg_pgtest::limits::SERVER_CONNECTIONS_MAX / 2);
    assert!(LATENCY_US_MAX > 1_000);
    assert!(REGISTER_CONCURRENCY >= 1);
    assert!(VIOLATION_DETAILS_MAX >= 1);
    assert!(PUBLICATION_INTERVAL_MS_MIN < PUBLICATION_INTERVAL_MS_MAX);
    assert!(TIMELINE_INTERVAL_MS_MIN < TIMELINE_INTERVAL_MS_MAX);
    assert!(DURATION_MS_MAX / TIMELINE_INTERVAL_MS_MAX >= 60);
    assert!(ACTIONS_MAX / TRIALS_MAX as u64 >= 1_000);
    assert!(WARMUP_MS_DEFAULT <= WARMUP_MS_MAX);
    assert!(PROCESSES_MAX as u64 * CLIENTS_MAX as u64 <= 4_096);
    assert!(RUN_PREFIX_BYTES_MAX + 64 <= connreg::limits::ID_BYTES_MAX);
};

/// Most standbys a report lists (`pg_stat_replication` rows); a server
/// with more is reported by its first ones, by name.
pub const STANDBYS_REPORTED_MAX: usize = 64;

/// Highest `thresholds.synchronous_standbys_min` a contract may set (a
/// server lists at most this many standbys in a report,
/// [`STANDBYS_REPORTED_MAX`]).
pub const SYNCHRONOUS_STANDBYS_MAX: u32 = STANDBYS_REPORTED_MAX as u32;
