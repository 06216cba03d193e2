//! Goal: the `router-instance-directory.v1` parser accepts exactly the
//! documented schema and names the offending path of everything else (DIR-1).

mod common;

use common::{
    InstanceOptions, billing_document, billing_release, document_json, search_release, target_json,
    to_bytes,
};
use connreg_directory::limits::{
    DOCUMENT_BYTES_MAX, INSTANCES_PER_TARGET_MAX, PORTS_PER_INSTANCE_MAX, TARGETS_MAX,
};
use connreg_directory::{DocumentError, InstanceDirectory, PortName, Protocol, ReleaseTarget};
use serde_json::{Value, json};

/// An edit of the example document.
type Edit = fn(&mut Value);

const EXAMPLE: &str = include_str!("../examples/router-instance-directory.v1.json");

fn parse_value(value: &Value) -> Result<InstanceDirectory, DocumentError> {
    InstanceDirectory::parse(&to_bytes(value))
}

fn parse_text(text: &str) -> Result<InstanceDirectory, DocumentError> {
    InstanceDirectory::parse(text.as_bytes())
}

/// The example document with `edit` applied to its JSON value.
fn edited(edit: impl FnOnce(&mut Value)) -> Result<InstanceDirectory, DocumentError> {
    let mut value: Value = serde_json::from_str(EXAMPLE).unwrap();
    edit(&mut value);
    parse_value(&value)
}

fn error_path(result: Result<InstanceDirectory, DocumentError>) -> (DocumentError, String) {
    let error = result.expect_err("the document must be refused");
    let path = error.path().to_owned();
    (error, path)
}

// spec: DIR-1
#[test]
fn the_example_document_parses_into_its_targets_and_instances() {
    let directory = parse_text(EXAMPLE).unwrap();
    assert_eq!(directory.targets().len(), 2);
    let billing = &directory.targets()[0];
    assert_eq!(billing.release().agent_id, "billing-agent");
    let first = &billing.instances()[0];
    assert_eq!(first.instance_id().as_str(), "billing-agent-a");
    assert_eq!(first.address().as_str(), "10.0.4.17");
    assert_eq!(first.protocol(), Protocol::Tcp);
    assert!(first.is_ready());
    assert_eq!(
        first.port(&PortName::new("invoke").unwrap()).map(u16::from),
        Some(8080)
    );
    assert!(!billing.instances()[1].is_ready());
}

// spec: DIR-1
#[test]
fn a_parsed_document_serialises_back_to_the_same_document() {
    let directory = parse_text(EXAMPLE).unwrap();
    let written = serde_json::to_value(&directory).unwrap();
    let original: Value = serde_json::from_str(EXAMPLE).unwrap();
    assert_eq!(written, original);
    assert_eq!(parse_value(&written).unwrap(), directory);
}

// spec: DIR-1
#[test]
fn the_version_must_match_exactly() {
    for version in [
        json!("router-instance-directory.v2"),
        json!("router-instance-directory.v1 "),
        json!("Router-Instance-Directory.v1"),
        json!("router-instance-directory"),
        json!(""),
    ] {
        let (error, path) = error_path(edited(|doc| doc["version"] = version.clone()));
        assert!(
            matches!(error, DocumentError::UnsupportedVersion { .. }),
            "{version}: {error}"
        );
        assert_eq!(path, "version");
    }
    let (error, path) = error_path(edited(|doc| doc["version"] = json!(1)));
    assert!(matches!(error, DocumentError::WrongType { .. }), "{error}");
    assert_eq!(path, "version");
    let (error, path) = error_path(edited(|doc| {
        doc.as_object_mut().unwrap().remove("version");
    }));
    assert!(
        matches!(error, DocumentError::MissingField { .. }),
        "{error}"
    );
    assert_eq!(path, "version");
}

// spec: DIR-1
#[test]
fn a_newer_version_is_reported_as_such_before_its_unknown_fields() {
    let (error, _) = error_path(edited(|doc| {
        doc["version"] = json!("router-instance-directory.v2");
        doc["weights"] = json!({});
    }));
    assert!(
        matches!(error, DocumentError::UnsupportedVersion { .. }),
        "{error}"
    );
}

// spec: DIR-1
#[test]
fn unknown_fields_are_refused_at_every_level_with_their_path() {
    let cases: [(&str, Edit); 5] = [
        ("weights", |doc| doc["weights"] = json!(1)),
        ("targets[1].policy", |doc| {
            doc["targets"][1]["policy"] = json!("round_robin")
        }),
        ("targets[0].release.region", |doc| {
            doc["targets"][0]["release"]["region"] = json!("eu")
        }),
        ("targets[1].instances[0].zone", |doc| {
            doc["targets"][1]["instances"][0]["zone"] = json!("a")
        }),
        ("targets[0].instances[1].weight", |doc| {
            doc["targets"][0]["instances"][1]["weight"] = json!(5)
        }),
    ];
    for (expected, edit) in cases {
        let (error, path) = error_path(edited(edit));
        assert!(
            matches!(error, DocumentError::UnknownField { .. }),
            "{error}"
        );
        assert_eq!(path, expected);
    }
}

