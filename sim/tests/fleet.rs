//! Goal: a fleet described compactly (replica groups, tenant groups,
//! fleet-grain faults) is refused with file, line and bound past a limit;
//! a group's replicas speak the same protocol, at the same times, as
//! replicas listed one by one; a group world is deterministic; and the
//! bugs only a fleet shows (maintenance that stops at a page and answers
//! `more = false`, a drain lost among many, a circuit closed by a crowd of
//! returning replicas) are caught by a fleet-sized world and by no small
//! one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use connreg_sim::{PlantedBug, RunOptions, RunReport, Scenario, TraceTarget, run};
use serde_json::Value;

/// Two tenant-group tenants served by a group of eight replicas over two
/// zones, with a light load.
const SMALL_FLEET: &str = r#"
[scenario]
name = "small_fleet"
summary = "a small fleet of groups"
duration_ms = 1500
liveness_ms = 1500
tick_ms = 5
latency_ms = [1, 4]

[lifecycle]
heartbeat_ms = 200
lease_ttl_ms = 600
maintenance_ms = 200
maintenance_batch = 1000

[[fleet.types]]
id = "store"

[[fleet.versions]]
id = "store-v1"
type = "store"
capabilities = ["store.object.put"]

[[fleet.tenant_groups]]
name = "t"
count = 4
version = "store-v1"
instances = 1

[[fleet.replica_groups]]
name = "r"
count = 8
tenants = "t"
capacity = 4
spread = [
  { region = "eu", zone = "eu-a" },
  { region = "eu", zone = "eu-b" },
]

[workload]
dispatchers = 2
actions = 20
concurrency = 4
start_ms = 100
start_gap_ms = [2, 10]
exec_ms = [10, 50]
rpc_timeout_ms = 100
dispatch_timeout_ms = 300

[[workload.mix]]
tenants = "t"
capability = "store.object.put"
"#;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("connreg-fleet-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn parse(text: &str) -> Scenario {
    Scenario::parse("fleet.toml", text).unwrap_or_else(|e| panic!("{e}"))
}

