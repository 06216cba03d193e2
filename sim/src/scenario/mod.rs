//! Scenario files: the schema, strict parsing and validation.
//!
//! The schema is documented for authors in `scenarios/README.md`; the types
//! here are its single source. Parsing is strict: an unknown key, a value
//! of the wrong type or out of range, or a reference to something the
//! fleet does not declare is an error naming the file and the line.
//!
//! - `schema`: the types of a scenario file, one a table.
//! - `faults`: the fault tables, `[[faults]]` and `[chaos]`.
//! - `generate`: the records tenant groups generate, the replicas of a
//!   replica group.
//! - `hosts`: the host names of a scenario's world, and host selectors.
//! - `parse`: reading and parsing a file, and the built-in standard
//!   scenario.
//! - `location`: the file line an error names.
//! - `validate`: everything the types alone do not check.

mod faults;
mod generate;
mod hosts;
mod location;
mod parse;
mod schema;
mod validate;

pub use faults::{Chaos, CutMode, FaultKind, FaultSpec, REGISTRY_OPS};
pub use generate::{Generated, GroupMember, group_host};
pub use hosts::{
    ADMIN_HOST, MAINTAINER_HOST, dispatcher_host, reader_host, registry_host, replica_host,
    select_hosts,
};
pub use parse::{STANDARD_SCENARIO, STANDARD_SCENARIO_PATH, ScenarioError};
/// The shipped scenario files (`scenarios/*.toml`), in name order.
#[cfg(test)]
pub(crate) fn shipped_files() -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(files.len() > 30, "{} scenario files", files.len());
    files
}

pub use schema::{
    BindingSpec, DatabaseReplication, Expect, Fleet, InstanceSpec, Lifecycle, Meta, MixEntry,
    Operation, OperationKind, Placement, ReaderEntry, RegistrySettings, ReplicaEntry, ReplicaGroup,
    Scenario, ScenarioSource, ScopeSpec, TenantGroup, TypeSpec, VersionSpec, Workload,
};
