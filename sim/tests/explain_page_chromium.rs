//! Goal: the page `explain --html` writes renders in a real browser: a
//! planted bug's page, loaded from disk in headless Chromium, runs its
//! script without a console error and shows the violation.
//!
//! Chromium is required: without it this test fails and says how to
//! install it (Debian: `apt-get install -y chromium`); it never passes by
//! skipping. Set `CHROMIUM` to use another binary.

use std::path::{Path, PathBuf};
use std::process::Command;

fn chromium() -> PathBuf {
    if let Ok(given) = std::env::var("CHROMIUM") {
        return PathBuf::from(given);
    }
    for name in [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {name}")])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
        if let Some(path) = found.filter(|p| !p.is_empty()) {
            return PathBuf::from(path);
        }
    }
    panic!(
        "this test needs Chromium to load the explain page and none was found: \
         install it (Debian/Ubuntu: `apt-get install -y chromium`) or set CHROMIUM=/path/to/chrome"
    );
}

fn sim(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_connreg-sim"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the connreg-sim binary runs")
}

#[test]
fn the_page_of_a_planted_bug_renders_in_chromium_without_console_errors() {
    let browser = chromium();
    let dir = std::env::temp_dir().join(format!("connreg-sim-chromium-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("failover.trace.jsonl");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let run = sim(
        &root,
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
    assert_eq!(run.status.code(), Some(1), "the planted bug was not caught");
    let page = dir.join("failover.html");
    let explain = sim(
        &dir,
        &[
            "explain",
            trace.to_str().unwrap(),
            "--html",
            page.to_str().unwrap(),
        ],
    );
    assert_eq!(explain.status.code(), Some(0));
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    let out = Command::new(&browser)
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--disable-extensions",
            "--enable-logging=stderr",
            "--v=0",
            &format!("--user-data-dir={}", dir.join("profile").display()),
            "--virtual-time-budget=5000",
            "--dump-dom",
            &url,
        ])
        .output()
        .unwrap_or_else(|e| panic!("{} did not run: {e}", browser.display()));
    let dom = String::from_utf8_lossy(&out.stdout);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "chromium failed: {log}");
    // The script ran to its end and drew the chart and the violation.
    assert!(
        dom.contains("data-rendered=\"done\""),
        "the script did not finish:\n{log}"
    );
    assert!(dom.contains("data-rendered=\"chart\""), "no chart:\n{log}");
    assert!(
        dom.contains("data-rendered=\"violation\"") && dom.contains("VIOLATION no_silent_failover"),
        "the violation is not shown:\n{log}"
    );
    assert!(
        dom.contains("data-rendered=\"violation-marker\""),
        "no violation marker on the chart"
    );
    // No console output at all: the page logs nothing, and Chromium logs
    // every console message, uncaught exception and blocked load as a
    // `CONSOLE` line on stderr (`console.error("x")` prints
    // `INFO:CONSOLE:1] "x"`, with no level to filter on).
    let errors: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.contains(":CONSOLE")
                || l.contains("Uncaught")
                || l.contains("Content Security Policy")
        })
        .collect();
    assert!(errors.is_empty(), "console errors:\n{}", errors.join("\n"));
    std::fs::remove_dir_all(&dir).ok();
}
