//! Goal: catalog publication on PostgreSQL is one transaction under the
//! exclusive publication lock, readers take its shared form, and a
//! publication that fails anywhere, in the backend's checks or inside the
//! database, changes nothing (CAT-1, CAT-2, CAT-4).
#![cfg(feature = "postgres")]

mod postgres_common;

use std::time::Duration;

use connreg::contracts::{CatalogAdmin, CatalogRead, Routing};
use connreg::postgres::PgRegistry;
use connreg::{
    CapabilityDefinition, Change, ConnectorType, Error, ManualClock, Publication, Reader,
    RegistryConfig, Revision, Timestamp,
};
use postgres_common::{
    FleetOptions, PgFixture, bulk_replicas, fleet_publication, publish_fleet, request,
};
use sqlx::{Connection, PgConnection};

/// Row counts of every catalog table, as the admin sees them.
async fn catalog_rows(admin: &mut PgConnection) -> Vec<i64> {
    let mut counts = Vec::new();
    for table in [
        "connector_types",
        "capability_definitions",
        "connector_versions",
        "version_capabilities",
        "version_profiles",
        "instances",
        "bindings",
        "binding_scopes",
        "admission_scopes",
        "admission_counters",
    ] {
        let n: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM connreg.{table}"))
            .fetch_one(&mut *admin)
            .await
            .unwrap();
        counts.push(n);
    }
    counts
}

