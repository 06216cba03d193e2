//! Goal: writing calls answered `unavailable` (their commit unknown) are
//! taken as committed exactly when a later answer needs them, alone or
//! together, and a choice a later answer refutes is revised.

mod oracle_common;

use oracle_common::*;

#[test]
fn a_settlement_answered_unavailable_that_committed_is_found_by_a_later_answer() {
    // spec: SIM-4, SETTLE-4
    // A lost connection after the COMMIT of a settlement: its caller saw
    // `unavailable`, the store released the route. The next settlement of
    // the action answers `released: false`, which the reference gives only
    // with the first one committed.
    let file = "0035_shared_action_cancelled.toml";
    let clean = as_concurrent(&trace(file, 1));
    let release = first_reply(&clean, |v| {
        v["resp"]["op"] == "settle" && v["resp"]["result"]["Ok"]["released"] == true
    });
    let action = parse(&clean[release - 1])["released"][0]["action"].clone();
    let again = first_reply(&clean, |v| {
        v["resp"]["op"] == "settle" && v["resp"]["result"]["Ok"]["released"] == false
    });
    assert!(again > release);
    let mut lines = clean.clone();
    let (mut lost, _) = answered_unavailable(&lines[release - 1]);
    lost.as_object_mut().unwrap().remove("released");
    lines[release - 1] = lost.to_string();
    let report = oracle(file, &lines).unwrap();
    assert!(
        report.ok(),
        "{action}: {:?}",
        report.divergence.map(|d| d.lines())
    );
    assert_eq!(report.unknown, 1);
    assert_eq!(report.unknown_committed, 1);
}

#[test]
fn of_two_unavailable_settlements_only_the_one_a_later_answer_needs_is_taken_as_committed() {
    // spec: SIM-4, SETTLE-4
    // Two settlements answered `unavailable`: the first committed (its
    // caller's retry answers `released: false`), the second did not (its
    // retry, after that, releases). The retry of the first is explained
    // by the first alone; the second stays pending and its own retry
    // agrees with it never committed.
    let file = "0035_shared_action_cancelled.toml";
    let plain = trace(file, 1);
    let settled = |v: &serde_json::Value, released: bool| {
        v["resp"]["op"] == "settle" && v["resp"]["result"]["Ok"]["released"] == released
    };
    // A release whose action is settled again (`released: false`).
    let replies: Vec<(usize, serde_json::Value)> = (plain.iter().map(|l| parse(l)))
        .enumerate()
        .filter(|(_, v)| v["ev"] == "reply")
        .collect();
    let (first, again, action) = (replies.iter())
        .filter(|(_, v)| settled(v, true))
        .find_map(|(i, v)| {
            let action = v["released"][0]["action"].clone();
            let (j, _) = (replies.iter()).find(|(j, w)| {
                j > i && settled(w, false) && w["id"].as_u64() > v["id"].as_u64() && {
                    let id = w["id"].as_u64();
                    (plain.iter().map(|l| parse(l))).any(|r| {
                        r["ev"] == "rpc"
                            && r["id"].as_u64() == id
                            && r["req"]["params"]["assignment"]["identity"]["action"] == action
                    })
                }
            })?;
            Some((i + 1, j + 1, action))
        })
        .expect("a release settled again");
    // Another action's release before the retry.
    let second = (0..again - 1)
        .rev()
        .find(|&i| {
            let v = parse(&plain[i]);
            i + 1 != first
                && v["ev"] == "reply"
                && settled(&v, true)
                && v["released"][0]["action"] != action
        })
        .expect("another release before")
        + 1;
    let mut lines = plain.clone();
    let retry = parse(&plain[second - 1]);
    let id = retry["id"].as_u64().unwrap();
    let mut asked = (plain.iter().map(|l| parse(l)))
        .find(|v| v["ev"] == "rpc" && v["id"] == id)
        .unwrap();
    let fresh = 1
        + (plain.iter().filter_map(|l| parse(l)["id"].as_u64()))
            .max()
            .unwrap();
    let (mut retry, mut asked) = (retry.clone(), {
        asked["id"] = fresh.into();
        asked
    });
    retry["id"] = fresh.into();
    let t = parse(&plain[again - 1])["t"].clone();
    let clock = parse(&plain[again - 1])["clock"].clone();
    asked["t"] = t.clone();
    retry["t"] = t;
    retry["clock"] = clock;
    lines.insert(again, retry.to_string());
    lines.insert(again, asked.to_string());
    for at in [first, second] {
        let (mut lost, _) = answered_unavailable(&lines[at - 1]);
        lost.as_object_mut().unwrap().remove("released");
        lines[at - 1] = lost.to_string();
    }
    let report = oracle(file, &as_concurrent(&lines)).unwrap();
    assert!(report.ok(), "{:?}", report.divergence.map(|d| d.lines()));
    assert_eq!((report.unknown, report.unknown_committed), (2, 1));
}

