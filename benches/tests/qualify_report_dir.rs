//! Goal: `--out DIR` writes a report directory people can read (issue 10,
//! item 3): `report.json` (the same report as `--report`), `report.md`
//! linking every plot, and SVG plots that are well-formed XML with one
//! line per expected series: calls per second and p50/p99 latency of each
//! operation, errors per second of each kind.

mod common;

use common::{contract_file, scratch, smoke_text};

/// Checks that `text` is one well-formed XML element (tags nest and
/// close, attributes are quoted, `&` starts an entity); returns the text
/// content of every element named `name`, trimmed.
fn well_formed(text: &str, name: &str) -> Result<Vec<String>, String> {
    let mut stack: Vec<String> = Vec::new();
    let mut roots = 0;
    let mut contents = Vec::new();
    let mut rest = text;
    while let Some(lt) = rest.find('<') {
        let between = &rest[..lt];
        check_entities(between)?;
        if stack.last().is_some_and(|top| top == name) {
            contents.push(between.trim().to_string());
        }
        rest = &rest[lt..];
        if let Some(after) = rest.strip_prefix("<?") {
            rest = &after[after.find("?>").ok_or("unclosed <?")? + 2..];
            continue;
        }
        if let Some(after) = rest.strip_prefix("<!--") {
            rest = &after[after.find("-->").ok_or("unclosed comment")? + 3..];
            continue;
        }
        let gt = tag_end(rest).ok_or("unclosed tag")?;
        let tag = &rest[1..gt];
        rest = &rest[gt + 1..];
        if let Some(closing) = tag.strip_prefix('/') {
            let open = stack.pop().ok_or(format!("</{closing}> closes nothing"))?;
            if open != closing.trim() {
                return Err(format!("<{open}> closed by </{closing}>"));
            }
            continue;
        }
        let self_closing = tag.ends_with('/');
        let element = tag.trim_end_matches('/');
        let tag_name: String = element.chars().take_while(|c| !c.is_whitespace()).collect();
        if tag_name.is_empty() {
            return Err("a tag without a name".into());
        }
        if !element.matches('"').count().is_multiple_of(2) {
            return Err(format!("unbalanced quotes in <{tag_name}>"));
        }
        if stack.is_empty() {
            roots += 1;
        }
        if !self_closing {
            stack.push(tag_name);
        }
    }
    check_entities(rest)?;
    if !rest.trim().is_empty() {
        return Err("text after the root element".into());
    }
    if let Some(open) = stack.pop() {
        return Err(format!("<{open}> never closed"));
    }
    if roots != 1 {
        return Err(format!("{roots} root elements"));
    }
    Ok(contents)
}

/// The end of the tag starting `text`, outside quoted attribute values.
fn tag_end(text: &str) -> Option<usize> {
    let mut quoted = false;
    for (i, c) in text.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '>' if !quoted => return Some(i),
            _ => {}
        }
    }
    None
}

fn check_entities(text: &str) -> Result<(), String> {
    for (i, _) in text.match_indices('&') {
        let entity = &text[i + 1..];
        let end = entity.find(';').ok_or("a bare &")?;
        if end == 0
            || !entity[..end]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '#')
        {
            return Err(format!("a bad entity &{}", &entity[..end.min(12)]));
        }
    }
    Ok(())
}

#[test]
fn the_checker_refuses_what_is_not_well_formed() {
    assert!(well_formed("<svg><text>a</text></svg>", "text").is_ok());
    assert!(well_formed("<svg><text>a</svg>", "text").is_err());
    assert!(well_formed("<svg><g/></svg><svg/>", "text").is_err());
    assert!(well_formed("<svg a=\"1></svg>", "text").is_err());
    assert!(well_formed("<svg>a & b</svg>", "text").is_err());
}

#[test]
fn out_writes_json_markdown_and_well_formed_svg_plots_with_every_series() {
    // spec: SIM-6
    let text = smoke_text().replacen(
        "operations = 2000",
        "duration_ms = 800\nwarmup_ms = 0\ntrials = 2",
        1,
    );
    let env = contract_file("out", &text);
    let dir = scratch("out", "d");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_connreg-qualify"))
        .arg("--env")
        .arg(&env)
        .arg("--out")
        .arg(&dir)
        .output()
        .expect("connreg-qualify starts");
    let said = format!(
        "{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(run.status.code(), Some(0), "{said}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["format"], "connreg-qualify-report.v2");
    let points = report["trials"][0]["timeline"]["points"]
        .as_array()
        .unwrap();
    assert!(points.len() >= 4, "{} points", points.len());
    let kinds: Vec<String> = report["measured"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect();
    assert!(kinds.contains(&"no_capacity".to_string()), "{kinds:?}");

    let markdown = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let operations = [
        "resolve_new",
        "resolve_duplicate",
        "settle",
        "heartbeat",
        "catalog_page",
    ];
    for (file, expected) in [
        (
            "throughput.svg",
            operations.iter().map(|o| o.to_string()).collect::<Vec<_>>(),
        ),
        (
            "latency.svg",
            operations
                .iter()
                .flat_map(|o| [format!("{o} p50"), format!("{o} p99")])
                .collect(),
        ),
        ("errors.svg", kinds.clone()),
    ] {
        assert!(
            markdown.contains(&format!("]({file})")),
            "report.md links {file}"
        );
        let svg = std::fs::read_to_string(dir.join(file)).unwrap();
        assert!(svg.starts_with("<svg"), "{file}");
        let texts = well_formed(&svg, "text").unwrap_or_else(|e| panic!("{file}: {e}"));
        for label in &expected {
            assert!(
                texts.iter().any(|t| t == label),
                "{file} has no legend entry {label:?}: {texts:?}"
            );
        }
        // One line per series and one legend mark per series, each in the
        // series' colour at stroke width 2.
        let lines = svg
            .matches("<polyline")
            .zip(svg.split("<polyline").skip(1))
            .filter(|(_, rest)| {
                rest.split("/>")
                    .next()
                    .unwrap_or("")
                    .contains("stroke-width=\"2\"")
            })
            .count();
        assert_eq!(lines, 2 * expected.len(), "{file}");
    }
    assert!(markdown.contains("## Verdict: PASS"), "{markdown}");
    assert!(markdown.contains("| `resolves_per_s` |"), "{markdown}");
}
