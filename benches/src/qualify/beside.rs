//! pgbench beside the registry (issue 10, item 4): after the trials, on the
//! same server, the built-in TPC-B at a scale of at least the client count
//! (so clients do not all contend on one branch row) and the select-only
//! script, each with the contract's clients for the same time; then their
//! ratios to the registry's median resolves per second. The TPC-B tables
//! live in a database of their own and are dropped afterwards.

use serde::{Deserialize, Serialize};

use crate::resolve_bench::pgbench::Pgbench;

/// What pgbench measured beside the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PgbenchFacts {
    /// Why pgbench did not run, if it did not.
    pub skipped: Option<String>,
    /// The database its tables were in.
    pub database: String,
    /// TPC-B scale (branches): at least `clients`.
    pub scale: u32,
    /// pgbench clients (and threads).
    pub clients: u32,
    /// Seconds per script.
    pub secs: u64,
    /// TPC-B transactions per second.
    pub tpcb_tps: Option<f64>,
    /// Select-only transactions per second.
    pub select_only_tps: Option<f64>,
    /// The registry's median successful resolves per second over trials.
    pub resolves_per_s: f64,
    /// `resolves_per_s / tpcb_tps`.
    pub tpcb_ratio: Option<f64>,
    /// `resolves_per_s / select_only_tps`.
    pub select_only_ratio: Option<f64>,
}

impl PgbenchFacts {
    /// pgbench did not run, for `reason`.
    pub fn skipped(reason: impl Into<String>, resolves_per_s: f64) -> PgbenchFacts {
        PgbenchFacts {
            skipped: Some(reason.into()),
            database: String::new(),
            scale: 0,
            clients: 0,
            secs: 0,
            tpcb_tps: None,
            select_only_tps: None,
            resolves_per_s,
            tpcb_ratio: None,
            select_only_ratio: None,
        }
    }
}

/// Initializes, runs TPC-B and select-only, and drops the tables; blocks
/// (run it with `spawn_blocking`).
pub fn run(pgbench: &Pgbench, clients: u32, secs: u64, resolves_per_s: f64) -> PgbenchFacts {
    let clients = clients.max(1);
    let scale = clients;
    let mut facts = PgbenchFacts {
        database: pgbench.database().to_string(),
        scale,
        clients,
        secs,
        ..PgbenchFacts::skipped("", resolves_per_s)
    };
    facts.skipped = None;
    let measured = pgbench.initialize(scale).and_then(|()| {
        let tpcb = pgbench.run(clients, secs)?;
        let select_only = pgbench.run_select_only(clients, secs)?;
        Ok((tpcb, select_only))
    });
    let dropped = pgbench.drop_tables();
    match measured {
        Ok((tpcb, select_only)) => {
            facts.tpcb_tps = Some(tpcb);
            facts.select_only_tps = Some(select_only);
            facts.tpcb_ratio = (tpcb > 0.0).then(|| resolves_per_s / tpcb);
            facts.select_only_ratio = (select_only > 0.0).then(|| resolves_per_s / select_only);
        }
        Err(e) => facts.skipped = Some(format!("pgbench failed: {e}")),
    }
    if let Err(e) = dropped {
        let note = format!("its tables could not be dropped: {e}");
        facts.skipped = Some(match facts.skipped.take() {
            Some(s) => format!("{s}; {note}"),
            None => note,
        });
    }
    facts
}

/// The password in a `postgres://user:password@…` URL, if any (not
/// percent-decoded).
pub fn url_password(url: &str) -> Option<String> {
    let rest = &url[url.find("://")? + 3..];
    let userinfo = &rest[..rest.find('@')?];
    userinfo.split_once(':').map(|(_, p)| p.to_string())
}
