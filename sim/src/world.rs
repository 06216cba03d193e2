//! The world: builds the turmoil simulation around one shared store, steps
//! it, applies the fault schedule, snapshots the store and runs the
//! checkers after every step, and writes the trace.
//!
//! Time: turmoil's simulated clock drives everything. The registry's
//! injected clock is set from it before every step (plus any clock jump),
//! and every trace event carries the step's simulated time. Nothing reads
//! the wall clock; nothing iterates a hash map; the only randomness comes
//! from the seed (turmoil's RNG for latency and link breaks, one RNG per
//! host incarnation for workload choices, one for chaos). Tokio's own
//! randomness only affects `select!` without `biased`, which this crate
//! does not use, so `--cfg tokio_unstable` is not needed.

use std::rc::Rc;
use std::time::Duration;

use connreg::{ChangeCursor, ManualClock, Timestamp};

use crate::backend::{Backend, Store};
use crate::check::Checker;
use crate::counters::Counters;
use crate::faults::{Action, Database, Scheduled, chaos_rng, schedule};
use crate::fleet::{FleetPlan, MixPlan};
use crate::hosts::{self, Ctx, GroupOrder, LoseWindow};
use crate::limits::{
    SNAPSHOT_ATTEMPTS_MAX, STEPS_MAX, TRACE_STEP_BYTES_MAX, TRACE_VIOLATIONS_MAX,
    VIOLATIONS_RECORDED_MAX,
};
use crate::plant::PlantedBug;
use crate::scenario::{
    CutMode, Scenario, dispatcher_host, reader_host, registry_host, replica_host,
};
use crate::trace::{
    EndInfo, Event, FaultEvent, Sink, StartInfo, TRACE_FORMAT, TraceWriter, Violation,
};

/// The registry clock at the start of every run, in milliseconds. Any
/// fixed value works; a large one keeps backward clock jumps positive.
pub(crate) const CLOCK_START_MS: u64 = 1_000_000_000;

/// Real time between the start of a step's offloaded calls and a database
/// fault that strikes during the step: long enough for transactions to
/// begin, short next to one (a few milliseconds on a local server).
const IN_STEP_FAULT_DELAY: Duration = Duration::from_micros(1_500);

/// Turmoil's simulated epoch (2023-11-14), fixed so nothing depends on
/// when a run happens.
const EPOCH_SECS: u64 = 1_700_000_000;

mod database;
mod mirror;
mod order;

use mirror::Mirror;
pub(crate) use order::commit_order;

/// What the world needs besides the scenario and the store.
pub(crate) struct WorldParams {
    pub(crate) seed: u64,
    pub(crate) backend: String,
    pub(crate) plant: Option<PlantedBug>,
    pub(crate) swarm: bool,
    /// What the swarm drew (empty without `--swarm`).
    pub(crate) swarm_draws: crate::swarm::Draws,
    pub(crate) sink: Sink,
    /// Longest real time to wait for offloaded backend calls in one step.
    pub(crate) offload_wait: Duration,
    /// The database behind the store, for database faults.
    pub(crate) database: Option<Box<dyn Database>>,
}

/// What one run did.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The scenario's name.
    pub scenario: String,
    /// The seed.
    pub seed: u64,
    /// Simulation steps.
    pub steps: u64,
    /// Simulated milliseconds.
    pub sim_ms: u64,
    /// Calls between hosts.
    pub operations: u64,
    /// Faults that fired.
    pub faults_fired: u64,
    /// Checker passes (one after every step with events).
    pub checks: u64,
    /// Counters.
    pub counters: Counters,
    /// The first violations found (at most `VIOLATIONS_RECORDED_MAX`).
    pub violations: Vec<Violation>,
    /// How many violations were found.
    pub violation_count: u64,
    /// How many `violation` lines the trace keeps (at most
    /// `TRACE_VIOLATIONS_MAX`).
    pub violations_traced: u64,
    /// Trace lines.
    pub events: u64,
    /// Trace bytes.
    pub trace_bytes: u64,
    /// The step that wrote the most trace bytes (at most
    /// `TRACE_STEP_BYTES_MAX`).
    pub largest_step: StepBytes,
    /// MD5 of the trace.
    pub trace_hash: String,
    /// The trace, when it was kept in memory.
    pub trace: Option<Vec<u8>>,
    /// How often each reachability probe fired (`crate::probes`); the
    /// probes that never fired are absent.
    pub probes: std::collections::BTreeMap<String, u64>,
}

