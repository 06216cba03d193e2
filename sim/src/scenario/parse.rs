//! Reading a scenario file and parsing its text into a [`Scenario`],
//! strictly: any error names the file and the line. Also the built-in
//! standard scenario.

use std::path::Path;

use super::location::line_of;
use super::{Scenario, ScenarioSource};

/// The standard scenario, built in: what `connreg-sim` runs with no
/// arguments.
pub const STANDARD_SCENARIO: &str = include_str!("../../../scenarios/0001_steady_state.toml");

/// The standard scenario's path relative to the workspace root.
pub const STANDARD_SCENARIO_PATH: &str = "scenarios/0001_steady_state.toml";

/// A scenario file that could not be read or is invalid.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{file}: cannot read: {source}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a valid scenario.
    #[error("{file}:{line}: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// The 1-based line of the offending key or entry.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

impl Scenario {
    /// Reads and validates a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            file: file.clone(),
            source,
        })?;
        Scenario::parse(&file, &text)
    }

    /// The built-in standard scenario.
    pub fn standard() -> Scenario {
        Scenario::parse(STANDARD_SCENARIO_PATH, STANDARD_SCENARIO)
            .unwrap_or_else(|e| panic!("the built-in standard scenario is invalid: {e}"))
    }

    /// Parses and validates scenario text; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Scenario, ScenarioError> {
        let mut scenario: Scenario = toml::from_str(text).map_err(|e| ScenarioError::Invalid {
            file: file.to_string(),
            line: e.span().map(|s| line_of(text, s.start)).unwrap_or(1),
            message: e.message().to_string(),
        })?;
        scenario
            .generate()
            .and_then(|()| scenario.validate())
            .map_err(|(at, message)| ScenarioError::Invalid {
                file: file.to_string(),
                line: line_of(text, at.offset(text)),
                message,
            })?;
        scenario.source = Some(ScenarioSource::of(file, text));
        Ok(scenario)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standard_scenario_parses() {
        let s = Scenario::standard();
        assert_eq!(s.scenario.name, "steady_state");
    }

    #[test]
    fn an_unknown_key_names_the_file_and_line() {
        let text = STANDARD_SCENARIO.replacen("[workload]\n", "[workload]\nbogus = 1\n", 1);
        let line = text.lines().position(|l| l == "bogus = 1").unwrap() + 1;
        let err = Scenario::parse("x.toml", &text).unwrap_err();
        match err {
            ScenarioError::Invalid {
                file,
                line: l,
                message,
            } => {
                assert_eq!(file, "x.toml");
                assert_eq!(l, line);
                assert!(message.contains("bogus"), "{message}");
            }
            other => panic!("{other}"),
        }
    }

    #[test]
    fn a_dangling_reference_names_the_entry_line() {
        let text = format!(
            "{STANDARD_SCENARIO}\n[[fleet.replicas]]\nid = \"zz\"\ninstance = \"nope\"\nregion = \"eu\"\nzone = \"eu-a\"\ncapacity = 1\n"
        );
        let line = text
            .lines()
            .collect::<Vec<_>>()
            .iter()
            .rposition(|l| *l == "[[fleet.replicas]]")
            .unwrap()
            + 1;
        let err = Scenario::parse("y.toml", &text).unwrap_err();
        match err {
            ScenarioError::Invalid {
                line: l, message, ..
            } => {
                assert_eq!(l, line, "{message}");
                assert!(message.contains("nope"), "{message}");
            }
            other => panic!("{other}"),
        }
    }
}
