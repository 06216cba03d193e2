//! Goal: every checker catches the violation it exists for. Each test takes
//! a real passing trace (a scenario on the in-memory backend, a fixed
//! seed), plants one specific violation by editing its events, re-checks it
//! with the code `connreg-sim check-trace` runs, and asserts that exactly
//! that checker, and no other, reports it; the unedited trace passes.

use connreg_sim::check::invariant;
use connreg_sim::{Recheck, RunOptions, Scenario, TraceTarget, recheck, run};
use serde_json::{Value, json};

/// A trace as one JSON value a line, ready to be edited.
struct Trace {
    lines: Vec<Value>,
}

impl Trace {
    /// Runs `file` with `seed` and keeps its trace; the run must pass.
    fn of(file: &str, seed: u64) -> Trace {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../scenarios")
            .join(file);
        let scenario = Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let opts = RunOptions {
            seed,
            trace: TraceTarget::Memory,
            ..RunOptions::default()
        };
        let mut report = run(&scenario, &opts).unwrap_or_else(|e| panic!("{e}"));
        assert!(report.ok(), "{file} seed {seed}: {:#?}", report.violations);
        let bytes = report.trace.take().expect("the trace was kept in memory");
        let lines = String::from_utf8(bytes)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let trace = Trace { lines };
        let verdict = trace.recheck();
        assert!(
            verdict.ok(),
            "the unedited trace of {file} seed {seed} fails: {:#?} {:?}",
            verdict.violations,
            verdict.mismatches
        );
        trace
    }

