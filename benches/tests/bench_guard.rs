//! Goal: the regression guard CI runs (`connreg-bench-guard`) fails when
//! an in-memory figure is more than 30 % worse than recorded in
//! benches/README.md, and refuses a README without its recorded figures.
//! The figures are ratios of timings taken side by side; these tests
//! assert only verdicts no machine's speed can turn: a figure recorded at
//! a small fraction of any resolve's cost fails, bad input exits 2.

mod common;

use std::process::{Command, Output};

use common::scratch;

/// Runs the guard with small, fast settings and `rounds` against `readme`.
fn guard(readme: &str, rounds: &str) -> Output {
    let path = scratch("guard-readme", "md");
    std::fs::write(&path, readme).unwrap();
    Command::new(env!("CARGO_BIN_EXE_connreg-bench-guard"))
        .arg("--readme")
        .arg(&path)
        .args(["--rounds", rounds, "--batch", "300", "--large", "2000"])
        .output()
        .expect("connreg-bench-guard starts")
}

fn section(rows: &str) -> String {
    format!(
        "# benches\n\n### Regression guard\n\n| figure | recorded | better |\n|---|---|---|\n{rows}\n### Next\n"
    )
}

#[test]
fn a_figure_far_worse_than_recorded_fails_the_guard_and_is_named() {
    // A resolve costing a hundredth of one ordered-map insert: no build
    // of this registry measures that, so the guard must fail on it.
    let run = guard(
        &section(
            "| `memory_flat_100k_vs_1k` | 1000 | lower |\n\
             | `memory_resolve_vs_reference` | 0.01 | lower |\n\
             | `memory_settle_vs_reference` | 1000 | lower |\n",
        ),
        "1",
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("GUARD memory_resolve_vs_reference") && stdout.contains("ok=no"),
        "{stdout}"
    );
    assert!(
        stdout.contains("GUARD memory_settle_vs_reference"),
        "{stdout}"
    );
    assert!(stderr.contains("memory_resolve_vs_reference"), "{stderr}");
    assert!(!stderr.contains("memory_settle_vs_reference"), "{stderr}");
}

#[test]
fn the_shipped_readme_records_every_figure_the_guard_measures() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let recorded = connreg_benches::guard::recorded(&readme).expect("recorded figures");
    let names: Vec<&str> = recorded.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "memory_flat_100k_vs_1k",
            "memory_resolve_vs_reference",
            "memory_settle_vs_reference"
        ]
    );
}

#[test]
fn bad_input_exits_2_with_the_reason() {
    for (readme, rounds, why) in [
        ("# no section\n".to_string(), "1", "Regression guard"),
        (
            section("| `memory_made_up` | 1 | lower |\n"),
            "1",
            "does not measure",
        ),
        (
            section("| `memory_flat_100k_vs_1k` | 1 | sideways |\n"),
            "1",
            "lower or higher",
        ),
        (
            section("| `memory_flat_100k_vs_1k` | 1 | lower |\n"),
            "0",
            "--rounds 0 must be 1 to",
        ),
    ] {
        let run = guard(&readme, rounds);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{why}: {stderr}");
        assert!(stderr.contains(why), "{why}: {stderr}");
    }
}
