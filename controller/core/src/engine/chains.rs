//! Script chains: runs of consecutive script steps whose later members may
//! start in the pod of the first, each as soon as the one before it ends,
//! instead of waiting for a pod of their own.
//!
//! A member after the first has its input made inside that pod, from the run
//! input and the previous member's result, so only steps whose input the
//! engine would make from exactly those two can follow: the default input,
//! or an `input` that reads nothing but `$input`, `$previous` and the step
//! before (`$steps.<it>`); no `when`, no lookups, and the step before them
//! as their only way in. The
//! engine still decides: a driver running a chain compares what the pod made
//! with the [`Work`](super::Work) the engine gives for the step, and only the
//! first attempt of each member runs in the chain (a retry, a send-back or a
//! step that follows a failure runs on its own).

use serde_json::{Value, json};

use super::compiled::{Compiled, CompiledStep};
use crate::api::StepPhase;
use crate::expr::{Root, ValueTemplate};

/// The chains of a flow, found once when it is compiled.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScriptChains {
    /// Each chain's step keys in order (two or more), its head first.
    chains: Vec<Vec<String>>,
}

/// Where one step stands in its chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainPlace<'c> {
    /// The chain's keys, its head first.
    pub members: &'c [String],
    /// The step's position among them (0 for the head).
    pub position: usize,
}

impl ScriptChains {
    /// Finds the chains of `flow`.
    pub fn of(flow: &Compiled<'_>) -> Self {
        let mut chains = Vec::new();
        let mut current: Vec<usize> = Vec::new();
        for node in 0..flow.graph.nodes.len() {
            let joins = current
                .last()
                .is_some_and(|&before| follows_in_chain(flow, before, node));
            if !joins {
                if current.len() >= 2 {
                    chains.push(keys(flow, &current));
                }
                current.clear();
                if !can_head(flow, node) {
                    continue;
                }
            }
            current.push(node);
        }
        if current.len() >= 2 {
            chains.push(keys(flow, &current));
        }
        ScriptChains { chains }
    }

    /// Every chain, each its keys in order.
    pub fn all(&self) -> &[Vec<String>] {
        &self.chains
    }

    /// The chain `step` is in, and where.
    pub fn place(&self, step: &str) -> Option<ChainPlace<'_>> {
        self.chains.iter().find_map(|members| {
            let position = members.iter().position(|k| k == step)?;
            Some(ChainPlace { members, position })
        })
    }
}

fn keys(flow: &Compiled<'_>, nodes: &[usize]) -> Vec<String> {
    nodes.iter().map(|&n| flow.key(n).to_string()).collect()
}

/// A script step of the flow's own list (not inside a loop or a parallel
/// step, whose passes and parts each need their own attempt).
fn can_head(flow: &Compiled<'_>, node: usize) -> bool {
    let item = &flow.graph.nodes[node];
    item.parent.is_none() && flow.steps[node].step.script.is_some()
}

/// Whether `node` may run in the pod of the chain whose last member is
/// `before`: a script step whose only arrow in is the plain one from
/// `before`, which leads nowhere else, and whose input is the engine's
/// default one, made from nothing but the run input and `before`'s output.
fn follows_in_chain(flow: &Compiled<'_>, before: usize, node: usize) -> bool {
    let item = &flow.graph.nodes[node];
    let only_in =
        matches!(item.preds.as_slice(), [arrow] if arrow.from == before && arrow.exit.is_none());
    let only_out = flow.graph.next(before) == [node];
    // The default input reads the step listed just before, which `after`
    // may have made another one.
    let listed_next = item.position == flow.graph.nodes[before].position + 1;
    can_head(flow, node)
        && only_in
        && only_out
        && listed_next
        && input_made_in_pod(&flow.steps[node], flow.key(before))
}

/// Whether the pod can make `step`'s input, knowing only the run input and
/// the result of `before`, the step just before it.
fn input_made_in_pod(step: &CompiledStep<'_>, before: &str) -> bool {
    let reads_known = |template: &ValueTemplate| {
        template.references().all(|r| match r.root() {
            Root::Input | Root::Previous => true,
            Root::Step { key } => key == before,
            _ => false,
        })
    };
    step.when.is_none() && step.lookups.is_empty() && step.input.as_ref().is_none_or(reads_known)
}

