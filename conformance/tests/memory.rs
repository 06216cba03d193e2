//! The in-memory backend runs the whole conformance suite, and the bound on
//! its full inspection.
connreg_conformance::conformance_tests!(connreg_conformance::memory::MemoryHarness);

/// A full inspection reads at most `INSPECT_ROWS_MAX` rows (replicas,
/// routes and scopes together). Memory only: the suite on PostgreSQL would
/// spend minutes registering 200,000 replicas.
mod inspection {
    use connreg::contracts::CatalogAdmin;
    use connreg::inspect::INSPECT_ROWS_MAX;
    use connreg::limits::INSTANCE_REPLICAS_MAX;
    use connreg::{Change, Error, Inspect, Instance, MemoryRegistry, Publication};
    use connreg_conformance::fixture::{self, FleetOptions, Setup};
    use connreg_conformance::memory::MemoryHarness;
    use connreg_conformance::run;

    #[test]
    fn inspection_reads_up_to_its_row_bound_and_refuses_more() {
        run::block_on(async {
            let s: Setup<MemoryRegistry> =
                fixture::open(&MemoryHarness, FleetOptions::default()).await;
            s.resolve_acme("a1").await;
            let snap = s.inspect().await;
            let rows = snap.replicas.len() + snap.routes.len() + snap.scopes.len();
            assert_eq!((snap.routes.len(), snap.scopes.len()), (1, 3));

            let missing = INSPECT_ROWS_MAX - rows;
            let instances = missing.div_ceil(INSTANCE_REPLICAS_MAX) + 1;
            let changes = (0..instances)
                .map(|i| {
                    Change::UpsertInstance(Instance {
                        id: fixture::instance(&format!("i-bulk-{i:03}")),
                        ..s.fleet.instance("i-acme-crm")
                    })
                })
                .collect();
            s.store
                .catalog_publish(Publication { changes })
                .await
                .unwrap();
            let register = |n: usize| {
                let instance = format!("i-bulk-{:03}", n / INSTANCE_REPLICAS_MAX);
                let mut spec = s.fleet.replica_spec("i-acme-crm", 0);
                spec.id = fixture::replica(&format!("{instance}-r{n:06}"));
                spec.instance = fixture::instance(&instance);
                s.register(spec, 1)
            };
            for n in 0..missing {
                register(n).await;
            }
            let full = s.store.inspect().await.expect("exactly the bound");
            assert_eq!(
                full.replicas.len() + full.routes.len() + full.scopes.len(),
                INSPECT_ROWS_MAX
            );
            register(missing).await;
            match s.store.inspect().await {
                Err(Error::LimitExceeded { max, .. }) => {
                    assert_eq!(max, INSPECT_ROWS_MAX as u64)
                }
                other => panic!("expected LimitExceeded past the bound, got {other:?}"),
            }
        });
    }
}

/// One maintenance call releases at most `LEASE_MAINTENANCE_RESERVATIONS_MAX`
/// reservations on the in-memory backend too. Memory only: filling two
/// replicas of the largest capacity takes 20,000 resolves (the PostgreSQL
/// backend's bound is tested at fleet scale by seeding the database,
/// `registry/tests/postgres_fleet_scale.rs`).
mod maintenance_bound {
    use connreg::contracts::ReplicaLifecycle;
    use connreg::limits::{LEASE_MAINTENANCE_RESERVATIONS_MAX, REPLICA_CAPACITY_MAX};
    use connreg::{MaintainParams, MemoryRegistry};
    use connreg_conformance::fixture::{self, FleetOptions, Setup};
    use connreg_conformance::memory::MemoryHarness;
    use connreg_conformance::run;

