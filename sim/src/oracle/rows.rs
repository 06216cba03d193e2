//! The rows a call of a step names, which a concurrent call may hold.

use std::collections::BTreeMap;

use serde_json::Value;

use super::Answer;

/// How often `a`'s request and answer name each row a concurrent call
/// may hold: `replica:ID` (a `replica` field, a registration's
/// `spec.id`, or a replica a maintenance batch expired), `action:ID` and `scope:ID` keys. An action
/// named also names its route's replica and scopes, as `routes` last saw
/// them (a settlement takes those rows without naming them).
pub(super) fn rows_named(
    a: &Answer,
    routes: &BTreeMap<String, RouteRows>,
) -> BTreeMap<String, u32> {
    fn walk(v: &Value, routes: &BTreeMap<String, RouteRows>, out: &mut BTreeMap<String, u32>) {
        fn add(out: &mut BTreeMap<String, u32>, key: String) {
            *out.entry(key).or_default() += 1;
        }
        match v {
            Value::Object(map) => {
                for (k, child) in map {
                    match (k.as_str(), child) {
                        ("replica", Value::String(s)) => add(out, format!("replica:{s}")),
                        // A registration names its replica as `spec.id`, and
                        // takes that row like any other call naming it.
                        ("spec", Value::Object(spec)) => {
                            if let Some(Value::String(s)) = spec.get("id") {
                                add(out, format!("replica:{s}"));
                            }
                            walk(child, routes, out);
                        }
                        ("action", Value::String(s)) => {
                            add(out, format!("action:{s}"));
                            if let Some(route) = routes.get(s) {
                                add(out, format!("replica:{}", route.replica));
                                for scope in &route.scopes {
                                    add(out, format!("scope:{scope}"));
                                }
                            }
                        }
                        // A maintenance batch holds the row of every
                        // replica it expires until it commits.
                        ("expired", Value::Array(items)) => {
                            for replica in items.iter().filter_map(Value::as_str) {
                                add(out, format!("replica:{replica}"));
                            }
                        }
                        ("scopes", Value::Array(items)) => {
                            for scope in items.iter().filter_map(Value::as_str) {
                                add(out, format!("scope:{scope}"));
                            }
                        }
                        _ => walk(child, routes, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|c| walk(c, routes, out)),
            _ => {}
        }
    }
    let mut out = BTreeMap::new();
    walk(
        &serde_json::to_value(&a.request).unwrap_or(Value::Null),
        routes,
        &mut out,
    );
    walk(
        &serde_json::to_value(&a.recorded).unwrap_or(Value::Null),
        routes,
        &mut out,
    );
    out
}

/// The rows an action's route takes when it is settled or released: its
/// replica's and its scopes' counters.
#[derive(Clone, Debug, Default)]
pub(super) struct RouteRows {
    pub(super) replica: String,
    pub(super) scopes: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oracle::Answer;
    use crate::wire::{Request, Response};

    #[test]
    fn a_registration_names_its_replica_row() {
        // A resolve that skipped a replica whose row a registration of
        // the same step held (SKIP LOCKED) agrees only if the registration
        // counts as naming that row.
        let line = r#"{"op":"register","params":{"spec":{"id":"r1","instance":"i","version":"v","endpoint":"e:1","peer_identity":"p","region":"eu","zone":"eu-a","capacity_class":"standard","capacity":1},"health_seq":1,"lease_ttl_ms":200}}"#;
        let request: Request = serde_json::from_str(line).unwrap();
        let a = Answer {
            line: 1,
            id: 1,
            request,
            recorded: Response::Refused {
                reason: String::new(),
            },
            clock: None,
            commit: None,
            read_at: None,
            read_unseen: Vec::new(),
            retried: false,
        };
        let named = rows_named(&a, &BTreeMap::new());
        assert_eq!(named.get("replica:r1"), Some(&1), "{named:?}");
    }

    #[test]
    fn a_maintenance_names_the_replicas_it_expired() {
        // A maintenance batch holds the row of every replica it expires
        // until it commits; a resolve of the same step skips that row
        // (SKIP LOCKED) and must agree beside it.
        let request: Request =
            serde_json::from_str(r#"{"op":"maintain","params":{"max":8}}"#).unwrap();
        let recorded: Response = serde_json::from_str(
            r#"{"op":"maintain","result":{"Ok":{"expired":["r1","r2"],"released":0,"releases":[],"more":false}}}"#,
        )
        .unwrap();
        let a = Answer {
            line: 1,
            id: 1,
            request,
            recorded,
            clock: None,
            commit: None,
            read_at: None,
            read_unseen: Vec::new(),
            retried: false,
        };
        let named = rows_named(&a, &BTreeMap::new());
        assert_eq!(named.get("replica:r1"), Some(&1), "{named:?}");
        assert_eq!(named.get("replica:r2"), Some(&1), "{named:?}");
    }
}
