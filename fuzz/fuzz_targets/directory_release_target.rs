//! Fuzzes the release target parser (`connreg-router --target`, DIR-5):
//! whatever the bytes, it does not panic; an error names a path and says
//! what is wrong there; a target it accepts is written back and read again
//! unchanged.

#![no_main]

use connreg_directory::{DocumentError, ReleaseTarget};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    match ReleaseTarget::parse(bytes) {
        Ok(target) => {
            let written = serde_json::to_vec(&target).expect("a parsed target serialises");
            let again = ReleaseTarget::parse(&written);
            assert_eq!(
                again.as_ref(),
                Ok(&target),
                "the round trip changed the target"
            );
        }
        Err(error) => check_error(&error),
    }
});

/// Every error has a path and a reason past it; below the root the message
/// starts with the path.
fn check_error(error: &DocumentError) {
    let message = error.to_string();
    let path = error.path();
    assert!(!path.is_empty(), "{message:?} has no path");
    let reason = match message
        .strip_prefix(path)
        .and_then(|rest| rest.strip_prefix(": "))
    {
        Some(reason) => reason,
        None => {
            assert_eq!(path, "$", "{message:?} does not start with its path");
            message.as_str()
        }
    };
    assert!(!reason.trim().is_empty(), "{message:?} has no reason");
}
