//! Goal: a throwaway local cluster restarts as after a crash, on the same
//! port, keeping what was committed and accepting connections again; a
//! server the harness does not run refuses to be restarted, saying why.

use std::time::Duration;

use connreg_pgtest::{LocalCluster, LocalOptions, ProvisionError, ServerSource};
use sqlx::{Connection, PgConnection};

async fn start(options: LocalOptions) -> LocalCluster {
    tokio::task::spawn_blocking(move || LocalCluster::start(options))
        .await
        .expect("the start does not panic")
        .expect("a local cluster starts")
}

async fn restart(cluster: std::sync::Arc<LocalCluster>) {
    tokio::task::spawn_blocking(move || cluster.restart_immediate())
        .await
        .expect("the restart does not panic")
        .expect("the cluster restarts");
}

#[tokio::test]
async fn restart_immediate_keeps_committed_data_and_serves_again() {
    let cluster = std::sync::Arc::new(
        start(LocalOptions {
            fsync: true,
            ..LocalOptions::default()
        })
        .await,
    );
    let port = cluster.port();
    let mut before = PgConnection::connect(cluster.url())
        .await
        .expect("the cluster accepts connections");
    let fsync: String = sqlx::query_scalar("show fsync")
        .fetch_one(&mut before)
        .await
        .expect("settings are readable");
    assert_eq!(fsync, "on");
    sqlx::raw_sql("create table kept (id int); insert into kept values (1), (2)")
        .execute(&mut before)
        .await
        .expect("the rows are committed");

    restart(std::sync::Arc::clone(&cluster)).await;

    let error = sqlx::query("select 1")
        .execute(&mut before)
        .await
        .expect_err("a session from before the restart is gone");
    assert!(
        matches!(error, sqlx::Error::Io(_) | sqlx::Error::Database(_)),
        "{error:?}"
    );
    assert_eq!(cluster.port(), port, "the same port");
    let mut after = PgConnection::connect(cluster.url())
        .await
        .expect("connections work after the restart");
    let kept: i64 = sqlx::query_scalar("select count(*) from kept")
        .fetch_one(&mut after)
        .await
        .expect("the table survived");
    assert_eq!(kept, 2, "committed rows survive an immediate restart");
    after.close().await.expect("a clean close");

    // Twice in a row works too.
    restart(std::sync::Arc::clone(&cluster)).await;
    let mut again = PgConnection::connect(cluster.url())
        .await
        .expect("connections work after a second restart");
    sqlx::query("select 1")
        .execute(&mut again)
        .await
        .expect("a query");
}

#[tokio::test]
async fn dropping_a_local_cluster_removes_it() {
    let cluster = start(LocalOptions::default()).await;
    let dir = cluster.dir().to_owned();
    let url = cluster.url().to_owned();
    assert!(dir.exists());
    drop(cluster);
    let mut gone = false;
    for _ in 0..100 {
        if !dir.exists() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "{} is removed", dir.display());
    assert!(PgConnection::connect(&url).await.is_err());
}

#[test]
fn a_server_given_by_url_cannot_be_restarted() {
    let error = ProvisionError::RestartUnsupported {
        source_kind: ServerSource::Url,
    };
    assert!(
        error
            .to_string()
            .contains("a server given by URL cannot be restarted by the harness"),
        "{error}"
    );
}

#[tokio::test]
async fn the_shared_server_restarts_when_it_is_a_local_cluster() {
    let server = tokio::task::spawn_blocking(connreg_pgtest::server)
        .await
        .expect("no panic")
        .expect("a server");
    if server.source() != ServerSource::Local {
        assert!(!server.can_restart());
        assert_eq!(
            server.restart_immediate(),
            Err(ProvisionError::RestartUnsupported {
                source_kind: server.source()
            })
        );
        return;
    }
    assert!(server.can_restart());
    let database = connreg_pgtest::TestDatabase::create()
        .await
        .expect("a test database");
    let mut connection = PgConnection::connect(database.url())
        .await
        .expect("a connection");
    sqlx::raw_sql("create table t (id int); insert into t values (1)")
        .execute(&mut connection)
        .await
        .expect("committed");
    tokio::task::spawn_blocking(move || server.restart_immediate())
        .await
        .expect("no panic")
        .expect("the shared server restarts");
    let mut connection = PgConnection::connect(database.url())
        .await
        .expect("a connection after the restart");
    let count: i64 = sqlx::query_scalar("select count(*) from t")
        .fetch_one(&mut connection)
        .await
        .expect("the table survived");
    assert_eq!(count, 1);
}
