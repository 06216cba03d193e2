//! Goal: under real concurrency (many tasks on a multi-threaded runtime,
//! released together by a barrier) the backend serializes what the rules
//! say it serializes: one route per action, one release per reservation,
//! pages from one revision (ROUTE-3, ROUTE-6, CAT-4, CAT-9, SETTLE-2).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use connreg::contracts::{CatalogRead, ReplicaLifecycle, Routing};
use connreg::*;
use tokio::sync::Barrier;

use crate::fixture::{self, FleetOptions, acme, crm_create};
use crate::support::assert_err;
use crate::{Harness, check};

/// Racing tasks per test.
pub const RACERS: usize = 32;

/// Rounds of a race per test, so one run exercises several interleavings.
pub const ROUNDS: usize = 4;

/// Runs `n` copies of `task` at once, released together by a barrier, and
/// returns their results in task order.
pub async fn race<T, F, Fut>(n: usize, task: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut,
    Fut: Future<Output = T> + Send + 'static,
{
    let barrier = Arc::new(Barrier::new(n));
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        let barrier = barrier.clone();
        let fut = task(i);
        handles.push(tokio::spawn(async move {
            barrier.wait().await;
            fut.await
        }));
    }
    let mut out = Vec::with_capacity(n);
    for h in handles {
        out.push(h.await.expect("racing task panicked"));
    }
    out
}

// spec: ROUTE-3, ROUTE-7
/// Many tasks racing to resolve one action produce exactly one assignment,
/// and every caller gets that same assignment.
pub async fn racing_resolves_of_one_action_create_one_assignment<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    for round in 0..ROUNDS {
        let action_id = format!("raced-{round}");
        let request = s.fleet.request(&action_id, &acme(), &crm_create());
        let results = race(RACERS, |_| {
            let store = s.store.clone();
            let request = request.clone();
            async move { store.route_resolve(request).await }
        })
        .await;
        let resolved: Vec<Resolved> = results
            .into_iter()
            .map(|r| r.expect("every racer gets the route"))
            .collect();
        let created = resolved
            .iter()
            .filter(|r| r.kind == ResolveKind::Created)
            .count();
        assert_eq!(created, 1, "round {round}: exactly one racer creates");
        let first = &resolved[0].assignment;
        assert!(
            resolved.iter().all(|r| &r.assignment == first),
            "round {round}: every racer gets the identical assignment"
        );
        let snap = s.inspect().await;
        check::assert_clean(&check::all(&snap), &format!("round {round}"));
        assert_eq!(snap.routes.len(), round + 1, "one route per action");
        let active: u32 = snap.replicas.iter().map(|r| r.active).sum();
        assert_eq!(active as usize, round + 1, "one reservation per action");
    }
}

// spec: ROUTE-6, ROUTE-7, REC-8
/// Many new actions racing for a small fleet: exactly as many win as there
/// is room (replica capacity, then a scope limit), the rest get
/// NoCapacity, and no counter ever goes over.
pub async fn racing_resolves_never_exceed_capacity<H: Harness>(harness: &H) {
    let options = FleetOptions {
        replicas_per_instance: 2,
        replica_capacity: 4,
        ..FleetOptions::default()
    };
    for (scope_limit, winners) in [(100, 8), (5, 5)] {
        let s = fixture::open(harness, options.clone()).await;
        let mut narrow = s.fleet.scope("s-acme-crm");
        narrow.limit = scope_limit;
        s.publish(vec![Change::UpsertScope(narrow)]).await.unwrap();
        let results = race(RACERS, |i| {
            let store = s.store.clone();
            let request = s.fleet.request(&format!("a{i}"), &acme(), &crm_create());
            async move { store.route_resolve(request).await }
        })
        .await;
        let ok = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(ok, winners, "scope limit {scope_limit}");
        for r in results {
            if r.is_err() {
                assert_err!(r, Error::NoCapacity);
            }
        }
        let snap = s.inspect().await;
        check::assert_clean(&check::all(&snap), "after the capacity race");
        assert_eq!(snap.routes.len(), winners);
    }
}

