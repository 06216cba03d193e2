//! One proxied connection: a pump each way, sharing what the commit cut and
//! the encryption answer need.
//!
//! Each pump reads at most [`PROXY_BUFFER_BYTES`] at a time, watches the
//! messages go by, waits while the gate is closed (stall, blackhole), then
//! writes what it read. It reads nothing more until that write is done, so
//! a held or slow direction pushes back through TCP instead of buffering.
//! The connection ends when either pump ends; both sockets close with it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until, timeout};

use super::wire::{
    CLIENT_BIND, CLIENT_FUNCTION_CALL, CLIENT_PARSE, CLIENT_QUERY, CLIENT_SYNC, Framer,
    GSSENC_REQUEST_CODE, Mode, SERVER_READY_FOR_QUERY, SSL_REQUEST_CODE, STATUS_IDLE,
    bind_statement_name, parse_query_text, parse_statement_name, starts_with_begin,
    starts_with_commit, startup_code,
};
use super::{Control, Gate};
use crate::limits::{
    PROXY_BLOCK_STATEMENTS_MAX, PROXY_BUFFER_BYTES, PROXY_COMMIT_REPLY_WAIT_MS,
    PROXY_CONNECT_TIMEOUT_MS,
};

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

/// What a prepared statement does to a transaction block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Effect {
    /// `BEGIN` or `START TRANSACTION`: outside a block it commits nothing.
    Begins,
    /// `COMMIT`.
    Commits,
    /// Anything else: outside a block, its `Sync` commits it.
    Other,
}

/// The client's extended-protocol traffic since its last `Sync`, and the
/// prepared statements that open or commit a block.
///
/// A `Sync` ends a transaction when its batch ran a `COMMIT`, or ran any
/// statement but a `BEGIN` outside a block (the implicit transaction of
/// an autocommit statement). A batch that only prepares (`Parse`,
/// `Describe`, `Sync`, as a client does before a statement's first run)
/// or only opens a block ends nothing.
#[derive(Debug, Default)]
struct Batches {
    /// Statement names whose `Parse` opened or committed a block; at most
    /// [`PROXY_BLOCK_STATEMENTS_MAX`]. Other statements are not kept.
    block_statements: BTreeMap<Vec<u8>, Effect>,
    /// The batch bound a `COMMIT`.
    commits: bool,
    /// The batch bound a statement other than `BEGIN` or `COMMIT`.
    runs_other: bool,
}

impl Batches {
    fn parsed(&mut self, prefix: &[u8]) {
        let name = parse_statement_name(prefix);
        let text = parse_query_text(prefix);
        let effect = if starts_with_commit(text) {
            Effect::Commits
        } else if starts_with_begin(text) {
            Effect::Begins
        } else {
            Effect::Other
        };
        if effect == Effect::Other {
            self.block_statements.remove(name);
        } else if self.block_statements.len() < PROXY_BLOCK_STATEMENTS_MAX
            || self.block_statements.contains_key(name)
        {
            self.block_statements.insert(name.to_vec(), effect);
        }
    }

    fn bound(&mut self, prefix: &[u8]) {
        let name = bind_statement_name(prefix);
        match self.block_statements.get(name) {
            Some(Effect::Commits) => self.commits = true,
            Some(Effect::Begins) => {}
            Some(Effect::Other) | None => self.runs_other = true,
        }
    }

    /// Whether the `Sync` now going by ends a transaction; `idle` is
    /// whether the last `ReadyForQuery` said no block is open.
    fn synced(&mut self, idle: bool) -> bool {
        let ends = self.commits || (idle && self.runs_other);
        self.commits = false;
        self.runs_other = false;
        ends
    }
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
    let mut batches = Batches::default();
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
                    batches.parsed(ended.prefix);
                    false
                }
                Some(CLIENT_BIND) => {
                    batches.bound(ended.prefix);
                    false
                }
                Some(CLIENT_SYNC) => {
                    link.requests.fetch_add(1, Ordering::SeqCst);
                    batches.synced(link.idle.load(Ordering::SeqCst))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(name: &str, text: &str) -> Vec<u8> {
        format!("{name}\0{text}\0").into_bytes()
    }

    fn bind(name: &str) -> Vec<u8> {
        format!("\0{name}\0").into_bytes()
    }

    #[test]
    fn only_a_commit_or_an_autocommit_statement_ends_a_batch() {
        let mut batches = Batches::default();
        // Preparing ends nothing, in a block or out of one.
        batches.parsed(&parse("s1", "BEGIN"));
        assert!(!batches.synced(true));
        batches.parsed(&parse("s2", "commit"));
        assert!(!batches.synced(false));
        batches.parsed(&parse("s3", "insert into t values ($1)"));
        assert!(!batches.synced(false));
        // A cached BEGIN outside a block opens one; nothing is committed.
        batches.bound(&bind("s1"));
        assert!(!batches.synced(true));
        // A statement inside the block commits nothing; the COMMIT does.
        batches.bound(&bind("s3"));
        assert!(!batches.synced(false));
        batches.bound(&bind("s2"));
        assert!(batches.synced(false));
        // Outside a block, an ordinary statement commits itself.
        batches.bound(&bind("s3"));
        assert!(batches.synced(true));
        // The unnamed statement is whatever was parsed last.
        batches.parsed(&parse("", "COMMIT"));
        batches.bound(&bind(""));
        assert!(batches.synced(false));
        batches.parsed(&parse("", "select 1"));
        batches.bound(&bind(""));
        assert!(!batches.synced(false));
    }

    #[test]
    fn block_statements_are_bounded() {
        let mut batches = Batches::default();
        for i in 0..PROXY_BLOCK_STATEMENTS_MAX + 5 {
            batches.parsed(&parse(&format!("b{i}"), "BEGIN"));
        }
        assert_eq!(batches.block_statements.len(), PROXY_BLOCK_STATEMENTS_MAX);
        // One past the bound is taken as an ordinary statement.
        batches.bound(&bind(&format!("b{PROXY_BLOCK_STATEMENTS_MAX}")));
        assert!(batches.synced(true));
        // A kept name parsed again as something else is forgotten.
        batches.parsed(&parse("b0", "select 1"));
        assert_eq!(
            batches.block_statements.len(),
            PROXY_BLOCK_STATEMENTS_MAX - 1
        );
    }
}
