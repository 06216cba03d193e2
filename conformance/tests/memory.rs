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