    /// Re-checks the (edited) lines as `connreg-sim check-trace` does.
    fn recheck(&self) -> Recheck {
        let text: Vec<std::io::Result<String>> = self
            .lines
            .iter()
            .map(|v| Ok(serde_json::to_string(v).unwrap()))
            .collect();
        recheck(text.into_iter()).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The index of the first line at or after `from` that `pred` accepts.
    fn find(&self, from: usize, pred: impl Fn(&Value) -> bool) -> Option<usize> {
        (from..self.lines.len()).find(|&i| pred(&self.lines[i]))
    }

    /// Moves line `from` so that it sits at index `to` afterwards.
    fn move_line(&mut self, from: usize, to: usize) {
        let line = self.lines.remove(from);
        self.lines.insert(to, line);
    }
}

fn ev(v: &Value, kind: &str) -> bool {
    v["ev"] == kind
}

/// A successful `resolve` answer of `kind` (`created`, `existing`, `reserved`).
fn resolved(v: &Value, kind: &str) -> bool {
    ev(v, "reply")
        && v["resp"]["op"] == "resolve"
        && v["resp"]["result"]["Ok"]["kind"] == kind
        && v["lost"] == false
}

fn answered_assignment(v: &Value) -> &Value {
    &v["resp"]["result"]["Ok"]["assignment"]
}

/// Asserts that the re-check found violations of `name` and of nothing else.
fn caught_only_by(verdict: &Recheck, (name, _): (&str, &str)) {
    assert!(
        !verdict.violations.is_empty(),
        "the planted violation of {name} was not caught"
    );
    let others: Vec<_> = verdict
        .violations
        .iter()
        .filter(|v| v.invariant != name)
        .collect();
    assert!(
        others.is_empty(),
        "other checkers than {name} reported: {others:#?}"
    );
    assert!(
        !verdict.mismatches.is_empty(),
        "the recorded verdict (ok) must disagree with the re-check"
    );
}

#[test]
fn a_dispatch_sent_before_its_resolve_answer_is_caught_by_dispatch_after_commit() {
    // spec: ROUTE-8
    let mut trace = Trace::of("0005_draining_pinned_retries.toml", 1);
    // A re-reservation (PIN-3) of an action whose route is already known:
    // its execute moves before the answer that carried its fence, so only
    // the order is wrong.
    let (reply, exec) = (0..trace.lines.len())
        .filter(|&i| resolved(&trace.lines[i], "reserved"))
        .find_map(|i| {
            let fence = answered_assignment(&trace.lines[i])["reservation"]["fence"].clone();
            let exec = trace.find(i, |v| {
                ev(v, "rpc")
                    && v["req"]["op"] == "execute"
                    && v["req"]["assignment"]["reservation"]["fence"] == fence
            })?;
            Some((i, exec))
        })
        .expect("the trace has a dispatch of a re-reserved route");
    trace.move_line(exec, reply);
    caught_only_by(&trace.recheck(), invariant::AFTER_COMMIT);
}

#[test]
fn two_stored_routes_with_one_fence_are_caught_by_fence_unique() {
    // spec: ROUTE-7, SETTLE-2
    let mut trace = Trace::of("0001_steady_state.toml", 1);
    let first = trace
        .find(0, |v| resolved(v, "created"))
        .expect("a created route");
    let taken = answered_assignment(&trace.lines[first]).clone();
    // A later snapshot stores another action's live route with that fence.
    // (A live row: a released one would also count as a second release.)
    let snap = trace
        .find(first, |v| {
            ev(v, "snapshot")
                && v["routes"].as_array().unwrap().iter().any(|r| {
                    r["reserved"] == true
                        && r["assignment"]["identity"]["action"] != taken["identity"]["action"]
                })
        })
        .expect("a snapshot with another live route");
    let routes = trace.lines[snap]["routes"].as_array_mut().unwrap();
    let other = routes
        .iter_mut()
        .find(|r| {
            r["reserved"] == true
                && r["assignment"]["identity"]["action"] != taken["identity"]["action"]
        })
        .unwrap();
    let action = other["assignment"]["identity"]["action"].clone();
    let fence = other["assignment"]["reservation"]["fence"].clone();
    other["assignment"]["reservation"]["fence"] = taken["reservation"]["fence"].clone();
    // Later snapshots write that route's state changes compactly, naming
    // its fence: they follow the stored row.
    for line in &mut trace.lines[snap + 1..] {
        if let Some(states) = line.get_mut("route_states").and_then(Value::as_array_mut) {
            for state in states {
                if state["action"] == action && state["fence"] == fence {
                    state["fence"] = taken["reservation"]["fence"].clone();
                }
            }
        }
    }
    caught_only_by(&trace.recheck(), invariant::FENCE);
}

#[test]
fn a_route_of_the_wrong_capacity_class_is_caught_by_route_eligibility() {
    // spec: ROUTE-9, ROUTE-11 (capacity class is a filter)
    let mut trace = Trace::of("0001_steady_state.toml", 1);
    let reply = trace
        .find(0, |v| resolved(v, "created"))
        .expect("a created route");
    let id = trace.lines[reply]["id"].clone();
    let rpc = trace
        .find(0, |v| ev(v, "rpc") && v["id"] == id)
        .expect("the resolve request");
    // The request asked for another class than every replica's.
    trace.lines[rpc]["req"]["request"]["topology"]["capacity_class"] = json!("gpu");
    caught_only_by(&trace.recheck(), invariant::ELIGIBLE);
}

#[test]
fn a_route_in_another_region_when_forbidden_is_caught_by_route_eligibility() {
    // spec: ROUTE-9, ROUTE-11 (the cross-region rule is a filter)
    let mut trace = Trace::of("0001_steady_state.toml", 1);
    let reply = trace
        .find(0, |v| resolved(v, "created"))
        .expect("a created route");
    let id = trace.lines[reply]["id"].clone();
    let region = answered_assignment(&trace.lines[reply])["destination"]["region"].clone();
    assert_ne!(region, json!("elsewhere"));
    let rpc = trace
        .find(0, |v| ev(v, "rpc") && v["id"] == id)
        .expect("the resolve request");
    let topology = &mut trace.lines[rpc]["req"]["request"]["topology"];
    topology["preferred_region"] = json!("elsewhere");
    topology["cross_region"] = json!("forbidden");
    caught_only_by(&trace.recheck(), invariant::ELIGIBLE);
}

#[test]
fn a_circuit_closed_before_any_operator_action_is_caught_by_circuit_closed_by_operator() {
    // spec: SETTLE-6
    let mut trace = Trace::of("0006_circuit_opens_after_unknowns.toml", 1);
    let close = trace
        .find(0, |v| {
            ev(v, "reply")
                && v["resp"]["op"] == "circuit_close"
                && v["resp"]["result"]["Ok"].is_object()
        })
        .expect("an operator closed a circuit");
    let replica = trace.lines[close]["resp"]["result"]["Ok"]["replica"].clone();
    let snap = trace
        .find(close, |v| {
            ev(v, "snapshot")
                && v["replicas"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|r| r["id"] == replica && r["circuit_open"] == false)
        })
        .expect("a snapshot shows the circuit closed");
    // The operator's answer now comes after the snapshot that shows the
    // circuit closed: the store closed it on its own.
    trace.move_line(close, snap);
    caught_only_by(&trace.recheck(), invariant::CIRCUIT);
}

#[test]
fn an_action_that_never_ends_after_the_heal_is_caught_by_liveness() {
    // spec: SIM-3
    let mut trace = Trace::of("0005_draining_pinned_retries.toml", 1);
    let end = trace
        .find(0, |v| ev(v, "action_end"))
        .expect("an action ended");
    trace.lines.remove(end);
    caught_only_by(&trace.recheck(), invariant::LIVENESS);
}

#[test]
fn an_action_that_ends_past_the_deadline_is_caught_by_liveness() {
    // spec: SIM-3
    let mut trace = Trace::of("0005_draining_pinned_retries.toml", 1);
    let heal = trace.find(0, |v| ev(v, "heal")).expect("the world healed");
    let deadline = trace.lines[heal]["deadline_ms"].as_u64().unwrap();
    let end = trace
        .find(0, |v| ev(v, "action_end"))
        .expect("an action ended");
    let mut line = trace.lines.remove(end);
    line["t"] = json!(deadline + 1);
    // After the heal, late: the step that ends it is past the deadline.
    let at = trace.find(heal, |v| ev(v, "end")).unwrap();
    trace.lines.insert(at, line);
    caught_only_by(&trace.recheck(), invariant::LIVENESS);
}

#[test]
fn an_expected_counter_that_was_not_reached_is_caught_by_expectation() {
    // spec: SIM-2
    let mut trace = Trace::of("0001_steady_state.toml", 1);
    let start = trace.find(0, |v| ev(v, "start")).unwrap();
    trace.lines[start]["expect"]["at_least"]["actions_completed"] = json!(1_000_000);
    caught_only_by(&trace.recheck(), invariant::EXPECTATION);
}

#[test]
fn a_counter_over_its_expected_maximum_is_caught_by_expectation() {
    // spec: SIM-2
    let mut trace = Trace::of("0001_steady_state.toml", 1);
    let start = trace.find(0, |v| ev(v, "start")).unwrap();
    trace.lines[start]["expect"]["at_most"]["executions"] = json!(1);
    caught_only_by(&trace.recheck(), invariant::EXPECTATION);
}

/// The first successful heartbeat answer, turned into `unavailable`.
fn heartbeat_made_unavailable(trace: &mut Trace) -> usize {
    let i = trace
        .find(0, |v| {
            ev(v, "reply")
                && v["resp"]["op"] == "heartbeat"
                && v["resp"]["result"]["Ok"].is_string()
        })
        .expect("an applied heartbeat");
    trace.lines[i]["resp"]["result"] =
        json!({"Err": {"kind": "unavailable", "message": "the store is unavailable"}});
    i
}

#[test]
fn an_unavailable_answer_with_no_database_fault_is_caught_by_no_spurious_unavailable() {
    // spec: SIM-3
    let mut trace = Trace::of("0001_steady_state.toml", 1);
    heartbeat_made_unavailable(&mut trace);
    caught_only_by(&trace.recheck(), invariant::SPURIOUS_UNAVAILABLE);
}

#[test]
fn an_unavailable_answer_during_a_database_fault_is_allowed() {
    // spec: SIM-3 (the window runs from the fault to its end, plus the
    // settle time)
    let mut trace = Trace::of("0001_steady_state.toml", 1);
    let i = heartbeat_made_unavailable(&mut trace);
    let t = trace.lines[i]["t"].clone();
    trace.lines.insert(
        i,
        json!({"t": t, "ev": "fault", "fault": "db_terminate", "sessions": 3}),
    );
    trace.lines.insert(
        i + 2,
        json!({"t": t, "ev": "fault", "fault": "db_fault_end", "kind": "db_terminate"}),
    );
    let verdict = trace.recheck();
    assert!(verdict.violations.is_empty(), "{:#?}", verdict.violations);
}

/// Drops `counter` from the bounds the trace's `start` line expects, so
/// an edit that moves it is judged by the invariants alone.
fn unbound(trace: &mut Trace, counter: &str) {
    let start = trace.find(0, |v| ev(v, "start")).unwrap();
    for side in ["at_least", "at_most"] {
        if let Some(bounds) = trace.lines[start]["expect"][side].as_object_mut() {
            bounds.remove(counter);
        }
    }
}

#[test]
fn a_release_no_answer_made_is_caught_by_capacity_accounting() {
    // spec: SETTLE-3, ROUTE-7 (the store freed a reservation consistently,
    // route row and both counters, and the settlement that did it answers
    // "not released": no answer says it was released)
    let mut trace = Trace::of("0001_steady_state.toml", 1);
    unbound(&mut trace, "settle_released");
    unbound(&mut trace, "settled_completed");
    let settle = trace
        .find(0, |v| {
            ev(v, "reply")
                && v["resp"]["op"] == "settle"
                && v["resp"]["result"]["Ok"]["released"] == true
        })
        .expect("a releasing settlement");
    trace.lines[settle]["resp"]["result"]["Ok"]["released"] = json!(false);
    caught_only_by(&trace.recheck(), invariant::CAPACITY);
}

#[test]
fn a_maintenance_answer_that_overcounts_its_releases_is_caught_by_capacity_accounting() {
    // spec: LEASE-2, SETTLE-3 (maintenance reports one release more than
    // the live reservations on the replicas it expired; the end counters
    // agree with the edited answer)
    let mut trace = Trace::of("0004_replica_crash_mid_action.toml", 1);
    unbound(&mut trace, "lease_expired");
    let maintain = trace
        .find(0, |v| {
            ev(v, "reply")
                && v["resp"]["op"] == "maintain"
                && v["resp"]["result"]["Ok"]["expired"]
                    .as_array()
                    .is_some_and(|e| !e.is_empty())
        })
        .expect("a maintenance that expired a replica");
    let released = &mut trace.lines[maintain]["resp"]["result"]["Ok"]["released"];
    *released = json!(released.as_u64().unwrap() + 1);
    let end = trace.find(0, |v| ev(v, "end")).unwrap();
    let counter = &mut trace.lines[end]["counters"]["lease_expired"];
    *counter = json!(counter.as_u64().unwrap() + 1);
    caught_only_by(&trace.recheck(), invariant::CAPACITY);
}

#[test]
fn a_compact_route_state_that_holds_a_released_reservation_again_is_caught() {
    // spec: SETTLE-3, ROUTE-7
    let mut trace = Trace::of("0001_steady_state.toml", 1);
    // A snapshot writes a settled route compactly, as its state only; the
    // store claims the reservation is held again, though the settlement
    // released it and no answer reserved it since.
    let snap = trace
        .find(0, |v| {
            ev(v, "snapshot")
                && v["route_states"]
                    .as_array()
                    .is_some_and(|s| s.iter().any(|r| r["reserved"] == false))
        })
        .expect("a snapshot with a compact released route");
    let states = trace.lines[snap]["route_states"].as_array_mut().unwrap();
    let released = states.iter_mut().find(|r| r["reserved"] == false).unwrap();
    released["reserved"] = json!(true);
    // The accounting sees it at once; the end of the run sees the same
    // reservation held by no action.
    caught_by(
        &trace.recheck(),
        invariant::CAPACITY,
        &[invariant::ORPHAN, invariant::LEAK],
    );
}

/// `verdict` reports `first`, and besides it only `also` (the
/// consequences the planted evidence has for other checkers).
fn caught_by(verdict: &Recheck, first: (&str, &str), also: &[(&str, &str)]) {
    let caught: std::collections::BTreeSet<&str> = verdict
        .violations
        .iter()
        .map(|v| v.invariant.as_str())
        .collect();
    assert!(caught.contains(first.0), "{verdict:#?}");
    let allowed: std::collections::BTreeSet<&str> = std::iter::once(first.0)
        .chain(also.iter().map(|(name, _)| *name))
        .collect();
    assert!(caught.is_subset(&allowed), "{caught:?}");
}

#[test]
fn a_compact_route_state_naming_another_fence_is_caught_by_run() {
    // spec: SIM-1
    let mut trace = Trace::of("0001_steady_state.toml", 1);
    let snap = trace
        .find(0, |v| {
            ev(v, "snapshot") && v["route_states"].as_array().is_some_and(|s| !s.is_empty())
        })
        .expect("a snapshot with a compact route state");
    let fence = trace.lines[snap]["route_states"][0]["fence"]
        .as_u64()
        .unwrap();
    trace.lines[snap]["route_states"][0]["fence"] = json!(fence + 1_000);
    // The row cannot be applied: the store's release is missed, so the
    // accounting and the end of the run see the reservation still held.
    caught_by(
        &trace.recheck(),
        invariant::RUN,
        &[invariant::CAPACITY, invariant::ORPHAN, invariant::LEAK],
    );
}

#[test]
fn a_compact_row_for_a_row_no_snapshot_showed_is_caught_by_run() {
    // spec: SIM-1
    let mut trace = Trace::of("0001_steady_state.toml", 1);
    let snap = trace
        .find(0, |v| {
            ev(v, "snapshot") && v["leases"].as_array().is_some_and(|l| !l.is_empty())
        })
        .expect("a snapshot with a compact lease renewal");
    trace.lines[snap]["leases"][0]["id"] = json!("no-such-replica");
    caught_only_by(&trace.recheck(), invariant::RUN);
}

/// Turns the first answered publication into an error of `kind` inside a
/// database fault window (a lost COMMIT reply answers `unavailable`); the
/// store still shows the revision it made.
fn first_publication_answered(trace: &mut Trace, kind: &str) {
    unbound(trace, "publications");
    let i = trace
        .find(0, |v| {
            ev(v, "reply") && v["resp"]["op"] == "publish" && v["resp"]["result"]["Ok"].is_u64()
        })
        .expect("an answered publication");
    trace.lines[i]["resp"]["result"] =
        json!({"Err": {"kind": kind, "message": "connection to the store lost"}});
    let t = trace.lines[i]["t"].clone();
    trace.lines.insert(
        i,
        json!({"t": t, "ev": "fault", "fault": "db_cut", "mode": "next_commit", "connections": 0}),
    );
    trace.lines.insert(
        i + 2,
        json!({"t": t, "ev": "fault", "fault": "db_fault_end", "kind": "db_cut"}),
    );
}

#[test]
fn a_publication_answered_unavailable_may_have_made_its_revision() {
    // spec: CAT-1 (a publication whose COMMIT reply was lost succeeded,
    // though its caller was told `unavailable`)
    let mut trace = Trace::of("0001_steady_state.toml", 1);
    first_publication_answered(&mut trace, "unavailable");
    let verdict = trace.recheck();
    assert!(verdict.violations.is_empty(), "{:#?}", verdict.violations);
}

#[test]
fn a_revision_made_by_a_publication_answered_with_a_refusal_is_caught() {
    // spec: CAT-1, CAT-2 (a refused publication changes nothing)
    let mut trace = Trace::of("0001_steady_state.toml", 1);
    first_publication_answered(&mut trace, "conflict");
    caught_only_by(&trace.recheck(), invariant::REVISION);
}

/// The trace as a concurrent backend records it: not deterministic, each
/// registry answer numbered in commit order.
fn concurrent(trace: &mut Trace) {
    let mut commit = 0u64;
    for v in &mut trace.lines {
        if ev(v, "start") {
            v["deterministic"] = false.into();
        } else if ev(v, "reply")
            && v["from"]
                .as_str()
                .is_some_and(|f| f.starts_with("registry"))
        {
            commit += 1;
            v["commit"] = commit.into();
        }
    }
}

#[test]
fn a_lock_free_read_answered_before_the_route_it_showed_issues_no_fence_twice() {
    // spec: ROUTE-7, LOCK-5
    // On PostgreSQL a duplicate resolve reads its route without locks;
    // its `existing` answer can be recorded before the `created` answer
    // of the commit its snapshot showed. The fence is issued once.
    let mut trace = Trace::of("0035_shared_action_cancelled.toml", 1);
    concurrent(&mut trace);
    let (created, existing) = (0..trace.lines.len())
        .filter(|&i| resolved(&trace.lines[i], "created"))
        .find_map(|c| {
            let route = answered_assignment(&trace.lines[c]).clone();
            let e = trace.find(c, |v| {
                resolved(v, "existing") && *answered_assignment(v) == route
            })?;
            Some((c, e))
        })
        .expect("an existing answer carrying a created route");
    let mut read = trace.lines[existing].clone();
    read.as_object_mut().unwrap().remove("commit");
    read["read_at"] = trace.lines[created]["commit"].clone();
    read["t"] = trace.lines[created]["t"].clone();
    read["clock"] = trace.lines[created]["clock"].clone();
    let request = trace
        .find(0, |v| ev(v, "rpc") && v["id"] == read["id"])
        .unwrap();
    trace.lines[existing] = read.clone();
    trace.move_line(existing, created);
    if request > created {
        let mut asked = trace.lines[request + 1].clone();
        asked["t"] = read["t"].clone();
        trace.lines.remove(request + 1);
        trace.lines.insert(created, asked);
    }
    let verdict = trace.recheck();
    assert!(verdict.violations.is_empty(), "{:#?}", verdict.violations);

    // A second `created` answer with the fence is still caught.
    let at = trace
        .find(0, |v| {
            resolved(v, "created")
                && *answered_assignment(v) == read["resp"]["result"]["Ok"]["assignment"]
        })
        .unwrap();
    let mut again = trace.lines[at].clone();
    again.as_object_mut().unwrap().remove("commit");
    let asked = trace
        .find(0, |v| ev(v, "rpc") && v["id"] == again["id"])
        .unwrap();
    let mut ask = trace.lines[asked].clone();
    ask["id"] = 1_000_000.into();
    again["id"] = 1_000_000.into();
    trace.lines.insert(at + 1, again);
    trace.lines.insert(asked + 1, ask);
    caught_by(&trace.recheck(), invariant::FENCE, &[invariant::ONE_ROUTE]);
}
