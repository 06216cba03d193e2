//! Just enough of the PostgreSQL wire protocol (version 3) to tell where one
//! message ends and what a few of them are.
//!
//! Every message after the first of a connection is a type byte and a
//! big-endian `i32` length that counts itself but not the type byte. The
//! first client messages (startup, `SSLRequest`, `GSSENCRequest`,
//! `CancelRequest`) have no type byte. Bytes are forwarded as they come; the
//! framer only watches them go by and keeps the first
//! [`PROXY_MESSAGE_PREFIX_BYTES_MAX`] bytes of each message's body.

use crate::limits::PROXY_MESSAGE_PREFIX_BYTES_MAX;

/// Code of an `SSLRequest`, the first message of a client asking for TLS.
pub(super) const SSL_REQUEST_CODE: u32 = 80_877_103;

/// Code of a `GSSENCRequest`, the first message of a client asking for GSSAPI
/// encryption.
pub(super) const GSSENC_REQUEST_CODE: u32 = 80_877_104;

/// Protocol 3.0 in a `StartupMessage`: typed messages follow.
const PROTOCOL_3_MAJOR: u32 = 3;

/// Client `Query` (simple protocol).
pub(super) const CLIENT_QUERY: u8 = b'Q';
/// Client `Parse` (extended protocol).
pub(super) const CLIENT_PARSE: u8 = b'P';
/// Client `Bind` (extended protocol): a prepared statement about to run.
pub(super) const CLIENT_BIND: u8 = b'B';
/// Client `Sync`, which ends an extended-protocol batch.
pub(super) const CLIENT_SYNC: u8 = b'S';
/// Client `FunctionCall`.
pub(super) const CLIENT_FUNCTION_CALL: u8 = b'F';
/// Server `ReadyForQuery`; its one body byte is the transaction status.
pub(super) const SERVER_READY_FOR_QUERY: u8 = b'Z';
/// Transaction status `I`: idle, outside any transaction block.
pub(super) const STATUS_IDLE: u8 = b'I';

/// One message whose last byte has just gone by.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ended<'a> {
    /// The type byte; `None` for an untyped startup-phase message.
    pub(super) kind: Option<u8>,
    /// Offset in the chunk just past the message's last byte.
    pub(super) end: usize,
    /// The first bytes of the message's body.
    pub(super) prefix: &'a [u8],
}

/// What a framer makes of the stream so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Untyped startup-phase messages (client side only).
    Startup,
    /// Typed messages.
    Typed,
    /// Encrypted or not understood: no longer framed.
    Opaque,
}

/// Message boundaries of one direction of one connection.
#[derive(Debug)]
pub(super) struct Framer {
    mode: Mode,
    header: [u8; 5],
    header_len: usize,
    body_left: u64,
    prefix: [u8; PROXY_MESSAGE_PREFIX_BYTES_MAX],
    prefix_len: usize,
}

impl Framer {
    /// The client side: untyped startup messages first.
    pub(super) fn client() -> Framer {
        Framer::new(Mode::Startup)
    }

    /// The server side: typed messages from the start (the one-byte answer
    /// to an `SSLRequest` is taken off before framing).
    pub(super) fn server() -> Framer {
        Framer::new(Mode::Typed)
    }

    fn new(mode: Mode) -> Framer {
        Framer {
            mode,
            header: [0; 5],
            header_len: 0,
            body_left: 0,
            prefix: [0; PROXY_MESSAGE_PREFIX_BYTES_MAX],
            prefix_len: 0,
        }
    }

    /// How the stream is being read.
    pub(super) fn mode(&self) -> Mode {
        self.mode
    }

    /// Stops framing: the rest of the stream is encrypted or unknown.
    pub(super) fn give_up(&mut self) {
        self.mode = Mode::Opaque;
    }

    fn header_size(&self) -> usize {
        match self.mode {
            Mode::Typed => 5,
            Mode::Startup | Mode::Opaque => 4,
        }
    }

