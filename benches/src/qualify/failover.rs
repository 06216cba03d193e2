//! A contract's `[failover]`, run on the primary and standby the run
//! started itself (`--standby`): a [`ReplicatedPair`] the run promotes,
//! or a pg_auto_failover formation whose monitor promotes, as operators
//! deploy it.
//!
//! The pools reach the primary through a [`FaultProxy`], as a deployment
//! reaches it through a virtual IP or a pooler. At `at_ms` of the measured
//! run the primary stops as a crash would (`pg_ctl stop -m immediate`; in
//! a formation its `pg_autoctl` keeper is killed too), the standby is
//! promoted (by the run, or by the formation's monitor once it sees the
//! primary gone), and the proxy moves to it, as a health-checking proxy
//! would, closing every connection it held: calls in flight answer `unavailable`, and new
//! connections reach the promoted server. The clients never stop; the end
//! check then holds the promoted server to every answer a client was
//! given, so a route answered before the failover and missing after it
//! (possible with asynchronous replication) is a violation
//! (`route_missing`), counted here as a lost route.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use connreg_pgtest::proxy::FaultProxy;
use connreg_pgtest::{AutoFailoverFormation, ReplicatedPair};
use serde::{Deserialize, Serialize};

use super::check::{ViolationKind, Violations};
use super::contract::Failover;
use super::limits::FAILOVER_MS_MAX;

/// The servers a run started for high availability; clones share them,
/// and the last one dropped stops them.
#[derive(Debug, Clone)]
pub enum HaNode {
    /// A primary and a standby the run promotes itself.
    Pair(Arc<ReplicatedPair>),
    /// A pg_auto_failover formation; its monitor promotes.
    Formation(Arc<AutoFailoverFormation>),
}

impl HaNode {
    /// The port of the server that is the primary now.
    ///
    /// # Errors
    ///
    /// Why the formation's monitor could not say.
    pub fn primary_port(&self) -> Result<u16, String> {
        match self {
            HaNode::Pair(p) => Ok(p.primary_port()),
            HaNode::Formation(f) => f.primary_port().map_err(|e| e.to_string()),
        }
    }

    /// The primary's superuser URL.
    ///
    /// # Errors
    ///
    /// Why the formation's monitor could not say.
    pub fn primary_url(&self) -> Result<String, String> {
        match self {
            HaNode::Pair(p) => Ok(p.primary_url()),
            HaNode::Formation(f) => f.primary_url().map_err(|e| e.to_string()),
        }
    }

    /// The primary's superuser URL for `database`.
    ///
    /// # Errors
    ///
    /// Why the formation's monitor could not say.
    pub fn primary_database_url(&self, database: &str) -> Result<String, String> {
        match self {
            HaNode::Pair(p) => Ok(p.primary_database_url(database)),
            HaNode::Formation(f) => f.primary_database_url(database).map_err(|e| e.to_string()),
        }
    }

    /// `synchronous`, `asynchronous` or `pg_auto_failover`.
    pub fn replication(&self) -> &'static str {
        match self {
            HaNode::Pair(p) => p.replication().as_str(),
            HaNode::Formation(_) => "pg_auto_failover",
        }
    }

    /// Stops the primary as a crash would and waits for the promoted
    /// server; returns its port.
    fn fail_over(&self) -> Result<u16, String> {
        match self {
            HaNode::Pair(p) => {
                p.fail_over().map_err(|e| e.to_string())?;
                Ok(p.primary_port())
            }
            HaNode::Formation(f) => {
                let crashed = f.crash_primary().map_err(|e| e.to_string())?;
                f.wait_for_new_primary(crashed, Duration::from_millis(FAILOVER_MS_MAX))
                    .map(|(port, _)| port)
                    .map_err(|e| e.to_string())
            }
        }
    }
}

/// The run's own servers behind the proxy the pools connect through;
/// clones share both.
#[derive(Debug, Clone)]
pub struct FailoverTarget {
    node: HaNode,
    proxy: FaultProxy,
}

impl FailoverTarget {
    /// A proxy on the loopback in front of `node`'s primary.
    ///
    /// # Errors
    ///
    /// Why the proxy could not listen, or the primary could not be found.
    pub async fn start(node: HaNode) -> Result<FailoverTarget, String> {
        let upstream = SocketAddr::from((Ipv4Addr::LOCALHOST, node.primary_port()?));
        let proxy = FaultProxy::start(upstream)
            .await
            .map_err(|e| format!("cannot start the proxy in front of the primary: {e}"))?;
        Ok(FailoverTarget { node, proxy })
    }

    /// The port the pools connect to.
    pub fn proxy_port(&self) -> u16 {
        self.proxy.local_addr().port()
    }

