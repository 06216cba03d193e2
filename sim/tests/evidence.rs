//! Goal: the trace carries what an independent check needs (what each
//! settlement and maintenance released, which answers reached their
//! caller, which dispatch caused each side effect, the registry clock of
//! each decision), an older trace format is refused with a clear message,
//! and every evidence defect planted into a clean trace makes
//! `connreg-sim check-trace` fail: the checkers' own power, measured.

use std::path::PathBuf;
use std::process::Command;

use connreg_sim::{RunOptions, Scenario, TraceTarget, recheck, run};
use serde_json::{Value, json};

/// A clean trace of `file` at `seed`, one JSON value a line.
fn clean(file: &str, seed: u64) -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
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
    String::from_utf8(report.trace.take().unwrap())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Runs `connreg-sim check-trace` on `lines`; returns (exit code, output).
fn check_trace(name: &str, lines: &[Value]) -> (Option<i32>, String) {
    let dir = std::env::temp_dir().join(format!("connreg-sim-evidence-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.trace.jsonl"));
    let text: String = lines
        .iter()
        .map(|v| serde_json::to_string(v).unwrap() + "\n")
        .collect();
    std::fs::write(&path, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_connreg-sim"))
        .args(["check-trace", path.to_str().unwrap()])
        .output()
        .expect("the connreg-sim binary runs");
    std::fs::remove_file(&path).ok();
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), said)
}

fn find(lines: &[Value], pred: impl Fn(&Value) -> bool) -> usize {
    lines
        .iter()
        .position(pred)
        .expect("the trace has such a line")
}

fn reply_of(v: &Value, op: &str) -> bool {
    v["ev"] == "reply" && v["resp"]["op"] == op
}

fn releasing_settle(v: &Value) -> bool {
    reply_of(v, "settle") && v["resp"]["result"]["Ok"]["released"] == true
}

fn expiring_maintain(v: &Value) -> bool {
    reply_of(v, "maintain")
        && v["resp"]["result"]["Ok"]["released"]
            .as_u64()
            .is_some_and(|n| n > 0)
}

/// Drops `counter` from the `start` line's expectations.
fn unbound(lines: &mut [Value], counter: &str) {
    for side in ["at_least", "at_most"] {
        if let Some(b) = lines[0]
            .get_mut("expect")
            .and_then(|e| e.get_mut(side))
            .and_then(Value::as_object_mut)
        {
            b.remove(counter);
        }
    }
}

#[test]
fn a_clean_trace_carries_the_evidence_fields_and_passes() {
    let lines = clean("0004_replica_crash_mid_action.toml", 1);
    assert_eq!(lines[0]["format"], connreg_sim::trace::TRACE_FORMAT);
    let settle = &lines[find(&lines, releasing_settle)];
    let named = &settle["released"][0];
    assert!(named["fence"].is_u64(), "{settle}");
    assert!(named["replica"].is_string(), "{settle}");
    assert!(named["scopes"].is_array(), "{settle}");
    let maintain = &lines[find(&lines, expiring_maintain)];
    assert_eq!(
        maintain["released"].as_array().map(Vec::len),
        maintain["resp"]["result"]["Ok"]["released"]
            .as_u64()
            .map(|n| n as usize),
        "{maintain}"
    );
    let registry_reply = &lines[find(&lines, |v| reply_of(v, "resolve"))];
    assert!(registry_reply["clock"].is_u64(), "{registry_reply}");
    let ledger = &lines[find(&lines, |v| v["ev"] == "ledger")];
    let rpc = ledger["rpc"]
        .as_u64()
        .expect("a ledger entry names its call");
    let call = &lines[find(&lines, |v| v["ev"] == "rpc" && v["id"] == rpc)];
    assert_eq!(call["req"]["op"], "execute");
    assert!(lines.iter().any(|v| v["ev"] == "delivered"));
    let (code, said) = check_trace("clean", &lines);
    assert_eq!(code, Some(0), "{said}");
}

