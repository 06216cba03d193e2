//! Fleet events inside a trial's measured run, beside the clients and
//! through the registry's public contracts, as production makes them:
//!
//! - a zone's lease expiry (`[expiry]`): at `at_ms` the replicas of the
//!   contract's zones stop heartbeating; the registry's clock (a
//!   [`ManualClock`], still otherwise) moves one fleet lease and a
//!   millisecond forward, so their leases have run out while every other
//!   replica's (registered and heartbeating with a lease that outlives
//!   every trial, [`FleetPlan::lease_ms`]) has not; then
//!   `ReplicaLifecycle::lease_maintain` runs in batches of `batch`, call
//!   after call, until it finds no expired replica left. Clients holding
//!   a reservation on a silent replica may find it released as
//!   `lease_expired`; that is expected, and the end check holds them to
//!   it;
//! - an operator's publications (`[publications]`): every `interval_ms`,
//!   through `CatalogAdmin::catalog_publish`, alternately disabling a
//!   binding (the last in priority of its tenant and capability, so the
//!   capability stays routable) while raising its tenant's admission limit
//!   by one, and enabling that binding again. A binding left disabled at
//!   the end of the measured run is enabled again, unmeasured.
//!
//! Between trials the expired replicas register again (unmeasured), so
//! each trial's expiry starts from the same fleet.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use connreg::contracts::{CatalogAdmin, ReplicaLifecycle};
use connreg::limits::SCOPE_LIMIT_MAX;
use connreg::{
    ActionId, AdmissionScope, Binding, BindingId, Change, MaintainParams, ManualClock, Publication,
    Revision, ScopeKind, TenantId,
};
use serde::{Deserialize, Serialize};

use super::contract::{Expiry, Publications};
use super::fleet::FleetPlan;
use super::limits::MAINTENANCE_ERRORS_MAX;
use super::stats::{Latency, LatencySummary};

/// Whether a trial's expiring zones have gone silent. Heartbeats to their
/// replicas hold the gate's read side, so none lands after the clock moved.
#[derive(Debug, Default)]
pub struct ZoneState {
    silent: AtomicBool,
    /// Held (read) by a heartbeat to an expiring replica; taken (write)
    /// to silence the zones.
    pub gate: tokio::sync::RwLock<()>,
}

impl ZoneState {
    /// True once the zones stopped heartbeating.
    pub fn is_silent(&self) -> bool {
        self.silent.load(Ordering::SeqCst)
    }
}

/// What one trial's expiry did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExpiryFacts {
    /// The zones that stopped heartbeating.
    pub zones: Vec<String>,
    /// Their replicas: those expected to go offline.
    pub replicas: u64,
    /// The share of the fleet's replicas they are.
    pub replica_share: f64,
    /// False when the trial ended (interrupted) before `at_ms`.
    pub happened: bool,
    /// When the zones went silent, in milliseconds after the start of the
    /// measured run.
    pub at_ms: f64,
    /// Replicas per maintenance call at most.
    pub batch: u32,
    /// Maintenance calls made (failed ones included).
    pub calls: u64,
    /// Maintenance calls that failed (each is retried).
    pub errors: u64,
    /// Failed maintenance calls by error kind.
    #[serde(default)]
    pub error_kinds: BTreeMap<String, u64>,
    /// Of `replicas`, those maintenance took offline.
    pub offline: u64,
    /// Of `replicas`, those still online when maintenance found no more.
    pub left_online: u64,
    /// Replicas outside the zones that maintenance took offline (none
    /// should be).
    pub others_offline: u64,
    /// Reservations released as `lease_expired`.
    pub released: u64,
    /// From the first maintenance call's start to the last one's end, in
    /// milliseconds.
    pub maintenance_ms: f64,
    /// Replicas taken offline per second of maintenance.
    pub replicas_per_s: f64,
    /// Reservations released per second of maintenance.
    pub released_per_s: f64,
    /// Per call latency, failed calls included.
    pub call_latency: LatencySummary,
    /// The slowest successful call, in milliseconds (a failed one's time
    /// is in `call_latency`).
    pub largest_call_ms: f64,
    /// Replicas the slowest successful call took offline.
    pub largest_call_replicas: u64,
    /// From the silence to the end of the call that took the last of
    /// `replicas` offline (or the last call, when some were left), in
    /// milliseconds.
    pub offline_ms: f64,
    /// The contract's bound on `offline_ms`.
    pub offline_within_ms_max: u64,
    /// Every one of `replicas` went offline within the bound.
    pub all_offline_within_bound: bool,
}

