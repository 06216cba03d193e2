//! Goal: the same calls in the same order on two fresh stores give the
//! same results and the same final state, byte for byte (the in-memory
//! backend's determinism, which the simulator's seed replay builds on).
//!
//! Every result, success or error, is serialized to JSON as it happens;
//! the two transcripts and the final inspections are compared as text.

use connreg::contracts::Operations;
use connreg::contracts::{CatalogRead, ReplicaLifecycle, Status};
use connreg::request::CircuitCloseParams;
use connreg::*;
use serde::Serialize;

use crate::Harness;
use crate::fixture::{self, FleetOptions, acme, crm_create, crm_read, globex, mail_send, replica};

/// Serializes one call's result: the value, or the error's kind and text.
fn record<T: Serialize>(transcript: &mut Vec<String>, call: &str, result: &Result<T>) {
    let value = match result {
        Ok(v) => serde_json::json!({ "call": call, "ok": v }),
        Err(e) => serde_json::json!({ "call": call, "error": e.kind(), "text": e.to_string() }),
    };
    transcript.push(serde_json::to_string(&value).expect("serializable"));
}

/// Runs one fixed call sequence on a fresh store and returns the
/// transcript and the final inspection, both as JSON text.
pub async fn transcript<H: Harness>(harness: &H) -> (String, String) {
    let s = fixture::open(
        harness,
        FleetOptions {
            replica_capacity: 2,
            scope_limit: 6,
            ..FleetOptions::default().with_circuit(true, 2)
        },
    )
    .await;
    let mut t = Vec::new();
    let tenants = [acme(), globex()];
    let capabilities = [crm_create(), crm_read(), mail_send()];
    let mut held: Vec<RouteAssignment> = Vec::new();
    for i in 0..40usize {
        let tenant = &tenants[i % 3 % 2];
        let capability = &capabilities[i % 5 % 3];
        let action_id = format!("det-{}", i % 17);
        let r = s.resolve(&action_id, tenant, capability).await;
        record(&mut t, "resolve", &r);
        if let Ok(r) = r {
            held.push(r.assignment);
        }
        if i % 4 == 3
            && let Some(a) = held.get(i % held.len().max(1)).cloned()
        {
            let outcome = [
                Outcome::Completed,
                Outcome::OutcomeUnknown,
                Outcome::Cancelled,
                Outcome::LeaseExpired,
            ][i % 4 / 2 + i % 3 % 2];
            record(&mut t, "settle", &s.settle(&a, outcome).await);
        }
        if i % 7 == 0 {
            let r = s
                .store
                .replica_heartbeat(HeartbeatParams {
                    replica: replica(&format!("i-acme-crm-r{}", i % 4)),
                    health_seq: 2 + i as u64,
                    lease_ttl_ms: 20_000 + 1_000 * i as u64,
                })
                .await;
            record(&mut t, "heartbeat", &r);
        }
        if i % 9 == 0 {
            s.clock.advance_ms(7_000);
            let m = s.store.lease_maintain(MaintainParams { max: 2 }).await;
            record(&mut t, "maintain", &m);
        }
        if i == 20 {
            let r = s.store.replica_drain(replica("i-acme-crm-r1")).await;
            record(&mut t, "drain", &r);
            let mut b = s.fleet.binding("b-acme-crm-read");
            b.enabled = false;
            record(
                &mut t,
                "publish",
                &s.publish(vec![Change::UpsertBinding(b)]).await,
            );
        }
    }
    for spec in s.fleet.replica_specs() {
        if spec.id.as_str().ends_with("r0") {
            let r = s
                .store
                .circuit_close(CircuitCloseParams {
                    replica: spec.id,
                    reason: "determinism".into(),
                })
                .await;
            record(&mut t, "circuit_close", &r);
        }
    }
    let page = s
        .store
        .catalog_page(CatalogQuery {
            page_items: Some(2),
            ..CatalogQuery::first_page(Reader::Internal {
                include_unbound: true,
            })
        })
        .await;
    record(&mut t, "catalog_page", &page);
    record(&mut t, "status", &s.store.status().await);
    let snapshot = serde_json::to_string(&s.inspect().await).expect("serializable");
    (t.join("\n"), snapshot)
}

// spec: LEASE-4
/// Runs [`transcript`] on two fresh stores and asserts both runs are
/// identical, byte for byte: no wall clock, no unseeded randomness, no
/// hash-map order reaches a result.
pub async fn same_calls_give_same_results<H: Harness>(harness: &H) {
    let (first, first_state) = transcript(harness).await;
    let (second, second_state) = transcript(harness).await;
    assert!(
        first.lines().count() > 50,
        "the sequence exercises the store"
    );
    assert!(first.contains("\"error\""), "the sequence includes errors");
    assert_eq!(first, second, "the transcripts differ");
    assert_eq!(first_state, second_state, "the final states differ");
}
