//! Lock keys: the project's own key space.
//!
//! Keys of identifiers are the first four bytes of their MD5: fixed across
//! processes and releases. Two identifiers with one key only serialize
//! with each other, which is safe. All locks are transaction locks,
//! released at commit or rollback.
//!
//! The data role's functions take an action's and an instance's lock as a
//! row lock on `connreg.protocol_locks` (migration 0013): the row of the
//! class ([`LOCK_CLASS_ACTION`], [`LOCK_CLASS_INSTANCE`]) and [`slot`] of
//! the identifier. Only the protocol owner may lock those rows, so a
//! data-role session cannot hold a key the protocol waits for (AUTH-6);
//! the advisory locks of migrations 0008..0012, which every role may take,
//! are no longer used for them. Start-up checks the classes
//! (`connreg.data_protocol_limits`). The table is unlogged (migration
//! 0017), so locking a row writes no WAL; a crash or a promotion empties
//! it, and `connreg.protocol_lock` makes every row again before it locks
//! when its row is missing (lease maintenance does so at its start). The setup steps still use the
//! two-int advisory form with a class from [`LOCK_CLASS_BASE`], which can
//! never collide with sqlx's migrator lock (the bigint form).

use md5::{Digest, Md5};
use sqlx::PgConnection;

use super::error::db;
use crate::error::Result;

/// `"cnr\0"`: the project's class ids are this plus a small number.
pub const LOCK_CLASS_BASE: i32 = 0x636e_7200;

/// The store-wide catalog publication lock of migrations 0004..0007:
/// exclusive for publishers, shared for readers (CAT-4). Since 0008 the
/// catalog lock is a table lock on `connreg.catalog_lock` instead, which
/// the data role cannot take; this class is no longer used.
pub const LOCK_CLASS_CATALOG: i32 = LOCK_CLASS_BASE + 1;
/// The one key of [`LOCK_CLASS_CATALOG`].
pub const CATALOG_KEY: i32 = 0;
/// One action's decisions and settlements (ROUTE-3, SETTLE-2).
pub const LOCK_CLASS_ACTION: i32 = LOCK_CLASS_BASE + 2;
/// One instance's replica registrations (the replicas-per-instance limit).
pub const LOCK_CLASS_INSTANCE: i32 = LOCK_CLASS_BASE + 3;

/// Slots per class of `connreg.protocol_locks` (migration 0013): an
/// identifier's lock is the row of its class and `key(id) & (SLOTS - 1)`.
pub const PROTOCOL_LOCK_SLOTS: i32 = 65_536;

/// Longest any data-plane function waits for one lock, in ms: each fixes
/// its own `lock_timeout` to this (migration 0013), whatever the session
/// set. Above a decision's whole run ([`ROUTE_DECISION_MS_MAX`]), so a
/// resolve waiting for its action's lock outlasts the holder.
///
/// [`ROUTE_DECISION_MS_MAX`]: super::routing::ROUTE_DECISION_MS_MAX
pub const PROTOCOL_LOCK_WAIT_MS: u32 = 2_500;

/// The row of `connreg.protocol_locks` that is `id`'s lock in `class`.
pub fn slot(id: &str) -> i32 {
    key(id) & (PROTOCOL_LOCK_SLOTS - 1)
}

/// Control-plane setup steps that must not run twice at once (granting
/// the data role its privileges rewrites catalog rows of PostgreSQL's own).
pub const LOCK_CLASS_SETUP: i32 = LOCK_CLASS_BASE + 4;

/// The lock key of an identifier.
pub fn key(id: &str) -> i32 {
    let digest = Md5::digest(id.as_bytes());
    i32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]])
}

/// The publication lock, exclusive, waiting in the queue at most
/// `wait_ms`: false when it was not granted in that time. The caller's
/// transaction is still usable either way (the wait runs in a savepoint),
/// and its `lock_timeout` is as it was. Since migration 0008 the lock is a
/// table lock on `connreg.catalog_lock`, which only the control role and
/// the data-plane functions' owner may take.
pub(crate) async fn catalog_exclusive_within(
    conn: &mut PgConnection,
    wait_ms: u32,
) -> Result<bool> {
    let granted: bool = sqlx::query_scalar("SELECT connreg.catalog_lock_exclusive($1)")
        .bind(i32::try_from(wait_ms).unwrap_or(i32::MAX))
        .fetch_one(conn)
        .await
        .map_err(db)?;
    Ok(granted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_a_fixed_function_of_the_identifier() {
        // md5("act-1") = 2ea5f2e3...
        assert_eq!(key("act-1"), key("act-1"));
        assert_ne!(key("act-1"), key("act-2"));
        let digest = Md5::digest(b"act-1");
        assert_eq!(
            key("act-1").to_be_bytes(),
            [digest[0], digest[1], digest[2], digest[3]]
        );
    }
}
