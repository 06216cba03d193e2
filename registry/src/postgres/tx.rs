//! Transactions that end explicitly on every path.
//!
//! A dropped sqlx transaction is not rolled back at once: the rollback is
//! queued on the connection and only sent when the pool gets the connection
//! back, from a background task. Until then the transaction's row and
//! advisory locks stay held, and the next call (on a busy or
//! current-thread runtime, the very next one) can run into them. So no call
//! of this backend drops an open transaction: [`transaction`] commits when
//! its body answers `Ok`, and on `Err` awaits the rollback before it
//! answers. A body cannot skip either with an early `return` or `?`,
//! because it never sees the transaction, only the connection inside it.
//!
//! A connection whose rollback fails, or whose call was abandoned midway
//! (its deadline passed, see `health`), is closed rather than returned to
//! the pool: the server then ends the transaction with the session.
//!
//! A transaction that cannot even begin because its pooled connection is
//! dead (after a server restart, say) has written nothing, so it is tried
//! once more on another connection (LOCK-6).

use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, PgPool, Postgres};

use super::commit;
use super::error::db;
use super::health;
use crate::error::Result;

/// Runs `body` in a new transaction on a connection of `pool`: committed
/// when `body` answers `Ok`, rolled back (and the rollback awaited) when it
/// answers `Err`. When the caller observes commit order
/// ([`commit::observe_commit`]), the commit sequence is taken inside the
/// transaction just before it commits.
pub(crate) async fn transaction<T, F>(pool: &PgPool, body: F) -> Result<T>
where
    F: AsyncFnOnce(&mut PgConnection) -> Result<T>,
{
    run(pool, true, body).await
}

/// [`transaction`] for a call that only reads: no commit sequence.
pub(crate) async fn read<T, F>(pool: &PgPool, body: F) -> Result<T>
where
    F: AsyncFnOnce(&mut PgConnection) -> Result<T>,
{
    run(pool, false, body).await
}

/// Closes the connection when dropped before [`Closing::keep`]: a call
/// abandoned midway (its future dropped) leaves no session behind that
/// might still hold its locks.
struct Closing<'c> {
    conn: &'c mut PoolConnection<Postgres>,
    keep: bool,
}

impl Closing<'_> {
    fn keep(&mut self) {
        self.keep = true;
    }
}

impl Drop for Closing<'_> {
    fn drop(&mut self) {
        if !self.keep {
            self.conn.close_on_drop();
        }
    }
}

/// A pooled connection on which a transaction has begun. A dead one is
/// closed and replaced, since nothing was written on it: after the server
/// ended every session, each idle connection in the pool is dead, so up to
/// the pool's size of them are tried and closed before a new one is
/// opened (one more attempt).
pub(crate) async fn begun(pool: &PgPool) -> Result<PoolConnection<Postgres>> {
    let attempts = pool.options().get_max_connections().saturating_add(1);
    let mut attempt = 1;
    loop {
        let mut conn = pool.acquire().await.map_err(db)?;
        match sqlx::query("BEGIN").execute(&mut *conn).await {
            Ok(_) => return Ok(conn),
            Err(e) => {
                let e = db(e);
                conn.close_on_drop();
                drop(conn);
                if !health::lost_connection(&e) || attempt >= attempts {
                    return Err(e);
                }
                attempt += 1;
            }
        }
    }
}

async fn run<T, F>(pool: &PgPool, writes: bool, body: F) -> Result<T>
where
    F: AsyncFnOnce(&mut PgConnection) -> Result<T>,
{
    let mut conn = begun(pool).await?;
    let mut closing = Closing {
        conn: &mut conn,
        keep: false,
    };
    let answer = body(&mut *closing.conn).await;
    let ended = end(&mut *closing.conn, writes, answer).await;
    if ended.1 {
        closing.keep();
    }
    ended.0
}

