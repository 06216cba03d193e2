//! Goal: a sweep fits CI. More worker threads report exactly what one
//! does; shards split a seed range disjointly and completely; the JUnit
//! and JSON reports list every seed and every failure with its repro
//! command; --fail-fast stops at the first failing seed; --keep-traces
//! keeps the failing seeds' traces and no others; Ctrl-C writes the
//! partial reports and exits 130; bad flags exit 2.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_connreg-sim"))
        .args(args)
        .current_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."))
        .output()
        .expect("the connreg-sim binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("connreg-sim-sweep-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The seeds a JUnit report has a test case for, checking it is valid XML
/// on the way (the `reach PROBE` cases of required probes are not seeds).
fn junit_seeds(path: &Path) -> Vec<u64> {
    let text = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    doc.descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .filter_map(|n| {
            let name = n.attribute("name").unwrap();
            if name.starts_with("reach ") {
                return None;
            }
            Some(name.strip_prefix("seed ").unwrap().parse().unwrap())
        })
        .collect()
}

/// Standard output without the one line that says how long it took.
fn without_timing(text: &str, dir: &Path) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("took "))
        .map(|l| l.replace(dir.to_str().unwrap(), "DIR"))
        .collect::<Vec<_>>()
        .join("\n")
}

const PLANTED: [&str; 6] = [
    "--scenario",
    "scenarios/0003_retry_after_lost_answer.toml",
    "--plant",
    "double-release",
    "--seeds",
    "1..=12",
];