#[test]
fn answers_of_a_step_are_compared_again_once_an_unavailable_call_is_taken_as_committed() {
    // spec: SIM-4, CAT-1, ROUTE-5
    // Recorded on PostgreSQL (0029 swarm seed 10, answers to replicas and
    // the store's snapshots left out): a publication disabling the
    // tenant's only binding committed and lost its COMMIT reply (answered
    // `unavailable` at 78 ms). At 92 ms two copies of one resolve are
    // refused with `no_eligible_binding`, in one step with no commit. The
    // first refusal is explained by taking the publication as committed;
    // the second must then be compared with the reference that holds it.
    let file = "0029_late_created_after_refusal.toml";
    let lines = recorded("unavailable_publication_explains_two_refusals.jsonl");
    let report = agrees(file, &lines);
    assert_eq!(report.unknown_committed, 1);
    // Without the publication nothing explains the refusals; and the
    // second is compared, not waved through once the first agreed.
    let publication = first_reply(&lines, |v| {
        v["resp"]["op"] == "publish" && v.get("commit").is_none()
    });
    let id = parse(&lines[publication - 1])["id"].clone();
    let never_sent: Vec<String> = (lines.iter())
        .filter(|l| parse(l)["id"] != id)
        .cloned()
        .collect();
    let refused = |lines: &[String], nth: usize| {
        (lines.iter().enumerate())
            .filter(|(_, l)| {
                let v = parse(l);
                v["t"] == 92 && v["resp"]["result"]["Err"]["kind"] == "no_eligible_binding"
            })
            .nth(nth)
            .map(|(i, _)| i + 1)
            .expect("two refusals at 92 ms")
    };
    diverges_at(file, &never_sent, refused(&never_sent, 0), "never sent");
    let second = refused(&lines, 1);
    let mut capacity = lines.clone();
    capacity[second - 1] = {
        let mut v = parse(&lines[second - 1]);
        v["resp"]["result"]["Err"]["kind"] = "no_capacity".into();
        v.to_string()
    };
    diverges_at(file, &capacity, second, "second refusal edited");
}

#[test]
fn a_choice_among_unavailable_calls_that_a_later_answer_refutes_is_revised() {
    // spec: SIM-4, SETTLE-4
    // Recorded on PostgreSQL (0014 swarm seed 122, trimmed): during a
    // failover two settlements are answered `unavailable` at 150 ms, one
    // releasing pool-6 (call 117), one dispatcher-1.1-12 (call 118). At
    // 154 ms a resolve takes the tenant's scope, which only one of them
    // could have freed: either explains it. The retries tell which: pool-6's
    // releases again (`released: true`, 117 never committed) and the
    // other's finds it released (118 did). Taking 117, the first that
    // agrees, made pool-6's retry diverge; the choice is revised.
    let file = "0014_db_cut_mid_transaction.toml";
    let lines = recorded("two_unavailable_settlements_either_frees_the_scope.jsonl");
    let report = agrees(file, &lines);
    assert_eq!(report.unknown_committed, 1);
    assert_eq!(report.revised, 1);
    // With both retries releasing, neither can have freed the scope: no
    // choice holds, and the divergence reported is the furthest reached.
    let last = lines.len();
    let mut neither = lines.clone();
    neither[last - 1] = {
        let mut v = parse(&lines[last - 1]);
        assert_eq!(v["resp"]["result"]["Ok"]["released"], false);
        v["resp"]["result"]["Ok"]["released"] = true.into();
        v.to_string()
    };
    diverges_at(file, &neither, last, "neither committed");
}

