//! `connreg-sim probes`: which scenarios reach each planted bug's code
//! path. Runs a few seeds of every scenario a pattern matches and prints,
//! as a Markdown table, each planted bug against the scenarios whose runs
//! fired its `plant:` probe (`connreg_sim::probes`). A scenario the
//! backend refuses (database faults on memory) is listed as skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use connreg_sim::limits::PLANT_REACH_FEW;
use connreg_sim::probes::plant_probe;
use connreg_sim::{BackendKind, PlantedBug, RunOptions, TraceTarget, parse_seed_range, run};

use crate::{BAD_INPUT, BackendArg, OK, load};

#[derive(clap::Args)]
pub(crate) struct ProbesArgs {
    /// Scenario files: a path whose file name may hold `*` wildcards
    /// (`scenarios/*.toml`).
    #[arg(long)]
    scenarios: String,
    /// Seeds of each scenario: A..B (B excluded) or A..=B.
    #[arg(long, default_value = "1..3")]
    seeds: String,
    /// The backend.
    #[arg(long, value_enum, default_value = "memory")]
    backend: BackendArg,
    /// Draw fault probabilities and fleet shape from each seed.
    #[arg(long)]
    swarm: bool,
}

/// Prints a line to stdout; a closed pipe is not an error.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// True when `name` matches `pattern`, where `*` matches any run of
/// characters.
fn matches(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    if !name.ends_with(last) {
        return false;
    }
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

/// The files `pattern` names, sorted.
fn expand(pattern: &str) -> Result<Vec<PathBuf>, String> {
    let path = Path::new(pattern);
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let file = path
        .file_name()
        .and_then(|f| f.to_str())
        .ok_or_else(|| format!("{pattern}: no file name"))?;
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_str().is_some_and(|n| matches(file, n)))
        .map(|e| e.path())
        .collect();
    found.sort();
    if found.is_empty() {
        return Err(format!("{pattern}: no file matches"));
    }
    Ok(found)
}

pub(crate) fn probes(args: ProbesArgs) -> u8 {
    let bad = |e: String| {
        eprintln!("connreg-sim: {e}");
        BAD_INPUT
    };
    let files = match expand(&args.scenarios) {
        Ok(f) => f,
        Err(e) => return bad(e),
    };
    let range = match parse_seed_range(&args.seeds) {
        Ok(r) => r,
        Err(e) => return bad(e),
    };
    let backend = BackendKind::from(args.backend);
    // Plant probe -> scenario file stems that fired it.
    let mut reached: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut skipped: Vec<(String, String)> = Vec::new();
    let mut ran: Vec<String> = Vec::new();
    for file in &files {
        let stem = file
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
        let path = file.to_string_lossy().into_owned();
        let scenario = match load(Some(&path)) {
            Ok(s) => s,
            Err(code) => return code,
        };
        let mut refused = None;
        for seed in range.clone() {
            let opts = RunOptions {
                seed,
                backend,
                plant: None,
                swarm: args.swarm,
                trace: TraceTarget::Hash,
            };
            match run(&scenario, &opts) {
                Ok(report) => {
                    for name in report.probes.keys() {
                        if name.starts_with("plant:") {
                            reached
                                .entry(name.clone())
                                .or_default()
                                .insert(stem.clone());
                        }
                    }
                }
                Err(e) => {
                    refused = Some(e.to_string());
                    break;
                }
            }
        }
        match refused {
            Some(reason) => skipped.push((stem, reason)),
            None => ran.push(stem),
        }
    }
    say!(
        "Planted bugs against the scenarios that reach their code path: `connreg-sim probes --scenarios '{}' --seeds {}{}` ({} backend, {} scenarios run, {} skipped).",
        args.scenarios,
        args.seeds,
        if args.swarm { " --swarm" } else { "" },
        backend.name(),
        ran.len(),
        skipped.len()
    );
    say!();
    say!("| plant | scenarios reaching its path | count |");
    say!("|---|---|---:|");
    let mut few: Vec<String> = Vec::new();
    for p in PlantedBug::all() {
        let names = reached.remove(&plant_probe(p)).unwrap_or_default();
        if names.len() < PLANT_REACH_FEW {
            few.push(format!("`{}` ({})", p.name(), names.len()));
        }
        let list: Vec<String> = names.iter().map(|n| short(n)).collect();
        say!(
            "| `{}` | {} | {} |",
            p.name(),
            if list.is_empty() {
                "none".to_string()
            } else {
                list.join(", ")
            },
            names.len()
        );
    }
    say!();
    if few.is_empty() {
        say!("Every plant's path is reached by {PLANT_REACH_FEW} scenarios or more.");
    } else {
        say!(
            "Reached by fewer than {PLANT_REACH_FEW} scenarios: {}.",
            few.join(", ")
        );
    }
    for (stem, reason) in &skipped {
        say!("Skipped {stem}: {reason}");
    }
    OK
}

/// A scenario's number (`0004`), or its whole stem when it has none.
fn short(stem: &str) -> String {
    match stem.split_once('_') {
        Some((n, _)) if n.chars().all(|c| c.is_ascii_digit()) => n.to_string(),
        _ => stem.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn wildcards_match_runs_of_characters() {
        assert!(matches("*.toml", "0001_steady_state.toml"));
        assert!(matches("00*_*.toml", "0001_steady_state.toml"));
        assert!(!matches("*.toml", "README.md"));
        assert!(matches("a.toml", "a.toml"));
        assert!(!matches("a*b*a", "ab"));
    }
}
