//! SVG plots of a report, drawn with plotters' SVG backend (no system
//! libraries, no fonts: text is left to the SVG viewer), chosen for what an
//! operator decides from:
//!
//! | file | x | series | drawn |
//! |---|---|---|---|
//! | `latency.svg` | percentile | each operation's latency distribution, p50 to the slowest call, in ms | always |
//! | `throughput.svg` | seconds of measured run | calls per second of each operation | when the run has a time series |
//! | `latency_over_time.svg` | seconds of measured run | p50 and p99 latency of each operation | when the run has a time series |
//! | `errors.svg` | seconds of measured run | errors per second of each kind (one `none` line when there were none) | when the run has a time series |
//! | `throughput_concurrency.svg` | clients | resolves and calls per second (median over trials) | `connreg-qualify plot`, over reports of one environment at several `--clients` |
//! | `latency_concurrency.svg` | clients | resolve p50 and p99 (median over trials) | as above |
//!
//! A run has a time series when its trials, back to back on one time axis
//! (warm-ups not drawn), hold at least [`TIME_SERIES_POINTS_MIN`] timeline
//! points: a shorter run would draw a handful of points over milliseconds,
//! which says nothing a table does not.

use std::collections::BTreeMap;

use plotters::prelude::*;

use super::report::Report;
use super::stats::Operation;

/// Width of every plot, in pixels.
pub const PLOT_WIDTH_PX: u32 = 960;
/// Height of every plot, in pixels.
pub const PLOT_HEIGHT_PX: u32 = 480;
/// Fewest timeline points (over every trial) for the time-series plots.
pub const TIME_SERIES_POINTS_MIN: usize = 20;

/// One named line: (x, y) points.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Its legend label.
    pub label: String,
    /// Its points, in x order.
    pub points: Vec<(f64, f64)>,
}

/// What the x axis shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XAxis {
    /// Seconds of measured run.
    Seconds,
    /// Percentiles, spaced by their nines (`x = -log10(1 - q)`): p50,
    /// p90, p99 and p99.9 equally apart, the slowest call last.
    Percentile,
    /// Concurrent clients.
    Clients,
}

impl XAxis {
    fn label(self) -> &'static str {
        match self {
            XAxis::Seconds => "seconds of measured run",
            XAxis::Percentile => "percentile",
            XAxis::Clients => "clients",
        }
    }

    fn tick(self, x: f64) -> String {
        match self {
            XAxis::Percentile if x >= MAX_NINES => "max".into(),
            XAxis::Percentile => {
                let p = 100.0 * (1.0 - 10f64.powf(-x));
                let text = format!("{p:.2}");
                format!("p{}", text.trim_end_matches('0').trim_end_matches('.'))
            }
            XAxis::Seconds | XAxis::Clients => format!("{x}"),
        }
    }
}

/// Where the slowest call sits on the percentile axis (past p99.99).
const MAX_NINES: f64 = 4.5;

/// The x of quantile `q` on the percentile axis.
pub fn nines(q: f64) -> f64 {
    if q >= 1.0 {
        MAX_NINES
    } else {
        (-(1.0 - q).log10()).min(MAX_NINES)
    }
}

/// One plot: its file name, title, axes and lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Plot {
    /// File name in the report directory.
    pub file: &'static str,
    /// Title.
    pub title: String,
    /// What x is.
    pub x: XAxis,
    /// What y is.
    pub y_label: &'static str,
    /// The lines.
    pub series: Vec<Series>,
}

fn series(m: BTreeMap<String, Vec<(f64, f64)>>) -> Vec<Series> {
    m.into_iter()
        .map(|(label, points)| Series { label, points })
        .collect()
}

/// Timeline points over every trial.
pub fn time_series_points(report: &Report) -> usize {
    report.trials.iter().map(|t| t.timeline.points.len()).sum()
}

/// The plots of one report: the latency distribution always, the time
/// series when the run is long enough to have one.
pub fn plots(report: &Report) -> Vec<Plot> {
    let name = &report.environment.name;
    let backend = report.backend.kind;
    let mut distribution: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for (op, points) in &report.measured.latency_distribution {
        distribution.insert(
            op.clone(),
            points.iter().map(|[q, ms]| (nines(*q), *ms)).collect(),
        );
    }
    let mut out = vec![Plot {
        file: "latency.svg",
        title: format!("{name} on {backend}: latency distribution by operation"),
        x: XAxis::Percentile,
        y_label: "ms",
        series: series(distribution),
    }];
    if time_series_points(report) >= TIME_SERIES_POINTS_MIN {
        out.extend(time_series(report));
    }
    out
}