// spec: DIR-1
#[test]
fn missing_fields_are_refused_with_their_path() {
    for field in ["instance_id", "address", "protocol", "ready", "ports"] {
        let (error, path) = error_path(edited(|doc| {
            doc["targets"][1]["instances"][0]
                .as_object_mut()
                .unwrap()
                .remove(field);
        }));
        assert!(
            matches!(error, DocumentError::MissingField { .. }),
            "{error}"
        );
        assert_eq!(path, format!("targets[1].instances[0].{field}"));
    }
    let (error, path) = error_path(edited(|doc| {
        doc["targets"][0]["release"]
            .as_object_mut()
            .unwrap()
            .remove("credential_audience");
    }));
    assert!(
        matches!(error, DocumentError::MissingField { .. }),
        "{error}"
    );
    assert_eq!(path, "targets[0].release.credential_audience");
}

// spec: DIR-1
#[test]
fn duplicate_keys_are_refused_with_the_path_of_the_second() {
    let text = EXAMPLE.replacen(r#""ready": true,"#, r#""ready": true, "ready": false,"#, 1);
    let (error, path) = error_path(parse_text(&text));
    assert!(
        matches!(error, DocumentError::DuplicateKey { .. }),
        "{error}"
    );
    assert_eq!(path, "targets[0].instances[0].ready");

    let text = EXAMPLE.replacen(
        r#""invoke": 8080,"#,
        r#""invoke": 8080, "invoke": 8081,"#,
        1,
    );
    let (error, path) = error_path(parse_text(&text));
    assert!(
        matches!(error, DocumentError::DuplicateKey { .. }),
        "{error}"
    );
    assert_eq!(path, "targets[0].instances[0].ports.invoke");

    let text = EXAMPLE.replacen(
        r#""version": "router-instance-directory.v1","#,
        r#""version": "router-instance-directory.v1", "version": "router-instance-directory.v1","#,
        1,
    );
    let (error, path) = error_path(parse_text(&text));
    assert!(
        matches!(error, DocumentError::DuplicateKey { .. }),
        "{error}"
    );
    assert_eq!(path, "version");
}

// spec: DIR-1
#[test]
fn duplicate_targets_are_refused() {
    let document = document_json(vec![
        target_json(billing_release(), &[InstanceOptions::default()]),
        target_json(search_release(), &[]),
        target_json(billing_release(), &[]),
    ]);
    let (error, path) = error_path(parse_value(&document));
    assert_eq!(
        error,
        DocumentError::DuplicateTarget {
            path: "targets[2].release".into(),
            first: "targets[0].release".into(),
        }
    );
    assert_eq!(path, "targets[2].release");
}

// spec: DIR-1
#[test]
fn releases_differing_in_one_field_are_distinct_targets() {
    let mut other = billing_release();
    other["card_digest"] = json!("sha256:0000");
    let document = document_json(vec![
        target_json(billing_release(), &[]),
        target_json(other, &[]),
    ]);
    assert_eq!(parse_value(&document).unwrap().targets().len(), 2);
}

// spec: DIR-1
#[test]
fn duplicate_instance_ids_within_a_target_are_refused() {
    let bytes = billing_document(&[
        InstanceOptions::ready("billing-agent-a", "10.0.4.17"),
        InstanceOptions::ready("billing-agent-b", "10.0.4.18"),
        InstanceOptions::ready("billing-agent-a", "10.0.4.19"),
    ]);
    let (error, path) = error_path(InstanceDirectory::parse(&bytes));
    assert!(
        matches!(error, DocumentError::DuplicateInstance { .. }),
        "{error}"
    );
    assert_eq!(path, "targets[0].instances[2].instance_id");
}

// spec: DIR-1
#[test]
fn empty_names_are_refused_with_their_path() {
    let cases: [(&str, Edit); 4] = [
        ("targets[1].instances[0].instance_id", |doc| {
            doc["targets"][1]["instances"][0]["instance_id"] = json!("")
        }),
        ("targets[0].release.agent_id", |doc| {
            doc["targets"][0]["release"]["agent_id"] = json!("")
        }),
        ("targets[0].instances[0].address", |doc| {
            doc["targets"][0]["instances"][0]["address"] = json!("")
        }),
        (r#"targets[0].instances[0].ports[""]"#, |doc| {
            doc["targets"][0]["instances"][0]["ports"][""] = json!(1)
        }),
    ];
    for (expected, edit) in cases {
        let (error, path) = error_path(edited(edit));
        assert!(matches!(error, DocumentError::EmptyName { .. }), "{error}");
        assert_eq!(path, expected);
    }
}

