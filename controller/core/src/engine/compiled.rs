//! A flow read once: validated, every expression and value parsed, the
//! graph's arrows laid out both ways. The engine never parses at run time.
//!
//! [`CompiledFlow`] owns its spec (behind an [`Arc`]) so a controller can keep
//! it between reconciles, keyed by the Flow's uid and digest; the parsed
//! parts ([`Compiled`]) borrow from that spec inside it.

use std::sync::Arc;
use std::time::Duration;

use self_cell::self_cell;

use crate::api::{FlowSpec, OnFailure, Step, StepKind, StepProblem};
use crate::expr::{self, Expr, Reference, Root, ValueTemplate};
use crate::flow::{
    FlowGraph, Limits, StartProblem, exits, input_fits, parse_duration, validate_graph,
};
use crate::template::{self, Place};

/// The default wait before a second attempt; it doubles for each later one.
pub const DEFAULT_BACKOFF: Duration = Duration::from_secs(5);

self_cell!(
    /// The spec and what was compiled from it, kept together.
    struct Cell {
        owner: Arc<FlowSpec>,
        #[covariant]
        dependent: Compiled,
    }
    impl {Debug}
);

/// A validated, compiled flow that owns its spec: cheap to share and to keep
/// between reconciles. The engine reads it through [`CompiledFlow::get`].
#[derive(Debug)]
pub struct CompiledFlow(Cell);

impl CompiledFlow {
    /// Validates and compiles a flow; the problems are those `coxswain lint` prints.
    pub fn new(spec: impl Into<Arc<FlowSpec>>) -> Result<Self, Vec<StepProblem>> {
        Self::new_with(spec, &Limits::default())
    }

    /// Validates with `limits` (`coxswain run` allows what only it can
    /// do, such as cloning `file` URLs) and compiles a flow.
    pub fn new_with(
        spec: impl Into<Arc<FlowSpec>>,
        limits: &Limits,
    ) -> Result<Self, Vec<StepProblem>> {
        Cell::try_new(spec.into(), |spec| Compiled::new(spec, limits)).map(CompiledFlow)
    }

    /// The start check ([`crate::flow::check_start`]) for a run that goes
    /// on with the compiled flow: compiles it (which validates it first) and
    /// checks that `input` fits, so the controller's pin refuses what
    /// admission refuses, for the same reasons, without validating twice.
    pub fn start(
        spec: impl Into<Arc<FlowSpec>>,
        input: Option<&serde_json::Value>,
    ) -> Result<Self, StartProblem> {
        let flow = CompiledFlow::new(spec).map_err(StartProblem::Invalid)?;
        input_fits(flow.spec(), input)?;
        Ok(flow)
    }

    /// Notes the Flow generation the spec came from, for runs to record.
    pub fn with_generation(mut self, generation: i64) -> Self {
        self.0
            .with_dependent_mut(|_, compiled| compiled.generation = Some(generation));
        self
    }

    /// The compiled parts, borrowed from the spec this owns.
    pub fn get(&self) -> &Compiled<'_> {
        self.0.borrow_dependent()
    }

    /// The spec it was compiled from.
    pub fn spec(&self) -> &Arc<FlowSpec> {
        self.0.borrow_owner()
    }
}

/// A validated flow with everything the engine needs precomputed, borrowing
/// the spec a [`CompiledFlow`] owns.
#[derive(Debug)]
pub struct Compiled<'a> {
    /// The flow as written.
    pub spec: &'a FlowSpec,
    /// Its digest ([`crate::flow::flow_digest`]), which a run's status keeps.
    pub digest: String,
    /// The Flow's `metadata.generation`, when it came from a Flow object
    /// (see [`CompiledFlow::with_generation`]); records note it.
    pub generation: Option<i64>,
    /// Its graph.
    pub graph: FlowGraph<'a>,
    /// One entry per graph node.
    pub steps: Vec<CompiledStep<'a>>,
    /// The flow's `output`, parsed.
    pub output: Option<ValueTemplate>,
    /// The loops and parallel steps, which settle when their work does.
    pub composites: Vec<usize>,
    /// Per node: whether anything reads its `$steps.KEY` view (an expression,
    /// a value, a placeholder, the flow's output), or every node when some
    /// expression reads `$previous`. The engine keeps only these views
    /// current, which spares a copy of each output on every transition.
    pub observed: Vec<bool>,
    /// Its runs of script steps that may share a pod.
    pub chains: super::ScriptChains,
}