/// Valid changes that touch every kind of record, to precede a failure.
fn valid_changes() -> Vec<Change> {
    let mut changes = fleet_publication(&FleetOptions {
        tenants: 2,
        instances_per_tenant: 2,
        tenant_scope_limit: Some(3),
    })
    .changes;
    changes.push(Change::UpsertType(ConnectorType {
        id: "mail".try_into().unwrap(),
        family: "mail".into(),
        owner: "team".into(),
        enabled: true,
    }));
    changes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publication_failing_midway_changes_nothing() {
    // spec: CAT-2
    let fx = PgFixture::new().await;
    let (registry, _clock) = fx.registry_at_zero().await;
    publish_fleet(&registry, &FleetOptions::default()).await;
    let mut admin = fx.admin_conn().await;
    let rows_before = catalog_rows(&mut admin).await;
    let page_before = registry
        .catalog_page(connreg::CatalogQuery::first_page(Reader::Internal {
            include_unbound: true,
        }))
        .await
        .unwrap();

    // 1. The database itself refuses the last change (PostgreSQL text
    //    cannot hold NUL), after the earlier ones were written.
    let mut changes = valid_changes();
    changes.push(Change::UpsertDefinition(CapabilityDefinition {
        id: "nul.schema".try_into().unwrap(),
        summary: "a schema the store cannot hold".into(),
        schema: "{\u{0}}".into(),
        active: true,
    }));
    let refused = registry.catalog_publish(Publication { changes }).await;
    assert!(
        matches!(refused, Err(Error::InvalidRequest { .. })),
        "{refused:?}"
    );

    // 2. A bound of this backend (bigint), checked midway.
    let mut changes = valid_changes();
    let Change::UpsertBinding(mut binding) = changes[changes.len() - 2].clone() else {
        panic!("the fleet publication ends with a binding, then the type");
    };
    binding.policy_revision = u64::MAX;
    changes.push(Change::UpsertBinding(binding));
    let refused = registry.catalog_publish(Publication { changes }).await;
    assert!(
        matches!(refused, Err(Error::LimitExceeded { .. })),
        "{refused:?}"
    );

    // 3. A reference checked after every change was applied.
    let mut changes = valid_changes();
    let Change::UpsertBinding(mut binding) = changes[changes.len() - 2].clone() else {
        panic!("the fleet publication ends with a binding, then the type");
    };
    binding.id = "b-orphan".try_into().unwrap();
    binding.instance = "no-such-instance".try_into().unwrap();
    changes.push(Change::UpsertBinding(binding));
    let refused = registry.catalog_publish(Publication { changes }).await;
    assert!(
        matches!(
            refused,
            Err(Error::NotFound {
                what: "instance",
                ..
            })
        ),
        "{refused:?}"
    );

    assert_eq!(catalog_rows(&mut admin).await, rows_before);
    assert_eq!(registry.catalog_revision().await.unwrap(), Revision(1));
    let page_after = registry
        .catalog_page(connreg::CatalogQuery::first_page(Reader::Internal {
            include_unbound: true,
        }))
        .await
        .unwrap();
    assert_eq!(page_after, page_before);

    // The same changes without the failing one publish, one revision up.
    let revision = registry
        .catalog_publish(Publication {
            changes: valid_changes(),
        })
        .await
        .unwrap();
    assert_eq!(revision, Revision(2));
}

/// A connection of its own holding the catalog lock (a table lock since
/// migration 0008), in the mode a resolve (`shared`) or a publication
/// takes it, in an open transaction; [`release`] ends it.
async fn hold_catalog_lock(fx: &PgFixture, shared: bool) -> PgConnection {
    let mut conn = PgConnection::connect_with(&fx.admin).await.unwrap();
    sqlx::query("BEGIN").execute(&mut conn).await.unwrap();
    let statement = if shared {
        "LOCK TABLE connreg.catalog_lock IN ROW SHARE MODE"
    } else {
        "LOCK TABLE connreg.catalog_lock IN EXCLUSIVE MODE"
    };
    sqlx::query(statement).execute(&mut conn).await.unwrap();
    conn
}

async fn release(mut conn: PgConnection) {
    sqlx::query("COMMIT").execute(&mut conn).await.unwrap();
    conn.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publication_waits_for_readers_and_readers_for_publication() {
    // spec: CAT-4
    let fx = PgFixture::new().await;
    let (registry, _clock) = fx.registry_at_zero().await;
    publish_fleet(&registry, &FleetOptions::default()).await;
    let mut admin = fx.admin_conn().await;
    bulk_replicas(&mut admin, "t0-i0", 2, 4, 60_000).await;

    // A reader holds the shared form: the publication waits for it.
    let reader = hold_catalog_lock(&fx, true).await;
    let publishing = {
        let registry = registry.clone();
        tokio::spawn(async move {
            registry
                .catalog_publish(fleet_publication(&FleetOptions::default()))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!publishing.is_finished(), "published past a reader's lock");
    release(reader).await;
    assert_eq!(publishing.await.unwrap().unwrap(), Revision(2));

    // A publisher holds the exclusive form: a resolve, which reads the
    // catalog in several statements, waits for it; a catalog read, one
    // statement and one snapshot, answers the revision before it at once.
    let publisher = hold_catalog_lock(&fx, false).await;
    let resolving = {
        let registry = registry.clone();
        tokio::spawn(async move { registry.route_resolve(request("during", "t0")).await })
    };
    assert_eq!(registry.catalog_revision().await.unwrap(), Revision(2));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!resolving.is_finished(), "resolved during a publication");
    release(publisher).await;
    let resolved = resolving.await.unwrap().unwrap();
    assert_eq!(resolved.assignment.policy.catalog_revision, Revision(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn control_planes_starting_at_once_install_the_schema_once() {
    // spec: AUTH-1, AUTH-3
    let fx = PgFixture::new().await;
    let start = || {
        PgRegistry::connect(
            fx.options(),
            ManualClock::new(Timestamp(0)),
            RegistryConfig::default(),
        )
    };
    let (first, second, third) = tokio::join!(start(), start(), start());
    let (first, second, third) = (first.unwrap(), second.unwrap(), third.unwrap());
    publish_fleet(&first, &FleetOptions::default()).await;
    assert_eq!(second.catalog_revision().await.unwrap(), Revision(1));
    assert_eq!(third.catalog_revision().await.unwrap(), Revision(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installing_again_is_a_no_op_and_the_store_keeps_its_state() {
    // spec: AUTH-3
    let fx = PgFixture::new().await;
    let (registry, _clock) = fx.registry_at_zero().await;
    publish_fleet(&registry, &FleetOptions::default()).await;
    registry.close().await;
    // A second control-plane start runs the migrator again: nothing to do.
    let again = PgRegistry::connect(
        fx.options(),
        ManualClock::new(Timestamp(0)),
        RegistryConfig::default(),
    )
    .await
    .unwrap();
    assert_eq!(again.catalog_revision().await.unwrap(), Revision(1));
}