#[test]
fn a_trace_of_an_older_format_is_refused_with_a_clear_message() {
    let mut lines = clean("0001_steady_state.toml", 1);
    lines[0]["format"] = json!(1);
    let text: Vec<std::io::Result<String>> = lines
        .iter()
        .map(|v| Ok(serde_json::to_string(v).unwrap()))
        .collect();
    let err = recheck(text.into_iter()).expect_err("an older format is refused");
    assert!(err.contains("format 1"), "{err}");
    assert!(err.contains("formats 2, 3, 4"), "{err}");
    // Format 3 added no evidence a check needs: a format 2 trace (no
    // provenance, no violation context) still re-checks.
    let mut two = lines.clone();
    two[0]["format"] = json!(2);
    for key in ["version", "revision", "scenario_file", "scenario_sha256"] {
        two[0].as_object_mut().unwrap().remove(key);
    }
    let text: Vec<std::io::Result<String>> = two
        .iter()
        .map(|v| Ok(serde_json::to_string(v).unwrap()))
        .collect();
    let verdict = recheck(text.into_iter()).expect("a format 2 trace is read");
    assert!(verdict.ok(), "{:?}", verdict.mismatches);
    let (code, said) = check_trace("old", &lines);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("format 1"), "{said}");
}

/// One planted evidence defect: its name, the clean trace it edits, and
/// the edit.
type Defect = (&'static str, &'static str, fn(&mut Vec<Value>));

