//! Every bound this crate puts on waiting, retrying and sizing, in one place.
//!
//! Units go last in names. Timeouts are generous: they exist so that a broken
//! machine fails a test run with a message instead of hanging it, not to
//! police a slow one.

/// `max_connections` of the servers this crate starts (the local cluster and
/// the Docker container; a server named by URL keeps its own setting).
///
/// Backend tests open pools of many connections and the scale benches run many
/// clients at once; 300 leaves room for both while staying far below what
/// shared memory on a small CI machine can hold. Three of them are reserved for
/// superusers (PostgreSQL's `superuser_reserved_connections` default), and
/// every connection this crate hands out is a superuser one, so all 300 are
/// usable by tests.
pub const SERVER_CONNECTIONS_MAX: u32 = 300;

/// How many free ports the local cluster tries before giving up.
///
/// The port comes from binding port 0, so a collision needs another process
/// to take that exact port between the probe and the server's bind; a few
/// attempts make that practically impossible to hit twice.
pub const LOCAL_PORT_ATTEMPTS_MAX: u32 = 5;

/// Longest wait for `initdb` to create the local cluster (about 1–2 s here).
pub const LOCAL_INITDB_TIMEOUT_S: u64 = 120;

/// Longest wait for the local cluster to accept connections (`pg_ctl -w -t`).
pub const LOCAL_START_TIMEOUT_S: u64 = 60;

/// Longest wait, after the test process exits, for the local cluster's
/// postmaster to finish its immediate shutdown before the cleanup kills it.
pub const LOCAL_STOP_TIMEOUT_S: u64 = 10;

/// Longest wait for a helper program that only reports something
/// (`pg_config --bindir`, `id`, `docker info`).
pub const PROBE_TIMEOUT_S: u64 = 10;

/// Longest wait for the Docker container to be pulled, started and to accept
/// connections; a first image pull dominates it.
pub const DOCKER_START_TIMEOUT_S: u64 = 300;

/// Longest wait to connect and create one test database.
pub const DATABASE_CREATE_TIMEOUT_S: u64 = 60;

/// Longest time one `DROP DATABASE` may take; on a server named by URL also
/// the longest time `Drop` of a test database waits for it.
pub const DATABASE_DROP_TIMEOUT_S: u64 = 10;

/// Test databases waiting to be dropped in the background at most; a drop
/// finding the queue full leaves its database for the server's removal.
///
/// Far more than the test databases one process has alive at once.
pub const DROP_QUEUE_MAX: usize = 1_024;

/// How much of a failing program's output or server log an error carries.
pub const ERROR_DETAIL_BYTES_MAX: usize = 4_000;

/// Pause between polls of a child process or a starting server.
pub const POLL_INTERVAL_MS: u64 = 50;

/// Connections a [`FaultProxy`](crate::proxy::FaultProxy) holds open at
/// once; one more is accepted and closed at once (and counted as refused).
///
/// Above [`SERVER_CONNECTIONS_MAX`], so the proxy is never what limits a
/// client of the servers this crate starts; with
/// [`PROXY_BUFFER_BYTES`] two buffers a connection, at most 64 MiB.
pub const PROXY_CONNECTIONS_MAX: usize = 1_024;

/// Bytes one direction of one proxied connection reads and holds at a time.
/// A stalled direction holds at most this much; the rest waits in TCP.
///
/// Larger than the messages of a routing transaction, small enough that
/// [`PROXY_CONNECTIONS_MAX`] connections stay cheap.
pub const PROXY_BUFFER_BYTES: usize = 32 * 1_024;

/// Bytes of a message's body the proxy keeps to recognise it: a `Query`
/// starting with `COMMIT` after white space, a `Parse` of one after its
/// statement name, a startup message's code.
pub const PROXY_MESSAGE_PREFIX_BYTES_MAX: usize = 128;

/// Prepared statements a proxied connection remembers as opening or
/// committing a transaction block (by name, from their `Parse`), so that a
/// later bare `Bind`/`Execute`/`Sync` of one is recognised. A client
/// prepares one of each; past this many, further ones are taken as
/// ordinary statements.
pub const PROXY_BLOCK_STATEMENTS_MAX: usize = 16;

/// Longest wait of a proxied connection for the server to accept its TCP
/// connection; the client's connection is closed after it.
pub const PROXY_CONNECT_TIMEOUT_MS: u64 = 5_000;

/// Longest wait, after a cut commit reached the server, for the server's
/// answer (which is dropped) before the connection is closed anyway.
///
/// Waiting for the answer means the commit is done by the time the client
/// sees its connection fail; a server that never answers is not waited for.
pub const PROXY_COMMIT_REPLY_WAIT_MS: u64 = 5_000;

/// Longest single [`FaultProxy::stall`](crate::proxy::FaultProxy::stall);
/// longer ones are cut to this. Ten minutes: past any client's timeout.
pub const PROXY_STALL_MS_MAX: u64 = 600_000;

/// Pause after a failed accept (out of file descriptors, say) before the
/// proxy accepts again, so it never spins.
pub const PROXY_ACCEPT_RETRY_MS: u64 = 50;

/// Longest wait for one `pg_autoctl create monitor` of an
/// [`AutoFailoverFormation`](crate::AutoFailoverFormation) (about 2 s here;
/// it starts the monitor's server and installs its extension).
pub const FORMATION_CREATE_TIMEOUT_S: u64 = 120;

/// Longest wait for each stage of a formation's start to reach its state:
/// the monitor accepting connections, the first node `single`, the second
/// `secondary` beside a `primary` (a base backup), the secondary streaming as
/// a synchronous standby. About 8 s for all of them here.
pub const FORMATION_START_TIMEOUT_S: u64 = 120;

