//! A contract's `[failover]`, run on the primary and standby the run
//! started itself (`--standby`).
//!
//! The pools reach the primary through a [`FaultProxy`], as a deployment
//! reaches it through a virtual IP or a pooler. At `at_ms` of the measured
//! run the primary stops as a crash would (`pg_ctl stop -m immediate`),
//! the standby is promoted, and the proxy moves to it, closing every
//! connection it held: calls in flight answer `unavailable`, and new
//! connections reach the promoted server. The clients never stop; the end
//! check then holds the promoted server to every answer a client was
//! given, so a route answered before the failover and missing after it
//! (possible with asynchronous replication) is a violation
//! (`route_missing`), counted here as a lost route.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use connreg_pgtest::ReplicatedPair;
use connreg_pgtest::proxy::FaultProxy;
use serde::{Deserialize, Serialize};

use super::check::{ViolationKind, Violations};
use super::contract::Failover;

/// The run's own pair behind the proxy the pools connect through; clones
/// share both.
#[derive(Debug, Clone)]
pub struct FailoverTarget {
    pair: Arc<ReplicatedPair>,
    proxy: FaultProxy,
}

impl FailoverTarget {
    /// A proxy on the loopback in front of `pair`'s primary.
    ///
    /// # Errors
    ///
    /// Why the proxy could not listen.
    pub async fn start(pair: Arc<ReplicatedPair>) -> Result<FailoverTarget, String> {
        let upstream = SocketAddr::from((Ipv4Addr::LOCALHOST, pair.primary_port()));
        let proxy = FaultProxy::start(upstream)
            .await
            .map_err(|e| format!("cannot start the proxy in front of the primary: {e}"))?;
        Ok(FailoverTarget { pair, proxy })
    }

    /// The port the pools connect to.
    pub fn proxy_port(&self) -> u16 {
        self.proxy.local_addr().port()
    }

    /// The port of the server that is the primary now.
    pub fn primary_port(&self) -> u16 {
        self.pair.primary_port()
    }

    /// `synchronous` or `asynchronous`.
    pub fn replication(&self) -> &'static str {
        self.pair.replication().as_str()
    }

    /// Cuts an asynchronous standby off from the primary's WAL.
    async fn detach_standby(&self) -> Result<(), String> {
        let pair = self.pair.clone();
        tokio::task::spawn_blocking(move || pair.detach_standby())
            .await
            .map_err(|e| format!("the detach task failed: {e}"))?
            .map_err(|e| e.to_string())
    }

    /// Stops the primary, promotes the standby and moves the proxy to it;
    /// returns how long no primary accepted writes and how many
    /// connections the move closed.
    async fn fail_over(&self) -> Result<(Duration, usize), String> {
        let pair = self.pair.clone();
        let began = Instant::now();
        tokio::task::spawn_blocking(move || pair.fail_over())
            .await
            .map_err(|e| format!("the failover task failed: {e}"))?
            .map_err(|e| e.to_string())?;
        let cut = self.proxy.switch_upstream(SocketAddr::from((
            Ipv4Addr::LOCALHOST,
            self.pair.primary_port(),
        )));
        Ok((began.elapsed(), cut))
    }
}

/// What the failover did, as the report shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailoverFacts {
    /// `synchronous` or `asynchronous`.
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
