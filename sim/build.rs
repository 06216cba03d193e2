//! Records the git revision the simulator is built from, for the trace's
//! `start` line: `CONNREG_SIM_REVISION` when set (a build outside a
//! checkout), else `git rev-parse HEAD`, else `unknown`. One build always
//! writes the same revision, so its traces stay byte-identical.

use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=CONNREG_SIM_REVISION");
    println!("cargo:rerun-if-changed=build.rs");
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let dir = Path::new(&dir);
    let given = std::env::var("CONNREG_SIM_REVISION")
        .ok()
        .filter(|r| !r.is_empty());
    let revision = given.or_else(|| {
        // Rebuild when HEAD moves: the HEAD file, and the branch it names.
        for path in ["HEAD", "packed-refs"] {
            if let Some(p) = git(dir, &["rev-parse", "--git-path", path]) {
                println!("cargo:rerun-if-changed={}", dir.join(p).display());
            }
        }
        if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"])
            && let Some(p) = git(dir, &["rev-parse", "--git-path", &branch])
        {
            println!("cargo:rerun-if-changed={}", dir.join(p).display());
        }
        git(dir, &["rev-parse", "HEAD"])
    });
    println!(
        "cargo:rustc-env=CONNREG_SIM_REVISION={}",
        revision.unwrap_or_else(|| "unknown".into())
    );
}
