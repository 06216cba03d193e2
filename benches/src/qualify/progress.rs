//! What an operator sees while a run measures: a progress bar (indicatif)
//! when stderr is a terminal, otherwise one line every
//! [`PROGRESS_LINE_MS`]: elapsed time, operations, current throughput,
//! resolve p99 and errors.

use std::io::IsTerminal as _;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::contract::RunLength;
use super::limits::PROGRESS_LINE_MS;
use super::timeline::TimelinePoint;

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    /// A bar on stderr.
    Bar,
    /// A line on stderr every [`PROGRESS_LINE_MS`].
    Lines,
    /// Nothing.
    Silent,
}

impl ProgressMode {
    /// A bar on a terminal, lines otherwise.
    pub fn for_stderr() -> ProgressMode {
        if std::io::stderr().is_terminal() {
            ProgressMode::Bar
        } else {
            ProgressMode::Lines
        }
    }
}

/// The display of one trial.
pub struct Progress {
    mode: ProgressMode,
    bar: Option<ProgressBar>,
    length: RunLength,
    label: String,
    operations: u64,
    errors: u64,
    last_line: Option<Instant>,
}

impl Progress {
    /// Starts the display of trial `trial` (from 1) of `trials`.
    pub fn start(
        mode: ProgressMode,
        length: RunLength,
        trial: u32,
        trials: u32,
        worker: Option<u32>,
    ) -> Progress {
        let mut label = if trials > 1 {
            format!("trial {trial}/{trials}")
        } else {
            "run".to_string()
        };
        if let Some(w) = worker {
            label = format!("worker {w} {label}");
        }
        let bar = (mode == ProgressMode::Bar).then(|| {
            let (len, unit) = match length {
                RunLength::DurationMs(ms) => (ms, "ms"),
                RunLength::Operations(n) => (n, "ops"),
            };
            let bar = ProgressBar::new(len);
            bar.set_draw_target(ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(&format!(
                    "{{prefix}} {{bar:30}} {{pos}}/{{len}} {unit} {{msg}}"
                ))
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.set_prefix(label.clone());
            bar
        });
        Progress {
            mode,
            bar,
            length,
            label,
            operations: 0,
            errors: 0,
            last_line: None,
        }
    }

    /// Shows one interval's point, `elapsed` into the measured run.
    pub fn update(&mut self, point: &TimelinePoint, elapsed: Duration) {
        self.operations += point.operations;
        self.errors += point.errors.values().sum::<u64>();
        let message = format!(
            "{} ops, {:.0} ops/s now, resolve p99 {:.2} ms, {} errors",
            self.operations, point.operations_per_s, point.resolve_p99_ms, self.errors
        );
        match self.mode {
            ProgressMode::Bar => {
                if let Some(bar) = &self.bar {
                    bar.set_position(match self.length {
                        RunLength::DurationMs(_) => elapsed.as_millis() as u64,
                        RunLength::Operations(_) => self.operations,
                    });
                    bar.set_message(message);
                }
            }
            ProgressMode::Lines => {
                let due = self
                    .last_line
                    .is_none_or(|at| at.elapsed() >= Duration::from_millis(PROGRESS_LINE_MS));
                if due {
                    self.last_line = Some(Instant::now());
                    eprintln!(
                        "connreg-qualify: {} {:.1} s: {message}",
                        self.label,
                        elapsed.as_secs_f64()
                    );
                }
            }
            ProgressMode::Silent => {}
        }
    }

    /// Ends the display.
    pub fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
        if self.mode != ProgressMode::Silent {
            eprintln!(
                "connreg-qualify: {} done: {} ops, {} errors",
                self.label, self.operations, self.errors
            );
        }
    }
}
