//! Goal: a target is selected only when exactly one ready TCP endpoint
//! exists for the configured port name; zero and several fail with their
//! own errors (DIR-4).

mod common;

use common::{
    InstanceOptions, billing_document, billing_target, destination_of, file_routing, port_name,
};
use connreg_directory::{
    DependencyError, FileRouting, MemorySource, ResolveError, ResolvedTarget, Route, Router,
    Routing,
};

fn resolve(instances: &[InstanceOptions]) -> Result<ResolvedTarget, ResolveError> {
    let source = MemorySource::new(billing_document(instances));
    Router::start(file_routing(&source))
        .unwrap()
        .resolve(&billing_target())
}

fn not_ready(id: &str, address: &str) -> InstanceOptions {
    InstanceOptions {
        ready: false,
        ..InstanceOptions::ready(id, address)
    }
}

fn with_protocol(id: &str, address: &str, protocol: &str) -> InstanceOptions {
    InstanceOptions {
        protocol: protocol.into(),
        ..InstanceOptions::ready(id, address)
    }
}

fn without_invoke_port(id: &str, address: &str) -> InstanceOptions {
    InstanceOptions {
        ports: vec![("metrics".into(), 9090)],
        ..InstanceOptions::ready(id, address)
    }
}

// spec: DIR-4
#[test]
fn the_one_ready_tcp_endpoint_is_selected() {
    let resolved = resolve(&[
        not_ready("billing-agent-a", "10.0.4.17"),
        InstanceOptions::ready("billing-agent-b", "10.0.4.18"),
        with_protocol("billing-agent-c", "10.0.4.19", "udp"),
        without_invoke_port("billing-agent-d", "10.0.4.20"),
    ])
    .unwrap();
    assert_eq!(destination_of(&resolved), "10.0.4.18:8080");
    assert!(
        matches!(resolved.route(), Route::Instance { instance_id } if instance_id.as_str() == "billing-agent-b")
    );
}

// spec: DIR-4
#[test]
fn zero_ready_tcp_endpoints_fail_with_no_ready_endpoint() {
    let cases: [Vec<InstanceOptions>; 5] = [
        vec![],
        vec![not_ready("billing-agent-a", "10.0.4.17")],
        vec![with_protocol("billing-agent-a", "10.0.4.17", "udp")],
        vec![with_protocol("billing-agent-a", "10.0.4.17", "sctp")],
        vec![without_invoke_port("billing-agent-a", "10.0.4.17")],
    ];
    for instances in cases {
        let error = resolve(&instances).unwrap_err();
        assert!(
            matches!(
                &error,
                ResolveError::Dependency(DependencyError::NoReadyEndpoint { port_name, .. })
                    if port_name.as_str() == "invoke"
            ),
            "{instances:?}: {error}"
        );
    }
}

// spec: DIR-4
#[test]
fn several_ready_tcp_endpoints_fail_with_their_count() {
    let error = resolve(&[
        InstanceOptions::ready("billing-agent-a", "10.0.4.17"),
        not_ready("billing-agent-b", "10.0.4.18"),
        InstanceOptions::ready("billing-agent-c", "10.0.4.19"),
        InstanceOptions::ready("billing-agent-d", "billing-agent-d.stack.internal"),
    ])
    .unwrap_err();
    assert_eq!(
        error,
        ResolveError::Dependency(DependencyError::SeveralReadyEndpoints {
            release_id: billing_target().release.release_id,
            port_name: port_name("invoke"),
            count: 3,
        })
    );
}

// spec: DIR-4
#[test]
fn the_configured_port_name_decides_which_port_and_which_instances_count() {
    let source = MemorySource::new(billing_document(&[
        InstanceOptions::ready("billing-agent-a", "10.0.4.17"),
        InstanceOptions {
            ports: vec![("invoke".into(), 8080), ("admin".into(), 7070)],
            ..InstanceOptions::ready("billing-agent-b", "10.0.4.18")
        },
    ]));
    let router = Router::start(Routing::ConfigCenterFile(FileRouting {
        source: &source,
        port_name: port_name("admin"),
    }))
    .unwrap();
    let resolved = router.resolve(&billing_target()).unwrap();
    assert_eq!(destination_of(&resolved), "10.0.4.18:7070");

    let router = Router::start(Routing::ConfigCenterFile(FileRouting {
        source: &source,
        port_name: port_name("metrics"),
    }))
    .unwrap();
    let resolved = router.resolve(&billing_target()).unwrap();
    assert_eq!(destination_of(&resolved), "10.0.4.17:9090");

    let router = Router::start(Routing::ConfigCenterFile(FileRouting {
        source: &source,
        port_name: port_name("invoke"),
    }))
    .unwrap();
    assert!(matches!(
        router.resolve(&billing_target()),
        Err(ResolveError::Dependency(
            DependencyError::SeveralReadyEndpoints { count: 2, .. }
        ))
    ));
}

// spec: DIR-4
#[test]
fn a_host_name_endpoint_is_selected_as_written() {
    let resolved = resolve(&[InstanceOptions::ready(
        "billing-agent-a",
        "billing-agent-a.stack.internal",
    )])
    .unwrap();
    assert_eq!(
        destination_of(&resolved),
        "billing-agent-a.stack.internal:8080"
    );
}
