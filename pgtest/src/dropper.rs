//! Dropping test databases off the dropping thread.
//!
//! `DROP DATABASE` waits until every backend of the server has acknowledged
//! a signal barrier, and a backend in the middle of password authentication
//! acknowledges only once its client answers. If `Drop` ran the statement
//! and waited on a runtime thread, a connection of that same runtime still
//! authenticating would never answer, and both would wait for the timeout.
//! So drops run on one background thread with a runtime of its own, each as
//! its own task; `Drop` only hands the job over and, where it waits at all,
//! waits without holding up its runtime's other tasks.

use std::sync::OnceLock;
use std::sync::mpsc as std_mpsc;
use std::thread;

use tokio::sync::mpsc;

use crate::error::ProvisionError;
use crate::limits::{DATABASE_DROP_TIMEOUT_S, DROP_QUEUE_MAX};

/// One database to drop.
#[derive(Debug)]
pub(crate) struct DropJob {
    /// Superuser URL of the maintenance database to run the drop from.
    pub(crate) server_url: String,
    /// The database.
    pub(crate) name: String,
    /// Told the outcome, if someone waits for it.
    pub(crate) done: Option<std_mpsc::SyncSender<Result<(), ProvisionError>>>,
}

/// Why a job could not be handed over.
#[derive(Debug)]
pub(crate) enum SubmitError {
    /// The background thread could not be started.
    NoDropper,
    /// [`DROP_QUEUE_MAX`] drops are already waiting.
    QueueFull,
}

impl std::fmt::Display for SubmitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SubmitError::NoDropper => f.write_str("the background dropper could not start"),
            SubmitError::QueueFull => {
                write!(f, "{DROP_QUEUE_MAX} drops are already waiting")
            }
        }
    }
}

static QUEUE: OnceLock<Option<mpsc::Sender<DropJob>>> = OnceLock::new();

/// Hands `job` to the background dropper without blocking.
pub(crate) fn submit(job: DropJob) -> Result<(), SubmitError> {
    let queue = QUEUE
        .get_or_init(start)
        .as_ref()
        .ok_or(SubmitError::NoDropper)?;
    queue.try_send(job).map_err(|_| SubmitError::QueueFull)
}

fn start() -> Option<mpsc::Sender<DropJob>> {
    let (sender, mut receiver) = mpsc::channel::<DropJob>(DROP_QUEUE_MAX);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    thread::Builder::new()
        .name("connreg-pgtest-dropper".to_owned())
        .spawn(move || {
            runtime.block_on(async move {
                while let Some(job) = receiver.recv().await {
                    tokio::spawn(run(job));
                }
            });
        })
        .ok()?;
    Some(sender)
}

async fn run(job: DropJob) {
    let outcome = drop_database(&job.server_url, &job.name).await;
    if let Err(error) = &outcome {
        eprintln!("connreg-pgtest: {error}; the database is left on the server");
    }
    if let Some(done) = job.done {
        // The waiter may have stopped waiting; the outcome is printed above.
        let _ = done.try_send(outcome);
    }
}

/// Drops database `name`, ending its connections first (PostgreSQL 13+).
pub(crate) async fn drop_database(server_url: &str, name: &str) -> Result<(), ProvisionError> {
    crate::database::execute_on(
        server_url,
        format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            crate::database::quote_identifier(name)
        ),
        &format!("drop database {name}"),
        DATABASE_DROP_TIMEOUT_S,
    )
    .await
}
