//! Fuzzes the trace reader of `connreg-sim check-trace FILE`
//! (`connreg_sim::recheck`, fed the lines of a file exactly as the command
//! feeds them): whatever the bytes, it neither panics nor hangs; an error
//! names the line and says what is wrong, or says the trace is empty when
//! no line holds anything; a re-check it completes counts
//! no more records than the input has lines, does not pass a trace without
//! its end line, and every violation and mismatch it reports says what it
//! is.

#![no_main]

use std::io::BufRead;

use connreg_sim::recheck;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    match recheck(std::io::BufReader::new(bytes).lines()) {
        Ok(verdict) => {
            let lines = bytes.split(|b| *b == b'\n').count() as u64;
            assert!(
                verdict.records <= lines,
                "{} records from {lines} lines",
                verdict.records
            );
            for violation in &verdict.violations {
                assert!(
                    !violation.invariant.trim().is_empty(),
                    "a violation without its invariant: {violation:?}"
                );
                assert!(
                    !violation.detail.trim().is_empty(),
                    "a violation without a detail: {violation:?}"
                );
            }
            for mismatch in &verdict.mismatches {
                assert!(!mismatch.trim().is_empty(), "a mismatch without a message");
            }
            // A trace without its end line never passes.
            if verdict.recorded_ok.is_none() {
                assert!(!verdict.ok(), "a trace without an end line passes");
            }
        }
        Err(message) => {
            assert!(!message.trim().is_empty(), "an error without a message");
            if message.starts_with("the trace is empty") {
                // Only an input with no line to read is empty.
                let blank = std::str::from_utf8(bytes)
                    .is_ok_and(|text| text.lines().all(|l| l.trim().is_empty()));
                assert!(blank, "{message:?} for an input with lines");
                return;
            }
            let reason = message
                .strip_prefix("line ")
                .and_then(|rest| rest.split_once(": "))
                .filter(|(number, _)| number.parse::<u64>().is_ok_and(|n| n >= 1))
                .map(|(_, reason)| reason);
            assert!(
                reason.is_some_and(|r| !r.trim().is_empty()),
                "{message:?} does not say `line N: what`"
            );
        }
    }
});