/// One step's parsed parts.
#[derive(Debug)]
pub struct CompiledStep<'a> {
    /// The step as written (for a parallel step: the parallel step).
    pub step: &'a Step,
    /// `when`.
    pub when: Option<Expr>,
    /// `input`.
    pub input: Option<ValueTemplate>,
    /// A condition's single `when`, or its paths in order.
    pub condition: Vec<(String, Expr)>,
    /// The exit a condition with paths takes when none holds.
    pub otherwise: String,
    /// A loop's `until`.
    pub until: Option<Expr>,
    /// A parallel step's items, or its listed parts (key, label, input).
    pub items: Option<ValueTemplate>,
    /// A parallel step's listed parts.
    pub parts: Vec<(String, String, Option<ValueTemplate>)>,
    /// The step each part runs, parsed.
    pub part: Option<Box<CompiledStep<'a>>>,
    /// Steps whose records placeholders read (`{{key.…}}`).
    pub placeholder_keys: Vec<String>,
    /// Attempts allowed per round.
    pub max_attempts: u32,
    /// The wait before the second attempt.
    pub backoff: Duration,
    /// The longest one attempt may take.
    pub timeout: Option<Duration>,
    /// Whether a failure lets the run go on.
    pub continue_on_failure: bool,
    /// The step's named exits.
    pub exits: Option<Vec<String>>,
    /// A save's key and value (`None`: the previous step's output).
    pub save: Option<(ValueTemplate, Option<ValueTemplate>)>,
    /// The step's lookups, each `where` parsed.
    pub lookups: Vec<CompiledLookup<'a>>,
}

/// One lookup of a step, its condition parsed once.
#[derive(Debug)]
pub struct CompiledLookup<'a> {
    /// The lookup as written.
    pub spec: &'a crate::api::Lookup,
    /// Its `where`.
    pub where_: Option<Expr>,
}

impl<'a> Compiled<'a> {
    /// Validates and compiles a flow, building its graph once for both.
    fn new(spec: &'a FlowSpec, limits: &Limits) -> Result<Self, Vec<StepProblem>> {
        let graph = FlowGraph::new(&spec.steps);
        let problems = validate_graph(spec, &graph, limits);
        if !problems.is_empty() {
            return Err(problems);
        }
        let mut steps = Vec::with_capacity(graph.nodes.len());
        for node in &graph.nodes {
            steps.push(compile_step(node.step).map_err(|p| vec![p])?);
        }
        let output = match &spec.output {
            Some(v) => Some(expr::parse_value(v).map_err(|e| vec![problem("", &e[0].message)])?),
            None => None,
        };
        let composites = (0..graph.nodes.len())
            .filter(|&n| {
                graph.nodes[n].step.loop_.is_some() || graph.nodes[n].step.parallel.is_some()
            })
            .collect();
        let observed = observed(&graph, &steps, output.as_ref());
        let mut compiled = Compiled {
            spec,
            digest: crate::flow::flow_digest(spec),
            generation: None,
            graph,
            steps,
            output,
            composites,
            observed,
            chains: super::ScriptChains::default(),
        };
        compiled.chains = super::ScriptChains::of(&compiled);
        Ok(compiled)
    }

    /// The node of a step key.
    pub fn node(&self, key: &str) -> Option<usize> {
        self.graph.find(key)
    }

    /// The key of a node.
    pub fn key(&self, node: usize) -> &'a str {
        self.graph.nodes[node].key
    }

    /// The nodes of the list a node sits in.
    pub fn list_of(&self, node: usize) -> &[usize] {
        let list = match self.graph.nodes[node].parent {
            None => 0,
            Some(parent) => self.graph.body_of.get(&parent).copied().unwrap_or(0),
        };
        &self.graph.lists[list]
    }

    /// The body nodes of a loop node, and of loops nested in it.
    pub fn body(&self, node: usize) -> &[usize] {
        match self.graph.body_of.get(&node) {
            Some(&list) => &self.graph.lists[list],
            None => &[],
        }
    }
}

