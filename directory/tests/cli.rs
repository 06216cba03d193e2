//! Goal: the `connreg-router` binary resolves and reports readiness in the
//! mode it is given, with its documented exit codes: usage errors alone
//! exit 2, a directory that fails the invocation (missing, unreadable, not a
//! regular file, malformed, unmatched, zero or two ready endpoints) exits 3
//! and `ready` prints `not_ready`, a rejected selection exits 4; and every
//! command in the README runs as written (DIR-2, DIR-3, DIR-4, DIR-5,
//! DIR-7).

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{InstanceOptions, billing_document, to_bytes};
use connreg_directory::{
    Address, ImmutableField, Selection, SelectionError, SelectionRequest, Selector,
    SingleReadyEndpoint, cli,
};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_connreg-router");
const README_PREFIX: &str = "cargo run -q -p connreg-directory --bin connreg-router -- ";

/// How long one run of the binary may take before the test calls it hung.
const RUN_WAIT: Duration = Duration::from_secs(30);

/// The workspace root, where the README's commands are run from.
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate is inside the workspace")
        .to_path_buf()
}

/// Runs the binary; a run that outlives [`RUN_WAIT`] is killed and fails
/// the test, so a blocking read shows up as a failure, not a hang.
fn router(args: &[&str]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .current_dir(workspace_root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let deadline = Instant::now() + RUN_WAIT;
    while child
        .try_wait()
        .expect("the binary can be waited on")
        .is_none()
    {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("connreg-router {args:?} did not finish within {RUN_WAIT:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.wait_with_output().expect("the output is collected")
}

fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
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
fn ready_prints_ok_when_the_target_could_be_routed_now() {
    let output = router(&[
        "--mode",
        "config_center_file",
        "--directory",
        DIRECTORY,
        "--target",
        TARGET,
        "ready",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(output.stdout, b"ok\n");
    let output = router(&["--mode", "direct", "--target", TARGET, "ready"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(output.stdout, b"ok\n");
}

/// Documents that fail every invocation, each with the words its reason
/// must contain; the last is a FIFO, whose read would block.
fn failing_documents(dir: &tempfile::TempDir) -> Vec<(PathBuf, &'static str)> {
    let malformed = dir.path().join("malformed.json");
    fs::write(
        &malformed,
        "{\"version\": \"router-instance-directory.v1\"}",
    )
    .unwrap();
    let mut documents = vec![
        (dir.path().join("absent.json"), "is missing"),
        (
            malformed,
            "is malformed: targets: required field is missing",
        ),
        (
            dir.path().to_path_buf(),
            "not a regular file but a directory",
        ),
    ];
    if cfg!(unix) {
        let fifo = dir.path().join("fifo.json");
        let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success(), "mkfifo");
        documents.push((fifo, "not a regular file but a fifo"));
    }
    documents
}

// spec: DIR-3
// spec: DIR-7
#[test]
fn a_document_that_fails_is_a_dependency_failure_of_resolve_not_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    for (document, reason) in failing_documents(&dir) {
        let output = router(&[
            "--mode",
            "config_center_file",
            "--directory",
            document.to_str().unwrap(),
            "--target",
            TARGET,
            "resolve",
        ]);
        let stderr = stderr_of(&output);
        assert_eq!(output.status.code(), Some(3), "{reason}: {stderr}");
        assert!(output.stdout.is_empty(), "{reason}");
        assert!(stderr.contains("dependency failure"), "{stderr}");
        assert!(stderr.contains(reason), "{reason}: {stderr}");
    }
}

// spec: DIR-7
// spec: DIR-8
#[test]
fn ready_prints_not_ready_with_the_reason_and_exits_3_when_the_document_fails() {
    let dir = tempfile::tempdir().unwrap();
    for (document, reason) in failing_documents(&dir) {
        let output = router(&[
            "--mode",
            "config_center_file",
            "--directory",
            document.to_str().unwrap(),
            "--target",
            TARGET,
            "ready",
        ]);
        let stderr = stderr_of(&output);
        assert_eq!(output.status.code(), Some(3), "{reason}: {stderr}");
        assert_eq!(output.stdout, b"not_ready\n", "{reason}");
        assert!(stderr.contains(reason), "{reason}: {stderr}");
    }
}

// spec: DIR-7
#[cfg(unix)]
#[test]
fn ready_prints_not_ready_and_exits_3_for_an_unreadable_document() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router-instance-directory.v1.json");
    fs::copy(workspace_root().join(DIRECTORY), &path).unwrap();
    let technique = common::make_unreadable(&path);
    let output = router(&[
        "--mode",
        "config_center_file",
        "--directory",
        path.to_str().unwrap(),
        "--target",
        TARGET,
        "ready",
    ]);
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(3), "{technique}: {stderr}");
    assert_eq!(output.stdout, b"not_ready\n");
    assert!(stderr.contains("unreadable"), "{stderr}");
}

/// Writes `document` and the billing target into `dir`; returns their
/// paths as strings.
fn document_file(dir: &tempfile::TempDir, name: &str, document: &[u8]) -> String {
    let path = dir.path().join(name);
    fs::write(&path, document).unwrap();
    path.to_str().unwrap().to_owned()
}

// spec: DIR-7
// spec: DIR-4
#[test]
fn ready_is_not_ready_for_unmatched_zero_ready_and_two_ready_documents() {
    let dir = tempfile::tempdir().unwrap();
    let stopped = InstanceOptions {
        ready: false,
        ..InstanceOptions::ready("billing-agent-a", "10.0.4.17")
    };
    let unmatched = to_bytes(&json!({
        "version": "router-instance-directory.v1",
        "targets": [],
    }));
    let cases = [
        ("unmatched", unmatched, "has no target for release"),
        (
            "zero-ready",
            billing_document(&[stopped]),
            "no ready tcp endpoint",
        ),
        (
            "two-ready",
            billing_document(&[
                InstanceOptions::ready("billing-agent-a", "10.0.4.17"),
                InstanceOptions::ready("billing-agent-b", "10.0.4.18"),
            ]),
            "2 ready tcp endpoints",
        ),
    ];
    for (name, document, reason) in cases {
        let path = document_file(&dir, &format!("{name}.json"), &document);
        for command in ["ready", "resolve"] {
            let output = router(&[
                "--mode",
                "config_center_file",
                "--directory",
                &path,
                "--target",
                TARGET,
                command,
            ]);
            let stderr = stderr_of(&output);
            assert_eq!(output.status.code(), Some(3), "{name} {command}: {stderr}");
            assert!(stderr.contains(reason), "{name} {command}: {stderr}");
            let expected_stdout: &[u8] = if command == "ready" {
                b"not_ready\n"
            } else {
                b""
            };
            assert_eq!(output.stdout, expected_stdout, "{name} {command}");
        }
    }
}

// spec: DIR-2
#[test]
fn contradictory_or_unknown_modes_are_bad_input() {
    let cases: [&[&str]; 5] = [
        &["--mode", "Direct", "--target", TARGET, "ready"],
        &["--mode", "file", "--target", TARGET, "ready"],
        &[
            "--mode",
            "direct",
            "--directory",
            DIRECTORY,
            "--target",
            TARGET,
            "ready",
        ],
        &[
            "--mode",
            "direct",
            "--port-name",
            "invoke",
            "--target",
            TARGET,
            "ready",
        ],
        &["--mode", "config_center_file", "--target", TARGET, "ready"],
    ];
    for args in cases {
        let output = router(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(output.stdout.is_empty(), "{args:?}");
    }
    let output = router(&["--target", TARGET, "ready"]);
    assert_eq!(output.status.code(), Some(2), "the mode is required");
}

#[test]
fn target_files_are_required_and_checked_as_bad_input() {
    for command in ["resolve", "ready"] {
        let output = router(&["--mode", "direct", command]);
        assert_eq!(output.status.code(), Some(2), "{command} without a target");
        let output = router(&["--mode", "direct", "--target", DIRECTORY, command]);
        assert_eq!(output.status.code(), Some(2), "a directory is not a target");
        assert!(stderr_of(&output).contains("invalid target file"));
    }
}

#[cfg(unix)]
#[test]
fn a_fifo_target_file_is_bad_input_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("target.json");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let output = router(&[
        "--mode",
        "direct",
        "--target",
        fifo.to_str().unwrap(),
        "resolve",
    ]);
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("not a regular file but a fifo"), "{stderr}");
}

/// What a hostile selector does to the honest choice.
#[derive(Debug, Clone, Copy)]
enum Hostile {
    /// Changes the credential audience of the target (identity guard).
    Audience,
    /// Moves the destination to an address the document does not list.
    Destination,
}

impl Selector for Hostile {
    fn select(&self, request: &SelectionRequest<'_>) -> Result<Selection, SelectionError> {
        let mut selection = SingleReadyEndpoint.select(request)?;
        match self {
            Self::Audience => {
                selection.target.release.credential_audience = "https://attacker.example".into();
            }
            Self::Destination => {
                selection.destination.address = Address::new("10.9.9.9").unwrap();
            }
        }
        Ok(selection)
    }
}

/// Runs the command line in process with `selector`.
fn run_with(selector: impl Selector, command: &str) -> (u8, String, String) {
    let directory = workspace_root().join(DIRECTORY);
    let target = workspace_root().join(TARGET);
    let args = [
        "connreg-router",
        "--mode",
        "config_center_file",
        "--directory",
        directory.to_str().unwrap(),
        "--target",
        target.to_str().unwrap(),
        command,
    ];
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let code = cli::run(args, selector, &mut stdout, &mut stderr);
    (
        code,
        String::from_utf8(stdout).unwrap(),
        String::from_utf8(stderr).unwrap(),
    )
}

// spec: DIR-5
#[test]
fn a_rejected_selection_exits_4_from_the_command_line() {
    for hostile in [Hostile::Audience, Hostile::Destination] {
        let (code, stdout, stderr) = run_with(hostile, "resolve");
        assert_eq!(code, 4, "{hostile:?}: {stderr}");
        assert_eq!(stdout, "", "{hostile:?}");
        assert!(stderr.contains("selection rejected"), "{stderr}");

        let (code, stdout, stderr) = run_with(hostile, "ready");
        assert_eq!(code, 4, "{hostile:?}: {stderr}");
        assert_eq!(stdout, "not_ready\n", "{hostile:?}");
        assert!(stderr.contains("selection rejected"), "{stderr}");
    }
    let (_, _, stderr) = run_with(Hostile::Audience, "resolve");
    assert!(
        stderr.contains(ImmutableField::CredentialAudience.as_str()),
        "{stderr}"
    );
}

// spec: DIR-5
#[test]
fn the_in_process_command_line_with_the_honest_selector_answers_like_the_binary() {
    let (code, stdout, _) = run_with(SingleReadyEndpoint, "ready");
    assert_eq!((code, stdout.as_str()), (0, "ok\n"));
    let (code, stdout, _) = run_with(SingleReadyEndpoint, "resolve");
    assert_eq!(code, 0);
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["destination"]["address"], "10.0.4.17");
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
    assert!(checked >= 9, "only {checked} README commands found");
}
