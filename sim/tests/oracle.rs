//! Goal: the differential oracle replays a trace's registry calls against
//! a fresh in-memory registry and agrees with every clean trace of the
//! in-memory backend (its own reference), and names the line of an answer
//! edited to one the reference does not give.

mod oracle_common;

use oracle_common::*;

#[test]
fn the_oracle_agrees_with_clean_in_memory_traces() {
    // spec: SIM-4
    for file in [
        "0001_steady_state.toml",
        "0004_replica_crash_mid_action.toml",
        "0007_publications_during_paged_reads.toml",
        "0009_capacity_exhaustion_and_scopes.toml",
        "0029_late_created_after_refusal.toml",
    ] {
        for seed in [1, 2] {
            let report = oracle(file, &trace(file, seed)).unwrap();
            assert!(
                report.ok(),
                "{file} seed {seed}: {:?}",
                report.divergence.map(|d| d.lines())
            );
            assert!(report.ordered > 0, "{file} seed {seed}: nothing replayed");
        }
    }
}

#[test]
fn an_answer_the_reference_does_not_give_is_named_by_its_line() {
    // spec: SIM-4
    let file = "0009_capacity_exhaustion_and_scopes.toml";
    let clean = trace(file, 1);

    // A settlement that released, recorded as one that found nothing held.
    let mut edited = clean.clone();
    let at = first_reply(&edited, |v| v["resp"]["result"]["Ok"]["released"] == true);
    edited[at - 1] = edited[at - 1].replace(r#""released":true}"#, r#""released":false}"#);
    let d = oracle(file, &edited)
        .unwrap()
        .divergence
        .expect("not caught");
    assert_eq!(d.line, at as u64, "{:?}", d.lines());
    assert_eq!(d.op, "settle");

    // A resolve that created a route, recorded as `no_capacity`.
    let mut edited = clean.clone();
    let at = first_reply(&edited, |v| {
        v["resp"]["op"] == "resolve" && v["resp"]["result"]["Ok"].is_object()
    });
    let mut v: serde_json::Value = serde_json::from_str(&edited[at - 1]).unwrap();
    v["resp"]["result"] =
        serde_json::json!({"Err": {"kind": "no_capacity", "message": "no capacity"}});
    edited[at - 1] = v.to_string();
    let d = oracle(file, &edited)
        .unwrap()
        .divergence
        .expect("not caught");
    assert_eq!(d.line, at as u64, "{:?}", d.lines());
    assert_eq!(d.op, "resolve");
    assert!(d.recorded.contains("no_capacity"), "{}", d.recorded);
}

#[test]
fn a_trace_not_in_commit_order_is_refused() {
    // spec: SIM-4
    let file = "0001_steady_state.toml";
    let mut lines = trace(file, 1);
    lines[0] = lines[0]
        .replace(r#""deterministic":true"#, r#""deterministic":false"#)
        .replace(r#""commit_ordered":true"#, r#""commit_ordered":false"#);
    let e = oracle(file, &lines).unwrap_err();
    assert!(e.contains("commit-ordered"), "{e}");
}

#[test]
fn a_maintenance_that_skipped_a_busy_hold_is_accepted_only_beside_its_holder() {
    // spec: SIM-4, PIN-8, LOCK-1
    // On PostgreSQL, maintenance takes an expired hold's rows NOWAIT and
    // leaves a busy one for the next call (`more`). The oracle accepts
    // such an answer when a concurrent call of its step names one of those
    // rows, and names it as a divergence when none does.
    let file = "0034_resolve_after_caller_gave_up.toml";
    let clean = as_concurrent(&trace(file, 1));
    let report = oracle(file, &clean).unwrap();
    assert!(report.ok(), "{:?}", report.divergence.map(|d| d.lines()));

    let at = first_reply(&clean, |v| {
        v["resp"]["result"]["Ok"]["releases"][0]["reason"] == "hold_expired"
    });
    let mut skipped: serde_json::Value = serde_json::from_str(&clean[at - 1]).unwrap();
    let replica = skipped["resp"]["result"]["Ok"]["releases"][0]["replica"].clone();
    skipped["resp"]["result"]["Ok"] =
        serde_json::json!({"expired": [], "released": 0, "releases": [], "more": true});
    skipped.as_object_mut().unwrap().remove("released");

    // Alone in its step: the reference releases the hold.
    let mut alone = clean.clone();
    alone[at - 1] = skipped.to_string();
    let d = oracle(file, &alone)
        .unwrap()
        .divergence
        .expect("a maintenance that skipped a free hold was accepted");
    assert_eq!(d.line, at as u64, "{:?}", d.lines());

    // In the step of the hold's replica's heartbeat: its row was busy.
    let before = (0..at - 1)
        .rev()
        .find(|&i| clean[i].contains(r#""ev":"reply""#))
        .unwrap();
    let heartbeat: serde_json::Value = serde_json::from_str(&clean[before]).unwrap();
    assert_eq!(heartbeat["resp"]["op"], "heartbeat", "{heartbeat}");
    assert_eq!(
        heartbeat["to"],
        format!("replica-{}", replica.as_str().unwrap()),
        "the reply before the release is not its replica's heartbeat: {heartbeat}"
    );
    // The maintenance's request and answer move up beside the heartbeat's
    // answer, at its time: one step.
    let beside = moved_beside(&clean, at, skipped, before);
    let report = oracle(file, &beside).unwrap();
    assert!(report.ok(), "{:?}", report.divergence.map(|d| d.lines()));
}

#[test]
fn a_maintenance_more_read_before_a_renewal_is_accepted_only_beside_the_renewing_call() {
    // spec: SIM-4, LEASE-2
    // On PostgreSQL a batch passes over an expired replica whose row a
    // concurrent heartbeat holds, and reads `more` before that heartbeat
    // commits, though the commit order puts the renewal first: `more =
    // true` where the reference, after the renewal, finds none left. The
    // oracle accepts that only when another call of the step names a
    // replica, and names it as a divergence when none does.
    let file = "0001_steady_state.toml";
    let clean = as_concurrent(&trace(file, 1));
    let report = oracle(file, &clean).unwrap();
    assert!(report.ok(), "{:?}", report.divergence.map(|d| d.lines()));
    assert_eq!(report.stale_more, 0);

    // A maintenance answer that found nothing left, alone in its step
    // (no other answer at its time), after a heartbeat.
    let parsed: Vec<serde_json::Value> = clean
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let at = (1..=clean.len())
        .find(|&n| {
            let v = &parsed[n - 1];
            v["ev"] == "reply"
                && v["resp"]["op"] == "maintain"
                && v["resp"]["result"]["Ok"]["more"] == false
                && !parsed
                    .iter()
                    .enumerate()
                    .any(|(i, w)| i != n - 1 && w["ev"] == "reply" && w["t"] == v["t"])
                && parsed[..n - 1]
                    .iter()
                    .any(|w| w["ev"] == "reply" && w["resp"]["op"] == "heartbeat")
        })
        .expect("a maintenance answer with nothing left, alone in its step, after a heartbeat");
    let mut said_more: serde_json::Value = serde_json::from_str(&clean[at - 1]).unwrap();
    said_more["resp"]["result"]["Ok"]["more"] = true.into();

    // Alone in its step: nothing explains it.
    let mut alone = clean.clone();
    alone[at - 1] = said_more.to_string();
    let d = oracle(file, &alone)
        .unwrap()
        .divergence
        .expect("a maintenance saying more with nothing left was accepted");
    assert_eq!(d.line, at as u64, "{:?}", d.lines());

    // Moved beside the last heartbeat's answer before it, at its time.
    let before = (0..at - 1)
        .rev()
        .find(|&i| clean[i].contains(r#""ev":"reply""#) && clean[i].contains(r#""op":"heartbeat""#))
        .unwrap();
    let heartbeat: serde_json::Value = serde_json::from_str(&clean[before]).unwrap();
    said_more["clock"] = heartbeat["clock"].clone();
    let beside = moved_beside(&clean, at, said_more, before);
    let report = oracle(file, &beside).unwrap();
    assert!(report.ok(), "{:?}", report.divergence.map(|d| d.lines()));
    assert_eq!(report.stale_more, 1);
}

#[test]
fn an_existing_answer_after_a_lost_commit_reply_is_the_backends_retry_on_postgres_only() {
    // spec: SIM-4, ROUTE-3, PIN-3
    // A resolve whose COMMIT reply was lost is retried by the PostgreSQL
    // backend on a fresh connection, which finds the reservation the first
    // attempt committed: `existing` where the reference creates the route
    // or re-reserves a released one. The oracle counts it as a retry on a
    // concurrent trace, and names it as a divergence on an in-memory one,
    // whose backend never retries.
    let file = "0035_shared_action_cancelled.toml";
    let plain = trace(file, 1);
    let clean = as_concurrent(&plain);
    for kind in ["created", "reserved"] {
        let at = first_reply(&clean, |v| v["resp"]["result"]["Ok"]["kind"] == kind);
        let edit = |lines: &[String], retried: bool| {
            let mut out = lines.to_vec();
            let mut v: serde_json::Value = serde_json::from_str(&out[at - 1]).unwrap();
            v["resp"]["result"]["Ok"]["kind"] = "existing".into();
            if retried {
                v["retried"] = true.into();
            }
            out[at - 1] = v.to_string();
            out
        };
        let report = oracle(file, &edit(&clean, true)).unwrap();
        assert!(
            report.ok(),
            "{kind}: {:?}",
            report.divergence.map(|d| d.lines())
        );
        assert_eq!(report.retried, 1, "{kind}");
        // Only a call the backend says it retried.
        let never = format!("{kind}: a call never retried, taken as a retry");
        diverges_at(file, &edit(&clean, false), at, &never);
        let memory = format!("{kind}: an in-memory existing, taken as a retry");
        diverges_at(file, &edit(&plain, false), at, &memory);
    }
}

#[test]
fn a_lock_free_existing_answer_is_placed_by_the_snapshot_it_read() {
    // spec: SIM-4, ROUTE-3, LOCK-5
    // On PostgreSQL a held route's `existing` answer is read from a
    // snapshot without locks; it commits nothing and carries instead the
    // highest commit its snapshot showed (`read_at`). The oracle places it
    // there: beside the settlement that released its route, the answer
    // agrees when its snapshot preceded the release and is named when the
    // snapshot showed the release (the reference then reserves again).
    let file = "0035_shared_action_cancelled.toml";
    let clean = as_concurrent(&trace(file, 1));
    let existing = first_reply(&clean, |v| v["resp"]["result"]["Ok"]["kind"] == "existing");
    let action =
        parse(&clean[existing - 1])["resp"]["result"]["Ok"]["assignment"]["identity"]["action"]
            .clone();
    let release = first_reply(&clean, |v| {
        v["resp"]["op"] == "settle"
            && v["resp"]["result"]["Ok"]["released"] == true
            && v["released"][0]["action"] == action
    });
    assert!(
        release > existing,
        "the route is released after the existing answer"
    );
    let released_at = parse(&clean[release - 1])["commit"].as_u64().unwrap();
    let read = |read_at: u64| {
        let mut answer = parse(&clean[existing - 1]);
        answer.as_object_mut().unwrap().remove("commit");
        answer["read_at"] = read_at.into();
        moved_beside(&clean, existing, answer, release - 1)
    };
    let before = read(released_at - 1);
    let report = oracle(file, &before).unwrap();
    assert!(report.ok(), "{:?}", report.divergence.map(|d| d.lines()));
    assert_eq!(report.positioned, 1);
    let after = read(released_at);
    let d = oracle(file, &after)
        .unwrap()
        .divergence
        .expect("an existing answer read after its route's release");
    assert_eq!(d.op, "resolve", "{:?}", d.lines());
    assert!(d.detail.contains("snapshot"), "{:?}", d.lines());
    // A snapshot that showed a later commit of the step but not the
    // release (its COMMIT still in progress) agrees before the release,
    // and only when it says so (`read_unseen`).
    let next = first_reply(&clean, |v| {
        v["commit"].as_u64() > Some(released_at)
            && v["from"]
                .as_str()
                .is_some_and(|f| f.starts_with("registry"))
    });
    let next_at = parse(&clean[next - 1])["commit"].as_u64().unwrap();
    let two = moved_beside(&clean, next, parse(&clean[next - 1]), release - 1);
    let straggled = |unseen: &[u64]| {
        let mut answer = parse(&two[existing - 1]);
        answer.as_object_mut().unwrap().remove("commit");
        answer["read_at"] = next_at.into();
        answer["read_unseen"] = unseen.into();
        moved_beside(&two, existing, answer, release - 1)
    };
    let report = oracle(file, &straggled(&[released_at])).unwrap();
    assert!(report.ok(), "{:?}", report.divergence.map(|d| d.lines()));
    assert_eq!(report.read_earlier, 1);
    assert!(!oracle(file, &straggled(&[])).unwrap().ok());
    // A snapshot cannot show a commit nobody has made yet.
    let last = clean
        .iter()
        .filter_map(|l| parse(l)["commit"].as_u64())
        .max()
        .unwrap();
    let d = oracle(file, &read(last + 1))
        .unwrap()
        .divergence
        .expect("a snapshot past every commit");
    assert!(d.detail.contains("not made yet"), "{:?}", d.lines());
}

#[test]
fn a_read_of_what_a_retried_call_committed_agrees_beside_it() {
    // spec: SIM-4, LOCK-5, PIN-3
    // A re-reservation whose COMMIT reply was lost: the backend retries it
    // and finds it (`existing`, `retried`), and another caller's lock-free
    // read of the same step saw it too. Neither carries the lost commit's
    // sequence, only reads at or past it; the retried call's effect is
    // taken first, whatever order the two answers came back in.
    let file = "0035_shared_action_cancelled.toml";
    let clean = as_concurrent(&trace(file, 1));
    let at = first_reply(&clean, |v| v["resp"]["result"]["Ok"]["kind"] == "reserved");
    let mut retried = parse(&clean[at - 1]);
    let lost = retried.as_object_mut().unwrap().remove("commit").unwrap();
    retried["resp"]["result"]["Ok"]["kind"] = "existing".into();
    retried["read_at"] = lost;
    retried["retried"] = true.into();
    let id = retried["id"].as_u64().unwrap();
    let request = (clean.iter().map(|l| parse(l)))
        .find(|v| v["ev"] == "rpc" && v["id"] == id)
        .unwrap();
    let other = 1
        + (clean
            .iter()
            .filter_map(|l| parse(l)["id"].as_u64())
            .max()
            .unwrap());
    let mut read = retried.clone();
    read["id"] = other.into();
    read.as_object_mut().unwrap().remove("retried");
    let mut asked = request.clone();
    asked["id"] = other.into();
    let mut lines = clean.clone();
    lines[at - 1] = retried.to_string();
    // The other caller asked with the first and was answered before it.
    lines.insert(at - 1, read.to_string());
    let first_ask = lines.iter().position(|l| parse(l) == request).unwrap();
    lines.insert(first_ask + 1, asked.to_string());
    let report = oracle(file, &lines).unwrap();
    assert!(report.ok(), "{:?}", report.divergence.map(|d| d.lines()));
    assert_eq!((report.retried, report.positioned), (1, 2));
    // The retried call read past a later commit of the step, so its place
    // comes after the other read's: it is taken first all the same.
    let at = lines.iter().position(|l| parse(l) == retried).unwrap() + 1;
    let next = at
        + lines[at..]
            .iter()
            .position(|l| {
                let v = parse(l);
                v["ev"] == "reply"
                    && v["commit"].is_u64()
                    && v["from"]
                        .as_str()
                        .is_some_and(|f| f.starts_with("registry"))
            })
            .unwrap()
        + 1;
    let next_at = parse(&lines[next - 1])["commit"].clone();
    let mut later = moved_beside(&lines, next, parse(&lines[next - 1]), at - 1);
    let mut past = retried.clone();
    past["read_at"] = next_at;
    later[at - 1] = past.to_string();
    let report = oracle(file, &later).unwrap();
    assert!(report.ok(), "{:?}", report.divergence.map(|d| d.lines()));
    assert_eq!((report.retried, report.positioned), (1, 2));
}

#[test]
fn a_read_of_what_an_unavailable_call_committed_agrees() {
    // spec: SIM-4, ROUTE-3, LOCK-5
    // A new route whose caller saw `unavailable` (the connection was lost
    // after the COMMIT), then a lock-free read of that route: the read
    // agrees once the lost call is taken as committed before it.
    let file = "0035_shared_action_cancelled.toml";
    let clean = as_concurrent(&trace(file, 1));
    let existing = first_reply(&clean, |v| v["resp"]["result"]["Ok"]["kind"] == "existing");
    let action =
        parse(&clean[existing - 1])["resp"]["result"]["Ok"]["assignment"]["identity"]["action"]
            .clone();
    let created = first_reply(&clean, |v| {
        v["resp"]["result"]["Ok"]["kind"] == "created"
            && v["resp"]["result"]["Ok"]["assignment"]["identity"]["action"] == action
    });
    let mut lines = clean.clone();
    let (lost, seq) = answered_unavailable(&lines[created - 1]);
    lines[created - 1] = lost.to_string();
    let mut read = parse(&lines[existing - 1]);
    read.as_object_mut().unwrap().remove("commit");
    read["read_at"] = seq.unwrap();
    lines[existing - 1] = read.to_string();
    let report = oracle(file, &lines).unwrap();
    assert!(report.ok(), "{:?}", report.divergence.map(|d| d.lines()));
    assert_eq!((report.unknown, report.unknown_committed), (1, 1));
}

#[test]
fn a_read_with_a_snapshot_position_answered_unavailable_agrees() {
    // spec: SIM-4, LOCK-5
    // A page read whose snapshot was placed (its position read) and whose
    // connection was then lost answers `unavailable`: a read changes
    // nothing and the reference never loses a connection, so nothing is
    // compared (0037 seed 2 on PostgreSQL diverged on it in CI).
    let file = "0007_publications_during_paged_reads.toml";
    let clean = as_concurrent(&trace(file, 1));
    let mut last_commit = None;
    let mut page = None;
    for (i, l) in clean.iter().enumerate() {
        let v = parse(l);
        if v["ev"] == "reply" && v["resp"]["op"] == "page" && last_commit.is_some() {
            page = Some(i);
            break;
        }
        if let Some(c) = v.get("commit") {
            last_commit = Some(c.clone());
        }
    }
    let page = page.expect("a page read after a commit");
    let mut lines = clean.clone();
    let (mut read, _) = answered_unavailable(&lines[page]);
    read["read_at"] = last_commit.unwrap();
    lines[page] = read.to_string();
    let report = oracle(file, &lines).unwrap();
    assert!(report.ok(), "{:?}", report.divergence.map(|d| d.lines()));
    assert_eq!(report.positioned, 0, "an unavailable read is not placed");
}

#[test]
fn a_retried_resolve_whose_first_attempt_ranked_before_its_step_agrees() {
    // spec: SIM-4, ROUTE-3, PIN-2
    // Recorded on PostgreSQL (0015 seed 5, answers to replicas and the
    // store's snapshots left out): a resolve sent at 96 ms, whose first
    // attempt ranked r2 before another route took r2 at 98 ms and then
    // committed with its COMMIT reply lost (sequence 46); the retry read
    // its route lock-free (`existing`, `read_at` 47, `retried`). At every
    // place of its step the reference's first choice is r1; r2 is still
    // one it can pick, which is what the oracle requires of a retry.
    let file = "0015_db_commit_reply_lost.toml";
    let lines = recorded("retried_resolve_ranked_before_the_step.jsonl");
    let report = agrees(file, &lines);
    assert_eq!(report.retried, 1);
    let at = first_reply(&lines, |v| v["retried"] == true);
    // Not for a call the backend did not retry, nor for a replica the
    // reference could not pick (another tenant's).
    let edited = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut out = lines.clone();
        let mut v = parse(&out[at - 1]);
        edit(&mut v);
        out[at - 1] = v.to_string();
        out
    };
    let unretried = edited(&|v| {
        v.as_object_mut().unwrap().remove("retried");
    });
    let elsewhere = edited(&|v| {
        let d = &mut v["resp"]["result"]["Ok"]["assignment"]["destination"];
        d["replica"] = "r3".into();
        d["endpoint"] = "replica-r3:7100".into();
        d["peer_identity"] = "spiffe://sim/replica/r3".into();
    });
    diverges_at(file, &unretried, at, "unretried");
    diverges_at(file, &elsewhere, at, "elsewhere");
}

#[test]
fn a_retried_read_is_taken_before_a_duplicate_that_found_its_lost_commit() {
    // spec: SIM-4, ROUTE-3
    // Recorded on PostgreSQL (0019 seed 39, answers to replicas and the
    // store's snapshots left out): one dispatcher sends three resolves of
    // one action at 86 ms. The first attempt of call 60 made the route and
    // lost its COMMIT reply (sequence 42, claimed by no answer); call 61
    // then answered `existing` under the action's lock (commit 43); call
    // 60's retry read the route lock-free (`existing`, `read_at` 43,
    // `retried`). Replaying 61 first, the reference has no route yet and
    // creates one: the retried read, whose first commit is below 43, goes
    // before it.
    let file = "0019_db_chaos.toml";
    let lines = recorded("retried_read_before_a_duplicate_existing.jsonl");
    let report = agrees(file, &lines);
    assert_eq!(report.retried, 1);
    // Without the retry's mark nothing made the route before 61's commit.
    let duplicate = first_reply(&lines, |v| v["commit"] == 43);
    let retried = first_reply(&lines, |v| v["retried"] == true);
    let unretried = edited_at(&lines, retried, |v| {
        v.as_object_mut().unwrap().remove("retried");
    });
    diverges_at(file, &unretried, duplicate, "unretried");
}
