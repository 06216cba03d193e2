//! The PostgreSQL backend runs the whole conformance suite, each test on a
//! fresh database of its own with its own control and data roles
//! (`connreg::postgres::testing`; the server comes from connreg-pgtest).
//! Needs `connreg` with feature `postgres-testing` among this crate's
//! dev-dependencies.

/// Opens a [`connreg::postgres::PgRegistry`] on a new test database.
struct PgHarness;

impl connreg_conformance::Harness for PgHarness {
    type Store = connreg::postgres::PgRegistry;
    type DataPlane = connreg::postgres::PgDataPlane;

    async fn open(
        &self,
        clock: connreg::ManualClock,
        config: connreg::RegistryConfig,
    ) -> connreg::postgres::PgRegistry {
        connreg::postgres::testing::TestRegistry::open(clock, config)
            .await
            .unwrap_or_else(|e| panic!("a PostgreSQL registry for the conformance suite: {e}"))
    }

    fn data_plane(store: &connreg::postgres::PgRegistry) -> connreg::postgres::PgDataPlane {
        store.data_plane()
    }

    fn operator_authority(store: &connreg::postgres::PgRegistry) -> String {
        store.control_role().to_owned()
    }
}

connreg_conformance::conformance_tests!(PgHarness);
