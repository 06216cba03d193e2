//! The simulated hosts and the context they share.
//!
//! - `registry`: serves the contracts over the simulated network, in front
//!   of the one shared store.
//! - `dispatcher`: resolves, dispatches, retries, cancels and settles.
//! - `replica`: registers, heartbeats, executes and records side effects.
//! - `group`: the host of a replica group, running each of its replicas
//!   as `replica` does, one port each.
//! - `operators`: the catalog administrator, lease maintenance, and
//!   catalog readers.
//! - `rpc`: one call, one connection; the server loop.
//!
//! Hosts share a [`Ctx`] through an `Rc`: everything runs on one thread,
//! in the simulation's fixed host order, so shared state needs no locks and
//! stays deterministic. State a host must keep across its own crash (a
//! replica's health sequence, a dispatcher's action count: what a real host
//! keeps on disk) lives here too.

pub(crate) mod dispatcher;
pub(crate) mod group;
pub(crate) mod operators;
pub(crate) mod registry;
pub(crate) mod replica;
pub(crate) mod rpc;

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use connreg::ReplicaId;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::fleet::{FleetPlan, MixPlan};
use crate::plant::PlantedBug;
use crate::scenario::Scenario;
use crate::trace::{Event, TraceWriter};

/// One window of dropped registry answers.
#[derive(Debug, Clone)]
pub(crate) struct LoseWindow {
    pub(crate) ops: Vec<String>,
    pub(crate) remaining: u32,
}

/// The answers the registry hosts drop after commit.
#[derive(Debug, Default)]
pub(crate) struct LoseAnswers {
    pub(crate) windows: Vec<LoseWindow>,
    /// Probability of dropping any answer (chaos), while the faults last.
    pub(crate) ratio: f64,
}

/// What a fleet-grain fault asks of a replica group's host, by member
/// index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GroupOrder {
    /// These replicas crash: no more heartbeats or answers.
    Crash(Vec<u32>),
    /// These crashed replicas start again.
    Restart(Vec<u32>),
    /// These replicas drain (a graceful shutdown's first step).
    Drain(Vec<u32>),
}

/// The fleet-grain faults in force.
#[derive(Debug, Default)]
pub(crate) struct FleetFaults {
    /// Zones whose replicas send no heartbeat.
    pub(crate) silenced: BTreeSet<String>,
    /// Orders each group's host has not taken yet, by group name.
    pub(crate) orders: BTreeMap<String, Vec<GroupOrder>>,
}

/// A dispatcher's durable progress: what a real dispatcher keeps on disk.
#[derive(Debug, Default, Clone)]
pub(crate) struct DispatcherProgress {
    pub(crate) started: u32,
    pub(crate) done: bool,
    /// Actions started and not ended, by number: the journal a restarted
    /// dispatcher reconciles from.
    pub(crate) open: BTreeMap<u64, Journaled>,
    /// Fences an answer to one of its actions showed no longer held (a
    /// settlement, a `route_get`), kept with the journal: an action of
    /// the same ID (a shared one) never dispatches them (EVID-4). At most
    /// [`crate::limits::DISPATCHER_RELEASED_KEPT`], the oldest forgotten
    /// first.
    pub(crate) released: BTreeSet<connreg::FenceToken>,
}

/// One open action in a dispatcher's journal, written before the calls it
/// records are sent. Its evidence belongs to one fence: a retry that takes
/// a fresh reservation (PIN-3) starts with none.
#[derive(Debug, Clone)]
pub(crate) struct Journaled {
    pub(crate) request: connreg::RouteRequest,
    /// The fence of the reservation the action holds, once it holds one:
    /// the one `dispatched` and `outcome` are about.
    pub(crate) fence: Option<connreg::FenceToken>,
    /// An execute of `fence` may have been sent.
    pub(crate) dispatched: bool,
    /// The outcome learnt from the replica for `fence`, before it is
    /// settled.
    pub(crate) outcome: Option<connreg::Outcome>,
}

impl Journaled {
    /// A journal entry for an action that holds nothing yet.
    pub(crate) fn new(request: connreg::RouteRequest) -> Journaled {
        Journaled {
            request,
            fence: None,
            dispatched: false,
            outcome: None,
        }
    }

    /// Ties the entry to `fence`: the evidence of another fence is
    /// dropped.
    pub(crate) fn tie(&mut self, fence: connreg::FenceToken) {
        if self.fence != Some(fence) {
            self.fence = Some(fence);
            self.dispatched = false;
            self.outcome = None;
        }
    }

    /// Whether an execute of `fence` may have been sent, and the outcome
    /// learnt for it: nothing is known of a fence the entry is not tied to.
    pub(crate) fn evidence(&self, fence: connreg::FenceToken) -> (bool, Option<connreg::Outcome>) {
        if self.fence == Some(fence) {
            (self.dispatched, self.outcome)
        } else {
            (false, None)
        }
    }
}