/// See [`CompiledFlow::observed`].
fn observed(
    graph: &FlowGraph<'_>,
    steps: &[CompiledStep<'_>],
    output: Option<&ValueTemplate>,
) -> Vec<bool> {
    let mut observed = vec![false; graph.nodes.len()];
    let mut previous = false;
    let mut references: Vec<&Reference> = output.into_iter().flat_map(|o| o.references()).collect();
    let mut keys: Vec<&str> = Vec::new();
    for step in steps {
        step.collect_reads(&mut references, &mut keys);
    }
    for reference in references {
        match reference.root() {
            Root::Previous => previous = true,
            Root::Step { key } => keys.push(key),
            _ => {}
        }
    }
    for key in keys {
        if let Some(node) = graph.find(key) {
            observed[node] = true;
        }
    }
    if previous {
        observed.fill(true);
    }
    observed
}

impl<'a> CompiledStep<'a> {
    /// Every reference in the step's expressions and values, and the step
    /// keys its placeholders read, its parallel part's included.
    fn collect_reads<'s>(&'s self, references: &mut Vec<&'s Reference>, keys: &mut Vec<&'s str>) {
        references.extend(self.when.iter().flat_map(|e| e.references()));
        references.extend(self.input.iter().flat_map(|v| v.references()));
        references.extend(self.condition.iter().flat_map(|(_, e)| e.references()));
        references.extend(self.until.iter().flat_map(|e| e.references()));
        references.extend(self.items.iter().flat_map(|v| v.references()));
        references.extend(
            self.parts
                .iter()
                .filter_map(|(_, _, v)| v.as_ref())
                .flat_map(|v| v.references()),
        );
        if let Some((key, value)) = &self.save {
            references.extend(key.references());
            references.extend(value.iter().flat_map(|v| v.references()));
        }
        references.extend(
            self.lookups
                .iter()
                .flat_map(|l| l.where_.iter().flat_map(|e| e.references())),
        );
        keys.extend(self.placeholder_keys.iter().map(String::as_str));
        if let Some(part) = &self.part {
            part.collect_reads(references, keys);
        }
    }
}

fn problem(step: &str, message: &str) -> StepProblem {
    StepProblem {
        step: step.into(),
        message: message.into(),
        ..Default::default()
    }
}

/// Parses one step. The validator has already accepted it, so a failure here
/// is reported rather than trusted away.
fn compile_step(step: &Step) -> Result<CompiledStep<'_>, StepProblem> {
    let key = step.key.as_str();
    let parse = |src: &str| expr::parse(src).map_err(|e| problem(key, &e.message));
    let value =
        |v| expr::parse_value(v).map_err(|e: Vec<expr::ValueError>| problem(key, &e[0].message));
    let mut compiled = CompiledStep {
        step,
        when: step.when.as_deref().map(parse).transpose()?,
        input: step.input.as_ref().map(value).transpose()?,
        condition: Vec::new(),
        otherwise: "otherwise".into(),
        until: None,
        items: None,
        parts: Vec::new(),
        part: None,
        placeholder_keys: Vec::new(),
        max_attempts: step.max_attempts(),
        backoff: step
            .backoff
            .as_deref()
            .and_then(|b| parse_duration(b).ok())
            .unwrap_or(DEFAULT_BACKOFF),
        timeout: step.timeout.as_deref().and_then(|t| parse_duration(t).ok()),
        continue_on_failure: step.on_failure == Some(OnFailure::Continue),
        exits: exits(step),
        save: None,
        lookups: Vec::new(),
    };
    for lookup in &step.lookup {
        compiled.lookups.push(CompiledLookup {
            spec: lookup,
            where_: lookup.where_.as_deref().map(parse).transpose()?,
        });
    }
    match step.kind() {
        Some(StepKind::Save(save)) => {
            let key = expr::parse_value(&serde_json::Value::String(save.key.clone()))
                .map_err(|e| problem(key, &e[0].message))?;
            compiled.save = Some((key, save.value.as_ref().map(value).transpose()?));
        }
        Some(StepKind::Condition(c)) => {
            if let Some(when) = &c.when {
                compiled.condition.push(("true".into(), parse(when)?));
            }
            for path in &c.paths {
                compiled
                    .condition
                    .push((path.name.clone(), parse(&path.when)?));
            }
            if let Some(o) = &c.otherwise {
                compiled.otherwise = o.clone();
            }
        }
        Some(StepKind::Loop(l)) => compiled.until = Some(parse(&l.until)?),
        Some(StepKind::Parallel(p)) => {
            compiled.items = p.items.as_ref().map(value).transpose()?;
            for part in &p.parts {
                let label = part.label.clone().unwrap_or_else(|| part.key.clone());
                compiled.parts.push((
                    part.key.clone(),
                    label,
                    part.input.as_ref().map(value).transpose()?,
                ));
            }
            compiled.part = Some(Box::new(compile_step(&p.step)?));
        }
        Some(StepKind::Http(h)) => {
            let mut sources: Vec<(&str, Place)> = vec![(&h.url, Place::Url)];
            sources.extend(h.query.iter().map(|q| (q.value.as_str(), Place::Query)));
            sources.extend(
                h.headers
                    .iter()
                    .filter_map(|x| x.value.as_deref())
                    .map(|v| (v, Place::Header)),
            );
            if let Some(body) = &h.body {
                sources.extend(body.json.as_deref().map(|j| (j, Place::Json)));
                sources.extend(body.text.as_deref().map(|t| (t, Place::Text)));
                sources.extend(
                    body.form
                        .iter()
                        .flatten()
                        .map(|f| (f.value.as_str(), Place::Form)),
                );
            }
            compiled.placeholder_keys = placeholder_keys(&sources);
        }
        Some(StepKind::Message(m)) => {
            let mut sources = vec![(m.text.as_str(), Place::Message)];
            sources.extend(m.webhook.as_ref().map(|w| (w.url.as_str(), Place::Url)));
            compiled.placeholder_keys = placeholder_keys(&sources);
        }
        _ => {}
    }
    Ok(compiled)
}

