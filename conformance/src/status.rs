//! Goal: aggregate status is backend-neutral and agrees with the store:
//! replicas by state, live reservations, routes, open circuits and the
//! revision (AUTH-5).

use connreg::contracts::{CatalogRead, Operations, ReplicaLifecycle, Routing, Status};
use connreg::inspect::{ChangeCursor, ScopeUsage};
use connreg::request::CircuitCloseParams;
use connreg::*;

use crate::Harness;
use crate::fixture::{self, FleetOptions, acme, crm_create, replica};

// spec: AUTH-5, REC-6
/// Status counts replicas by state, reservations held, routes ever made,
/// open circuits and the revision, exactly as a full inspection shows.
pub async fn status_counts_match_the_store<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default().with_circuit(true, 1)).await;
    let empty = s.store.status().await.unwrap();
    assert_eq!(
        empty,
        StatusReport {
            revision: Revision(1),
            replicas_ready: 12,
            replicas_draining: 0,
            replicas_offline: 0,
            active_assignments: 0,
            assignments_total: 0,
            open_circuits: 0,
        }
    );
    let a = s.resolve_acme("a1").await;
    s.resolve_acme("a2").await;
    s.resolve("g1", &fixture::globex(), &fixture::crm_create())
        .await
        .unwrap();
    s.settle(&a, Outcome::OutcomeUnknown).await.unwrap();
    s.store
        .replica_drain(replica("i-acme-crm-r3"))
        .await
        .unwrap();
    // Everything but i-acme-mail's replicas stays alive.
    s.keep_alive(|spec| spec.instance.as_str() != "i-acme-mail")
        .await;
    s.clock.advance_ms(s.fleet.options.lease_ttl_ms);
    s.store
        .lease_maintain(MaintainParams { max: 100 })
        .await
        .unwrap();

    let status = s.store.status().await.unwrap();
    assert_eq!(
        status,
        StatusReport {
            revision: Revision(1),
            replicas_ready: 7,
            replicas_draining: 1,
            replicas_offline: 4,
            active_assignments: 2,
            assignments_total: 3,
            open_circuits: 1,
        }
    );
    let snap = s.inspect().await;
    let count = |state| snap.replicas.iter().filter(|r| r.state == state).count() as u64;
    assert_eq!(status.replicas_ready, count(ReplicaState::Ready));
    assert_eq!(status.replicas_draining, count(ReplicaState::Draining));
    assert_eq!(status.replicas_offline, count(ReplicaState::Offline));
    assert_eq!(
        status.active_assignments,
        snap.routes.iter().filter(|r| r.reserved).count() as u64
    );
    assert_eq!(status.assignments_total, snap.routes.len() as u64);
    assert_eq!(
        status.open_circuits,
        snap.replicas.iter().filter(|r| r.circuit.open).count() as u64
    );
    assert_eq!(status.revision, snap.revision);
}

// spec: AUTH-1, AUTH-5
/// The data-plane handle serves the same store as the full handle: every
/// data-plane call through it answers what the full handle answers and
/// writes where the full handle reads.
pub async fn data_plane_handle_serves_the_same_store<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let data = H::data_plane(&s.store);

    assert_eq!(data.catalog_revision().await.unwrap(), Revision(1));
    let first = CatalogQuery::first_page(Reader::Tenant(acme()));
    assert_eq!(
        data.catalog_page(first.clone()).await.unwrap(),
        s.store.catalog_page(first).await.unwrap()
    );

    let resolved = data
        .route_resolve(s.fleet.request("dp-1", &acme(), &crm_create()))
        .await
        .unwrap();
    assert_eq!(resolved.kind, ResolveKind::Created);
    let action = resolved.assignment.identity.action.clone();
    let route = data
        .route_get(acme(), action.clone())
        .await
        .unwrap()
        .expect("the route resolved through the data plane");
    assert_eq!(route.assignment, resolved.assignment);
    assert!(route.reserved);
    assert_eq!(
        s.store.route_get(acme(), action.clone()).await.unwrap(),
        Some(route)
    );
    assert_eq!(
        data.route_get(fixture::globex(), action.clone())
            .await
            .unwrap(),
        None,
        "another tenant's route is not found"
    );

    let target = resolved.assignment.destination.replica.clone();
    let held = data
        .replica_get(target.clone())
        .await
        .unwrap()
        .expect("the routed replica");
    assert_eq!(held.active, 1);
    assert_eq!(
        s.store.replica_get(target.clone()).await.unwrap(),
        Some(held)
    );
    assert_eq!(data.replica_get(replica("nowhere")).await.unwrap(), None);

    let status = data.status().await.unwrap();
    assert_eq!(status, s.store.status().await.unwrap());
    assert_eq!(
        (
            status.revision,
            status.active_assignments,
            status.replicas_ready
        ),
        (Revision(1), 1, 12)
    );

    let settled = data
        .route_settle(SettleParams {
            assignment: resolved.assignment.clone(),
            outcome: Outcome::Completed,
        })
        .await
        .unwrap();
    assert!(settled.released);
    assert_eq!(s.store.status().await.unwrap().active_assignments, 0);

    assert_eq!(
        data.replica_heartbeat(HeartbeatParams {
            replica: target.clone(),
            health_seq: 2,
            lease_ttl_ms: 600_000,
        })
        .await
        .unwrap(),
        HeartbeatOutcome::Applied
    );
    let drained = data.replica_drain(target.clone()).await.unwrap();
    assert_eq!(drained.state, ReplicaState::Draining);
    assert_eq!(drained.health_seq, 2);
    let back = data
        .replica_register(RegisterParams {
            spec: drained.spec.clone(),
            health_seq: 3,
            lease_ttl_ms: 600_000,
        })
        .await
        .unwrap();
    assert_eq!(back.state, ReplicaState::Ready);

    s.clock.advance_ms(s.fleet.options.lease_ttl_ms);
    let maintained = data
        .lease_maintain(MaintainParams { max: 100 })
        .await
        .unwrap();
    assert_eq!(maintained.expired.len(), 11, "all but the renewed replica");
    assert_eq!(s.store.status().await.unwrap().replicas_offline, 11);
}