/// Commits on `Ok`, rolls back on `Err`; says whether the connection can
/// go back to the pool.
async fn end<T>(conn: &mut PgConnection, writes: bool, answer: Result<T>) -> (Result<T>, bool) {
    match answer {
        Ok(value) => {
            let seq = if writes && commit::observed() {
                match commit::take(&mut *conn).await {
                    Ok(seq) => Some(seq),
                    Err(e) => return (Err(e), false),
                }
            } else {
                None
            };
            match sqlx::query("COMMIT").execute(&mut *conn).await {
                Ok(_) => {
                    if let Some(seq) = seq {
                        commit::record(seq);
                    }
                    (Ok(value), true)
                }
                Err(e) => (Err(db(e)), false),
            }
        }
        Err(answer) => match sqlx::query("ROLLBACK").execute(&mut *conn).await {
            Ok(_) => (Err(answer), true),
            Err(e) => {
                tracing::warn!(error = %e, "rollback failed; closing the connection");
                (Err(answer), false)
            }
        },
    }
}

/// Runs `body` in a new transaction that is always rolled back (and the
/// rollback awaited), whatever it answers: for measurements that must
/// leave nothing behind.
pub(crate) async fn rolled_back<T, F>(pool: &PgPool, body: F) -> Result<T>
where
    F: AsyncFnOnce(&mut PgConnection) -> Result<T>,
{
    let mut conn = begun(pool).await?;
    let mut closing = Closing {
        conn: &mut conn,
        keep: false,
    };
    let answer = body(&mut *closing.conn).await;
    sqlx::query("ROLLBACK")
        .execute(&mut **closing.conn)
        .await
        .map_err(db)?;
    closing.keep();
    answer
}

/// Runs `body`, one data-plane function call, as its own statement
/// ([`single`]); or, when the caller observes commit order
/// ([`commit::observe_commit`]), inside a [`transaction`] that takes the
/// commit sequence before it commits.
pub(crate) async fn call<T, F>(pool: &PgPool, body: F) -> Result<T>
where
    F: AsyncFnOnce(&mut PgConnection) -> Result<T>,
{
    if super::commit::observed() {
        transaction(pool, body).await
    } else {
        single(pool, body).await
    }
}

/// Runs `body`, one read-only statement, as [`single`]; or, when the caller
/// observes commit order ([`commit::observe_commit`]), in a `REPEATABLE
/// READ` transaction that then reads, in the same snapshot, where that
/// snapshot falls in the commit order (LOCK-5). The statement is the same
/// on both paths.
pub(crate) async fn read_one<T, F>(pool: &PgPool, body: F) -> Result<T>
where
    F: AsyncFnOnce(&mut PgConnection) -> Result<T>,
{
    if !commit::observed() {
        return single(pool, body).await;
    }
    let mut conn = pool.acquire().await.map_err(db)?;
    let mut closing = Closing {
        conn: &mut conn,
        keep: false,
    };
    sqlx::query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .execute(&mut **closing.conn)
        .await
        .map_err(db)?;
    let answer = body(&mut *closing.conn).await;
    let position = match &answer {
        Ok(_) => commit::record_read_position(&mut *closing.conn).await,
        Err(_) => Ok(()),
    };
    sqlx::query("ROLLBACK")
        .execute(&mut **closing.conn)
        .await
        .map_err(db)?;
    closing.keep();
    position?;
    answer
}

/// Runs `body` (single statements, no transaction of its own) on a pooled
/// connection that is closed, not returned, if the call is abandoned
/// midway.
pub(crate) async fn single<T, F>(pool: &PgPool, body: F) -> Result<T>
where
    F: AsyncFnOnce(&mut PgConnection) -> Result<T>,
{
    let mut conn = pool.acquire().await.map_err(db)?;
    let mut closing = Closing {
        conn: &mut conn,
        keep: false,
    };
    let answer = body(&mut *closing.conn).await;
    closing.keep();
    answer
}
