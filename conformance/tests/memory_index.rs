//! Goal: the in-memory backend routes through indexes, so the work of one
//! resolve does not grow with unrelated replicas (AUTH-4), shown by
//! counting the rows a resolve examines, never by timing.

use connreg::contracts::CatalogAdmin;
use connreg::limits::{INSTANCE_REPLICAS_MAX, TENANT_CAPABILITY_BINDINGS_MAX};
use connreg::{Change, Instance, MemoryRegistry, Publication, Resolved, TenantId};
use connreg_conformance::fixture::{self, FleetOptions, Setup, acme, crm_create};
use connreg_conformance::memory::MemoryHarness;
use connreg_conformance::run;

const OTHER_INSTANCES: usize = 10;

/// The default fleet plus `unrelated` replicas of another tenant's
/// instances, then one new and one pinned resolve. Returns both answers and
/// the rows each examined.
async fn resolve_beside(unrelated: usize) -> (Resolved, u64, Resolved, u64) {
    let s: Setup<MemoryRegistry> = fixture::open(&MemoryHarness, FleetOptions::default()).await;
    let other = TenantId::new("t-unrelated").unwrap();
    let changes = (0..OTHER_INSTANCES)
        .map(|i| {
            Change::UpsertInstance(Instance {
                id: fixture::instance(&format!("i-unrelated-{i:02}")),
                tenant: other.clone(),
                ..s.fleet.instance("i-acme-crm")
            })
        })
        .collect();
    s.store
        .catalog_publish(Publication { changes })
        .await
        .unwrap();
    for n in 0..unrelated {
        let instance = format!("i-unrelated-{:02}", n % OTHER_INSTANCES);
        let mut spec = s.fleet.replica_spec("i-acme-crm", 0);
        spec.id = fixture::replica(&format!("{instance}-r{n:05}"));
        spec.instance = fixture::instance(&instance);
        // Same region, zone and class as the routed replicas: only the
        // index keeps them out of the resolve.
        s.register(spec, 1).await;
    }
    let created = s.resolve("a1", &acme(), &crm_create()).await.unwrap();
    let created_rows = s.store.last_resolve_rows_examined().unwrap();
    s.settle(&created.assignment, connreg::Outcome::Completed)
        .await
        .unwrap();
    let pinned = s.resolve("a1", &acme(), &crm_create()).await.unwrap();
    let pinned_rows = s.store.last_resolve_rows_examined().unwrap();
    (created, created_rows, pinned, pinned_rows)
}

// spec: AUTH-4
#[test]
fn routing_cost_does_not_grow_with_unrelated_replicas() {
    let (small, small_rows, small_pinned, small_pinned_rows) = run::block_on(resolve_beside(10));
    let (large, large_rows, large_pinned, large_pinned_rows) =
        run::block_on(resolve_beside(10_000));
    assert_eq!(
        small, large,
        "the same decision beside 10 or 10,000 replicas"
    );
    assert_eq!(small_pinned, large_pinned);
    // One binding and the four replicas of its instance.
    assert_eq!(small_rows, 5);
    assert_eq!(large_rows, small_rows);
    assert_eq!(small_pinned_rows, 1, "a pinned retry reads its own route");
    assert_eq!(large_pinned_rows, small_pinned_rows);
    let bound = TENANT_CAPABILITY_BINDINGS_MAX * (1 + INSTANCE_REPLICAS_MAX);
    assert!((large_rows as usize) <= bound);
}
