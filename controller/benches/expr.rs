//! Expression benchmarks.
//!
//! - `expr/eval`: the condition `$steps.review.output.score >= 0.8 and
//!   $loop.iteration < 3` evaluated from its parsed tree (target ≤ 150 ns).
//! - `expr/cel_eval`: the same condition and data in the `cel` crate, with its
//!   program compiled and its context built beforehand, as a reference point.
//! - `expr/parse`: parsing the condition (target ≤ 5 µs).
//!
//! After the criterion groups, `main` times both evaluators again in the same
//! process and prints `ratio` (cel time / ours).
//! Run: `cargo bench -p coxswain --bench expr`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use coxswain_core::expr::parse;
use criterion::Criterion;
use serde_json::{Value, json};

const EXPR: &str = "$steps.review.output.score >= 0.8 and $loop.iteration < 3";
const CEL_EXPR: &str = "steps.review.output.score >= 0.8 && pass.iteration < 3";

fn data() -> Value {
    json!({
        "input": {"brief": "Write about tides", "audience": "children"},
        "steps": {
            "research": {"status": "completed", "output": {"facts": ["a", "b", "c"]}, "text": "facts", "error": null},
            "draft": {"status": "completed", "output": {"text": "Tides rise.", "words": 2}, "text": "Tides rise.", "error": null},
            "review": {"status": "completed", "output": {"score": 0.85, "approved": false, "feedback": "longer"}, "text": "", "error": null}
        },
        "loop": {"iteration": 2}
    })
}

fn cel_context(d: &Value) -> cel::Context<'static, 'static> {
    let mut ctx = cel::Context::default();
    ctx.add_variable("steps", d["steps"].clone())
        .expect("steps converts");
    ctx.add_variable("pass", d["loop"].clone())
        .expect("loop converts");
    ctx
}

fn per_iter(mut f: impl FnMut(), budget: Duration) -> f64 {
    // Calibrate a batch size, then take the best of several batches.
    let mut n: u64 = 1;
    loop {
        let t = Instant::now();
        for _ in 0..n {
            f();
        }
        if t.elapsed() > Duration::from_millis(20) {
            break;
        }
        n *= 2;
    }
    let deadline = Instant::now() + budget;
    let mut best = f64::INFINITY;
    while Instant::now() < deadline {
        let t = Instant::now();
        for _ in 0..n {
            f();
        }
        best = best.min(t.elapsed().as_nanos() as f64 / n as f64);
    }
    best
}

fn main() {
    let d = data();
    let expr = parse(EXPR).expect("benchmark expression parses");
    assert_eq!(expr.eval_bool(&d), Ok(true));
    let program = cel::Program::compile(CEL_EXPR).expect("cel expression compiles");
    let cel_ctx = cel_context(&d);
    assert_eq!(
        program.execute(&cel_ctx).expect("cel evaluates"),
        cel::Value::Bool(true)
    );

    let mut c = Criterion::default().configure_from_args();
    let mut g = c.benchmark_group("expr");
    g.bench_function("eval", |b| {
        b.iter(|| black_box(&expr).eval_bool(black_box(&d)))
    });
    g.bench_function("cel_eval", |b| {
        b.iter(|| black_box(&program).execute(black_box(&cel_ctx)))
    });
    g.bench_function("parse", |b| b.iter(|| parse(black_box(EXPR))));
    g.bench_function("cel_compile", |b| {
        b.iter(|| cel::Program::compile(black_box(CEL_EXPR)))
    });
    g.finish();
    c.final_summary();

    // `cargo test --benches` runs this binary in test mode; skip the summary there.
    if std::env::args().any(|a| a == "--bench") {
        let budget = Duration::from_secs(2);
        let ours = per_iter(
            || drop(black_box(black_box(&expr).eval_bool(black_box(&d)))),
            budget,
        );
        let theirs = per_iter(
            || drop(black_box(black_box(&program).execute(black_box(&cel_ctx)))),
            budget,
        );
        let p_ours = per_iter(|| drop(black_box(parse(black_box(EXPR)))), budget);
        let p_theirs = per_iter(
            || drop(black_box(cel::Program::compile(black_box(CEL_EXPR)))),
            budget,
        );
        println!("summary (best batch mean, same process):");
        println!(
            "  eval  coxswain {ours:8.1} ns   cel {theirs:8.1} ns   ratio {:.1}x",
            theirs / ours
        );
        println!(
            "  parse coxswain {p_ours:8.1} ns   cel {p_theirs:8.1} ns   ratio {:.1}x",
            p_theirs / p_ours
        );
    }
}