impl RunReport {
    /// True when every invariant and expectation held.
    pub fn ok(&self) -> bool {
        self.violation_count == 0
    }
}

struct World<B: Backend> {
    ctx: Rc<Ctx>,
    store: Store<B>,
    clock: ManualClock,
    clock_offset_ms: i64,
    checker: Checker,
    /// The reachability probes, counted from the same records.
    probes: crate::probes::Probes,
    mirror: Mirror,
    /// Where the next read of the store's change feed starts.
    cursor: Option<ChangeCursor>,
    violations: Vec<Violation>,
    violations_traced: u64,
    checks: u64,
    faults_fired: u64,
    offload_wait: Duration,
    base_latency_ms: u64,
    database: Option<Box<dyn Database>>,
    /// Ends of `next_commit` cut windows waiting for their cut to fire.
    armed_cut_ends: u32,
    /// Database faults that strike while the step's calls run.
    in_step: Vec<Action>,
    /// The differential oracle (offloaded backends: PostgreSQL), fed the
    /// same records as the checkers and judged at the end
    /// (`oracle_agrees`).
    oracle: Option<crate::oracle::Oracle>,
}

/// Runs one scenario against `store` and returns what happened.
pub(crate) fn simulate<B: Backend>(
    scenario: Rc<Scenario>,
    store: Store<B>,
    clock: ManualClock,
    params: WorldParams,
) -> Result<RunReport, String> {
    let plan = Rc::new(FleetPlan::of(&scenario)?);
    let mix = scenario
        .workload
        .mix
        .iter()
        .map(|m| MixPlan::of(&scenario, m.get_ref()))
        .collect::<Result<Vec<_>, _>>()?;
    let ctx = Rc::new(Ctx::new(
        params.seed,
        scenario.clone(),
        plan.clone(),
        mix,
        TraceWriter::new(params.sink),
        params.plant,
    ));
    let store = store.with_plant(params.plant).with_clock(clock.clone());
    let deterministic = !store.is_offloaded();
    let oracle = if deterministic {
        None
    } else {
        Some(crate::oracle::Oracle::new(plan.config.clone())?)
    };
    let mut world = World {
        ctx: ctx.clone(),
        store: store.clone(),
        clock: clock.clone(),
        clock_offset_ms: 0,
        checker: Checker::new(),
        probes: crate::probes::Probes::new(),
        mirror: Mirror::default(),
        cursor: None,
        violations: Vec::new(),
        violations_traced: 0,
        checks: 0,
        faults_fired: 0,
        offload_wait: params.offload_wait,
        base_latency_ms: scenario.scenario.latency_ms[1],
        database: params.database,
        armed_cut_ends: 0,
        in_step: Vec::new(),
        oracle,
    };
    world.set_time(0);
    ctx.emit(Event::Start(Box::new(StartInfo {
        format: TRACE_FORMAT,
        scenario: scenario.scenario.name.clone(),
        seed: params.seed,
        backend: params.backend.clone(),
        plant: params.plant.map(|p| p.name().to_string()),
        swarm: params.swarm,
        deterministic,
        commit_ordered: true,
        expect: scenario.expect.clone(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        revision: env!("CONNREG_SIM_REVISION").to_string(),
        scenario_file: scenario.source.as_ref().map(|s| s.file.clone()),
        scenario_sha256: scenario.source.as_ref().map(|s| s.sha256.clone()),
        swarm_draws: params.swarm_draws.clone(),
        circuit: Some(plan.config.circuit),
    })));
    // A fleet too large for one publication is set up in several, each
    // validated by the registry as any publication is; the replicas are
    // named with the first.
    let mut replicas = Some(plan.specs());
    for publication in plan.publications() {
        let setup = publication.clone();
        let revision = store
            .block(move |b| async move { b.catalog_publish(setup).await })
            .map_err(|e| format!("the fleet's setup publication failed: {e}"))?;
        ctx.emit(Event::Setup {
            publication,
            revision,
            replicas: replicas.take().unwrap_or_default(),
        });
    }

    let s = &scenario.scenario;
    let mut sim = turmoil::Builder::new()
        .rng_seed(params.seed)
        .epoch(std::time::UNIX_EPOCH + Duration::from_secs(EPOCH_SECS))
        .simulation_duration(Duration::from_millis(
            s.duration_ms + s.liveness_ms + 10 * s.tick_ms + 1_000 + drain_ms(&scenario),
        ))
        .tick_duration(Duration::from_millis(s.tick_ms))
        .min_message_latency(Duration::from_millis(s.latency_ms[0]))
        .max_message_latency(Duration::from_millis(s.latency_ms[1]))
        .tcp_capacity(tcp_capacity(&scenario))
        .ephemeral_ports(crate::limits::EPHEMERAL_PORTS)
        .build();
    add_hosts(&mut sim, &ctx, &store);
    let hosts = scenario.host_names();
    let mut plan_faults = schedule(&scenario, &hosts, &mut chaos_rng(params.seed))
        .into_iter()
        .peekable();

    let tick = s.tick_ms;
    let mut steps = 0u64;
    let mut healed: Option<u64> = None;
    let mut t = 0u64;
    let mut largest_step = StepBytes::default();
    loop {
        let before = ctx.trace.borrow().bytes();
        world.set_time(t);
        while let Some(next) = plan_faults.next_if(|x| x.at_ms <= t) {
            world.apply(&mut sim, next);
        }
        if healed.is_none() && t >= s.duration_ms {
            world.heal(&mut sim);
            let deadline = t + s.liveness_ms;
            ctx.emit(Event::Heal {
                deadline_ms: deadline,
            });
            healed = Some(deadline);
        }
        world.end_fired_cuts();
        world.set_time(t);
        if let Err(e) = sim.step() {
            world.checker.run_failure(format!("a host failed: {e}"));
            world.after_step();
            break;
        }
        world.apply_in_step();
        world.wait_offloaded();
        steps += 1;
        t += tick;
        world.after_step();
        if let Some(deadline) = healed
            && (world.dispatchers_done(&mut sim) || t > deadline)
        {
            break;
        }
        if steps >= STEPS_MAX {
            world
                .checker
                .run_failure(format!("the run took {STEPS_MAX} steps"));
            break;
        }
        let bytes = ctx.trace.borrow().bytes() - before;
        if bytes > largest_step.bytes {
            largest_step = StepBytes {
                bytes,
                at_ms: t - tick,
            };
        }
        if bytes > TRACE_STEP_BYTES_MAX {
            world.checker.run_failure(format!(
                "the step at {} ms wrote {bytes} bytes to the trace, past TRACE_STEP_BYTES_MAX ({TRACE_STEP_BYTES_MAX})",
                t - tick
            ));
            break;
        }
    }
    if healed.is_some() && world.checker.violations() == 0 && world.dispatchers_done(&mut sim) {
        drain(&mut world, &mut sim, &mut t, &mut steps);
    }
    world.set_time(t);
    world.end_fired_cuts();
    world.ctx.dirty.set(true);
    world.snapshot();
    world.observe_pending();
    world.checker.finish();
    world.record_found();
    let oracle_violations = world.judge_by_oracle();
    let counters = world.checker.counters().clone();
    let violation_count = world.checker.violations() + oracle_violations;
    ctx.emit(Event::End(EndInfo {
        steps,
        violations: violation_count,
        violations_recorded: world.violations_traced,
        counters: counters.clone(),
        ok: violation_count == 0,
    }));
    drop(sim);
    let operations = ctx.rpc_count();
    let events = ctx.trace.borrow().events();
    let trace_bytes = ctx.trace.borrow().bytes();
    let writer = std::mem::take(&mut *ctx.trace.borrow_mut());
    let (trace_hash, trace, error) = writer.finish();
    if let Some(e) = error {
        return Err(e);
    }
    Ok(RunReport {
        scenario: scenario.scenario.name.clone(),
        seed: params.seed,
        steps,
        sim_ms: t,
        operations,
        faults_fired: world.faults_fired,
        checks: world.checks,
        counters,
        violations: world.violations,
        violation_count,
        violations_traced: world.violations_traced,
        events,
        trace_bytes,
        largest_step,
        trace_hash,
        trace,
        probes: std::mem::take(&mut world.probes).into_hits(),
    })
}

/// The longest drain a run may need: the scenario's reservation hold, two
/// maintenance intervals and a call timeout (PIN-8).
fn drain_ms(s: &Scenario) -> u64 {
    crate::hold::hold_ms(s) + 2 * s.lifecycle.maintenance_ms + s.workload.rpc_timeout_ms
}

/// Once the workload is done with reservations still held, runs on
/// without workload or faults until none is held or the drain's end,
/// which `reservations_end` then judges. Looks at the store once a
/// maintenance interval.
fn drain<B: Backend>(
    world: &mut World<B>,
    sim: &mut turmoil::Sim<'_>,
    t: &mut u64,
    steps: &mut u64,
) {
    if world.checker.held_reservations() == 0 {
        return;
    }
    let s = world.ctx.scenario.clone();
    let tick = s.scenario.tick_ms;
    let until = *t + drain_ms(&s);
    world.ctx.emit(Event::Drain { until_ms: until });
    world.after_step();
    let every = s.lifecycle.maintenance_ms.max(tick);
    let mut next_look = *t + every;
    while *t <= until {
        world.set_time(*t);
        if let Err(e) = sim.step() {
            world.checker.run_failure(format!("a host failed: {e}"));
            world.after_step();
            return;
        }
        world.apply_in_step();
        world.wait_offloaded();
        *steps += 1;
        *t += tick;
        world.after_step();
        if *steps >= STEPS_MAX {
            world
                .checker
                .run_failure(format!("the run took {STEPS_MAX} steps"));
            return;
        }
        if *t >= next_look {
            next_look = *t + every;
            world.ctx.dirty.set(true);
            world.after_step();
            if world.checker.held_reservations() == 0 {
                return;
            }
        }
    }
}

/// The step that wrote the most trace bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepBytes {
    /// Trace bytes the step wrote, its checks included.
    pub bytes: u64,
    /// Simulated time the step started at, in milliseconds.
    pub at_ms: u64,
}

