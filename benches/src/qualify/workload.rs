//! The clients: each picks operations from the contract's mix with its own
//! seeded generator, issues one at a time, times each call with the wall
//! clock, and checks every answer it can check on the spot.
//!
//! A client holds at most `outstanding_per_client_max` reservations. A new
//! resolve picked while it holds that many becomes a settlement; a
//! duplicate resolve or a settlement picked while it holds none becomes a
//! new resolve (each counted as a substitution). Duplicates and
//! settlements pick a held reservation at random. New actions are named
//! `<prefix><tag>c<client>-a<n>` (the run prefix of `super::fleet`, and a
//! tag naming the trial and, with many processes, the worker), so no two
//! clients, trials, workers or runs share one.
//!
//! Each trial starts with a warm-up: the same clients and mix, counted
//! nowhere but in the invariant checks. A client's first operation that
//! starts after the warm-up opens its measured figures. Between trials
//! the clients settle what they hold (unmeasured), so each trial starts
//! from the same free capacity.
//!
//! The run stops at the deadline, after the contract's operation count,
//! when the run's budget of new actions is spent, or when it is
//! interrupted (Ctrl-C), whichever comes first.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use connreg::contracts::DataPlane;
use connreg::{
    ActionId, CatalogQuery, HeartbeatOutcome, HeartbeatParams, Outcome, Reader, ResolveKind,
    RouteRequest, SettleParams,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::check::{Expect, Tracked, ViolationKind};
use super::contract::{Contract, Mix, RunLength};
use super::events::ZoneState;
use super::fleet::FleetPlan;
use super::limits::UNAVAILABLE_PAUSE_MS;
use super::stats::{Operation, Tally};
use super::timeline::Probe;

/// Why the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The contract's duration passed.
    Duration,
    /// The contract's operation count was reached.
    Operations,
    /// The run's budget of new actions was spent (see `ACTIONS_MAX`).
    ActionBudget,
    /// The operator interrupted it (Ctrl-C).
    Interrupted,
}

impl StopReason {
    /// The reason's name in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Duration => "duration",
            StopReason::Operations => "operations",
            StopReason::ActionBudget => "action_budget",
            StopReason::Interrupted => "interrupted",
        }
    }
}

/// One trial's parameters.
#[derive(Debug, Clone)]
pub struct TrialParams {
    /// When the warm-up starts.
    pub start: Instant,
    /// How long it lasts; the measured run starts after it.
    pub warmup_ms: u64,
    /// The trial, from 0: varies each client's seed.
    pub trial: u32,
    /// Goes into every new action's name after the run prefix.
    pub action_tag: String,
    /// New actions this trial may create.
    pub actions_budget: u64,
    /// The first heartbeat health sequence to use.
    pub heartbeat_seq: u64,
    /// One probe per client, in client order.
    pub probes: Vec<Probe>,
    /// Settle every held reservation after the measured run.
    pub drain: bool,
    /// Set to end the run early.
    pub interrupted: Arc<AtomicBool>,
    /// With an `[expiry]`: whether its zones have gone silent.
    pub zone: Option<Arc<ZoneState>>,
}

/// What every client shares: the registry, the plan, and the stop rule.
#[derive(Debug)]
pub struct Shared<R> {
    registry: R,
    plan: Arc<FleetPlan>,
    mix: Mix,
    seed: u64,
    outstanding_max: usize,
    length: RunLength,
    measure_from: Instant,
    deadline: Instant,
    trial: u32,
    action_tag: String,
    probes: Vec<Probe>,
    drain: bool,
    operations_claimed: AtomicU64,
    actions_claimed: AtomicU64,
    actions_budget: u64,
    actions_spent: AtomicBool,
    heartbeat_seq: AtomicU64,
    interrupted: Arc<AtomicBool>,
    zone: Option<Arc<ZoneState>>,
}

/// What one client hands back.
#[derive(Debug, Default)]
pub struct ClientResult {
    /// Its counts, measured run only (violations include the warm-up's).
    pub tally: Tally,
    /// Operations of the warm-up.
    pub warmup_operations: u64,
    /// When its last counted operation ended (before any drain).
    pub ended: Option<Instant>,
    /// Every new action it resolved, with what it expects of it.
    pub tracked: Vec<Tracked>,
}

