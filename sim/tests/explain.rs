//! Goal: from a red seed to the interleaving in minutes. A failing run
//! prints every violation (or how many more and where), each pointing at
//! its time, trace lines, calls and actions; the trace keeps them all and
//! records what made it; `explain` tells the failing actions' story and
//! draws a page; `run --replay` runs a trace again and warns when the
//! scenario file changed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn sim_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_connreg-sim"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the connreg-sim binary runs")
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("connreg-sim-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Seed 1 of 0004 with `failover-on-retry`: the example.
fn failing_trace(dir: &Path) -> (PathBuf, String) {
    let trace = dir.join("failover.trace.jsonl");
    let out = sim_in(
        &root(),
        &[
            "run",
            "--scenario",
            "scenarios/0004_replica_crash_mid_action.toml",
            "--seed",
            "1",
            "--plant",
            "failover-on-retry",
            "--trace",
            trace.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    (trace, text(&out))
}

#[test]
fn a_failing_run_points_every_violation_at_its_time_lines_and_actions() {
    let dir = scratch("points");
    let (trace, stdout) = failing_trace(&dir);
    let records = lines(&trace);
    let end = records.last().unwrap();
    let total = end["violations"].as_u64().unwrap();
    let violations: Vec<&serde_json::Value> =
        records.iter().filter(|r| r["ev"] == "violation").collect();
    assert!(total > 0);
    // The trace keeps every violation, and says so.
    assert_eq!(violations.len() as u64, total);
    assert_eq!(end["violations_recorded"].as_u64(), Some(total));
    for v in &violations {
        let pointed = v["lines"].as_array().unwrap();
        // An expectation judges counters at the end: no event to point at.
        if v["invariant"] == "expectation" {
            continue;
        }
        assert!(!pointed.is_empty(), "{v}");
        let first = pointed[0].as_u64().unwrap() as usize;
        let evidence = &records[first - 1];
        assert_eq!(evidence["t"], v["at_ms"], "{v} points at {evidence}");
        assert!(
            !["violation", "check", "end", "start"].contains(&evidence["ev"].as_str().unwrap()),
            "{v} points at {evidence}"
        );
    }
    let failover = violations
        .iter()
        .find(|v| v["invariant"] == "no_silent_failover")
        .expect("failover-on-retry breaks no_silent_failover");
    let action = failover["actions"][0]
        .as_str()
        .expect("it names its action");
    let line = failover["lines"][0].as_u64().unwrap() as usize;
    assert!(
        records[line - 1].to_string().contains(action),
        "the evidence line does not name {action}"
    );
    // `run` prints every violation, or the count and where the rest are.
    let printed = stdout.lines().filter(|l| l.starts_with("  - ")).count() as u64;
    assert!(
        printed == total || stdout.contains("more not shown"),
        "{stdout}"
    );
    assert!(stdout.contains(" ms, trace lines "), "{stdout}");
    assert!(stdout.contains("explain: connreg-sim explain "), "{stdout}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_start_line_records_version_revision_scenario_hash_and_swarm_draws() {
    let dir = scratch("provenance");
    let trace = dir.join("swarm.trace.jsonl");
    let out = sim_in(
        &root(),
        &[
            "run",
            "--scenario",
            "scenarios/0001_steady_state.toml",
            "--seed",
            "3",
            "--swarm",
            "--trace",
            trace.to_str().unwrap(),
        ],
    );
    assert!(out.status.code().is_some_and(|c| c <= 1), "{}", text(&out));
    let start = &lines(&trace)[0];
    assert_eq!(start["format"], connreg_sim::trace::TRACE_FORMAT);
    assert_eq!(start["version"], env!("CARGO_PKG_VERSION"));
    assert!(start["revision"].as_str().is_some_and(|r| !r.is_empty()));
    assert_eq!(start["scenario_file"], "0001_steady_state.toml");
    let bytes = std::fs::read(root().join("scenarios/0001_steady_state.toml")).unwrap();
    let source =
        connreg_sim::scenario::ScenarioSource::of("x", std::str::from_utf8(&bytes).unwrap());
    assert_eq!(start["scenario_sha256"], source.sha256.as_str());
    assert_eq!(source.sha256.len(), 64);
    let draws = start["swarm_draws"].as_object().expect("swarm draws");
    for key in [
        "workload.concurrency",
        "chaos.partitions",
        "lifecycle.lease_ttl_ms",
    ] {
        assert!(draws.contains_key(key), "{key} missing from {draws:?}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn explain_tells_the_story_of_the_first_violations_actions() {
    let dir = scratch("story");
    let (trace, _) = failing_trace(&dir);
    let page = dir.join("failover.html");
    let out = sim_in(
        &std::env::temp_dir(),
        &[
            "explain",
            trace.to_str().unwrap(),
            "--html",
            page.to_str().unwrap(),
        ],
    );
    let story = text(&out);
    assert_eq!(out.status.code(), Some(0), "{story}");
    assert!(story.contains("story of "), "{story}");
    let marked: Vec<&str> = story.lines().filter(|l| l.starts_with("!!")).collect();
    assert!(
        marked
            .iter()
            .any(|l| l.contains("VIOLATION no_silent_failover")),
        "{story}"
    );
    assert!(story.lines().any(|l| l.starts_with("<-")), "{story}");
    assert!(story.contains("calls registry-"), "{story}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(!html.contains("<script src") && !html.contains("<link"));
    // An action that is not in the trace: a story with no event of it.
    let other = sim_in(
        &root(),
        &[
            "explain",
            trace.to_str().unwrap(),
            "--action",
            "no-such-action",
        ],
    );
    assert_eq!(other.status.code(), Some(0));
    assert!(text(&other).contains("no event names no-such-action"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn explain_refuses_what_is_not_a_trace() {
    let dir = scratch("explain-bad");
    let empty = dir.join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let out = sim_in(&dir, &["explain", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let missing = sim_in(&dir, &["explain", "nope.jsonl"]);
    assert_eq!(missing.status.code(), Some(2));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn trace_text_cannot_inject_markup_into_the_page() {
    let dir = scratch("inject");
    let (trace, _) = failing_trace(&dir);
    let hostile = "</script><img src=x onerror=alert(1)>&amp;\u{2028}";
    let edited: String = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .map(|l| {
            if l.contains("\"ev\":\"violation\"") {
                let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                v["detail"] = hostile.into();
                v["invariant"] = "<b>bold</b>".into();
                format!("{v}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    std::fs::write(&trace, edited).unwrap();
    let page = dir.join("p.html");
    let out = sim_in(
        &dir,
        &[
            "explain",
            trace.to_str().unwrap(),
            "--html",
            page.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        !html.contains("<img"),
        "trace text reached the page as markup"
    );
    assert!(
        !html.contains("<b>bold"),
        "trace text reached the page as markup"
    );
    assert_eq!(
        html.matches("</script>").count(),
        2,
        "a trace string closed a script element"
    );
    assert!(html.contains("\\u003c/script\\u003e\\u003cimg"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_page_draws_at_most_its_bound_and_says_so() {
    let dir = scratch("bound");
    let (trace, _) = failing_trace(&dir);
    let story = connreg_sim::explain::read(std::io::BufReader::new(
        std::fs::File::open(&trace).unwrap(),
    ))
    .unwrap();
    let focus = connreg_sim::explain::focus(&story, &[]);
    let html = connreg_sim::explain::html::page_bounded(&story, &focus, "t", 50);
    let json_start = html.find("id=\"trace-data\">").unwrap() + "id=\"trace-data\">".len();
    let json_end = json_start + html[json_start..].find("</script>").unwrap();
    let data: serde_json::Value = serde_json::from_str(&html[json_start..json_end]).unwrap();
    assert_eq!(data["drawn"], 50);
    assert!(data["total"].as_u64().unwrap() > 50);
    assert_eq!(data["items"].as_array().unwrap().len(), 50);
    // The violations and the followed action's events are drawn first.
    let items = data["items"].as_array().unwrap();
    assert!(items.iter().any(|i| i["kind"] == "violation"));
    assert!(items.iter().any(|i| i["action"] == focus[0].as_str()));
    assert!(html.contains("the page draws at most"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn replay_reproduces_a_trace_and_warns_when_the_scenario_file_changed() {
    let dir = scratch("replay");
    let scenario = dir.join("0004_copy.toml");
    std::fs::copy(
        root().join("scenarios/0004_replica_crash_mid_action.toml"),
        &scenario,
    )
    .unwrap();
    let trace = dir.join("made.trace.jsonl");
    let made = sim_in(
        &dir,
        &[
            "run",
            "--scenario",
            scenario.to_str().unwrap(),
            "--seed",
            "2",
            "--trace",
            trace.to_str().unwrap(),
        ],
    );
    assert_eq!(made.status.code(), Some(0), "{}", text(&made));
    let replay = |extra: &[&str]| {
        let mut args = vec!["run", "--replay", trace.to_str().unwrap()];
        args.extend_from_slice(extra);
        sim_in(&dir, &args)
    };
    let same = replay(&["--scenario", scenario.to_str().unwrap()]);
    assert!(
        text(&same).contains("identical to the recorded one"),
        "{}",
        text(&same)
    );
    assert!(!String::from_utf8_lossy(&same.stderr).contains("warning"));
    let mut edited = std::fs::read_to_string(&scenario).unwrap();
    edited.push_str("\n# edited after the trace was made\n");
    std::fs::write(&scenario, edited).unwrap();
    let changed = replay(&["--scenario", scenario.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&changed.stderr);
    assert!(err.contains("warning: the scenario file differs"), "{err}");
    // A trace of a file not in scenarios/ needs --scenario.
    let lost = replay(&[]);
    assert_eq!(lost.status.code(), Some(2));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_story_includes_other_hosts_answers_that_changed_the_actions_fate() {
    // spec: SIM-5
    // A publication answered while the followed action runs is part of its
    // story (marked `~~`); one answered while no followed action runs is
    // not.
    let dir = scratch("causes");
    let trace = dir.join("binding.trace.jsonl");
    let out = sim_in(
        &root(),
        &[
            "run",
            "--scenario",
            "scenarios/0008_binding_disabled_mid_run.toml",
            "--seed",
            "1",
            "--trace",
            trace.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let records = lines(&trace);
    let publish_calls: Vec<u64> = records
        .iter()
        .filter(|r| r["ev"] == "rpc" && r["req"]["op"] == "publish")
        .map(|r| r["id"].as_u64().unwrap())
        .collect();
    let published: Vec<u64> = records
        .iter()
        .filter(|r| {
            r["ev"] == "reply"
                && publish_calls.contains(&r["id"].as_u64().unwrap())
                && r["resp"]["result"].get("Ok").is_some()
        })
        .map(|r| r["t"].as_u64().unwrap())
        .collect();
    let at = *published.first().expect("0008 publishes");
    // An action that started before the publication and ended after it,
    // and one that ended before it.
    let span = |ev: &str, a: &str| {
        records
            .iter()
            .find(|r| r["ev"] == ev && r["action"] == a)
            .and_then(|r| r["t"].as_u64())
    };
    let actions: Vec<String> = records
        .iter()
        .filter(|r| r["ev"] == "action_start")
        .map(|r| r["action"].as_str().unwrap().to_string())
        .collect();
    let across = actions
        .iter()
        .find(|a| span("action_start", a) < Some(at) && span("action_end", a) > Some(at))
        .expect("an action runs across the publication");
    let before = actions
        .iter()
        .find(|a| span("action_end", a).is_some_and(|end| end < at))
        .expect("an action ends before the publication");
    let story = text(&sim_in(
        &root(),
        &["explain", trace.to_str().unwrap(), "--action", across],
    ));
    assert!(
        story
            .lines()
            .any(|l| l.starts_with("~~") && l.contains("to publish")),
        "{story}"
    );
    let story = text(&sim_in(
        &root(),
        &["explain", trace.to_str().unwrap(), "--action", before],
    ));
    assert!(!story.contains("to publish"), "{story}");
    std::fs::remove_dir_all(&dir).ok();
}
