//! `connreg-sim explain TRACE`: from a failing trace to the interleaving
//! that broke an invariant.
//!
//! - `story`: the trace read as happenings (time, host, call, action, a
//!   sentence each).
//! - `html`: one self-contained page drawing hosts as lanes over simulated
//!   time, calls as arrows, faults as spans, the violation highlighted.
//!
//! The terminal story (this module) prints, for the chosen actions (by
//! default those of the first violation), one line per happening of
//! theirs, with the faults and violations around them; the lines a
//! violation points at are marked.

pub mod html;
pub mod story;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;

pub use story::{Item, Kind, ReadError, Story, read};

use crate::trace::Violation;

/// `connreg-sim explain` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct ExplainArgs {
    /// The trace (JSON lines), as `run --trace FILE` writes it.
    pub trace: PathBuf,
    /// The action to follow (repeatable); default: the actions of the
    /// first violation.
    #[arg(long = "action")]
    pub actions: Vec<String>,
    /// Also write one self-contained HTML page (opens from disk).
    #[arg(long)]
    pub html: Option<PathBuf>,
}

/// Why `explain` could not explain.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExplainError {
    /// The trace could not be read.
    #[error("{path}: {source}")]
    Trace {
        /// The trace file.
        path: String,
        /// Why.
        source: ReadError,
    },
    /// An output could not be written.
    #[error("{0}")]
    Write(String),
}

/// One line about a violation: what broke, when, where, and the evidence.
pub fn violation_line(v: &Violation) -> String {
    let mut at = format!("at {} ms", v.at_ms);
    if !v.lines.is_empty() {
        let lines: Vec<String> = v.lines.iter().map(u64::to_string).collect();
        at.push_str(&format!(", trace lines {}", lines.join(" ")));
    }
    if !v.rpcs.is_empty() {
        let rpcs: Vec<String> = v.rpcs.iter().map(u64::to_string).collect();
        at.push_str(&format!(", calls {}", rpcs.join(" ")));
    }
    if !v.actions.is_empty() {
        at.push_str(&format!(", actions {}", v.actions.join(" ")));
    }
    if !v.hosts.is_empty() {
        at.push_str(&format!(", hosts {}", v.hosts.join(" ")));
    }
    format!("{} [{}] ({at}): {}", v.invariant, v.rules, v.detail)
}

/// What `connreg-sim run` prints under `FAILED`: the first
/// `VIOLATIONS_PRINTED_MAX` violations, then how many more there are and
/// where they are, and the `explain` command for the trace.
pub fn report_lines(r: &crate::RunReport, trace: Option<&std::path::Path>) -> Vec<String> {
    use crate::limits::{TRACE_VIOLATIONS_MAX, VIOLATIONS_PRINTED_MAX};
    let mut out: Vec<String> = r
        .violations
        .iter()
        .take(VIOLATIONS_PRINTED_MAX)
        .map(|v| format!("  - {}", violation_line(v)))
        .collect();
    let rest = r.violation_count.saturating_sub(out.len() as u64);
    if rest > 0 {
        out.push(match trace {
            Some(p) => format!(
                "  … {rest} more not shown: every one is a `violation` line of the trace {}",
                p.display()
            ),
            None => format!(
                "  … {rest} more not shown: the reproduce command below writes every one to a trace"
            ),
        });
    }
    if r.violations_traced < r.violation_count {
        out.push(format!(
            "  the trace keeps the first {} of the {} violations (TRACE_VIOLATIONS_MAX = {TRACE_VIOLATIONS_MAX})",
            r.violations_traced, r.violation_count
        ));
    }
    if let Some(p) = trace {
        use crate::run::shell_word;
        let word = shell_word(&p.display().to_string());
        out.push(format!(
            "explain: connreg-sim explain {word} --html {}",
            shell_word(&format!("{}.html", p.display()))
        ));
    }
    out
}

/// The actions to follow: those asked for, else the first violation's
/// (the first violation that names any).
pub fn focus(story: &Story, asked: &[String]) -> Vec<String> {
    if !asked.is_empty() {
        return asked.to_vec();
    }
    story
        .violations
        .iter()
        .find(|f| !f.violation.actions.is_empty())
        .map(|f| f.violation.actions.clone())
        .unwrap_or_default()
}

/// The happenings of the story about `actions`: theirs, the faults and
/// the heal, the violations that name one of them or point at one of
/// their lines, and the causes: other hosts' answers, while the actions
/// ran, that changed what their fate hangs on (a publication, the
/// registration, drain or circuit of a replica their routes name,
/// maintenance taking that replica offline or releasing their
/// reservation).
pub fn about<'a>(story: &'a Story, actions: &[String]) -> Vec<&'a Item> {
    let wanted: BTreeSet<&str> = actions.iter().map(String::as_str).collect();
    let lines: BTreeSet<u64> = story
        .items
        .iter()
        .filter(|i| i.action.as_deref().is_some_and(|a| wanted.contains(a)))
        .map(|i| i.line)
        .collect();
    let causes = causes(story, &wanted);
    let violation_about = |line: u64| {
        story.violations.iter().any(|f| {
            f.line == line
                && (f
                    .violation
                    .actions
                    .iter()
                    .any(|a| wanted.contains(a.as_str()))
                    || f.violation.lines.iter().any(|l| lines.contains(l)))
        })
    };
    story
        .items
        .iter()
        .filter(|i| match i.kind {
            Kind::Fault | Kind::FaultEnd | Kind::Heal => true,
            Kind::Violation => violation_about(i.line),
            _ => lines.contains(&i.line) || causes.contains(&i.line),
        })
        .collect()
}

