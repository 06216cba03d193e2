//! The catalogue of planted bugs: deliberately wrong behaviours that prove
//! the checkers catch what they exist for.
//!
//! Three homes: bugs planted in the registry's in-memory backend
//! (`connreg::plant::Plant`, feature `plant`); bugs planted in the
//! simulator's own hosts (a registry host, a dispatcher, a replica), which
//! stand for a wrong server front end, a wrong client or a wrong provider;
//! and bugs planted in how the
//! store wrapper (`backend`) calls the backend, which stand for a store
//! whose answers and rows disagree. Each names the scenario
//! that catches it at seed 1 and the invariant that reports it;
//! `connreg-sim plants` prints the list and CI runs it.

use connreg::plant::Plant;

/// The page `maintain-page-stops-early` reads expired replicas in.
pub const MAINTENANCE_PAGE: u32 = 256;

/// How many draining replicas `drain-lost-in-crowd` keeps track of: a
/// drain past them is answered but not applied. Above the 64 replicas a
/// scenario may list one by one, so only a fleet reaches it.
pub const DRAINING_TRACKED: usize = 64;

/// How many offline replicas `circuit-reset-in-crowd` keeps the circuits
/// of: a replica registering again while more are offline comes back with
/// its circuit closed. No scenario that lists its replicas one by one (64
/// at most) has more offline at once, so only a fleet reaches it.
pub const OFFLINE_TRACKED: usize = 64;

/// How many expired replicas `maintenance-batch-shrinks` handles a call,
/// whatever `max` the call passes: a 500-replica expiry at a batch of
/// 1,000 takes 16 calls instead of one.
pub const MAINTENANCE_SHRUNK_BATCH: u32 = 32;

/// How long, in simulated milliseconds, a registry host under
/// `publication-starves` must see no resolve before it lets a publication
/// through: a stream of resolves closer than this starves it.
pub const STARVING_QUIET_MS: u64 = 20;

/// The longest `publication-starves` holds one publication, in simulated
/// milliseconds (a bounded wait): longer than any scenario's routing
/// stream, so under load a held publication lands after the load.
pub const STARVING_WAIT_MS_MAX: u64 = 60_000;

/// One planted bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum PlantedBug {
    /// A bug in the in-memory backend.
    Store(Plant),
    /// A registry host answers `unavailable` to some resolves although
    /// nothing is wrong with the store.
    SpuriousUnavailable,
    /// A dispatcher takes a transport failure or an `unavailable` answer
    /// to a resolve for a failed action and gives up, though the resolve
    /// may have committed: the reservation it made is never settled.
    CommitReplyLostAsFailure,
    /// The store frees a reservation (route row and counters, consistently)
    /// on a heartbeat of its replica, and no answer says so.
    SilentRelease,
    /// Lease maintenance reports one more released reservation than it
    /// released.
    MaintainOvercount,
    /// A restarted dispatcher ignores its journal: the reservations of the
    /// actions its crash left open are never settled.
    NoReconciliation,
    /// Lease maintenance reads the expired replicas a page of
    /// [`MAINTENANCE_PAGE`] at a time, stops after the first page and
    /// answers `more = false`: the replicas left over wait for a later
    /// round. Only a fleet where more than a page expire at once shows it.
    MaintainPageStopsEarly,
    /// A drain arriving while [`DRAINING_TRACKED`] replicas already drain
    /// is answered `draining` but not applied: the replica stays ready
    /// and keeps taking new routes. Only a fleet drains that many at once.
    DrainLostInCrowd,
    /// A replica registering again while more than [`OFFLINE_TRACKED`]
    /// replicas are offline comes back as if new: its open circuit is
    /// closed with no operator action, and the answer says so. Only a
    /// fleet has that many offline at once (a group crash coming back).
    CircuitResetInCrowd,
    /// A replica keeps one stop signal per action and fence: a second
    /// `execute` of the same fence drops the first one's signal, the drop
    /// reads as a cancel, and executions whose side effects ran answer
    /// `cancelled`.
    SharedStopSignal,
    /// A registry host lets a publication through only once no resolve
    /// has reached it for [`STARVING_QUIET_MS`]: writer starvation, a
    /// publication queued behind a continuous stream of routing (as a
    /// lock queue that favours readers does on PostgreSQL). No answer is
    /// wrong; the publication lands late, or never.
    PublicationStarves,
    /// Lease maintenance handles at most [`MAINTENANCE_SHRUNK_BATCH`]
    /// expired replicas a call whatever `max` it is passed, and answers
    /// `more = true` while more remain: a mass expiry drains in many more
    /// calls than ceil(n / batch).
    MaintenanceBatchShrinks,
    /// A dispatcher's journal keeps what it learnt of an action whatever
    /// fence it was learnt of, and a restarted dispatcher reconciles the
    /// held route with it: a retry's fresh reservation that ran is settled
    /// with the earlier round's outcome (`cancelled`, with no cancel sent).
    ReconcileOtherFenceOutcome,
    /// A dispatcher whose settlement got no answer waits for one forever
    /// instead of retrying: the action never ends, though every fault
    /// healed.
    SettleWaitsForever,
    /// A replica forgets its cancellations: an `execute` of a fence it was
    /// told to cancel runs, though the fence's settlement (with an action
    /// ID another dispatcher shares) may already say `cancelled`.
    CancelForgotten,
    /// A dispatcher hands an `execute` whose outcome it does not know to a
    /// retry queue and settles it `outcome_unknown` at once; the queue sends
    /// it again after the settlement's answer released the fence (EVID-4).
    ExecuteAfterSettle,
    /// A replica's provider client repeats every call once, an
    /// at-least-once client taken for an exactly-once one (EVID-5): one
    /// `execute` performs its side effect twice.
    ExecuteRunsTwice,
    /// Dispatchers keep their journals in one shared store that keeps
    /// finished actions' rows, and an action reads the fence it executes
    /// and cancels back by action ID alone (EVID-6): with an ID several
    /// dispatchers share, another dispatcher's row comes first, with a
    /// fence no answer to this one carried.
    SharedJournalByAction,
    /// A dispatcher takes an `execute` whose outcome it does not know (no
    /// answer, or `unknown`) for done and settles it `completed` (EVID-7).
    UnknownSettledCompleted,
}