    /// Watches `chunk` go by, calling `on_end` for every message that ends
    /// in it, in order. Stops early (returning `false`) when `on_end` does.
    pub(super) fn feed(&mut self, chunk: &[u8], mut on_end: impl FnMut(Ended<'_>) -> bool) -> bool {
        let mut at = 0;
        // Every turn consumes at least one byte (a header's last byte at
        // the least), so the loop is bounded by the chunk's length.
        while at < chunk.len() {
            if self.mode == Mode::Opaque {
                return true;
            }
            let header_size = self.header_size();
            if self.header_len < header_size {
                let take = (header_size - self.header_len).min(chunk.len() - at);
                self.header[self.header_len..self.header_len + take]
                    .copy_from_slice(&chunk[at..at + take]);
                self.header_len += take;
                at += take;
                if self.header_len < header_size {
                    return true;
                }
                let length_at = header_size - 4;
                let length = i32::from_be_bytes([
                    self.header[length_at],
                    self.header[length_at + 1],
                    self.header[length_at + 2],
                    self.header[length_at + 3],
                ]);
                if length < 4 {
                    // Not PostgreSQL as this framer knows it: forward
                    // without watching.
                    self.give_up();
                    return true;
                }
                self.body_left = u64::from(length.unsigned_abs()) - 4;
                self.prefix_len = 0;
            }
            let take = usize::try_from(self.body_left)
                .unwrap_or(usize::MAX)
                .min(chunk.len() - at);
            let room = PROXY_MESSAGE_PREFIX_BYTES_MAX - self.prefix_len;
            let kept = take.min(room);
            self.prefix[self.prefix_len..self.prefix_len + kept]
                .copy_from_slice(&chunk[at..at + kept]);
            self.prefix_len += kept;
            self.body_left -= take as u64;
            at += take;
            if self.body_left > 0 {
                return true;
            }
            let kind = (self.mode == Mode::Typed).then_some(self.header[0]);
            self.header_len = 0;
            if kind.is_none() {
                self.after_startup_message();
            }
            let ended = Ended {
                kind,
                end: at,
                prefix: &self.prefix[..self.prefix_len],
            };
            if !on_end(ended) {
                return false;
            }
        }
        true
    }

    /// After an untyped message: a startup message leads to typed ones; an
    /// encryption request leaves the framer waiting for another untyped one
    /// (unless the server's answer makes the stream opaque); anything else
    /// (a cancel request, an unknown code) ends what is understood.
    fn after_startup_message(&mut self) {
        let code = match self.prefix.get(..4) {
            Some(code) if self.prefix_len >= 4 => {
                u32::from_be_bytes([code[0], code[1], code[2], code[3]])
            }
            _ => {
                self.give_up();
                return;
            }
        };
        if code == SSL_REQUEST_CODE || code == GSSENC_REQUEST_CODE {
            return;
        }
        if code >> 16 == PROTOCOL_3_MAJOR {
            self.mode = Mode::Typed;
        } else {
            self.give_up();
        }
    }
}

/// The startup-phase code of an untyped message's prefix.
pub(super) fn startup_code(prefix: &[u8]) -> Option<u32> {
    let code = prefix.get(..4)?;
    Some(u32::from_be_bytes([code[0], code[1], code[2], code[3]]))
}

/// Whether SQL text starts with `word` (after white space, any case).
fn starts_with_word(text: &[u8], word: &[u8]) -> bool {
    let start = text
        .iter()
        .position(|byte| !byte.is_ascii_whitespace())
        .unwrap_or(text.len());
    text.len() >= start + word.len() && text[start..start + word.len()].eq_ignore_ascii_case(word)
}

/// Whether SQL text starts with `COMMIT` (after white space, any case).
pub(super) fn starts_with_commit(text: &[u8]) -> bool {
    starts_with_word(text, b"COMMIT")
}

/// Whether SQL text opens a transaction block (`BEGIN` or `START
/// TRANSACTION`, after white space, any case): run outside a block, it
/// commits nothing.
pub(super) fn starts_with_begin(text: &[u8]) -> bool {
    starts_with_word(text, b"BEGIN") || starts_with_word(text, b"START")
}

/// The first NUL-terminated string of `bytes` and what follows it; the
/// whole of `bytes` and nothing when it has no NUL (a cut-off prefix).
fn split_string(bytes: &[u8]) -> (&[u8], &[u8]) {
    match bytes.iter().position(|&byte| byte == 0) {
        Some(nul) => (&bytes[..nul], &bytes[nul + 1..]),
        None => (bytes, &[]),
    }
}

/// The statement name of a `Parse` body's prefix.
pub(super) fn parse_statement_name(prefix: &[u8]) -> &[u8] {
    split_string(prefix).0
}

/// The query text of a `Parse` body's prefix: past the statement name.
pub(super) fn parse_query_text(prefix: &[u8]) -> &[u8] {
    split_string(prefix).1
}

/// The statement name of a `Bind` body's prefix: past the portal name.
pub(super) fn bind_statement_name(prefix: &[u8]) -> &[u8] {
    split_string(split_string(prefix).1).0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut message = vec![kind];
        message.extend_from_slice(&(body.len() as i32 + 4).to_be_bytes());
        message.extend_from_slice(body);
        message
    }