fn time_series(report: &Report) -> Vec<Plot> {
    let mut throughput: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut latency: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut errors: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut kinds: Vec<String> = Vec::new();
    for trial in &report.trials {
        for p in &trial.timeline.points {
            for k in p.errors.keys() {
                if !kinds.contains(k) {
                    kinds.push(k.clone());
                }
            }
        }
    }
    kinds.sort();
    let mut offset_s = 0.0;
    for trial in &report.trials {
        for p in &trial.timeline.points {
            let t = offset_s + p.t_ms / 1000.0;
            let secs = (p.span_ms / 1000.0).max(1e-9);
            for op in Operation::ALL {
                let name = op.as_str();
                let f = p.by_operation.get(name).copied().unwrap_or_default();
                throughput
                    .entry(name.to_string())
                    .or_default()
                    .push((t, f.per_s));
                if f.count > 0 {
                    latency
                        .entry(format!("{name} p50"))
                        .or_default()
                        .push((t, f.p50_ms));
                    latency
                        .entry(format!("{name} p99"))
                        .or_default()
                        .push((t, f.p99_ms));
                }
            }
            for k in &kinds {
                let n = p.errors.get(k).copied().unwrap_or(0);
                errors
                    .entry(k.clone())
                    .or_default()
                    .push((t, n as f64 / secs));
            }
            if kinds.is_empty() {
                errors.entry("none".into()).or_default().push((t, 0.0));
            }
        }
        offset_s += trial.measured.elapsed_ms / 1000.0;
    }
    let name = &report.environment.name;
    let backend = report.backend.kind;
    vec![
        Plot {
            file: "throughput.svg",
            title: format!("{name} on {backend}: calls per second by operation"),
            x: XAxis::Seconds,
            y_label: "calls/s",
            series: series(throughput),
        },
        Plot {
            file: "latency_over_time.svg",
            title: format!("{name} on {backend}: latency p50 and p99 by operation"),
            x: XAxis::Seconds,
            y_label: "ms",
            series: series(latency),
        },
        Plot {
            file: "errors.svg",
            title: format!("{name} on {backend}: errors per second by kind"),
            x: XAxis::Seconds,
            y_label: "errors/s",
            series: series(errors),
        },
    ]
}

/// Throughput and resolve latency against concurrency, over `reports`
/// (one point a report, by its clients; the median over its trials).
///
/// # Errors
///
/// Fewer than two reports, reports of different environments or
/// backends, or two reports at the same concurrency.
pub fn concurrency_plots(reports: &[Report]) -> Result<Vec<Plot>, String> {
    let [first, ..] = reports else {
        return Err("no report to plot".into());
    };
    if reports.len() < 2 {
        return Err("throughput against concurrency needs reports at two or more --clients".into());
    }
    let mut by_clients: BTreeMap<u32, &Report> = BTreeMap::new();
    for r in reports {
        if r.environment.name != first.environment.name || r.backend.kind != first.backend.kind {
            return Err(format!(
                "reports of {} on {} and {} on {}: plot one environment on one backend",
                first.environment.name, first.backend.kind, r.environment.name, r.backend.kind
            ));
        }
        if by_clients.insert(r.load.clients, r).is_some() {
            return Err(format!(
                "two reports at {} clients: give one report per concurrency",
                r.load.clients
            ));
        }
    }
    let median = |r: &Report, figure: &str| r.spread.get(figure).map_or(0.0, |s| s.median);
    let line = |label: &str, figure: &str| Series {
        label: label.into(),
        points: by_clients
            .iter()
            .map(|(c, r)| (f64::from(*c), median(r, figure)))
            .collect(),
    };
    let name = &first.environment.name;
    let backend = first.backend.kind;
    Ok(vec![
        Plot {
            file: "throughput_concurrency.svg",
            title: format!("{name} on {backend}: throughput against concurrency"),
            x: XAxis::Clients,
            y_label: "per second",
            series: vec![
                line("resolves/s", "resolves_per_s"),
                line("calls/s", "operations_per_s"),
            ],
        },
        Plot {
            file: "latency_concurrency.svg",
            title: format!("{name} on {backend}: resolve latency against concurrency"),
            x: XAxis::Clients,
            y_label: "ms",
            series: vec![
                line("resolve p50", "resolve_p50_ms"),
                line("resolve p99", "resolve_p99_ms"),
            ],
        },
    ])
}

/// Draws `plot` as an SVG document.
pub fn svg(plot: &Plot) -> Result<String, String> {
    let mut out = String::new();
    {
        let root =
            SVGBackend::with_string(&mut out, (PLOT_WIDTH_PX, PLOT_HEIGHT_PX)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let all = plot.series.iter().flat_map(|s| s.points.iter());
        let x_min = match plot.x {
            XAxis::Percentile => nines(0.5),
            XAxis::Seconds | XAxis::Clients => 0.0,
        };
        let x_max = all
            .clone()
            .map(|p| p.0)
            .fold(x_min, f64::max)
            .max(x_min + 1e-3);
        let y_max = all.map(|p| p.1).fold(0.0f64, f64::max).max(1e-3) * 1.1;
        let mut chart = ChartBuilder::on(&root)
            .caption(&plot.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(x_min..x_max, 0.0..y_max)
            .map_err(|e| e.to_string())?;
        let x = plot.x;
        chart
            .configure_mesh()
            // Whole nines on the percentile axis: p90, p99, p99.9, p99.99.
            .x_labels(if x == XAxis::Percentile { 5 } else { 10 })
            .x_desc(x.label())
            .y_desc(plot.y_label)
            .x_label_formatter(&|v| x.tick(*v))
            .draw()
            .map_err(|e| e.to_string())?;
        for (i, s) in plot.series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(
                    s.points.iter().copied(),
                    color.stroke_width(2),
                ))
                .map_err(|e| e.to_string())?
                .label(s.label.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_sit_one_nine_apart_and_read_back_as_their_names() {
        assert!((nines(0.9) - 1.0).abs() < 1e-9);
        assert!((nines(0.99) - 2.0).abs() < 1e-9);
        assert_eq!(nines(1.0), MAX_NINES);
        assert_eq!(XAxis::Percentile.tick(nines(0.5)), "p50");
        assert_eq!(XAxis::Percentile.tick(2.0), "p99");
        assert_eq!(XAxis::Percentile.tick(3.0), "p99.9");
        assert_eq!(XAxis::Percentile.tick(MAX_NINES), "max");
    }
}