const DEFECTS: &[Defect] = &[
    // The store frees a reservation consistently (row and counters) and
    // the settlement that did it answers "not released".
    ("silent_release", "0001_steady_state.toml", |l| {
        unbound(l, "settle_released");
        unbound(l, "settled_completed");
        let i = find(l, releasing_settle);
        l[i]["resp"]["result"]["Ok"]["released"] = json!(false);
        l[i]["released"] = json!(null);
    }),
    // Maintenance reports one more release than it made, the end counters
    // agreeing.
    (
        "maintain_overcount",
        "0004_replica_crash_mid_action.toml",
        |l| {
            unbound(l, "lease_expired");
            let i = find(l, expiring_maintain);
            let n = l[i]["resp"]["result"]["Ok"]["released"].as_u64().unwrap();
            l[i]["resp"]["result"]["Ok"]["released"] = json!(n + 1);
            let end = l.len() - 1;
            let c = l[end]["counters"]["lease_expired"].as_u64().unwrap();
            l[end]["counters"]["lease_expired"] = json!(c + 1);
        },
    ),
    // A settlement names another reservation than the one it released.
    (
        "settle_names_another_fence",
        "0001_steady_state.toml",
        |l| {
            let i = find(l, releasing_settle);
            let f = l[i]["released"][0]["fence"].as_u64().unwrap();
            l[i]["released"][0]["fence"] = json!(f + 1_000);
        },
    ),
    // A settlement names another replica than the one it freed.
    (
        "settle_names_another_replica",
        "0001_steady_state.toml",
        |l| {
            let i = find(l, releasing_settle);
            l[i]["released"][0]["replica"] = json!("elsewhere");
        },
    ),
    // Maintenance names one reservation fewer than it counts.
    (
        "maintain_names_fewer",
        "0004_replica_crash_mid_action.toml",
        |l| {
            let i = find(l, expiring_maintain);
            l[i]["released"].as_array_mut().unwrap().pop();
        },
    ),
    // An answer the fault dropped is recorded as delivered.
    (
        "lost_answer_delivered",
        "0003_retry_after_lost_answer.toml",
        |l| {
            let i = find(l, |v| v["ev"] == "reply" && v["lost"] == true);
            let id = l[i]["id"].clone();
            let t = l[i]["t"].clone();
            l.insert(i + 1, json!({"t": t, "ev": "delivered", "id": id}));
        },
    ),
    // A delivered answer whose caller also reports no answer.
    ("delivered_and_failed", "0001_steady_state.toml", |l| {
        let i = find(l, |v| v["ev"] == "delivered");
        let id = l[i]["id"].clone();
        let j = find(l, |v| v["ev"] == "rpc" && v["id"] == id);
        let (t, from, to) = (l[i]["t"].clone(), l[j]["from"].clone(), l[j]["to"].clone());
        l.insert(
            i + 1,
            json!({"t": t, "ev": "rpc_failed", "id": id, "from": from, "to": to, "error": "timeout"}),
        );
        let end = l.len() - 1;
        let c = l[end]["counters"]["rpc_failures"].as_u64().unwrap();
        l[end]["counters"]["rpc_failures"] = json!(c + 1);
    }),
    // A side effect names a call that did not dispatch it.
    ("ledger_names_another_call", "0001_steady_state.toml", |l| {
        let i = find(l, |v| v["ev"] == "ledger");
        let resolve = find(l, |v| v["ev"] == "rpc" && v["req"]["op"] == "resolve");
        l[i]["rpc"] = l[resolve]["id"].clone();
    }),
    // More reservations live at once than a replica's capacity, between
    // two snapshots: its declared capacity is lowered below the most it
    // held at once by the answers, the snapshots untouched.
    (
        "over_capacity_between_snapshots",
        "0009_capacity_exhaustion_and_scopes.toml",
        |l| {
            let setup = find(l, |v| v["ev"] == "setup");
            for r in l[setup]["replicas"].as_array_mut().unwrap() {
                r["capacity"] = json!(1);
            }
        },
    ),
    // A resolve answered `existing` with a reservation that maintenance
    // released earlier in commit order (LOCK-5): a copy of the call that
    // created it, asked again and answered after the maintenance.
    (
        "existing_after_maintenance_release",
        "0004_replica_crash_mid_action.toml",
        |l| {
            let i = find(l, expiring_maintain);
            let released = l[i]["resp"]["result"]["Ok"]["releases"][0].clone();
            let created = find(l, |v| {
                let a = &v["resp"]["result"]["Ok"]["assignment"];
                reply_of(v, "resolve")
                    && a["identity"]["action"] == released["action"]
                    && a["reservation"]["fence"] == released["fence"]
            });
            let asked = l[created]["id"].clone();
            let rpc = find(l, |v| v["ev"] == "rpc" && v["id"] == asked);
            let id = l.iter().filter_map(|v| v["id"].as_u64()).max().unwrap() + 1;
            let t = l[i]["t"].clone();
            let mut again = l[rpc].clone();
            again["id"] = json!(id);
            again["t"] = t.clone();
            let mut answer = l[created].clone();
            answer["id"] = json!(id);
            answer["t"] = t;
            answer["clock"] = l[i]["clock"].clone();
            answer["resp"]["result"]["Ok"]["kind"] = json!("existing");
            l.insert(i + 1, answer);
            l.insert(i + 1, again);
            let end = l.len() - 1;
            let c = l[end]["counters"]["resolve_existing"].as_u64().unwrap();
            l[end]["counters"]["resolve_existing"] = json!(c + 1);
            unbound(l, "resolve_existing");
        },
    ),
    // One execute performs its side effect twice (`evidence_consistent`).
    ("execute_twice", "0001_steady_state.toml", |l| {
        let i = find(l, |v| v["ev"] == "ledger");
        let again = l[i].clone();
        l.insert(i + 1, again);
        let end = l.len() - 1;
        let c = l[end]["counters"]["executions"].as_u64().unwrap();
        l[end]["counters"]["executions"] = json!(c + 1);
        unbound(l, "executions");
    }),
    // A dispatcher settles `completed` although the execute answer it
    // received said `unknown` (`evidence_consistent`).
    (
        "settle_contradicts_dispatch",
        "0001_steady_state.toml",
        |l| {
            let i = find(l, |v| {
                reply_of(v, "execute")
                    && v["resp"]["execution"] == "completed"
                    && v["lost"] == false
            });
            l[i]["resp"]["execution"] = json!("unknown");
        },
    ),
    // `route_get` answers `reserved` with a fence whose release was
    // answered before the read was sent (`evidence_consistent`).
    (
        "route_get_reserved_after_release",
        "0001_steady_state.toml",
        |l| {
            let i = find(l, releasing_settle);
            let asked = l[i]["id"].clone();
            let rpc = find(l, |v| v["ev"] == "rpc" && v["id"] == asked);
            let assignment = l[rpc]["req"]["params"]["assignment"].clone();
            let (t, caller, registry) = (
                l[i]["t"].clone(),
                l[rpc]["from"].clone(),
                l[rpc]["to"].clone(),
            );
            let id = l.iter().filter_map(|v| v["id"].as_u64()).max().unwrap() + 1;
            let read = json!({"t": t, "ev": "rpc", "id": id, "from": caller, "to": registry,
            "req": {"op": "route_get", "tenant": assignment["identity"]["tenant"],
                    "action": assignment["identity"]["action"]}});
            let answer = json!({"t": t, "ev": "reply", "id": id, "from": registry, "to": caller,
            "resp": {"op": "route_get", "result": {"Ok": {"assignment": assignment,
                     "reserved": true, "last_settlement": null}}},
            "lost": false, "clock": l[i]["clock"]});
            let delivered = json!({"t": t, "ev": "delivered", "id": id});
            l.insert(i + 1, delivered);
            l.insert(i + 1, answer);
            l.insert(i + 1, read);
        },
    ),
    // An answer claims a registry clock the run's clock never read then.
    ("answer_clock_off", "0001_steady_state.toml", |l| {
        let i = find(l, |v| reply_of(v, "resolve"));
        let c = l[i]["clock"].as_u64().unwrap();
        l[i]["clock"] = json!(c + 1);
    }),
];

