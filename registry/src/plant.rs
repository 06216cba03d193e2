//! Deliberately wrong behaviours, for proving that checkers catch bugs.
//!
//! Compiled only with the `plant` feature, which no normal build enables;
//! the simulator's tests and its explicit `--plant NAME` flag use it.

use serde::{Deserialize, Serialize};

/// One planted bug in the in-memory backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Plant {
    /// A retry whose pinned replica is unavailable silently picks another.
    FailoverOnRetry,
    /// Resolve decides outside the action lock and overwrites racing routes.
    NoActionSerialization,
    /// Settlement releases capacity again after the reservation was released.
    DoubleRelease,
    /// Settlement accepts an assignment whose fence token differs.
    IgnoreFence,
    /// An applied heartbeat advances the catalog revision.
    HeartbeatAdvancesRevision,
    /// A cursor from an older revision continues at the new revision.
    MixedRevisionPages,
    /// Admission ignores replica capacity and scope limits.
    OverCapacity,
    /// An action assigned to one tenant is returned to another.
    CrossTenantReturn,
    /// Lease maintenance never releases a reservation past its hold
    /// (PIN-8): one nobody settles is held for good.
    HoldNeverExpires,
    /// Settling a released reservation records the new outcome over the
    /// one its release recorded (SETTLE-4), still answering `released:
    /// false`.
    SettleRewritesOutcome,
    /// A completed settlement leaves the replica's consecutive-unknown
    /// count as it was (SETTLE-5): unknowns far apart open the circuit.
    CircuitNeverResets,
    /// A settlement of an unknown outcome answers `released: false` and
    /// leaves the reservation held (SETTLE-3, SETTLE-4): the caller is
    /// told there was nothing to release.
    SettleKeepsUnknown,
    /// A continuation page leaves out the first capability after its
    /// cursor (CAT-8): a paged read never lists it.
    PageSkipsNext,
    /// An applied heartbeat leaves the replica's lease where it was
    /// (LEASE-1, EVID-1): maintenance then expires a replica whose last
    /// applied heartbeat renewed it.
    HeartbeatKeepsLease,
    /// Catalog reads alternate between the primary and a standby one
    /// publication behind it (EVID-2): a reader that was shown the current
    /// revision is shown the one before it by its next first page.
    StaleStandbyReads,
    /// Fences come from a sequence cached in blocks of two, each block
    /// handed out from its top (EVID-3): fences stay unique, but new
    /// reservations take them out of commit order (2, 1, 4, 3, ...).
    FencesOutOfOrder,
    /// `route_get` reads a route as its reservation left it, not seeing a
    /// release (EVID-8): a released route is answered `reserved`, with no
    /// settlement.
    RouteGetIgnoresRelease,
}

impl Plant {
    /// Every plant, in a fixed order.
    pub const ALL: [Plant; 17] = [
        Plant::FailoverOnRetry,
        Plant::NoActionSerialization,
        Plant::DoubleRelease,
        Plant::IgnoreFence,
        Plant::HeartbeatAdvancesRevision,
        Plant::MixedRevisionPages,
        Plant::OverCapacity,
        Plant::CrossTenantReturn,
        Plant::HoldNeverExpires,
        Plant::SettleRewritesOutcome,
        Plant::CircuitNeverResets,
        Plant::SettleKeepsUnknown,
        Plant::PageSkipsNext,
        Plant::HeartbeatKeepsLease,
        Plant::StaleStandbyReads,
        Plant::FencesOutOfOrder,
        Plant::RouteGetIgnoresRelease,
    ];

    /// The plant's name, as the CLI spells it.
    pub fn name(self) -> &'static str {
        match self {
            Plant::FailoverOnRetry => "failover-on-retry",
            Plant::NoActionSerialization => "no-action-serialization",
            Plant::DoubleRelease => "double-release",
            Plant::IgnoreFence => "ignore-fence",
            Plant::HeartbeatAdvancesRevision => "heartbeat-advances-revision",
            Plant::MixedRevisionPages => "mixed-revision-pages",
            Plant::OverCapacity => "over-capacity",
            Plant::CrossTenantReturn => "cross-tenant-return",
            Plant::HoldNeverExpires => "hold-never-expires",
            Plant::SettleRewritesOutcome => "settle-rewrites-outcome",
            Plant::CircuitNeverResets => "circuit-never-resets",
            Plant::SettleKeepsUnknown => "settle-keeps-unknown",
            Plant::PageSkipsNext => "page-skips-next",
            Plant::HeartbeatKeepsLease => "heartbeat-keeps-lease",
            Plant::StaleStandbyReads => "stale-standby-reads",
            Plant::FencesOutOfOrder => "fences-out-of-order",
            Plant::RouteGetIgnoresRelease => "route-get-ignores-release",
        }
    }

    /// What the plant breaks, in one line.
    pub fn description(self) -> &'static str {
        match self {
            Plant::FailoverOnRetry => {
                "a retry with an unavailable pinned replica moves to another replica"
            }
            Plant::NoActionSerialization => "racing resolves of one action each create a route",
            Plant::DoubleRelease => {
                "settling an already released route releases its capacity again"
            }
            Plant::IgnoreFence => "settlement does not compare the fence token",
            Plant::HeartbeatAdvancesRevision => "heartbeats advance the catalog revision",
            Plant::MixedRevisionPages => "a stale cursor continues at the new revision",
            Plant::OverCapacity => "admission ignores replica capacity and scope limits",
            Plant::CrossTenantReturn => "an assigned action is returned to another tenant",
            Plant::HoldNeverExpires => {
                "lease maintenance never releases a reservation past its hold"
            }
            Plant::SettleRewritesOutcome => {
                "settling a released reservation overwrites the outcome its release recorded"
            }
            Plant::CircuitNeverResets => {
                "a completed settlement does not zero the replica's consecutive-unknown count"
            }
            Plant::SettleKeepsUnknown => {
                "a settlement of an unknown outcome answers released: false and keeps the reservation"
            }
            Plant::PageSkipsNext => {
                "a continuation page leaves out the first capability after its cursor"
            }
            Plant::HeartbeatKeepsLease => {
                "an applied heartbeat leaves the replica's lease where it was"
            }
            Plant::StaleStandbyReads => {
                "catalog reads alternate between the primary and a standby one publication behind"
            }
            Plant::FencesOutOfOrder => {
                "new reservations take fences from blocks of two, newest first: unique, out of commit order"
            }
            Plant::RouteGetIgnoresRelease => {
                "route_get answers a released route reserved, as its reservation left it"
            }
        }
    }

    /// Parses a CLI name.
    pub fn parse(name: &str) -> Option<Plant> {
        Plant::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// One planted bug in the PostgreSQL backend
/// (`PgRegistry::with_plant`, feature `postgres`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PgPlant {
    /// Settlement locks the admission counters before the replica row,
    /// against the global lock order (LOCK-1): it can wait for a replica
    /// while holding counters that the replica's holder waits for.
    SettleLocksCountersFirst,
    /// The data role is granted UPDATE on `connreg.replicas`, a grant wider
    /// than the protocol (AUTH-6): it could close circuits or move counts
    /// by SQL.
    GrantTooWide,
}

impl PgPlant {
    /// Every PostgreSQL plant, in a fixed order.
    pub const ALL: [PgPlant; 2] = [PgPlant::SettleLocksCountersFirst, PgPlant::GrantTooWide];

    /// The plant's name.
    pub fn name(self) -> &'static str {
        match self {
            PgPlant::SettleLocksCountersFirst => "settle-locks-counters-first",
            PgPlant::GrantTooWide => "grant-too-wide",
        }
    }
}
