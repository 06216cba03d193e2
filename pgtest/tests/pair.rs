//! Goal: a primary and a streaming standby start from the installed
//! PostgreSQL, replicate synchronously or not as asked, and fail over: the
//! primary stops as a crash would, the standby is promoted and takes
//! writes, and with synchronous replication every commit a client saw
//! succeed is on it.

use std::sync::Arc;

use connreg_pgtest::{LocalOptions, ProvisionError, ReplicatedPair, Replication, Role};
use sqlx::{Connection, PgConnection};

async fn start(replication: Replication) -> Arc<ReplicatedPair> {
    Arc::new(
        tokio::task::spawn_blocking(move || {
            ReplicatedPair::start(
                LocalOptions {
                    fsync: true,
                    ..LocalOptions::default()
                },
                replication,
            )
        })
        .await
        .expect("the start does not panic")
        .expect("a replicated pair starts"),
    )
}

async fn scalar(url: &str, sql: &str) -> String {
    let mut c = PgConnection::connect(url)
        .await
        .expect("the server accepts connections");
    sqlx::query_scalar::<_, String>(sql)
        .fetch_one(&mut c)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

#[tokio::test]
async fn a_synchronous_pair_fails_over_with_every_acknowledged_commit() {
    // spec: SIM-4
    let pair = start(Replication::Synchronous).await;
    assert_eq!(pair.role(), Role::Original);
    let state = scalar(
        &pair.primary_url(),
        "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'connreg_standby'",
    )
    .await;
    assert_eq!(state, "sync");
    let mut primary = PgConnection::connect(&pair.primary_url()).await.unwrap();
    sqlx::raw_sql("CREATE TABLE acked (id int PRIMARY KEY)")
        .execute(&mut primary)
        .await
        .unwrap();
    for id in 0..200 {
        sqlx::query("INSERT INTO acked VALUES ($1)")
            .bind(id)
            .execute(&mut primary)
            .await
            .unwrap();
    }
    // remote_apply: the standby shows every acknowledged commit at once.
    let standby = pair.standby_database_url("postgres");
    assert_eq!(
        scalar(&standby, "SELECT count(*)::text FROM acked").await,
        "200"
    );
    let report = {
        let pair = Arc::clone(&pair);
        tokio::task::spawn_blocking(move || pair.replication_report())
            .await
            .unwrap()
            .unwrap()
    };
    assert!(
        report.contains("synchronous_commit=remote_apply"),
        "{report}"
    );
    assert!(
        report.contains("synchronous_standby_names=connreg_standby"),
        "{report}"
    );
    assert!(report.contains("sync_state=sync"), "{report}");

    let without_primary = {
        let pair = Arc::clone(&pair);
        tokio::task::spawn_blocking(move || pair.fail_over())
            .await
            .unwrap()
            .expect("the failover succeeds")
    };
    assert!(without_primary.as_secs() < 60, "{without_primary:?}");
    assert_eq!(pair.role(), Role::Promoted);
    assert_eq!(pair.primary_port(), pair.standby_port());
    assert!(
        sqlx::query("SELECT 1").execute(&mut primary).await.is_err(),
        "a session on the stopped primary is gone"
    );
    assert!(
        PgConnection::connect(&format!(
            "postgres://postgres@127.0.0.1:{}/postgres",
            pair.original_primary_port()
        ))
        .await
        .is_err(),
        "the old primary refuses connections"
    );
    let mut promoted = PgConnection::connect(&pair.primary_url()).await.unwrap();
    assert_eq!(
        scalar(&pair.primary_url(), "SELECT count(*)::text FROM acked").await,
        "200"
    );
    sqlx::query("INSERT INTO acked VALUES (200)")
        .execute(&mut promoted)
        .await
        .expect("the promoted standby takes writes");
    let again = {
        let pair = Arc::clone(&pair);
        tokio::task::spawn_blocking(move || pair.fail_over())
            .await
            .unwrap()
    };
    assert!(
        matches!(again, Err(ProvisionError::InvalidSetting { .. })),
        "{again:?}"
    );
}

#[tokio::test]
async fn an_asynchronous_pair_streams_without_waiting_for_the_standby() {
    // spec: SIM-4
    let pair = start(Replication::Asynchronous).await;
    let state = scalar(
        &pair.primary_url(),
        "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'connreg_standby'",
    )
    .await;
    assert_eq!(state, "async");
    assert_eq!(
        scalar(
            &pair.primary_url(),
            "SELECT current_setting('synchronous_standby_names')"
        )
        .await,
        ""
    );
    let mut primary = PgConnection::connect(&pair.primary_url()).await.unwrap();
    sqlx::raw_sql("CREATE TABLE t (id int); INSERT INTO t VALUES (1)")
        .execute(&mut primary)
        .await
        .unwrap();
    // The standby catches up by itself (streaming, not synchronous).
    let standby = pair.standby_database_url("postgres");
    let mut seen = String::new();
    for _ in 0..200 {
        let mut c = PgConnection::connect(&standby).await.unwrap();
        if let Ok(n) = sqlx::query_scalar::<_, String>("SELECT count(*)::text FROM t")
            .fetch_one(&mut c)
            .await
        {
            seen = n;
            if seen == "1" {
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(seen, "1");
}

#[tokio::test]
async fn a_fault_proxy_moves_to_the_promoted_standby_as_a_virtual_ip_would() {
    // spec: SIM-4
    use connreg_pgtest::proxy::FaultProxy;
    let pair = start(Replication::Synchronous).await;
    let at = |port: u16| std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let proxy = FaultProxy::start(at(pair.primary_port())).await.unwrap();
    let through = format!("postgres://postgres@{}/postgres", proxy.local_addr());
    let mut before = PgConnection::connect(&through).await.unwrap();
    sqlx::raw_sql("CREATE TABLE moved (id int); INSERT INTO moved VALUES (1)")
        .execute(&mut before)
        .await
        .unwrap();
    let in_recovery =
        |url: String| async move { scalar(&url, "SELECT pg_is_in_recovery()::text").await };
    assert_eq!(in_recovery(through.clone()).await, "false");
    {
        let pair = Arc::clone(&pair);
        tokio::task::spawn_blocking(move || pair.fail_over())
            .await
            .unwrap()
            .unwrap();
    }
    // The stopped primary closed the proxied session already; whatever is
    // still open is closed by the switch.
    proxy.switch_upstream(at(pair.primary_port()));
    assert_eq!(proxy.connections(), 0);
    assert_eq!(proxy.upstream(), at(pair.standby_port()));
    assert!(sqlx::query("SELECT 1").execute(&mut before).await.is_err());
    // The same address now reaches the promoted standby, which takes writes.
    assert_eq!(in_recovery(through.clone()).await, "false");
    let mut after = PgConnection::connect(&through).await.unwrap();
    sqlx::query("INSERT INTO moved VALUES (2)")
        .execute(&mut after)
        .await
        .unwrap();
    assert_eq!(
        scalar(&through, "SELECT count(*)::text FROM moved").await,
        "2"
    );
}

#[tokio::test]
async fn an_asynchronous_failover_after_the_standby_was_cut_off_loses_acknowledged_commits() {
    // spec: SIM-4
    let pair = start(Replication::Asynchronous).await;
    let mut primary = PgConnection::connect(&pair.primary_url()).await.unwrap();
    sqlx::raw_sql("CREATE TABLE acked (id int); INSERT INTO acked VALUES (1)")
        .execute(&mut primary)
        .await
        .unwrap();
    let standby = pair.standby_database_url("postgres");
    for _ in 0..200 {
        let mut c = PgConnection::connect(&standby).await.unwrap();
        if sqlx::query("SELECT 1 FROM acked")
            .execute(&mut c)
            .await
            .is_ok()
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    {
        let pair = Arc::clone(&pair);
        tokio::task::spawn_blocking(move || pair.detach_standby())
            .await
            .unwrap()
            .expect("the standby is cut off");
    }
    sqlx::query("INSERT INTO acked VALUES (2)")
        .execute(&mut primary)
        .await
        .expect("the primary acknowledges the commit");
    {
        let pair = Arc::clone(&pair);
        tokio::task::spawn_blocking(move || pair.fail_over())
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(
        scalar(
            &pair.primary_url(),
            "SELECT string_agg(id::text, ',') FROM acked"
        )
        .await,
        "1",
        "the commit acknowledged after the cut is gone"
    );
    let sync = start(Replication::Synchronous).await;
    let refused = tokio::task::spawn_blocking(move || sync.detach_standby())
        .await
        .unwrap();
    assert!(
        matches!(refused, Err(ProvisionError::InvalidSetting { .. })),
        "{refused:?}"
    );
}
