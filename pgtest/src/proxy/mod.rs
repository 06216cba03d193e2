//! A TCP fault proxy between clients and a PostgreSQL server, in this
//! process, for database fault injection.
//!
//! Point clients at [`FaultProxy::local_addr`] instead of the server; bytes
//! flow through unchanged until a fault is asked for:
//!
//! - [`FaultProxy::cut_all`]: every open connection is closed at once, on
//!   both sides (the server ends the session and rolls back what it had
//!   open; the client gets an I/O error on its next read or write).
//! - [`FaultProxy::cut_next_commit`]: the next message that ends a
//!   transaction reaches the server, and its connection is closed before the
//!   reply reaches the client: the transaction is committed but the client
//!   cannot know (the commit-unknown case).
//! - [`FaultProxy::stall`]: bytes are held in both directions for a while,
//!   then delivered.
//! - [`FaultProxy::blackhole`]: bytes are held until it is turned off;
//!   sockets stay open.
//!
//! ```no_run
//! use connreg_pgtest::proxy::FaultProxy;
//! use sqlx::postgres::PgConnectOptions;
//! use sqlx::Connection;
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let database = connreg_pgtest::TestDatabase::create().await?;
//! let server = database.server();
//! let upstream = tokio::net::lookup_host((server.host(), server.port()))
//!     .await?
//!     .next()
//!     .ok_or("no address")?;
//! let proxy = FaultProxy::start(upstream).await?;
//! let options: PgConnectOptions = database.url().parse()?;
//! let through_proxy = options.host("127.0.0.1").port(proxy.local_addr().port());
//! let mut connection = sqlx::PgConnection::connect_with(&through_proxy).await?;
//! proxy.cut_all(); // `connection` fails on its next use
//! # Ok(())
//! # }
//! ```
//!
//! The wire protocol is read only as far as these faults need
//! (`wire`): client and server messages are framed by their type byte and
//! length. A connection that negotiates TLS or GSSAPI encryption is still
//! proxied, cut, stalled and blackholed, but never recognised as
//! committing.
//!
//! Everything is bounded ([`crate::limits`]): open connections
//! ([`PROXY_CONNECTIONS_MAX`]; more are accepted and closed at once), the
//! bytes held per direction ([`PROXY_BUFFER_BYTES`]), the connect to the
//! server, the wait for a cut commit's reply, the length of one stall.
//!
//! The proxy runs on the tokio runtime that started it (which needs the IO
//! and time drivers). Dropping the last clone of the handle stops accepting
//! and closes every connection.
//!
//! # Modules
//!
//! - `wire`: message framing.
//! - `connection`: one proxied connection, both directions.

mod connection;
mod wire;

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinHandle};
use tokio::time::Instant;

use crate::limits::{PROXY_ACCEPT_RETRY_MS, PROXY_CONNECTIONS_MAX, PROXY_STALL_MS_MAX};

/// A handle on a running fault proxy; clones share it.
///
/// Made by [`FaultProxy::start`]. When the last clone drops, the proxy stops
/// accepting and closes every connection it holds.
#[derive(Debug, Clone)]
pub struct FaultProxy {
    handle: Arc<Handle>,
}

/// Counters of what the proxy has done since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProxyStats {
    /// Client connections accepted (refused ones included).
    pub accepted: u64,
    /// Connections closed by [`FaultProxy::cut_all`].
    pub cut: u64,
    /// Connections closed by an armed [`FaultProxy::cut_next_commit`], after
    /// their commit reached the server.
    pub commit_cuts: u64,
    /// Calls of [`FaultProxy::stall`].
    pub stalls: u64,
    /// Connections closed on accept because [`PROXY_CONNECTIONS_MAX`] were
    /// open.
    pub refused: u64,
}

/// Owned by the handles only: dropping it stops everything.
#[derive(Debug)]
struct Handle {
    control: Arc<Control>,
    local_addr: SocketAddr,
    acceptor: JoinHandle<()>,
}