const BULK: usize = 24;
const PUBLICATIONS: usize = 40;

/// Generation `g` of the bulk definitions: every summary says `gen-g`,
/// and in odd generations the first third is inactive.
fn bulk_generation(g: usize) -> Vec<Change> {
    (0..BULK)
        .map(|i| {
            Change::UpsertDefinition(CapabilityDefinition {
                id: fixture::cap(&format!("bulk.op.{i:02}")),
                summary: format!("gen-{g}"),
                schema: "{}".into(),
                active: !(g % 2 == 1 && i < BULK / 3),
            })
        })
        .collect()
}

fn bulk_ids(g: usize) -> Vec<String> {
    (0..BULK)
        .filter(|i| !(g % 2 == 1 && *i < BULK / 3))
        .map(|i| format!("bulk.op.{i:02}"))
        .collect()
}

// spec: CAT-4, CAT-9, CAT-8
/// A publisher republishing while readers page through the catalog: every
/// page is consistent with the revision it carries, a continuation either
/// stays on its revision or gets StaleCursor, and every completed listing
/// is exactly one generation.
pub async fn publications_racing_paginated_reads_never_mix_revisions<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let base = s.publish(bulk_generation(0)).await.unwrap().0;
    let done = Arc::new(AtomicBool::new(false));
    let publisher = {
        let store = s.store.clone();
        let done = done.clone();
        tokio::spawn(async move {
            use connreg::contracts::CatalogAdmin;
            for g in 1..=PUBLICATIONS {
                let rev = store
                    .catalog_publish(Publication {
                        changes: bulk_generation(g),
                    })
                    .await
                    .unwrap();
                assert_eq!(rev.0, base + g as u64, "only this task publishes");
                tokio::task::yield_now().await;
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    let readers = race(4, |_| {
        let store = s.store.clone();
        let done = done.clone();
        async move {
            let query = CatalogQuery {
                search: Some("bulk".into()),
                page_items: Some(4),
                ..CatalogQuery::first_page(Reader::Internal {
                    include_unbound: true,
                })
            };
            let mut stale = 0usize;
            let mut complete = 0usize;
            loop {
                let finished = done.load(Ordering::SeqCst);
                let mut listing: Vec<String> = Vec::new();
                let mut q = query.clone();
                let mut revision = None;
                let outcome = loop {
                    match store.catalog_page(q.clone()).await {
                        Ok(page) => {
                            let g = (page.revision.0 - base) as usize;
                            for e in &page.entries {
                                assert_eq!(
                                    e.summary,
                                    format!("gen-{g}"),
                                    "a page at revision {:?} shows another generation",
                                    page.revision
                                );
                            }
                            match revision {
                                None => revision = Some(page.revision),
                                Some(r) => {
                                    assert_eq!(r, page.revision, "a listing mixed revisions")
                                }
                            }
                            listing.extend(page.entries.iter().map(|e| e.capability.to_string()));
                            match page.next {
                                Some(c) => q.cursor = Some(c),
                                None => break Some(g),
                            }
                        }
                        Err(Error::StaleCursor) => {
                            assert!(q.cursor.is_some(), "a first page is never stale");
                            break None;
                        }
                        Err(e) => panic!("unexpected {e:?}"),
                    }
                    tokio::task::yield_now().await;
                };
                match outcome {
                    Some(g) => {
                        assert_eq!(listing, bulk_ids(g), "a complete listing is one generation");
                        complete += 1;
                    }
                    None => stale += 1,
                }
                if finished {
                    return (complete, stale);
                }
            }
        }
    })
    .await;
    publisher.await.expect("publisher");
    for (complete, _stale) in &readers {
        assert!(*complete >= 1, "every reader completes a listing");
    }

    // With the race over, a continuation across one more publication is
    // always stale.
    let query = CatalogQuery {
        search: Some("bulk".into()),
        page_items: Some(4),
        ..CatalogQuery::first_page(Reader::Internal {
            include_unbound: true,
        })
    };
    let first = s.store.catalog_page(query.clone()).await.unwrap();
    s.publish(bulk_generation(PUBLICATIONS + 1)).await.unwrap();
    assert_err!(
        s.store
            .catalog_page(CatalogQuery {
                cursor: first.next,
                ..query
            })
            .await,
        Error::StaleCursor
    );
}

// spec: SETTLE-2, SETTLE-4, SETTLE-3
/// Many tasks settling one reservation at once: exactly one releases it,
/// the others succeed with `released: false`, and every counter is exact.
pub async fn racing_settlements_release_once<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let outcomes = [
        Outcome::Completed,
        Outcome::OutcomeUnknown,
        Outcome::Cancelled,
        Outcome::LeaseExpired,
    ];
    for round in 0..ROUNDS {
        let a = s.resolve_acme(&format!("a{round}")).await;
        let results = race(RACERS, |i| {
            let store = s.store.clone();
            let params = SettleParams {
                assignment: a.clone(),
                outcome: outcomes[i % outcomes.len()],
            };
            async move { (params.outcome, store.route_settle(params).await) }
        })
        .await;
        let winners: Vec<Outcome> = results
            .iter()
            .filter_map(|(o, r)| match r {
                Ok(Settled { released: true }) => Some(*o),
                Ok(Settled { released: false }) => None,
                Err(e) => panic!("round {round}: unexpected {e:?}"),
            })
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: exactly one release");
        let record = s
            .store
            .route_get(acme(), a.identity.action.clone())
            .await
            .unwrap()
            .unwrap();
        assert!(!record.reserved);
        assert_eq!(record.last_settlement, Some(winners[0]));
        let snap = s.inspect().await;
        check::assert_clean(&check::all(&snap), &format!("round {round}"));
        assert!(snap.replicas.iter().all(|r| r.active == 0));
        assert!(snap.scopes.iter().all(|u| u.in_use == 0));
    }
}

// spec: SETTLE-2, PIN-3, ROUTE-3
/// Settlements of one copy racing retries of the same action: one
/// settlement releases, the rest are idempotent or FenceLost once a retry
/// took a new reservation; at most one retry re-reserves; every retry
/// keeps the destination; counters stay exact.
pub async fn settlements_racing_retries_keep_counters_exact<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    for round in 0..ROUNDS {
        let action_id = format!("a{round}");
        let copy = s.resolve_acme(&action_id).await;
        let request = s.fleet.request(&action_id, &acme(), &crm_create());
        enum Answer {
            Settled(Result<Settled>),
            Resolved(Box<Result<Resolved>>),
        }
        let results = race(RACERS, |i| {
            let store = s.store.clone();
            let copy = copy.clone();
            let request = request.clone();
            async move {
                if i % 2 == 0 {
                    Answer::Settled(
                        store
                            .route_settle(SettleParams {
                                assignment: copy,
                                outcome: Outcome::Completed,
                            })
                            .await,
                    )
                } else {
                    Answer::Resolved(Box::new(store.route_resolve(request).await))
                }
            }
        })
        .await;
        let mut released = 0;
        let mut reserved_again = Vec::new();
        for answer in results {
            match answer {
                Answer::Settled(Ok(Settled { released: true })) => released += 1,
                Answer::Settled(Ok(Settled { released: false }))
                | Answer::Settled(Err(Error::FenceLost)) => {}
                Answer::Settled(Err(e)) => panic!("unexpected settlement error {e:?}"),
                Answer::Resolved(r) => match *r {
                    Ok(r) => {
                        assert_eq!(r.assignment.identity, copy.identity);
                        assert_eq!(r.assignment.destination, copy.destination);
                        assert_eq!(r.assignment.policy, copy.policy);
                        if r.kind == ResolveKind::Reserved {
                            reserved_again.push(r.assignment);
                        } else {
                            assert_eq!(r.kind, ResolveKind::Existing);
                        }
                    }
                    Err(e) => panic!("unexpected resolve error {e:?}"),
                },
            }
        }
        assert_eq!(
            released, 1,
            "round {round}: exactly one release of the copy"
        );
        assert!(
            reserved_again.len() <= 1,
            "round {round}: at most one re-reservation"
        );
        let snap = s.inspect().await;
        check::assert_clean(&check::all(&snap), &format!("round {round}"));
        let record = snap
            .routes
            .iter()
            .find(|r| r.assignment.identity.action.as_str() == action_id)
            .unwrap();
        assert_eq!(record.reserved, reserved_again.len() == 1);
        if let Some(again) = reserved_again.pop() {
            assert_eq!(record.assignment, again);
            assert!(s.settle(&again, Outcome::Completed).await.unwrap().released);
        }
    }
}

// spec: SETTLE-5, SETTLE-2
/// Unknown outcomes of different actions on one replica, settled at once,
/// each count once: the replica's unknown count is read and written under
/// its row, so no settlement's count is lost to another's.
pub async fn racing_unknown_settlements_count_every_one<H: Harness>(harness: &H) {
    let options = FleetOptions {
        replicas_per_instance: 1,
        replica_capacity: RACERS as u32,
        ..FleetOptions::default()
    }
    .with_circuit(true, connreg::limits::CIRCUIT_THRESHOLD_MAX);
    let s = fixture::open(harness, options).await;
    let r0 = fixture::replica("i-acme-crm-r0");
    for round in 0..ROUNDS {
        let mut routes = Vec::with_capacity(RACERS);
        for i in 0..RACERS {
            routes.push(s.resolve_acme(&format!("unknown-{round}-{i}")).await);
        }
        let results = race(RACERS, |i| {
            let store = s.store.clone();
            let params = SettleParams {
                assignment: routes[i].clone(),
                outcome: Outcome::OutcomeUnknown,
            };
            async move { store.route_settle(params).await }
        })
        .await;
        for (i, r) in results.iter().enumerate() {
            assert_eq!(
                r,
                &Ok(Settled { released: true }),
                "round {round}, settlement {i}"
            );
        }
        let circuit = s
            .store
            .replica_get(r0.clone())
            .await
            .unwrap()
            .expect("the replica")
            .circuit;
        assert_eq!(
            circuit.consecutive_unknown as usize,
            (round + 1) * RACERS,
            "round {round}: every unknown outcome counts once"
        );
        let snap = s.inspect().await;
        check::assert_clean(&check::all(&snap), &format!("round {round}"));
    }
}

// spec: LEASE-1
/// Racing heartbeats of one replica: the highest sequence wins, whatever
/// order they land in.
pub async fn racing_heartbeats_keep_the_highest_sequence<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let id = fixture::replica("i-acme-crm-r0");
    let results = race(RACERS, |i| {
        let store = s.store.clone();
        let params = HeartbeatParams {
            replica: id.clone(),
            health_seq: 2 + i as u64,
            lease_ttl_ms: 1_000 * (2 + i as u64),
        };
        async move { store.replica_heartbeat(params).await }
    })
    .await;
    let applied = results
        .iter()
        .map(|r| r.as_ref().expect("heartbeat"))
        .filter(|o| **o == HeartbeatOutcome::Applied)
        .count();
    assert!(applied >= 1);
    let r = s.store.replica_get(id).await.unwrap().unwrap();
    let top = 1 + RACERS as u64;
    assert_eq!(r.health_seq, top);
    assert_eq!(
        r.lease_expires_at,
        Timestamp(fixture::CLOCK_START_MS + 1_000 * top)
    );
}