/// The world shared by all hosts.
pub(crate) struct Ctx {
    pub(crate) seed: u64,
    pub(crate) scenario: Rc<Scenario>,
    pub(crate) plan: Rc<FleetPlan>,
    pub(crate) mix: Vec<MixPlan>,
    pub(crate) registry_hosts: Vec<String>,
    pub(crate) trace: RefCell<TraceWriter>,
    next_rpc: Cell<u64>,
    /// Set when a registry call may have changed the store.
    pub(crate) dirty: Cell<bool>,
    incarnations: RefCell<BTreeMap<String, u64>>,
    health_seq: RefCell<BTreeMap<ReplicaId, u64>>,
    pub(crate) dispatchers: RefCell<BTreeMap<String, DispatcherProgress>>,
    /// What each replica keeps of the fences it served, by its ID: kept
    /// on its disk, it survives its crashes (EVID-9).
    pub(crate) fence_logs: RefCell<BTreeMap<String, replica::FenceLog>>,
    pub(crate) lose: RefCell<LoseAnswers>,
    /// Fleet-grain faults.
    pub(crate) fleet: RefCell<FleetFaults>,
    /// A bug planted in the hosts (a registry, a dispatcher or a replica), if any.
    pub(crate) plant: Option<PlantedBug>,
}

impl Ctx {
    pub(crate) fn new(
        seed: u64,
        scenario: Rc<Scenario>,
        plan: Rc<FleetPlan>,
        mix: Vec<MixPlan>,
        trace: TraceWriter,
        plant: Option<PlantedBug>,
    ) -> Ctx {
        let registry_hosts = (0..scenario.registry.hosts)
            .map(crate::scenario::registry_host)
            .collect();
        Ctx {
            seed,
            scenario,
            plan,
            mix,
            registry_hosts,
            trace: RefCell::new(trace),
            next_rpc: Cell::new(0),
            dirty: Cell::new(false),
            incarnations: RefCell::new(BTreeMap::new()),
            health_seq: RefCell::new(BTreeMap::new()),
            dispatchers: RefCell::new(BTreeMap::new()),
            fence_logs: RefCell::new(BTreeMap::new()),
            lose: RefCell::new(LoseAnswers::default()),
            fleet: RefCell::new(FleetFaults::default()),
            plant,
        }
    }

    /// Appends a trace event.
    pub(crate) fn emit(&self, event: Event) {
        self.trace.borrow_mut().emit(event);
    }

    /// Calls made so far.
    pub(crate) fn rpc_count(&self) -> u64 {
        self.next_rpc.get()
    }

    pub(crate) fn next_rpc_id(&self) -> u64 {
        let id = self.next_rpc.get() + 1;
        self.next_rpc.set(id);
        id
    }

    /// Starts a new incarnation of `host`'s software and returns its RNG:
    /// seeded from the run's seed, the host's name and the incarnation, so
    /// a host's choices do not depend on what other hosts drew.
    pub(crate) fn start(&self, host: &str) -> (u64, SmallRng) {
        let mut incs = self.incarnations.borrow_mut();
        let inc = incs.entry(host.to_string()).or_insert(0);
        *inc += 1;
        let seed =
            mix64(self.seed ^ fnv1a(host.as_bytes()) ^ inc.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        (*inc, SmallRng::seed_from_u64(seed))
    }

    /// The next health sequence of a replica; it survives the replica's
    /// crashes, as a host's clock-derived sequence would.
    pub(crate) fn next_health_seq(&self, replica: &ReplicaId) -> u64 {
        let mut seqs = self.health_seq.borrow_mut();
        let seq = seqs.entry(replica.clone()).or_insert(0);
        *seq += 1;
        *seq
    }

    /// True while a fault silences `zone`'s heartbeats.
    pub(crate) fn zone_silenced(&self, zone: &str) -> bool {
        let fleet = self.fleet.borrow();
        !fleet.silenced.is_empty() && fleet.silenced.contains(zone)
    }

    /// True when this answer to `op` is to be dropped.
    pub(crate) fn lose_answer(&self, op: &str, rng: &mut SmallRng) -> bool {
        let mut lose = self.lose.borrow_mut();
        if let Some(w) = lose
            .windows
            .iter_mut()
            .find(|w| w.remaining > 0 && w.ops.iter().any(|o| o == op))
        {
            w.remaining -= 1;
            return true;
        }
        lose.ratio > 0.0 && rng.random_bool(lose.ratio)
    }

    /// The time stamped on events now.
    pub(crate) fn now_ms(&self) -> u64 {
        self.trace.borrow().now_ms()
    }
}

/// FNV-1a, for mixing names into seeds (stable across processes).
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// SplitMix64's finalizer.
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A uniform draw from `[lo, hi]`.
pub(crate) fn between(rng: &mut SmallRng, [lo, hi]: [u64; 2]) -> u64 {
    if hi <= lo {
        lo
    } else {
        rng.random_range(lo..=hi)
    }
}

/// Exponential backoff for the `attempt`-th retry (from 1), with jitter:
/// `base * 2^min(attempt-1, 3)`, drawn from its upper half.
pub(crate) fn backoff_ms(rng: &mut SmallRng, base: u64, attempt: u32) -> u64 {
    let cap = base.saturating_mul(1 << attempt.saturating_sub(1).min(3));
    between(rng, [cap / 2, cap]).max(1)
}

/// Sleeps in simulated time.
pub(crate) async fn sleep_ms(ms: u64) {
    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
}
