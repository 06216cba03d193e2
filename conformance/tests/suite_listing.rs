//! Goal: the `conformance_tests!` macro runs every conformance test, and
//! every conformance test names the rules it covers.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

/// The modules whose `pub async fn name<H: Harness>` items are tests the
/// macro must list (determinism is run by the in-memory backend only).
const AREAS: [&str; 10] = [
    "records",
    "catalog",
    "route",
    "pin",
    "settle",
    "lease",
    "hold",
    "status",
    "race",
    "snapshots",
];

fn src(file: &str) -> String {
    fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(file))
        .expect("source file")
}

/// The sources of one area: `src/{area}.rs` and every `.rs` file of the
/// module directory `src/{area}/`, in name order.
fn area_sources(area: &str) -> Vec<String> {
    let src_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![src_dir.join(format!("{area}.rs"))];
    if let Ok(entries) = fs::read_dir(src_dir.join(area)) {
        let mut inner: Vec<_> = entries
            .map(|entry| entry.expect("directory entry").path())
            .filter(|path| path.extension().is_some_and(|e| e == "rs"))
            .collect();
        inner.sort();
        files.extend(inner);
    }
    files
        .iter()
        .filter(|path| path.is_file())
        .map(|path| fs::read_to_string(path).expect("source file"))
        .collect()
}

/// (area, test name, its preceding comment block) of every test.
fn tests() -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for area in AREAS {
        for text in area_sources(area) {
            let lines: Vec<&str> = text.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                let Some(rest) = line.strip_prefix("pub async fn ") else {
                    continue;
                };
                let Some((name, generics)) = rest.split_once('<') else {
                    continue;
                };
                if !generics.starts_with("H: Harness>") {
                    continue;
                }
                let mut j = i;
                while j > 0 && lines[j - 1].trim_start().starts_with("//") {
                    j -= 1;
                }
                out.push((area.to_string(), name.to_string(), lines[j..i].join("\n")));
            }
        }
    }
    out
}

#[test]
fn macro_lists_every_conformance_test() {
    let lib = src("lib.rs");
    let defined: BTreeSet<(String, String)> = tests().into_iter().map(|(a, n, _)| (a, n)).collect();
    let mut listed = BTreeSet::new();
    let mut area = String::new();
    for line in lib.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("$crate::__conformance_area! { $harness; ") {
            area = rest.trim_end_matches(": [").to_string();
        } else if let Some(name) = t.strip_suffix(',')
            && !area.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit())
        {
            listed.insert((area.clone(), name.to_string()));
        } else if t.starts_with("] }") {
            area.clear();
        }
    }
    let missing: Vec<_> = defined.difference(&listed).collect();
    let extra: Vec<_> = listed.difference(&defined).collect();
    assert!(
        missing.is_empty(),
        "tests the macro does not run: {missing:?}"
    );
    assert!(extra.is_empty(), "macro entries with no test: {extra:?}");
    assert!(defined.len() > 80, "found {} tests", defined.len());
}

#[test]
fn every_conformance_test_names_its_rules() {
    let marker = concat!("spec", ":");
    let unnamed: Vec<String> = tests()
        .into_iter()
        .filter(|(_, _, comments)| !comments.contains(marker))
        .map(|(a, n, _)| format!("{a}::{n}"))
        .collect();
    assert!(unnamed.is_empty(), "tests without a rule: {unnamed:?}");
}
