//! Drawing a 1,000-step run for the run viewer (`view::picture`: every box
//! placed, every arrow with what moved), against the baseline of writing
//! the same record as JSON, which the viewer sends anyway; measured in the
//! same run. The viewer draws again at every change of the run.

use std::hint::black_box;

use coxswain_core::api::{FlowSpec, RunStatus};
use coxswain_core::view;
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;

const STEPS: usize = 1000;

/// A chain of script steps, each reading a field of the one before, with
/// a branch every tenth step.
fn flow() -> FlowSpec {
    let mut yaml = String::from("steps:\n  - key: s0\n    script: {source: echo}\n");
    for i in 1..STEPS {
        let before = if i % 10 == 0 { i / 2 } else { i - 1 };
        yaml.push_str(&format!(
            "  - key: s{i}\n    after: [s{before}]\n    input: {{title: $steps.s{before}.output.title, n: $steps.s{before}.output.n}}\n    script: {{source: echo}}\n"
        ));
    }
    serde_yaml::from_str(&yaml).expect("bench flow parses")
}

/// Every step completed with a small output, every arrow taken.
fn record(spec: &FlowSpec) -> RunStatus {
    let steps: serde_json::Map<String, serde_json::Value> = spec
        .steps
        .iter()
        .map(|s| {
            let output = json!({"title": format!("about {}", s.key), "n": 7});
            (s.key.clone(), json!({"status": "completed", "output": output, "attempts": [{"number": 1, "status": "completed"}]}))
        })
        .collect();
    let arrows: Vec<serde_json::Value> = spec
        .steps
        .iter()
        .flat_map(|s| {
            s.after
                .iter()
                .flatten()
                .map(|from| json!({"from": from, "to": s.key, "taken": true, "count": 1}))
                .collect::<Vec<_>>()
        })
        .collect();
    serde_json::from_value(json!({"phase": "Succeeded", "steps": steps, "arrows": arrows}))
        .expect("bench record")
}

fn bench(c: &mut Criterion) {
    let spec = flow();
    let status = record(&spec);
    let drawn = view::picture(&spec.steps, Some(&status));
    assert_eq!(drawn.steps.len(), STEPS);
    assert!(drawn.arrows.iter().all(|a| !a.moved.is_empty()));

    let mut group = c.benchmark_group("view_1000_steps");
    group.bench_function("picture", |b| {
        b.iter(|| view::picture(black_box(&spec.steps), Some(black_box(&status))))
    });
    group.bench_function("picture_as_json", |b| {
        b.iter(|| {
            serde_json::to_vec(&view::picture(black_box(&spec.steps), Some(&status)))
                .expect("writes")
        })
    });
    group.bench_function("baseline_record_as_json", |b| {
        b.iter(|| serde_json::to_vec(black_box(&status)).expect("writes"))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
