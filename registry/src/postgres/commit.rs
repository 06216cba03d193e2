//! Commit order: which of two calls the database committed first.
//!
//! A harness that checks answers against the store (the simulator's
//! PostgreSQL tier) must replay them in the order the database committed
//! them, not the order they came back. [`observe_commit`] runs one backend
//! call and returns, beside its answer, a sequence value the call took
//! inside its transaction after every lock it needed, as the transaction's
//! last statement (`connreg.commit_order`, migration 0007). Two calls that
//! touch one row or lock get their values in the order they committed; two
//! that touch nothing in common commute, so their order does not matter.
//! A call that committed nothing (every error answer) gets `None`.
//!
//! Outside [`observe_commit`] no sequence is taken: serving paths pay
//! nothing for it.

use std::cell::Cell;
use std::future::Future;

use sqlx::PgConnection;

use super::error::db;
use crate::error::Result;

tokio::task_local! {
    static OBSERVED: Cell<Option<u64>>;
}

/// Runs `call` (one call of a PostgreSQL registry) and returns its answer
/// with the commit sequence of the transaction it committed, if any.
pub async fn observe_commit<F: Future>(call: F) -> (F::Output, Option<u64>) {
    OBSERVED
        .scope(Cell::new(None), async move {
            let answer = call.await;
            let seq = OBSERVED.with(Cell::get);
            (answer, seq)
        })
        .await
}

/// True inside [`observe_commit`].
pub(crate) fn observed() -> bool {
    OBSERVED.try_with(|_| ()).is_ok()
}

/// Takes the next commit sequence, inside the caller's transaction.
pub(crate) async fn take(conn: &mut PgConnection) -> Result<i64> {
    sqlx::query_scalar("SELECT connreg.data_commit_order()")
        .fetch_one(conn)
        .await
        .map_err(db)
}

/// Records `seq` as the observed call's commit (after its COMMIT returned).
pub(crate) fn record(seq: i64) {
    let _ = OBSERVED.try_with(|c| c.set(u64::try_from(seq).ok()));
}
