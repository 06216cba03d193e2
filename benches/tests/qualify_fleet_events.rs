//! Goal: a contract whose measured run includes a zone's lease expiry and
//! an operator's publications runs them beside the resolvers on the
//! in-memory backend, and its report says what they did: every expired
//! replica offline (and no other), the maintenance calls and their
//! throughput, the publications and their latency, the resolve figures as
//! before (SIM-6, LEASE-2). Invalid `[expiry]` and `[publications]`
//! tables are bad input naming their key and bound. No assertion depends
//! on timing beyond collapse floors.

mod common;

use common::{contract_file, qualify, threshold};
use serde_json::Value;

/// 6 tenants x 2 instances x 9 replicas over 3 regions x 3 zones: each
/// instance has one replica in every zone, so eu-west's three zones hold
/// 3 of every 9 replicas (36 of 108).
const EVENTS: &str = r#"
name = "events"
backend = "memory"
seed = 5

[fleet]
tenants = 6
capabilities = 3
bindings_per_tenant_capability = 2
instances_per_tenant = 2
replicas_per_instance = 9
regions = ["eu-west", "us-east", "ap-south"]
zones_per_region = 3
replica_capacity = 4
lease_ttl_ms = 60000

[fleet.admission]
tenant_limit = 40

[load]
clients = 4
duration_ms = 1500
warmup_ms = 100
trials = 2
outstanding_per_client_max = 16

[mix]
resolve_new = 4
resolve_duplicate = 30
settle = 4
heartbeat = 30
catalog_page = 10

[thresholds]
resolves_per_s_min = 1
resolve_p99_ms_max = 1000
unexpected_error_rate_max = 0.0

[expiry]
zones = ["eu-west-z0", "eu-west-z1", "eu-west-z2"]
at_ms = 500
batch = 5
offline_within_ms_max = 30000

[publications]
interval_ms = 50
"#;

const EXPIRING_PER_TRIAL: u64 = 36;

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("{v} is a number"))
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("{v} is a count"))
}

#[test]
fn expiry_and_publications_run_beside_the_resolvers_and_are_reported() {
    // spec: SIM-6, LEASE-2
    let env = contract_file("events", EVENTS);
    let run = qualify(&env, &[]);
    assert_eq!(run.code, 0, "{}", run.said());
    let report = run.report.as_ref().expect("a report");
    assert_eq!(report["invariants"]["violations"], 0, "{}", run.said());

    // The resolvers were measured as always.
    let resolves = &report["measured"]["resolve_latency"];
    assert!(u(&resolves["count"]) > 0);
    assert!(f(&report["measured"]["resolves_per_s"]) > 0.0);

    // Every expired replica went offline, in every trial, and no other.
    let e = &report["expiry"];
    assert_eq!(u(&e["replicas"]), 2 * EXPIRING_PER_TRIAL, "{e}");
    assert!((f(&e["replica_share"]) - 1.0 / 3.0).abs() < 1e-9, "{e}");
    assert_eq!(u(&e["offline"]), u(&e["replicas"]), "{e}");
    assert_eq!(u(&e["left_online"]), 0, "{e}");
    assert_eq!(u(&e["others_offline"]), 0, "{e}");
    assert_eq!(e["all_offline_within_bound"], true, "{e}");
    assert_eq!(u(&e["errors"]), 0, "{e}");
    // At most `batch` replicas a call: 36 take at least 8 calls a trial,
    // the last one finding none left or the last few.
    assert!(u(&e["calls"]) >= 2 * EXPIRING_PER_TRIAL.div_ceil(5), "{e}");
    assert!(u(&e["largest_call_replicas"]) <= 5, "{e}");
    assert!(f(&e["largest_call_ms"]) > 0.0, "{e}");
    assert!(f(&e["replicas_per_s"]) > 0.0, "{e}");
    // Clients held reservations on the zone when it fell silent.
    assert!(u(&e["released"]) > 0, "{e}");
    assert!(f(&e["released_per_s"]) > 0.0, "{e}");
    for t in report["trials"].as_array().expect("trials") {
        let te = &t["expiry"];
        assert_eq!(te["happened"], true, "{te}");
        assert_eq!(u(&te["offline"]), EXPIRING_PER_TRIAL, "{te}");
        assert!(f(&te["at_ms"]) >= 500.0, "{te}");
        assert!(f(&te["offline_ms"]) <= 30_000.0, "{te}");
        assert!(u(&t["publications"]["ok"]) > 0, "{t}");
    }
    assert_eq!(
        threshold(report, "expiry_left_online_max")["verdict"],
        "pass"
    );
    assert_eq!(
        threshold(report, "expiry_offline_within_ms_max")["verdict"],
        "pass"
    );

    // The operator published, and every publication was accepted.
    let p = &report["publications"];
    assert!(u(&p["publications"]) > 0, "{p}");
    assert_eq!(u(&p["failures"]), 0, "{p}");
    assert_eq!(u(&p["ok"]), u(&p["publications"]), "{p}");
    assert!(u(&p["changes"]) >= u(&p["ok"]), "{p}");
    let l = &p["latency"];
    assert_eq!(u(&l["count"]), u(&p["publications"]), "{p}");
    assert!(f(&l["p50_ms"]) <= f(&l["p99_ms"]) && f(&l["p99_ms"]) <= f(&l["max_ms"]));
    assert_eq!(
        threshold(report, "publication_failures_max")["verdict"],
        "pass"
    );
    assert_eq!(threshold(report, "publications_min")["verdict"], "pass");
    // The invariant threshold stays last.
    let names: Vec<&str> = report["thresholds"]
        .as_array()
        .expect("thresholds")
        .iter()
        .map(|t| t["name"].as_str().expect("a name"))
        .collect();
    assert_eq!(names.last(), Some(&"invariant_violations_max"));

    assert!(run.stdout.contains("expiry:"), "{}", run.said());
    assert!(run.stdout.contains("publish:"), "{}", run.said());
}

