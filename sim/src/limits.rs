//! Every bound the simulator applies, in one place.
//!
//! Names end with their unit. Scenario validation rejects values past these
//! limits with the file and line; the world loop stops a run that exceeds
//! its step or trace budget rather than running unbounded.

/// Longest simulated workload phase, in milliseconds (ten minutes).
pub const DURATION_MS_MAX: u64 = 600_000;

/// Longest liveness phase after the faults heal, in milliseconds.
pub const LIVENESS_MS_MAX: u64 = 600_000;

/// Longest simulation tick, in milliseconds. Coarser ticks blur the
/// ordering that the faults are meant to provoke.
pub const TICK_MS_MAX: u64 = 50;

/// Highest one-way link latency a scenario may configure, in milliseconds.
pub const LATENCY_MS_MAX: u64 = 5_000;

/// Most registry hosts in one run.
pub const REGISTRY_HOSTS_MAX: u32 = 8;

/// Most dispatcher hosts in one run.
pub const DISPATCHERS_MAX: u32 = 64;

/// Most catalog reader hosts in one run.
pub const READERS_MAX: usize = 8;

/// Most replica hosts in one run.
pub const REPLICAS_MAX: usize = 64;

/// Most records of one kind (types, versions, instances, scopes, bindings)
/// in a scenario fleet. The whole fleet goes out in one publication, which
/// the registry bounds at `connreg::limits::PUBLICATION_CHANGES_MAX`.
pub const FLEET_RECORDS_MAX: usize = 128;

/// Most replica groups in one run (one host each).
pub const REPLICA_GROUPS_MAX: usize = 64;

/// Most replicas in one replica group: each answers on its own port of the
/// group's host, from [`GROUP_PORT_BASE`].
pub const GROUP_REPLICAS_MAX: usize = 10_000;

/// The first port of a replica group's host; replica `i` answers on
/// `GROUP_PORT_BASE + i`, below the ephemeral ports.
pub const GROUP_PORT_BASE: u16 = 20_000;

/// The ports a host's outgoing connections take, in turn. A group host
/// opens a connection per heartbeat of each of its replicas; when its
/// ports wrap around, a port is reused only if the registry has dropped
/// the old connection. Wider than turmoil's default (49152 on) so that
/// a group of a thousand replicas beating every second wraps once in
/// half a simulated minute rather than once in sixteen seconds.
pub const EPHEMERAL_PORTS: std::ops::RangeInclusive<u16> = 30_000..=65_535;

/// Most replicas in one run, listed and in groups. Every replica starts
/// with a registration; the checkers keep a row for each.
pub const FLEET_REPLICAS_MAX: usize = 20_000;

/// Most tenant groups in one scenario.
pub const TENANT_GROUPS_MAX: usize = 64;

/// Most records (tenants, instances, scopes, bindings) the tenant groups of
/// one scenario generate.
pub const GENERATED_RECORDS_MAX: usize = 50_000;

/// Most publications the fleet's setup may take: each carries at most
/// `connreg::limits::PUBLICATION_CHANGES_MAX` changes.
pub const SETUP_PUBLICATIONS_MAX: usize = 100;

/// Most operator actions one scenario's schedule expands to, repeats
/// included.
pub const OPERATIONS_EXPANDED_MAX: usize = 10_000;

/// Most actions one dispatcher starts in a run.
pub const ACTIONS_PER_DISPATCHER_MAX: u32 = 10_000;

/// Most actions one dispatcher keeps in flight.
pub const DISPATCHER_CONCURRENCY_MAX: u32 = 64;

/// Most concurrent duplicate resolves one action may send.
pub const DUPLICATES_MAX: u32 = 8;

/// Most retries of one kind an action makes before it ends.
pub const RETRIES_MAX: u32 = 32;

/// Most scheduled faults and operations in one scenario.
pub const SCHEDULE_ENTRIES_MAX: usize = 256;

/// Most faults the seed may draw for one kind of chaos.
pub const CHAOS_FAULTS_MAX: u32 = 32;

/// Most entries in the workload's request mix.
pub const MIX_ENTRIES_MAX: usize = 64;

/// Largest RPC frame, in bytes. A catalog page is bounded at
/// `connreg::limits::PAGE_BYTES_MAX`; the rest is framing.
pub const FRAME_BYTES_MAX: u32 = 2 * 1024 * 1024;

/// Most steps one run may take; a run that needs more is a defect of the
/// scenario (or of the liveness bound) and is reported as a violation.
pub const STEPS_MAX: u64 = 2_000_000;

/// Most catalog page requests one reader session makes (restarts included)
/// before it gives up: a bounded loop even when every cursor goes stale.
pub const READER_SESSION_PAGES_MAX: u32 = 64;