    #[test]
    fn a_batch_stops_before_the_replica_that_would_pass_the_reservation_bound() {
        // spec: LEASE-2
        run::block_on(async {
            let s: Setup<MemoryRegistry> = fixture::open(
                &MemoryHarness,
                FleetOptions {
                    replicas_per_instance: 2,
                    replica_capacity: REPLICA_CAPACITY_MAX,
                    scope_limit: 1_000_000,
                    ..FleetOptions::default()
                },
            )
            .await;
            // Both of the acme instance's replicas full: 2 x 10,000.
            let held = 2 * REPLICA_CAPACITY_MAX;
            for n in 0..held {
                s.resolve_acme(&format!("a{n}")).await;
            }
            s.clock.advance_ms(FleetOptions::default().lease_ttl_ms);
            let mut calls = Vec::new();
            loop {
                let m = s
                    .store
                    .lease_maintain(MaintainParams { max: 1_000 })
                    .await
                    .unwrap();
                assert!(m.released <= LEASE_MAINTENANCE_RESERVATIONS_MAX);
                calls.push((m.released, m.more));
                if !m.more {
                    break;
                }
                assert!(calls.len() < 10, "maintenance never finished: {calls:?}");
            }
            // The first full replica fits, the second would pass the bound
            // and waits for the next call.
            assert_eq!(calls, vec![(10_000, true), (10_000, false)]);
            assert_eq!(
                s.inspect()
                    .await
                    .routes
                    .iter()
                    .filter(|r| r.reserved)
                    .count(),
                0
            );
        })
    }
}

/// `MemoryRegistry::holding` models rows other transactions hold, as a
/// differential oracle replays a concurrent backend's decisions. Memory
/// only: on PostgreSQL the rows are really held.
mod held_rows {
    use std::collections::BTreeSet;

    use connreg::contracts::ReplicaLifecycle;
    use connreg::{MaintainParams, MemoryRegistry, ReplicaState};
    use connreg_conformance::fixture::{self, FleetOptions, Setup};
    use connreg_conformance::memory::MemoryHarness;
    use connreg_conformance::run;

    #[test]
    fn maintenance_passes_over_a_held_replica_and_takes_the_next_due() {
        // spec: LEASE-2, LOCK-1
        run::block_on(async {
            let s: Setup<MemoryRegistry> =
                fixture::open(&MemoryHarness, FleetOptions::default()).await;
            let mut ids: Vec<_> = s.fleet.replica_specs().into_iter().map(|r| r.id).collect();
            ids.sort();
            s.clock.advance_ms(s.fleet.options.lease_ttl_ms);
            // Every lease ends at the same time, so the batch goes by id.
            let first = ids[0].clone();
            let held = s.store.clone().holding(BTreeSet::from([first.clone()]));
            let m = held
                .lease_maintain(MaintainParams { max: 5 })
                .await
                .unwrap();
            assert_eq!(m.expired, ids[1..6].to_vec(), "{m:?}");
            assert!(m.more, "a passed-over replica is left for the next call");

            let m = held
                .lease_maintain(MaintainParams { max: 100 })
                .await
                .unwrap();
            assert_eq!(m.expired, ids[6..].to_vec(), "{m:?}");
            assert!(m.more);
            // Held, the only replica due is passed over: nothing is done
            // and `more` still says something is left.
            let m = held
                .lease_maintain(MaintainParams { max: 100 })
                .await
                .unwrap();
            assert!(m.expired.is_empty() && m.more, "{m:?}");

            // Free again, it expires on the next call.
            let got = s.store.replica_get(first.clone()).await.unwrap().unwrap();
            assert_ne!(got.state, ReplicaState::Offline);
            let m = s
                .store
                .lease_maintain(MaintainParams { max: 100 })
                .await
                .unwrap();
            assert_eq!(m.expired, vec![first]);
            assert!(!m.more);
        });
    }

    #[test]
    fn the_target_of_a_new_route_is_read_without_writing_and_is_the_resolve_pick() {
        // spec: ROUTE-9, ROUTE-10
        run::block_on(async {
            let s: Setup<MemoryRegistry> =
                fixture::open(&MemoryHarness, FleetOptions::default()).await;
            // Before any resolve the plan is not worked out: no answer.
            let first = s
                .fleet
                .request("a0", &fixture::acme(), &fixture::crm_create());
            assert_eq!(s.store.new_route_target(&first).unwrap(), None);
            s.resolve_acme("a0").await;
            let before = s.inspect().await;
            for n in 1..6 {
                let action = format!("a{n}");
                let request = s
                    .fleet
                    .request(&action, &fixture::acme(), &fixture::crm_create());
                let target = s.store.new_route_target(&request).unwrap().unwrap();
                // Held, the target is passed over for the next best.
                let held = s.store.clone().holding(BTreeSet::from([target.clone()]));
                let next = held.new_route_target(&request).unwrap().unwrap();
                assert_ne!(next, target);
                if n == 1 {
                    assert_eq!(s.inspect().await, before, "reading a target wrote");
                }
                let routed = s.resolve_acme(&action).await;
                assert_eq!(routed.destination.replica, target, "{action}");
            }
        });
    }
}
