//! Goal: every test gets its own database on a real server, reachable with
//! sqlx, isolated from the others, and gone once dropped.

use std::time::{Duration, Instant};

use connreg_pgtest::limits::DATABASE_DROP_TIMEOUT_S;
use connreg_pgtest::{DATABASE_NAME_PREFIX, TestDatabase, server};
use sqlx::{Connection, PgConnection};

async fn connect(url: &str) -> PgConnection {
    PgConnection::connect(url)
        .await
        .expect("the database URL accepts connections")
}

async fn database_exists(server_url: &str, name: &str) -> bool {
    let mut connection = connect(server_url).await;
    sqlx::query_scalar::<_, bool>("select exists (select 1 from pg_database where datname = $1)")
        .bind(name)
        .fetch_one(&mut connection)
        .await
        .expect("pg_database is readable")
}

#[tokio::test]
async fn server_answers_select_version() {
    let database = TestDatabase::create().await.expect("a test database");
    let mut connection = connect(database.url()).await;
    let version: String = sqlx::query_scalar("select version()")
        .fetch_one(&mut connection)
        .await
        .expect("select version() runs");
    assert!(
        version.starts_with("PostgreSQL "),
        "unexpected version {version:?}"
    );
}

#[tokio::test]
async fn database_url_connects_with_sqlx_to_that_database() {
    let database = TestDatabase::create().await.expect("a test database");
    assert!(database.database_name().starts_with(DATABASE_NAME_PREFIX));
    let pool = sqlx::PgPool::connect(database.url())
        .await
        .expect("a pool on the database URL");
    let (current, superuser): (String, bool) =
        sqlx::query_as("select current_database(), current_setting('is_superuser') = 'on'")
            .fetch_one(&pool)
            .await
            .expect("the pool answers");
    assert_eq!(current, database.database_name());
    assert!(superuser, "test database URLs connect as a superuser");
    pool.close().await;
}

#[tokio::test]
async fn two_databases_do_not_see_each_others_tables() {
    let first = TestDatabase::create().await.expect("a first database");
    let second = TestDatabase::create().await.expect("a second database");
    assert_ne!(first.database_name(), second.database_name());

    let mut in_first = connect(first.url()).await;
    sqlx::raw_sql("create table only_in_first (id int); insert into only_in_first values (1);")
        .execute(&mut in_first)
        .await
        .expect("create a table in the first database");

    let mut in_second = connect(second.url()).await;
    let visible: Option<String> = sqlx::query_scalar("select to_regclass('only_in_first')::text")
        .fetch_one(&mut in_second)
        .await
        .expect("to_regclass runs");
    assert_eq!(
        visible, None,
        "a table of one test database leaked into another"
    );
}

#[tokio::test]
async fn drop_now_removes_the_database_even_with_connections_open() {
    let database = TestDatabase::create().await.expect("a test database");
    let name = database.database_name().to_owned();
    let server_url = database.server_url().to_owned();
    let still_open = connect(database.url()).await;
    assert!(database_exists(&server_url, &name).await);

    database.drop_now().await.expect("the database is dropped");

    assert!(!database_exists(&server_url, &name).await);
    drop(still_open);
}

#[tokio::test]
async fn dropping_the_value_removes_the_database_soon() {
    let database = TestDatabase::create().await.expect("a test database");
    let name = database.database_name().to_owned();
    let server_url = database.server_url().to_owned();

    drop(database);

    // On a throwaway server the drop runs in the background.
    let deadline = Instant::now() + Duration::from_secs(DATABASE_DROP_TIMEOUT_S);
    while database_exists(&server_url, &name).await {
        assert!(Instant::now() < deadline, "{name} still exists");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One task of the concurrency test: its own database, its own table, and
/// nothing else in sight. Returns the database's name.
async fn create_database_and_table(task: usize) -> String {
    let database = TestDatabase::create().await.expect("a test database");
    let pool = sqlx::PgPool::connect(database.url())
        .await
        .expect("a pool on the database URL");
    sqlx::query(&format!("create table task_{task} (id int)"))
        .execute(&pool)
        .await
        .expect("create a table");
    let tables: i64 =
        sqlx::query_scalar("select count(*) from pg_tables where schemaname = 'public'")
            .fetch_one(&pool)
            .await
            .expect("count tables");
    assert_eq!(tables, 1, "each task sees only its own table");
    pool.close().await;
    database.database_name().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_tasks_creating_databases_at_once_all_succeed() {
    const TASKS: usize = 8;
    let creating: Vec<_> = (0..TASKS)
        .map(|task| tokio::spawn(create_database_and_table(task)))
        .collect();
    let mut names = Vec::with_capacity(TASKS);
    for task in creating {
        names.push(task.await.expect("the task finished"));
    }
    names.sort();
    names.dedup();
    assert_eq!(names.len(), TASKS, "every task got a database of its own");
}

#[test]
fn create_blocking_works_without_a_runtime() {
    let database = TestDatabase::create_blocking().expect("a test database");
    assert!(database.url().ends_with(database.database_name()));
}

#[test]
fn server_reports_its_address_for_tools_such_as_pgbench() {
    let server = server().expect("a server");
    assert!(!server.host().is_empty());
    assert_ne!(server.port(), 0);
    assert!(!server.superuser().is_empty());
    assert!(server.url().contains(&format!(":{}", server.port())));
    assert!(
        server.database_url("other").ends_with("/other"),
        "database_url names the database in the path"
    );
}