#[test]
fn two_jobs_report_exactly_what_one_job_reports() {
    let dir = scratch("jobs");
    let mut runs = Vec::new();
    for jobs in ["1", "2"] {
        let j = dir.join(format!("jobs{jobs}.json"));
        let x = dir.join(format!("jobs{jobs}.xml"));
        let mut args = vec!["sweep"];
        args.extend(PLANTED);
        args.extend(["--jobs", jobs, "--json", j.to_str().unwrap()]);
        args.extend(["--junit", x.to_str().unwrap()]);
        let out = sim(&args);
        let mut summary = json(&j);
        let timing = summary.as_object_mut().unwrap().remove("timing").unwrap();
        assert_eq!(timing["jobs"], jobs.parse::<u64>().unwrap());
        let seeds = junit_seeds(&x);
        let text = without_timing(&stdout(&out), &dir).replace(&format!("jobs{jobs}"), "jobsN");
        runs.push((out.status.code(), text, summary, seeds));
    }
    let (one, two) = (&runs[0], &runs[1]);
    assert_eq!(one.0, Some(1), "{}", one.1);
    assert_eq!(one.0, two.0);
    assert_eq!(one.1, two.1);
    assert_eq!(one.2, two.2);
    assert_eq!(one.3, two.3);
    assert_eq!(one.3, (1..=12).collect::<Vec<u64>>());
    // The planted bug fails some seeds: each is in the summary with the
    // invariant, the trace hash and the command that reproduces it.
    let failures = one.2["failures"].as_array().unwrap();
    assert!(!failures.is_empty());
    assert_eq!(one.2["failed"], failures.len());
    for f in failures {
        assert_eq!(f["invariant"], "idempotent_settlement");
        assert_eq!(f["trace_hash"].as_str().unwrap().len(), 32);
        let seed = f["seed"].as_u64().unwrap();
        assert!(
            f["repro"]
                .as_str()
                .unwrap()
                .contains(&format!("--seed {seed} --plant double-release")),
            "{f}"
        );
    }
    let sha = one.2["inputs"]["sha256"].as_str().unwrap();
    assert_eq!(sha.len(), 64);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn two_shards_list_every_seed_exactly_once() {
    let dir = scratch("shards");
    let mut all = Vec::new();
    for shard in ["1/2", "2/2"] {
        let x = dir.join(format!("shard{}.xml", &shard[..1]));
        let out = sim(&[
            "sweep",
            "--scenario",
            "scenarios/0001_steady_state.toml",
            "--seeds",
            "1..=15",
            "--shard",
            shard,
            "--jobs",
            "2",
            "--junit",
            x.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
        assert!(stdout(&out).contains(&format!("shard {shard}")));
        all.extend(junit_seeds(&x));
    }
    let distinct: BTreeSet<u64> = all.iter().copied().collect();
    assert_eq!(distinct.len(), all.len(), "a seed in both shards: {all:?}");
    assert_eq!(distinct, (1..=15).collect());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn fail_fast_stops_at_the_first_failing_seed() {
    let dir = scratch("failfast");
    let full = dir.join("full.json");
    let fast = dir.join("fast.json");
    let mut args = vec!["sweep"];
    args.extend(PLANTED);
    let mut a = args.clone();
    a.extend(["--json", full.to_str().unwrap()]);
    sim(&a);
    let mut b = args.clone();
    b.extend([
        "--jobs",
        "2",
        "--fail-fast",
        "--json",
        fast.to_str().unwrap(),
    ]);
    let out = sim(&b);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains("--fail-fast"), "{}", stdout(&out));
    let (full, fast) = (json(&full), json(&fast));
    let first = full["failures"][0]["seed"].as_u64().unwrap();
    assert_eq!(fast["ended"], "fail_fast");
    assert_eq!(fast["failures"].as_array().unwrap().len(), 1);
    assert_eq!(fast["failures"][0]["seed"], first);
    let last = fast["completed"].as_array().unwrap().last().unwrap()["seed"].as_u64();
    assert_eq!(last, Some(first));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn ctrl_c_writes_the_partial_reports_and_exits_130() {
    let dir = scratch("interrupt");
    let j = dir.join("partial.json");
    let x = dir.join("partial.xml");
    let child = Command::new(env!("CARGO_BIN_EXE_connreg-sim"))
        .args([
            "sweep",
            "--scenario",
            "scenarios/0001_steady_state.toml",
            "--seeds",
            "1..100000",
            "--jobs",
            "2",
            "--json",
            j.to_str().unwrap(),
            "--junit",
            x.to_str().unwrap(),
        ])
        .current_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Real time, outside any run: let the sweep get going.
    #[allow(clippy::disallowed_methods)]
    std::thread::sleep(std::time::Duration::from_secs(3));
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(130), "{text}");
    assert!(text.contains("interrupted"), "{text}");
    let summary = json(&j);
    assert_eq!(summary["ended"], "interrupted");
    let done = summary["seeds_completed"].as_u64().unwrap();
    assert!(done < 99_999);
    assert_eq!(summary["completed"].as_array().unwrap().len() as u64, done);
    assert_eq!(junit_seeds(&x).len() as u64, done);
    // A sweep this long estimates its duration once a few seeds ran.
    let said = String::from_utf8_lossy(&out.stderr);
    if done >= connreg_sim::limits::SWEEP_ESTIMATE_SAMPLE_SEEDS {
        assert!(said.contains("in all"), "{said}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_sweep_flags_exit_2_and_say_why() {
    let base = [
        "sweep",
        "--scenario",
        "scenarios/0001_steady_state.toml",
        "--seeds",
        "1..3",
    ];
    for (flags, said) in [
        (vec!["--shard", "3/2"], "shard \"3/2\""),
        (vec!["--shard", "0/2"], "shard \"0/2\""),
        (vec!["--shard", "half"], "expected I/N"),
        (vec!["--jobs", "0"], "jobs 0"),
        (vec!["--jobs", "65"], "jobs 65"),
    ] {
        let mut args = base.to_vec();
        args.extend(flags.iter().copied());
        let out = sim(&args);
        assert_eq!(out.status.code(), Some(2), "{flags:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(said), "{flags:?}: {err}");
    }
}

#[test]
fn junit_escapes_what_a_failure_says() {
    // The planted bug's violation details quote identifiers; whatever they
    // hold, the report parses and carries the repro command.
    let dir = scratch("junit");
    let x = dir.join("r.xml");
    let mut args = vec!["sweep"];
    args.extend(PLANTED);
    args.extend(["--junit", x.to_str().unwrap()]);
    sim(&args);
    let text = std::fs::read_to_string(&x).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    // The seeds' failures; a required probe the plant keeps from firing
    // fails its own `reach` case, type `unreached`.
    let failures: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("failure"))
        .filter(|n| n.attribute("type") != Some("unreached"))
        .collect();
    assert!(!failures.is_empty());
    for f in failures {
        assert_eq!(f.attribute("type"), Some("idempotent_settlement"));
        let message = f.attribute("message").unwrap();
        assert!(
            message.contains("reproduce: cargo run --manifest-path ")
                && message.contains(" -p connreg-sim --release -- run --scenario "),
            "{message}"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn keep_traces_keeps_the_trace_of_every_failing_seed_and_no_other() {
    // spec: SIM-2
    // A PostgreSQL run is not byte-deterministic: its failing seed may
    // not fail again, so the sweep keeps what it saw.
    let dir = scratch("keep");
    let traces = dir.join("traces");
    let j = dir.join("summary.json");
    let listed = || -> BTreeSet<String> {
        (std::fs::read_dir(&traces).unwrap())
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect()
    };
    // Passing seeds leave nothing.
    let clean = sim(&[
        "sweep",
        "--scenario",
        "scenarios/0003_retry_after_lost_answer.toml",
        "--seeds",
        "1..=3",
        "--keep-traces",
        traces.to_str().unwrap(),
    ]);
    assert_eq!(clean.status.code(), Some(0), "{}", stdout(&clean));
    assert!(listed().is_empty(), "{:?}", listed());
    let mut args = vec!["sweep"];
    args.extend(PLANTED);
    args.extend(["--jobs", "2", "--json", j.to_str().unwrap()]);
    args.extend(["--keep-traces", traces.to_str().unwrap()]);
    let out = sim(&args);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let summary = json(&j);
    let failed: BTreeSet<String> = (summary["failures"].as_array().unwrap().iter())
        .map(|f| format!("seed-{}.trace.jsonl", f["seed"]))
        .collect();
    assert!(!failed.is_empty());
    assert_eq!(listed(), failed);
    assert!(
        stdout(&out).contains(traces.to_str().unwrap()),
        "{}",
        stdout(&out)
    );
    // Each is the trace the summary hashed, and judging it again finds the
    // planted bug.
    for f in summary["failures"].as_array().unwrap() {
        let path = traces.join(format!("seed-{}.trace.jsonl", f["seed"]));
        let bytes = std::fs::read(&path).unwrap();
        use md5::{Digest, Md5};
        let hash: String = Md5::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(f["trace_hash"], hash);
        let again = sim(&["check-trace", path.to_str().unwrap()]);
        assert_eq!(again.status.code(), Some(1), "{}", stdout(&again));
    }
    std::fs::remove_dir_all(&dir).ok();
}
