//! Unit tests of the probes.

use super::*;

#[test]
fn the_catalogue_names_every_plant_and_fault() {
    let all = catalog();
    for p in PlantedBug::all() {
        assert!(all.contains(&plant_probe(p)));
    }
    for k in FAULT_KINDS {
        assert!(all.contains(&format!("fault:{k}")));
    }
    assert!(all.contains("answer:resolve:created"));
    assert!(all.contains("answer:maintain:more"));
    assert!(!all.contains("answer:execute:error:conflict"));
}

#[test]
fn fault_kinds_are_the_trace_tags() {
    let f = FaultEvent::DbCut {
        mode: "all".into(),
        connections: 1,
    };
    let json = serde_json::to_value(&f).unwrap();
    assert_eq!(json["fault"], fault_kind(&f));
    let f = FaultEvent::LatencyRestore {
        a: vec![],
        b: vec![],
    };
    let json = serde_json::to_value(&f).unwrap();
    assert_eq!(json["fault"], fault_kind(&f));
}
