//! Goal: a pg_auto_failover formation (a monitor, a primary and its
//! synchronous-quorum secondary) starts from the installed Debian packages;
//! when the primary crashes the monitor promotes the secondary by itself,
//! within a bound, with every acknowledged commit on it; and dropping the
//! formation leaves no process and no folder behind.
//!
//! Never skipped: without `pg_autoctl` the start fails with a message naming
//! the Debian packages to install.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use connreg_pgtest::{AutoFailoverFormation, LocalOptions, ProvisionError};
use sqlx::{Connection, PgConnection};

/// Longest the monitor may take, from the crash, to have the secondary
/// take writes (about 5 s with the monitor as the formation tunes it).
const FAILOVER_BOUND: Duration = Duration::from_secs(60);

/// The rows of the table the test writes on the primary, as `1,2`.
const ACKED_ROWS: &str = "SELECT string_agg(id::text, ',') FROM acked";

/// One text value `sql` reads on the server of `url`.
async fn scalar(url: &str, sql: &str) -> String {
    let mut c = PgConnection::connect(url)
        .await
        .unwrap_or_else(|e| panic!("{url} accepts connections: {e}"));
    sqlx::query_scalar::<_, String>(sql)
        .fetch_one(&mut c)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Runs a blocking call of the formation off the runtime's threads.
async fn blocking<T: Send + 'static>(
    formation: &Arc<AutoFailoverFormation>,
    call: impl FnOnce(&AutoFailoverFormation) -> T + Send + 'static,
) -> T {
    let formation = Arc::clone(formation);
    tokio::task::spawn_blocking(move || call(&formation))
        .await
        .expect("the formation's call does not panic")
}

/// The processes whose command line names `dir`.
fn processes_naming(dir: &Path) -> Vec<String> {
    let dir = dir.display().to_string();
    std::fs::read_dir("/proc")
        .expect("/proc lists processes")
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|entry| {
            let bytes = std::fs::read(entry.path().join("cmdline")).ok()?;
            let line = String::from_utf8_lossy(&bytes).replace('\0', " ");
            line.contains(&dir)
                .then(|| format!("{}: {line}", entry.file_name().to_string_lossy()))
        })
        .collect()
}

#[tokio::test]
async fn a_formation_fails_over_a_crashed_primary_by_itself_with_every_acknowledged_commit() {
    // spec: SIM-4
    let began = Instant::now();
    let formation = Arc::new(
        tokio::task::spawn_blocking(|| {
            AutoFailoverFormation::start(LocalOptions {
                fsync: true,
                ..LocalOptions::default()
            })
        })
        .await
        .expect("the start does not panic")
        .expect("a pg_auto_failover formation starts"),
    );
    eprintln!(
        "formation started in {:.2} s (start() says {:.2} s)",
        began.elapsed().as_secs_f64(),
        formation.startup().as_secs_f64()
    );
    let dir = formation.dir().to_owned();
    let primary_port = blocking(&formation, |f| f.primary_port())
        .await
        .expect("the monitor names a primary");
    let [node1, node2] = formation.node_ports();
    assert_eq!(primary_port, node1, "node1 starts as the primary");
    let primary_url = formation.database_url(node1, "postgres");
    let secondary_url = formation.database_url(node2, "postgres");
    assert_eq!(
        scalar(&primary_url, "SELECT pg_is_in_recovery()::text").await,
        "false"
    );
    assert_eq!(
        scalar(&secondary_url, "SELECT pg_is_in_recovery()::text").await,
        "true"
    );
    let report = blocking(&formation, |f| f.replication_report())
        .await
        .expect("a replication report");
    assert!(report.contains("synchronous_commit=on"), "{report}");
    assert!(
        report.contains("synchronous_standby_names=ANY 1 ("),
        "{report}"
    );
    assert!(report.contains("sync_state=quorum"), "{report}");
    assert!(report.contains("reported=primary"), "{report}");
    assert!(report.contains("reported=secondary"), "{report}");

    let mut primary = PgConnection::connect(&primary_url).await.unwrap();
    // The formation's synchronous_commit = on returns once the secondary
    // has the commit on disk; remote_apply also waits for it to be visible
    // there, so the secondary is read without waiting.
    sqlx::raw_sql(
        "SET synchronous_commit = remote_apply; \
         CREATE TABLE acked (id int PRIMARY KEY); INSERT INTO acked VALUES (1)",
    )
    .execute(&mut primary)
    .await
    .expect("the primary takes writes");
    assert_eq!(
        scalar(&secondary_url, ACKED_ROWS).await,
        "1",
        "the acknowledged row is on the synchronous secondary"
    );

    let crashed = blocking(&formation, |f| f.crash_primary())
        .await
        .expect("the primary crashes");
    assert_eq!(crashed, node1);
    let (new_primary, without_primary) = blocking(&formation, move |f| {
        f.wait_for_new_primary(crashed, FAILOVER_BOUND)
    })
    .await
    .expect("the monitor promotes the secondary");
    eprintln!(
        "failover: node2 took writes {:.2} s after the crash of node1",
        without_primary.as_secs_f64()
    );
    assert_eq!(new_primary, node2);
    assert!(without_primary < FAILOVER_BOUND, "{without_primary:?}");
    assert_eq!(
        blocking(&formation, |f| f.primary_port()).await.unwrap(),
        node2,
        "the monitor names node2 primary"
    );
    assert!(
        sqlx::query("SELECT 1").execute(&mut primary).await.is_err(),
        "a session on the crashed primary is gone"
    );
    assert!(
        PgConnection::connect(&primary_url).await.is_err(),
        "the crashed node refuses connections"
    );
    assert_eq!(
        scalar(&secondary_url, ACKED_ROWS).await,
        "1",
        "the acknowledged row survived the failover"
    );
    let mut promoted = PgConnection::connect(&secondary_url).await.unwrap();
    sqlx::query("INSERT INTO acked VALUES (2)")
        .execute(&mut promoted)
        .await
        .expect("the new primary takes writes");
    promoted.close().await.unwrap();
    let again = blocking(&formation, |f| f.crash_primary()).await;
    assert!(
        matches!(again, Err(ProvisionError::InvalidSetting { .. })),
        "{again:?}"
    );

    let formation = Arc::into_inner(formation).expect("no other handle is left");
    let dropping = Instant::now();
    tokio::task::spawn_blocking(move || drop(formation))
        .await
        .expect("dropping does not panic");
    eprintln!(
        "formation dropped in {:.2} s",
        dropping.elapsed().as_secs_f64()
    );
    assert!(!dir.exists(), "{} is deleted", dir.display());
    let left = processes_naming(&dir);
    assert!(left.is_empty(), "processes left: {left:#?}");
}
