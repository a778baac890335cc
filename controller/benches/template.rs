//! How long filling in a JSON body takes, against plain serialisation.
//!
//! A 4 KiB JSON body with 20 placeholders (16 inside string literals, 4
//! outside) is parsed once and rendered many times. The baseline serialises
//! the same 20 values with `serde_json::to_string`, the least work any
//! renderer must do; after the criterion runs, the bench prints the measured
//! ratio between the two.

use std::hint::black_box;
use std::time::Instant;

use coxswain_core::template::{Place, Template, parse};
use criterion::{Criterion, criterion_group};
use serde_json::{Value, json};

const PLACEHOLDERS: usize = 20;
const BODY_BYTES: usize = 4096;

fn context() -> Value {
    let mut steps = serde_json::Map::new();
    for i in 0..PLACEHOLDERS {
        steps.insert(
            format!("s{i}"),
            json!({
                "status": "completed",
                "text": format!("reply {i}"),
                "output": {
                    "value": format!("Value number {i}: \"quoted\", a tab\t, and ✓ unicode"),
                    "n": i * 1000 + 7,
                    "tags": ["alpha", "beta", i]
                }
            }),
        );
    }
    json!({"input": {"brief": "bench"}, "steps": steps})
}

/// The JSON body: 20 fields reading the steps, padded with a literal field so
/// the template is exactly `BODY_BYTES` long.
fn body() -> String {
    let mut fields = Vec::new();
    for i in 0..PLACEHOLDERS {
        if i % 5 == 4 {
            fields.push(format!("\"f{i}\": {{{{s{i}.json.tags}}}}"));
        } else {
            fields.push(format!("\"f{i}\": \"{{{{s{i}.json.value}}}}\""));
        }
    }
    let head = format!("{{{}, \"padding\": \"", fields.join(", "));
    let tail = "\"}";
    let pad = BODY_BYTES - head.len() - tail.len();
    format!(
        "{head}{}{tail}",
        &"lorem ipsum ".repeat(pad / 12 + 1)[..pad]
    )
}

/// The 20 values the placeholders read, in order.
fn values(ctx: &Value) -> Vec<&Value> {
    (0..PLACEHOLDERS)
        .map(|i| {
            let out = &ctx["steps"][format!("s{i}")]["output"];
            if i % 5 == 4 {
                &out["tags"]
            } else {
                &out["value"]
            }
        })
        .collect()
}

fn setup() -> (Template, Value) {
    let src = body();
    assert_eq!(src.len(), BODY_BYTES);
    let template = parse(&src, Place::Json).expect("bench template parses");
    template.check_json().expect("bench template is JSON");
    assert_eq!(template.placeholders().count(), PLACEHOLDERS);
    (template, context())
}

fn bench(c: &mut Criterion) {
    let (template, ctx) = setup();
    let rendered = template.render(&ctx).expect("renders");
    serde_json::from_str::<Value>(&rendered).expect("rendered body is JSON");
    let vals = values(&ctx);

    let mut group = c.benchmark_group("template");
    group.bench_function("render_json_4KiB_20_placeholders", |b| {
        b.iter(|| black_box(&template).render(black_box(&ctx)))
    });
    group.bench_function("baseline_serde_json_to_string_20_values", |b| {
        b.iter(|| serde_json::to_string(black_box(&vals)))
    });
    group.bench_function("parse_json_4KiB_20_placeholders", |b| {
        let src = body();
        b.iter(|| parse(black_box(&src), Place::Json))
    });
    group.finish();
}

/// Measures both sides again, interleaved, and prints render ÷ baseline.
fn ratio() {
    let (template, ctx) = setup();
    let vals = values(&ctx);
    let rounds = 20_000;
    let mut render_ns = 0u128;
    let mut base_ns = 0u128;
    for _ in 0..10 {
        let t = Instant::now();
        for _ in 0..rounds {
            black_box(black_box(&template).render(black_box(&ctx)).ok());
        }
        render_ns += t.elapsed().as_nanos();
        let t = Instant::now();
        for _ in 0..rounds {
            black_box(serde_json::to_string(black_box(&vals)).ok());
        }
        base_ns += t.elapsed().as_nanos();
    }
    let n = 10 * rounds as u128;
    println!(
        "template/ratio: render {:.2} µs, baseline {:.2} µs, render/baseline = {:.2}",
        render_ns as f64 / n as f64 / 1000.0,
        base_ns as f64 / n as f64 / 1000.0,
        render_ns as f64 / base_ns as f64
    );
}

criterion_group!(benches, bench);

fn main() {
    benches();
    ratio();
    Criterion::default().configure_from_args().final_summary();
}