#[test]
fn every_planted_evidence_defect_makes_check_trace_fail() {
    // spec: SIM-3, EVID-5, EVID-7, EVID-8 (the checkers catch what they exist for)
    let mut missed = Vec::new();
    for (name, file, plant) in DEFECTS {
        let mut lines = clean(file, 1);
        plant(&mut lines);
        let (code, said) = check_trace(name, &lines);
        let first = said.lines().find(|l| l.starts_with("  - ")).unwrap_or("");
        eprintln!("{name}: exit {code:?}; {first}");
        if code != Some(1) {
            missed.push(format!("{name} on {file}: exit {code:?}\n{said}"));
        }
    }
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}

/// The largest call ID in a trace, plus one.
fn next_id(lines: &[Value]) -> u64 {
    lines.iter().filter_map(|v| v["id"].as_u64()).max().unwrap() + 1
}

/// Adds `by` to the end line's counter `name`, and drops its bounds.
fn bump(lines: &mut [Value], name: &str, by: u64) {
    let end = lines.len() - 1;
    let c = lines[end]["counters"][name].as_u64().unwrap();
    lines[end]["counters"][name] = json!(c + by);
    unbound(lines, name);
}

/// One planted evidence defect of a kind the checkers must name: its
/// name, the clean trace it edits, the edit, and the invariant that must
/// report it.
type Named = (
    &'static str,
    &'static str,
    fn(&mut Vec<Value>),
    &'static str,
);

