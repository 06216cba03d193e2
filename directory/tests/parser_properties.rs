//! Goal: whatever bytes it is given, the directory parser never panics and
//! answers either a valid document or a clear error naming a path; valid
//! documents survive a round trip, and schema breaks are reported where
//! they are (DIR-1).

use connreg_directory::{DocumentError, InstanceDirectory, ReleaseTarget};
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Map, Value, json};

const EXAMPLE: &str = include_str!("../examples/router-instance-directory.v1.json");
const TARGET_EXAMPLE: &str = include_str!("../examples/release-target.json");

/// The property every parse must satisfy: an error is clear (a message
/// that names its path), and a document is valid enough to be
/// written back and read again unchanged.
fn check_answer(bytes: &[u8]) -> Result<(), TestCaseError> {
    match InstanceDirectory::parse(bytes) {
        Ok(directory) => {
            let written = serde_json::to_vec(&directory).expect("a document serialises");
            let again = InstanceDirectory::parse(&written);
            prop_assert_eq!(again.as_ref(), Ok(&directory));
        }
        Err(error) => check_error(&error)?,
    }
    Ok(())
}

/// The release target parser: a target or a clear error, never a panic.
fn check_target_answer(bytes: &[u8]) -> Result<(), TestCaseError> {
    if let Err(error) = ReleaseTarget::parse(bytes) {
        check_error(&error)?;
    }
    Ok(())
}

/// Every error, at the root or deeper, has a path and a reason: its message
/// names the path (below the root) and says more than the path alone, and
/// a syntax error carries the parser's description.
fn check_error(error: &DocumentError) -> Result<(), TestCaseError> {
    let message = error.to_string();
    let path = error.path();
    prop_assert!(!path.is_empty());
    let reason = match message
        .strip_prefix(path)
        .and_then(|rest| rest.strip_prefix(": "))
    {
        Some(reason) => reason,
        None => {
            prop_assert!(
                path == "$",
                "{} does not start with its path {}",
                message,
                path
            );
            message.as_str()
        }
    };
    prop_assert!(!reason.trim().is_empty(), "{:?} has no reason", message);
    if let DocumentError::Syntax { detail, .. } = error {
        prop_assert!(!detail.trim().is_empty(), "{:?} has no detail", message);
    }
    Ok(())
}

/// One edit of a byte string.
#[derive(Debug, Clone)]
enum Mutation {
    Replace(Index, u8),
    Insert(Index, u8),
    Delete(Index),
    Truncate(Index),
    Duplicate(Index, Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<Index>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Replace(at, byte)),
        (
            any::<Index>(),
            prop::sample::select(b"{}[]\":,0123456789 -.aetrfnul\\".to_vec())
        )
            .prop_map(|(at, byte)| Mutation::Insert(at, byte)),
        any::<Index>().prop_map(Mutation::Delete),
        any::<Index>().prop_map(Mutation::Truncate),
        (any::<Index>(), any::<Index>()).prop_map(|(from, to)| Mutation::Duplicate(from, to)),
    ]
}

fn apply(bytes: &mut Vec<u8>, mutation: &Mutation) {
    if bytes.is_empty() {
        return;
    }
    match mutation {
        Mutation::Replace(at, byte) => {
            let at = at.index(bytes.len());
            bytes[at] = *byte;
        }
        Mutation::Insert(at, byte) => bytes.insert(at.index(bytes.len() + 1), *byte),
        Mutation::Delete(at) => {
            bytes.remove(at.index(bytes.len()));
        }
        Mutation::Truncate(at) => bytes.truncate(at.index(bytes.len())),
        Mutation::Duplicate(from, to) => {
            // Copy a short run of the document elsewhere: repeats keys,
            // members and elements as well as breaking syntax.
            let start = from.index(bytes.len());
            let end = (start + 40).min(bytes.len());
            let run = bytes[start..end].to_vec();
            let at = to.index(bytes.len() + 1);
            bytes.splice(at..at, run);
        }
    }
}

/// Every object of a document that has a fixed schema (all but `ports`),
/// with the path an error about it would name.
fn schema_objects(value: &Value, path: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(members) => {
            out.push(path.to_owned());
            for (key, child) in members {
                if key == "ports" {
                    continue;
                }
                let child_path = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                schema_objects(child, &child_path, out);
            }
        }
        Value::Array(items) => {
            for (index, child) in items.iter().enumerate() {
                schema_objects(child, &format!("{path}[{index}]"), out);
            }
        }
        _ => {}
    }
}

