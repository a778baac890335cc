//! Proves the hot path of condition evaluation allocates nothing.
//!
//! This file is its own test binary so the counting allocator sees only this
//! test; it holds a single test so no other test thread allocates meanwhile.

use std::alloc::System;
use std::hint::black_box;

use coxswain_core::expr::parse;
use serde_json::json;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

#[test]
fn benchmark_condition_evaluates_without_allocating() {
    let data = json!({
        "input": {"brief": "x"},
        "steps": {"review": {"status": "completed", "output": {"score": 0.85, "approved": true}, "text": "", "error": null}},
        "loop": {"iteration": 2}
    });
    let cases = [
        (
            "$steps.review.output.score >= 0.8 and $loop.iteration < 3",
            true,
        ),
        (
            "$steps.review.output.approved == true or len($input.brief) > 3",
            true,
        ),
        (
            "not (contains($input.brief, 'y') or startswith($input.brief, 'z'))",
            true,
        ),
        (
            "$steps.missing.output.x != null and $steps.missing.output.x > 1",
            false,
        ),
    ];
    // The counter does see allocations made in this thread.
    let region = Region::new(GLOBAL);
    drop(black_box(vec![1u8; 16]));
    assert!(region.change().allocations >= 1);

    for (src, want) in cases {
        let expr = parse(src).unwrap();
        // Warm up once outside the measured region.
        assert_eq!(expr.eval_bool(&data), Ok(want));
        // The counter is process-wide: the test harness's own thread may
        // allocate now and then. An evaluation that allocates does so in
        // every round, so the quietest of a few rounds must show none.
        let mut quietest = None;
        for _ in 0..5 {
            let region = Region::new(GLOBAL);
            let mut all = true;
            for _ in 0..1000 {
                all &= black_box(expr.eval_bool(black_box(&data))) == Ok(want);
            }
            let stats = region.change();
            assert!(all, "{src}");
            if quietest.is_none_or(|q: stats_alloc::Stats| stats.allocations < q.allocations) {
                quietest = Some(stats);
            }
        }
        let stats = quietest.expect("five rounds ran");
        assert_eq!(stats.allocations, 0, "{src}: {stats:?}");
        assert_eq!(stats.reallocations, 0, "{src}: {stats:?}");
    }
}