impl PlantedBug {
    /// Every planted bug, in a fixed order.
    pub fn all() -> Vec<PlantedBug> {
        let mut all: Vec<PlantedBug> = Plant::ALL.into_iter().map(PlantedBug::Store).collect();
        all.push(PlantedBug::SpuriousUnavailable);
        all.push(PlantedBug::CommitReplyLostAsFailure);
        all.push(PlantedBug::SilentRelease);
        all.push(PlantedBug::MaintainOvercount);
        all.push(PlantedBug::NoReconciliation);
        all.push(PlantedBug::MaintainPageStopsEarly);
        all.push(PlantedBug::DrainLostInCrowd);
        all.push(PlantedBug::CircuitResetInCrowd);
        all.push(PlantedBug::SharedStopSignal);
        all.push(PlantedBug::PublicationStarves);
        all.push(PlantedBug::MaintenanceBatchShrinks);
        all.push(PlantedBug::ReconcileOtherFenceOutcome);
        all.push(PlantedBug::SettleWaitsForever);
        all.push(PlantedBug::CancelForgotten);
        all.push(PlantedBug::ExecuteAfterSettle);
        all.push(PlantedBug::ExecuteRunsTwice);
        all.push(PlantedBug::SharedJournalByAction);
        all.push(PlantedBug::UnknownSettledCompleted);
        all
    }