fn placeholder_keys(sources: &[(&str, Place)]) -> Vec<String> {
    let mut keys: Vec<String> = sources
        .iter()
        .filter_map(|(src, place)| template::parse(src, *place).ok())
        .flat_map(|t| t.placeholders().map(|p| p.key.clone()).collect::<Vec<_>>())
        .filter(|k| k != "input")
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn observed_in(steps: serde_json::Value, output: Option<serde_json::Value>) -> Vec<bool> {
        let mut flow = json!({ "steps": steps });
        if let Some(o) = output {
            flow["output"] = o;
        }
        let spec: FlowSpec = serde_json::from_value(flow).expect("flow");
        CompiledFlow::new(spec)
            .expect("valid")
            .get()
            .observed
            .clone()
    }

    #[test]
    fn a_compiled_flow_owns_its_spec_and_can_be_shared() {
        fn cacheable<T: Send + Sync + 'static>(_: &T) {}
        let spec: FlowSpec = serde_json::from_value(json!({"steps": [
            {"key": "a", "script": {"source": "x"}},
            {"key": "b", "script": {"source": "x"}}
        ]}))
        .expect("flow");
        let shared = Arc::new(spec);
        let flow = Arc::new(CompiledFlow::new(Arc::clone(&shared)).expect("valid"));
        drop(shared);
        cacheable(&flow);
        let elsewhere = Arc::clone(&flow);
        let key = std::thread::spawn(move || elsewhere.get().key(1).to_string())
            .join()
            .expect("thread");
        assert_eq!(key, "b");
        assert_eq!(flow.spec().steps.len(), 2);
    }

    #[test]
    fn only_steps_something_reads_are_observed() {
        let steps = json!([
            {"key": "a", "script": {"source": "x"}},
            {"key": "b", "script": {"source": "x"}, "when": "$steps.a.status == 'completed'"},
            {"key": "c", "script": {"source": "x"}},
            {"key": "d", "http": {"url": "https://example.com/{{c.json.id}}"}},
            {"key": "e", "script": {"source": "x"}}
        ]);
        assert_eq!(
            observed_in(steps.clone(), None),
            [true, false, true, false, false]
        );
        assert_eq!(
            observed_in(steps, Some(json!({"last": "$steps.e.output"}))),
            [true, false, true, false, true]
        );
    }

    #[test]
    fn previous_or_a_part_reading_a_step_counts() {
        let previous = json!([
            {"key": "a", "script": {"source": "x"}},
            {"key": "b", "script": {"source": "x"}, "input": {"p": "$previous.output"}}
        ]);
        assert_eq!(observed_in(previous, None), [true, true]);
        let part = json!([
            {"key": "a", "script": {"source": "x"}},
            {"key": "b", "script": {"source": "x"}},
            {"key": "each", "parallel": {"items": "$input.xs",
              "step": {"script": {"source": "x"}, "input": {"from": "$steps.a.output"}}}}
        ]);
        assert_eq!(observed_in(part, None), [true, false, false]);
    }
}