/// The lines of the answers, not the followed actions' own, that touch
/// what the followed actions' fates hang on (see [`about`]), from the
/// first of their happenings to the last.
pub fn causes(story: &Story, wanted: &BTreeSet<&str>) -> BTreeSet<u64> {
    let own = |i: &Item| i.action.as_deref().is_some_and(|a| wanted.contains(a));
    let mut keys: BTreeSet<String> = ["catalog".to_string()].into();
    keys.extend(wanted.iter().map(|a| format!("action:{a}")));
    let (mut first, mut last) = (u64::MAX, 0);
    for i in story.items.iter().filter(|i| own(i)) {
        first = first.min(i.t);
        last = last.max(i.t);
        keys.extend(
            i.touches
                .iter()
                .filter(|t| t.starts_with("replica:"))
                .cloned(),
        );
    }
    story
        .items
        .iter()
        .filter(|i| {
            i.kind == Kind::Answer
                && !own(i)
                && (first..=last).contains(&i.t)
                && i.touches.iter().any(|t| keys.contains(t))
        })
        .map(|i| i.line)
        .collect()
}

/// Writes the terminal story of `actions` to `out`.
pub fn write_story(story: &Story, actions: &[String], out: &mut dyn Write) -> std::io::Result<()> {
    let s = &story.start;
    writeln!(
        out,
        "trace: scenario {} ({}), seed {}, backend {}{}{}; built from {} {}",
        s.scenario,
        s.scenario_file.as_deref().unwrap_or("built in"),
        s.seed,
        s.backend,
        s.plant
            .as_deref()
            .map(|p| format!(", plant {p}"))
            .unwrap_or_default(),
        if s.swarm { ", swarm" } else { "" },
        if s.version.is_empty() {
            "?"
        } else {
            &s.version
        },
        if s.revision.is_empty() {
            "unknown"
        } else {
            &s.revision
        },
    )?;
    let total = story
        .violations_total
        .unwrap_or(story.violations.len() as u64);
    writeln!(
        out,
        "violations: {total} found, {} in the trace",
        story.violations.len()
    )?;
    for f in story
        .violations
        .iter()
        .take(crate::limits::VIOLATIONS_PRINTED_MAX)
    {
        writeln!(out, "  line {}: {}", f.line, violation_line(&f.violation))?;
    }
    if story.violations.len() > crate::limits::VIOLATIONS_PRINTED_MAX {
        writeln!(
            out,
            "  … {} more: `grep '\"ev\":\"violation\"'` the trace",
            story.violations.len() - crate::limits::VIOLATIONS_PRINTED_MAX
        )?;
    }
    if actions.is_empty() {
        writeln!(
            out,
            "no action to follow: no violation names one; pick one with --action ID"
        )?;
        return Ok(());
    }
    let pointed: BTreeSet<u64> = story
        .violations
        .iter()
        .flat_map(|f| f.violation.lines.iter().copied())
        .collect();
    writeln!(out)?;
    writeln!(out, "story of {}:", actions.join(", "))?;
    writeln!(
        out,
        "  {:>7}  {:>8}  {:<16}  what happened   (!! a violation, <- evidence it points at, ~~ another host's answer it hangs on)",
        "line", "time", "host"
    )?;
    let items = about(story, actions);
    let wanted: BTreeSet<&str> = actions.iter().map(String::as_str).collect();
    let causes = causes(story, &wanted);
    for i in &items {
        let mark = if i.kind == Kind::Violation {
            "!!"
        } else if pointed.contains(&i.line) {
            "<-"
        } else if causes.contains(&i.line) {
            "~~"
        } else {
            "  "
        };
        writeln!(
            out,
            "{mark}{:>7}  {:>6}ms  {:<16}  {}",
            i.line, i.t, i.host, i.text
        )?;
    }
    if items.iter().all(|i| i.action.is_none()) {
        writeln!(out, "  (no event names {})", actions.join(", "))?;
    }
    Ok(())
}

/// Runs `connreg-sim explain`: the story to `out`, the page to `--html`.
pub fn explain(args: &ExplainArgs, out: &mut dyn Write) -> Result<(), ExplainError> {
    let path = args.trace.display().to_string();
    let file = std::fs::File::open(&args.trace).map_err(|e| ExplainError::Trace {
        path: path.clone(),
        source: ReadError::Io(e.to_string()),
    })?;
    let story = read(std::io::BufReader::new(file)).map_err(|source| ExplainError::Trace {
        path: path.clone(),
        source,
    })?;
    let actions = focus(&story, &args.actions);
    write_story(&story, &actions, out).map_err(|e| ExplainError::Write(e.to_string()))?;
    if let Some(page) = &args.html {
        let text = html::page(&story, &actions, &path);
        std::fs::write(page, text)
            .map_err(|e| ExplainError::Write(format!("{}: {e}", page.display())))?;
        writeln!(out, "\npage written to {}", page.display())
            .map_err(|e| ExplainError::Write(e.to_string()))?;
    }
    Ok(())
}
