//! Validating a 200-step flow (target ≤ 5 ms), against the baseline of only
//! deserializing the same flow, measured in the same run.

use std::hint::black_box;

use coxswain_core::api::FlowSpec;
use criterion::{Criterion, criterion_group, criterion_main};

/// 200 steps of every common kind, each with an expression, a value and a
/// template reading earlier steps, so every rule has work to do.
fn flow_yaml(steps: usize) -> String {
    let mut yaml = String::from("steps:\n  - key: start\n    script: {source: echo}\n");
    for i in 0..steps {
        let prev = if i == 0 {
            "start".to_string()
        } else {
            format!("s{}", i - 1)
        };
        match i % 4 {
            0 => yaml.push_str(&format!(
                "  - key: s{i}\n    agent: {{prompt: Write., give: [{prev}], reply: {{format: json, fields: [{{name: score, type: number}}]}}}}\n    input: {{brief: $input.brief, before: $steps.{prev}.output}}\n"
            )),
            1 => yaml.push_str(&format!(
                "  - key: s{i}\n    condition: {{when: \"$steps.{prev}.output.score >= 0.8 and $input.n < 3\"}}\n"
            )),
            2 => yaml.push_str(&format!(
                "  - key: s{i}\n    after: [{prev}.true]\n    http:\n      method: POST\n      url: \"https://x.example/items/{{{{s{}.json.id}}}}\"\n      body: {{json: '{{\"a\": \"{{{{s{}.json.score}}}}\", \"b\": {{{{input.json.n}}}}}}'}}\n",
                i - 2, i - 2
            )),
            _ => yaml.push_str(&format!(
                "  - key: s{i}\n    when: $steps.{prev}.output.ok == true or len($input.list) > 2\n    script: {{source: echo ok}}\n"
            )),
        }
    }
    yaml
}

fn bench(c: &mut Criterion) {
    let yaml = flow_yaml(200);
    let spec: FlowSpec = serde_yaml::from_str(&yaml).expect("bench flow parses");
    let problems = coxswain_core::flow::validate(&spec);
    assert!(
        problems.is_empty(),
        "bench flow must be valid: {problems:#?}"
    );
    let json = serde_json::to_string(&spec).expect("serializes");

    let mut group = c.benchmark_group("validate_200_steps");
    group.bench_function("validate", |b| {
        b.iter(|| coxswain_core::flow::validate(black_box(&spec)))
    });
    group.bench_function("baseline_deserialize_json", |b| {
        b.iter(|| serde_json::from_str::<FlowSpec>(black_box(&json)).expect("parses"))
    });
    group.finish();

    // The largest flow the validator accepts (`MAX_STEPS`, with `start`).
    // Memory that grows with the square of the steps shows here as time too.
    let most = coxswain_core::flow::MAX_STEPS - 1;
    let large: FlowSpec = serde_yaml::from_str(&flow_yaml(most)).expect("large flow parses");
    assert!(
        coxswain_core::flow::validate(&large).is_empty(),
        "large flow must be valid"
    );
    let mut group = c.benchmark_group("validate_largest_flow");
    group.sample_size(10);
    group.bench_function("validate", |b| {
        b.iter(|| coxswain_core::flow::validate(black_box(&large)))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