/// Turmoil's per-socket buffer: room for every call the world can have in
/// flight to one host at once (a fleet registering together), so a burst
/// queues as on a real server instead of overflowing the simulator.
fn tcp_capacity(s: &Scenario) -> usize {
    let w = &s.workload;
    let callers = s.replica_count()
        + (w.dispatchers as usize) * (w.concurrency as usize) * (w.duplicates as usize + 1)
        + w.readers.len();
    TCP_CAPACITY_MIN.max(2 * callers + TCP_CAPACITY_MIN)
}

/// Turmoil's default per-socket buffer.
const TCP_CAPACITY_MIN: usize = 64;

fn add_hosts<B: Backend>(sim: &mut turmoil::Sim<'_>, ctx: &Rc<Ctx>, store: &Store<B>) {
    let s = ctx.scenario.clone();
    for i in 0..s.registry.hosts {
        let (ctx, store) = (ctx.clone(), store.clone());
        let me = registry_host(i);
        sim.host(me.clone(), move || {
            hosts::registry::run(ctx.clone(), store.clone(), me.clone())
        });
    }
    for (spec, unknown) in ctx.plan.replicas.clone() {
        let ctx = ctx.clone();
        let me = replica_host(spec.id.as_str());
        sim.host(me.clone(), move || {
            hosts::replica::run(ctx.clone(), spec.clone(), unknown, me.clone())
        });
    }
    for (i, g) in ctx.plan.groups.iter().enumerate() {
        let ctx = ctx.clone();
        sim.host(g.host.clone(), move || hosts::group::run(ctx.clone(), i));
    }
    for i in 0..s.workload.dispatchers {
        let ctx = ctx.clone();
        ctx.dispatchers
            .borrow_mut()
            .insert(dispatcher_host(i), hosts::DispatcherProgress::default());
        sim.host(dispatcher_host(i), move || {
            hosts::dispatcher::run(ctx.clone(), i)
        });
    }
    for i in 0..s.workload.readers.len() {
        let ctx = ctx.clone();
        sim.host(reader_host(i), move || {
            hosts::operators::reader(ctx.clone(), i)
        });
    }
    let admin_ctx = ctx.clone();
    sim.host(crate::scenario::ADMIN_HOST, move || {
        hosts::operators::admin(admin_ctx.clone())
    });
    let maint_ctx = ctx.clone();
    sim.host(crate::scenario::MAINTAINER_HOST, move || {
        hosts::operators::maintainer(maint_ctx.clone())
    });
}

