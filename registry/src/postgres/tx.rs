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
//! A connection whose rollback fails is closed rather than returned to the
//! pool: the server then ends the transaction with the session.

use sqlx::pool::PoolConnection;
use sqlx::{Acquire, PgConnection, PgPool, Postgres};

use super::commit;
use super::error::db;
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
    let mut conn = pool.acquire().await.map_err(db)?;
    run(&mut conn, true, body).await
}

/// [`transaction`] for a call that only reads: no commit sequence.
pub(crate) async fn read<T, F>(pool: &PgPool, body: F) -> Result<T>
where
    F: AsyncFnOnce(&mut PgConnection) -> Result<T>,
{
    let mut conn = pool.acquire().await.map_err(db)?;
    run(&mut conn, false, body).await
}

async fn run<T, F>(conn: &mut PoolConnection<Postgres>, writes: bool, body: F) -> Result<T>
where
    F: AsyncFnOnce(&mut PgConnection) -> Result<T>,
{
    let mut tx = conn.begin().await.map_err(db)?;
    match body(&mut tx).await {
        Ok(value) => {
            if writes && commit::observed() {
                let seq = commit::take(&mut tx).await?;
                tx.commit().await.map_err(db)?;
                commit::record(seq);
            } else {
                tx.commit().await.map_err(db)?;
            }
            Ok(value)
        }
        Err(answer) => {
            if let Err(e) = tx.rollback().await {
                tracing::warn!(error = %e, "rollback failed; closing the connection");
                conn.close_on_drop();
            }
            Err(answer)
        }
    }
}

/// Runs `body` in a new transaction that is always rolled back (and the
/// rollback awaited), whatever it answers: for measurements that must
/// leave nothing behind.
pub(crate) async fn rolled_back<T, F>(pool: &PgPool, body: F) -> Result<T>
where
    F: AsyncFnOnce(&mut PgConnection) -> Result<T>,
{
    let mut conn = pool.acquire().await.map_err(db)?;
    let mut tx = conn.begin().await.map_err(db)?;
    let answer = body(&mut tx).await;
    if let Err(e) = tx.rollback().await {
        tracing::warn!(error = %e, "rollback failed; closing the connection");
        conn.close_on_drop();
        return Err(db(e));
    }
    answer
}