fn run_kept(s: &Scenario, seed: u64, plant: Option<PlantedBug>) -> RunReport {
    run(
        s,
        &RunOptions {
            seed,
            plant,
            trace: TraceTarget::Memory,
            ..RunOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn events(report: &RunReport) -> Vec<Value> {
    let trace = report.trace.as_ref().expect("the trace was kept");
    std::str::from_utf8(trace)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Calls (`rpc` events) a replica made, by replica ID: (time, op).
fn replica_calls(events: &[Value]) -> BTreeMap<String, Vec<(u64, String)>> {
    let mut calls: BTreeMap<String, Vec<(u64, String)>> = BTreeMap::new();
    for e in events {
        if e["ev"] != "rpc" {
            continue;
        }
        let Some(replica) = e["from"].as_str().and_then(|f| f.strip_prefix("replica-")) else {
            continue;
        };
        calls.entry(replica.to_string()).or_default().push((
            e["t"].as_u64().unwrap(),
            e["req"]["op"].as_str().unwrap().to_string(),
        ));
    }
    calls
}

/// `execute` calls a replica received, by replica ID.
fn executions(events: &[Value]) -> BTreeMap<String, usize> {
    let mut n = BTreeMap::new();
    for e in events {
        if e["ev"] == "rpc"
            && e["req"]["op"] == "execute"
            && let Some(r) = e["to"].as_str().and_then(|t| t.strip_prefix("replica-"))
        {
            *n.entry(r.to_string()).or_insert(0) += 1;
        }
    }
    n
}

#[test]
fn a_fleet_past_a_limit_is_refused_with_file_line_and_bound() {
    // spec: SIM-1
    let dir = scratch("limits");
    let line_of = |text: &str, needle: &str| -> usize {
        text.lines()
            .position(|l| l == needle)
            .unwrap_or_else(|| panic!("{needle:?} is not in the scenario"))
            + 1
    };
    let cases: [(&str, &str, &str, &[&str]); 6] = [
        // A group larger than one host's ports.
        (
            "count = 8",
            "count = 10001",
            "count = 10001",
            &["10000", "10001"],
        ),
        // More replicas on one instance than the registry allows: the
        // group of 8 over 4 tenants becomes 1,025 over one.
        (
            "count = 8",
            "count = 1025",
            "[[fleet.replica_groups]]",
            &["1024", "INSTANCE_REPLICAS_MAX"],
        ),
        // More bindings of one capability per tenant than the registry
        // allows.
        (
            "instances = 1",
            "instances = 17",
            "[[fleet.tenant_groups]]",
            &["16", "TENANT_CAPABILITY_BINDINGS_MAX"],
        ),
        // A tenant group too large to set up.
        ("count = 4", "count = 100000", "count = 100000", &["50000"]),
        // A replica group serving an unknown tenant group.
        (
            "tenants = \"t\"\ncapacity = 4",
            "tenants = \"nope\"\ncapacity = 4",
            "[[fleet.replica_groups]]",
            &["\"nope\""],
        ),
        (
            "capacity = 4",
            "capacity = 0",
            "capacity = 0",
            &["1", "10000"],
        ),
    ];
    for (from, to, at, words) in cases {
        let mut text = SMALL_FLEET.replacen(from, to, 1);
        if to == "count = 1025" {
            text = text.replacen("count = 4\n", "count = 1\n", 1);
        }
        let path = dir.join("bad.toml");
        std::fs::write(&path, &text).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_connreg-sim"))
            .args(["run", "--scenario", path.to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{to}: {stderr}");
        let place = format!("{}:{}:", path.display(), line_of(&text, at));
        assert!(
            stderr.contains(&place),
            "{to}: expected {place} in {stderr}"
        );
        for w in words {
            assert!(stderr.contains(w), "{to}: expected {w:?} in {stderr}");
        }
    }
}

#[test]
fn fleet_faults_naming_what_does_not_exist_are_refused_with_their_line() {
    // spec: SIM-1
    for (fault, word) in [
        (
            "kind = \"zone_silence\"\nzone = \"eu-z\"\nuntil_ms = 900",
            "eu-z",
        ),
        (
            "kind = \"group_crash\"\ngroup = \"nope\"\nfraction = 0.5",
            "nope",
        ),
        (
            "kind = \"group_drain\"\ngroup = \"r\"\nfraction = 1.5",
            "fraction",
        ),
        ("kind = \"zone_silence\"\nzone = \"eu-a\"", "until_ms"),
    ] {
        let text = format!("{SMALL_FLEET}\n[[faults]]\nat_ms = 500\n{fault}\n");
        let line = text.lines().position(|l| l == "[[faults]]").unwrap() + 1;
        let e = Scenario::parse("f.toml", &text)
            .err()
            .unwrap_or_else(|| panic!("{fault} was accepted"))
            .to_string();
        assert!(e.contains(word), "{fault}: {e}");
        assert!(
            (line..line + 6).any(|l| e.starts_with(&format!("f.toml:{l}:"))),
            "{fault}: expected a line of the fault in {e}"
        );
    }
}

#[test]
fn a_group_replica_speaks_the_protocol_a_listed_replica_speaks() {
    // spec: LEASE-1, SIM-3
    // The same eight replicas, once as a group on one host and once listed
    // one by one, each its own host: same names, placements and capacity.
    let grouped = parse(SMALL_FLEET);
    let mut listed_text = SMALL_FLEET.replace(
        "[[fleet.replica_groups]]\nname = \"r\"\ncount = 8\ntenants = \"t\"\ncapacity = 4\nspread = [\n  { region = \"eu\", zone = \"eu-a\" },\n  { region = \"eu\", zone = \"eu-b\" },\n]\n",
        "",
    );
    assert_ne!(listed_text, SMALL_FLEET, "the group was not removed");
    for i in 0..8 {
        listed_text.push_str(&format!(
            "\n[[fleet.replicas]]\nid = \"r-{i}\"\ninstance = \"t-{}-i0\"\nregion = \"eu\"\nzone = \"eu-{}\"\ncapacity = 4\n",
            i % 4,
            if i % 2 == 0 { "a" } else { "b" }
        ));
    }
    let listed = parse(&listed_text);
    let (g, l) = (run_kept(&grouped, 5, None), run_kept(&listed, 5, None));
    assert!(g.ok(), "grouped: {:#?}", g.violations);
    assert!(l.ok(), "listed: {:#?}", l.violations);
    let (ge, le) = (events(&g), events(&l));
    let (gc, lc) = (replica_calls(&ge), replica_calls(&le));
    let names: BTreeSet<&String> = gc.keys().collect();
    assert_eq!(names, lc.keys().collect::<BTreeSet<_>>());
    assert_eq!(names.len(), 8);
    // Each replica registers once at the start, then beats on the same
    // period in both worlds.
    for (replica, calls) in &gc {
        let listed_calls = &lc[replica];
        let ops = |c: &[(u64, String)]| -> Vec<String> { c.iter().map(|x| x.1.clone()).collect() };
        assert_eq!(ops(calls), ops(listed_calls), "{replica}: the calls differ");
        let times = |c: &[(u64, String)]| -> Vec<u64> { c.iter().map(|x| x.0).collect() };
        assert_eq!(
            times(calls),
            times(listed_calls),
            "{replica}: the calls go at other times"
        );
        assert_eq!(calls[0].1, "register", "{replica}");
        assert!(calls.len() >= 7, "{replica}: {calls:?}");
    }
    // Registration specs agree but for the endpoint (the group's host and
    // port against the replica's own host).
    let specs = |ev: &[Value]| -> BTreeMap<String, Value> {
        ev.iter()
            .filter(|e| e["ev"] == "rpc" && e["req"]["op"] == "register")
            .map(|e| {
                let mut spec = e["req"]["params"]["spec"].clone();
                spec.as_object_mut().unwrap().remove("endpoint");
                (spec["id"].as_str().unwrap().to_string(), spec)
            })
            .collect()
    };
    assert_eq!(specs(&ge), specs(&le));
    // Work reaches every replica of the group, over the same wire.
    let ran = executions(&ge);
    assert_eq!(ran.len(), 8, "executions by replica: {ran:?}");
    assert!(g.counters.executions >= 30, "{:?}", g.counters);
}

#[test]
fn a_group_world_gives_one_trace_per_seed() {
    // spec: SIM-4
    let text = format!(
        "{SMALL_FLEET}\n[[faults]]\nat_ms = 400\nkind = \"group_crash\"\ngroup = \"r\"\nfraction = 0.5\nrestart_ms = 900\n\n[[faults]]\nat_ms = 300\nkind = \"zone_silence\"\nzone = \"eu-b\"\nuntil_ms = 1100\n"
    );
    let s = parse(&text);
    let hashes: Vec<String> = [3, 3, 4]
        .iter()
        .map(|seed| {
            run(
                &s,
                &RunOptions {
                    seed: *seed,
                    ..RunOptions::default()
                },
            )
            .unwrap()
            .trace_hash
        })
        .collect();
    assert_eq!(hashes[0], hashes[1], "one seed gave two traces");
    assert_ne!(hashes[0], hashes[2], "two seeds gave one trace");
}

#[test]
fn a_silenced_zone_stops_beating_and_comes_back() {
    // spec: LEASE-2
    let text = format!(
        "{SMALL_FLEET}\n[[faults]]\nat_ms = 300\nkind = \"zone_silence\"\nzone = \"eu-b\"\nuntil_ms = 1100\n\n[expect]\noffline_within_ms = 400\n"
    );
    let report = run_kept(&parse(&text), 2, None);
    assert!(report.ok(), "{:#?}", report.violations);
    assert_eq!(report.counters.zone_silences, 1);
    let calls = replica_calls(&events(&report));
    for (replica, calls) in &calls {
        let odd = replica.trim_start_matches("r-").parse::<u32>().unwrap() % 2 == 1;
        let silent = calls
            .iter()
            .filter(|(t, op)| op == "heartbeat" && (300..1100).contains(t))
            .count();
        let after = calls.iter().filter(|(t, _)| *t >= 1100).count();
        if odd {
            assert_eq!(silent, 0, "{replica} in eu-b beat while silenced");
            assert!(after >= 1, "{replica} never came back");
        } else {
            assert!(silent >= 3, "{replica} in eu-a stopped beating");
        }
    }
    // The silence outlived the lease: eu-b's four replicas expired.
    assert!(
        report.counters.replicas_expired >= 4,
        "{:?}",
        report.counters
    );
}

#[test]
fn a_group_crash_and_drain_reach_the_fraction_asked_for() {
    // spec: LEASE-2, PIN-3
    let text = format!(
        "{SMALL_FLEET}\n[[faults]]\nat_ms = 400\nkind = \"group_crash\"\ngroup = \"r\"\nfraction = 0.5\nrestart_ms = 800\n\n[[faults]]\nat_ms = 1000\nkind = \"group_drain\"\ngroup = \"r\"\nfraction = 0.25\n"
    );
    let report = run_kept(&parse(&text), 1, None);
    assert!(report.ok(), "{:#?}", report.violations);
    assert_eq!(report.counters.group_crashes, 4, "{:?}", report.counters);
    assert_eq!(report.counters.group_drains, 2, "{:?}", report.counters);
    assert!(report.counters.drains >= 2, "{:?}", report.counters);
    // The restarted half registers again.
    assert!(report.counters.registrations >= 12, "{:?}", report.counters);
}

/// 600 replicas, half of them in a zone that goes silent: 300 leases end
/// together, more than one maintenance page of the plant.
fn mass_expiry() -> Scenario {
    let text = SMALL_FLEET
        .replace("count = 8", "count = 600")
        .replace("count = 4\n", "count = 60\n")
        .replace("duration_ms = 1500", "duration_ms = 2000");
    parse(&format!(
        "{text}\n[[faults]]\nat_ms = 200\nkind = \"zone_silence\"\nzone = \"eu-b\"\nuntil_ms = 1600\n\n[expect]\noffline_within_ms = 400\n\n[expect.at_least]\nreplicas_expired = 300\n"
    ))
}

#[test]
fn maintenance_that_stops_at_a_page_is_caught_in_a_fleet() {
    // spec: LEASE-2
    let plant = PlantedBug::MaintainPageStopsEarly;
    let s = mass_expiry();
    let clean = run_kept(&s, 1, None);
    assert!(clean.ok(), "{:#?}", clean.violations);
    let planted = run_kept(&s, 1, Some(plant));
    assert!(
        planted
            .violations
            .iter()
            .any(|v| v.invariant == plant.invariant()),
        "the plant was not caught: {:#?}",
        planted.violations
    );
}

#[test]
fn no_small_scenario_catches_a_fleet_plant() {
    // spec: LEASE-2, ROUTE-9, SETTLE-6
    // No world of 64 replicas or fewer reaches a second maintenance page,
    // 64 replicas draining at once or more than 64 offline at once; the
    // fleet scenarios catch all three (`sim/tests/plants.rs`).
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut small = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        if path.extension().is_none_or(|e| e != "toml")
            || text.contains("[[fleet.replica_groups]]")
            || text.contains("kind = \"db_")
            || text.contains("db_chaos")
            || text
                .lines()
                .any(|l| l.starts_with("db_") && !l.ends_with("= 0"))
        {
            continue;
        }
        let s = Scenario::load(&path).unwrap();
        for plant in [
            PlantedBug::MaintainPageStopsEarly,
            PlantedBug::DrainLostInCrowd,
            PlantedBug::CircuitResetInCrowd,
        ] {
            let report = run(
                &s,
                &RunOptions {
                    seed: 1,
                    plant: Some(plant),
                    ..RunOptions::default()
                },
            )
            .unwrap();
            assert!(
                report.ok(),
                "{} with {}: {:#?}",
                path.display(),
                plant.name(),
                report.violations
            );
        }
        small += 1;
    }
    assert!(small >= 15, "only {small} small scenarios ran");
}
