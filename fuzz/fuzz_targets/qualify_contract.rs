//! Fuzzes the qualification environment contract parser
//! (`Contract::parse`, the text of `connreg-qualify --env FILE`): whatever
//! the text, it does not panic; an error names the file, a line and column
//! inside the text, and says what is wrong; a contract it accepts is
//! written back as TOML and read again unchanged.

#![no_main]

use connreg_benches::qualify::{Contract, ContractError};
use libfuzzer_sys::fuzz_target;

const FILE: &str = "fuzz.toml";

fuzz_target!(|bytes: &[u8]| {
    // `Contract::load` reads the file as UTF-8 and refuses anything else.
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    match Contract::parse(FILE, text) {
        Ok(contract) => {
            let written = toml::to_string(&contract).expect("a parsed contract serialises");
            let again = Contract::parse(FILE, &written).unwrap_or_else(|e| {
                panic!("a contract written back is refused: {e}\n{written}")
            });
            assert_eq!(again, contract, "the round trip changed the contract");
        }
        Err(error) => check_error(text, &error),
    }
});

/// Every error says `file:line:column: message`, at a place in the text.
fn check_error(text: &str, error: &ContractError) {
    let message = error.to_string();
    assert_eq!(error.file, FILE, "{message:?} names another file");
    let lines: Vec<&str> = text.split('\n').collect();
    assert!(
        (1..=lines.len()).contains(&error.line),
        "{message:?}: line {} is outside the text's {} lines",
        error.line,
        lines.len()
    );
    // Columns count bytes, as the parser's spans do.
    let columns = lines[error.line - 1].len() + 1;
    assert!(
        (1..=columns).contains(&error.column),
        "{message:?}: column {} is outside its line's {columns} bytes",
        error.column
    );
    assert!(!error.message.trim().is_empty(), "{message:?} has no reason");
}
