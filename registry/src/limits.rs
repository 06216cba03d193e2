//! Every bound the registry enforces, in one place.
//!
//! Names end with their unit. Each constant says why it has its value; the
//! relations between them are asserted at compile time at the bottom. A
//! request past a limit gets [`Error::LimitExceeded`](crate::Error) naming
//! the limit and its maximum, and changes nothing.

/// Longest identifier, in bytes. Long enough for UUIDs with a prefix, short
/// enough to index cheaply.
pub const ID_BYTES_MAX: usize = 128;

/// Longest free-text field (owner, family, endpoint, peer identity, config
/// and secret references, digests), in bytes.
pub const TEXT_BYTES_MAX: usize = 512;

/// Longest version manifest, in bytes. Manifests are summaries, not bundles.
pub const MANIFEST_BYTES_MAX: usize = 16 * 1024;

/// Largest capability definition (summary plus schema), in bytes as
/// serialized JSON text (escapes counted), the unit page budgets use.
pub const DEFINITION_BYTES_MAX: usize = 32 * 1024;

/// Longest catalog search text, in bytes.
pub const SEARCH_TEXT_BYTES_MAX: usize = 256;

/// Most capabilities one version may implement, and most profiles.
pub const VERSION_CAPABILITIES_MAX: usize = 256;

/// Most admission scopes one binding reserves per route.
pub const BINDING_SCOPES_MAX: usize = 8;

/// Most bindings one tenant may hold for one capability. Bounds the
/// candidate set a resolve looks at.
pub const TENANT_CAPABILITY_BINDINGS_MAX: usize = 16;

/// Most replicas serving one instance. With the binding bound, caps the
/// rows one resolve reads at 16 × 1024.
pub const INSTANCE_REPLICAS_MAX: usize = 1024;

/// Largest replica capacity (concurrent reservations on one replica).
pub const REPLICA_CAPACITY_MAX: u32 = 10_000;

/// Largest admission scope limit.
pub const SCOPE_LIMIT_MAX: u32 = 1_000_000;

/// Default catalog page size, in items.
pub const PAGE_ITEMS_DEFAULT: u32 = 50;

/// Largest catalog page, in items.
pub const PAGE_ITEMS_MAX: u32 = 500;

/// Default catalog page size, in serialized bytes.
pub const PAGE_BYTES_DEFAULT: u32 = 256 * 1024;

/// Largest catalog page, in serialized bytes.
pub const PAGE_BYTES_MAX: u32 = 1024 * 1024;

/// Smallest page byte budget a caller may ask for: one definition of the
/// largest size plus its framing must always fit, or paging could stall.
pub const PAGE_BYTES_MIN: u32 = DEFINITION_BYTES_MAX as u32 + ENTRY_FRAMING_BYTES_MAX;

/// Upper bound of one catalog entry's bytes beyond its definition (ids,
/// profile list, JSON punctuation).
pub const ENTRY_FRAMING_BYTES_MAX: u32 =
    2 * ID_BYTES_MAX as u32 + VERSION_CAPABILITIES_MAX as u32 * (ID_BYTES_MAX as u32 + 3) + 128;

/// Longest continuation cursor, in bytes.
pub const CURSOR_BYTES_MAX: usize = 2 * ID_BYTES_MAX + 64;

/// Largest health sequence, revision or policy revision. Stored as a
/// signed 64-bit integer by the PostgreSQL backend, so both backends accept
/// exactly the same range.
pub const SEQUENCE_MAX: u64 = i64::MAX as u64;

/// Most changes in one publication. One publication is one transaction.
pub const PUBLICATION_CHANGES_MAX: usize = 1_000;

/// Most replicas one lease maintenance call marks offline.
pub const LEASE_MAINTENANCE_BATCH_MAX: u32 = 1_000;

/// Most reservations one `lease_maintain` call releases (LEASE-2): the
/// batch stops before the expired replica that would take it past this,
/// and answers `more`. At least [`REPLICA_CAPACITY_MAX`], so one replica's
/// reservations always fit in one call.
pub const LEASE_MAINTENANCE_RESERVATIONS_MAX: u32 = 10_000;