    /// The name the CLI spells.
    pub fn name(self) -> &'static str {
        match self {
            PlantedBug::Store(p) => p.name(),
            PlantedBug::SpuriousUnavailable => "spurious-unavailable",
            PlantedBug::CommitReplyLostAsFailure => "commit-reply-lost-as-failure",
            PlantedBug::SilentRelease => "silent-release",
            PlantedBug::MaintainOvercount => "maintain-overcount",
            PlantedBug::NoReconciliation => "no-reconciliation",
            PlantedBug::MaintainPageStopsEarly => "maintain-page-stops-early",
            PlantedBug::DrainLostInCrowd => "drain-lost-in-crowd",
            PlantedBug::CircuitResetInCrowd => "circuit-reset-in-crowd",
            PlantedBug::SharedStopSignal => "shared-stop-signal",
            PlantedBug::PublicationStarves => "publication-starves",
            PlantedBug::MaintenanceBatchShrinks => "maintenance-batch-shrinks",
            PlantedBug::ReconcileOtherFenceOutcome => "reconcile-other-fence-outcome",
            PlantedBug::SettleWaitsForever => "settle-waits-forever",
            PlantedBug::CancelForgotten => "cancel-forgotten",
            PlantedBug::ExecuteAfterSettle => "execute-after-settle",
            PlantedBug::ExecuteRunsTwice => "execute-runs-twice",
            PlantedBug::SharedJournalByAction => "shared-journal-by-action",
            PlantedBug::UnknownSettledCompleted => "unknown-settled-completed",
        }
    }

    /// What it breaks, in one line.
    pub fn description(self) -> &'static str {
        match self {
            PlantedBug::Store(p) => p.description(),
            PlantedBug::SpuriousUnavailable => {
                "a registry host answers unavailable to some resolves with no fault"
            }
            PlantedBug::CommitReplyLostAsFailure => {
                "a dispatcher gives up an action whose resolve answer was lost"
            }
            PlantedBug::SilentRelease => {
                "a heartbeat frees a reservation of its replica that no answer releases"
            }
            PlantedBug::MaintainOvercount => {
                "lease maintenance reports one more release than it made"
            }
            PlantedBug::NoReconciliation => {
                "a restarted dispatcher leaves the actions its crash left open held"
            }
            PlantedBug::MaintainPageStopsEarly => {
                "lease maintenance stops after a page of 256 expired replicas and says none remain"
            }
            PlantedBug::DrainLostInCrowd => {
                "a drain while 64 replicas already drain is answered but not applied"
            }
            PlantedBug::CircuitResetInCrowd => {
                "a replica registering again while more than 64 are offline comes back with its circuit closed"
            }
            PlantedBug::SharedStopSignal => {
                "a replica keys executions by action and fence: a second execute's signal drops the first's, read as a cancel"
            }
            PlantedBug::PublicationStarves => {
                "a registry host holds a publication until no resolve has reached it for 20 ms"
            }
            PlantedBug::MaintenanceBatchShrinks => {
                "lease maintenance handles 32 expired replicas a call whatever its batch, answering more"
            }
            PlantedBug::ReconcileOtherFenceOutcome => {
                "a restarted dispatcher settles a retry's fresh reservation with an earlier round's outcome"
            }
            PlantedBug::SettleWaitsForever => {
                "a dispatcher whose settlement got no answer waits for one forever instead of retrying"
            }
            PlantedBug::CancelForgotten => {
                "a replica forgets its cancellations: a later execute of a cancelled fence runs"
            }
            PlantedBug::ExecuteAfterSettle => {
                "a dispatcher's retry queue sends an execute again after it was settled outcome_unknown"
            }
            PlantedBug::ExecuteRunsTwice => {
                "a replica's provider client repeats every call: one execute's side effect runs twice"
            }
            PlantedBug::SharedJournalByAction => {
                "a dispatcher reads its fence back from a shared journal by action ID, getting another dispatcher's row"
            }
            PlantedBug::UnknownSettledCompleted => {
                "a dispatcher settles an execute whose outcome it does not know as completed"
            }
        }
    }

    /// The scenario file that catches it at seed 1.
    pub fn scenario(self) -> &'static str {
        match self {
            PlantedBug::Store(p) => match p {
                Plant::FailoverOnRetry => "0004_replica_crash_mid_action.toml",
                Plant::NoActionSerialization => "0002_duplicate_resolve_storm.toml",
                Plant::DoubleRelease => "0003_retry_after_lost_answer.toml",
                Plant::IgnoreFence => "0005_draining_pinned_retries.toml",
                Plant::HeartbeatAdvancesRevision => "0001_steady_state.toml",
                Plant::MixedRevisionPages => "0007_publications_during_paged_reads.toml",
                Plant::OverCapacity => "0009_capacity_exhaustion_and_scopes.toml",
                Plant::CrossTenantReturn => "0010_one_action_two_tenants.toml",
                Plant::HoldNeverExpires => "0034_resolve_after_caller_gave_up.toml",
                Plant::SettleRewritesOutcome => "0035_shared_action_cancelled.toml",
                Plant::CircuitNeverResets => "0036_circuit_counts_reset.toml",
                Plant::SettleKeepsUnknown => "0036_circuit_counts_reset.toml",
                Plant::PageSkipsNext => "0007_publications_during_paged_reads.toml",
                Plant::HeartbeatKeepsLease => "0001_steady_state.toml",
                Plant::StaleStandbyReads => "0007_publications_during_paged_reads.toml",
                Plant::FencesOutOfOrder => "0001_steady_state.toml",
                Plant::RouteGetIgnoresRelease => "0035_shared_action_cancelled.toml",
            },
            PlantedBug::SpuriousUnavailable => "0001_steady_state.toml",
            PlantedBug::CommitReplyLostAsFailure => "0003_retry_after_lost_answer.toml",
            PlantedBug::SilentRelease => "0001_steady_state.toml",
            PlantedBug::MaintainOvercount => "0004_replica_crash_mid_action.toml",
            PlantedBug::NoReconciliation => "0021_dispatcher_crash_reconciliation.toml",
            PlantedBug::MaintainPageStopsEarly => "0022_mass_expiry.toml",
            PlantedBug::DrainLostInCrowd => "0025_group_crash_and_drain.toml",
            PlantedBug::CircuitResetInCrowd => "0025_group_crash_and_drain.toml",
            PlantedBug::SharedStopSignal => "0002_duplicate_resolve_storm.toml",
            PlantedBug::PublicationStarves => "0023_hot_tenant.toml",
            PlantedBug::MaintenanceBatchShrinks => "0022_mass_expiry.toml",
            PlantedBug::ReconcileOtherFenceOutcome => "0021_dispatcher_crash_reconciliation.toml",
            PlantedBug::SettleWaitsForever => "0003_retry_after_lost_answer.toml",
            PlantedBug::CancelForgotten => "0035_shared_action_cancelled.toml",
            PlantedBug::ExecuteAfterSettle => "0006_circuit_opens_after_unknowns.toml",
            PlantedBug::ExecuteRunsTwice => "0001_steady_state.toml",
            PlantedBug::SharedJournalByAction => "0035_shared_action_cancelled.toml",
            PlantedBug::UnknownSettledCompleted => "0006_circuit_opens_after_unknowns.toml",
        }
    }

    /// The invariant that reports it.
    pub fn invariant(self) -> &'static str {
        use crate::check::invariant;
        match self {
            PlantedBug::Store(p) => match p {
                Plant::FailoverOnRetry => invariant::NO_FAILOVER.0,
                Plant::NoActionSerialization => invariant::ONE_ROUTE.0,
                Plant::DoubleRelease
                | Plant::IgnoreFence
                | Plant::SettleRewritesOutcome
                | Plant::SettleKeepsUnknown => invariant::IDEMPOTENT.0,
                Plant::HeartbeatAdvancesRevision => invariant::REVISION.0,
                Plant::MixedRevisionPages => invariant::ONE_REVISION.0,
                Plant::PageSkipsNext => invariant::PAGES.0,
                Plant::HeartbeatKeepsLease => invariant::LEASE.0,
                Plant::StaleStandbyReads => invariant::MONOTONIC_READS.0,
                Plant::FencesOutOfOrder => invariant::COMMIT_ORDER.0,
                Plant::RouteGetIgnoresRelease => invariant::EVIDENCE.0,
                Plant::OverCapacity => invariant::CAPACITY.0,
                Plant::CrossTenantReturn => invariant::TENANT.0,
                Plant::HoldNeverExpires => invariant::RESERVATIONS_END.0,
                Plant::CircuitNeverResets => invariant::CIRCUIT_COUNTS.0,
            },
            PlantedBug::SpuriousUnavailable => invariant::SPURIOUS_UNAVAILABLE.0,
            PlantedBug::CommitReplyLostAsFailure => invariant::ORPHAN.0,
            PlantedBug::SilentRelease | PlantedBug::MaintainOvercount => invariant::CAPACITY.0,
            PlantedBug::NoReconciliation => invariant::LEAK.0,
            PlantedBug::MaintainPageStopsEarly => invariant::LEASE_PROGRESS.0,
            PlantedBug::DrainLostInCrowd => invariant::ELIGIBLE.0,
            PlantedBug::CircuitResetInCrowd => invariant::CIRCUIT.0,
            PlantedBug::SharedStopSignal => invariant::TRUTHFUL.0,
            PlantedBug::PublicationStarves => invariant::PUBLICATION_PROGRESS.0,
            PlantedBug::MaintenanceBatchShrinks => invariant::MAINTENANCE_DRAINS.0,
            PlantedBug::ReconcileOtherFenceOutcome => invariant::TRUTHFUL.0,
            PlantedBug::SettleWaitsForever => invariant::LIVENESS.0,
            PlantedBug::CancelForgotten
            | PlantedBug::ExecuteAfterSettle
            | PlantedBug::ExecuteRunsTwice
            | PlantedBug::UnknownSettledCompleted => invariant::EVIDENCE.0,
            PlantedBug::SharedJournalByAction => invariant::HOLDER.0,
        }
    }

    /// The store plant, if it is one.
    pub fn store(self) -> Option<Plant> {
        match self {
            PlantedBug::Store(p) => Some(p),
            _ => None,
        }
    }

    /// True for a bug planted in how the simulator's store wrapper calls
    /// the backend (`sim/src/backend.rs`): it runs on either backend.
    pub fn in_store_calls(self) -> bool {
        matches!(
            self,
            PlantedBug::SilentRelease
                | PlantedBug::MaintainOvercount
                | PlantedBug::MaintainPageStopsEarly
                | PlantedBug::DrainLostInCrowd
                | PlantedBug::CircuitResetInCrowd
                | PlantedBug::MaintenanceBatchShrinks
        )
    }

    /// Parses a CLI name.
    pub fn parse(name: &str) -> Option<PlantedBug> {
        PlantedBug::all().into_iter().find(|p| p.name() == name)
    }
}

impl From<Plant> for PlantedBug {
    fn from(p: Plant) -> Self {
        PlantedBug::Store(p)
    }
}
