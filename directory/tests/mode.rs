//! Goal: the routing mode is chosen explicitly at start, parsed strictly,
//! never inferred and never changed by what happens to the directory (DIR-2).

mod common;

use std::path::PathBuf;

use common::{billing_target, corrupted, file_router, one_ready, port_name};
use connreg_directory::{
    ConfigError, DEFAULT_PORT_NAME, MemorySource, Mode, Readiness, Route, Router, Routing,
    RoutingParts,
};

// spec: DIR-2
#[test]
fn modes_parse_only_from_their_exact_names() {
    assert_eq!("direct".parse::<Mode>(), Ok(Mode::Direct));
    assert_eq!(
        "config_center_file".parse::<Mode>(),
        Ok(Mode::ConfigCenterFile)
    );
    for text in [
        "",
        "Direct",
        "DIRECT",
        " direct",
        "direct\n",
        "file",
        "config-center-file",
        "config_center",
        "kubernetes",
        "auto",
    ] {
        assert!(
            matches!(text.parse::<Mode>(), Err(ConfigError::UnknownMode { .. })),
            "{text:?}"
        );
    }
}

// spec: DIR-2
#[test]
fn a_mode_prints_as_it_is_written() {
    assert_eq!(Mode::Direct.to_string(), "direct");
    assert_eq!(Mode::ConfigCenterFile.to_string(), "config_center_file");
}

// spec: DIR-2
#[test]
fn direct_mode_refuses_a_directory_path_instead_of_ignoring_it() {
    let parts = RoutingParts {
        mode: Mode::Direct,
        directory: Some(PathBuf::from("directory.json")),
        port_name: None,
    };
    assert_eq!(
        Routing::from_parts(parts),
        Err(ConfigError::DirectoryWithDirectMode)
    );
}

// spec: DIR-2
#[test]
fn direct_mode_refuses_a_port_name_instead_of_ignoring_it() {
    let parts = RoutingParts {
        mode: Mode::Direct,
        directory: None,
        port_name: Some(port_name("invoke")),
    };
    assert_eq!(
        Routing::from_parts(parts),
        Err(ConfigError::PortNameWithDirectMode)
    );
}

// spec: DIR-2
#[test]
fn file_mode_requires_a_directory_path() {
    let parts = RoutingParts {
        mode: Mode::ConfigCenterFile,
        directory: None,
        port_name: Some(port_name("invoke")),
    };
    assert_eq!(
        Routing::from_parts(parts),
        Err(ConfigError::DirectoryMissing)
    );
}

// spec: DIR-2
#[test]
fn file_mode_reads_exactly_the_path_it_was_given() {
    let parts = RoutingParts {
        mode: Mode::ConfigCenterFile,
        directory: Some(PathBuf::from("/etc/connreg/directory.json")),
        port_name: None,
    };
    let Ok(Routing::ConfigCenterFile(file)) = Routing::from_parts(parts) else {
        panic!("file mode with a path is valid");
    };
    assert_eq!(
        file.source.path(),
        PathBuf::from("/etc/connreg/directory.json")
    );
    assert_eq!(file.port_name.as_str(), DEFAULT_PORT_NAME);
}

// spec: DIR-2
#[test]
fn direct_mode_uses_the_canonical_endpoint_and_reads_no_directory() {
    let router = Router::<MemorySource>::start(Routing::Direct).unwrap();
    let target = billing_target();
    let resolved = router.resolve(&target).unwrap();
    assert_eq!(resolved.route(), &Route::Direct);
    assert_eq!(resolved.destination(), &target.canonical_endpoint);
    assert_eq!(resolved.target(), &target);
    assert_eq!(router.readiness(&target), Readiness::Ok);
    assert_eq!(router.mode(), Mode::Direct);
}

// spec: DIR-2
#[test]
fn file_mode_never_falls_back_to_direct_mode() {
    let source = MemorySource::new(one_ready("billing-agent-a", "10.0.4.17"));
    let router = file_router(&source);
    let target = billing_target();
    source.replace(corrupted());
    assert!(router.resolve(&target).is_err());
    source.delete();
    assert!(router.resolve(&target).is_err());
    source.deny_reads();
    assert!(router.resolve(&target).is_err());
    assert_eq!(router.mode(), Mode::ConfigCenterFile);
}
