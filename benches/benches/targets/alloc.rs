//! Memory per retained route on the in-memory backend, from
//! `connreg-route-bytes`: its counting allocator lives in that process
//! only, so the throughput figures of this one carry no allocation count.

use std::process::Command;

/// Bytes held per retained route, as `connreg-route-bytes` measured them.
pub(crate) fn memory_per_route() -> Result<f64, String> {
    let out = Command::new(env!("CARGO_BIN_EXE_connreg-route-bytes"))
        .output()
        .map_err(|e| format!("connreg-route-bytes did not start: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "connreg-route-bytes failed ({}): {}{}",
            out.status,
            stdout,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("bytes_per_route="))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("connreg-route-bytes printed no figure: {stdout:?}"))
}
