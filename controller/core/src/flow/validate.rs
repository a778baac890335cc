//! The rules a flow must follow before it is saved, each problem reported
//! on the step it belongs to with the character where reading stopped.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use serde_json::Value;

use crate::api::{
    AgentStep, ApprovalMode, ApprovalStep, ConditionStep, Field, FlowSpec, HttpStep, Items, Lookup,
    LoopStep, MessageStep, NamedObject, ParallelStep, ReplyFormat, SaveStep, ScriptStep, Step,
    StepKind, StepProblem,
};
use crate::expr::{self, Reference, Root};
use crate::template::{self, Place};
use crate::text::quote_list;

use super::duration::parse_duration;
use super::graph::{FlowGraph, exits, split_after};
use super::input_schema::check_schema;
use super::placed::PlacedProblem;
use super::record_size::{RECORD_CEILING, STEP_RECORD_BYTES};
use super::schedule::check_schedule;
use super::shape::{FIELD_TYPES, FILE_TYPE, Hop, Shape};
use super::suggest::closest;
use super::workspace::{RunsOn, check_workspace};

/// Whether the text before the placeholder at `position` (1-based
/// characters) holds the whole origin: `scheme://authority` followed by
/// `/`, `?` or `#`.
fn origin_is_literal(url: &str, position: usize) -> bool {
    let before: String = url.chars().take(position.saturating_sub(1)).collect();
    let Some((scheme, rest)) = before.split_once("://") else {
        return false;
    };
    let scheme_ok = scheme
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    match rest.find(['/', '?', '#']) {
        Some(end) => scheme_ok && end > 0,
        None => false,
    }
}

/// Keys no step may take: they are the roots of references.
pub const RESERVED_KEYS: [&str; 7] = ["input", "steps", "previous", "loop", "item", "index", "run"];

/// The HTTP methods an `http` step may use.
pub const HTTP_METHODS: [&str; 6] = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"];

/// Bounds on what a flow may ask for; the defaults suit every entry point.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Most steps in one flow, nested ones and the named parts of parallel
    /// steps included: each keeps bookkeeping in its Run's record, which
    /// the API server must still store ([`super::MAX_STEPS`]).
    pub max_steps: usize,
    /// Most attempts of one step.
    pub max_attempts: i32,
    /// Most passes of one loop.
    pub max_iterations: i32,
    /// Longest step key (keys become parts of Kubernetes names).
    pub max_key_len: usize,
    /// Longest `backoff`: a retry further off than this is a typo, and the
    /// doubling wait of later attempts must stay a date the engine can write.
    pub max_backoff: Duration,
    /// Longest `timeout` of a step or an HTTP call.
    pub max_timeout: Duration,
    /// Where the flow is to run: `coxswain run` also clones `file` URLs.
    pub runs_on: RunsOn,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_steps: super::MAX_STEPS,
            max_attempts: 20,
            max_iterations: 1_000,
            max_key_len: 40,
            max_backoff: Duration::from_secs(7 * 86_400),
            max_timeout: Duration::from_secs(30 * 86_400),
            runs_on: RunsOn::Cluster,
        }
    }
}

/// Checks a flow with the default limits; an empty list means it is valid.
pub fn validate(spec: &FlowSpec) -> Vec<StepProblem> {
    validate_with(spec, &Limits::default())
}

/// Checks a flow and returns every problem at once, in document order.
pub fn validate_with(spec: &FlowSpec, limits: &Limits) -> Vec<StepProblem> {
    validate_graph(spec, &FlowGraph::new(&spec.steps), limits)
}

/// Checks a flow whose graph the caller has built already (the engine keeps
/// it), so compiling a flow builds its graph once.
pub fn validate_graph<'a>(
    spec: &'a FlowSpec,
    graph: &FlowGraph<'a>,
    limits: &Limits,
) -> Vec<StepProblem> {
    let mut checker = Checker::new(graph, limits);
    checker.check_flow(spec);
    checker.problems
}

/// [`validate_with`], with the place of each problem in the spec, so
/// `coxswain lint` can name the line and column it stands on.
pub fn validate_placed(spec: &FlowSpec, limits: &Limits) -> Vec<PlacedProblem> {
    let graph = FlowGraph::new(&spec.steps);
    let mut checker = Checker::new(&graph, limits);
    checker.check_flow(spec);
    let Checker {
        problems, places, ..
    } = checker;
    problems
        .into_iter()
        .zip(places)
        .map(|(problem, node)| {
            let path = match node {
                None => problem.field.clone(),
                Some(node) if problem.field.is_empty() => graph.nodes[node].location.clone(),
                Some(node) => format!("{}.{}", graph.nodes[node].location, problem.field),
            };
            PlacedProblem { problem, path }
        })
        .collect()
}

/// Who reads data in an expression, a value or a template, which decides
/// what it may refer to.
#[derive(Debug, Clone, Copy)]
struct Reader {
    /// The step doing the reading; `None` for the flow's output, which is
    /// computed once every step has settled.
    node: Option<usize>,
    /// Inside a loop: `$loop` is known.
    in_loop: bool,
    /// Inside a parallel step's part: `$item` and `$index` are known.
    in_part: bool,
    /// A loop whose body steps may all be read (its own `until`).
    sees_body_of: Option<usize>,
    /// In a lookup's `where` or `orderBy`: `$record` is known.
    in_lookup: bool,
}

struct Checker<'a, 'g, 'l> {
    graph: &'g FlowGraph<'a>,
    problems: Vec<StepProblem>,
    /// For each problem, the node being checked when it was found (`None`
    /// for the flow as a whole).
    places: Vec<Option<usize>>,
    /// The node being checked.
    at: Option<usize>,
    limits: &'l Limits,
    /// The nodes whose place on the path is not known: one of their `after`
    /// entries names no step it can (an unknown key, a later step, one of
    /// another list), or they come after or inside such a node. The arrow
    /// left out of the graph may be the one that would let them read a step,
    /// so whether they may is not judged: that would only repeat the bad
    /// `after` as false problems further on.
    unsure: Vec<bool>,
    /// The lookups of the step being checked: its placeholders may read
    /// them by name (`{{similar.json…}}`).
    lookup_names: Vec<String>,
}

impl<'a, 'g, 'l> Checker<'a, 'g, 'l> {
    fn new(graph: &'g FlowGraph<'a>, limits: &'l Limits) -> Self {
        let mut unsure = vec![false; graph.nodes.len()];
        // Arrows and nesting point forward in document order, so one pass
        // in that order sees every node's predecessors settled.
        for (n, node) in graph.nodes.iter().enumerate() {
            let dropped = node
                .step
                .after
                .as_ref()
                .is_some_and(|after| after.len() != node.preds.len());
            unsure[n] = dropped
                || node.parent.is_some_and(|p| unsure[p])
                || node.preds.iter().any(|a| unsure[a.from]);
        }
        Checker {
            graph,
            problems: Vec::new(),
            places: Vec::new(),
            at: None,
            limits,
            unsure,
            lookup_names: Vec::new(),
        }
    }

