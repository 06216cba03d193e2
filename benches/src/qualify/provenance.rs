//! Where a report came from: when (UTC), which build (git revision, crate
//! version, profile), which machine (host, CPU model and count, memory,
//! kernel), which contract (its SHA-256) and seed, and the run prefix.
//!
//! Machine facts come from `/proc` on Linux and are `unknown` elsewhere;
//! the git revision is recorded at build time (`build.rs`).

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The build and the contract behind a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// When the run started, UTC, RFC 3339.
    pub started_utc: String,
    /// When the report was made, UTC, RFC 3339.
    pub ended_utc: String,
    /// The commit the binary was built from, or `unknown`.
    pub git_revision: String,
    /// `true` when tracked files differed from that commit at build time.
    pub git_dirty: String,
    /// `connreg-benches`'s version.
    pub crate_version: String,
    /// SHA-256 of the contract file's bytes, hex.
    pub contract_sha256: String,
    /// The contract's seed.
    pub seed: u64,
    /// What every identifier the run wrote started with.
    pub run_prefix: String,
    /// The command line, with URL passwords replaced by `***`.
    pub command_line: String,
}

/// SHA-256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The build's git revision and whether its tree was dirty.
pub fn git() -> (String, String) {
    (
        env!("CONNREG_GIT_REVISION").to_string(),
        env!("CONNREG_GIT_DIRTY").to_string(),
    )
}

/// Now, UTC, as RFC 3339 with milliseconds.
pub fn now_utc() -> String {
    #[allow(
        clippy::disallowed_methods,
        reason = "provenance records the wall-clock time of the run"
    )]
    let now = SystemTime::now();
    utc_rfc3339(now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis()) as i64)
}

/// Milliseconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn utc_rfc3339(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// A run prefix no other run shares: `q`, 12 hex digits of the time and
/// process id, `-`.
pub fn run_prefix() -> String {
    #[allow(
        clippy::disallowed_methods,
        reason = "a run prefix must differ between runs, so it cannot come from the seed"
    )]
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mixed = sha256_hex(format!("{nanos}/{}", std::process::id()).as_bytes());
    format!("q{}-", &mixed[..12])
}

/// `argv` joined by spaces, with the password of any URL replaced.
pub fn command_line() -> String {
    std::env::args()
        .map(|a| redact_url(&a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `scheme://user:password@host…` with the password replaced by `***`.
pub fn redact_url(text: &str) -> String {
    let Some(scheme_end) = text.find("://") else {
        return text.to_string();
    };
    let rest = &text[scheme_end + 3..];
    let Some(at) = rest.find('@') else {
        return text.to_string();
    };
    let userinfo = &rest[..at];
    match userinfo.find(':') {
        Some(colon) => format!(
            "{}{}:***{}",
            &text[..scheme_end + 3],
            &userinfo[..colon],
            &rest[at..]
        ),
        None => text.to_string(),
    }
}

/// The first line of `/proc/cpuinfo` naming the CPU model.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name") || l.starts_with("Model"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
pub fn memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The kernel release.
pub fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// The host name.
pub fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates_count_from_the_epoch() {
        assert_eq!(utc_rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc_rfc3339(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(utc_rfc3339(1_798_761_599_000), "2026-12-31T23:59:59.000Z");
    }

    #[test]
    fn a_url_password_never_reaches_a_report() {
        assert_eq!(
            redact_url("postgres://ctl:s3cret@db:5432/reg"),
            "postgres://ctl:***@db:5432/reg"
        );
        assert_eq!(redact_url("postgres://ctl@db/reg"), "postgres://ctl@db/reg");
        assert_eq!(redact_url("--migrate"), "--migrate");
    }

    #[test]
    fn run_prefixes_differ_and_fit() {
        let a = run_prefix();
        assert!(a.len() <= super::super::limits::RUN_PREFIX_BYTES_MAX);
        assert_ne!(a, run_prefix());
    }
}
