//! Goal: the `connreg-router` binary resolves and reports readiness in the
//! mode it is given, with its documented exit codes, and every command in
//! the README runs as written (DIR-2, DIR-4, DIR-7).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_connreg-router");
const README_PREFIX: &str = "cargo run -q -p connreg-directory --bin connreg-router -- ";

/// The workspace root, where the README's commands are run from.
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate is inside the workspace")
        .to_path_buf()
}

fn router(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(workspace_root())
        .output()
        .expect("the binary runs")
}

const DIRECTORY: &str = "directory/examples/router-instance-directory.v1.json";
const TARGET: &str = "directory/examples/release-target.json";
const SEARCH_TARGET: &str = "directory/examples/release-target-search.json";

fn stdout_json(output: &Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout).expect("resolve prints JSON")
}

// spec: DIR-2
#[test]
fn direct_mode_resolves_to_the_canonical_endpoint() {
    let output = router(&["--mode", "direct", "--target", TARGET, "resolve"]);
    assert_eq!(output.status.code(), Some(0));
    let json = stdout_json(&output);
    assert_eq!(
        json["destination"]["address"],
        "billing-agent.agents.example"
    );
    assert_eq!(json["destination"]["port"], 443);
    assert_eq!(json["route"]["kind"], "direct");
}

// spec: DIR-4
#[test]
fn file_mode_resolves_to_the_one_ready_instance() {
    let output = router(&[
        "--mode",
        "config_center_file",
        "--directory",
        DIRECTORY,
        "--target",
        TARGET,
        "resolve",
    ]);
    assert_eq!(output.status.code(), Some(0));
    let json = stdout_json(&output);
    assert_eq!(json["destination"]["address"], "10.0.4.17");
    assert_eq!(json["destination"]["port"], 8080);
    assert_eq!(json["route"]["instance_id"], "billing-agent-a");
    assert_eq!(
        json["target"]["release"]["credential_audience"],
        "https://billing-agent.agents.example"
    );
}

// spec: DIR-4
#[test]
fn several_ready_instances_are_a_dependency_failure() {
    let output = router(&[
        "--mode",
        "config_center_file",
        "--directory",
        DIRECTORY,
        "--target",
        SEARCH_TARGET,
        "resolve",
    ]);
    assert_eq!(output.status.code(), Some(3));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("2 ready tcp endpoints"), "{stderr}");
}

// spec: DIR-7
#[test]
fn ready_prints_ok_for_a_valid_document() {
    let output = router(&[
        "--mode",
        "config_center_file",
        "--directory",
        DIRECTORY,
        "ready",
    ]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(output.stdout, b"ok\n");
}

// spec: DIR-7
#[test]
fn file_mode_refuses_to_start_without_a_valid_document() {
    let dir = tempfile::tempdir().unwrap();
    let malformed = dir.path().join("directory.json");
    std::fs::write(
        &malformed,
        "{\"version\": \"router-instance-directory.v1\"}",
    )
    .unwrap();
    for directory in [
        dir.path().join("absent.json"),
        malformed,
        dir.path().to_path_buf(),
    ] {
        let output = router(&[
            "--mode",
            "config_center_file",
            "--directory",
            directory.to_str().unwrap(),
            "ready",
        ]);
        assert_eq!(output.status.code(), Some(2), "{}", directory.display());
        assert!(output.stdout.is_empty());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("refused to start"), "{stderr}");
    }
}

// spec: DIR-2
#[test]
fn contradictory_or_unknown_modes_are_bad_input() {
    let cases: [&[&str]; 5] = [
        &["--mode", "Direct", "ready"],
        &["--mode", "file", "ready"],
        &["--mode", "direct", "--directory", DIRECTORY, "ready"],
        &["--mode", "direct", "--port-name", "invoke", "ready"],
        &["--mode", "config_center_file", "ready"],
    ];
    for args in cases {
        let output = router(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(output.stdout.is_empty(), "{args:?}");
    }
    let output = router(&["ready"]);
    assert_eq!(output.status.code(), Some(2), "the mode is required");
}

#[test]
fn target_files_are_required_by_resolve_and_refused_by_ready() {
    let output = router(&["--mode", "direct", "resolve"]);
    assert_eq!(output.status.code(), Some(2));
    let output = router(&["--mode", "direct", "--target", TARGET, "ready"]);
    assert_eq!(output.status.code(), Some(2));
    let output = router(&["--mode", "direct", "--target", DIRECTORY, "resolve"]);
    assert_eq!(output.status.code(), Some(2), "a directory is not a target");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("invalid target file"), "{stderr}");
}

#[test]
fn help_lists_the_exit_codes() {
    let output = router(&["--help"]);
    assert_eq!(output.status.code(), Some(0));
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(help.contains("Exit codes:"), "{help}");
}

#[test]
fn every_readme_command_exits_as_documented() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("the README exists");
    let mut checked = 0;
    for line in readme
        .lines()
        .filter(|line| line.starts_with(README_PREFIX))
    {
        let (command, comment) = line
            .split_once("# exits ")
            .unwrap_or_else(|| panic!("README command without '# exits N': {line}"));
        let expected: i32 = comment.trim().parse().expect("an exit code");
        let args: Vec<&str> = command[README_PREFIX.len()..].split_whitespace().collect();
        let output = router(&args);
        assert_eq!(
            output.status.code(),
            Some(expected),
            "{line}\nstderr: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} README commands found");
}