impl ExpiryFacts {
    fn new(expiry: &Expiry, plan: &FleetPlan) -> ExpiryFacts {
        let replicas = plan.expiring.len() as u64;
        ExpiryFacts {
            zones: expiry.zones.clone(),
            replicas,
            replica_share: replicas as f64 / plan.replicas.len().max(1) as f64,
            happened: false,
            at_ms: 0.0,
            batch: expiry.batch,
            calls: 0,
            errors: 0,
            error_kinds: BTreeMap::new(),
            offline: 0,
            left_online: replicas,
            others_offline: 0,
            released: 0,
            maintenance_ms: 0.0,
            replicas_per_s: 0.0,
            released_per_s: 0.0,
            call_latency: LatencySummary::default(),
            largest_call_ms: 0.0,
            largest_call_replicas: 0,
            offline_ms: 0.0,
            offline_within_ms_max: expiry.offline_within_ms_max,
            all_offline_within_bound: false,
        }
    }

    /// Every trial's expiry as one: counts added, the slowest call and the
    /// longest time to offline, throughput over the summed maintenance
    /// time, and the bound held only if it held in every trial.
    pub fn pool(trials: &[ExpiryFacts]) -> Option<ExpiryFacts> {
        let first = trials.first()?;
        let mut p = first.clone();
        for t in &trials[1..] {
            p.replicas += t.replicas;
            p.happened &= t.happened;
            p.at_ms = p.at_ms.max(t.at_ms);
            p.calls += t.calls;
            p.errors += t.errors;
            for (k, n) in &t.error_kinds {
                *p.error_kinds.entry(k.clone()).or_default() += n;
            }
            p.offline += t.offline;
            p.left_online += t.left_online;
            p.others_offline += t.others_offline;
            p.released += t.released;
            p.maintenance_ms += t.maintenance_ms;
            p.call_latency.count += t.call_latency.count;
            p.call_latency.p50_ms = p.call_latency.p50_ms.max(t.call_latency.p50_ms);
            p.call_latency.p99_ms = p.call_latency.p99_ms.max(t.call_latency.p99_ms);
            p.call_latency.max_ms = p.call_latency.max_ms.max(t.call_latency.max_ms);
            if t.largest_call_ms > p.largest_call_ms {
                p.largest_call_ms = t.largest_call_ms;
                p.largest_call_replicas = t.largest_call_replicas;
            }
            p.offline_ms = p.offline_ms.max(t.offline_ms);
            p.all_offline_within_bound &= t.all_offline_within_bound;
        }
        let secs = p.maintenance_ms / 1000.0;
        if secs > 0.0 {
            p.replicas_per_s = (p.offline + p.others_offline) as f64 / secs;
            p.released_per_s = p.released as f64 / secs;
        }
        Some(p)
    }
}

/// A trial's expiry, done: its facts and every action whose reservation
/// maintenance released.
#[derive(Debug)]
pub struct ExpiryOutcome {
    /// What it did.
    pub facts: ExpiryFacts,
    /// The actions whose reservations it released.
    pub released: HashSet<ActionId>,
}