/// The rows a change feed has delivered so far, applied one read at a
/// time: what a consumer of the feed believes the store holds.
#[derive(Default)]
struct FeedMirror {
    cursor: Option<ChangeCursor>,
    revision: Revision,
    replicas: std::collections::BTreeMap<ReplicaId, Replica>,
    scopes: std::collections::BTreeMap<ScopeId, ScopeUsage>,
    routes: std::collections::BTreeMap<ActionId, RouteRecord>,
    /// Reads that came back as the rows changed since a cursor.
    partial_reads: u32,
}

impl FeedMirror {
    /// Reads the feed from the mirror's cursor and applies what it says.
    async fn read<S: Inspect>(&mut self, store: &S, after: &str) {
        let changes = store.inspect_changes(self.cursor).await.expect("feed");
        let snap = changes.snapshot;
        let sorted = |ids: Vec<String>| ids.windows(2).all(|w| w[0] < w[1]);
        assert!(
            sorted(
                snap.replicas
                    .iter()
                    .map(|r| r.spec.id.to_string())
                    .collect()
            ) && sorted(snap.scopes.iter().map(|s| s.scope.id.to_string()).collect())
                && sorted(
                    snap.routes
                        .iter()
                        .map(|r| r.assignment.identity.action.to_string())
                        .collect()
                ),
            "after {after}: the feed lists rows in identifier order"
        );
        if changes.complete {
            self.replicas.clear();
            self.scopes.clear();
            self.routes.clear();
        } else {
            self.partial_reads += 1;
        }
        self.revision = snap.revision;
        for r in snap.replicas {
            self.replicas.insert(r.spec.id.clone(), r);
        }
        for s in snap.scopes {
            self.scopes.insert(s.scope.id.clone(), s);
        }
        for r in snap.routes {
            self.routes.insert(r.assignment.identity.action.clone(), r);
        }
        self.cursor = Some(changes.cursor);
    }

    fn snapshot(&self) -> StoreSnapshot {
        StoreSnapshot {
            revision: self.revision,
            replicas: self.replicas.values().cloned().collect(),
            scopes: self.scopes.values().cloned().collect(),
            routes: self.routes.values().cloned().collect(),
        }
    }
}