/// Longest one `psql` statement or `pg_autoctl stop` of a formation may
/// take before it is killed.
pub const FORMATION_COMMAND_TIMEOUT_S: u64 = 10;

/// `PGCONNECT_TIMEOUT` of a formation's `psql`: a node that stops answering
/// during a failover delays a poll by this much at most.
pub const FORMATION_CONNECT_TIMEOUT_S: u64 = 2;

/// Longest wait for the write that proves a formation's node takes writes
/// (a transactional WAL message, which waits for the synchronous standby);
/// a write still waiting after it counts as "not yet", and is tried again.
pub const FORMATION_WRITE_PROBE_TIMEOUT_MS: u64 = 2_000;

/// Pause between polls of a formation's monitor and nodes.
pub const FORMATION_POLL_INTERVAL_MS: u64 = 100;

/// Longest wait, in a formation's teardown, for its `pg_autoctl` services
/// and servers to exit after `pg_autoctl stop` (well under a second here)
/// before they are killed.
pub const FORMATION_STOP_TIMEOUT_S: u64 = 30;

/// Bound [`AutoFailoverFormation::fail_over`](crate::AutoFailoverFormation::fail_over)
/// puts on the wait for the new primary: an order of magnitude above the
/// about 5 s the tuned monitor below needs.
pub const FORMATION_FAILOVER_TIMEOUT_S: u64 = 60;

/// The formation's monitor's `pgautofailover.health_check_period` (default
/// 5000 ms): how often it checks each node.
///
/// This and the six settings below it are what the monitor is tuned to
/// once the formation is up, so that a crashed primary is replaced in about
/// 5 s instead of about 51 s with the defaults.
pub const FORMATION_HEALTH_CHECK_PERIOD_MS: u64 = 1_000;

/// The monitor's `pgautofailover.health_check_timeout` (default 5000 ms):
/// how long one check may take to connect.
pub const FORMATION_HEALTH_CHECK_TIMEOUT_MS: u64 = 1_000;

/// The monitor's `pgautofailover.health_check_max_retries` (default 2).
pub const FORMATION_HEALTH_CHECK_RETRIES_MAX: u32 = 1;

/// The monitor's `pgautofailover.health_check_retry_delay` (default
/// 2000 ms).
pub const FORMATION_HEALTH_CHECK_RETRY_DELAY_MS: u64 = 500;

/// The monitor's `pgautofailover.node_considered_unhealthy_timeout`
/// (default 20000 ms): how long a node fails its checks before the monitor
/// marks it unhealthy.
pub const FORMATION_NODE_UNHEALTHY_TIMEOUT_MS: u64 = 2_000;

/// The monitor's `pgautofailover.primary_demote_timeout` (default
/// 30000 ms): how long an unreachable primary is given to demote itself
/// before the secondary is promoted anyway.
pub const FORMATION_PRIMARY_DEMOTE_TIMEOUT_MS: u64 = 2_000;

/// The monitor's `pgautofailover.startup_grace_period` (default 10000 ms):
/// how long after the monitor's own start it marks no node unhealthy. A
/// formation is ready about 8 s after its monitor starts, so with the
/// default a crash right after the start would wait for the rest of it.
pub const FORMATION_STARTUP_GRACE_PERIOD_MS: u64 = 1_000;

const _: () = {
    assert!(PROXY_CONNECTIONS_MAX >= SERVER_CONNECTIONS_MAX as usize);
    assert!(PROXY_CONNECTIONS_MAX * 2 * PROXY_BUFFER_BYTES <= 64 * 1_024 * 1_024);
    // Room for `COMMIT` after a statement name of PostgreSQL's 63 bytes and
    // its NUL, and for a startup message's code.
    assert!(PROXY_MESSAGE_PREFIX_BYTES_MAX >= 63 + 1 + 6);
    assert!(PROXY_BUFFER_BYTES >= PROXY_MESSAGE_PREFIX_BYTES_MAX);
    assert!(PROXY_COMMIT_REPLY_WAIT_MS <= PROXY_STALL_MS_MAX);

    assert!(LOCAL_PORT_ATTEMPTS_MAX >= 1);
    // PostgreSQL refuses to start unless max_connections exceeds the
    // reserved superuser slots (3 by default).
    assert!(SERVER_CONNECTIONS_MAX > 3);
    // Dropping must never be what makes a test run slow to end.
    assert!(DATABASE_DROP_TIMEOUT_S <= DATABASE_CREATE_TIMEOUT_S);
    assert!(POLL_INTERVAL_MS < PROBE_TIMEOUT_S * 1_000);
    assert!(DROP_QUEUE_MAX >= 1);

    assert!(FORMATION_POLL_INTERVAL_MS < FORMATION_WRITE_PROBE_TIMEOUT_MS);
    assert!(FORMATION_WRITE_PROBE_TIMEOUT_MS < FORMATION_COMMAND_TIMEOUT_S * 1_000);
    assert!(FORMATION_CONNECT_TIMEOUT_S < FORMATION_COMMAND_TIMEOUT_S);
    // The tuned monitor notices a crash well inside the failover bound.
    assert!(
        FORMATION_NODE_UNHEALTHY_TIMEOUT_MS + FORMATION_PRIMARY_DEMOTE_TIMEOUT_MS
            < FORMATION_FAILOVER_TIMEOUT_S * 1_000
    );
    assert!(FORMATION_HEALTH_CHECK_TIMEOUT_MS <= FORMATION_NODE_UNHEALTHY_TIMEOUT_MS);
    assert!(FORMATION_STARTUP_GRACE_PERIOD_MS < FORMATION_FAILOVER_TIMEOUT_S * 1_000);
};
