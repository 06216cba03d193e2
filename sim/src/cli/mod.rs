//! Subcommands with more to them than a few lines.
//!
//! - `sweep`: a range of seeds on worker threads, shards, JUnit and JSON
//!   reports, progress, Ctrl-C.
//! - `shrink`: a failing seed's scenario, shrunk to a smaller file.
//! - `probes`: which scenarios reach each planted bug's code path.

pub(crate) mod probes;
pub(crate) mod shrink;
pub(crate) mod sweep;
