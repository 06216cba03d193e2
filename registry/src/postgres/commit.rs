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

use std::cell::RefCell;
use std::future::Future;

use sqlx::PgConnection;

use super::error::db;
use crate::error::Result;

/// How many sequences up to a lock-free read's `read_at` it reports as
/// unseen or not (migration 0015): a commit in progress further below
/// than this when the snapshot was taken is taken as shown.
pub const READ_UNSEEN_WINDOW: u64 = 256;

/// What [`observe_commit`] saw of one call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// The commit sequence of the transaction the call committed, if any.
    pub commit: Option<u64>,
    /// For an answer read from a snapshot without locks (a held route's
    /// `existing`, migration 0015): the highest observed commit that
    /// snapshot shows. Every commit it shows has a sequence at most this
    /// one; a commit with a lower sequence may still have been missing
    /// from it (taken, not yet committed).
    pub read_at: Option<u64>,
    /// With `read_at`: the sequences below it, among the last
    /// [`READ_UNSEEN_WINDOW`], that the snapshot did not show (commits
    /// in progress when it was taken, and sequences whose transaction
    /// rolled back), in order.
    pub read_unseen: Vec<u64>,
    /// True when the backend ran the call a second time on a fresh
    /// connection because the first attempt's connection was lost: the
    /// first attempt may have committed (a lost COMMIT reply).
    pub retried: bool,
}

tokio::task_local! {
    static OBSERVED: RefCell<Observed>;
}

/// Runs `call` (one call of a PostgreSQL registry) and returns its answer
/// with what was observed of it: the commit sequence of the transaction it
/// committed, the snapshot position of a lock-free read, and whether the
/// backend retried it.
pub async fn observe_commit<F: Future>(call: F) -> (F::Output, Observed) {
    OBSERVED
        .scope(RefCell::new(Observed::default()), async move {
            let answer = call.await;
            let seen = OBSERVED.with(|c| c.take());
            (answer, seen)
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

fn update(f: impl FnOnce(&mut Observed)) {
    let _ = OBSERVED.try_with(|c| f(&mut c.borrow_mut()));
}

/// Records `seq` as the observed call's commit (after its COMMIT returned).
pub(crate) fn record(seq: i64) {
    update(|o| o.commit = u64::try_from(seq).ok());
}

/// Records `seq` as the snapshot position of the observed call's
/// lock-free read.
pub(crate) fn record_read(seq: i64, unseen: &[i64]) {
    update(|o| {
        o.read_at = u64::try_from(seq).ok();
        o.read_unseen = unseen
            .iter()
            .filter_map(|s| u64::try_from(*s).ok())
            .collect();
    });
}

/// Reads, in the caller's transaction and its snapshot, the highest
/// observed commit that snapshot shows and the lower ones it does not
/// (migration 0015), and records them as the observed call's read
/// position.
pub(crate) async fn record_read_position(conn: &mut PgConnection) -> Result<()> {
    let (seq, unseen): (Option<i64>, Vec<i64>) =
        sqlx::query_as("SELECT * FROM connreg.data_read_position()")
            .fetch_one(conn)
            .await
            .map_err(db)?;
    if let Some(seq) = seq {
        record_read(seq, &unseen);
    }
    Ok(())
}

/// Records that the observed call was run again after a lost connection.
pub(crate) fn record_retry() {
    update(|o| o.retried = true);
}
