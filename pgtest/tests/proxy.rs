//! Goal: the fault proxy passes PostgreSQL traffic through unchanged, and
//! each fault does to a real server's connections what its documentation
//! says: cuts fail them, a cut commit is committed yet unanswered, stalls
//! delay, blackholes hold and release.

use std::str::FromStr;
use std::time::{Duration, Instant};

use connreg_pgtest::TestDatabase;
use connreg_pgtest::proxy::FaultProxy;
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection};

/// Longest any step of these tests should take on a healthy machine.
const STEP_TIMEOUT: Duration = Duration::from_secs(20);

/// A test database, a proxy in front of its server, and options for both
/// paths.
struct Fixture {
    _database: TestDatabase,
    proxy: FaultProxy,
    direct: PgConnectOptions,
    proxied: PgConnectOptions,
}

impl Fixture {
    async fn new() -> Fixture {
        let database = TestDatabase::create().await.expect("a test database");
        let server = database.server();
        let upstream = tokio::net::lookup_host((server.host(), server.port()))
            .await
            .expect("the server's host resolves")
            .next()
            .expect("the server's host has an address");
        let proxy = FaultProxy::start(upstream).await.expect("the proxy starts");
        let direct = PgConnectOptions::from_str(database.url()).expect("the url parses");
        let proxied = direct
            .clone()
            .host("127.0.0.1")
            .port(proxy.local_addr().port());
        Fixture {
            _database: database,
            proxy,
            direct,
            proxied,
        }
    }

    async fn through_proxy(&self) -> PgConnection {
        PgConnection::connect_with(&self.proxied)
            .await
            .expect("a connection through the proxy")
    }

    async fn direct(&self) -> PgConnection {
        PgConnection::connect_with(&self.direct)
            .await
            .expect("a direct connection")
    }

    /// A direct connection, on which table `name` (one integer key) has
    /// been created.
    async fn direct_with_table(&self, name: &str) -> PgConnection {
        let mut direct = self.direct().await;
        let create = format!("create table {name} (id int primary key)");
        sqlx::raw_sql(&create)
            .execute(&mut direct)
            .await
            .expect("the table is created");
        direct
    }
}

async fn select_one(connection: &mut PgConnection) -> Result<i32, sqlx::Error> {
    sqlx::query_scalar("select 1").fetch_one(connection).await
}

fn is_io(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Io(_))
}

#[tokio::test]
async fn queries_pass_through_the_proxy() {
    let fixture = Fixture::new().await;
    let mut connection = fixture.through_proxy().await;
    let sum: i32 = sqlx::query_scalar("select $1::int + 1")
        .bind(41)
        .fetch_one(&mut connection)
        .await
        .expect("a bound query passes");
    assert_eq!(sum, 42);
    let rows: Vec<i32> = sqlx::query_scalar("select generate_series(1, 20000)")
        .fetch_all(&mut connection)
        .await
        .expect("a large answer passes");
    assert_eq!(rows.len(), 20_000);
    assert_eq!(fixture.proxy.connections(), 1);
    assert_eq!(fixture.proxy.stats().accepted, 1);
}