    /// One name of a list, such as a decision or a field: well formed
    /// (`what` as [`name_problem`] says it), and `twice` when `seen` holds
    /// it already. Every list of names is checked by this one rule.
    fn check_listed_name<'n>(
        &mut self,
        key: &str,
        field: &str,
        name: &'n str,
        what: &str,
        seen: &mut HashSet<&'n str>,
        twice: impl FnOnce() -> String,
    ) {
        if let Some((character, message)) = name_problem(name, what) {
            self.report(key, field, message, character);
        } else if !seen.insert(name) {
            self.report(key, field, twice(), None);
        }
    }

    fn report(
        &mut self,
        step: &str,
        field: &str,
        message: impl Into<String>,
        character: Option<usize>,
    ) {
        self.problems.push(StepProblem {
            step: step.to_string(),
            field: field.to_string(),
            message: message.into(),
            character: character.map(|c| i32::try_from(c).unwrap_or(i32::MAX)),
        });
        self.places.push(self.at);
    }

    /// Whether `target` is listed after `reader`, outside any loop they
    /// share: it runs later whatever the arrows, so no path can make it
    /// readable.
    fn runs_later(&self, reader: usize, target: usize) -> bool {
        let shared_loop = self
            .graph
            .enclosing_loops(reader)
            .any(|l| self.graph.enclosing(target).any(|t| t == l));
        target > reader && !shared_loop
    }

    fn check_flow(&mut self, spec: &'a FlowSpec) {
        if spec.steps.is_empty() {
            self.report("", "steps", "a flow needs at least one step", None);
        }
        let steps = self.recorded_steps();
        if steps > self.limits.max_steps {
            let message = format!(
                "the flow has {steps} steps (nested steps and named parallel parts included); at most {} are allowed: each step keeps about {STEP_RECORD_BYTES} bytes of bookkeeping in its Run's record, which must stay under {} KiB for the API server to store it; split the flow into flows that start one another",
                self.limits.max_steps,
                RECORD_CEILING >> 10,
            );
            self.report("", "steps", message, None);
        }
        self.check_keys();
        for node in 0..self.graph.nodes.len() {
            self.at = Some(node);
            self.check_node(node);
        }
        self.check_overlapping_send_backs();
        self.at = None;
        if let Some(output) = &spec.output {
            let reader = Reader {
                node: None,
                in_loop: false,
                in_part: false,
                sees_body_of: None,
                in_lookup: false,
            };
            self.check_value(reader, "", "output", output);
        }
        if let Some(schedule) = &spec.schedule {
            for (field, message) in check_schedule(schedule) {
                self.report("", field, message, None);
            }
        }
        if let Some(command) = &spec.command {
            for (field, message) in super::check_command(command) {
                self.report("", &field, message, None);
            }
        }
        if let Some(workspace) = &spec.workspace {
            for (field, problem) in check_workspace(workspace, self.limits.runs_on) {
                self.report("", &field, problem.to_string(), None);
            }
        }
        if let Some(schema) = &spec.input {
            for problem in check_schema(schema) {
                self.report("", &problem.path, problem.message, None);
            }
        }
        if let Some(text) = spec
            .retention
            .as_ref()
            .and_then(|r| r.finished_runs.as_ref())
        {
            let field = "retention.finishedRuns";
            match parse_duration(text) {
                Err(error) => self.report("", field, error.to_string(), None),
                Ok(d) if d.is_zero() => self.report(
                    "",
                    field,
                    "a retention must be longer than zero; leave it out to keep finished Runs",
                    None,
                ),
                Ok(_) => {}
            }
        }
    }

    /// How many entries the flow's steps make in a Run's record: one per
    /// step, nested ones included, plus one per named part of a parallel
    /// step (parts over `items` are counted when the run starts).
    fn recorded_steps(&self) -> usize {
        let parts: usize = self
            .graph
            .nodes
            .iter()
            .filter_map(|node| node.step.parallel.as_ref())
            .map(|p| p.parts.len())
            .sum();
        self.graph.nodes.len() + parts
    }

    fn check_keys(&mut self) {
        let mut first: HashMap<&'a str, usize> = HashMap::new();
        for node in 0..self.graph.nodes.len() {
            self.at = Some(node);
            let key = self.graph.nodes[node].key;
            if let Some((character, message)) = key_problem(key, self.limits.max_key_len) {
                self.report(key, "key", message, character);
            } else if let Some(&earlier) = first.get(key) {
                let message = format!(
                    "the key `{key}` is already used by the step at {}; keys must be unique",
                    self.graph.nodes[earlier].location
                );
                self.report(key, "key", message, None);
            } else {
                first.insert(key, node);
            }
        }
    }

    fn check_node(&mut self, node: usize) {
        let step = self.graph.nodes[node].step;
        let key = step.key.as_str();
        let in_loop = self.graph.enclosing_loops(node).next().is_some();
        let in_part = self
            .graph
            .enclosing(node)
            .any(|p| self.graph.nodes[p].step.parallel.is_some());
        let reader = Reader {
            node: Some(node),
            in_loop,
            in_part,
            sees_body_of: None,
            in_lookup: false,
        };
        self.check_after(node);
        self.check_send_backs(node);
        self.check_step(reader, key, "", step);
    }

    /// The checks every step gets, keyed or the part of a parallel step
    /// (`prefix` is then `parallel.step.`).
    fn check_step(&mut self, reader: Reader, key: &str, prefix: &str, step: &'a Step) {
        let f = |name: &str| format!("{prefix}{name}");
        let kinds = step.kinds();
        match kinds.as_slice() {
            [] => self.report(
                key,
                &f("kind"),
                "the step has no kind; give exactly one of agent, script, http, message, save, condition, approval, join, parallel or loop",
                None,
            ),
            [_] => {}
            several => {
                let names: Vec<&str> = several.iter().map(StepKind::name).collect();
                let message = format!("the step has several kinds ({}); give exactly one", names.join(", "));
                self.report(key, &f("kind"), message, None);
            }
        }
        if let Some(when) = &step.when {
            self.check_expr(reader, key, &f("when"), when);
        }
        if let Some(input) = &step.input {
            self.check_value(reader, key, &f("input"), input);
        }
        self.check_lookups(reader, key, prefix, step);
        let outer_lookups = std::mem::replace(
            &mut self.lookup_names,
            step.lookup.iter().map(|l| l.name.clone()).collect(),
        );
        if let Some(attempts) = step.attempts
            && !(1..=self.limits.max_attempts).contains(&attempts)
        {
            let message = format!(
                "attempts is {attempts}; it must be between 1 and {}",
                self.limits.max_attempts
            );
            self.report(key, &f("attempts"), message, None);
        }
        let durations = [
            ("timeout", &step.timeout, self.limits.max_timeout),
            ("backoff", &step.backoff, self.limits.max_backoff),
        ];
        for (name, value, most) in durations {
            if let Some(text) = value {
                match parse_duration(text) {
                    Err(error) => self.report(key, &f(name), error.to_string(), None),
                    Ok(d) if d.is_zero() && name == "timeout" => {
                        self.report(key, &f(name), "a timeout must be longer than zero", None)
                    }
                    Ok(d) if d > most => {
                        self.report(key, &f(name), too_long(name, text, most), None)
                    }
                    Ok(_) => {}
                }
            }
        }
        // A step with several kinds gets no kind-specific checks: which one
        // the author meant is unknown, and the problem above says so.
        if let [kind] = kinds.as_slice() {
            match *kind {
                StepKind::Agent(a) => {
                    if a.prompt.trim().is_empty() {
                        self.report(key, &f("agent.prompt"), "an agent needs a prompt", None);
                    }
                    if a.model.as_deref().is_some_and(|m| m.trim().is_empty()) {
                        self.report(
                            key,
                            &f("agent.model"),
                            "the model name is empty; leave it out to use `default`",
                            None,
                        );
                    }
                    self.check_step_list(reader, key, &f("agent.give"), &a.give);
                    self.check_agent_decisions(reader, key, prefix, a);
                    if let Some(reply) = &a.reply {
                        let declared = [
                            ("fields", !reply.fields.is_empty()),
                            ("items", reply.items.is_some()),
                            ("objects", !reply.objects.is_empty()),
                        ];
                        if reply.format == ReplyFormat::Text
                            && let Some((name, _)) = declared.iter().find(|(_, given)| *given)
                        {
                            self.report(
                                key,
                                &f(&format!("agent.reply.{name}")),
                                format!("reply {name} need `format: json`"),
                                None,
                            );
                        }
                        self.check_output_shape(
                            key,
                            &f("agent.reply"),
                            (&reply.fields, reply.items.as_ref(), &reply.objects),
                            false,
                        );
                    }
                }
                StepKind::Script(s) => self.check_script(key, prefix, s),
                StepKind::Http(h) => self.check_http(reader, key, prefix, h),
                StepKind::Message(m) => self.check_message(reader, key, prefix, m),
                StepKind::Condition(c) => self.check_condition(reader, key, prefix, c),
                StepKind::Approval(a) => self.check_approval(reader, key, prefix, a),
                StepKind::Join(_) => {
                    if step.after.as_ref().is_none_or(|a| a.is_empty()) {
                        self.report(
                            key,
                            &f("after"),
                            "a join needs `after` naming the branches it waits for",
                            None,
                        );
                    }
                }
                StepKind::Parallel(p) => self.check_parallel(reader, key, prefix, p),
                StepKind::Loop(l) => self.check_loop(reader, key, prefix, l),
                StepKind::Save(save) => self.check_save(reader, key, prefix, save),
            }
        }
        self.lookup_names = outer_lookups;
    }

    /// A save names its collection like a step key; its key is one
    /// reference or literal text, its value JSON with references.
    fn check_save(&mut self, reader: Reader, key: &str, prefix: &str, save: &SaveStep) {
        let f = |name: &str| format!("{prefix}save.{name}");
        if let Some((character, message)) = name_problem(&save.collection, "collection name") {
            self.report(key, &f("collection"), message, character);
        }
        if save.key.is_empty() {
            self.report(
                key,
                &f("key"),
                "a save needs a key: a reference or text",
                None,
            );
        } else {
            self.check_value(reader, key, &f("key"), &Value::String(save.key.clone()));
        }
        if let Some(value) = &save.value {
            self.check_value(reader, key, &f("value"), value);
        }
    }

    /// Each lookup: on a step that takes inputs, named apart from the
    /// step's other inputs and every step key (so `{{NAME.…}}` and
    /// `$INPUTS/NAME` mean the lookup), a collection name, a `where` over
    /// `$record` and what the step may read, an `orderBy` under `$record`,
    /// a limit in bounds.
    fn check_lookups(&mut self, reader: Reader, key: &str, prefix: &str, step: &Step) {
        if step.lookup.is_empty() {
            return;
        }
        let takes_inputs = matches!(
            step.kind(),
            None | Some(
                StepKind::Agent(_)
                    | StepKind::Script(_)
                    | StepKind::Http(_)
                    | StepKind::Message(_)
                    | StepKind::Approval(_)
            )
        );
        if !takes_inputs {
            let kind = step.kind().map_or("", |k| k.name());
            let message = format!(
                "a lookup stands on an agent, script, http, message or approval step, not on a {kind} step"
            );
            return self.report(key, &format!("{prefix}lookup"), message, None);
        }
        let input_keys: Vec<&str> = match &step.input {
            Some(Value::Object(map)) => map.keys().map(String::as_str).collect(),
            _ => Vec::new(),
        };
        let mut seen = HashSet::new();
        let in_lookup = Reader {
            in_lookup: true,
            ..reader
        };
        for (i, lookup) in step.lookup.iter().enumerate() {
            let f = |name: &str| format!("{prefix}lookup[{i}].{name}");
            if let Some((character, message)) = name_problem(&lookup.name, "lookup name") {
                self.report(key, &f("name"), message, character);
            } else if !seen.insert(lookup.name.as_str()) {
                let message = format!("two lookups are named `{}`", lookup.name);
                self.report(key, &f("name"), message, None);
            } else if input_keys.contains(&lookup.name.as_str()) {
                let message = format!(
                    "the step's input already has `{}`; a lookup needs a name of its own",
                    lookup.name
                );
                self.report(key, &f("name"), message, None);
            } else if self.graph.find(&lookup.name).is_some() {
                let message = format!(
                    "`{}` is a step key of this flow; name the lookup otherwise, so `{{{{{}.…}}}}` means one thing",
                    lookup.name, lookup.name
                );
                self.report(key, &f("name"), message, None);
            } else if RESERVED_KEYS.contains(&lookup.name.as_str()) {
                let message = format!("`{}` is reserved; choose another name", lookup.name);
                self.report(key, &f("name"), message, Some(1));
            }
            if let Some((character, message)) = name_problem(&lookup.collection, "collection name")
            {
                self.report(key, &f("collection"), message, character);
            }
            if let Some(condition) = &lookup.where_ {
                self.check_expr(in_lookup, key, &f("where"), condition);
            }
            if let Some(order) = &lookup.order_by {
                match expr::parse(order) {
                    Err(e) => self.report(key, &f("orderBy"), e.message, Some(e.position)),
                    Ok(parsed) => match parsed.as_reference() {
                        Some(r) if *r.root() == Root::Record => {}
                        _ => self.report(
                            key,
                            &f("orderBy"),
                            "orderBy is one reference under `$record`, as in `$record.savedAt` or `$record.value.priority`",
                            Some(1),
                        ),
                    },
                }
            }
            if let Some(limit) = lookup.limit
                && !(1..=Lookup::MAX_LIMIT as i32).contains(&limit)
            {
                let message = format!(
                    "limit is {limit}; it must be between 1 and {}",
                    Lookup::MAX_LIMIT
                );
                self.report(key, &f("limit"), message, None);
            }
        }
    }

    fn check_after(&mut self, node: usize) {
        let step = self.graph.nodes[node].step;
        let Some(after) = &step.after else { return };
        let key = step.key.as_str();
        let parent = self.graph.nodes[node].parent;
        let position = self.graph.nodes[node].position;
        let mut seen = HashSet::new();
        for (i, entry) in after.iter().enumerate() {
            let field = format!("after[{i}]");
            if !seen.insert(entry.as_str()) {
                self.report(key, &field, format!("`{entry}` is listed twice"), None);
                continue;
            }
            let (from_key, exit) = split_after(entry);
            if from_key == key {
                self.report(key, &field, "a step cannot come after itself", None);
                continue;
            }
            let Some(from) = self.graph.find(from_key) else {
                let message = format!("no step has the key `{from_key}`{}", self.suggest(from_key));
                self.report(key, &field, message, Some(1));
                continue;
            };
            let from_node = &self.graph.nodes[from];
            if from_node.parent != parent {
                let message = format!(
                    "`{from_key}` is in another list of steps; `after` names steps of the same list (a loop's steps among themselves)"
                );
                self.report(key, &field, message, Some(1));
                continue;
            }
            if from_node.position > position {
                let message = format!(
                    "`{from_key}` is listed after this step; arrows point forward (use sendBack on a later step to redo earlier work)"
                );
                self.report(key, &field, message, Some(1));
                continue;
            }
            if let Some(exit) = exit {
                let character = from_key.chars().count() + 2;
                match exits(from_node.step) {
                    None => {
                        let message =
                            format!("`{from_key}` has no named exits; write `{from_key}` alone");
                        self.report(key, &field, message, Some(character));
                    }
                    Some(names) if !names.iter().any(|n| n == exit) => {
                        let message = format!(
                            "`{from_key}` has no exit `{exit}`; its exits are {}",
                            quote_list(&names)
                        );
                        self.report(key, &field, message, Some(character));
                    }
                    Some(_) => {}
                }
            }
        }
    }

    fn check_send_backs(&mut self, node: usize) {
        let step = self.graph.nodes[node].step;
        let key = step.key.as_str();
        let step_exits = exits(step);
        let mut seen = HashSet::new();
        for (i, back) in step.send_back.iter().enumerate() {
            let field = format!("sendBack[{i}]");
            match &step_exits {
                None => self.report(
                    key,
                    &format!("{field}.exit"),
                    "only a step with exits (a condition, or an approval or agent with decisions) can send work back",
                    None,
                ),
                Some(names) if !names.contains(&back.exit) => {
                    let message = format!("this step has no exit `{}`; its exits are {}", back.exit, quote_list(names));
                    self.report(key, &format!("{field}.exit"), message, None);
                }
                Some(_) => {}
            }
            if !seen.insert(back.exit.as_str()) {
                let message = format!(
                    "exit `{}` already sends work back; one exit sends back to one step",
                    back.exit
                );
                self.report(key, &format!("{field}.exit"), message, None);
            }
            let Some(target) = self.graph.find(&back.to) else {
                let message = format!(
                    "no step has the key `{}`{}",
                    back.to,
                    self.suggest(&back.to)
                );
                self.report(key, &format!("{field}.to"), message, None);
                continue;
            };
            let same_list = self.graph.nodes[target].parent == self.graph.nodes[node].parent;
            let off_path = if self.unsure[node] {
                // Only what no arrow could change: see `unsure`.
                target >= node
            } else {
                !self.graph.comes_before(target, node)
            };
            if target == node || !same_list || off_path {
                let message = format!(
                    "work can only be sent back to a step earlier on the path to this one, in the same list; `{}` is not",
                    back.to
                );
                self.report(key, &format!("{field}.to"), message, None);
            }
        }
    }

    /// Two send-backs whose stretches of steps share a step cannot be run
    /// safely together, so they are refused.
    fn check_overlapping_send_backs(&mut self) {
        let mut stretches: Vec<(usize, usize)> = Vec::new(); // (sender, target)
        for node in 0..self.graph.nodes.len() {
            self.at = Some(node);
            let step = self.graph.nodes[node].step;
            for back in &step.send_back {
                let Some(target) = self.graph.find(&back.to) else {
                    continue;
                };
                if self.graph.nodes[target].parent != self.graph.nodes[node].parent
                    || !self.graph.comes_before(target, node)
                {
                    continue;
                }
                if stretches.iter().any(|&(f, t)| f == node && t == target) {
                    continue;
                }
                let (lo, hi) = (
                    self.graph.nodes[target].position,
                    self.graph.nodes[node].position,
                );
                let clash = stretches.iter().find(|&&(f, t)| {
                    let (a, b) = (self.graph.nodes[t].position, self.graph.nodes[f].position);
                    self.graph.nodes[f].parent == self.graph.nodes[node].parent
                        && a <= hi
                        && lo <= b
                });
                if let Some(&(f, t)) = clash {
                    let message = format!(
                        "this send-back to `{}` overlaps the one from `{}` to `{}`; only one send-back may cover a stretch of steps",
                        back.to, self.graph.nodes[f].key, self.graph.nodes[t].key
                    );
                    self.report(step.key.as_str(), "sendBack", message, None);
                }
                stretches.push((node, target));
            }
        }
    }

    fn check_script(&mut self, key: &str, prefix: &str, s: &ScriptStep) {
        let field = format!("{prefix}script");
        match (&s.source, s.command.is_empty()) {
            (Some(_), false) => self.report(
                key,
                &field,
                "give either `source` or `command`, not both",
                None,
            ),
            (None, true) => self.report(
                key,
                &field,
                "a script needs `source` (a shell script) or `command`",
                None,
            ),
            (Some(_), true) if !s.args.is_empty() => self.report(
                key,
                &format!("{field}.args"),
                "`args` go with `command`, not with `source`",
                None,
            ),
            _ => {}
        }
        for (i, env) in s.env.iter().enumerate() {
            let here = format!("{field}.env[{i}]");
            if env.name.is_empty()
                || !env
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                let message = format!(
                    "`{}` is not a variable name (letters, digits and `_`)",
                    env.name
                );
                self.report(key, &here, message, None);
            }
            if env.value.is_some() == env.value_from.is_some() {
                self.report(key, &here, "give either `value` or `valueFrom`", None);
            }
        }
        if let Some(output) = &s.output {
            self.check_output_shape(
                key,
                &format!("{field}.output"),
                (&output.fields, output.items.as_ref(), &output.objects),
                true,
            );
        }
    }

    fn check_http(&mut self, reader: Reader, key: &str, prefix: &str, h: &HttpStep) {
        let field = |name: &str| format!("{prefix}http.{name}");
        if let Some(method) = &h.method
            && !HTTP_METHODS.contains(&method.as_str())
        {
            let message = format!(
                "`{method}` is not a method; use one of {}",
                HTTP_METHODS.join(", ")
            );
            self.report(key, &field("method"), message, None);
        }
        self.check_template(reader, key, &field("url"), &h.url, Place::Url);
        self.check_secret_origin(key, &field("url"), h);
        for (i, q) in h.query.iter().enumerate() {
            self.check_template(
                reader,
                key,
                &field(&format!("query[{i}].value")),
                &q.value,
                Place::Query,
            );
        }
        for (i, header) in h.headers.iter().enumerate() {
            let here = field(&format!("headers[{i}]"));
            if header.name.is_empty() || !header.name.bytes().all(is_header_name_byte) {
                let message = format!("`{}` is not a header name", header.name);
                self.report(key, &format!("{here}.name"), message, None);
            } else if let Some(message) = reserved_header_problem(&header.name) {
                self.report(key, &format!("{here}.name"), message, None);
            }
            match (&header.value, &header.value_from) {
                (Some(value), None) => {
                    self.check_template(reader, key, &format!("{here}.value"), value, Place::Header)
                }
                (None, Some(_)) => {}
                _ => self.report(key, &here, "give either `value` or `valueFrom`", None),
            }
        }
        if let Some(body) = &h.body {
            let given = [
                body.json.is_some(),
                body.text.is_some(),
                body.form.is_some(),
            ];
            if given.iter().filter(|g| **g).count() != 1 {
                self.report(
                    key,
                    &field("body"),
                    "give exactly one of `json`, `text` or `form`",
                    None,
                );
            }
            if let Some(json) = &body.json {
                self.check_template(reader, key, &field("body.json"), json, Place::Json);
            }
            if let Some(text) = &body.text {
                self.check_template(reader, key, &field("body.text"), text, Place::Text);
            }
            for (i, pair) in body.form.iter().flatten().enumerate() {
                self.check_template(
                    reader,
                    key,
                    &field(&format!("body.form[{i}].value")),
                    &pair.value,
                    Place::Form,
                );
            }
        }
        for (name, path) in &h.keep {
            if let Some(message) = keep_path_problem(path) {
                self.report(key, &field(&format!("keep.{name}")), message, None);
            }
        }
        if let Some(timeout) = &h.timeout {
            match parse_duration(timeout) {
                Err(error) => self.report(key, &field("timeout"), error.to_string(), None),
                Ok(d) if d > self.limits.max_timeout => {
                    let message = too_long("timeout", timeout, self.limits.max_timeout);
                    self.report(key, &field("timeout"), message, None)
                }
                Ok(_) => {}
            }
        }
    }

    /// The Secret rule: a step that binds a Secret sends it only to an
    /// origin its author wrote, so no run input or step output may choose
    /// the URL's scheme, host or port (placeholders only in path and query).
    fn check_secret_origin(&mut self, key: &str, field: &str, h: &HttpStep) {
        let Some(secret) = h
            .headers
            .iter()
            .find_map(|header| header.value_from.as_ref())
        else {
            return;
        };
        let Ok(parsed) = template::parse(&h.url, Place::Url) else {
            return; // already reported by the URL's own check
        };
        let Some(first) = parsed.placeholders().next() else {
            return;
        };
        if !origin_is_literal(&h.url, first.position) {
            let message = format!(
                "this step sends the Secret `{}` in a header, so its URL must begin with a written scheme, host and port; `{}` here would let a run's input or a step's output choose where the secret goes (placeholders may stand only in the path and query)",
                secret.secret_key_ref.name,
                first.written()
            );
            self.report(key, field, message, Some(first.position));
        }
    }

    fn check_message(&mut self, reader: Reader, key: &str, prefix: &str, m: &MessageStep) {
        let field = |name: &str| format!("{prefix}message{name}");
        self.check_template(reader, key, &field(".text"), &m.text, Place::Message);
        if let Some(problem) = super::target_problem(m) {
            return self.report(key, &field(""), problem, None);
        }
        if let Some(webhook) = &m.webhook {
            self.check_template(
                reader,
                key,
                &field(".webhook.url"),
                &webhook.url,
                Place::Url,
            );
        }
        if let Some(slack) = &m.slack
            && slack.channel.trim().is_empty()
        {
            self.report(
                key,
                &field(".slack.channel"),
                "name the channel, such as `#ops`",
                None,
            );
        }
        if let Some(matrix) = &m.matrix {
            for (name, message) in super::check_matrix(matrix) {
                self.report(key, &field(&format!(".matrix.{name}")), message, None);
            }
        }
        let threads = [
            (
                ".slack.thread",
                m.slack.as_ref().and_then(|t| t.thread.as_ref()),
            ),
            (
                ".matrix.thread",
                m.matrix.as_ref().and_then(|t| t.thread.as_ref()),
            ),
        ];
        for (name, thread) in threads {
            if let Some(thread) = thread {
                self.check_template(reader, key, &field(name), thread, Place::Text);
            }
        }
    }

    fn check_condition(&mut self, reader: Reader, key: &str, prefix: &str, c: &ConditionStep) {
        let field = format!("{prefix}condition");
        match (&c.when, c.paths.is_empty()) {
            (Some(when), true) => self.check_expr(reader, key, &format!("{field}.when"), when),
            (None, false) => {
                let otherwise = c.otherwise.as_deref().unwrap_or("otherwise");
                let mut names = HashSet::new();
                for (i, path) in c.paths.iter().enumerate() {
                    let here = format!("{field}.paths[{i}]");
                    if let Some((character, message)) = name_problem(&path.name, "path name") {
                        self.report(key, &format!("{here}.name"), message, character);
                    } else if !names.insert(path.name.as_str()) || path.name == otherwise {
                        let message = format!("the exit `{}` is named twice", path.name);
                        self.report(key, &format!("{here}.name"), message, None);
                    }
                    self.check_expr(reader, key, &format!("{here}.when"), &path.when);
                }
                if let Some((character, message)) = name_problem(otherwise, "exit name") {
                    self.report(key, &format!("{field}.otherwise"), message, character);
                }
            }
            (Some(_), false) => {
                self.report(key, &field, "give either `when` or `paths`, not both", None)
            }
            (None, true) => self.report(key, &field, "a condition needs `when` or `paths`", None),
        }
    }

    fn check_approval(&mut self, reader: Reader, key: &str, prefix: &str, a: &ApprovalStep) {
        let field = format!("{prefix}approval");
        self.check_step_list(reader, key, &format!("{field}.show"), &a.show);
        match a.mode {
            ApprovalMode::Review if a.decisions.is_empty() => self.report(
                key,
                &format!("{field}.decisions"),
                "a review needs decisions, such as [approve, changes]",
                None,
            ),
            ApprovalMode::Entry if a.fields.is_empty() => self.report(
                key,
                &format!("{field}.fields"),
                "an entry needs the fields the person fills in",
                None,
            ),
            ApprovalMode::Both => {
                if a.decisions.is_empty() {
                    self.report(
                        key,
                        &format!("{field}.decisions"),
                        "mode both needs decisions, such as [accept, changes], beside its fields",
                        None,
                    );
                }
                if a.fields.is_empty() {
                    self.report(
                        key,
                        &format!("{field}.fields"),
                        "mode both needs the fields the person fills in, beside its decisions",
                        None,
                    );
                }
            }
            _ => {}
        }
        self.check_approvals(key, &field, a);
        let mut seen = HashSet::new();
        for (i, decision) in a.decisions.iter().enumerate() {
            let here = format!("{field}.decisions[{i}]");
            self.check_listed_name(key, &here, decision, "decision", &mut seen, || {
                format!("the decision `{decision}` is listed twice")
            });
        }
        self.check_fields(key, &format!("{field}.fields"), &a.fields, false);
    }

    /// An agent's `decisions` (plain names, each once: they are its exits)
    /// and `reviews` (an earlier step; only with decisions, and then the
    /// agent hands in nothing but its decision, so no `reply`).
    fn check_agent_decisions(&mut self, reader: Reader, key: &str, prefix: &str, a: &AgentStep) {
        let mut seen = HashSet::new();
        for (i, decision) in a.decisions.iter().enumerate() {
            let here = format!("{prefix}agent.decisions[{i}].name");
            let name = &decision.name;
            self.check_listed_name(key, &here, name, "decision", &mut seen, || {
                format!("the decision `{name}` is listed twice")
            });
        }
        let Some(reviewed) = &a.reviews else {
            return;
        };
        let field = format!("{prefix}agent.reviews");
        if a.decisions.is_empty() {
            let message = "an agent that reviews another step's work hands in a decision: give `decisions`, such as [{name: approve}, {name: changes}]";
            self.report(key, &field, message, None);
        }
        if a.reply.is_some() {
            let message = "an agent that reviews another step's work hands in only its decision and instructions, so it takes no `reply`";
            self.report(key, &format!("{prefix}agent.reply"), message, None);
        }
        self.check_step_read(reader, key, &field, reviewed, None);
    }

    /// `approvals`: at least 1; more only in review mode, and never more
    /// than the approvers named could give.
    fn check_approvals(&mut self, key: &str, field: &str, a: &ApprovalStep) {
        let Some(n) = a.approvals else { return };
        let here = format!("{field}.approvals");
        if n < 1 {
            return self.report(
                key,
                &here,
                format!("approvals is how many people must agree: 1 or more, not {n}"),
                None,
            );
        }
        if n > 1 && a.mode != ApprovalMode::Review {
            let mode = if a.mode == ApprovalMode::Entry {
                "entry"
            } else {
                "both"
            };
            return self.report(
                key,
                &here,
                format!(
                    "approvals: {n} needs mode review; in mode {mode} one person fills in the fields"
                ),
                None,
            );
        }
        if let Some(approvers) = &a.approvers
            && approvers.groups.is_empty()
            && !approvers.users.is_empty()
        {
            let mut users: Vec<&str> = approvers.users.iter().map(String::as_str).collect();
            users.sort_unstable();
            users.dedup();
            if users.len() < n as usize {
                self.report(
                    key,
                    &here,
                    format!(
                        "approvals: {n} can never be reached: approvers names only {} different user{} and no group",
                        users.len(),
                        if users.len() == 1 { "" } else { "s" }
                    ),
                    None,
                );
            }
        }
    }

    fn check_parallel(&mut self, reader: Reader, key: &str, prefix: &str, p: &'a ParallelStep) {
        let field = format!("{prefix}parallel");
        match (&p.items, p.parts.is_empty()) {
            (Some(items), true) => {
                if !items
                    .as_str()
                    .is_some_and(|s| s.starts_with('$') && !s.starts_with("$$"))
                {
                    self.report(
                        key,
                        &format!("{field}.items"),
                        "items must be one reference to a list, such as `$input.companies`",
                        None,
                    );
                } else {
                    self.check_value(reader, key, &format!("{field}.items"), items);
                }
            }
            (None, false) => {
                let mut seen = HashSet::new();
                for (i, part) in p.parts.iter().enumerate() {
                    let here = format!("{field}.parts[{i}]");
                    let name = &part.key;
                    let at = format!("{here}.key");
                    self.check_listed_name(key, &at, name, "part key", &mut seen, || {
                        format!("the part `{name}` is listed twice")
                    });
                    if let Some(input) = &part.input {
                        self.check_value(reader, key, &format!("{here}.input"), input);
                    }
                }
            }
            (Some(_), false) => self.report(
                key,
                &field,
                "give either `items` or `parts`, not both",
                None,
            ),
            (None, true) => self.report(
                key,
                &field,
                "a parallel step needs `items` or `parts`",
                None,
            ),
        }
        if let Some(n) = p.max_concurrency
            && n < 1
        {
            self.report(
                key,
                &format!("{field}.maxConcurrency"),
                "maxConcurrency must be at least 1",
                None,
            );
        }
        let part = &*p.step;
        let inner = format!("{field}.step.");
        if !part.key.is_empty() {
            self.report(
                key,
                &format!("{inner}key"),
                "the step of a parallel part has no key; the parallel step's key names it",
                None,
            );
        }
        if part.after.is_some() || !part.send_back.is_empty() {
            self.report(
                key,
                &inner,
                "the step of a parallel part takes no `after` or `sendBack`",
                None,
            );
        }
        if !self.check_part_kind(key, &inner, part) {
            return;
        }
        let part_reader = Reader {
            in_part: true,
            ..reader
        };
        self.check_step(part_reader, key, &inner, part);
    }

    /// A part runs one agent, script, http or message step. The engine
    /// cannot run a condition, approval, join, loop or parallel step as a
    /// part (the run would stall), so they are refused here, when the flow
    /// is saved. Returns whether the part's kind can run.
    fn check_part_kind(&mut self, key: &str, inner: &str, part: &Step) -> bool {
        let Some(kind) = part.kind() else {
            return true; // no kind, or several: check_step says so
        };
        match kind {
            StepKind::Agent(_)
            | StepKind::Script(_)
            | StepKind::Http(_)
            | StepKind::Message(_)
            | StepKind::Save(_) => true,
            StepKind::Condition(_)
            | StepKind::Approval(_)
            | StepKind::Join(_)
            | StepKind::Loop(_)
            | StepKind::Parallel(_) => {
                let message = format!(
                    "a parallel part runs an agent, script, http, message or save step, not a {} step",
                    kind.name()
                );
                self.report(key, &format!("{inner}{}", kind.name()), message, None);
                false
            }
        }
    }

    fn check_loop(&mut self, reader: Reader, key: &str, prefix: &str, l: &LoopStep) {
        let field = format!("{prefix}loop");
        if l.steps.is_empty() {
            self.report(
                key,
                &format!("{field}.steps"),
                "a loop needs at least one step",
                None,
            );
        }
        if !(1..=self.limits.max_iterations).contains(&l.max_iterations) {
            let message = format!(
                "maxIterations is {}; it must be between 1 and {}",
                l.max_iterations, self.limits.max_iterations
            );
            self.report(key, &format!("{field}.maxIterations"), message, None);
        }
        let until_reader = Reader {
            in_loop: true,
            sees_body_of: reader.node,
            ..reader
        };
        self.check_expr(until_reader, key, &format!("{field}.until"), &l.until);
    }

    /// A declared output (an agent's `reply`, a script's `output`): one of
    /// `fields`, `items` and `objects`; object names plain identifiers,
    /// each once, each an object or a list. `file` fields only in a
    /// script's own `fields` (`files`: true), where they are kept.
    fn check_output_shape(
        &mut self,
        key: &str,
        field: &str,
        (fields, items, objects): (&[Field], Option<&Items>, &[NamedObject]),
        files: bool,
    ) {
        let given: Vec<&str> = [
            ("fields", !fields.is_empty()),
            ("items", items.is_some()),
            ("objects", !objects.is_empty()),
        ]
        .iter()
        .filter(|(_, given)| *given)
        .map(|(name, _)| *name)
        .collect();
        if given.len() > 1 {
            let message = format!(
                "give one of `fields` (one object), `items` (a list) and `objects` (several), not {}",
                given.join(" and ")
            );
            self.report(key, &format!("{field}.{}", given[1]), message, None);
        }
        self.check_fields(key, &format!("{field}.fields"), fields, files);
        if let Some(items) = items {
            self.check_fields(key, &format!("{field}.items.fields"), &items.fields, false);
        }
        let mut seen = HashSet::new();
        for (i, object) in objects.iter().enumerate() {
            let here = format!("{field}.objects[{i}]");
            let name = &object.name;
            let at = format!("{here}.name");
            self.check_listed_name(key, &at, name, "object name", &mut seen, || {
                format!("the object `{name}` is declared twice")
            });
            if !object.fields.is_empty() && object.items.is_some() {
                let message = "an object is either `fields` (one object) or `items` (a list)";
                self.report(key, &format!("{here}.items"), message, None);
            }
            self.check_fields(key, &format!("{here}.fields"), &object.fields, false);
            if let Some(items) = &object.items {
                self.check_fields(key, &format!("{here}.items.fields"), &items.fields, false);
            }
        }
    }

    /// Declared fields; `file` fields only where a script prints them
    /// (`files`: true).
    fn check_fields(&mut self, key: &str, field: &str, fields: &[Field], files: bool) {
        let mut seen = HashSet::new();
        for (i, f) in fields.iter().enumerate() {
            let here = format!("{field}[{i}]");
            let name = &f.name;
            let at = format!("{here}.name");
            self.check_listed_name(key, &at, name, "field name", &mut seen, || {
                format!("the field `{name}` is declared twice")
            });
            if f.type_ == FILE_TYPE {
                if !files {
                    let message = "`file` fields are for scripts: a script names a file it left in `$OUTPUTS`; here use string";
                    self.report(key, &format!("{here}.type"), message, None);
                }
            } else if !FIELD_TYPES.contains(&f.type_.as_str()) {
                let message = format!(
                    "`{}` is not a field type; use one of {}",
                    f.type_,
                    FIELD_TYPES.join(", ")
                );
                self.report(key, &format!("{here}.type"), message, None);
            }
        }
    }

    /// `give` and `show`: whole outputs of earlier steps.
    fn check_step_list(&mut self, reader: Reader, key: &str, field: &str, keys: &[String]) {
        for (i, target) in keys.iter().enumerate() {
            self.check_step_read(reader, key, &format!("{field}[{i}]"), target, None);
        }
    }

    fn check_expr(&mut self, reader: Reader, key: &str, field: &str, src: &str) {
        match expr::parse(src) {
            Err(e) => self.report(key, field, e.message, Some(e.position)),
            Ok(parsed) => {
                for reference in parsed.references() {
                    self.check_reference(reader, key, field, reference);
                }
            }
        }
    }

    fn check_value(&mut self, reader: Reader, key: &str, field: &str, value: &Value) {
        match expr::parse_value_at(value, field) {
            Err(errors) => {
                for e in errors {
                    self.report(key, &e.path, e.message, Some(e.position));
                }
            }
            Ok(template) => {
                for (path, reference) in template.located_references() {
                    self.check_reference(reader, key, path, reference);
                }
            }
        }
    }

    fn check_template(&mut self, reader: Reader, key: &str, field: &str, src: &str, place: Place) {
        let parsed = match template::parse(src, place) {
            Ok(parsed) => parsed,
            Err(e) => return self.report(key, field, e.message, Some(e.position)),
        };
        if place == Place::Json
            && let Err(e) = parsed.check_json()
        {
            self.report(key, field, e.message, Some(e.position));
        }
        for placeholder in parsed.placeholders() {
            if !placeholder.reads_input() && !self.lookup_names.contains(&placeholder.key) {
                let before = self.problems.len();
                self.check_step_read(
                    reader,
                    key,
                    field,
                    &placeholder.key,
                    Some(placeholder.position),
                );
                if self.problems.len() == before
                    && placeholder.path.source == template::Source::Json
                {
                    let hops: Vec<Hop> = placeholder
                        .path
                        .segments
                        .iter()
                        .map(|segment| match segment {
                            template::Segment::Name(n) => Hop::Key(n.clone()),
                            template::Segment::Index(i) => Hop::Either(i.to_string()),
                        })
                        .collect();
                    let at = Some(placeholder.position);
                    self.check_typed_read(key, field, &placeholder.key, &hops, at);
                }
            }
        }
    }

    fn check_reference(&mut self, reader: Reader, key: &str, field: &str, reference: &Reference) {
        let position = Some(reference.position());
        match reference.root() {
            Root::Step { key: target } => {
                let before = self.problems.len();
                self.check_step_read(reader, key, field, target, Some(reference.key_position()));
                // Typed only where the read itself is allowed: one problem
                // per mistake.
                if self.problems.len() == before && reference.field() == Some(expr::Field::Output) {
                    let hops: Vec<Hop> = reference
                        .path()
                        .iter()
                        .map(|segment| match segment {
                            expr::Segment::Key(k) => Hop::Key(k.clone()),
                            expr::Segment::Index(_) => Hop::Index,
                        })
                        .collect();
                    self.check_typed_read(key, field, target, &hops, position);
                }
            }
            Root::Loop if !reader.in_loop => {
                self.report(key, field, "`$loop` is only known inside a loop", position)
            }
            Root::Record if !reader.in_lookup => self.report(
                key,
                field,
                "`$record` is only known in a lookup's `where` and `orderBy`",
                position,
            ),
            Root::Item | Root::Index if !reader.in_part => {
                let message = format!(
                    "`${}` is only known inside a parallel step's part",
                    reference.root().name()
                );
                self.report(key, field, message, position)
            }
            _ => {}
        }
    }

    /// A read into the output of `target` (`hops` after `output`), checked
    /// against what `target` declares it yields: a field it does not
    /// declare, a list read as an object, a path into text.
    fn check_typed_read(
        &mut self,
        key: &str,
        field: &str,
        target: &str,
        hops: &[Hop],
        character: Option<usize>,
    ) {
        let Some(t) = self.graph.find(target) else {
            return;
        };
        let reviewer: Vec<Field>;
        let shape = match self.graph.nodes[t].step.kind() {
            // A reviewing agent's output is its decision and instructions.
            Some(StepKind::Agent(a)) if a.reviews.is_some() && !a.decisions.is_empty() => {
                let text = |name: &str| Field::new(name, "string");
                reviewer = vec![text("decision"), text("instructions")];
                Shape::Object(&reviewer)
            }
            Some(StepKind::Agent(a)) => Shape::of_reply(a.reply.as_ref()),
            Some(StepKind::Script(s)) => Shape::of_script(s.output.as_ref()),
            _ => Shape::Any,
        };
        if let Err(message) = shape.check_read(target, hops) {
            self.report(key, field, message, character);
        }
    }

    /// Whether the step `reader` may read the step `target`, reported when not.
    fn check_step_read(
        &mut self,
        reader: Reader,
        key: &str,
        field: &str,
        target: &str,
        character: Option<usize>,
    ) {
        let Some(t) = self.graph.find(target) else {
            let message = format!("no step has the key `{target}`{}", self.suggest(target));
            return self.report(key, field, message, character);
        };
        let Some(r) = reader.node else { return };
        let readable = self.graph.can_read(r, t)
            || reader
                .sees_body_of
                .is_some_and(|l| self.graph.enclosing(t).any(|p| p == l));
        if readable {
            return;
        }
        let message = if t == r {
            format!(
                "`{target}` is this step; a step reads its own earlier result only inside a loop"
            )
        } else if self.runs_later(r, t) {
            format!(
                "`{target}` runs later than this step, so its data cannot be read here; a step reads a later one only when both are inside the same loop"
            )
        } else if self.unsure[r] {
            // A bad `after` on the way here left an arrow out: already said.
            return;
        } else {
            format!(
                "`{target}` does not run before this step on its path, so its data cannot be read here"
            )
        };
        self.report(key, field, message, character);
    }

    /// ` (did you mean `draft`?)` when a key is close to an existing one.
    fn suggest(&self, wrong: &str) -> String {
        let keys = self.graph.nodes.iter().map(|n| n.key);
        closest(wrong, keys)
            .map(|k| format!(" (did you mean `{k}`?)"))
            .unwrap_or_default()
    }
}

