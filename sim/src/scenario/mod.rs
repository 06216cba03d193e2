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
pub use schema::{
    BindingSpec, DatabaseReplication, Expect, Fleet, InstanceSpec, Lifecycle, Meta, MixEntry,
    Operation, OperationKind, Placement, ReaderEntry, RegistrySettings, ReplicaEntry, ReplicaGroup,
    Scenario, ScenarioSource, ScopeSpec, TenantGroup, TypeSpec, VersionSpec, Workload,
};