impl<R: DataPlane> Shared<R> {
    /// The shared state of one trial of `contract`; it ends early once
    /// `params.interrupted` is set.
    pub fn new(
        registry: R,
        plan: Arc<FleetPlan>,
        contract: &Contract,
        params: TrialParams,
    ) -> Self {
        let length = contract.load.length();
        let measure_from = params.start + Duration::from_millis(params.warmup_ms);
        let deadline = match length {
            RunLength::DurationMs(ms) => measure_from + Duration::from_millis(ms),
            // Runs by count end by count; the deadline is out of reach.
            RunLength::Operations(_) => measure_from + Duration::from_secs(365 * 24 * 3600),
        };
        Shared {
            registry,
            plan,
            mix: contract.mix,
            seed: contract.seed,
            outstanding_max: contract.load.outstanding_per_client_max as usize,
            length,
            measure_from,
            deadline,
            trial: params.trial,
            action_tag: params.action_tag,
            probes: params.probes,
            drain: params.drain,
            operations_claimed: AtomicU64::new(0),
            actions_claimed: AtomicU64::new(0),
            actions_budget: params.actions_budget,
            actions_spent: AtomicBool::new(false),
            heartbeat_seq: AtomicU64::new(params.heartbeat_seq),
            interrupted: params.interrupted,
            zone: params.zone,
        }
    }

    /// When the measured run starts.
    pub fn measure_from(&self) -> Instant {
        self.measure_from
    }

    /// The next heartbeat health sequence: where the next trial starts.
    pub fn next_heartbeat_seq(&self) -> u64 {
        self.heartbeat_seq.load(Ordering::Relaxed)
    }

    /// Why the run ended, once every client is done.
    pub fn stop_reason(&self) -> StopReason {
        if self.interrupted.load(Ordering::Relaxed) {
            StopReason::Interrupted
        } else if self.actions_spent.load(Ordering::Relaxed) {
            StopReason::ActionBudget
        } else {
            match self.length {
                RunLength::DurationMs(_) => StopReason::Duration,
                RunLength::Operations(_) => StopReason::Operations,
            }
        }
    }

    /// True while the run may take one more operation.
    fn claim_operation(&self) -> bool {
        if self.actions_spent.load(Ordering::Relaxed) || self.interrupted.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now < self.measure_from {
            return true;
        }
        match self.length {
            RunLength::DurationMs(_) => now < self.deadline,
            RunLength::Operations(n) => self.operations_claimed.fetch_add(1, Ordering::Relaxed) < n,
        }
    }

    /// True when `replica` is in a zone that has stopped heartbeating: a
    /// reservation on it may have been released as `lease_expired`.
    fn silent(&self, replica: &connreg::ReplicaId) -> bool {
        self.zone.as_ref().is_some_and(|z| z.is_silent()) && self.plan.expiring.contains(replica)
    }

    /// True when one more new action fits the budget; false ends the run.
    fn claim_action(&self) -> bool {
        if self.actions_claimed.fetch_add(1, Ordering::Relaxed) < self.actions_budget {
            true
        } else {
            self.actions_spent.store(true, Ordering::Relaxed);
            false
        }
    }
}

/// One client's loop.
pub async fn client<R: DataPlane>(shared: Arc<Shared<R>>, index: u32) -> ClientResult {
    let mut c = Client {
        shared: &shared,
        index,
        rng: SmallRng::seed_from_u64(
            shared
                .seed
                .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                .wrapping_add(u64::from(index))
                .wrapping_add(u64::from(shared.trial).wrapping_mul(0xD1B5_4A32_D192_ED03)),
        ),
        held: Vec::new(),
        next_action: 0,
        measuring: false,
        probe: shared.probes.get(index as usize).cloned(),
        result: ClientResult::default(),
    };
    while shared.claim_operation() {
        if !c.measuring && Instant::now() >= shared.measure_from {
            // The warm-up's figures go; its violations stay.
            let warm = std::mem::take(&mut c.result.tally);
            c.result.warmup_operations = warm.operations();
            c.result.tally.violations = warm.violations;
            c.measuring = true;
        }
        let op = c.pick();
        let unavailable = c.result.tally.unavailable;
        if !c.run(op).await {
            break;
        }
        if c.result.tally.unavailable > unavailable {
            // A careful client pauses after `unavailable` (a server
            // restarting, a failover) instead of calling again at once.
            tokio::time::sleep(Duration::from_millis(UNAVAILABLE_PAUSE_MS)).await;
        }
        // The in-memory backend never suspends; yielding lets every client
        // take turns on the runtime's threads.
        tokio::task::yield_now().await;
    }
    if !c.measuring {
        // Ended before the measured run began (interrupted in the warm-up).
        let warm = std::mem::take(&mut c.result.tally);
        c.result.warmup_operations = warm.operations();
        c.result.tally.violations = warm.violations;
    }
    c.result.ended = Some(Instant::now());
    if shared.drain && !shared.interrupted.load(Ordering::Relaxed) {
        // Unmeasured: what the next trial would otherwise find reserved.
        c.measuring = false;
        let counted = std::mem::take(&mut c.result.tally);
        while !c.held.is_empty() {
            c.settle().await;
        }
        let drained = std::mem::replace(&mut c.result.tally, counted);
        c.result.tally.violations.merge(&drained.violations);
    }
    c.result
}

