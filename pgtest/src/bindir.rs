//! Finding the PostgreSQL server binaries (initdb, pg_ctl, postgres, pgbench).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::command;
use crate::source::non_empty_var;

/// Environment variable naming the folder of the PostgreSQL server binaries.
pub const BINDIR_VAR: &str = "CONNREG_PG_BINDIR";

/// Where Debian and Ubuntu install each major version's server binaries.
const DEBIAN_VERSIONS_DIR: &str = "/usr/lib/postgresql";

/// The folder holding the PostgreSQL server binaries, pgbench among them.
///
/// Looked up in this order, each time it is called:
/// 1. [`BINDIR_VAR`] (`CONNREG_PG_BINDIR`), taken as given;
/// 2. `pg_config --bindir`, if that folder holds `initdb`, `pg_ctl` and
///    `postgres` (on Debian, `pg_config` may come from the client-only
///    `libpq-dev`);
/// 3. the newest `/usr/lib/postgresql/<major>/bin` holding them.
///
/// This does not depend on which server the tests use: a bench running
/// pgbench against a [`CONNREG_TEST_DATABASE_URL`](crate::DATABASE_URL_VAR)
/// server still finds pgbench here.
pub fn bindir() -> Option<PathBuf> {
    if let Some(dir) = non_empty_var(BINDIR_VAR) {
        return Some(PathBuf::from(dir));
    }
    let from_pg_config = command::probe(Command::new("pg_config").arg("--bindir"))
        .map(PathBuf::from)
        .filter(|dir| has_server_binaries(dir));
    from_pg_config.or_else(newest_debian_bindir)
}

/// Whether `dir` holds what starting a local cluster needs.
pub(crate) fn has_server_binaries(dir: &Path) -> bool {
    ["initdb", "pg_ctl", "postgres"]
        .iter()
        .all(|program| dir.join(program).is_file())
}

fn newest_debian_bindir() -> Option<PathBuf> {
    std::fs::read_dir(DEBIAN_VERSIONS_DIR)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let major = major_version(&entry.file_name().to_string_lossy())?;
            let dir = entry.path().join("bin");
            has_server_binaries(&dir).then_some((major, dir))
        })
        .max()
        .map(|(_, dir)| dir)
}

/// `"15"` → 15, `"9.6"` → 9 (numeric, so that 10 sorts after 9.6).
fn major_version(name: &str) -> Option<u32> {
    name.split('.').next()?.parse().ok()
}