fn pairs(a: &[String], b: &[String]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for x in a {
        for y in b {
            if x != y {
                out.push((x.clone(), y.clone()));
            }
        }
    }
    out
}

impl<B: Backend> World<B> {
    fn set_time(&mut self, t: u64) {
        self.ctx.trace.borrow_mut().set_now(t);
        let now = (CLOCK_START_MS + t).saturating_add_signed(self.clock_offset_ms);
        self.clock.set(Timestamp(now));
    }

    fn fault(&mut self, f: FaultEvent) {
        self.ctx.emit(Event::Fault(f));
    }

    fn apply(&mut self, sim: &mut turmoil::Sim<'_>, s: Scheduled) {
        if s.action.is_fault() {
            self.faults_fired += 1;
        }
        match s.action {
            Action::Crash(hosts) => {
                let mut crashed = Vec::new();
                for h in hosts {
                    if sim.is_host_running(h.as_str()) {
                        sim.crash(h.as_str());
                        crashed.push(h);
                    }
                }
                if !crashed.is_empty() {
                    self.fault(FaultEvent::Crash { hosts: crashed });
                }
            }
            Action::Restart(hosts) => {
                for h in &hosts {
                    sim.bounce(h.as_str());
                }
                self.fault(FaultEvent::Restart { hosts });
            }
            Action::Partition { a, b, oneway } => {
                for (x, y) in pairs(&a, &b) {
                    if oneway {
                        sim.partition_oneway(x.as_str(), y.as_str());
                    } else {
                        sim.partition(x.as_str(), y.as_str());
                    }
                }
                self.fault(FaultEvent::Partition { a, b, oneway });
            }
            Action::Repair { a, b, oneway } => {
                for (x, y) in pairs(&a, &b) {
                    if oneway {
                        sim.repair_oneway(x.as_str(), y.as_str());
                    } else {
                        sim.repair(x.as_str(), y.as_str());
                    }
                }
                self.fault(FaultEvent::Repair { a, b, oneway });
            }
            Action::Hold { a, b } => {
                for (x, y) in pairs(&a, &b) {
                    sim.hold(x.as_str(), y.as_str());
                }
                self.fault(FaultEvent::Hold { a, b });
            }
            Action::Release { a, b } => {
                for (x, y) in pairs(&a, &b) {
                    sim.release(x.as_str(), y.as_str());
                }
                self.fault(FaultEvent::Release { a, b });
            }
            Action::Latency { a, b, max_ms } => {
                for (x, y) in pairs(&a, &b) {
                    sim.set_link_max_message_latency(
                        x.as_str(),
                        y.as_str(),
                        Duration::from_millis(max_ms),
                    );
                }
                self.fault(FaultEvent::Latency { a, b, max_ms });
            }
            Action::LatencyRestore { a, b } => {
                let base = Duration::from_millis(self.base_latency_ms);
                for (x, y) in pairs(&a, &b) {
                    sim.set_link_max_message_latency(x.as_str(), y.as_str(), base);
                }
                self.fault(FaultEvent::LatencyRestore { a, b });
            }
            Action::Loss(rate) => {
                sim.set_fail_rate(rate);
                self.fault(FaultEvent::Loss { rate });
            }
            Action::LossEnd => {
                sim.set_fail_rate(0.0);
                self.fault(FaultEvent::LossEnd);
            }
            Action::LoseAnswers { ops, count } => {
                self.ctx.lose.borrow_mut().windows.push(LoseWindow {
                    ops: ops.clone(),
                    remaining: count,
                });
                self.fault(FaultEvent::LoseAnswers { ops, count });
            }
            Action::LoseAnswersEnd { ops } => {
                self.ctx.lose.borrow_mut().windows.retain(|w| w.ops != ops);
                self.fault(FaultEvent::LoseAnswersEnd);
            }
            Action::LoseRatio(r) => {
                self.ctx.lose.borrow_mut().ratio = r;
                if r > 0.0 {
                    self.fault(FaultEvent::LoseAnswers {
                        ops: vec!["*".into()],
                        count: 0,
                    });
                } else {
                    self.fault(FaultEvent::LoseAnswersEnd);
                }
            }
            Action::ClockJump(by_ms) => {
                self.clock_offset_ms = self.clock_offset_ms.saturating_add(by_ms);
                let t = self.ctx.now_ms();
                self.set_time(t);
                let clock = connreg::Clock::now(&self.clock);
                self.fault(FaultEvent::ClockJump { by_ms, clock });
            }
            Action::ZoneSilence(zone) => {
                self.ctx.fleet.borrow_mut().silenced.insert(zone.clone());
                self.fault(FaultEvent::ZoneSilence { zone });
            }
            Action::ZoneSilenceEnd(zone) => {
                self.ctx.fleet.borrow_mut().silenced.remove(&zone);
                self.fault(FaultEvent::ZoneSilenceEnd { zone });
            }
            Action::GroupCrash { group, members } => {
                let replicas = self.members(&group, &members);
                self.order(&group, GroupOrder::Crash(members));
                self.fault(FaultEvent::GroupCrash { group, replicas });
            }
            Action::GroupRestart { group, members } => {
                let replicas = self.members(&group, &members);
                self.order(&group, GroupOrder::Restart(members));
                self.fault(FaultEvent::GroupRestart { group, replicas });
            }
            Action::GroupDrain { group, members } => {
                let replicas = self.members(&group, &members);
                self.order(&group, GroupOrder::Drain(members));
                self.fault(FaultEvent::GroupDrain { group, replicas });
            }
            // Cuts, terminations and restarts strike while the step's
            // calls run, so transactions are caught in the middle.
            Action::DbCut(CutMode::All)
            | Action::DbTerminate
            | Action::DbRestart
            | Action::DbFailover => self.in_step.push(s.action),
            Action::DbCut(CutMode::NextCommit)
            | Action::DbStall(_)
            | Action::DbEnd(_)
            | Action::DbDetachStandby => self.apply_database(s.action),
        }
    }

