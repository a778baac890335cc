//! Engine work per step transition, measured without any executor: a
//! 1,000-step linear flow, a 100-part fan-out, a flow of conditions as
//! long as flows may be (`MAX_STEPS`, 1,404), and 1,000 loop passes. The baseline, measured in the same
//! run, is serializing one step record — the least a controller does per
//! transition when it writes status.

use std::hint::black_box;
use std::time::Instant;

use coxswain_core::api::{FlowSpec, RunStatus, StepStatus};
use coxswain_core::engine::{
    Action, CompiledFlow, Done, Event, Plan, RunInfo, RunMachine, Seen, Work, same_attempt,
};
use criterion::{Criterion, criterion_group, criterion_main};
use jiff::Timestamp;
use serde_json::json;

fn linear(n: usize) -> FlowSpec {
    let steps: Vec<_> = (0..n)
        .map(|i| json!({"key": format!("s{i}"), "script": {"source": "x"}}))
        .collect();
    serde_json::from_value(json!({ "steps": steps })).expect("flow")
}

fn fan_out() -> FlowSpec {
    serde_json::from_value(json!({"steps": [{"key": "each", "parallel": {"items": "$input.items", "step": {"script": {"source": "x"}}}}]}))
        .expect("flow")
}

fn conditions(n: usize) -> FlowSpec {
    let steps: Vec<_> = (0..n)
        .map(|i| json!({"key": format!("c{i}"), "condition": {"when": "$input.n >= 1 and $previous.status != 'failed'"}}))
        .collect();
    serde_json::from_value(json!({ "steps": steps })).expect("flow")
}

fn looping(passes: i32) -> FlowSpec {
    serde_json::from_value(json!({"steps": [{"key": "l", "loop": {"until": "$loop.iteration >= 1000000", "maxIterations": passes,
        "steps": [{"key": "body", "script": {"source": "x"}}]}}]}))
    .expect("flow")
}

/// Runs a flow whose every piece of work succeeds at once; returns the
/// number of events handled and the final status.
fn drive(flow: &CompiledFlow, input: serde_json::Value) -> (usize, RunStatus) {
    drive_with(flow, input, &json!({"ok": true}))
}

/// [`drive`], every piece of work producing `output`.
fn drive_with(
    flow: &CompiledFlow,
    input: serde_json::Value,
    output: &serde_json::Value,
) -> (usize, RunStatus) {
    let mut machine = RunMachine::new(flow, input, RunInfo::default());
    let now = Timestamp::UNIX_EPOCH;
    let mut queue = machine.handle(Event::Start, now);
    let mut events = 1;
    while let Some(action) = queue.pop() {
        if let Action::Run(work) = action {
            let event = Event::Finished {
                step: work.step.clone(),
                part: work.part.as_ref().map(|p| p.index),
                attempt: work.attempt,
                result: Ok(Done::output(output.clone())),
            };
            queue.extend(machine.handle(event, now));
            events += 1;
        }
    }
    (events, machine.into_status())
}

/// [`drive`] as the drivers do it: after every event the [`Plan`] says what
/// to launch (from the record, not from the actions alone).
fn drive_planned(flow: &CompiledFlow, input: serde_json::Value) -> (usize, RunStatus) {
    let mut machine = RunMachine::new(flow, input, RunInfo::default());
    let now = Timestamp::UNIX_EPOCH;
    let actions = machine.handle(Event::Start, now);
    let mut running: Vec<Work> = Plan::new(&actions, &machine, &Seen::default()).launch;
    let mut events = 1;
    while let Some(work) = running.pop() {
        let event = Event::Finished {
            step: work.step.clone(),
            part: work.part.as_ref().map(|p| p.index),
            attempt: work.attempt,
            result: Ok(Done::output(json!({"ok": true}))),
        };
        let actions = machine.handle(event, now);
        let finished = [work];
        let seen = Seen {
            before: &running,
            running: &running,
            finished: &finished,
            ..Seen::default()
        };
        let plan = Plan::new(&actions, &machine, &seen);
        running.retain(|w| !plan.stop.iter().any(|s| same_attempt(s, w)));
        running.extend(plan.launch);
        events += 1;
    }
    (events, machine.into_status())
}

