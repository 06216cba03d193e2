//! Goal: every rule in `docs/RULES.md` is named by at least one test, and
//! tests name only rules that exist.
//!
//! A test names a rule with a comment such as `// spec: ROUTE-3, ROUTE-4`
//! anywhere in a `*.rs` file of the workspace's crates (`target/` and
//! hidden directories skipped). `every_rule_is_named_by_a_test` is the real
//! gate and fails until every area has its tests;
//! `every_registry_rule_is_named_by_a_test` checks the registry's areas
//! alone, so that work can be checked on its own.
//!
//! Every rule entry also ends with one `Code:` line naming, in backticks,
//! the files that enforce it, relative to the repository root (a Rust file
//! may carry an `::item` suffix); `every_rule_names_the_files_that_enforce_it`
//! checks that each entry has exactly one and that every file it names
//! exists.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Rule areas, in catalogue order, with their rule counts.
const AREAS: [(&str, u32); 11] = [
    ("REC", 8),
    ("CAT", 10),
    ("ROUTE", 11),
    ("PIN", 8),
    ("SETTLE", 6),
    ("LEASE", 4),
    ("AUTH", 8),
    ("DIR", 8),
    ("LOCK", 6),
    ("SIM", 6),
    ("EVID", 9),
];

/// The areas the registry core and its conformance suite own.
const REGISTRY_AREAS: [&str; 6] = ["REC", "CAT", "ROUTE", "PIN", "SETTLE", "LEASE"];

/// The workspace crates whose sources are scanned.
const CRATES: [&str; 6] = [
    "registry",
    "conformance",
    "sim",
    "directory",
    "pgtest",
    "benches",
];

/// Most files scanned: a bound on the walk, far above the workspace's size.
const FILES_MAX: usize = 10_000;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the conformance crate sits in the workspace")
        .to_path_buf()
}

fn area_of(id: &str) -> Option<&'static str> {
    let (area, number) = id.split_once('-')?;
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    AREAS.iter().map(|(a, _)| *a).find(|a| *a == area)
}

/// The rule IDs of `docs/RULES.md`, in document order: every list item
/// that starts with a bold rule ID.
fn documented() -> Vec<String> {
    let text = fs::read_to_string(root().join("docs/RULES.md")).expect("docs/RULES.md");
    text.lines()
        .filter_map(|line| line.trim_start().strip_prefix("- **"))
        .filter_map(|rest| rest.split_once("**").map(|(id, _)| id.to_string()))
        .filter(|id| area_of(id).is_some())
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.path());
    for entry in entries {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "target" {
            continue;
        }
        if path.is_dir() {
            rust_files(&path, out);
        } else if name.ends_with(".rs") {
            assert!(out.len() < FILES_MAX, "more than {FILES_MAX} files");
            out.push(path);
        }
    }
}

/// The rule IDs listed after one `spec:` marker: `ID`, then `, ID`...
fn ids_after(marker_rest: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let mut rest = marker_rest;
    loop {
        rest = rest.trim_start();
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(rest.len());
        let token = &rest[..end];
        if area_of(token).is_none() {
            return ids;
        }
        ids.push(token.to_string());
        rest = rest[end..].trim_start();
        match rest.strip_prefix(',') {
            Some(r) => rest = r,
            None => return ids,
        }
    }
}

/// The conformance suite's modules that hold tests (the rest is support):
/// each is `conformance/src/{module}.rs` or a module directory
/// `conformance/src/{module}/` (every file under it).
const SUITE_MODULES: [&str; 12] = [
    "records",
    "catalog",
    "route",
    "pin",
    "settle",
    "lease",
    "hold",
    "status",
    "race",
    "model",
    "snapshots",
    "determinism",
];

/// Every rule ID named by a `spec:` marker in test code, with the files
/// naming it.
fn named() -> BTreeMap<String, BTreeSet<PathBuf>> {
    let root = root();
    let marker = concat!("spec", ":");
    let mut files = Vec::new();
    for krate in CRATES {
        rust_files(&root.join(krate), &mut files);
    }
    let mut named: BTreeMap<String, BTreeSet<PathBuf>> = BTreeMap::new();
    for file in files {
        let Ok(text) = fs::read_to_string(&file) else {
            continue;
        };
        let relative_path = file.strip_prefix(&root).unwrap_or(&file).to_path_buf();
        // Only test code counts: integration tests, the conformance suite's
        // test modules, and `#[cfg(test)]` modules. A marker in serving code
        // documents a rule but proves nothing.
        let test_file = relative_path.components().any(|c| c.as_os_str() == "tests")
            || SUITE_MODULES.iter().any(|m| {
                let src = Path::new("conformance/src");
                relative_path == src.join(format!("{m}.rs"))
                    || relative_path.starts_with(src.join(m))
            });
        let test_code_from = if test_file {
            0
        } else {
            text.find("#[cfg(test)]").unwrap_or(text.len())
        };
        for (i, _) in text.match_indices(marker) {
            if i < test_code_from {
                continue;
            }
            for id in ids_after(&text[i + marker.len()..]) {
                named.entry(id).or_default().insert(relative_path.clone());
            }
        }
    }
    named
}