/// Actions each racer of the mixed-load test drives, one after another.
pub const MIXED_ACTIONS_PER_RACER: usize = 6;

// spec: LOCK-1, LOCK-2, ROUTE-6, PIN-3, SETTLE-3
/// New routes, settlements, pinned retries, heartbeats and lease
/// maintenance racing over two bindings of one tenant that share a tenant
/// scope, the first with a scope of its own that is nearly always full:
/// decisions keep abandoning it for the second binding while settlements
/// and retries lock the same replicas and counters. Every answer is one
/// the rules allow for a healthy store (never `Unavailable`, which is kept
/// for a store that cannot be reached), and afterwards every counter
/// equals its live reservations.
pub async fn mixed_load_over_a_full_binding_never_answers_unavailable<H: Harness>(harness: &H) {
    let s = fixture::open(
        harness,
        FleetOptions {
            backup_binding: true,
            replicas_per_instance: 2,
            replica_capacity: 64,
            ..FleetOptions::default()
        },
    )
    .await;
    // The first binding's own scope holds two reservations at a time.
    let mut own = s.fleet.scope("s-acme-crm");
    own.limit = 2;
    s.publish(vec![Change::UpsertScope(own)])
        .await
        .expect("the scope limit publishes");
    let replicas: Vec<ReplicaId> = s
        .fleet
        .replicas_of("i-acme-crm")
        .into_iter()
        .chain(s.fleet.replicas_of("i-acme-crm-backup"))
        .map(|spec| spec.id)
        .collect();
    let lease_ttl_ms = s.fleet.options.lease_ttl_ms;
    for round in 0..ROUNDS {
        let results = race(RACERS, |i| {
            let store = s.store.clone();
            let fleet = s.fleet.clone();
            let replicas = replicas.clone();
            async move {
                let mut answers: Vec<(String, Error)> = Vec::new();
                let mut note = |what: &str, e: Error| answers.push((what.to_string(), e));
                if i % 8 == 7 {
                    // Lifecycle traffic on the same replicas.
                    for (k, replica) in replicas.iter().enumerate() {
                        let beat = HeartbeatParams {
                            replica: replica.clone(),
                            health_seq: (round * RACERS + i + k) as u64 + 10,
                            lease_ttl_ms,
                        };
                        if let Err(e) = store.replica_heartbeat(beat).await {
                            note("heartbeat", e);
                        }
                    }
                    if let Err(e) = store.lease_maintain(MaintainParams { max: 16 }).await {
                        note("maintain", e);
                    }
                    return answers;
                }
                for n in 0..MIXED_ACTIONS_PER_RACER {
                    let action_id = format!("m{round}-{i}-{n}");
                    let request = fleet.request(&action_id, &acme(), &crm_create());
                    let first = match store.route_resolve(request.clone()).await {
                        Ok(r) => r.assignment,
                        Err(Error::NoCapacity) => continue,
                        Err(e) => {
                            note("resolve", e);
                            continue;
                        }
                    };
                    let settle = |assignment: RouteAssignment| SettleParams {
                        assignment,
                        outcome: Outcome::Completed,
                    };
                    if let Err(e) = store.route_settle(settle(first.clone())).await {
                        note("settle", e);
                        continue;
                    }
                    if n % 2 == 0 {
                        // A pinned retry of the released action, settled again.
                        match store.route_resolve(request).await {
                            Ok(again) => {
                                if let Err(e) = store.route_settle(settle(again.assignment)).await {
                                    note("settle after retry", e);
                                }
                            }
                            Err(Error::NoCapacity | Error::ReplicaUnavailable) => {}
                            Err(e) => note("pinned retry", e),
                        }
                    }
                }
                answers
            }
        })
        .await;
        let unexpected: Vec<(String, Error)> = results.into_iter().flatten().collect();
        assert!(
            unexpected.is_empty(),
            "round {round}: answers a healthy store never gives: {unexpected:?}"
        );
        check::assert_clean(&check::all(&s.inspect().await), "after the mixed load");
    }
}