// spec: AUTH-5
/// The change feed adds up to the store: after every kind of write
/// (resolve, pinned reserve, settle, circuit open and close, drain,
/// heartbeat, maintenance, registration, publication), the rows read from
/// the feed since the previous read, applied over what was read before,
/// equal a full inspection; a read with nothing written since returns no
/// row unless the backend answers every read with the whole store.
pub async fn change_feed_adds_up_to_a_full_inspection<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default().with_circuit(true, 1)).await;
    let mut feed = FeedMirror::default();
    feed.read(&s.store, "opening").await;
    assert_eq!(
        feed.snapshot(),
        s.inspect().await,
        "the first read is whole"
    );

    let mut steps = 0u32;
    macro_rules! step {
        ($what:expr) => {{
            feed.read(&s.store, $what).await;
            assert_eq!(
                feed.snapshot(),
                s.inspect().await,
                "after {}: the feed missed a write",
                $what
            );
            steps += 1;
        }};
    }

    let a1 = s.resolve_acme("f-a1").await;
    step!("a resolve");
    let a2 = s.resolve_acme("f-a2").await;
    s.resolve("f-g1", &fixture::globex(), &fixture::crm_create())
        .await
        .unwrap();
    step!("two resolves");
    s.settle(&a1, Outcome::Completed).await.unwrap();
    step!("a settlement");
    let again = s.resolve_acme("f-a1").await;
    assert_eq!(again.reservation.attempt, 2);
    step!("a pinned reserve");
    s.settle(&a2, Outcome::OutcomeUnknown).await.unwrap();
    step!("a settlement that opens a circuit");
    s.store
        .circuit_close(CircuitCloseParams {
            replica: a2.destination.replica.clone(),
            reason: "feed test".into(),
        })
        .await
        .unwrap();
    step!("closing a circuit");
    s.store
        .replica_drain(replica("i-acme-crm-r3"))
        .await
        .unwrap();
    step!("a drain");
    s.keep_alive(|spec| spec.instance.as_str() != "i-acme-mail")
        .await;
    step!("heartbeats");
    let mut wider = s.fleet.scope("s-acme");
    wider.limit += 5;
    s.publish(vec![Change::UpsertScope(wider)]).await.unwrap();
    step!("a publication of a scope");
    s.clock.advance_ms(s.fleet.options.lease_ttl_ms);
    s.store
        .lease_maintain(MaintainParams { max: 100 })
        .await
        .unwrap();
    step!("lease maintenance");
    let back = s.fleet.replicas_of("i-acme-mail").remove(0);
    s.register(back, 3).await;
    step!("a registration coming back");

    let before = feed.partial_reads;
    feed.read(&s.store, "nothing").await;
    if feed.partial_reads > before {
        let quiet = s.store.inspect_changes(feed.cursor).await.unwrap();
        assert!(
            quiet.snapshot.replicas.is_empty()
                && quiet.snapshot.scopes.is_empty()
                && quiet.snapshot.routes.is_empty(),
            "no write, no row"
        );
    }
    assert_eq!(feed.snapshot(), s.inspect().await);
    assert_eq!(steps, 11);
}

/// Heartbeats the change-feed test sends, most of them to a few replicas:
/// enough that a backend keeping an entry per write would hold thousands
/// for a dozen rows.
const FEED_REWRITES: u64 = 3_000;

// spec: AUTH-5
/// The change feed stays exact while the same rows are written over and
/// over: thousands of heartbeats, most to a few replicas, with reads from
/// cursors taken at several points between them, each applied over what
/// was read before, add up to a full inspection; a cursor from before the
/// run lists every replica written since it, once.
pub async fn change_feed_stays_exact_over_many_rewrites_of_the_same_rows<H: Harness>(harness: &H) {
    let s = fixture::open(harness, FleetOptions::default()).await;
    let specs = s.fleet.replica_specs();
    let mut feed = FeedMirror::default();
    feed.read(&s.store, "opening").await;
    let start = feed.cursor;
    let mut written = std::collections::BTreeSet::new();
    for n in 0..FEED_REWRITES {
        // Three of every four beats go to the first three replicas.
        let at = if n % 4 == 3 {
            (n / 4) as usize % specs.len()
        } else {
            n as usize % 3
        };
        s.store
            .replica_heartbeat(HeartbeatParams {
                replica: specs[at].id.clone(),
                health_seq: 2 + n,
                lease_ttl_ms: 600_000,
            })
            .await
            .unwrap();
        written.insert(specs[at].id.clone());
        if n % 700 == 699 {
            feed.read(&s.store, "heartbeats").await;
            assert_eq!(
                feed.snapshot(),
                s.inspect().await,
                "after {} heartbeats: the feed missed a write",
                n + 1
            );
        }
    }
    feed.read(&s.store, "the last heartbeats").await;
    assert_eq!(
        feed.snapshot(),
        s.inspect().await,
        "the feed missed a write"
    );
    let since_start = s.store.inspect_changes(start).await.unwrap();
    let listed: Vec<ReplicaId> = since_start
        .snapshot
        .replicas
        .iter()
        .map(|r| r.spec.id.clone())
        .collect();
    if !since_start.complete {
        let expected: Vec<ReplicaId> = written.into_iter().collect();
        assert_eq!(
            listed, expected,
            "every replica written since the cursor, once"
        );
    }
}