/// What the handle and the connection tasks share.
#[derive(Debug)]
struct Control {
    /// Where new connections go; [`FaultProxy::switch_upstream`] moves it.
    upstream: Mutex<SocketAddr>,
    /// Open connections by number, to abort them.
    connections: Mutex<BTreeMap<u64, AbortHandle>>,
    next_connection: AtomicU64,
    /// Armed by `cut_next_commit`; taken by the first connection to commit.
    commit_cut_armed: AtomicBool,
    gate: watch::Sender<Gate>,
    accepted: AtomicU64,
    cut: AtomicU64,
    commit_cuts: AtomicU64,
    stalls: AtomicU64,
    refused: AtomicU64,
}

impl Control {
    /// Where new connections go now.
    fn upstream(&self) -> SocketAddr {
        *self
            .upstream
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Whether bytes may flow now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Gate {
    blackhole: bool,
    stalled_until: Option<Instant>,
}

impl FaultProxy {
    /// Starts a proxy to `upstream` (a PostgreSQL server's address),
    /// listening on a free port of `127.0.0.1`.
    ///
    /// Must be called inside a tokio runtime with the IO and time drivers;
    /// the proxy's tasks run on it.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<FaultProxy> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let local_addr = listener.local_addr()?;
        let control = Arc::new(Control {
            upstream: Mutex::new(upstream),
            connections: Mutex::new(BTreeMap::new()),
            next_connection: AtomicU64::new(0),
            commit_cut_armed: AtomicBool::new(false),
            gate: watch::Sender::new(Gate::default()),
            accepted: AtomicU64::new(0),
            cut: AtomicU64::new(0),
            commit_cuts: AtomicU64::new(0),
            stalls: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        });
        let acceptor = tokio::spawn(accept_loop(listener, Arc::clone(&control)));
        Ok(FaultProxy {
            handle: Arc::new(Handle {
                control,
                local_addr,
                acceptor,
            }),
        })
    }

    /// The address clients connect to instead of the server
    /// (`127.0.0.1:<port>`).
    pub fn local_addr(&self) -> SocketAddr {
        self.handle.local_addr
    }

    /// The server the proxy forwards new connections to.
    pub fn upstream(&self) -> SocketAddr {
        self.handle.control.upstream()
    }

    /// Points the proxy at another server, as a virtual IP or a pooler
    /// moves to a promoted standby: connections accepted from now on go to
    /// `upstream`, and every open one is closed (its client sees the
    /// connection drop, as when the old primary died). Returns how many
    /// were closed.
    pub fn switch_upstream(&self, upstream: SocketAddr) -> usize {
        *self
            .handle
            .control
            .upstream
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = upstream;
        self.cut_all()
    }

    /// Proxied connections open now.
    pub fn connections(&self) -> usize {
        self.handle.control.lock_connections().len()
    }

    /// Closes every open connection now, on both sides, and returns how many
    /// there were. Bytes held by a stall or blackhole on them are lost.
    /// Connections accepted afterwards are not affected.
    pub fn cut_all(&self) -> usize {
        let control = &self.handle.control;
        let cut = std::mem::take(&mut *control.lock_connections());
        for task in cut.values() {
            task.abort();
        }
        control.cut.fetch_add(cut.len() as u64, Ordering::Relaxed);
        cut.len()
    }

    /// Arms a one-shot commit cut: the next client message that ends a
    /// transaction, on any connection, is forwarded to the server; then that
    /// connection's server replies are dropped and, once the server has
    /// answered it (its `ReadyForQuery`) or after
    /// [`PROXY_COMMIT_REPLY_WAIT_MS`](crate::limits::PROXY_COMMIT_REPLY_WAIT_MS),
    /// the connection is closed on both sides. The client gets an I/O error
    /// where its commit's answer should be, though the server committed.
    ///
    /// A message ends a transaction when it is a simple `Query` whose text
    /// starts with `COMMIT` (any case, after white space), or an
    /// extended-protocol `Sync` whose batch either ran a `COMMIT` (a
    /// `Bind` of a statement whose `Parse` was one, cached or not) or ran
    /// any other statement but a `BEGIN` outside a transaction block (the
    /// last `ReadyForQuery` said idle: the `Sync` commits the implicit
    /// transaction of the statements before it). A `Sync` inside a block,
    /// one after a `BEGIN`, and one that only prepares statements
    /// (`Parse`, `Describe`, `Sync`) commit nothing and are let through.
    /// Arming twice before a commit passes still cuts one.
    pub fn cut_next_commit(&self) {
        self.handle
            .control
            .commit_cut_armed
            .store(true, Ordering::SeqCst);
    }

    /// Whether a [`cut_next_commit`](Self::cut_next_commit) is armed and has
    /// not happened yet.
    pub fn commit_cut_armed(&self) -> bool {
        self.handle.control.commit_cut_armed.load(Ordering::SeqCst)
    }

    /// Holds bytes in both directions, on every connection (new ones
    /// included), for `d` from now, then delivers them: data is delayed,
    /// not lost. A longer stall already running is not shortened. `d` is
    /// capped at [`PROXY_STALL_MS_MAX`] ms. Returns at once.
    pub fn stall(&self, d: Duration) {
        let d = d.min(Duration::from_millis(PROXY_STALL_MS_MAX));
        let until = Instant::now() + d;
        let control = &self.handle.control;
        control.gate.send_modify(|gate| {
            gate.stalled_until = Some(gate.stalled_until.map_or(until, |t| t.max(until)));
        });
        control.stalls.fetch_add(1, Ordering::Relaxed);
    }

    /// `true`: stops forwarding in both directions on every connection (new
    /// ones included), keeping the sockets open, until called with `false`;
    /// what was held is then delivered. Connections are still accepted.
    pub fn blackhole(&self, on: bool) {
        self.handle
            .control
            .gate
            .send_modify(|gate| gate.blackhole = on);
    }

    /// Counters since the proxy started.
    pub fn stats(&self) -> ProxyStats {
        let control = &self.handle.control;
        ProxyStats {
            accepted: control.accepted.load(Ordering::Relaxed),
            cut: control.cut.load(Ordering::Relaxed),
            commit_cuts: control.commit_cuts.load(Ordering::Relaxed),
            stalls: control.stalls.load(Ordering::Relaxed),
            refused: control.refused.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.acceptor.abort();
        // Taken out first: a task aborted here may drop (and unregister)
        // on this very thread.
        let tasks = std::mem::take(&mut *self.control.lock_connections());
        for task in tasks.values() {
            task.abort();
        }
        // Open bytes still held, so aborted tasks do not wait on the gate.
        self.control.gate.send_replace(Gate::default());
    }
}

impl Control {
    /// The connection table; a panic elsewhere while it was held leaves it
    /// usable (it is only ever inserted into and removed from).
    fn lock_connections(&self) -> MutexGuard<'_, BTreeMap<u64, AbortHandle>> {
        self.connections
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Removes a connection from the table when its task ends, however it ends
/// (finished, aborted, or dropped before it ever ran).
struct Registered {
    control: Arc<Control>,
    number: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.control.lock_connections().remove(&self.number);
    }
}

async fn accept_loop(listener: TcpListener, control: Arc<Control>) {
    loop {
        let client = match listener.accept().await {
            Ok((client, _)) => client,
            Err(_) => {
                // Out of descriptors or a connection reset before accept:
                // pause rather than spin, then go on.
                tokio::time::sleep(Duration::from_millis(PROXY_ACCEPT_RETRY_MS)).await;
                continue;
            }
        };
        control.accepted.fetch_add(1, Ordering::Relaxed);
        admit(client, &control);
    }
}

/// Starts proxying `client`, or closes it when the table is full.
fn admit(client: TcpStream, control: &Arc<Control>) {
    let mut table = control.lock_connections();
    if table.len() >= PROXY_CONNECTIONS_MAX {
        drop(table);
        control.refused.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let number = control.next_connection.fetch_add(1, Ordering::Relaxed);
    let registered = Registered {
        control: Arc::clone(control),
        number,
    };
    // Spawned and recorded under the lock, so the task's removal of itself
    // always comes after its insertion.
    let task = tokio::spawn(async move {
        let registered = registered;
        connection::serve(client, &registered.control).await;
    });
    table.insert(number, task.abort_handle());
}