/// `plain` with three settlements of routes the maintenance batch answered
/// on line `m` (1-based) releases, sent and answered `unavailable` at the
/// time of the last reply before that batch was asked; the batch's answer
/// keeps the releases `kept` names (indices into its first three) and
/// drops the others, as if their settlements had committed first.
fn settled_before_maintenance(plain: &[String], m: usize, kept: &[usize]) -> Vec<String> {
    let batch = parse(&plain[m - 1]);
    let releases = batch["resp"]["result"]["Ok"]["releases"]
        .as_array()
        .unwrap()
        .clone();
    let asked = (0..m - 1)
        .rev()
        .find(|&i| parse(&plain[i])["ev"] == "rpc" && parse(&plain[i])["id"] == batch["id"])
        .expect("the batch's request");
    let before = (0..asked)
        .rev()
        .find(|&i| parse(&plain[i])["ev"] == "reply")
        .expect("a reply before the batch");
    let (t, clock) = (
        parse(&plain[before])["t"].clone(),
        parse(&plain[before])["clock"].clone(),
    );
    // The assignment each release ended: the last answer naming its fence.
    let assignment = |release: &serde_json::Value| {
        (plain[..before].iter().rev().map(|l| parse(l)))
            .find_map(|v| {
                let a = &v["resp"]["result"]["Ok"]["assignment"];
                (v["ev"] == "reply"
                    && a["identity"]["action"] == release["action"]
                    && a["reservation"]["fence"] == release["fence"])
                    .then(|| a.clone())
            })
            .expect("the released route's assignment")
    };
    let first_id = 1
        + (plain.iter().filter_map(|l| parse(l)["id"].as_u64()))
            .max()
            .unwrap();
    let mut lines = plain.to_vec();
    let mut inserted = Vec::new();
    for (id, release) in (first_id..).zip(&releases[..3]) {
        let settle = serde_json::json!({"op": "settle", "params": {
            "assignment": assignment(release), "outcome": "cancelled"}});
        inserted.push(serde_json::json!({"t": t, "ev": "rpc", "id": id,
            "from": "dispatcher-0", "to": "registry-0", "req": settle}));
        inserted.push(serde_json::json!({"t": t, "ev": "reply", "id": id,
            "from": "registry-0", "to": "dispatcher-0", "resp": {"op": "settle",
            "result": {"Err": {"kind": "unavailable", "message": "connection to the store lost"}}},
            "lost": false, "clock": clock}));
    }
    let kept: Vec<serde_json::Value> = (releases.iter().enumerate())
        .filter(|(i, _)| *i >= 3 || kept.contains(i))
        .map(|(_, r)| r.clone())
        .collect();
    let mut answer = batch.clone();
    answer["resp"]["result"]["Ok"]["releases"] = kept.clone().into();
    answer["resp"]["result"]["Ok"]["released"] = kept.len().into();
    answer["released"] = kept.into();
    lines[m - 1] = answer.to_string();
    for (k, v) in inserted.into_iter().enumerate() {
        lines.insert(before + 1 + k, v.to_string());
    }
    lines
}