/// Microseconds per transition when `driver` runs `flow` on `input`: the
/// best of 10 whole runs (the first ones pay for fresh memory pages).
fn best_of_10(
    driver: fn(&CompiledFlow, serde_json::Value) -> (usize, RunStatus),
    flow: &CompiledFlow,
    input: serde_json::Value,
) -> f64 {
    (0..10)
        .map(|_| {
            let start = Instant::now();
            let events = driver(flow, input.clone()).0;
            start.elapsed().as_secs_f64() * 1e6 / events as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn bench(c: &mut Criterion) {
    let linear_spec = linear(1000);
    let linear_flow = CompiledFlow::new(linear_spec.clone()).expect("valid");
    let fan_spec = fan_out();
    let fan_flow = CompiledFlow::new(fan_spec.clone()).expect("valid");
    let items: Vec<_> = (0..100).map(|i| json!(format!("item {i}"))).collect();
    let fan_input = json!({ "items": items });

    let mut group = c.benchmark_group("engine");
    group.sample_size(20);
    group.bench_function("linear_1000_steps_run", |b| {
        b.iter(|| drive(black_box(&linear_flow), json!({})))
    });
    group.bench_function("fan_out_100_parts_run", |b| {
        b.iter(|| drive(black_box(&fan_flow), fan_input.clone()))
    });
    let record = StepStatus {
        output: Some(json!({"ok": true})),
        ..Default::default()
    };
    group.bench_function("baseline_serialize_one_record", |b| {
        b.iter(|| serde_json::to_vec(black_box(&record)))
    });
    group.finish();

    // Per-transition figures and the one-shot measurements, printed plainly.
    // Best of 10 whole runs: the first ones pay for fresh memory pages.
    let per = |flow: &CompiledFlow, input: serde_json::Value| best_of_10(drive, flow, input);
    let base = {
        let start = Instant::now();
        for _ in 0..100_000 {
            black_box(serde_json::to_vec(black_box(&record)).ok());
        }
        start.elapsed().as_secs_f64() * 1e6 / 100_000.0
    };
    let small_spec = linear(100);
    let small_flow = CompiledFlow::new(small_spec.clone()).expect("valid");
    let s = per(&small_flow, json!({}));
    let l = per(&linear_flow, json!({}));
    let f = per(&fan_flow, fan_input);
    println!(
        "engine: linear 100 steps: {s:.2} µs per transition ({:.1}× the baseline of {base:.2} µs)",
        s / base
    );
    println!(
        "engine: linear 1000 steps: {l:.2} µs per transition ({:.1}× the baseline; {:.2}× the 100-step figure)",
        l / base,
        l / s
    );
    println!(
        "engine: fan-out 100 parts: {f:.2} µs per transition ({:.1}× the baseline)",
        f / base
    );

    // The plan every driver follows, against driving from the actions alone
    // (the same events, in the same process).
    let planned =
        |flow: &CompiledFlow, input: serde_json::Value| best_of_10(drive_planned, flow, input);
    let big_items: Vec<_> = (0..1000).map(|i| json!(format!("item {i}"))).collect();
    let big_input = json!({ "items": big_items });
    for (name, flow, input) in [
        ("linear 1000 steps", &linear_flow, json!({})),
        (
            "fan-out 100 parts",
            &fan_flow,
            json!({ "items": items.clone() }),
        ),
        ("fan-out 1000 parts", &fan_flow, big_input),
    ] {
        let plain = per(flow, input.clone());
        let with_plan = planned(flow, input);
        println!(
            "engine: {name} with the plan: {with_plan:.2} µs per transition ({:.2}× driving from the actions alone, {plain:.2} µs)",
            with_plan / plain
        );
    }

    let cond_spec = conditions(coxswain_core::flow::MAX_STEPS);
    let start = Instant::now();
    let cond_flow = CompiledFlow::new(cond_spec.clone()).expect("valid");
    let compiled = start.elapsed();
    let (_, state) = drive(&cond_flow, json!({"n": 1}));
    println!(
        "engine: {} condition steps: compiled in {:.0} ms, run in {:.0} ms in all ({:?})",
        coxswain_core::flow::MAX_STEPS,
        compiled.as_secs_f64() * 1e3,
        start.elapsed().as_secs_f64() * 1e3,
        state.phase
    );

    let loop_spec = looping(1000);
    let loop_flow = CompiledFlow::new(loop_spec.clone()).expect("valid");
    let before = peak_rss_kib();
    let big = json!({"text": "x".repeat(64 * 1024)});
    let (_, state) = drive_with(&loop_flow, json!({}), &big);
    let size = serde_json::to_vec(&state).map(|v| v.len()).unwrap_or(0);
    let attempts = state.steps.get("body").map_or(&[][..], |r| &r.attempts[..]);
    println!(
        "engine: 1,000 loop passes with 64 KiB outputs: record {} KiB serialized ({} attempts kept, {} with output), peak RSS {} KiB (was {} KiB)",
        size / 1024,
        attempts.len(),
        attempts.iter().filter(|a| a.output.is_some()).count(),
        peak_rss_kib(),
        before
    );
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(str::to_string)
        })
        .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

criterion_group!(benches, bench);
criterion_main!(benches);
