//! WAL accounting on PostgreSQL: the server's WAL position, the bytes
//! written between two positions (all, and the records without full-page
//! images from `pg_walinspect`), and the breakdown by record kind.

/// The server's WAL position.
pub(crate) async fn wal_lsn(admin: &mut sqlx::PgConnection) -> Result<String, String> {
    sqlx::query_scalar::<_, String>("SELECT pg_current_wal_lsn()::text")
        .fetch_one(admin)
        .await
        .map_err(|e| e.to_string())
}

/// WAL written between two positions, in bytes: all of it, and the part
/// that is not full-page images. Full-page images depend on how long ago
/// the last checkpoint was and how many distinct pages a workload touches
/// since (TPC-B's accounts are spread over the whole table, a resolve
/// appends), so the comparison uses the records alone and shows both.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Wal {
    pub(crate) total: f64,
    pub(crate) records: Option<f64>,
}

pub(crate) async fn wal_between(
    admin: &mut sqlx::PgConnection,
    before: &str,
    after: &str,
) -> Result<Wal, String> {
    let total: f64 = sqlx::query_scalar("SELECT pg_wal_lsn_diff($2::pg_lsn, $1::pg_lsn)::float8")
        .bind(before)
        .bind(after)
        .fetch_one(&mut *admin)
        .await
        .map_err(|e| e.to_string())?;
    // pg_walinspect (PostgreSQL 15 contrib) splits records from images;
    // without it (a server given by URL, no superuser) only the total.
    let records = sqlx::query_scalar::<_, f64>(
        "SELECT coalesce(sum(record_size), 0)::float8
         FROM pg_get_wal_stats($1::pg_lsn, $2::pg_lsn)",
    )
    .bind(before)
    .bind(after)
    .fetch_one(&mut *admin)
    .await
    .ok();
    Ok(Wal { total, records })
}

/// Most record kinds the WAL breakdown prints.
const WAL_KINDS_SHOWN: i64 = 12;

/// What the WAL between two positions is made of, per transaction: each
/// resource manager and record kind with its count and record bytes,
/// largest first. Empty without pg_walinspect.
pub(crate) async fn wal_breakdown(
    admin: &mut sqlx::PgConnection,
    before: &str,
    after: &str,
    transactions: u64,
) -> Vec<String> {
    let rows = sqlx::query_as::<_, (String, f64, f64, f64)>(
        "SELECT \"resource_manager/record_type\", count::float8,
                record_size::float8, fpi_size::float8
           FROM pg_get_wal_stats($1::pg_lsn, $2::pg_lsn, per_record => true)
          WHERE count > 0
          ORDER BY record_size DESC
          LIMIT $3",
    )
    .bind(before)
    .bind(after)
    .bind(WAL_KINDS_SHOWN)
    .fetch_all(&mut *admin)
    .await
    .unwrap_or_default();
    let n = transactions.max(1) as f64;
    rows.into_iter()
        .map(|(kind, count, records, images)| {
            format!(
                "{kind:<28} {:>6.2} records {:>7.1} B  images {:>7.1} B",
                count / n,
                records / n,
                images / n
            )
        })
        .collect()
}

impl Wal {
    pub(crate) fn show(self) -> String {
        match self.records {
            Some(r) => format!("{r:.0}, {:.0}", self.total),
            None => format!("-, {:.0}", self.total),
        }
    }

    pub(crate) fn per(self, transactions: u64) -> Wal {
        let n = transactions.max(1) as f64;
        Wal {
            total: self.total / n,
            records: self.records.map(|r| r / n),
        }
    }
}
