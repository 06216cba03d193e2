//! A scenario written back as a scenario file, in full or stating only
//! what differs from the defaults.

use crate::scenario::Scenario;

/// Serializes a scenario as a scenario file that [`Scenario::parse`]
/// reads back to the same scenario, tables in schema order. Keys that say
/// nothing (empty host lists, `oneway = false`, zero chaos, empty
/// expectations) are left out.
pub fn to_toml(s: &Scenario) -> Result<String, String> {
    toml::to_string(s).map_err(|e| format!("serializing: {e}"))
}

/// Where a key sits in a scenario file: table keys and array indices.
#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(usize),
}

/// Every key of `table` with its path, each table before the keys in it,
/// in file order. The entries of an array of tables are not keys (taking
/// one out changes the scenario); their keys are.
fn key_paths(table: &toml::Table, prefix: &[Step], out: &mut Vec<Vec<Step>>) {
    for (key, value) in table {
        let mut path = prefix.to_vec();
        path.push(Step::Key(key.clone()));
        out.push(path.clone());
        match value {
            toml::Value::Table(t) => key_paths(t, &path, out),
            toml::Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    if let toml::Value::Table(t) = item {
                        let mut at = path.clone();
                        at.push(Step::Index(i));
                        key_paths(t, &at, out);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Takes the key at `path` out of `table`; false when it is not there.
fn remove_key(table: &mut toml::Table, path: &[Step]) -> bool {
    let Some((Step::Key(last), parents)) = path.split_last() else {
        return false;
    };
    let mut here = table;
    let mut steps = parents.iter().peekable();
    while let Some(step) = steps.next() {
        let Step::Key(key) = step else {
            return false;
        };
        let value = match here.get_mut(key) {
            Some(v) => v,
            None => return false,
        };
        here = match (value, steps.peek()) {
            (toml::Value::Table(t), _) => t,
            (toml::Value::Array(items), Some(Step::Index(i))) => {
                let i = *i;
                steps.next();
                match items.get_mut(i) {
                    Some(toml::Value::Table(t)) => t,
                    _ => return false,
                }
            }
            _ => return false,
        };
    }
    here.remove(last).is_some()
}

/// Serializes a scenario as a scenario file that states only what differs
/// from the defaults: each key whose removal reads back as the same
/// scenario is left out, whole tables first. The file reads back to
/// exactly the scenario [`to_toml`] writes.
pub fn to_minimal_toml(s: &Scenario) -> Result<String, String> {
    let full = to_toml(s)?;
    let mut doc: toml::Table =
        toml::from_str(&full).map_err(|e| format!("reading back the scenario: {e}"))?;
    let mut paths = Vec::new();
    key_paths(&doc, &[], &mut paths);
    for path in paths {
        let mut candidate = doc.clone();
        if !remove_key(&mut candidate, &path) {
            continue;
        }
        let Ok(text) = toml::to_string(&candidate) else {
            continue;
        };
        let same = Scenario::parse("minimal candidate", &text)
            .ok()
            .and_then(|back| to_toml(&back).ok())
            .is_some_and(|back| back == full);
        if same {
            doc = candidate;
        }
    }
    toml::to_string(&doc).map_err(|e| format!("serializing: {e}"))
}
