//! SVG plots of a report's timelines, drawn with plotters' SVG backend
//! (no system libraries, no fonts: text is left to the SVG viewer).
//!
//! Trials are drawn back to back on one time axis (seconds of measured
//! run; warm-ups are not drawn), one line per series:
//!
//! | file | series |
//! |---|---|
//! | `throughput.svg` | calls per second of each operation |
//! | `latency.svg` | p50 and p99 latency of each operation, in ms |
//! | `errors.svg` | errors per second of each kind (one `none` line when there were none) |

use std::collections::BTreeMap;

use plotters::prelude::*;

use super::report::Report;
use super::stats::Operation;

/// Width of every plot, in pixels.
pub const PLOT_WIDTH_PX: u32 = 960;
/// Height of every plot, in pixels.
pub const PLOT_HEIGHT_PX: u32 = 480;

/// One named line: (seconds, value) points.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Its legend label.
    pub label: String,
    /// Its points, in time order.
    pub points: Vec<(f64, f64)>,
}

/// Each plot's file name, title, y-axis label and series.
pub fn plots(report: &Report) -> Vec<(&'static str, String, &'static str, Vec<Series>)> {
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
    let series = |m: BTreeMap<String, Vec<(f64, f64)>>| -> Vec<Series> {
        m.into_iter()
            .map(|(label, points)| Series { label, points })
            .collect()
    };
    let name = &report.environment.name;
    let backend = report.backend.kind;
    vec![
        (
            "throughput.svg",
            format!("{name} on {backend}: calls per second by operation"),
            "calls/s",
            series(throughput),
        ),
        (
            "latency.svg",
            format!("{name} on {backend}: latency p50 and p99 by operation"),
            "ms",
            series(latency),
        ),
        (
            "errors.svg",
            format!("{name} on {backend}: errors per second by kind"),
            "errors/s",
            series(errors),
        ),
    ]
}

/// Draws `series` as an SVG document.
pub fn svg(title: &str, y_label: &str, series: &[Series]) -> Result<String, String> {
    let mut out = String::new();
    {
        let root =
            SVGBackend::with_string(&mut out, (PLOT_WIDTH_PX, PLOT_HEIGHT_PX)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let all = series.iter().flat_map(|s| s.points.iter());
        let x_max = all.clone().map(|p| p.0).fold(0.0f64, f64::max).max(1e-3);
        let y_max = all.map(|p| p.1).fold(0.0f64, f64::max).max(1e-3) * 1.1;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("seconds of measured run")
            .y_desc(y_label)
            .draw()
            .map_err(|e| e.to_string())?;
        for (i, s) in series.iter().enumerate() {
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
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}