// spec: DIR-1
#[test]
fn malformed_names_are_refused_with_their_path() {
    let (error, path) = error_path(edited(|doc| {
        doc["targets"][1]["instances"][0]["ports"]["gRPC"] = json!(50051)
    }));
    assert!(
        matches!(error, DocumentError::InvalidName { .. }),
        "{error}"
    );
    assert_eq!(path, "targets[1].instances[0].ports.gRPC");
    let (error, path) = error_path(edited(|doc| {
        doc["targets"][0]["release"]["capability"] = json!("invoice.create\n")
    }));
    assert!(
        matches!(error, DocumentError::InvalidName { .. }),
        "{error}"
    );
    assert_eq!(path, "targets[0].release.capability");
    let (error, _) = error_path(edited(|doc| {
        doc["targets"][0]["instances"][0]["instance_id"] = json!("a/b")
    }));
    assert!(
        matches!(error, DocumentError::InvalidName { .. }),
        "{error}"
    );
}

// spec: DIR-1
#[test]
fn invalid_addresses_are_refused_with_their_path() {
    for address in [
        "10.0.0.256",
        "host:8080",
        "http://host",
        "0.0.0.0",
        "a..b",
        "[::1]",
    ] {
        let (error, path) = error_path(edited(|doc| {
            doc["targets"][1]["instances"][1]["address"] = json!(address)
        }));
        assert!(
            matches!(error, DocumentError::InvalidAddress { .. }),
            "{address}: {error}"
        );
        assert_eq!(path, "targets[1].instances[1].address");
    }
}

// spec: DIR-1
#[test]
fn invalid_ports_are_refused_with_their_path() {
    for port in [
        json!(0),
        json!(65536),
        json!(-1),
        json!(80.5),
        json!("50051"),
        json!(null),
    ] {
        let (error, path) = error_path(edited(|doc| {
            doc["targets"][1]["instances"][0]["ports"]["grpc"] = port.clone()
        }));
        assert!(
            matches!(error, DocumentError::InvalidPort { .. }),
            "{port}: {error}"
        );
        assert_eq!(path, "targets[1].instances[0].ports.grpc");
    }
}

// spec: DIR-1
#[test]
fn unknown_protocols_are_refused() {
    for protocol in ["TCP", "http", "quic", ""] {
        let (error, path) = error_path(edited(|doc| {
            doc["targets"][0]["instances"][0]["protocol"] = json!(protocol)
        }));
        assert!(
            matches!(error, DocumentError::UnknownProtocol { .. }),
            "{error}"
        );
        assert_eq!(path, "targets[0].instances[0].protocol");
    }
}

// spec: DIR-1
#[test]
fn values_of_the_wrong_type_are_refused_with_their_path() {
    let cases: [(&str, Edit); 5] = [
        ("targets", |doc| doc["targets"] = json!({})),
        ("targets[0]", |doc| doc["targets"][0] = json!([])),
        ("targets[0].instances[0].ready", |doc| {
            doc["targets"][0]["instances"][0]["ready"] = json!("yes")
        }),
        ("targets[0].instances[0].ports", |doc| {
            doc["targets"][0]["instances"][0]["ports"] = json!([8080])
        }),
        ("targets[0].release.card_version", |doc| {
            doc["targets"][0]["release"]["card_version"] = json!(4)
        }),
    ];
    for (expected, edit) in cases {
        let (error, path) = error_path(edited(edit));
        assert!(matches!(error, DocumentError::WrongType { .. }), "{error}");
        assert_eq!(path, expected);
    }
    let (error, path) = error_path(parse_text("[]"));
    assert!(matches!(error, DocumentError::WrongType { .. }), "{error}");
    assert_eq!(path, "$");
}

// spec: DIR-1
#[test]
fn text_that_is_not_one_json_value_is_a_syntax_error() {
    for text in [
        "",
        "{",
        &EXAMPLE[..EXAMPLE.len() / 2],
        &format!("{EXAMPLE} {{}}"),
        "{\"version\": \"router-instance-directory.v1\", \"targets\": [],}",
    ] {
        let (error, path) = error_path(parse_text(text));
        assert!(matches!(error, DocumentError::Syntax { .. }), "{error}");
        assert_eq!(path, "$");
    }
    let not_utf8 = [b'{', b'"', 0xff, b'"', b':', b'1', b'}'];
    assert!(matches!(
        InstanceDirectory::parse(&not_utf8),
        Err(DocumentError::Syntax { .. })
    ));
}