/// What `$steps.KEY` (and `$previous`) reads for a step: its status, output,
/// text and error. One function for the engine and for a chain's pod.
pub fn step_view(
    status: StepPhase,
    output: Option<Value>,
    text: Option<String>,
    error: Value,
) -> [(&'static str, Value); 4] {
    [
        ("status", json!(status)),
        ("output", output.unwrap_or(Value::Null)),
        ("text", text.map_or(Value::Null, Value::String)),
        ("error", error),
    ]
}

/// The input of a chain member after the first: `input`, the step's own
/// (as written in the flow), resolved against the run input and the
/// completed step `before` that output `output` and `text`; the default
/// input when it has none. Errors when `input` does not parse.
pub fn member_input(
    input: Option<&Value>,
    run_input: &Value,
    before: &str,
    output: Value,
    text: Option<String>,
) -> Result<Value, String> {
    let Some(written) = input else {
        return Ok(default_input(run_input, output));
    };
    let template = crate::expr::parse_value_at(written, "input").map_err(|errors| {
        errors
            .first()
            .map(|e| e.message.clone())
            .unwrap_or_default()
    })?;
    let view: serde_json::Map<String, Value> =
        step_view(StepPhase::Completed, Some(output), text, Value::Null)
            .into_iter()
            .map(|(name, value)| (name.to_string(), value))
            .collect();
    let view = Value::Object(view);
    let scope = json!({
        "input": run_input,
        "steps": {before: view.clone()},
        "previous": view,
    });
    Ok(template.resolve(&scope))
}

/// The input of a step written without `input`, after a step whose output
/// was `previous`: the run input and that output merged when both are
/// objects (the output's keys win), the output alone when there is no run
/// input, else both side by side. One function for the engine and for a
/// chain's pod, so both make the same input.
pub fn default_input(run_input: &Value, previous: Value) -> Value {
    match (run_input, previous) {
        (Value::Object(input), Value::Object(out)) => {
            let mut merged = input.clone();
            merged.extend(out);
            Value::Object(merged)
        }
        (Value::Null, out) => out,
        (input, out) => json!({"input": input, "previous": out}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::CompiledFlow;

    fn chains(yaml: &str) -> Vec<Vec<String>> {
        let spec: crate::api::FlowSpec = serde_yaml::from_str(yaml).unwrap();
        let flow = CompiledFlow::new(spec).unwrap();
        ScriptChains::of(flow.get()).all().to_vec()
    }

    fn script(key: &str) -> String {
        format!("  - key: {key}\n    script: {{source: 'echo {key}'}}\n")
    }

    #[test]
    fn consecutive_scripts_make_one_chain() {
        let yaml = format!("steps:\n{}{}{}", script("a"), script("b"), script("c"));
        assert_eq!(chains(&yaml), vec![vec!["a", "b", "c"]]);
    }

    #[test]
    fn a_lone_script_is_no_chain() {
        let yaml = format!(
            "steps:\n{}  - key: ask\n    http: {{url: 'http://example.com'}}\n{}",
            script("a"),
            script("b")
        );
        assert_eq!(chains(&yaml), Vec::<Vec<String>>::new());
    }

    #[test]
    fn a_step_with_its_own_input_or_condition_starts_a_new_chain() {
        let yaml = format!(
            "steps:\n{}{}  - key: c\n    input: {{x: $steps.a.output}}\n    script: {{source: 'echo c'}}\n{}  - key: e\n    when: $input.go\n    script: {{source: 'echo e'}}\n{}",
            script("a"),
            script("b"),
            script("d"),
            script("f")
        );
        assert_eq!(
            chains(&yaml),
            vec![vec!["a", "b"], vec!["c", "d"], vec!["e", "f"]]
        );
    }

    #[test]
    fn a_step_whose_input_reads_only_the_run_input_and_the_step_before_joins() {
        let yaml = format!(
            "steps:\n{}  - key: b\n    input: {{x: $steps.a.output.n, y: $input.z, t: $previous.text}}\n    script: {{source: 'echo b'}}\n  - key: c\n    input: {{from_a: $steps.a.output}}\n    script: {{source: 'echo c'}}\n  - key: d\n    input: {{uid: $run.uid}}\n    script: {{source: 'echo d'}}\n",
            script("a")
        );
        // c reads a, not the step just before it; d reads $run.
        assert_eq!(chains(&yaml), vec![vec!["a", "b"]]);
    }

    /// The input a chain's pod makes for a member is the one the engine
    /// makes for it once the step before completed, with or without `input`.
    #[test]
    fn a_members_input_is_the_engines() {
        use crate::engine::test_support::at;
        use crate::engine::{Action, Done, Event, RunInfo, RunMachine};
        let cases = [
            None,
            Some(
                json!({"n": "$steps.a.output.n", "z": "$input.z", "t": "$previous.text", "s": "$steps.a.status", "all": "$steps.a"}),
            ),
            Some(json!("$previous.output")),
        ];
        let run_input = json!({"z": [1, 2], "keep": true});
        for (i, input) in cases.into_iter().enumerate() {
            let mut spec = json!({"steps": [
                {"key": "a", "script": {"source": "echo a"}},
                {"key": "b", "script": {"source": "echo b"}},
            ]});
            if let Some(input) = &input {
                spec["steps"][1]["input"] = input.clone();
            }
            let spec: crate::api::FlowSpec = serde_json::from_value(spec).unwrap();
            let flow = crate::engine::CompiledFlow::new(spec).unwrap();
            assert_eq!(flow.get().chains.all(), [vec!["a", "b"]], "case {i}");
            let mut machine = RunMachine::new(&flow, run_input.clone(), RunInfo::default());
            machine.handle(Event::Start, at(0));
            let (output, text) = (json!({"n": 7, "keep": false}), "{\"n\": 7}\n".to_string());
            let actions = machine.handle(
                Event::Finished {
                    step: "a".into(),
                    part: None,
                    attempt: 1,
                    result: Ok(Done {
                        output: output.clone(),
                        text: Some(text.clone()),
                        usage: None,
                        log: None,
                    }),
                },
                at(1),
            );
            let work = actions
                .into_iter()
                .find_map(|a| match a {
                    Action::Run(work) if work.step == "b" => Some(*work),
                    _ => None,
                })
                .expect("b is launched");
            let made = member_input(input.as_ref(), &run_input, "a", output, Some(text)).unwrap();
            assert_eq!(made, work.input, "case {i}");
        }
    }

    #[test]
    fn branches_and_joins_break_a_chain() {
        let yaml = format!(
            "steps:\n{}  - key: b\n    after: [a]\n    script: {{source: 'echo b'}}\n  - key: c\n    after: [a]\n    script: {{source: 'echo c'}}\n  - key: d\n    after: [b, c]\n    script: {{source: 'echo d'}}\n{}",
            script("a"),
            script("e")
        );
        assert_eq!(chains(&yaml), vec![vec!["d", "e"]]);
    }

    #[test]
    fn scripts_in_a_loop_stay_out() {
        let inner: String = [script("a"), script("b")]
            .concat()
            .lines()
            .map(|l| format!("    {l}\n"))
            .collect();
        let yaml = format!(
            "steps:\n  - key: again\n    loop:\n      until: 'true'\n      maxIterations: 2\n      steps:\n{inner}"
        );
        assert_eq!(chains(&yaml), Vec::<Vec<String>>::new());
    }

    #[test]
    fn the_place_of_a_member() {
        let yaml = format!("steps:\n{}{}{}", script("a"), script("b"), script("c"));
        let spec: crate::api::FlowSpec = serde_yaml::from_str(&yaml).unwrap();
        let flow = CompiledFlow::new(spec).unwrap();
        let found = ScriptChains::of(flow.get());
        let place = found.place("b").unwrap();
        assert_eq!((place.members.len(), place.position), (3, 1));
        assert!(found.place("x").is_none());
    }

    #[test]
    fn the_default_input_merges_objects_and_wraps_the_rest() {
        assert_eq!(
            default_input(&json!({"a": 1, "b": 1}), json!({"b": 2})),
            json!({"a": 1, "b": 2})
        );
        assert_eq!(default_input(&Value::Null, json!([1])), json!([1]));
        assert_eq!(
            default_input(&json!("x"), json!(3)),
            json!({"input": "x", "previous": 3})
        );
    }
}
