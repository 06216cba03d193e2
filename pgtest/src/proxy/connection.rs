//! One proxied connection: a pump each way, sharing what the commit cut and
//! the encryption answer need.
//!
//! Each pump reads at most [`PROXY_BUFFER_BYTES`] at a time, watches the
//! messages go by, waits while the gate is closed (stall, blackhole), then
//! writes what it read. It reads nothing more until that write is done, so
//! a held or slow direction pushes back through TCP instead of buffering.
//! The connection ends when either pump ends; both sockets close with it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until, timeout};

use super::wire::{
    CLIENT_FUNCTION_CALL, CLIENT_PARSE, CLIENT_QUERY, CLIENT_SYNC, Framer, GSSENC_REQUEST_CODE,
    Mode, SERVER_READY_FOR_QUERY, SSL_REQUEST_CODE, STATUS_IDLE, parse_query_text,
    starts_with_commit, startup_code,
};
use super::{Control, Gate};
use crate::limits::{PROXY_BUFFER_BYTES, PROXY_COMMIT_REPLY_WAIT_MS, PROXY_CONNECT_TIMEOUT_MS};

/// What the two pumps of one connection share.
#[derive(Debug)]
struct Link {
    /// An `SSLRequest` or `GSSENCRequest` went to the server; its next byte
    /// is the one-byte answer, outside any message.
    answer_pending: AtomicBool,
    /// The server accepted encryption: nothing more can be framed.
    opaque: AtomicBool,
    /// Client messages forwarded that the server answers with exactly one
    /// `ReadyForQuery` (`Query`, `Sync`, `FunctionCall`).
    requests: AtomicU64,
    /// `ReadyForQuery` messages the server sent.
    ready: AtomicU64,
    /// The last `ReadyForQuery` said idle (no transaction block open).
    idle: AtomicBool,
    /// Nonzero once a commit was cut here: the server's replies are dropped
    /// and the connection closes when `ready` reaches this count.
    cut_at_ready: AtomicU64,
}

/// Proxies `client` to the upstream server until either side closes, a
/// fault closes it, or the task is aborted.
pub(super) async fn serve(client: TcpStream, control: &Control) {
    let connect = TcpStream::connect(control.upstream());
    let server = match timeout(Duration::from_millis(PROXY_CONNECT_TIMEOUT_MS), connect).await {
        Ok(Ok(server)) => server,
        // The server is down or unreachable: the client sees its
        // connection close, as it would see a refused one.
        Ok(Err(_)) | Err(_) => return,
    };
    // Small protocol messages must not wait for Nagle's timer.
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let link = Link {
        answer_pending: AtomicBool::new(false),
        opaque: AtomicBool::new(false),
        requests: AtomicU64::new(0),
        ready: AtomicU64::new(0),
        idle: AtomicBool::new(true),
        cut_at_ready: AtomicU64::new(0),
    };
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::select! {
        () = client_to_server(client_read, server_write, &link, control) => {}
        () = server_to_client(server_read, client_write, &link, control) => {}
    }
}

async fn client_to_server(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    link: &Link,
    control: &Control,
) {
    let mut framer = Framer::client();
    let mut gate = control.gate.subscribe();
    let mut buffer = vec![0; PROXY_BUFFER_BYTES];
    // A `Parse` of `COMMIT` since the last `Sync`.
    let mut commit_parsed = false;
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        if link.opaque.load(Ordering::SeqCst) && framer.mode() != Mode::Opaque {
            framer.give_up();
        }
        let mut forward = read;
        let mut commit_cut = false;
        framer.feed(&buffer[..read], |ended| {
            let ends_transaction = match ended.kind {
                None => {
                    if matches!(
                        startup_code(ended.prefix),
                        Some(SSL_REQUEST_CODE | GSSENC_REQUEST_CODE)
                    ) {
                        // Before the request is written, so the answer is
                        // never read unannounced.
                        link.answer_pending.store(true, Ordering::SeqCst);
                    }
                    false
                }
                Some(CLIENT_QUERY) => {
                    link.requests.fetch_add(1, Ordering::SeqCst);
                    starts_with_commit(ended.prefix)
                }
                Some(CLIENT_PARSE) => {
                    commit_parsed |= starts_with_commit(parse_query_text(ended.prefix));
                    false
                }
                Some(CLIENT_SYNC) => {
                    link.requests.fetch_add(1, Ordering::SeqCst);
                    let ends = commit_parsed || link.idle.load(Ordering::SeqCst);
                    commit_parsed = false;
                    ends
                }
                Some(CLIENT_FUNCTION_CALL) => {
                    link.requests.fetch_add(1, Ordering::SeqCst);
                    false
                }
                Some(_) => false,
            };
            if ends_transaction
                && control
                    .commit_cut_armed
                    .compare_exchange(true, false, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
            {
                // Muted before the commit is written, so its reply can
                // never be forwarded.
                link.cut_at_ready
                    .store(link.requests.load(Ordering::SeqCst), Ordering::SeqCst);
                forward = ended.end;
                commit_cut = true;
                return false;
            }
            true
        });
        wait_open(&mut gate).await;
        if to.write_all(&buffer[..forward]).await.is_err() {
            return;
        }
        if commit_cut {
            control.commit_cuts.fetch_add(1, Ordering::Relaxed);
            // The other pump closes the connection once the server has
            // answered; this bounds the wait if it never does.
            tokio::time::sleep(Duration::from_millis(PROXY_COMMIT_REPLY_WAIT_MS)).await;
            return;
        }
    }
}

async fn server_to_client(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    link: &Link,
    control: &Control,
) {
    let mut framer = Framer::server();
    let mut gate = control.gate.subscribe();
    let mut buffer = vec![0; PROXY_BUFFER_BYTES];
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        let mut framed_from = 0;
        if link.answer_pending.swap(false, Ordering::SeqCst) {
            // `S` (TLS) or `G` (GSSAPI) accepted: encrypted from here on.
            if matches!(buffer[0], b'S' | b'G') {
                link.opaque.store(true, Ordering::SeqCst);
                framer.give_up();
            }
            framed_from = 1;
        }
        framer.feed(&buffer[framed_from..read], |ended| {
            if ended.kind == Some(SERVER_READY_FOR_QUERY) {
                link.idle
                    .store(ended.prefix.first() == Some(&STATUS_IDLE), Ordering::SeqCst);
                link.ready.fetch_add(1, Ordering::SeqCst);
            }
            true
        });
        let cut_at = link.cut_at_ready.load(Ordering::SeqCst);
        if cut_at != 0 {
            if link.ready.load(Ordering::SeqCst) >= cut_at {
                // The commit is answered, so it is done; the client never
                // hears of it.
                return;
            }
            continue;
        }
        wait_open(&mut gate).await;
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}

/// Returns once neither a blackhole nor a stall holds bytes back.
async fn wait_open(gate: &mut watch::Receiver<Gate>) {
    loop {
        let now = *gate.borrow_and_update();
        let until = match now {
            Gate {
                blackhole: true, ..
            } => None,
            Gate {
                stalled_until: Some(until),
                ..
            } if until > Instant::now() => Some(until),
            _ => return,
        };
        // Every turn waits for a change or a stall's end; the sender lives
        // as long as the proxy, and its loss opens the gate.
        match until {
            None => {
                if gate.changed().await.is_err() {
                    return;
                }
            }
            Some(until) => {
                tokio::select! {
                    () = sleep_until(until) => {}
                    changed = gate.changed() => {
                        if changed.is_err() {
                            return;
                        }
                    }
                }
            }
        }
    }
}
