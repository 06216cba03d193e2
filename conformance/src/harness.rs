//! What a backend provides to run the suite: a fresh, empty store per test.

use std::future::Future;

use connreg::contracts::{DataPlane, Registry};
use connreg::{Inspect, ManualClock, RegistryConfig};

/// Opens fresh stores of one backend. Each test opens its own store, so
/// tests never share state.
pub trait Harness: Send + Sync + 'static {
    /// The backend's store: every contract plus full inspection.
    type Store: Registry + Inspect + Clone + Send + Sync + 'static;

    /// A new, empty store at revision 0 whose time is `clock`.
    fn open(
        &self,
        clock: ManualClock,
        config: RegistryConfig,
    ) -> impl Future<Output = Self::Store> + Send;

    /// The backend's data-plane handle: the data-plane contracts only,
    /// on the same store (AUTH-1).
    type DataPlane: DataPlane + Clone + Send + Sync + 'static;

    /// The data-plane handle on `store`'s data.
    fn data_plane(store: &Self::Store) -> Self::DataPlane;

    /// The authority `store`'s operator acts are recorded under (AUTH-7):
    /// what the backend verified, never what a caller wrote.
    fn operator_authority(store: &Self::Store) -> String;
}