    /// The port of the server that is the primary now.
    ///
    /// # Errors
    ///
    /// Why the formation's monitor could not say.
    pub fn primary_port(&self) -> Result<u16, String> {
        self.node.primary_port()
    }

    /// `synchronous`, `asynchronous` or `pg_auto_failover`.
    pub fn replication(&self) -> &'static str {
        self.node.replication()
    }

    /// Cuts an asynchronous standby off from the primary's WAL.
    async fn detach_standby(&self) -> Result<(), String> {
        let HaNode::Pair(pair) = &self.node else {
            return Err(
                "detach_ms cuts off a pair's asynchronous standby; a pg_auto_failover \
                        formation replicates synchronously"
                    .into(),
            );
        };
        let pair = pair.clone();
        tokio::task::spawn_blocking(move || pair.detach_standby())
            .await
            .map_err(|e| format!("the detach task failed: {e}"))?
            .map_err(|e| e.to_string())
    }

    /// Stops the primary, waits for the promoted standby and moves the
    /// proxy to it; returns how long no primary accepted writes and how
    /// many connections the move closed.
    async fn fail_over(&self) -> Result<(Duration, usize), String> {
        let node = self.node.clone();
        let began = Instant::now();
        let port = tokio::task::spawn_blocking(move || node.fail_over())
            .await
            .map_err(|e| format!("the failover task failed: {e}"))??;
        let cut = self
            .proxy
            .switch_upstream(SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
        Ok((began.elapsed(), cut))
    }
}

/// What the failover did, as the report shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailoverFacts {
    /// `synchronous`, `asynchronous` or `pg_auto_failover`.
    pub replication: String,
    /// False when the trial ended (interrupted) before `at_ms`, or the
    /// failover failed (`error` says why).
    pub happened: bool,
    /// With `detach_ms`: when the standby was cut off, in milliseconds
    /// after the start of the measured run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detached_at_ms: Option<f64>,
    /// When the primary stopped, in milliseconds after the start of the
    /// measured run.
    pub at_ms: f64,
    /// From the stop to the promoted server taking connections through
    /// the proxy, in milliseconds.
    pub without_primary_ms: f64,
    /// Connections the proxy closed when it moved.
    pub connections_cut: u64,
    /// Calls that answered `unavailable` in the trial.
    pub unavailable_calls: u64,
    /// Routes a client was answered that the promoted server lacks, or
    /// holds with another assignment (`route_missing` and
    /// `route_changed` violations of the end check).
    pub lost_routes: u64,
    /// Why the failover failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl FailoverFacts {
    /// Routes lost in the switch, from the end check's violations.
    pub fn count_lost(&mut self, violations: &Violations) {
        let counts = violations.counts();
        self.lost_routes = [ViolationKind::RouteMissing, ViolationKind::RouteChanged]
            .iter()
            .filter_map(|k| counts.get(k))
            .sum();
    }
}

/// Fails `target` over at `at_ms` after `measure_from`, unless the run
/// is interrupted first.
pub async fn fail_over_at(
    target: FailoverTarget,
    failover: Failover,
    measure_from: Instant,
    interrupted: Arc<AtomicBool>,
) -> FailoverFacts {
    let mut facts = FailoverFacts {
        replication: target.replication().to_string(),
        happened: false,
        detached_at_ms: None,
        at_ms: 0.0,
        without_primary_ms: 0.0,
        connections_cut: 0,
        unavailable_calls: 0,
        lost_routes: 0,
        error: None,
    };
    if let Some(ms) = failover.detach_ms {
        let detach_at = measure_from + Duration::from_millis(failover.at_ms - ms);
        if !wait_until(detach_at, &interrupted).await {
            return facts;
        }
        if let Err(reason) = target.detach_standby().await {
            facts.error = Some(reason);
            return facts;
        }
        facts.detached_at_ms = Some(measure_from.elapsed().as_secs_f64() * 1000.0);
    }
    let at = measure_from + Duration::from_millis(failover.at_ms);
    if !wait_until(at, &interrupted).await {
        return facts;
    }
    facts.at_ms = measure_from.elapsed().as_secs_f64() * 1000.0;
    match target.fail_over().await {
        Ok((without, cut)) => {
            facts.happened = true;
            facts.without_primary_ms = without.as_secs_f64() * 1000.0;
            facts.connections_cut = cut as u64;
        }
        Err(reason) => facts.error = Some(reason),
    }
    facts
}

/// Sleeps until `at`; false when the run was interrupted first.
async fn wait_until(at: Instant, interrupted: &AtomicBool) -> bool {
    loop {
        if interrupted.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now >= at {
            return true;
        }
        tokio::time::sleep((at - now).min(Duration::from_millis(50))).await;
    }
}