/// Longest lease a heartbeat may grant, in milliseconds.
pub const LEASE_TTL_MS_MAX: u64 = 10 * 60 * 1000;

/// How long a reservation is held, in milliseconds, before lease
/// maintenance releases it whoever still holds it (PIN-8), unless the
/// configuration says otherwise: one hour, far beyond any dispatch.
pub const RESERVATION_HOLD_MS_DEFAULT: u64 = 60 * 60 * 1000;

/// Shortest reservation hold a configuration may set, in milliseconds.
pub const RESERVATION_HOLD_MS_MIN: u64 = 100;

/// Longest reservation hold a configuration may set, in milliseconds:
/// seven days.
pub const RESERVATION_HOLD_MS_MAX: u64 = 7 * 24 * 60 * 60 * 1000;

/// Most attempts to lock a candidate replica when others hold the rows.
pub const ROUTE_LOCK_ATTEMPTS_MAX: u32 = 8;

/// Largest circuit threshold of consecutive unknown outcomes.
pub const CIRCUIT_THRESHOLD_MAX: u32 = 1_000;

/// Most entries the operator audit log keeps (oldest dropped first).
pub const AUDIT_ENTRIES_MAX: usize = 10_000;

/// Most audit entries one page returns
/// ([`AuditQuery::limit`](crate::request::AuditQuery::limit)).
pub const AUDIT_PAGE_ENTRIES_MAX: usize = 1_000;

/// Longest call deadline a PostgreSQL pool may be given, in ms: ten
/// minutes, above the longest statement a publication may need.
pub const CALL_DEADLINE_MS_MAX: u64 = 10 * 60 * 1000;

/// Most times the PostgreSQL publication tries for the catalog's exclusive
/// lock before it answers that the catalog stayed busy.
pub const PUBLICATION_LOCK_ATTEMPTS_MAX: u32 = 40;

/// Longest one attempt of a publication waits in the queue for the
/// catalog's exclusive lock, in ms. Shared requests that arrive meanwhile
/// queue behind it, so this is the most a queued publication can hold up
/// routing, on top of its own run time.
pub const PUBLICATION_LOCK_WAIT_MS: u32 = 20;

/// Pause between two attempts of a publication for the catalog lock, in
/// ms, times the attempt's number: routing runs freely in between.
pub const PUBLICATION_LOCK_BACKOFF_MS_PER_ATTEMPT: u32 = 5;

/// Most rows one full inspection returns (defined with [`Inspect`](crate::Inspect)).
pub use crate::inspect::INSPECT_ROWS_MAX;

const _: () = {
    assert!(PAGE_ITEMS_DEFAULT <= PAGE_ITEMS_MAX);
    assert!(PAGE_BYTES_MIN <= PAGE_BYTES_DEFAULT);
    assert!(PAGE_BYTES_DEFAULT <= PAGE_BYTES_MAX);
    assert!(SEARCH_TEXT_BYTES_MAX <= TEXT_BYTES_MAX);
    assert!(CURSOR_BYTES_MAX > ID_BYTES_MAX);
    assert!(ROUTE_LOCK_ATTEMPTS_MAX >= 1);
    assert!(PUBLICATION_LOCK_ATTEMPTS_MAX >= 1);
    // All attempts of one publication together stay within seconds.
    assert!(
        (PUBLICATION_LOCK_WAIT_MS as u64) * (PUBLICATION_LOCK_ATTEMPTS_MAX as u64)
            + (PUBLICATION_LOCK_BACKOFF_MS_PER_ATTEMPT as u64)
                * (PUBLICATION_LOCK_ATTEMPTS_MAX as u64)
                * (PUBLICATION_LOCK_ATTEMPTS_MAX as u64)
            <= 10_000
    );
    assert!(LEASE_MAINTENANCE_BATCH_MAX >= 1);
    assert!(LEASE_MAINTENANCE_RESERVATIONS_MAX >= REPLICA_CAPACITY_MAX);
    assert!(TENANT_CAPABILITY_BINDINGS_MAX * INSTANCE_REPLICAS_MAX <= 1 << 20);
};