// spec: DIR-1
#[test]
fn a_document_past_the_size_bound_is_refused_before_parsing() {
    let mut bytes = EXAMPLE.as_bytes().to_vec();
    bytes.resize(DOCUMENT_BYTES_MAX, b' ');
    assert!(
        InstanceDirectory::parse(&bytes).is_ok(),
        "exactly the bound is accepted"
    );
    bytes.push(b' ');
    let error = InstanceDirectory::parse(&bytes).unwrap_err();
    assert_eq!(
        error,
        DocumentError::TooLarge {
            bytes_max: DOCUMENT_BYTES_MAX
        }
    );
    assert_eq!(error.to_string(), "document is larger than 1048576 bytes");
}

// spec: DIR-1
#[test]
fn lists_past_their_bounds_are_refused_with_their_path() {
    let targets = (0..=TARGETS_MAX)
        .map(|n| {
            let mut release = billing_release();
            release["release_id"] = json!(format!("release-{n}"));
            target_json(release, &[])
        })
        .collect();
    let (error, path) = error_path(parse_value(&document_json(targets)));
    assert!(
        matches!(error, DocumentError::LimitExceeded { what: "targets", max, .. } if max == TARGETS_MAX),
        "{error}"
    );
    assert_eq!(path, "targets");

    let instances: Vec<InstanceOptions> = (0..=INSTANCES_PER_TARGET_MAX)
        .map(|n| InstanceOptions {
            instance_id: format!("billing-agent-{n}"),
            ready: false,
            ..InstanceOptions::default()
        })
        .collect();
    let (error, path) = error_path(InstanceDirectory::parse(&billing_document(&instances)));
    assert!(
        matches!(
            error,
            DocumentError::LimitExceeded {
                what: "instances",
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(path, "targets[0].instances");

    let ports = (0..=PORTS_PER_INSTANCE_MAX)
        .map(|n| (format!("port-{n}"), 8080))
        .collect();
    let bytes = billing_document(&[InstanceOptions {
        ports,
        ..InstanceOptions::default()
    }]);
    let (error, path) = error_path(InstanceDirectory::parse(&bytes));
    assert!(
        matches!(error, DocumentError::LimitExceeded { what: "ports", .. }),
        "{error}"
    );
    assert_eq!(path, "targets[0].instances[0].ports");
}

// spec: DIR-1
#[test]
fn overlong_names_are_refused_with_their_bound() {
    let (error, path) = error_path(edited(|doc| {
        doc["targets"][0]["release"]["release_id"] = json!("r".repeat(257))
    }));
    assert!(
        matches!(
            error,
            DocumentError::LimitExceeded {
                what: "bytes",
                max: 256,
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(path, "targets[0].release.release_id");
}

// spec: DIR-1
#[test]
fn an_empty_target_list_and_an_empty_instance_list_are_valid() {
    let directory = parse_value(&document_json(vec![])).unwrap();
    assert!(directory.targets().is_empty());
    let directory = InstanceDirectory::parse(&billing_document(&[])).unwrap();
    assert!(directory.targets()[0].instances().is_empty());
}

// spec: DIR-1
#[test]
fn error_messages_are_lowercase_and_quote_hostile_keys_briefly() {
    let key = format!("{}\u{7}", "k".repeat(500));
    let (error, _) = error_path(edited(|doc| doc[key.as_str()] = json!(1)));
    let message = error.to_string();
    assert!(message.len() < 200, "{message}");
    assert!(message.contains("unknown field"), "{message}");
    assert!(!message.contains('\u{7}'));
}

// spec: DIR-1
#[test]
fn release_target_files_are_parsed_as_strictly() {
    let example = include_bytes!("../examples/release-target.json");
    let target = ReleaseTarget::parse(example).unwrap();
    assert_eq!(
        target.canonical_endpoint.to_string(),
        "billing-agent.agents.example:443"
    );

    let mut value: Value = serde_json::from_slice(example).unwrap();
    value["canonical_endpoint"]["scheme"] = json!("https");
    let error = ReleaseTarget::parse(&to_bytes(&value)).unwrap_err();
    assert!(
        matches!(error, DocumentError::UnknownField { .. }),
        "{error}"
    );
    assert_eq!(error.path(), "canonical_endpoint.scheme");

    let mut value: Value = serde_json::from_slice(example).unwrap();
    value["canonical_endpoint"]["port"] = json!(0);
    let error = ReleaseTarget::parse(&to_bytes(&value)).unwrap_err();
    assert_eq!(error.path(), "canonical_endpoint.port");

    let mut value: Value = serde_json::from_slice(example).unwrap();
    value.as_object_mut().unwrap().remove("release");
    let error = ReleaseTarget::parse(&to_bytes(&value)).unwrap_err();
    assert!(
        matches!(error, DocumentError::MissingField { .. }),
        "{error}"
    );
    assert_eq!(error.path(), "release");
}
