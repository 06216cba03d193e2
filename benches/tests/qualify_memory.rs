//! Goal: `connreg-qualify` runs environment contracts on the in-memory
//! backend and says PASS (exit 0), FAIL (exit 1, naming the missed
//! threshold) or bad input (exit 2, naming file and line), with a JSON
//! report of what it measured (SIM-6). No assertion depends on timing.

mod common;

use common::{contract_file, qualify, smoke_path, smoke_text, threshold};

#[test]
fn smoke_contract_passes_on_memory() {
    // spec: SIM-6
    let run = qualify(&smoke_path(), &["--backend", "memory"]);
    assert_eq!(run.code, 0, "{}", run.said());
    let report = run.report.as_ref().expect("a report");
    assert_eq!(report["format"], "connreg-qualify-report.v2");
    assert_eq!(report["environment"]["name"], "smoke");
    assert_eq!(report["backend"]["kind"], "memory");
    assert_eq!(report["verdict"], "pass");
    assert!(report["machine"]["cores"].as_u64().unwrap() >= 1);
    assert_eq!(report["measured"]["operations"], 2000);
    assert_eq!(report["measured"]["stopped_by"], "operations");
    assert_eq!(report["invariants"]["violations"], 0, "{}", run.said());
    assert!(report["invariants"]["checked"]["routes"].as_u64().unwrap() > 0);
    assert_eq!(
        report["invariants"]["checked"]["replicas"],
        report["fleet"]["replicas"]
    );
    let violations = threshold(report, "invariant_violations_max");
    assert_eq!(violations["verdict"], "pass");
    assert!(run.stdout.contains("verdict: PASS"), "{}", run.said());
}

#[test]
fn an_impossible_threshold_fails_with_exit_1_and_names_it() {
    // spec: SIM-6
    let text = smoke_text().replacen("resolves_per_s_min = 20", "resolves_per_s_min = 1e12", 1);
    assert!(text.contains("1e12"));
    let env = contract_file("impossible", &text);
    let run = qualify(&env, &[]);
    assert_eq!(run.code, 1, "{}", run.said());
    let report = run.report.as_ref().expect("a report");
    assert_eq!(report["verdict"], "fail");
    let missed = threshold(report, "resolves_per_s_min");
    assert_eq!(missed["verdict"], "fail");
    assert_eq!(missed["limit"], 1e12);
    assert!(missed["measured"].as_f64().unwrap() < 1e12);
    // The other thresholds are unaffected.
    assert_eq!(
        threshold(report, "invariant_violations_max")["verdict"],
        "pass"
    );
    assert!(
        run.stdout
            .lines()
            .any(|l| l.contains("FAIL") && l.contains("resolves_per_s_min")),
        "{}",
        run.said()
    );
    assert!(run.stdout.contains("verdict: FAIL"), "{}", run.said());
}

#[test]
fn an_unknown_key_exits_2_naming_file_and_line() {
    // spec: SIM-6
    let text = smoke_text().replacen("[mix]\n", "[mix]\nresolve_sideways = 3\n", 1);
    let line = text
        .lines()
        .position(|l| l == "resolve_sideways = 3")
        .unwrap()
        + 1;
    let env = contract_file("unknown-key", &text);
    let run = qualify(&env, &[]);
    assert_eq!(run.code, 2, "{}", run.said());
    let at = format!("{}:{line}:", env.display());
    assert!(run.stderr.contains(&at), "wanted {at}\n{}", run.said());
    assert!(run.stderr.contains("resolve_sideways"), "{}", run.said());
    assert!(run.report.is_none(), "bad input writes no report");
}

#[test]
fn a_bad_value_exits_2_naming_file_and_line() {
    // spec: SIM-6
    let text = smoke_text().replacen("clients = 4", "clients = 0", 1);
    let line = text.lines().position(|l| l == "clients = 0").unwrap() + 1;
    let env = contract_file("bad-value", &text);
    let run = qualify(&env, &[]);
    assert_eq!(run.code, 2, "{}", run.said());
    let at = format!("{}:{line}:", env.display());
    assert!(run.stderr.contains(&at), "wanted {at}\n{}", run.said());
    assert!(run.stderr.contains("load.clients"), "{}", run.said());
}

#[test]
fn a_value_of_the_wrong_type_exits_2_naming_file_and_line() {
    // spec: SIM-6
    let text = smoke_text().replacen("tenants = 4", "tenants = \"four\"", 1);
    let line = text
        .lines()
        .position(|l| l == "tenants = \"four\"")
        .unwrap()
        + 1;
    let env = contract_file("wrong-type", &text);
    let run = qualify(&env, &[]);
    assert_eq!(run.code, 2, "{}", run.said());
    assert!(
        run.stderr.contains(&format!("{}:{line}:", env.display())),
        "{}",
        run.said()
    );
}

#[test]
fn a_fleet_past_its_limit_exits_2_naming_the_limit() {
    // spec: SIM-6
    let text = smoke_text()
        .replacen("tenants = 4", "tenants = 1000", 1)
        .replacen("instances_per_tenant = 2", "instances_per_tenant = 10", 1)
        .replacen("replicas_per_instance = 4", "replicas_per_instance = 11", 1);
    let env = contract_file("too-large", &text);
    let run = qualify(&env, &[]);
    assert_eq!(run.code, 2, "{}", run.said());
    assert!(run.stderr.contains("REPLICAS_MAX"), "{}", run.said());
}

#[test]
fn a_missing_contract_file_exits_2() {
    // spec: SIM-6
    let run = qualify(std::path::Path::new("/nonexistent/contract.toml"), &[]);
    assert_eq!(run.code, 2, "{}", run.said());
    assert!(
        run.stderr.contains("/nonexistent/contract.toml"),
        "{}",
        run.said()
    );
}

#[test]
fn every_shipped_environment_is_a_valid_contract() {
    // spec: SIM-6
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("environments");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("benches/environments exists") {
        let path = entry.expect("readable").path();
        if path.extension().is_some_and(|e| e == "toml") {
            let contract =
                connreg_benches::qualify::Contract::load(&path).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                path.file_stem().and_then(|s| s.to_str()),
                Some(contract.name.as_str()),
                "a contract's name is its file name"
            );
            names.push(contract);
        }
    }
    let fleet = names
        .iter()
        .find(|c| c.name == "fleet-10k")
        .expect("fleet-10k ships");
    assert!(fleet.fleet.replicas() >= 10_000);
    assert!(names.iter().any(|c| c.name == "smoke"));
}
