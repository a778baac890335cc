//! What the engine's tests share: a flow from YAML, a fixed clock and a
//! started run, so each test file does not write its own.

use serde_json::Value;

use crate::api::FlowSpec;
use crate::engine::{Action, CompiledFlow, Event, RunInfo, RunMachine};

/// A flow from YAML, compiled; the test knows it is valid.
pub(crate) fn compile(yaml: &str) -> CompiledFlow {
    let spec: FlowSpec = serde_yaml::from_str(yaml).expect("test flow is well-formed YAML");
    CompiledFlow::new(spec).expect("valid flow")
}

/// A point in time `s` seconds after a fixed start.
pub(crate) fn at(s: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_second(1_800_000_000 + s).expect("time")
}

/// A new run of `flow` with no input, started at [`at`]`(0)`, and what
/// its start asks for.
pub(crate) fn started(flow: &CompiledFlow) -> (RunMachine<'_>, Vec<Action>) {
    let mut machine = RunMachine::new(flow, Value::Null, RunInfo::default());
    let actions = machine.handle(Event::Start, at(0));
    (machine, actions)
}
