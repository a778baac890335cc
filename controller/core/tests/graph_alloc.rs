//! Proves a large flow's graph costs memory in proportion to its steps:
//! at 10,000 steps, checking that each step reads the one before (what the
//! validator asks) stays far below one bit per pair of steps (12.5 MB).
//!
//! Its own test binary, with a single test, so the counting allocator sees
//! only this work.

use std::alloc::System;

use coxswain_core::api::FlowSpec;
use coxswain_core::flow::{FlowGraph, Limits, validate_with};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const STEPS: usize = 10_000;

fn chain() -> FlowSpec {
    let mut yaml = String::from("steps:\n  - {key: s0, script: {source: x}}\n");
    for i in 1..STEPS {
        yaml.push_str(&format!(
            "  - {{key: s{i}, script: {{source: x}}, input: {{prev: $steps.s{}.output}}}}\n",
            i - 1
        ));
    }
    serde_yaml::from_str(&yaml).expect("flow")
}

#[test]
fn a_ten_thousand_step_graph_is_linear_in_memory() {
    let spec = chain();
    let region = Region::new(GLOBAL);
    let graph = FlowGraph::new(&spec.steps);
    let ok = (1..STEPS).all(|n| graph.comes_before(n - 1, n));
    let built = region.change().bytes_allocated;
    assert!(ok, "each step comes after the one before");
    drop(graph);
    // Nodes (key, location, arrows) and the key index: a few hundred bytes a
    // step, counted with every growth of their vectors; the bit matrix this
    // replaced allocated 12,500,000 bytes twice over.
    assert!(
        built < 6_000_000,
        "graph and 10,000 questions allocated {built} bytes"
    );
    // Past the steps a Run's record can hold (`Limits::default()` refuses
    // this flow), so the validator's own cost is measured with that bound
    // raised.
    let limits = Limits {
        max_steps: STEPS,
        ..Limits::default()
    };
    let region = Region::new(GLOBAL);
    assert!(validate_with(&spec, &limits).is_empty());
    let validated = region.change().bytes_allocated;
    eprintln!("graph: {built} bytes; validating: {validated} bytes");
}
