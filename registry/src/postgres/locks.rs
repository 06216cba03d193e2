//! Advisory lock keys: the project's own key space.
//!
//! Every lock uses the two-int form `(class, key)` with a class from
//! [`LOCK_CLASS_BASE`], so it can never collide with sqlx's migrator lock,
//! which uses the bigint form (PostgreSQL keeps the two forms apart), nor
//! with another application's classes by accident. Keys of identifiers are
//! the first four bytes of their MD5: fixed across processes and releases.
//! Two identifiers with one key only serialize with each other, which is
//! safe. All are transaction locks, released at commit or rollback. The
//! resolve function (migration 0004) takes the action and catalog locks
//! with the classes and keys the backend passes it from here.

use md5::{Digest, Md5};
use sqlx::PgConnection;

use super::error::db;
use crate::error::Result;

/// `"cnr\0"`: the project's class ids are this plus a small number.
pub const LOCK_CLASS_BASE: i32 = 0x636e_7200;

/// The store-wide catalog publication lock: exclusive for publishers,
/// shared for readers (CAT-4).
pub const LOCK_CLASS_CATALOG: i32 = LOCK_CLASS_BASE + 1;
/// The one key of [`LOCK_CLASS_CATALOG`].
pub const CATALOG_KEY: i32 = 0;
/// One action's decisions and settlements (ROUTE-3, SETTLE-2).
pub const LOCK_CLASS_ACTION: i32 = LOCK_CLASS_BASE + 2;
/// One instance's replica registrations (the replicas-per-instance limit).
pub const LOCK_CLASS_INSTANCE: i32 = LOCK_CLASS_BASE + 3;

/// Control-plane setup steps that must not run twice at once (granting
/// the data role its privileges rewrites catalog rows of PostgreSQL's own).
pub const LOCK_CLASS_SETUP: i32 = LOCK_CLASS_BASE + 4;

/// The lock key of an identifier.
pub fn key(id: &str) -> i32 {
    let digest = Md5::digest(id.as_bytes());
    i32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]])
}

/// Serializes on one action (settlement).
pub(crate) async fn action(conn: &mut PgConnection, action: &str) -> Result<()> {
    exclusive(conn, LOCK_CLASS_ACTION, key(action)).await
}

/// The admission counter rows of `scopes`, locked in scope order, waiting
/// for them (LOCK-1: every writer of counters takes them this way, after
/// any replica row it needs). Nothing to do for no scopes.
pub(crate) async fn counters(conn: &mut PgConnection, scopes: &[String]) -> Result<()> {
    if scopes.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "SELECT scope_id FROM connreg.admission_counters
         WHERE scope_id = ANY($1) ORDER BY scope_id FOR UPDATE",
    )
    .bind(scopes)
    .fetch_all(conn)
    .await
    .map_err(db)?;
    Ok(())
}

/// Serializes registrations of one instance's replicas.
pub(crate) async fn instance(conn: &mut PgConnection, instance: &str) -> Result<()> {
    exclusive(conn, LOCK_CLASS_INSTANCE, key(instance)).await
}

/// The publication lock, exclusive, waiting in the queue at most
/// `wait_ms`: false when it was not granted in that time. The caller's
/// transaction is still usable either way (the wait runs in a savepoint),
/// and its `lock_timeout` is as it was.
pub(crate) async fn catalog_exclusive_within(
    conn: &mut PgConnection,
    wait_ms: u32,
) -> Result<bool> {
    let granted: bool =
        sqlx::query_scalar("SELECT connreg.catalog_lock_exclusive_within($1, $2, $3)")
            .bind(LOCK_CLASS_CATALOG)
            .bind(CATALOG_KEY)
            .bind(i32::try_from(wait_ms).unwrap_or(i32::MAX))
            .fetch_one(conn)
            .await
            .map_err(db)?;
    Ok(granted)
}

/// The publication lock, shared: a reader's view of one revision.
pub(crate) async fn catalog_shared(conn: &mut PgConnection) -> Result<()> {
    sqlx::query("SELECT pg_advisory_xact_lock_shared($1, $2)")
        .bind(LOCK_CLASS_CATALOG)
        .bind(CATALOG_KEY)
        .execute(conn)
        .await
        .map_err(db)?;
    Ok(())
}

async fn exclusive(conn: &mut PgConnection, class: i32, key: i32) -> Result<()> {
    sqlx::query("SELECT pg_advisory_xact_lock($1, $2)")
        .bind(class)
        .bind(key)
        .execute(conn)
        .await
        .map_err(db)?;
    Ok(())
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