/// Waits until `at` (or an interruption), silences the expiring zones,
/// moves `clock` one fleet lease and a millisecond, and runs lease
/// maintenance until it finds no expired replica left.
pub async fn expire<R: ReplicaLifecycle>(
    registry: R,
    plan: Arc<FleetPlan>,
    expiry: Expiry,
    zone: Arc<ZoneState>,
    clock: ManualClock,
    measure_from: Instant,
    interrupted: Arc<AtomicBool>,
) -> ExpiryOutcome {
    let mut facts = ExpiryFacts::new(&expiry, &plan);
    let mut released = HashSet::new();
    let at = measure_from + Duration::from_millis(expiry.at_ms);
    loop {
        if interrupted.load(Ordering::Relaxed) {
            return ExpiryOutcome { facts, released };
        }
        let now = Instant::now();
        if now >= at {
            break;
        }
        tokio::time::sleep((at - now).min(Duration::from_millis(50))).await;
    }
    let silenced = {
        let _no_heartbeat_in_flight = zone.gate.write().await;
        zone.silent.store(true, Ordering::SeqCst);
        clock.advance_ms(plan.shape.lease_ttl_ms + 1);
        Instant::now()
    };
    facts.happened = true;
    facts.at_ms = silenced
        .saturating_duration_since(measure_from)
        .as_secs_f64()
        * 1000.0;
    let mut latency = Latency::default();
    let mut offline: HashSet<connreg::ReplicaId> = HashSet::new();
    let mut others = 0u64;
    let mut last_needed = silenced;
    let mut consecutive_errors = 0;
    let mut last_end;
    loop {
        let started = Instant::now();
        let answer = registry
            .lease_maintain(MaintainParams { max: expiry.batch })
            .await;
        let elapsed = started.elapsed();
        last_end = Instant::now();
        facts.calls += 1;
        latency.record(elapsed);
        match answer {
            Ok(done) => {
                consecutive_errors = 0;
                let ms = elapsed.as_secs_f64() * 1000.0;
                if ms > facts.largest_call_ms {
                    facts.largest_call_ms = ms;
                    facts.largest_call_replicas = done.expired.len() as u64;
                }
                for replica in done.expired {
                    if plan.expiring.contains(&replica) {
                        if offline.insert(replica) {
                            last_needed = last_end;
                        }
                    } else {
                        others += 1;
                    }
                }
                facts.released += u64::from(done.released);
                released.extend(done.releases.into_iter().map(|r| r.action));
                if !done.more {
                    break;
                }
            }
            Err(e) => {
                facts.errors += 1;
                *facts.error_kinds.entry(e.kind().to_string()).or_default() += 1;
                consecutive_errors += 1;
                if consecutive_errors >= MAINTENANCE_ERRORS_MAX {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    facts.offline = offline.len() as u64;
    facts.left_online = facts.replicas - facts.offline;
    facts.others_offline = others;
    facts.maintenance_ms = last_end.saturating_duration_since(silenced).as_secs_f64() * 1000.0;
    let secs = facts.maintenance_ms / 1000.0;
    if secs > 0.0 {
        facts.replicas_per_s = (facts.offline + others) as f64 / secs;
        facts.released_per_s = facts.released as f64 / secs;
    }
    facts.call_latency = latency.summary();
    let done_at = if facts.left_online == 0 {
        last_needed
    } else {
        last_end
    };
    facts.offline_ms = done_at.saturating_duration_since(silenced).as_secs_f64() * 1000.0;
    facts.all_offline_within_bound =
        facts.left_online == 0 && facts.offline_ms <= expiry.offline_within_ms_max as f64;
    ExpiryOutcome { facts, released }
}

/// What one trial's publications did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PublicationFacts {
    /// The contract's interval, in milliseconds.
    pub interval_ms: u64,
    /// Publications attempted in the measured run.
    pub publications: u64,
    /// Of them, accepted.
    pub ok: u64,
    /// Of them, failed; plus a failed re-enabling after the run.
    pub failures: u64,
    /// Failures by error kind.
    pub errors: BTreeMap<String, u64>,
    /// Changes in the accepted publications.
    pub changes: u64,
    /// Latency of every publication call.
    pub latency: LatencySummary,
}

impl PublicationFacts {
    /// Every trial's publications as one, with the pooled latency.
    pub fn pool(trials: &[PublicationFacts], latency: &Latency) -> Option<PublicationFacts> {
        let first = trials.first()?;
        let mut p = first.clone();
        for t in &trials[1..] {
            p.publications += t.publications;
            p.ok += t.ok;
            p.failures += t.failures;
            p.changes += t.changes;
            for (k, n) in &t.errors {
                *p.errors.entry(k.clone()).or_default() += n;
            }
        }
        p.latency = latency.summary();
        Some(p)
    }
}

/// The operator: which binding it toggles next and the admission limits
/// it has published. Lives across trials.
#[derive(Debug, Clone)]
pub struct Publisher {
    bindings: HashMap<BindingId, Binding>,
    tenant_scopes: HashMap<TenantId, AdmissionScope>,
    binding_scopes: HashMap<BindingId, AdmissionScope>,
    tenants: Vec<TenantId>,
    capabilities: usize,
    last_priority: u32,
    next: u64,
}

/// One trial's publications, done.
#[derive(Debug)]
pub struct PublicationOutcome {
    /// What they did.
    pub facts: PublicationFacts,
    /// Their latency.
    pub latency: Latency,
    /// The catalog revision of the last accepted one.
    pub revision: Option<Revision>,
    /// The operator, for the next trial.
    pub publisher: Publisher,
}

impl Publisher {
    /// The operator of `plan`'s catalog.
    pub fn new(plan: &FleetPlan) -> Publisher {
        let mut bindings = HashMap::new();
        let mut tenant_scopes = HashMap::new();
        let mut scopes = HashMap::new();
        for change in &plan.changes {
            match change {
                Change::UpsertBinding(b) => {
                    bindings.insert(b.id.clone(), b.clone());
                }
                Change::UpsertScope(s) if s.kind == ScopeKind::Tenant => {
                    tenant_scopes.insert(s.tenant.clone(), s.clone());
                }
                Change::UpsertScope(s) => {
                    scopes.insert(s.id.clone(), s.clone());
                }
                _ => {}
            }
        }
        let mut binding_scopes = HashMap::new();
        for b in bindings.values() {
            if let Some(s) = b.admission_scopes.iter().find_map(|id| scopes.get(id)) {
                binding_scopes.insert(b.id.clone(), s.clone());
            }
        }
        Publisher {
            bindings,
            tenant_scopes,
            binding_scopes,
            tenants: plan.tenants.clone(),
            capabilities: plan.capabilities.len(),
            last_priority: plan.shape.bindings_per_tenant_capability - 1,
            next: 0,
        }
    }

    /// The binding publication `n` toggles.
    fn target(&self, n: u64) -> Binding {
        let k = n / 2;
        let tenants = self.tenants.len() as u64;
        let t = (k % tenants) as usize;
        let c = (k / tenants) % self.capabilities as u64;
        let id = format!("{}-c{c}-b{}", self.tenants[t], self.last_priority);
        self.bindings
            .iter()
            .find(|(b, _)| b.as_str() == id)
            .map(|(_, b)| b.clone())
            .unwrap_or_else(|| panic!("binding {id} is in the plan"))
    }

    /// The next publication's changes and the scope limits it raises.
    fn next_changes(&self) -> (Vec<Change>, Option<AdmissionScope>) {
        let binding = self.target(self.next);
        if self.next % 2 == 1 {
            return (vec![Change::UpsertBinding(binding)], None);
        }
        let raised = self
            .tenant_scopes
            .get(&binding.tenant)
            .or_else(|| self.binding_scopes.get(&binding.id))
            .filter(|s| s.limit < SCOPE_LIMIT_MAX)
            .map(|s| AdmissionScope {
                limit: s.limit + 1,
                ..s.clone()
            });
        let mut changes: Vec<Change> = raised.iter().cloned().map(Change::UpsertScope).collect();
        changes.push(Change::UpsertBinding(Binding {
            enabled: false,
            ..binding
        }));
        (changes, raised)
    }

    fn accepted(&mut self, raised: Option<AdmissionScope>) {
        if let Some(scope) = raised {
            match scope.kind {
                ScopeKind::Tenant => {
                    self.tenant_scopes.insert(scope.tenant.clone(), scope);
                }
                _ => {
                    let binding = self.target(self.next).id;
                    self.binding_scopes.insert(binding, scope);
                }
            }
        }
        self.next += 1;
    }
}

/// Publishes every `interval_ms` from `measure_from` until `until`, the
/// clients' end (`clients_done`, a trial that stopped early) or an
/// interruption, then enables again a binding left disabled.
pub async fn publish<R: CatalogAdmin>(
    registry: R,
    mut publisher: Publisher,
    publications: Publications,
    measure_from: Instant,
    until: Instant,
    clients_done: Arc<AtomicBool>,
    interrupted: Arc<AtomicBool>,
) -> PublicationOutcome {
    let interval = Duration::from_millis(publications.interval_ms);
    let mut facts = PublicationFacts {
        interval_ms: publications.interval_ms,
        publications: 0,
        ok: 0,
        failures: 0,
        errors: BTreeMap::new(),
        changes: 0,
        latency: LatencySummary::default(),
    };
    let mut latency = Latency::default();
    let mut revision = None;
    let mut ticks = tokio::time::interval_at((measure_from + interval).into(), interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = tokio::time::sleep_until(until.into()) => break,
        }
        if interrupted.load(Ordering::Relaxed)
            || clients_done.load(Ordering::Relaxed)
            || Instant::now() >= until
        {
            break;
        }
        let (changes, raised) = publisher.next_changes();
        let count = changes.len() as u64;
        let started = Instant::now();
        let answer = registry.catalog_publish(Publication { changes }).await;
        latency.record(started.elapsed());
        facts.publications += 1;
        match answer {
            Ok(r) => {
                facts.ok += 1;
                facts.changes += count;
                revision = Some(r);
                publisher.accepted(raised);
            }
            Err(e) => {
                facts.failures += 1;
                *facts.errors.entry(e.kind().to_string()).or_default() += 1;
            }
        }
    }
    if publisher.next % 2 == 1 {
        // Unmeasured: the binding this run disabled serves again.
        let (changes, _) = publisher.next_changes();
        match registry.catalog_publish(Publication { changes }).await {
            Ok(r) => {
                revision = Some(r);
                publisher.accepted(None);
            }
            Err(e) => {
                facts.failures += 1;
                *facts.errors.entry(e.kind().to_string()).or_default() += 1;
            }
        }
    }
    facts.latency = latency.summary();
    PublicationOutcome {
        facts,
        latency,
        revision,
        publisher,
    }
}