fn unnamed(areas: &[&str]) -> Vec<String> {
    let named = named();
    documented()
        .into_iter()
        .filter(|id| area_of(id).is_some_and(|a| areas.contains(&a)))
        .filter(|id| !named.contains_key(id))
        .collect()
}

#[test]
fn rules_doc_keeps_every_catalogue_id() {
    let expected: Vec<String> = AREAS
        .iter()
        .flat_map(|(area, n)| (1..=*n).map(move |i| format!("{area}-{i}")))
        .collect();
    assert_eq!(
        documented(),
        expected,
        "docs/RULES.md lists every ID once, in order"
    );
}

#[test]
fn every_rule_is_named_by_a_test() {
    let all: Vec<&str> = AREAS.iter().map(|(a, _)| *a).collect();
    let missing = unnamed(&all);
    assert!(
        missing.is_empty(),
        "rules named by no test ({}): {}",
        missing.len(),
        missing.join(", ")
    );
}

#[test]
fn every_registry_rule_is_named_by_a_test() {
    let missing = unnamed(&REGISTRY_AREAS);
    assert!(
        missing.is_empty(),
        "registry rules named by no test: {}",
        missing.join(", ")
    );
}

#[test]
fn tests_name_only_documented_rules() {
    let documented: BTreeSet<String> = documented().into_iter().collect();
    let unknown: Vec<String> = named()
        .into_iter()
        .filter(|(id, _)| !documented.contains(id))
        .map(|(id, files)| format!("{id} in {files:?}"))
        .collect();
    assert!(
        unknown.is_empty(),
        "unknown rule IDs: {}",
        unknown.join("; ")
    );
}

#[test]
fn spec_markers_parse_lists_and_stop_at_prose() {
    assert_eq!(ids_after(" ROUTE-3, ROUTE-4"), ["ROUTE-3", "ROUTE-4"]);
    assert_eq!(ids_after(" ROUTE-10 (the hash)"), ["ROUTE-10"]);
    assert_eq!(ids_after(" PIN-4\nfn x()"), ["PIN-4"]);
    assert!(ids_after(" ReplicaSpec,").is_empty());
    assert!(ids_after(" spec.clone()").is_empty());
    assert!(ids_after(" ROUTE-").is_empty());
    assert!(ids_after(" NOPE-1").is_empty());
}

/// One rule entry of `docs/RULES.md`: its ID and its lines, from the
/// `- **ID**` line up to the next list item, heading or blank line.
fn entries(text: &str) -> Vec<(String, Vec<&str>)> {
    let mut entries: Vec<(String, Vec<&str>)> = Vec::new();
    let mut open = false;
    for line in text.lines() {
        let id = line
            .strip_prefix("- **")
            .and_then(|rest| rest.split_once("**"))
            .map(|(id, _)| id)
            .filter(|id| area_of(id).is_some());
        if let Some(id) = id {
            entries.push((id.to_string(), vec![line]));
            open = true;
        } else if line.trim().is_empty() || line.starts_with('#') || line.starts_with("- ") {
            open = false;
        } else if open && let Some((_, lines)) = entries.last_mut() {
            lines.push(line);
        }
    }
    entries
}

/// The backticked paths of one `Code:` line, each without its `::item`
/// suffix; `Err` says what is wrong with the line.
fn code_paths(line: &str) -> Result<Vec<String>, String> {
    let Some(rest) = line.trim().strip_prefix("Code:") else {
        return Err("not a `Code:` line".into());
    };
    let Some(list) = rest.trim().strip_suffix('.') else {
        return Err("a `Code:` line ends with a full stop".into());
    };
    let mut paths = Vec::new();
    for (i, item) in list.split(", ").enumerate() {
        let Some(inner) = item
            .strip_prefix('`')
            .and_then(|i| i.strip_suffix('`'))
            .filter(|i| !i.is_empty() && !i.contains('`'))
        else {
            return Err(format!(
                "item {} is not one backticked path: {item:?}",
                i + 1
            ));
        };
        let path = match inner.split_once("::") {
            Some((file, item)) if file.ends_with(".rs") && !item.is_empty() => file,
            Some(_) => return Err(format!("`::` follows only a .rs path: {inner:?}")),
            None => inner,
        };
        if path.starts_with('/') || path.split('/').any(|c| c.is_empty() || c == "..") {
            return Err(format!("not a path relative to the root: {path:?}"));
        }
        paths.push(path.to_string());
    }
    Ok(paths)
}