/// Most maintenance calls in one maintenance round while `more` is set.
pub const MAINTENANCE_CALLS_PER_ROUND_MAX: u32 = 16;

/// Most violations a run's report keeps in memory (a sweep keeps the
/// report of every failing seed); past it only the count grows. The trace
/// keeps more: [`TRACE_VIOLATIONS_MAX`].
pub const VIOLATIONS_RECORDED_MAX: usize = 64;

/// Most trace bytes one step may write, its snapshot and checks included.
/// The worst step of the largest world a scenario may declare writes
/// about 20 MB: [`FLEET_REPLICAS_MAX`] replicas changing in full (about
/// 200 bytes a row) and heartbeating in the same tick (about 370 bytes a
/// call, answer and delivery), and every dispatcher's calls in flight
/// ([`DISPATCHERS_MAX`] x [`DISPATCHER_CONCURRENCY_MAX`], about 2 KB an
/// action). The mass-expiry scenario's largest step writes under 1 MB.
/// A step past it is a defect (of the world or of the trace's encoding)
/// and stops the run with a `run` violation that names the step.
pub const TRACE_STEP_BYTES_MAX: u64 = 32 * 1024 * 1024;

/// Most `violation` lines one trace keeps. A bug that breaks an invariant
/// on every step would otherwise grow the trace without bound; past it
/// only the count grows, and the `end` line (`violations_recorded`) and
/// `connreg-sim run` say the limit was hit. A few hundred bytes a line:
/// a few MiB at most.
pub const TRACE_VIOLATIONS_MAX: u64 = 10_000;

/// Most violations `connreg-sim run` prints; it names the file that keeps
/// the rest.
pub const VIOLATIONS_PRINTED_MAX: usize = 20;

/// Largest seed range one sweep runs.
pub const SWEEP_SEEDS_MAX: u64 = 10_000_000;

/// Most worker threads one sweep runs seeds on (`--jobs`). Each runs whole
/// seeds, one at a time; past the machine's cores more only adds memory.
pub const SWEEP_JOBS_MAX: usize = 64;

/// Most shards a seed range may be split into (`--shard I/N`).
pub const SWEEP_SHARDS_MAX: u64 = 1_024;

/// Most seeds a sweep's workers may run ahead of the first seed not yet
/// reported: the results held to report in seed order stay bounded.
pub const SWEEP_REORDER_WINDOW_SEEDS: usize = 256;

/// Stack of one sweep worker thread, in bytes: a run's futures nest as
/// deep on a worker as on the main thread (8 MiB by default), and the
/// default for spawned threads (2 MiB) is smaller.
pub const SWEEP_WORKER_STACK_BYTES: usize = 64 * 1024 * 1024;

/// A sweep of more seeds than this prints its estimated duration once the
/// first `SWEEP_ESTIMATE_SAMPLE_SEEDS` seeds have run.
pub const SWEEP_ESTIMATE_SEEDS_MIN: u64 = 200;

/// Seeds timed before a long sweep estimates its duration.
pub const SWEEP_ESTIMATE_SAMPLE_SEEDS: u64 = 8;

/// Wall seconds between two progress lines of a sweep whose standard
/// error is not a terminal (a CI log).
pub const SWEEP_PROGRESS_INTERVAL_S: u64 = 10;

/// Failing seeds a sweep describes one by one on standard output; past
/// it, the rest are listed by number (and in full in `--json`).
pub const SWEEP_FAILURES_PRINTED_MAX: usize = 20;

/// Runs a shrink may spend by default (`--budget`): each candidate
/// scenario costs one run per seed tried, at most
/// `SHRINK_SEEDS_PER_CANDIDATE`.
pub const SHRINK_RUNS_DEFAULT: u64 = 400;

/// Most runs `--budget` may allow.
pub const SHRINK_RUNS_MAX: u64 = 100_000;

/// Seeds a shrink tries per candidate: the seed it last failed at, the
/// given seed, and the ones after it, up to this many in all.
pub const SHRINK_SEEDS_PER_CANDIDATE: u64 = 4;