    fn untyped(code: u32, rest: &[u8]) -> Vec<u8> {
        let mut message = Vec::new();
        message.extend_from_slice(&(rest.len() as i32 + 8).to_be_bytes());
        message.extend_from_slice(&code.to_be_bytes());
        message.extend_from_slice(rest);
        message
    }

    fn ends(framer: &mut Framer, stream: &[u8], chunk_bytes: usize) -> Vec<(Option<u8>, Vec<u8>)> {
        let mut seen = Vec::new();
        for chunk in stream.chunks(chunk_bytes) {
            framer.feed(chunk, |ended| {
                seen.push((ended.kind, ended.prefix.to_vec()));
                true
            });
        }
        seen
    }

    #[test]
    fn client_messages_are_found_whatever_the_chunking() {
        let mut stream = untyped(SSL_REQUEST_CODE, b"");
        stream.extend(untyped(3 << 16, b"user\0postgres\0\0"));
        stream.extend(typed(b'Q', b"commit\0"));
        stream.extend(typed(b'S', b""));
        for chunk_bytes in [1, 2, 3, 7, 1000] {
            let seen = ends(&mut Framer::client(), &stream, chunk_bytes);
            let kinds: Vec<_> = seen.iter().map(|(kind, _)| *kind).collect();
            assert_eq!(kinds, [None, None, Some(b'Q'), Some(b'S')], "{chunk_bytes}");
            assert!(starts_with_commit(&seen[2].1));
        }
    }

    #[test]
    fn a_cancel_request_ends_the_framing() {
        let mut framer = Framer::client();
        ends(&mut framer, &untyped(80_877_102, &[0; 8]), 100);
        assert_eq!(framer.mode(), Mode::Opaque);
    }

    #[test]
    fn commit_is_recognised_in_any_case_after_white_space() {
        assert!(starts_with_commit(b"  \ncOmMiT;"));
        assert!(!starts_with_commit(b"COMMI"));
        assert!(!starts_with_commit(b"select 'COMMIT'"));
        assert_eq!(parse_query_text(b"sqlx_s_1\0COMMIT\0"), b"COMMIT\0");
        assert_eq!(parse_statement_name(b"sqlx_s_1\0COMMIT\0"), b"sqlx_s_1");
        assert_eq!(bind_statement_name(b"\0sqlx_s_1\0\0\0"), b"sqlx_s_1");
        assert_eq!(bind_statement_name(b"\0\0\0\0"), b"");
        assert!(starts_with_begin(b"BEGIN"));
        assert!(starts_with_begin(b" start transaction"));
        assert!(!starts_with_begin(b"SELECT 'BEGIN'"));
    }
}
