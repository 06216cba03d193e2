//! Every bound the directory puts on documents, names and retries, in one
//! place.
//!
//! Units go last in names. A document or name past a bound is refused with
//! an error that names the bound; nothing is truncated silently.

/// Largest `router-instance-directory.v1` document accepted, in bytes (1 MiB).
///
/// The document is read whole on every invocation, so its size is paid per
/// request. A directory for one router deployment lists a few releases with a
/// few replicas each and fits in a few kilobytes; 1 MiB leaves two orders of
/// magnitude of room while keeping a per-invocation read cheap.
pub const DOCUMENT_BYTES_MAX: usize = 1024 * 1024;

/// Most bytes the file source reads of a document, in bytes: one past
/// [`DOCUMENT_BYTES_MAX`], which is enough to know a larger file is too
/// large without reading the rest of it (a 64 MiB file costs what a
/// 1 MiB + 1 byte file does).
pub const DOCUMENT_READ_BYTES_MAX: usize = DOCUMENT_BYTES_MAX + 1;

/// Longest one read of the document by the file source may take, in
/// milliseconds: from looking the path up to the last byte. Past it the
/// invocation fails closed (`DependencyError::TimedOut`) instead of waiting
/// on a hung mount or a slow device.
///
/// A local or configuration-mounted file of at most 1 MiB is read in well
/// under 10 ms; 1 s leaves room for a loaded machine while keeping a stuck
/// source from holding an invocation longer than a caller's own timeout is
/// likely to be. At most 10 s.
pub const DOCUMENT_READ_MS_MAX: u64 = 1_000;

/// Most reads of one file source that may be running at once, in reads.
///
/// A read that misses its deadline is abandoned, not cancelled: the
/// operating system may keep its thread blocked (a hung mount). This bound
/// keeps such threads from piling up: once it is reached, further reads fail
/// closed at once, without starting another, until the stuck ones return.
pub const DOCUMENT_READS_IN_FLIGHT_MAX: usize = 4;

/// Largest release target file the `connreg-router` binary accepts, in bytes.
///
/// A target is seven short fields; 64 KiB is generous and still small.
pub const TARGET_BYTES_MAX: usize = 64 * 1024;

/// Most targets (exact releases) one directory document may list.
pub const TARGETS_MAX: usize = 256;

/// Most instances one target may list.
///
/// Selection accepts exactly one ready endpoint, so a long list only adds
/// instances that are not ready; 64 covers a rolling replacement with room.
pub const INSTANCES_PER_TARGET_MAX: usize = 64;

/// Most named ports one instance may list.
pub const PORTS_PER_INSTANCE_MAX: usize = 16;

/// Longest value of one release identity field (agent ID, card version,
/// release ID, card digest, capability, credential audience), in bytes.
pub const IDENTITY_FIELD_BYTES_MAX: usize = 256;

/// Longest instance ID, in bytes: the length of a DNS name, so that a pod,
/// container or host name always fits.
pub const INSTANCE_ID_BYTES_MAX: usize = 253;

/// Longest host name accepted as an address, in bytes (RFC 1035).
pub const HOSTNAME_BYTES_MAX: usize = 253;

/// Longest label of a host name, in bytes (RFC 1035).
pub const HOSTNAME_LABEL_BYTES_MAX: usize = 63;

/// Longest port name, in bytes (an IANA service name, RFC 6335).
pub const PORT_NAME_BYTES_MAX: usize = 15;

/// Most attempts a streaming invocation makes to cancel its stream.
///
/// Cancellation goes to the captured target only and never to another
/// instance, so more attempts cannot find a better destination; three
/// absorb a transient refusal without letting a dead instance hold the
/// caller.
pub const CANCEL_ATTEMPTS_MAX: u32 = 3;

/// Longest a streaming invocation's cancellation may take, all attempts
/// together, in milliseconds. No attempt starts once it is spent, and each
/// attempt is told the time left, so a dead instance holds the caller about
/// this long at most, however many attempts remain. At most 10 s.
///
/// Two seconds let a refused first attempt be retried on a healthy network
/// without making a caller that is tearing a stream down wait on it.
pub const CANCEL_MS_MAX: u64 = 2_000;

/// Longest piece of a document (an object key or an unexpected value) that
/// an error message quotes, in bytes. A hostile document cannot make error
/// messages large.
pub const ERROR_EXCERPT_BYTES_MAX: usize = 64;

const _: () = {
    assert!(TARGET_BYTES_MAX <= DOCUMENT_BYTES_MAX);
    assert!(DOCUMENT_READ_BYTES_MAX == DOCUMENT_BYTES_MAX + 1);
    // A read gets some time, and never more than ten seconds.
    assert!(DOCUMENT_READ_MS_MAX >= 100);
    assert!(DOCUMENT_READ_MS_MAX <= 10_000);
    assert!(DOCUMENT_READS_IN_FLIGHT_MAX >= 1);
    assert!(DOCUMENT_READS_IN_FLIGHT_MAX <= 64);
    assert!(TARGETS_MAX >= 1);
    assert!(INSTANCES_PER_TARGET_MAX >= 1);
    assert!(PORTS_PER_INSTANCE_MAX >= 1);
    assert!(HOSTNAME_LABEL_BYTES_MAX < HOSTNAME_BYTES_MAX);
    // A port name is also a valid host name label.
    assert!(PORT_NAME_BYTES_MAX <= HOSTNAME_LABEL_BYTES_MAX);
    // Cancellation is attempted at least once and never unboundedly.
    assert!(CANCEL_ATTEMPTS_MAX >= 1);
    assert!(CANCEL_ATTEMPTS_MAX <= 10);
    assert!(CANCEL_MS_MAX >= 100);
    assert!(CANCEL_MS_MAX <= 10_000);
    // A quoted excerpt must be able to show a whole port name.
    assert!(ERROR_EXCERPT_BYTES_MAX >= PORT_NAME_BYTES_MAX);
};
