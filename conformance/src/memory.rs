//! The in-memory backend's harness, plain and with a planted bug.

use connreg::memory::MemoryDataPlane;
use connreg::plant::Plant;
use connreg::{ManualClock, MemoryRegistry, RegistryConfig};

use crate::Harness;

/// Opens fresh [`MemoryRegistry`] stores.
#[derive(Debug, Clone, Copy, Default)]
pub struct MemoryHarness;

impl Harness for MemoryHarness {
    type Store = MemoryRegistry;
    type DataPlane = MemoryDataPlane;

    async fn open(&self, clock: ManualClock, config: RegistryConfig) -> MemoryRegistry {
        MemoryRegistry::new(clock, config).expect("the conformance configuration is valid")
    }

    fn data_plane(store: &MemoryRegistry) -> MemoryDataPlane {
        store.data_plane()
    }

    fn operator_authority(_store: &MemoryRegistry) -> String {
        connreg::memory::EMBEDDED_OPERATOR.into()
    }
}

/// Opens [`MemoryRegistry`] stores with one planted bug, to prove that the
/// suite's checks fail when the backend is wrong.
#[derive(Debug, Clone, Copy)]
pub struct PlantedHarness(pub Plant);

impl Harness for PlantedHarness {
    type Store = MemoryRegistry;
    type DataPlane = MemoryDataPlane;

    async fn open(&self, clock: ManualClock, config: RegistryConfig) -> MemoryRegistry {
        MemoryRegistry::new(clock, config)
            .expect("the conformance configuration is valid")
            .with_plant(self.0)
    }

    fn data_plane(store: &MemoryRegistry) -> MemoryDataPlane {
        store.data_plane()
    }

    fn operator_authority(_store: &MemoryRegistry) -> String {
        connreg::memory::EMBEDDED_OPERATOR.into()
    }
}