/// The object at `path` as [`schema_objects`] wrote it.
fn object_at<'a>(root: &'a mut Value, path: &str) -> &'a mut Map<String, Value> {
    let mut value = root;
    for part in path.split('.').filter(|part| !part.is_empty()) {
        let (key, indexes) = part
            .split_once('[')
            .map_or((part, ""), |(k, rest)| (k, rest));
        value = &mut value[key];
        for index in indexes.split('[').filter(|i| !i.is_empty()) {
            let index: usize = index.trim_end_matches(']').parse().unwrap();
            value = &mut value[index];
        }
    }
    value.as_object_mut().expect("a schema object")
}

fn joined(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

prop_compose! {
    fn instance_json(index: usize)(
        ready in any::<bool>(),
        protocol in prop::sample::select(vec!["tcp", "udp", "sctp"]),
        octet in 1_u8..=254,
        ports in prop::collection::btree_map("[a-z][a-z0-9]{0,6}", 1_u16..=65535, 0..4),
    ) -> Value {
        json!({
            "instance_id": format!("instance-{index}"),
            "address": format!("10.0.{index}.{octet}"),
            "protocol": protocol,
            "ready": ready,
            "ports": ports,
        })
    }
}

fn target_json(index: usize) -> impl Strategy<Value = Value> {
    (
        "[a-z]{1,12}",
        (0_usize..5).prop_flat_map(|count| (0..count).map(instance_json).collect::<Vec<_>>()),
    )
        .prop_map(move |(agent, instances)| {
            json!({
                "release": {
                    "agent_id": format!("{agent}-{index}"),
                    "card_version": "1",
                    "release_id": format!("release-{index}"),
                    "card_digest": "sha256:00",
                    "capability": "do.thing",
                    "credential_audience": format!("https://{agent}.example"),
                },
                "instances": instances,
            })
        })
}

fn valid_document() -> impl Strategy<Value = Value> {
    (0_usize..4)
        .prop_flat_map(|count| (0..count).map(target_json).collect::<Vec<_>>())
        .prop_map(
            |targets| json!({ "version": "router-instance-directory.v1", "targets": targets }),
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    // spec: DIR-1
    #[test]
    fn arbitrary_bytes_never_panic_and_give_a_clear_answer(
        bytes in prop::collection::vec(any::<u8>(), 0..2048),
    ) {
        check_answer(&bytes)?;
    }

    // spec: DIR-1
    #[test]
    fn mutated_valid_documents_never_panic_and_give_a_clear_answer(
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let mut bytes = EXAMPLE.as_bytes().to_vec();
        for mutation in &mutations {
            apply(&mut bytes, mutation);
        }
        check_answer(&bytes)?;
    }

    // spec: DIR-1
    #[test]
    fn arbitrary_bytes_never_panic_the_target_parser_and_give_a_clear_answer(
        bytes in prop::collection::vec(any::<u8>(), 0..1024),
    ) {
        check_target_answer(&bytes)?;
    }

    // spec: DIR-1
    #[test]
    fn mutated_targets_never_panic_and_give_a_clear_answer(
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let mut bytes = TARGET_EXAMPLE.as_bytes().to_vec();
        for mutation in &mutations {
            apply(&mut bytes, mutation);
        }
        check_target_answer(&bytes)?;
    }

    // spec: DIR-1
    #[test]
    fn generated_valid_documents_parse_and_serialise_back_unchanged(document in valid_document()) {
        let bytes = serde_json::to_vec(&document).unwrap();
        let parsed = InstanceDirectory::parse(&bytes);
        prop_assert!(parsed.is_ok(), "{:?}", parsed);
        let written = serde_json::to_value(parsed.unwrap()).unwrap();
        prop_assert_eq!(written, document);
    }

    // spec: DIR-1
    #[test]
    fn an_unknown_field_anywhere_is_reported_at_its_path(
        document in valid_document(),
        which in any::<Index>(),
    ) {
        let mut document = document;
        let mut objects = Vec::new();
        schema_objects(&document, "", &mut objects);
        let path = which.get(&objects).clone();
        object_at(&mut document, &path).insert("unexpected".into(), json!(1));
        let error = InstanceDirectory::parse(&serde_json::to_vec(&document).unwrap()).unwrap_err();
        prop_assert_eq!(
            error,
            DocumentError::UnknownField { path: joined(&path, "unexpected") }
        );
    }

    // spec: DIR-1
    #[test]
    fn a_missing_field_anywhere_is_reported_at_its_path(
        document in valid_document(),
        which in any::<Index>(),
        member in any::<Index>(),
    ) {
        let mut document = document;
        let mut objects = Vec::new();
        schema_objects(&document, "", &mut objects);
        let path = which.get(&objects).clone();
        let object = object_at(&mut document, &path);
        let keys: Vec<String> = object.keys().cloned().collect();
        let key = member.get(&keys).clone();
        object.remove(&key);
        let error = InstanceDirectory::parse(&serde_json::to_vec(&document).unwrap()).unwrap_err();
        prop_assert_eq!(error, DocumentError::MissingField { path: joined(&path, &key) });
    }
}
