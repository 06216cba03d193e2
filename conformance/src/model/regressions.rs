//! Checked-in regression sequences: every run of the model test replays
//! these, in order, before its random cases.
//!
//! Each entry is written in the notation proptest prints for a shrunk
//! failure (`minimal failing input: (ModelState(..), [ .. ], None)`): the
//! variants are imported by name, so the printed list of transitions pastes
//! in as it is. `docs/TESTING.md` describes the whole procedure.
//!
//! An entry stays for good: it documents a disagreement once found and keeps
//! it from coming back on any backend.

use connreg::Outcome::*;

use super::Copy::*;
use super::PublishOp::*;
use super::Regression;
use super::Transition::*;

/// Every regression sequence, oldest first.
pub(super) fn list() -> Vec<Regression> {
    vec![Regression {
        // Found on PostgreSQL. Refused calls of every kind (closing a
        // closed circuit, no eligible binding, a pinned retry on a replica
        // whose lease ended, a tampered settlement) come before one
        // maintenance call, which must take all five expired replicas of
        // six at once, release nothing and report nothing left over.
        // spec: LEASE-2, LEASE-1, PIN-4, SETTLE-2, SETTLE-6, ROUTE-5
        name: "maintenance_after_refused_calls_takes_every_expired_replica",
        transitions: vec![
            Drain { replica: 2 },
            Drain { replica: 4 },
            CircuitClose { replica: 2 },
            Publish(ToggleBinding(0)),
            Resolve {
                action: 0,
                tenant: 1,
                capability: 1,
            },
            Resolve {
                action: 2,
                tenant: 1,
                capability: 1,
            },
            Resolve {
                action: 1,
                tenant: 0,
                capability: 1,
            },
            Resolve {
                action: 1,
                tenant: 0,
                capability: 1,
            },
            Resolve {
                action: 2,
                tenant: 0,
                capability: 0,
            },
            Advance { ms: 45_000 },
            Drain { replica: 0 },
            Settle {
                action: 1,
                outcome: Completed,
                copy: Back(1),
            },
            Advance { ms: 10_000 },
            Resolve {
                action: 1,
                tenant: 0,
                capability: 1,
            },
            Heartbeat {
                replica: 2,
                newer: true,
            },
            Settle {
                action: 1,
                outcome: Completed,
                copy: Tampered,
            },
            Maintain,
        ],
    }]
}
