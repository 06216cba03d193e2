//! Records the git revision the binaries were built from, for the
//! provenance of `connreg-qualify` reports: `CONNREG_GIT_REVISION` (the
//! commit, or `unknown` outside a git checkout) and `CONNREG_GIT_DIRTY`
//! (`true` when tracked files differed from it at build time).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let revision = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
        .map_or("unknown".to_string(), |s| (!s.is_empty()).to_string());
    println!("cargo:rustc-env=CONNREG_GIT_REVISION={revision}");
    println!("cargo:rustc-env=CONNREG_GIT_DIRTY={dirty}");
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        println!("cargo:rerun-if-changed={dir}/index");
        if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={dir}/{head}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