#[test]
fn every_rule_names_the_files_that_enforce_it() {
    let root = root();
    let text = fs::read_to_string(root.join("docs/RULES.md")).expect("docs/RULES.md");
    let entries = entries(&text);
    let ids: Vec<&str> = entries.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, documented(), "every rule entry is parsed");
    let mut problems = Vec::new();
    for (id, lines) in &entries {
        let code: Vec<&str> = lines
            .iter()
            .copied()
            .filter(|l| l.trim_start().starts_with("Code:"))
            .collect();
        let [line] = code[..] else {
            problems.push(format!("{id}: {} `Code:` lines, not one", code.len()));
            continue;
        };
        if lines.last() != Some(&line) {
            problems.push(format!("{id}: the `Code:` line is not the entry's last"));
        }
        match code_paths(line) {
            Err(e) => problems.push(format!("{id}: {e}")),
            Ok(paths) => problems.extend(
                paths
                    .iter()
                    .filter(|p| !root.join(p).is_file())
                    .map(|p| format!("{id}: no file {p}")),
            ),
        }
    }
    assert!(
        problems.is_empty(),
        "docs/RULES.md `Code:` lines ({}):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn code_lines_parse_paths_and_items() {
    assert_eq!(
        code_paths("  Code: `registry/src/a.rs::f`, `migrations/0001_x.sql`."),
        Ok(vec![
            "registry/src/a.rs".to_string(),
            "migrations/0001_x.sql".to_string()
        ])
    );
    assert!(code_paths("  Code: `a.rs`").is_err(), "no full stop");
    assert!(code_paths("  Code: a.rs.").is_err(), "no backticks");
    assert!(code_paths("  Code: .").is_err(), "no path");
    assert!(
        code_paths("  Code: `a.sql::f`.").is_err(),
        "item after a non-Rust path"
    );
    assert!(code_paths("  Code: `/etc/passwd`.").is_err(), "absolute");
    assert!(
        code_paths("  Code: `../x.rs`.").is_err(),
        "outside the root"
    );
    let text = "## A\n\n- **REC-1** Text\n  more.\n  Code: `x.rs`.\n- **REC-2** T\n  Code: `y.rs`.\n\nprose\n";
    let parsed = entries(text);
    assert_eq!(parsed.len(), 2);
    assert_eq!(
        parsed[0].1,
        ["- **REC-1** Text", "  more.", "  Code: `x.rs`."]
    );
    assert_eq!(parsed[1].1, ["- **REC-2** T", "  Code: `y.rs`."]);
}

/// The rules the simulator's invariants protect: the `rules` column of
/// the invariant table in `sim/src/check/mod.rs` (`//! | \`name\` |
/// RULES | broken when |`).
fn checked_online() -> BTreeMap<String, BTreeSet<String>> {
    let text = fs::read_to_string(root().join("sim/src/check/mod.rs")).expect("the checker table");
    let mut rules: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in text.lines() {
        let Some(row) = line.strip_prefix("//! | `") else {
            continue;
        };
        let mut cols = row.split('|');
        let name = cols.next().unwrap_or("").trim().trim_end_matches('`');
        for id in cols.next().unwrap_or("").split([',', ' ']) {
            if area_of(id).is_some() {
                rules.entry(id.to_string()).or_default().insert(name.into());
            }
        }
    }
    rules
}

/// The rules docs/TESTING.md ("Rules no run checks") gives a reason for.
fn unchecked_with_reason() -> BTreeMap<String, String> {
    let text = fs::read_to_string(root().join("docs/TESTING.md")).expect("docs/TESTING.md");
    let section = text
        .split_once("## Rules no run checks")
        .map(|(_, rest)| rest.split_once("\n## ").map_or(rest, |(s, _)| s))
        .expect("docs/TESTING.md has the section \"Rules no run checks\"");
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| "))
        .filter_map(|l| l.split_once(" | "))
        .filter(|(id, _)| area_of(id).is_some())
        .map(|(id, reason)| {
            (
                id.to_string(),
                reason.trim_end_matches(" |").trim().to_string(),
            )
        })
        .collect()
}

#[test]
fn every_rule_is_checked_online_or_has_a_reason() {
    // spec: SIM-3
    let documented: BTreeSet<String> = documented().into_iter().collect();
    let online = checked_online();
    let reasons = unchecked_with_reason();
    assert!(
        online.len() >= 40,
        "the checker table names {} rules",
        online.len()
    );
    let mut problems = Vec::new();
    for id in &documented {
        match (online.get(id), reasons.get(id)) {
            (None, None) => problems.push(format!(
                "{id}: no invariant protects it and docs/TESTING.md gives no reason"
            )),
            (Some(by), Some(_)) => problems.push(format!(
                "{id}: protected by {by:?} and also listed as unchecked"
            )),
            (None, Some(reason)) if reason.len() < 20 => {
                problems.push(format!("{id}: the reason is not one: {reason:?}"))
            }
            _ => {}
        }
    }
    for id in online.keys().chain(reasons.keys()) {
        if !documented.contains(id) {
            problems.push(format!("{id}: named but not in docs/RULES.md"));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}