#[test]
fn a_batch_that_needs_two_of_three_unavailable_settlements_committed_agrees() {
    // spec: SIM-4, LEASE-1
    // Three settlements of routes held on r1 are answered `unavailable`
    // before the maintenance batch that expires r1. The batch releases the
    // third's route but not the first two's: exactly the first two
    // committed. Neither alone, nor all three together, explains it; the
    // search of the pending calls' combinations finds the pair.
    let file = "0004_replica_crash_mid_action.toml";
    let plain = as_concurrent(&trace(file, 1));
    let m = first_reply(&plain, |v| {
        let ok = &v["resp"]["result"]["Ok"];
        v["resp"]["op"] == "maintain"
            && ok["more"] == false
            && ok["releases"].as_array().is_some_and(|r| r.len() >= 4)
    });
    // With every release kept, no settlement committed: all stay pending.
    let none = settled_before_maintenance(&plain, m, &[0, 1, 2]);
    let report = agrees(file, &none);
    assert_eq!((report.unknown, report.unknown_committed), (3, 0));
    // One dropped: one committed, found alone.
    let one = settled_before_maintenance(&plain, m, &[1, 2]);
    let report = agrees(file, &one);
    assert_eq!((report.unknown, report.unknown_committed), (3, 1));
    // Two dropped: only the pair explains the batch.
    let two = settled_before_maintenance(&plain, m, &[2]);
    let report = agrees(file, &two);
    assert_eq!((report.unknown, report.unknown_committed), (3, 1));
    // A release the reference cannot give, whatever committed: the batch
    // names a route of r1 twice over by keeping one it could not hold.
    let mut wrong = two.clone();
    let batch_id = parse(&plain[m - 1])["id"].clone();
    let at = (wrong.iter().map(|l| parse(l)))
        .position(|v| v["ev"] == "reply" && v["id"] == batch_id)
        .unwrap();
    let mut v = parse(&wrong[at]);
    v["resp"]["result"]["Ok"]["expired"] = serde_json::json!([]);
    wrong[at] = v.to_string();
    diverges_at(
        file,
        &wrong,
        at + 1,
        "a batch that expired nothing but released",
    );
}

#[test]
fn a_retried_resolve_that_found_its_lost_commit_after_an_unavailable_publication_agrees() {
    // spec: SIM-4, ROUTE-3, CAT-2
    // Two faults in a row on PostgreSQL: a publication answered
    // `unavailable` that committed, then a resolve
    // whose COMMIT reply was lost, retried by the backend, which found
    // the route its first attempt made under the new catalog revision
    // (`existing`, `retried`). Only with the publication taken as
    // committed does the reference decide at that revision, and the
    // answer agrees as the retry it says it was.
    let file = "0008_binding_disabled_mid_run.toml";
    let clean = as_concurrent(&trace(file, 1));
    let publication = first_reply(&clean, |v| v["resp"]["op"] == "publish");
    let revision = parse(&clean[publication - 1])["resp"]["result"]["Ok"].clone();
    let created = first_reply(&clean, |v| {
        let ok = &v["resp"]["result"]["Ok"];
        ok["kind"] == "created" && ok["assignment"]["policy"]["catalog_revision"] == revision
    });
    assert!(created > publication);
    let mut lines = clean.clone();
    let (lost, _) = answered_unavailable(&lines[publication - 1]);
    lines[publication - 1] = lost.to_string();
    let mut retry = parse(&lines[created - 1]);
    retry["resp"]["result"]["Ok"]["kind"] = "existing".into();
    retry["retried"] = true.into();
    // Read lock-free: no commit of its own, the snapshot's place instead,
    // which shows the first attempt's commit (lost with its reply).
    let first_attempt = retry.as_object_mut().unwrap().remove("commit").unwrap();
    retry["read_at"] = first_attempt;
    retry["read_unseen"] = serde_json::json!([]);
    lines[created - 1] = retry.to_string();
    let report = agrees(file, &lines);
    assert_eq!(
        (report.unknown, report.unknown_committed, report.retried),
        (1, 1, 1)
    );
    // Not retried, the same `existing` is a divergence.
    let mut never = lines.clone();
    let mut v = parse(&never[created - 1]);
    v.as_object_mut().unwrap().remove("retried");
    never[created - 1] = v.to_string();
    let d = oracle(file, &never).unwrap().divergence.expect("diverges");
    assert_eq!(d.line, created as u64, "{:?}", d.lines());
}