    /// The names of members `members` of replica group `group`.
    fn members(&self, group: &str, members: &[u32]) -> Vec<String> {
        let Some(g) = self.ctx.plan.groups.iter().find(|g| g.name == group) else {
            return Vec::new();
        };
        members
            .iter()
            .filter_map(|&i| g.members.get(i as usize))
            .map(|m| m.spec.id.to_string())
            .collect()
    }

    /// Leaves an order for a replica group's host, which takes it within
    /// a tick.
    fn order(&self, group: &str, order: GroupOrder) {
        self.ctx
            .fleet
            .borrow_mut()
            .orders
            .entry(group.to_string())
            .or_default()
            .push(order);
    }

    /// Applies the database faults that strike during the step, once its
    /// calls have had a moment to start their transactions.
    fn apply_in_step(&mut self) {
        if self.in_step.is_empty() {
            return;
        }
        // The offloaded tier only: its calls run in real time.
        #[allow(clippy::disallowed_methods)]
        std::thread::sleep(IN_STEP_FAULT_DELAY); // determinism-ok: database faults only
        for action in std::mem::take(&mut self.in_step) {
            self.apply_database(action);
        }
    }

    /// Ends what is left of the network faults (every scheduled one has
    /// already ended by now; this is the safety net).
    fn heal(&mut self, sim: &mut turmoil::Sim<'_>) {
        sim.set_fail_rate(0.0);
        self.ctx.fleet.borrow_mut().silenced.clear();
        let mut lose = self.ctx.lose.borrow_mut();
        lose.windows.clear();
        lose.ratio = 0.0;
    }