/// What is wrong with a step key, with the 1-based character where it goes wrong.
fn key_problem(key: &str, max_len: usize) -> Option<(Option<usize>, String)> {
    if key.is_empty() {
        return Some((None, "every step needs a key".into()));
    }
    if let Some(problem) = name_problem(key, "step key") {
        return Some(problem);
    }
    if RESERVED_KEYS.contains(&key) {
        return Some((Some(1), format!("`{key}` is reserved; choose another key")));
    }
    let len = key.chars().count();
    if len > max_len {
        return Some((
            Some(max_len + 1),
            format!("the key is {len} characters long; at most {max_len} are allowed"),
        ));
    }
    None
}

/// Keys, exits, field names and decisions share one form: a lowercase letter,
/// then lowercase letters, digits and `_` (field names may also use capitals).
/// The message for a duration over its bound, with the bound in days.
fn too_long(name: &str, text: &str, most: Duration) -> String {
    let days = most.as_secs() / 86_400;
    format!("{name} is `{text}`; it may be at most {days} days (`{days}d`)")
}

fn name_problem(name: &str, what: &str) -> Option<(Option<usize>, String)> {
    let allow_upper = what == "field name";
    let ok_first = |c: char| c.is_ascii_lowercase() || (allow_upper && c.is_ascii_uppercase());
    let ok_rest = |c: char| ok_first(c) || c.is_ascii_digit() || c == '_';
    let mut chars = name.chars().enumerate();
    match chars.next() {
        None => return Some((None, format!("the {what} is empty"))),
        Some((_, c)) if !ok_first(c) => {
            let rule = if allow_upper {
                "a letter"
            } else {
                "a lowercase letter"
            };
            return Some((
                Some(1),
                format!("the {what} `{name}` must start with {rule}"),
            ));
        }
        _ => {}
    }
    let (i, c) = chars.find(|(_, c)| !ok_rest(*c))?;
    let rule = if allow_upper {
        "letters"
    } else {
        "lowercase letters"
    };
    Some((
        Some(i + 1),
        format!("the {what} `{name}` has `{c}`; use {rule}, digits and `_`"),
    ))
}