struct Client<'a, R> {
    shared: &'a Shared<R>,
    index: u32,
    rng: SmallRng,
    /// Indexes into `result.tracked` of the reservations held.
    held: Vec<usize>,
    next_action: u64,
    /// Past the warm-up: calls also go to the probe.
    measuring: bool,
    probe: Option<Probe>,
    result: ClientResult,
}

impl<R: DataPlane> Client<'_, R> {
    /// Counts one call in the probe, once measuring.
    fn note<T>(&self, op: Operation, elapsed: Duration, answer: &connreg::Result<T>) {
        if !self.measuring {
            return;
        }
        if let Some(probe) = &self.probe {
            let mut interval = probe.lock().unwrap_or_else(|p| p.into_inner());
            interval.record(op, elapsed, answer.as_ref().err().map(|e| e.kind()));
        }
    }

    fn pick(&mut self) -> Operation {
        let m = &self.shared.mix;
        let weights = [
            (Operation::ResolveNew, m.resolve_new),
            (Operation::ResolveDuplicate, m.resolve_duplicate),
            (Operation::Settle, m.settle),
            (Operation::Heartbeat, m.heartbeat),
            (Operation::CatalogPage, m.catalog_page),
        ];
        let op = weighted(&mut self.rng, &weights).unwrap_or(Operation::ResolveNew);
        let substitute = match op {
            Operation::ResolveNew if self.held.len() >= self.shared.outstanding_max => {
                Some(Operation::Settle)
            }
            Operation::ResolveDuplicate | Operation::Settle if self.held.is_empty() => {
                Some(Operation::ResolveNew)
            }
            _ => None,
        };
        if let Some(s) = substitute {
            self.result.tally.substitutions += 1;
            return s;
        }
        op
    }

    /// Runs one operation; false when the run must end.
    async fn run(&mut self, op: Operation) -> bool {
        match op {
            Operation::ResolveNew => return self.resolve_new().await,
            Operation::ResolveDuplicate => self.resolve_duplicate().await,
            Operation::Settle => self.settle().await,
            Operation::Heartbeat => self.heartbeat().await,
            Operation::CatalogPage => self.catalog_page().await,
        }
        true
    }

    fn request(&mut self, action: ActionId, tenant: usize, capability: usize) -> RouteRequest {
        let plan = &self.shared.plan;
        let region = self.rng.random_range(0..plan.regions.len());
        let zone = self
            .rng
            .random_range(0..plan.shape.zones_per_region as usize);
        RouteRequest {
            action,
            tenant: Some(plan.tenants[tenant].clone()),
            capability: plan.capabilities[capability].clone(),
            topology: plan.topology(region, zone),
        }
    }

    async fn resolve_new(&mut self) -> bool {
        if !self.shared.claim_action() {
            return false;
        }
        let action = ActionId::new(format!(
            "{}{}c{}-a{}",
            self.shared.plan.prefix, self.shared.action_tag, self.index, self.next_action
        ))
        .expect("bench action ids are valid");
        self.next_action += 1;
        let tenant = self.rng.random_range(0..self.shared.plan.tenants.len());
        let capability = self
            .rng
            .random_range(0..self.shared.plan.capabilities.len());
        let request = self.request(action.clone(), tenant, capability);
        let started = Instant::now();
        let answer = self.shared.registry.route_resolve(request).await;
        let elapsed = started.elapsed();
        self.note(Operation::ResolveNew, elapsed, &answer);
        let tally = &mut self.result.tally;
        let expect = match answer {
            Ok(resolved) => {
                tally.record(Operation::ResolveNew, elapsed, None);
                tally.resolves_created += u64::from(resolved.kind == ResolveKind::Created);
                if resolved.kind != ResolveKind::Created {
                    tally
                        .violations
                        .add(ViolationKind::NewActionNotCreated, || {
                            format!("new action {action} resolved as {:?}", resolved.kind)
                        });
                }
                self.held.push(self.result.tracked.len());
                Expect::Reserved(resolved.assignment)
            }
            Err(e) => {
                tally.record(Operation::ResolveNew, elapsed, Some(e.kind()));
                if Operation::ResolveNew.expects(e.kind()) {
                    Expect::NoRoute
                } else {
                    Expect::Unknown
                }
            }
        };
        self.result.tracked.push(Tracked { action, expect });
        true
    }

    /// A random held reservation: its position in `held` and its index in
    /// `tracked`. Only called with something held.
    fn pick_held(&mut self) -> (usize, usize) {
        let at = self.rng.random_range(0..self.held.len());
        (at, self.held[at])
    }

    async fn resolve_duplicate(&mut self) {
        let (at, i) = self.pick_held();
        let Expect::Reserved(held) = self.result.tracked[i].expect.clone() else {
            return;
        };
        // A duplicate on an expiring replica holds the gate, so the zones
        // fall silent (and maintenance starts) only between such calls;
        // once silent, the reservation may be gone and its holder settles
        // it instead.
        let shared = self.shared;
        let mut _gate = None;
        if let Some(zone) = shared
            .zone
            .as_ref()
            .filter(|_| shared.plan.expiring.contains(&held.destination.replica))
        {
            let guard = zone.gate.read().await;
            if zone.is_silent() {
                drop(guard);
                self.result.tally.substitutions += 1;
                self.settle_at(at, i).await;
                return;
            }
            _gate = Some(guard);
        }
        let identity = &held.identity;
        let tenant = self
            .shared
            .plan
            .tenants
            .iter()
            .position(|t| *t == identity.tenant)
            .unwrap_or(0);
        let capability = self
            .shared
            .plan
            .capabilities
            .iter()
            .position(|c| *c == identity.capability)
            .unwrap_or(0);
        // A fresh topology on purpose: preferences never move a route (ROUTE-11).
        let request = self.request(identity.action.clone(), tenant, capability);
        let started = Instant::now();
        let answer = self.shared.registry.route_resolve(request).await;
        let elapsed = started.elapsed();
        self.note(Operation::ResolveDuplicate, elapsed, &answer);
        let tally = &mut self.result.tally;
        match answer {
            Ok(resolved) => {
                tally.record(Operation::ResolveDuplicate, elapsed, None);
                match resolved.kind {
                    ResolveKind::Existing => tally.resolves_existing += 1,
                    ResolveKind::Reserved => tally.resolves_reserved += 1,
                    ResolveKind::Created => tally.resolves_created += 1,
                }
                if resolved.kind != ResolveKind::Existing || resolved.assignment != held {
                    let action = &held.identity.action;
                    tally
                        .violations
                        .add(ViolationKind::DuplicateResolveChanged, || {
                            format!(
                                "duplicate resolve of held action {action} answered {:?} with {}",
                                resolved.kind,
                                if resolved.assignment == held {
                                    "the held assignment"
                                } else {
                                    "another assignment"
                                }
                            )
                        });
                }
            }
            Err(e) => tally.record(Operation::ResolveDuplicate, elapsed, Some(e.kind())),
        }
    }

    fn outcome(&mut self) -> Outcome {
        let o = &self.shared.mix.settle_outcomes;
        weighted(
            &mut self.rng,
            &[
                (Outcome::Completed, o.completed),
                (Outcome::OutcomeUnknown, o.outcome_unknown),
                (Outcome::Cancelled, o.cancelled),
                (Outcome::LeaseExpired, o.lease_expired),
            ],
        )
        .unwrap_or(Outcome::Completed)
    }

    async fn settle(&mut self) {
        let (at, i) = self.pick_held();
        self.settle_at(at, i).await;
    }

    /// Settles the reservation at position `at` of `held` (`tracked[i]`).
    async fn settle_at(&mut self, at: usize, i: usize) {
        self.held.swap_remove(at);
        let Expect::Reserved(assignment) = self.result.tracked[i].expect.clone() else {
            return;
        };
        let outcome = self.outcome();
        let started = Instant::now();
        let answer = self
            .shared
            .registry
            .route_settle(SettleParams {
                assignment: assignment.clone(),
                outcome,
            })
            .await;
        let elapsed = started.elapsed();
        self.note(Operation::Settle, elapsed, &answer);
        let tally = &mut self.result.tally;
        let tracked = &mut self.result.tracked[i];
        match answer {
            Ok(settled) => {
                tally.record(Operation::Settle, elapsed, None);
                if settled.released {
                    tally.settlements_released += 1;
                } else if self.shared.silent(&assignment.destination.replica) {
                    // Lease maintenance released it first; the end check
                    // holds the store to that.
                    tracked.expect = Expect::Released(assignment, Outcome::LeaseExpired);
                    return;
                } else {
                    let action = &tracked.action;
                    tally.violations.add(ViolationKind::SettleNotReleased, || {
                        format!("settling held action {action} released nothing")
                    });
                }
                tracked.expect = Expect::Released(assignment, outcome);
            }
            Err(e) => {
                tally.record(Operation::Settle, elapsed, Some(e.kind()));
                tracked.expect = Expect::Unknown;
            }
        }
    }

    async fn heartbeat(&mut self) {
        let shared = self.shared;
        let plan = &shared.plan;
        let mut replica = plan.replicas[self.rng.random_range(0..plan.replicas.len())]
            .id
            .clone();
        // A heartbeat to an expiring replica holds the gate, so the zones
        // fall silent only between heartbeats; once silent, another
        // replica's heartbeat goes instead.
        let mut _gate = None;
        if let Some(zone) = shared
            .zone
            .as_ref()
            .filter(|_| plan.expiring.contains(&replica))
        {
            let guard = zone.gate.read().await;
            if zone.is_silent() {
                drop(guard);
                while plan.expiring.contains(&replica) {
                    replica = plan.replicas[self.rng.random_range(0..plan.replicas.len())]
                        .id
                        .clone();
                }
            } else {
                _gate = Some(guard);
            }
        }
        let params = HeartbeatParams {
            lease_ttl_ms: plan.lease_ms(&replica),
            replica,
            health_seq: shared.heartbeat_seq.fetch_add(1, Ordering::Relaxed),
        };
        let started = Instant::now();
        let answer = self.shared.registry.replica_heartbeat(params).await;
        let elapsed = started.elapsed();
        self.note(Operation::Heartbeat, elapsed, &answer);
        let tally = &mut self.result.tally;
        match answer {
            Ok(outcome) => {
                tally.record(Operation::Heartbeat, elapsed, None);
                // Racing heartbeats of one replica may arrive out of order.
                tally.heartbeats_ignored += u64::from(outcome == HeartbeatOutcome::Ignored);
            }
            Err(e) => tally.record(Operation::Heartbeat, elapsed, Some(e.kind())),
        }
    }

    async fn catalog_page(&mut self) {
        let plan = &self.shared.plan;
        let tenant = plan.tenants[self.rng.random_range(0..plan.tenants.len())].clone();
        let query = CatalogQuery::first_page(Reader::Tenant(tenant.clone()));
        let started = Instant::now();
        let answer = self.shared.registry.catalog_page(query).await;
        let elapsed = started.elapsed();
        self.note(Operation::CatalogPage, elapsed, &answer);
        let tally = &mut self.result.tally;
        match answer {
            Ok(page) => {
                tally.record(Operation::CatalogPage, elapsed, None);
                // Every tenant binds every capability (CAT-5).
                let expected = plan
                    .capabilities
                    .len()
                    .min(connreg::limits::PAGE_ITEMS_DEFAULT as usize);
                if page.entries.len() != expected {
                    tally.violations.add(ViolationKind::CatalogIncomplete, || {
                        format!(
                            "tenant {tenant}'s first page lists {} capabilities, not {expected}",
                            page.entries.len()
                        )
                    });
                }
            }
            Err(e) => tally.record(Operation::CatalogPage, elapsed, Some(e.kind())),
        }
    }
}

/// One of `choices`, with probability proportional to its weight; `None`
/// when every weight is zero.
fn weighted<T: Copy>(rng: &mut SmallRng, choices: &[(T, u32)]) -> Option<T> {
    let total: u64 = choices.iter().map(|(_, w)| u64::from(*w)).sum();
    if total == 0 {
        return None;
    }
    let mut pick = rng.random_range(0..total);
    for (choice, w) in choices {
        let w = u64::from(*w);
        if pick < w {
            return Some(*choice);
        }
        pick -= w;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weighted_never_picks_a_zero_weight() {
        let mut rng = SmallRng::seed_from_u64(7);
        for _ in 0..1_000 {
            assert_eq!(weighted(&mut rng, &[(1, 0), (2, 5), (3, 0)]), Some(2));
        }
        assert_eq!(weighted::<u8>(&mut rng, &[(1, 0)]), None);
    }
}
