//! Fuzzes the simulator's scenario parser (`Scenario::parse`, the text of
//! `connreg-sim run --scenario FILE`): whatever the text, it does not
//! panic; an error names the file and a line inside the text and says what
//! is wrong; a scenario it accepts is written back as TOML and read again
//! to the same scenario.

#![no_main]

use connreg_sim::{Scenario, ScenarioError};
use libfuzzer_sys::fuzz_target;

const FILE: &str = "fuzz.toml";

fuzz_target!(|bytes: &[u8]| {
    // `Scenario::load` reads the file as UTF-8 and refuses anything else.
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    match Scenario::parse(FILE, text) {
        Ok(scenario) => {
            let written = toml::to_string(&scenario).expect("a parsed scenario serialises");
            let again = Scenario::parse(FILE, &written).unwrap_or_else(|e| {
                panic!("a scenario written back is refused: {e}\n{written}")
            });
            let rewritten = toml::to_string(&again).expect("a parsed scenario serialises");
            assert_eq!(written, rewritten, "the round trip changed the scenario");
        }
        Err(error) => check_error(text, &error),
    }
});

/// Every error says `file:line: message`, with a line of the text.
fn check_error(text: &str, error: &ScenarioError) {
    let message = error.to_string();
    match error {
        ScenarioError::Invalid {
            file,
            line,
            message: reason,
        } => {
            assert_eq!(file, FILE, "{message:?} names another file");
            let lines = text.split('\n').count();
            assert!(
                (1..=lines).contains(line),
                "{message:?}: line {line} is outside the text's {lines} lines"
            );
            assert!(!reason.trim().is_empty(), "{message:?} has no reason");
        }
        ScenarioError::Read { .. } => panic!("{message:?}: a read error from text"),
        // A variant added later: its message is checked below.
        _ => {}
    }
    assert!(!message.trim().is_empty(), "an error without a message");
}