const _: () = {
    assert!(TICK_MS_MAX >= 1);
    assert!(DURATION_MS_MAX >= TICK_MS_MAX);
    assert!(REPLICAS_MAX <= FLEET_RECORDS_MAX);
    assert!(REPLICAS_MAX <= FLEET_REPLICAS_MAX && GROUP_REPLICAS_MAX <= FLEET_REPLICAS_MAX);
    assert!(GROUP_PORT_BASE as usize + GROUP_REPLICAS_MAX <= *EPHEMERAL_PORTS.start() as usize);
    assert!(
        GROUP_PORT_BASE > crate::wire::REPLICA_PORT && GROUP_PORT_BASE > crate::wire::REGISTRY_PORT
    );
    assert!(
        (FLEET_RECORDS_MAX * 6 + GENERATED_RECORDS_MAX)
            <= SETUP_PUBLICATIONS_MAX * connreg::limits::PUBLICATION_CHANGES_MAX
    );
    assert!(FRAME_BYTES_MAX > connreg::limits::PAGE_BYTES_MAX);
    assert!(FLEET_RECORDS_MAX * 6 <= connreg::limits::PUBLICATION_CHANGES_MAX);
    assert!(SWEEP_JOBS_MAX >= 1);
    assert!(SWEEP_REORDER_WINDOW_SEEDS >= SWEEP_JOBS_MAX);
    assert!(SWEEP_ESTIMATE_SAMPLE_SEEDS < SWEEP_ESTIMATE_SEEDS_MIN);
    assert!(SHRINK_RUNS_DEFAULT <= SHRINK_RUNS_MAX);
    assert!(SHRINK_SEEDS_PER_CANDIDATE >= 1 && SHRINK_SEEDS_PER_CANDIDATE <= SHRINK_RUNS_DEFAULT);
    assert!(VIOLATIONS_PRINTED_MAX <= VIOLATIONS_RECORDED_MAX);
    assert!(VIOLATIONS_RECORDED_MAX as u64 <= TRACE_VIOLATIONS_MAX);
};

/// Longest `db_stall`, in real milliseconds: the world waits for the
/// database in real time, so a stall is that much wall time per fault.
pub const DB_STALL_MS_MAX: u64 = 2_000;

/// Most `db_failover`s in one run, scheduled and drawn together: the
/// promoted standby has no standby of its own (the old primary is not
/// rebuilt as one), so a second failover would have nothing to promote.
pub const DB_FAILOVERS_MAX: usize = 1;

/// After a database fault's window ends, `unavailable` answers are still
/// allowed for this many simulated milliseconds: a connection the fault
/// broke fails its next call as unavailable and is replaced, and pool
/// connections are reused one after another within a few steps.
pub const DB_FAULT_SETTLE_MS: u64 = 1_000;

/// The longest a publication may take, unexcused, from the operator's
/// first attempt to the answer that commits it (`publication_progress`),
/// when a scenario sets no `expect.publish_within_ms`. A request reaches a
/// registry host within one link latency ([`LATENCY_MS_MAX`] at most), is
/// read at the next step and commits there (an offloaded call finishes
/// before the world takes another step), so two ticks of
/// [`TICK_MS_MAX`] on top cover it. Any longer wait is the registry's.
pub const PUBLISH_WITHIN_MS: u64 = LATENCY_MS_MAX + 2 * TICK_MS_MAX;

/// Maintenance calls a drain may take beyond ceil(n / batch)
/// (`maintenance_drains`): one for the leases that end while the drain runs
/// (a call never sees a lease that ends after it), and one for a batch
/// that skipped replica rows another transaction held (PostgreSQL's
/// `SKIP LOCKED`). At most [`MAINTENANCE_DRAIN_SLACK_CALLS_MAX`].
pub const MAINTENANCE_DRAIN_SLACK_CALLS: u64 = 2;

/// The most [`MAINTENANCE_DRAIN_SLACK_CALLS`] may be raised to: a slack
/// as large as a whole round of calls would hide a drain that stalls.
pub const MAINTENANCE_DRAIN_SLACK_CALLS_MAX: u64 = MAINTENANCE_CALLS_PER_ROUND_MAX as u64 / 2;

/// Attempts of a store snapshot before the run fails: a snapshot on a
/// connection a database fault broke fails once and is retried on a new
/// one.
pub const SNAPSHOT_ATTEMPTS_MAX: u32 = 8;

/// Most probes a scenario's `[expect] reach` may require.
pub const REACH_MAX: usize = 64;

/// Most never-fired probe names a sweep's text output prints (the JSON
/// summary has them all).
pub const SWEEP_NEVER_FIRED_PRINTED_MAX: usize = 200;

/// `connreg-sim probes` names the plants whose code path fewer than this
/// many scenarios reach.
pub const PLANT_REACH_FEW: usize = 3;

/// Fences a replica keeps a record of (EVID-9: whether a cancel reached
/// it, what its executions answered), oldest forgotten first: a fence whose
/// cancellation is kept is refused by later executes. A careful dispatcher
/// stops dispatching a reservation within the registry's reservation hold,
/// so this need only cover the fences a replica serves within one hold; it
/// is far above what a simulated replica serves in a run.
pub const REPLICA_FENCES_KEPT: usize = 4_096;

/// Fences a dispatcher keeps as known released (EVID-4), oldest forgotten
/// first (by fence, which grows with time); far above what a simulated
/// dispatcher settles in a run.
pub const DISPATCHER_RELEASED_KEPT: usize = 4_096;