const NAMED: &[Named] = &[
    // EVID-1: maintenance expires a replica at the clock of an applied
    // heartbeat that had just renewed its lease.
    (
        "expiry_at_renewal",
        "0004_replica_crash_mid_action.toml",
        |l| {
            let i = find(l, expiring_maintain);
            let replica = l[i]["resp"]["result"]["Ok"]["expired"][0].clone();
            let beat = (0..i)
                .rev()
                .find(|&k| {
                    l[k]["ev"] == "rpc"
                        && l[k]["req"]["op"] == "heartbeat"
                        && l[k]["req"]["params"]["replica"] == replica
                })
                .expect("the replica heartbeat before it expired");
            let answer = find(l, |v| {
                v["ev"] == "reply" && v["id"] == l[beat]["id"] && v["resp"]["op"] == "heartbeat"
            });
            let id = next_id(l);
            let (t, clock) = (l[i]["t"].clone(), l[i]["clock"].clone());
            let mut call = l[beat].clone();
            call["id"] = json!(id);
            call["t"] = t.clone();
            let mut reply = l[answer].clone();
            reply["id"] = json!(id);
            reply["t"] = t.clone();
            reply["clock"] = clock;
            reply["resp"]["result"] = json!({"Ok": "applied"});
            let delivered = json!({"t": t, "ev": "delivered", "id": id});
            let rpc = find(l, |v| v["ev"] == "rpc" && v["id"] == l[i]["id"]);
            l.insert(i, delivered);
            l.insert(i, reply);
            l.insert(rpc, call);
            bump(l, "heartbeats", 1);
        },
        "lease_respected",
    ),
    // CAT-8: the last page of a paged read leaves out the capability after
    // its cursor, so the read never lists it.
    (
        "continuation_skips_a_capability",
        "0007_publications_during_paged_reads.toml",
        |l| {
            let continued = |l: &[Value], id: &Value| {
                l.iter().any(|v| {
                    v["ev"] == "rpc" && v["id"] == *id && v["req"]["query"]["cursor"].is_string()
                })
            };
            let i = (0..l.len())
                .find(|&i| {
                    let page = &l[i]["resp"]["result"]["Ok"];
                    reply_of(&l[i], "page")
                        && page["next"].is_null()
                        && page["entries"].as_array().is_some_and(|e| !e.is_empty())
                        && continued(l, &l[i]["id"])
                })
                .expect("a paged read ends on a continuation page with entries");
            l[i]["resp"]["result"]["Ok"]["entries"]
                .as_array_mut()
                .unwrap()
                .remove(0);
        },
        "pages_list_all_once",
    ),
    // EVID-2: a host is shown a first page at an older revision than one
    // it had already received.
    (
        "page_older_than_seen",
        "0007_publications_during_paged_reads.toml",
        |l| {
            let first_page = |v: &Value| {
                reply_of(v, "page") && v["resp"]["result"]["Ok"]["revision"].as_u64().is_some()
            };
            // A first page answered at a revision above the setup's, to a
            // host that reads again afterwards.
            let (i, j) = (0..l.len())
                .filter(|&i| first_page(&l[i]))
                .find_map(|i| {
                    let rev = l[i]["resp"]["result"]["Ok"]["revision"].as_u64()?;
                    if rev < 2 {
                        return None;
                    }
                    let host = l[i]["to"].clone();
                    let j = (i + 1..l.len()).find(|&j| {
                        first_page(&l[j]) && l[j]["to"] == host && {
                            let id = l[j]["id"].clone();
                            l.iter().any(|v| {
                                v["ev"] == "rpc"
                                    && v["id"] == id
                                    && v["req"]["query"]["cursor"].is_null()
                            })
                        }
                    })?;
                    Some((i, j))
                })
                .expect("a host reads a first page twice, the first above revision 1");
            let rev = l[i]["resp"]["result"]["Ok"]["revision"].as_u64().unwrap();
            l[j]["resp"]["result"]["Ok"]["revision"] = json!(rev - 1);
        },
        "monotonic_reads",
    ),
    // EVID-3: two `created` answers recorded in an order their fences
    // contradict (the later fence first).
    (
        "created_out_of_order",
        "0002_duplicate_resolve_storm.toml",
        |l| {
            let created = |v: &Value| {
                reply_of(v, "resolve") && v["resp"]["result"]["Ok"]["kind"] == "created"
            };
            let i = find(l, created);
            let j = (i + 1..l.len())
                .find(|&j| created(&l[j]))
                .expect("a second created answer");
            let id = l[j]["id"].clone();
            let r = find(l, |v| v["ev"] == "rpc" && v["id"] == id);
            // The later answer (and its call, if sent after the first
            // answer) moves before the first answer.
            let reply = l.remove(j);
            if r > i {
                let call = l.remove(r);
                l.insert(i, call);
                l.insert(i + 1, reply);
            } else {
                l.insert(i, reply);
            }
        },
        "commit_order",
    ),
    // EVID-4: a dispatcher executes a fence after its own settlement
    // reported it released.
    (
        "execute_after_release",
        "0001_steady_state.toml",
        |l| {
            let i = find(l, releasing_settle);
            let asked = l[i]["id"].clone();
            let rpc = find(l, |v| v["ev"] == "rpc" && v["id"] == asked);
            let fence = l[rpc]["req"]["params"]["assignment"]["reservation"]["fence"].clone();
            let exec = find(l, |v| {
                v["ev"] == "rpc"
                    && v["req"]["op"] == "execute"
                    && v["req"]["assignment"]["reservation"]["fence"] == fence
            });
            let got = find(l, |v| v["ev"] == "delivered" && v["id"] == asked);
            let id = next_id(l);
            let mut call = l[exec].clone();
            call["id"] = json!(id);
            call["t"] = l[got]["t"].clone();
            l.insert(got + 1, call);
        },
        "evidence_consistent",
    ),
    // EVID-6: an execute sent by a host no answer told the fence.
    (
        "dispatch_by_stranger",
        "0001_steady_state.toml",
        |l| {
            let exec = find(l, |v| v["ev"] == "rpc" && v["req"]["op"] == "execute");
            l[exec]["from"] = json!("stranger");
            let id = l[exec]["id"].clone();
            let reply = find(l, |v| v["ev"] == "reply" && v["id"] == id);
            l[reply]["to"] = json!("stranger");
        },
        "dispatch_by_holder",
    ),
    // EVID-9: with a shared action ID, a side effect of a fence starts
    // after a `cancelled` settlement released it (an execute sent before
    // the release, run after it).
    (
        "side_effect_after_cancelled_settlement",
        "0021_dispatcher_crash_reconciliation.toml",
        |l| {
            let i = find(l, |v| {
                releasing_settle(v) && {
                    let id = v["id"].clone();
                    l.iter().any(|r| {
                        r["ev"] == "rpc"
                            && r["id"] == id
                            && r["req"]["params"]["outcome"] == "cancelled"
                    })
                }
            });
            let asked = l[i]["id"].clone();
            let rpc = find(l, |v| v["ev"] == "rpc" && v["id"] == asked);
            let assignment = l[rpc]["req"]["params"]["assignment"].clone();
            let caller = l[rpc]["from"].clone();
            let exec = find(l, |v| v["ev"] == "rpc" && v["req"]["op"] == "execute");
            let ledger = find(l, |v| v["ev"] == "ledger");
            let id = next_id(l);
            let t = l[i]["t"].clone();
            let replica = assignment["destination"]["replica"].clone();
            let host = l
                .iter()
                .find(|v| {
                    v["ev"] == "rpc"
                        && v["req"]["op"] == "execute"
                        && v["req"]["assignment"]["destination"]["replica"] == replica
                })
                .map(|v| v["to"].clone())
                .unwrap_or_else(|| l[exec]["to"].clone());
            let mut call = l[exec].clone();
            call["id"] = json!(id);
            call["t"] = l[rpc]["t"].clone();
            call["from"] = caller;
            call["to"] = host;
            call["req"]["assignment"] = assignment.clone();
            let mut effect = l[ledger].clone();
            effect["t"] = t;
            effect["rpc"] = json!(id);
            effect["action"] = assignment["identity"]["action"].clone();
            effect["tenant"] = assignment["identity"]["tenant"].clone();
            effect["instance"] = assignment["destination"]["instance"].clone();
            effect["account"] = assignment["destination"]["instance"].clone();
            effect["replica"] = replica;
            effect["fence"] = assignment["reservation"]["fence"].clone();
            l.insert(i + 1, effect);
            l.insert(rpc, call);
            bump(l, "executions", 1);
        },
        "evidence_consistent",
    ),
    // PIN-3: a pinned re-reservation on a replica whose lease had ended.
    (
        "reserved_on_ended_lease",
        "0005_draining_pinned_retries.toml",
        |l| {
            let i = find(l, |v| {
                reply_of(v, "resolve") && v["resp"]["result"]["Ok"]["kind"] == "reserved"
            });
            let replica =
                l[i]["resp"]["result"]["Ok"]["assignment"]["destination"]["replica"].clone();
            // The last heartbeat before it gets a TTL of 1 ms, or, with
            // none, its registration answers a lease that ends 1 ms later.
            let beat = (0..i).rev().find(|&k| {
                l[k]["ev"] == "rpc"
                    && l[k]["req"]["op"] == "heartbeat"
                    && l[k]["req"]["params"]["replica"] == replica
            });
            match beat {
                Some(k) => l[k]["req"]["params"]["lease_ttl_ms"] = json!(1),
                None => {
                    let k = (0..i)
                        .rev()
                        .find(|&k| {
                            reply_of(&l[k], "register")
                                && l[k]["resp"]["result"]["Ok"]["spec"]["id"] == replica
                        })
                        .expect("the replica registered before its re-reservation");
                    let clock = l[k]["clock"].as_u64().unwrap();
                    l[k]["resp"]["result"]["Ok"]["lease_expires_at"] = json!(clock + 1);
                }
            }
        },
        "route_eligibility",
    ),
];

#[test]
fn every_kind_of_evidence_defect_is_named_by_its_checker() {
    // spec: EVID-1, EVID-2, EVID-3, EVID-4, EVID-6, EVID-9, PIN-3, CAT-8
    let mut missed = Vec::new();
    for (name, file, plant, invariant) in NAMED {
        let mut lines = clean(file, 1);
        plant(&mut lines);
        let (code, said) = check_trace(name, &lines);
        let named = said
            .lines()
            .any(|l| l.starts_with("  - ") && l.contains(invariant));
        eprintln!("{name}: exit {code:?}; names {invariant}: {named}");
        if code != Some(1) || !named {
            missed.push(format!(
                "{name} on {file}: exit {code:?}, expected {invariant}\n{said}"
            ));
        }
    }
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}
