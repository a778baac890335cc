//! How many steps a flow may have, derived from what its Run's record can
//! hold.
//!
//! Large values leave a Run's record (see [`crate::api::offload`]), but each
//! step keeps its bookkeeping there: its status, times, attempts and the
//! arrows it took. That part never moves, so a flow with enough steps makes
//! a status the API server refuses to store, and the controller would retry
//! the write forever. [`MAX_STEPS`] refuses such a flow when it is applied
//! (and `coxswain lint` says so) instead.

/// The most a Run's record may weigh with every movable value moved out.
/// The API server stores an object of at most about 1.5 MiB (etcd's request
/// limit), and a Run's `managedFields` repeat the field names of its
/// status, so the status gets half and the spec, metadata and managed
/// fields the other half.
pub const RECORD_CEILING: usize = 768 << 10;

/// What one step adds to its Run's record when it ran once and succeeded
/// with a short output, with a key of the longest length allowed (40
/// characters): its entry in `steps`, one attempt, and the arrow it took.
/// Measured by this module's test, which fails if the status grows past it.
pub const STEP_RECORD_BYTES: usize = 560;

/// The most steps a flow may have, nested steps and the named parts of
/// parallel steps included: that many steps' bookkeeping still fits under
/// [`RECORD_CEILING`] (1,404 steps).
pub const MAX_STEPS: usize = RECORD_CEILING / STEP_RECORD_BYTES;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::FlowSpec;
    use crate::engine::{Action, CompiledFlow, Done, Event, RunInfo, RunMachine};
    use crate::flow::Limits;

    /// The stored record (compact JSON) of a run of `steps` script steps in
    /// a row, each with a 40-character key, each succeeding with `"ok"`.
    fn finished_record(steps: usize) -> usize {
        let mut yaml = String::from("steps:\n");
        for i in 0..steps {
            let key = format!("s{i:05}_{}", "k".repeat(33));
            yaml.push_str(&format!("  - {{key: {key}, script: {{source: x}}}}\n"));
        }
        let spec: FlowSpec = serde_yaml::from_str(&yaml).expect("flow");
        let flow = CompiledFlow::new(spec).expect("valid");
        let mut machine = RunMachine::new(&flow, json!({}), RunInfo::default());
        let mut second = 1_800_000_000;
        let at = |s: i64| jiff::Timestamp::from_second(s).expect("time");
        let mut pending = machine.handle(Event::Start, at(second));
        while let Some(action) = pending.pop() {
            if let Action::Run(work) = action {
                second += 1;
                let done = Event::Finished {
                    step: work.step.clone(),
                    part: None,
                    attempt: work.attempt,
                    result: Ok(Done::output(json!("ok"))),
                };
                pending.extend(machine.handle(done, at(second)));
            }
        }
        let record = serde_json::to_value(machine.summarized()).expect("record");
        assert_eq!(record["phase"], "Succeeded", "{record}");
        serde_json::to_string(&record).expect("json").len()
    }

    #[test]
    fn each_step_keeps_at_most_its_measured_share_of_the_record() {
        assert_eq!(
            Limits::default().max_key_len,
            40,
            "the keys measured are 40 long"
        );
        let (small, large) = (finished_record(10), finished_record(1_000));
        let per_step = (large - small) / 990;
        assert!(
            per_step <= STEP_RECORD_BYTES,
            "a step now keeps {per_step} bytes in the record, more than STEP_RECORD_BYTES ({STEP_RECORD_BYTES}): raise it (MAX_STEPS falls)"
        );
        assert!(
            per_step * 10 >= STEP_RECORD_BYTES * 9,
            "a step keeps {per_step} bytes, well under STEP_RECORD_BYTES ({STEP_RECORD_BYTES}): lower it (more steps fit)"
        );
    }

    #[test]
    fn the_largest_flow_allowed_fits_the_ceiling_and_a_thousand_steps_are_allowed() {
        assert_eq!(MAX_STEPS, 1_404);
        assert!(finished_record(MAX_STEPS) <= RECORD_CEILING);
    }
}