#[test]
fn a_resolve_answered_unavailable_that_committed_before_a_publication_agrees() {
    // spec: SIM-4, ROUTE-3, CAT-2
    // Recorded on PostgreSQL (0014 swarm seed 254, answers to replicas and
    // the store's snapshots left out): a resolve of pool-6 is answered
    // `unavailable` at 402 ms (the backend's retry failed too), but its
    // first attempt committed the route under catalog revision 2. A
    // publication commits revision 3 at 406 ms; at 420 ms the dispatcher's
    // next resolve reads the route lock-free, at revision 2. Taken as
    // committed just before that read, after the publication, the resolve
    // would make the route at revision 3: it committed where it was
    // answered, before the publication.
    let file = "0014_db_cut_mid_transaction.toml";
    let lines = recorded("unavailable_resolve_committed_before_a_publication.jsonl");
    let report = agrees(file, &lines);
    assert_eq!((report.unknown, report.unknown_committed), (1, 1));
    assert_eq!((report.unknown_where_answered, report.revised), (1, 1));
    // A revision the route was never made at is still a divergence.
    let read = first_reply(&lines, |v| {
        v["id"] == 163 && v["resp"]["result"]["Ok"]["kind"] == "existing"
    });
    let wrong = edited_at(&lines, read, |v| {
        v["resp"]["result"]["Ok"]["assignment"]["policy"]["catalog_revision"] = 1.into();
    });
    diverges_at(file, &wrong, read, "a revision the route never had");
}

#[test]
fn an_unavailable_resolve_is_placed_where_answered_when_later_commits_move_its_pick() {
    // spec: SIM-4, ROUTE-3, ROUTE-6
    // Recorded on PostgreSQL (0014 swarm seed 203, trimmed): at 120 ms a
    // settlement and a resolve are answered `unavailable`; the resolve's
    // first attempt committed a route on r3. Later routes and releases
    // change the replicas' counts, so a resolve decided after them picks
    // r4; the lock-free read at 170 ms finds the route on r3. Only the
    // resolve, placed where it was answered, explains it.
    let file = "0014_db_cut_mid_transaction.toml";
    let lines = recorded("unavailable_resolve_committed_before_later_commits_moved_its_pick.jsonl");
    let report = agrees(file, &lines);
    assert_eq!((report.unknown, report.unknown_committed), (2, 1));
    assert_eq!(report.unknown_where_answered, 1);
    // Recorded on a replica no placement gives: a divergence.
    let read = first_reply(&lines, |v| {
        v["id"] == 142 && v["resp"]["result"]["Ok"]["kind"] == "existing"
    });
    let wrong = edited_at(&lines, read, |v| {
        let destination = &mut v["resp"]["result"]["Ok"]["assignment"]["destination"];
        destination["replica"] = "r2".into();
        destination["endpoint"] = "replica-r2:7100".into();
    });
    diverges_at(file, &wrong, read, "a replica no placement picks");
}

#[test]
fn a_retried_resolve_that_needs_settlements_answered_unavailable_agrees_as_its_retry() {
    // spec: SIM-4, ROUTE-3, SETTLE-4
    // Recorded on PostgreSQL (0014 swarm seed 155, trimmed): at 120 ms two
    // settlements of the tenant's routes are answered `unavailable`, and
    // in the same step a resolve the backend retried answers `existing`,
    // read lock-free: its first attempt made the route, in the room the
    // settlements freed. Only with a settlement taken as committed does
    // the reference create that route, and the answer agrees as the retry
    // it says it was.
    let file = "0014_db_cut_mid_transaction.toml";
    let lines = recorded("retried_resolve_beside_two_unavailable_settlements.jsonl");
    let report = agrees(file, &lines);
    assert_eq!((report.unknown, report.unknown_committed), (2, 1));
    assert_eq!(report.retried, 1);
    // Not retried, the same `existing` is a divergence.
    let read = first_reply(&lines, |v| v["id"] == 102);
    let never = edited_at(&lines, read, |v| {
        v.as_object_mut().unwrap().remove("retried");
    });
    diverges_at(file, &never, read, "not retried");
}