    /// Waits (in real time) for offloaded backend calls, so simulated time
    /// does not run ahead of a real database.
    fn wait_offloaded(&mut self) {
        if !self.store.is_offloaded() {
            return;
        }
        let mut waited = Duration::ZERO;
        let step = Duration::from_micros(200);
        while self.store.inflight() > 0 {
            if waited >= self.offload_wait {
                self.checker.run_failure(format!(
                    "{} backend calls did not finish within {:?}",
                    self.store.inflight(),
                    self.offload_wait
                ));
                return;
            }
            // The offloaded (PostgreSQL) tier waits for a real database.
            #[allow(clippy::disallowed_methods)]
            std::thread::sleep(step); // determinism-ok: offloaded tier only
            waited += step;
        }
    }

    /// Moves the answers offloaded calls recorded into the trace, in
    /// commit order (see [`commit_order`]).
    fn record_offloaded(&mut self) {
        for event in commit_order(self.store.take_recorded()) {
            self.ctx.dirty.set(true);
            self.ctx.emit(event);
        }
    }

    fn observe_pending(&mut self) -> u64 {
        let (first, pending) = self.ctx.trace.borrow_mut().take_pending_numbered();
        for (line, r) in (first..).zip(&pending) {
            self.checker.observe_at(line, r);
            self.probes.observe(r);
            if let Some(o) = &mut self.oracle {
                o.observe(line, r);
            }
        }
        pending.len() as u64
    }

