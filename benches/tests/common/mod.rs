//! Running `connreg-qualify` as a process, and contract files to feed it.

#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

/// The shipped smoke contract.
pub fn smoke_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("environments/smoke.toml")
}

/// The smoke contract's text.
pub fn smoke_text() -> String {
    std::fs::read_to_string(smoke_path()).expect("the smoke contract is readable")
}

/// A fresh path in the test scratch folder, named after `stem`.
pub fn scratch(stem: &str, ext: &str) -> PathBuf {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("qualify-{stem}-{}-{n}.{ext}", std::process::id()))
}

/// Writes `text` to a fresh contract file.
pub fn contract_file(stem: &str, text: &str) -> PathBuf {
    let path = scratch(stem, "toml");
    std::fs::write(&path, text).expect("the scratch folder is writable");
    path
}

/// What one run of the binary did.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub report: Option<serde_json::Value>,
}

impl Run {
    /// Everything it said, for assertion messages.
    pub fn said(&self) -> String {
        format!(
            "exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs `connreg-qualify --env <env> --report <fresh file> <extra…>`.
pub fn qualify(env: &std::path::Path, extra: &[&str]) -> Run {
    let report = scratch("report", "json");
    let _ = std::fs::remove_file(&report);
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(env!("CARGO_BIN_EXE_connreg-qualify"))
        .arg("--env")
        .arg(env)
        .arg("--report")
        .arg(&report)
        .args(extra)
        .output()
        .expect("connreg-qualify starts");
    let report = std::fs::read_to_string(&report)
        .ok()
        .filter(|t| !t.is_empty())
        .map(|t| serde_json::from_str(&t).expect("the report is JSON"));
    Run {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        report,
    }
}

/// The threshold named `name` in a report.
pub fn threshold<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["thresholds"]
        .as_array()
        .expect("thresholds are a list")
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("the report has threshold {name}"))
}
