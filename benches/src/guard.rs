//! The regression guard CI runs (`connreg-bench-guard`): a short run of
//! the targets bench's in-memory figures, as ratios measured side by side
//! in one process, judged against the figures last recorded in
//! `benches/README.md` ("Regression guard"). A figure more than
//! [`TOLERANCE_DEFAULT`] worse than its recorded value fails the run.
//! Ratios only: a machine twice as slow moves both sides of each.
//!
//! The recorded figures are a Markdown table in that section, one row a
//! figure: ``| `name` | value | lower |`` (or `higher`: which way is
//! better).

use std::collections::BTreeMap;

/// How much worse than its recorded value a figure may measure: 30 %.
pub const TOLERANCE_DEFAULT: f64 = 0.3;

/// The heading of the README section that records the figures.
pub const SECTION: &str = "### Regression guard";

/// Which way a figure is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    /// A cost: lower is better.
    Lower,
    /// A rate: higher is better.
    Higher,
}

/// One recorded figure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Recorded {
    /// Its recorded value.
    pub value: f64,
    /// Which way is better.
    pub better: Better,
}

/// The recorded figures of the README text `readme`, by name.
///
/// # Errors
///
/// No [`SECTION`], a row that does not parse (named), or no row.
pub fn recorded(readme: &str) -> Result<BTreeMap<String, Recorded>, String> {
    let start = readme
        .find(SECTION)
        .ok_or_else(|| format!("no {SECTION:?} section"))?;
    let body = &readme[start + SECTION.len()..];
    let end = body.find("\n#").unwrap_or(body.len());
    let mut out = BTreeMap::new();
    for line in body[..end].lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let [name, value, better, ..] = cells.as_slice() else {
            return Err(format!(
                "row {line:?}: want | `name` | value | lower or higher |"
            ));
        };
        let value: f64 = value
            .replace(',', "")
            .parse()
            .map_err(|e| format!("row {line:?}: value {value:?}: {e}"))?;
        if !(value.is_finite() && value > 0.0) {
            return Err(format!("row {line:?}: the value must be above 0"));
        }
        let better = match *better {
            "lower" => Better::Lower,
            "higher" => Better::Higher,
            other => return Err(format!("row {line:?}: {other:?} is not lower or higher")),
        };
        out.insert(
            name.trim_matches('`').to_string(),
            Recorded { value, better },
        );
    }
    if out.is_empty() {
        return Err(format!("the {SECTION:?} section records no figure"));
    }
    Ok(out)
}

/// The worst `measured` may be against `recorded` with `tolerance`.
pub fn limit(recorded: Recorded, tolerance: f64) -> f64 {
    match recorded.better {
        Better::Lower => recorded.value * (1.0 + tolerance),
        Better::Higher => recorded.value / (1.0 + tolerance),
    }
}

/// True when `measured` is within `tolerance` of `recorded`.
pub fn holds(measured: f64, recorded: Recorded, tolerance: f64) -> bool {
    let l = limit(recorded, tolerance);
    match recorded.better {
        Better::Lower => measured <= l,
        Better::Higher => measured >= l,
    }
}

/// The median of `values` (of an even count, the mean of the middle two).
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const README: &str = "# x\n\n### Regression guard\n\nText.\n\n| figure | recorded | better |\n|---|---|---|\n| `a_cost` | 2.0 | lower |\n| `a_rate` | 1,000 | higher |\n\n### Next\n\n| `not_this` | 1 | lower |\n";

    #[test]
    fn the_recorded_figures_are_the_rows_of_their_section() {
        let r = recorded(README).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(
            r["a_cost"],
            Recorded {
                value: 2.0,
                better: Better::Lower
            }
        );
        assert_eq!(r["a_rate"].value, 1000.0);
        assert!(recorded("# none\n").unwrap_err().contains("no"));
        assert!(recorded(&README.replace("lower", "down")).is_err());
        assert!(recorded(&README.replace("2.0", "zero")).is_err());
        assert!(recorded(&README.replace("2.0", "0")).is_err());
    }

    #[test]
    fn a_figure_fails_past_thirty_percent_worse_either_way() {
        let cost = Recorded {
            value: 2.0,
            better: Better::Lower,
        };
        assert!(holds(2.59, cost, TOLERANCE_DEFAULT));
        assert!(!holds(2.61, cost, TOLERANCE_DEFAULT));
        assert!(holds(0.5, cost, TOLERANCE_DEFAULT));
        let rate = Recorded {
            value: 1.3,
            better: Better::Higher,
        };
        assert!(holds(1.01, rate, TOLERANCE_DEFAULT));
        assert!(!holds(0.99, rate, TOLERANCE_DEFAULT));
        assert!(holds(9.0, rate, TOLERANCE_DEFAULT));
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