    fn snapshot(&mut self) {
        self.record_offloaded();
        if !self.ctx.dirty.replace(false) {
            return;
        }
        // A connection a database fault broke fails one call and is
        // replaced: a failed snapshot is taken again on another.
        let mut attempt = 1;
        let changes = loop {
            match self.store.changes(self.cursor) {
                Ok(changes) => break changes,
                Err(_) if attempt < SNAPSHOT_ATTEMPTS_MAX && self.database.is_some() => {
                    attempt += 1;
                }
                Err(e) => {
                    self.checker
                        .run_failure(format!("the store snapshot failed: {e}"));
                    return;
                }
            }
        };
        self.cursor = Some(changes.cursor);
        if let Some(diff) = self.mirror.diff(changes.snapshot) {
            self.ctx.emit(Event::Snapshot(diff));
        }
    }

    fn record_found(&mut self) -> u64 {
        let found = self.checker.take_found();
        let n = found.len() as u64;
        for v in found {
            if self.violations.len() < VIOLATIONS_RECORDED_MAX {
                self.violations.push(v.clone());
            }
            if self.violations_traced < TRACE_VIOLATIONS_MAX {
                self.violations_traced += 1;
                self.ctx.emit(Event::Violation(v));
            }
        }
        // Verdict lines are the checkers' own output: not checked again.
        let _ = self.ctx.trace.borrow_mut().take_pending();
        n
    }

    /// The differential oracle's verdict on the whole run, recorded as an
    /// `oracle_agrees` violation when it found a differing call (or could
    /// not judge the trace). Returns the violations recorded (0 or 1).
    fn judge_by_oracle(&mut self) -> u64 {
        let Some(oracle) = self.oracle.take() else {
            return 0;
        };
        let (invariant, rules) = crate::oracle::ORACLE_AGREES;
        let violation = match oracle.finish() {
            Ok(report) => match report.divergence {
                None => return 0,
                Some(d) => Violation {
                    invariant: invariant.into(),
                    rules: rules.into(),
                    detail: d.lines().join("\n"),
                    at_ms: self.ctx.trace.borrow().now_ms(),
                    lines: vec![d.line],
                    rpcs: vec![d.id],
                    ..Violation::default()
                },
            },
            Err(e) => Violation {
                invariant: invariant.into(),
                rules: rules.into(),
                detail: format!("the oracle could not judge the trace: {e}"),
                at_ms: self.ctx.trace.borrow().now_ms(),
                ..Violation::default()
            },
        };
        if self.violations.len() < VIOLATIONS_RECORDED_MAX {
            self.violations.push(violation.clone());
        }
        if self.violations_traced < TRACE_VIOLATIONS_MAX {
            self.violations_traced += 1;
            self.ctx.emit(Event::Violation(violation));
        }
        let _ = self.ctx.trace.borrow_mut().take_pending();
        1
    }

    /// The checks after every step: the step's events, then the store.
    fn after_step(&mut self) {
        self.record_offloaded();
        let mut events = self.observe_pending();
        self.snapshot();
        events += self.observe_pending();
        if events == 0 {
            return;
        }
        let violations = self.record_found();
        self.checks += 1;
        self.ctx.emit(Event::Check { events, violations });
        let _ = self.ctx.trace.borrow_mut().take_pending();
    }

    /// True when every dispatcher still running has finished its quota.
    fn dispatchers_done(&self, sim: &mut turmoil::Sim<'_>) -> bool {
        let progress = self.ctx.dispatchers.borrow();
        progress
            .iter()
            .all(|(name, p)| p.done || !sim.is_host_running(name.as_str()))
    }
}
