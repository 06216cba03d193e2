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

/// Checks that `svg` is well formed and draws one line and one legend
/// mark per label of `expected`, each labelled; returns each line's
/// point count.
fn check_svg(svg: &str, file: &str, expected: &[String]) -> Vec<usize> {
    assert!(svg.starts_with("<svg"), "{file}");
    let texts = well_formed(svg, "text").unwrap_or_else(|e| panic!("{file}: {e}"));
    for label in expected {
        assert!(
            texts.iter().any(|t| t == label),
            "{file} has no legend entry {label:?}: {texts:?}"
        );
    }
    // One line per series and one legend mark per series, each in the
    // series' colour at stroke width 2.
    let lines: Vec<usize> = svg
        .split("<polyline")
        .skip(1)
        .map(|rest| rest.split("/>").next().unwrap_or(""))
        .filter(|tag| tag.contains("stroke-width=\"2\""))
        .map(|tag| {
            tag.split("points=\"")
                .nth(1)
                .and_then(|p| p.split('"').next())
                .map_or(0, |p| p.split_whitespace().count())
        })
        .collect();
    assert_eq!(lines.len(), 2 * expected.len(), "{file}");
    lines
}

const OPERATIONS: [&str; 5] = [
    "resolve_new",
    "resolve_duplicate",
    "settle",
    "heartbeat",
    "catalog_page",
];

/// Runs the smoke contract with `load` in place of its operation count,
/// writing the report directory; returns the directory and the report.
fn run_out(stem: &str, load: &str, extra: &[&str]) -> (std::path::PathBuf, serde_json::Value) {
    let text = smoke_text().replacen("operations = 2000", load, 1);
    let env = contract_file(stem, &text);
    let dir = scratch(stem, "d");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_connreg-qualify"))
        .arg("--env")
        .arg(&env)
        .arg("--out")
        .arg(&dir)
        .args(extra)
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
    (dir, report)
}

#[test]
fn out_writes_json_markdown_and_well_formed_svg_plots_with_every_series() {
    // spec: SIM-6
    let (dir, report) = run_out("out", "duration_ms = 1200\nwarmup_ms = 0\ntrials = 2", &[]);
    assert_eq!(report["format"], "connreg-qualify-report.v2");
    let points = report["trials"][0]["timeline"]["points"]
        .as_array()
        .unwrap();
    assert!(points.len() >= 10, "{} points", points.len());
    let kinds: Vec<String> = report["measured"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect();
    assert!(kinds.contains(&"no_capacity".to_string()), "{kinds:?}");
    // The distribution: every quantile, non-decreasing, ending at the
    // slowest call.
    for op in OPERATIONS {
        let d = report["measured"]["latency_distribution"][op]
            .as_array()
            .unwrap_or_else(|| panic!("{op} has a distribution"));
        assert_eq!(d.len(), 9, "{op}");
        let ms: Vec<f64> = d.iter().map(|p| p[1].as_f64().unwrap()).collect();
        assert!(ms.windows(2).all(|w| w[0] <= w[1]), "{op}: {ms:?}");
        assert_eq!(d[8][0].as_f64(), Some(1.0));
        let max = report["measured"]["by_operation"][op]["latency"]["max_ms"]
            .as_f64()
            .unwrap();
        assert!(
            (ms[8] - max).abs() <= max * 0.02 + 1e-3,
            "{op}: {ms:?} max {max}"
        );
    }

    let markdown = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let ops = || OPERATIONS.iter().map(|o| o.to_string());
    for (file, expected) in [
        ("latency.svg", ops().collect::<Vec<_>>()),
        ("throughput.svg", ops().collect()),
        (
            "latency_over_time.svg",
            OPERATIONS
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
        let lines = check_svg(&svg, file, &expected);
        if file == "latency.svg" {
            // Nine quantiles a line, two points a legend mark.
            assert!(
                lines.iter().filter(|n| **n == 9).count() == expected.len(),
                "{lines:?}"
            );
            let flat = svg.replace('\n', "");
            for tick in [">p90</text>", ">p99</text>", ">p99.9</text>"] {
                assert!(flat.contains(tick), "{file}: no tick {tick}");
            }
        }
    }
    assert!(markdown.contains("## Verdict: PASS"), "{markdown}");
    assert!(markdown.contains("| `resolves_per_s` |"), "{markdown}");
    assert!(!markdown.contains("No time series"), "{markdown}");
}

#[test]
fn a_run_too_short_for_a_time_series_draws_only_the_distribution() {
    // spec: SIM-6
    let (dir, report) = run_out("out-short", "duration_ms = 500\nwarmup_ms = 0", &[]);
    let points = report["trials"][0]["timeline"]["points"]
        .as_array()
        .unwrap()
        .len();
    assert!(points < 20, "{points} points");
    assert!(dir.join("latency.svg").exists());
    for file in ["throughput.svg", "latency_over_time.svg", "errors.svg"] {
        assert!(
            !dir.join(file).exists(),
            "{file} drawn over {points} points"
        );
    }
    let markdown = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        markdown.contains(&format!("holds {points} timeline points, fewer than 20")),
        "{markdown}"
    );
}

#[test]
fn plot_draws_throughput_and_latency_against_concurrency_from_reports() {
    // spec: SIM-6
    let mut reports = Vec::new();
    for clients in ["1", "2", "4"] {
        let (dir, report) = run_out(
            &format!("conc-{clients}"),
            "operations = 600",
            &["--clients", clients],
        );
        assert_eq!(
            report["load"]["clients"].as_u64().unwrap().to_string(),
            clients
        );
        reports.push(dir.join("report.json"));
    }
    let out = scratch("conc-plots", "d");
    let plot = |args: &[&std::path::Path]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_connreg-qualify"))
            .arg("plot")
            .arg("--out")
            .arg(&out)
            .args(args)
            .output()
            .expect("connreg-qualify starts")
    };
    let all: Vec<&std::path::Path> = reports.iter().map(|p| p.as_path()).collect();
    let run = plot(&all);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    for (file, expected) in [
        ("throughput_concurrency.svg", ["resolves/s", "calls/s"]),
        ("latency_concurrency.svg", ["resolve p50", "resolve p99"]),
    ] {
        let svg = std::fs::read_to_string(out.join(file)).unwrap();
        let expected: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
        let lines = check_svg(&svg, file, &expected);
        // One point a report on each line.
        assert_eq!(
            lines.iter().filter(|n| **n == 3).count(),
            2,
            "{file}: {lines:?}"
        );
    }
    // One report, or two at one concurrency: refused.
    for args in [vec![all[0]], vec![all[0], all[0]]] {
        let run = plot(&args);
        assert_eq!(run.status.code(), Some(2), "{args:?}");
    }
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_connreg-qualify"))
        .args(["--env", "benches/environments/smoke.toml", "--clients", "0"])
        .current_dir(env!("CARGO_MANIFEST_DIR").to_string() + "/..")
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&run.stderr).contains("CLIENTS_MAX"));
}