#[tokio::test]
async fn cut_all_fails_an_in_flight_connection() {
    let fixture = Fixture::new().await;
    let mut connection = fixture.through_proxy().await;
    let started = Instant::now();
    let sleeping = tokio::spawn(async move {
        sqlx::query("select pg_sleep(10)")
            .execute(&mut connection)
            .await
            .map(|_| ())
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(fixture.proxy.cut_all(), 1);
    let outcome = tokio::time::timeout(STEP_TIMEOUT, sleeping)
        .await
        .expect("the cut query returns")
        .expect("the task does not panic");
    let error = outcome.expect_err("a cut connection fails");
    assert!(is_io(&error), "an I/O error, not {error:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(fixture.proxy.stats().cut, 1);

    // The proxy itself goes on serving.
    let mut again = fixture.through_proxy().await;
    assert_eq!(select_one(&mut again).await.expect("a new connection"), 1);
}

#[tokio::test]
async fn cut_next_commit_commits_but_fails_the_client() {
    let fixture = Fixture::new().await;
    let mut direct = fixture.direct_with_table("cut").await;

    let mut connection = fixture.through_proxy().await;
    let mut transaction = connection.begin().await.expect("begin passes");
    sqlx::query("insert into cut values ($1)")
        .bind(7)
        .execute(&mut *transaction)
        .await
        .expect("the insert passes (a Sync inside a transaction block commits nothing)");
    fixture.proxy.cut_next_commit();
    assert!(fixture.proxy.commit_cut_armed());
    let error = tokio::time::timeout(STEP_TIMEOUT, transaction.commit())
        .await
        .expect("the commit returns")
        .expect_err("the commit's answer never arrives");
    assert!(is_io(&error), "an I/O error, not {error:?}");
    assert!(!fixture.proxy.commit_cut_armed(), "the cut is one-shot");
    assert_eq!(fixture.proxy.stats().commit_cuts, 1);

    let committed: i64 = sqlx::query_scalar("select count(*) from cut where id = 7")
        .fetch_one(&mut direct)
        .await
        .expect("the table is readable");
    assert_eq!(committed, 1, "the row was committed");
}

/// One transaction whose `BEGIN` and `COMMIT` are prepared statements, as
/// `sqlx::query` sends them: the first use of each on a connection is
/// prepared by a `Parse`/`Describe`/`Sync` of its own, every later one is a
/// bare `Bind`/`Execute`/`Sync` of the cached statement.
async fn prepared_transaction(connection: &mut PgConnection, id: i32) -> sqlx::Result<()> {
    sqlx::query("BEGIN").execute(&mut *connection).await?;
    sqlx::query("insert into prepared values ($1)")
        .bind(id)
        .execute(&mut *connection)
        .await?;
    sqlx::query("COMMIT").execute(&mut *connection).await?;
    Ok(())
}

#[tokio::test]
async fn cut_next_commit_cuts_a_prepared_commit_after_it_committed() {
    for earlier in [0, 1] {
        let fixture = Fixture::new().await;
        let mut direct = fixture.direct_with_table("prepared").await;
        let mut connection = fixture.through_proxy().await;
        // With `earlier` = 1 the statements are cached when the cut is
        // armed; with 0 the armed transaction prepares them: neither the
        // `BEGIN` nor a statement's preparation ends a transaction.
        for id in 0..earlier {
            prepared_transaction(&mut connection, id)
                .await
                .expect("a transaction before the cut");
        }
        fixture.proxy.cut_next_commit();
        let error = tokio::time::timeout(STEP_TIMEOUT, prepared_transaction(&mut connection, 7))
            .await
            .expect("the transaction returns")
            .expect_err("the commit's answer never arrives");
        assert!(
            is_io(&error),
            "earlier {earlier}: an I/O error, not {error:?}"
        );
        assert_eq!(fixture.proxy.stats().commit_cuts, 1);
        let committed: i64 = sqlx::query_scalar("select count(*) from prepared where id = 7")
            .fetch_one(&mut direct)
            .await
            .expect("the table is readable");
        assert_eq!(
            committed, 1,
            "earlier {earlier}: the cut was not at the commit"
        );
    }
}

#[tokio::test]
async fn cut_next_commit_cuts_an_autocommit_statement_after_it_ran() {
    let fixture = Fixture::new().await;
    let mut direct = fixture.direct_with_table("auto").await;
    let mut connection = fixture.through_proxy().await;
    let insert = "insert into auto values ($1)";
    // The first run prepares the statement (its own Sync); the second is
    // the bare Bind/Execute/Sync the cut should catch.
    sqlx::query(insert)
        .bind(1)
        .execute(&mut connection)
        .await
        .expect("the first insert passes");
    fixture.proxy.cut_next_commit();
    let error = sqlx::query(insert)
        .bind(2)
        .execute(&mut connection)
        .await
        .expect_err("the statement's answer never arrives");
    assert!(is_io(&error), "an I/O error, not {error:?}");
    let committed: i64 = sqlx::query_scalar("select count(*) from auto")
        .fetch_one(&mut direct)
        .await
        .expect("the table is readable");
    assert_eq!(committed, 2, "the cut statement was committed");
}

#[tokio::test]
async fn stall_delays_a_query_by_at_least_the_stall() {
    let fixture = Fixture::new().await;
    let mut connection = fixture.through_proxy().await;
    let stall = Duration::from_millis(500);
    let started = Instant::now();
    fixture.proxy.stall(stall);
    assert_eq!(
        select_one(&mut connection)
            .await
            .expect("delayed, not lost"),
        1
    );
    assert!(started.elapsed() >= stall, "{:?}", started.elapsed());
    assert_eq!(fixture.proxy.stats().stalls, 1);

    // Afterwards queries run at full speed again.
    let started = Instant::now();
    select_one(&mut connection).await.expect("a query");
    assert!(started.elapsed() < stall);
}

#[tokio::test]
async fn blackhole_holds_until_turned_off_then_delivers() {
    let fixture = Fixture::new().await;
    let mut connection = fixture.through_proxy().await;
    fixture.proxy.blackhole(true);
    let query = tokio::spawn(async move { select_one(&mut connection).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!query.is_finished(), "nothing passes a blackhole");
    assert_eq!(fixture.proxy.connections(), 1, "the socket stays open");
    fixture.proxy.blackhole(false);
    let answer = tokio::time::timeout(STEP_TIMEOUT, query)
        .await
        .expect("the held query finishes once released")
        .expect("the task does not panic");
    assert_eq!(answer.expect("the held query succeeds"), 1);
}

#[tokio::test]
async fn dropping_the_proxy_closes_its_connections() {
    let fixture = Fixture::new().await;
    let mut connection = fixture.through_proxy().await;
    let Fixture {
        _database,
        proxy,
        proxied,
        ..
    } = fixture;
    let copy = proxy.clone();
    drop(proxy);
    assert_eq!(copy.connections(), 1, "a clone keeps the proxy running");
    drop(copy);
    let error = select_one(&mut connection)
        .await
        .expect_err("the connection is closed");
    assert!(is_io(&error), "an I/O error, not {error:?}");
    let refused = tokio::time::timeout(STEP_TIMEOUT, PgConnection::connect_with(&proxied))
        .await
        .expect("connecting returns");
    assert!(refused.is_err(), "nothing listens any more");
}