#[test]
fn a_contract_without_the_tables_reports_neither() {
    // spec: SIM-6
    let env = contract_file(
        "no-events",
        &EVENTS[..EVENTS.find("[expiry]").expect("the table")],
    );
    let run = qualify(&env, &[]);
    assert_eq!(run.code, 0, "{}", run.said());
    let report = run.report.as_ref().expect("a report");
    assert!(report.get("expiry").is_none());
    assert!(report.get("publications").is_none());
    assert!(report["trials"][0].get("expiry").is_none());
}

/// Invalid `[expiry]` and `[publications]` tables: a file stem, the text
/// of `EVENTS` to replace and its replacement, the start of the line of
/// the key the error must name, and a fragment of the error.
const INVALID_EVENT_TABLES: &[(&str, &str, &str, &str, &str)] = &[
    (
        "zone",
        "\"eu-west-z2\"]",
        "\"eu-west-z3\"]",
        "zones =",
        "not a zone of the fleet",
    ),
    (
        "batch",
        "batch = 5",
        "batch = 1001",
        "batch =",
        "LEASE_MAINTENANCE_BATCH_MAX",
    ),
    (
        "at",
        "at_ms = 500",
        "at_ms = 1500",
        "at_ms =",
        "load.duration_ms",
    ),
    (
        "lease",
        "lease_ttl_ms = 60000",
        "lease_ttl_ms = 300000",
        "lease_ttl_ms =",
        "LEASE_TTL_MS_MAX",
    ),
    (
        "interval",
        "interval_ms = 50",
        "interval_ms = 5",
        "interval_ms =",
        "below its minimum of 10",
    ),
    (
        "every-zone",
        "zones = [\"eu-west-z0\", \"eu-west-z1\", \"eu-west-z2\"]",
        "zones = [\"eu-west-z0\", \"eu-west-z1\", \"eu-west-z2\", \"us-east-z0\", \"us-east-z1\", \"us-east-z2\", \"ap-south-z0\", \"ap-south-z1\", \"ap-south-z2\"]",
        "zones =",
        "every replica",
    ),
];

#[test]
fn invalid_event_tables_are_bad_input_naming_key_and_bound() {
    // spec: SIM-6
    for &(stem, from, to, key_line, names) in INVALID_EVENT_TABLES {
        let text = EVENTS.replacen(from, to, 1);
        let env = contract_file(stem, &text);
        let run = qualify(&env, &["--check"]);
        assert_eq!(run.code, 2, "{stem}: {}", run.said());
        let line = text
            .lines()
            .position(|l| l.starts_with(key_line))
            .expect("the key")
            + 1;
        assert!(
            run.stderr.contains(&format!(":{line}:")) && run.stderr.contains(names),
            "{stem}: {}",
            run.said()
        );
    }
}