/// `keep` paths read the response: `status`, `text`, `json` or `json.a.0.b`.
fn keep_path_problem(path: &str) -> Option<String> {
    let mut parts = path.split('.');
    match parts.next() {
        Some("json") => {}
        Some("status" | "text") if path.len() <= 6 => return None,
        _ => {
            return Some(format!(
                "`{path}` is not a response path; write `json.field`, `json`, `status` or `text`"
            ));
        }
    }
    let rest: Vec<&str> = parts.collect();
    if rest.len() > template::MAX_LEVELS {
        return Some(format!(
            "`{path}` goes {} levels deep; at most {} are allowed",
            rest.len(),
            template::MAX_LEVELS
        ));
    }
    let bad = rest.iter().find(|p| {
        p.is_empty()
            || !(p.chars().all(|c| c.is_ascii_digit())
                || p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
    })?;
    Some(format!(
        "`{bad}` in `{path}` is not a field name or a list position"
    ))
}

/// Headers that belong to the connection or to the message's framing, which
/// the HTTP client sets itself: a `Content-Length` that disagrees with the
/// body makes the request hang until its timeout, a `Host` sends it to a
/// different virtual host than the URL names, and hop-by-hop headers
/// (RFC 9110 7.6.1) mean nothing to the server.
const RESERVED_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
];

/// Why an author may not set header `name`, if they may not.
fn reserved_header_problem(name: &str) -> Option<String> {
    let lower = name.to_ascii_lowercase();
    if !(RESERVED_HEADERS.contains(&lower.as_str()) || lower.starts_with("proxy-")) {
        return None;
    }
    let why = match lower.as_str() {
        "host" => "the host is the URL's",
        "content-length" | "transfer-encoding" | "trailer" => {
            "the body's length and framing are set from the body"
        }
        _ => "it concerns the connection, which the HTTP client manages",
    };
    Some(format!("`{name}` cannot be set by a step: {why}"))
}

fn is_header_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}
