//! Building the [`Work`] of an attempt from the run's status: the task with
//! its text resolved where it can be, the input, and the data placeholders
//! may read. Kept with the machine, which owns the status it reads; the
//! work types themselves stay plain data in `engine/work.rs`.

use serde_json::{Value, json};

use super::RunMachine;
use crate::api::{StepKind, StepPhase};
use crate::engine::compiled::CompiledStep;
use crate::engine::scope::{EvalScope, StepViews};
use crate::engine::work::{
    AgentTask, ChangeRequest, DataView, Given, LookupWork, PartRef, SaveTask, Task, Work,
};
use crate::expr::Root;

impl RunMachine<'_> {
    // ---- work -----------------------------------------------------------------

    pub(in crate::engine) fn step_work(&self, node: usize, attempt: u32) -> Option<Work> {
        let compiled = &self.flow.steps[node];
        let task = self.task(node, None, compiled)?;
        let record = self.state.steps.get(self.flow.key(node));
        let found = record
            .and_then(|r| r.attempts.get((attempt as usize).checked_sub(1)?))
            .and_then(|a| a.lookups.as_ref());
        let lookups = lookup_work(compiled, found);
        let mut data = if task.has_placeholders() || !lookups.is_empty() {
            self.data_view(node, None, &data_keys(compiled))
        } else {
            DataView::default()
        };
        let scope = self.scope(node, None);
        let mut input = match &compiled.input {
            Some(t) => t.resolve(&scope),
            None => self.default_input(node),
        };
        hand_over(&lookups, &mut input, &mut data);
        Some(Work {
            step: self.flow.key(node).to_string(),
            part: None,
            attempt,
            iteration: self.iteration_of(node).map(|i| i as u32),
            task,
            input,
            timeout: compiled.timeout,
            data,
            run: self.run.clone(),
            review: self.change_request(node),
            lookups,
        })
    }

    pub(in crate::engine) fn part_work(&self, node: usize, part: usize) -> Option<Work> {
        let inner = self.flow.steps[node].part.as_deref()?;
        let record = self.state.steps.get(self.flow.key(node))?;
        let p = record.parts.get(part)?;
        let task = self.task(node, Some(part), inner)?;
        let found = p.attempts.last().and_then(|a| a.lookups.as_ref());
        let lookups = lookup_work(inner, found);
        let mut data = if task.has_placeholders() || !lookups.is_empty() {
            self.data_view(node, Some(part), &data_keys(inner))
        } else {
            DataView::default()
        };
        let scope = self.scope(node, Some(part));
        let mut input = match &inner.input {
            Some(t) => t.resolve(&scope),
            None => p.item.clone().unwrap_or(Value::Null),
        };
        hand_over(&lookups, &mut input, &mut data);
        Some(Work {
            step: self.flow.key(node).to_string(),
            part: Some(PartRef {
                index: part,
                key: p.key.clone(),
                round: u32::try_from(record.rounds.max(1)).unwrap_or(1),
            }),
            attempt: p.attempts.len() as u32,
            iteration: self.iteration_of(node).map(|i| i as u32),
            task,
            input,
            timeout: inner.timeout,
            data,
            run: self.run.clone(),
            review: self.change_request(node),
            lookups,
        })
    }

    pub(in crate::engine) fn task(
        &self,
        node: usize,
        part: Option<usize>,
        compiled: &CompiledStep<'_>,
    ) -> Option<Task> {
        Some(match compiled.step.kind()? {
            StepKind::Save(save) => {
                let (key, value) = compiled.save.as_ref()?;
                let scope = self.scope(node, part);
                let value = match value {
                    Some(v) => v.resolve(&scope),
                    None => match self.previous_node(node) {
                        Some(previous) => self.output_of(self.flow.key(previous)),
                        None => Value::Null,
                    },
                };
                Task::Save(SaveTask {
                    collection: save.collection.clone(),
                    key: key.resolve(&scope),
                    value,
                })
            }
            StepKind::Script(s) => Task::Script(s.clone()),
            StepKind::Http(h) => Task::Http(h.clone()),
            StepKind::Message(m) => Task::Message(m.clone()),
            StepKind::Agent(a) => {
                let given = a
                    .give
                    .iter()
                    .map(|key| (key, "instrument"))
                    .chain(a.reviews.iter().map(|key| (key, "reviewed")))
                    .map(|(key, role)| {
                        let record = self.state.steps.get(key);
                        let ran = record.is_some_and(|r| r.status == StepPhase::Completed);
                        Given {
                            name: key.clone(),
                            state: record
                                .map_or("pending".into(), |r| r.status.as_str().to_string()),
                            role,
                            value: if ran {
                                record.and_then(|r| r.output.clone())
                            } else {
                                None
                            },
                        }
                    })
                    .collect();
                let change_request = self.change_request(node);
                let flow_description = a
                    .tell_flow
                    .then(|| crate::engine::describe::describe(self.flow, node));
                Task::Agent(AgentTask {
                    spec: a.clone(),
                    given,
                    change_request,
                    flow_description,
                })
            }
            _ => return None,
        })
    }

    /// What the reviewer who sent work back to `node` decided and asked,
    /// when one did.
    fn change_request(&self, node: usize) -> Option<ChangeRequest> {
        let note = self.state.steps.get(self.flow.key(node))?.review.as_ref()?;
        Some(ChangeRequest {
            reviewer: note.reviewer.clone(),
            decision: note.decision.clone(),
            reviewed: match &note.reviewed {
                Some(Value::Object(m)) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                _ => Vec::new(),
            },
            instructions: note.instructions.clone().unwrap_or_default(),
        })
    }

    /// With no `input`, the first step gets the run input; a later one the
    /// run input and the previous step's output, merged when both are objects.
    pub(in crate::engine) fn default_input(&self, node: usize) -> Value {
        let Some(previous) = self.previous_node(node) else {
            return self.input.clone();
        };
        crate::engine::chains::default_input(&self.input, self.output_of(self.flow.key(previous)))
    }

    pub(in crate::engine) fn data_view(
        &self,
        node: usize,
        part: Option<usize>,
        keys: &[String],
    ) -> DataView {
        let mut view = DataView {
            input: self.input.clone(),
            ..Default::default()
        };
        for key in keys {
            if let Some(v) = self.flow.node(key).and_then(|n| self.views.get(n)) {
                view.steps.insert(key.clone(), v.clone());
            }
        }
        let scope = self.scope(node, part);
        for root in ["previous", "loop", "item", "index", "run"] {
            if let Some(v) = crate::scope::Scope::root(&scope, root) {
                view.roots.insert(root.to_string(), v.clone());
            }
        }
        view
    }

    // ---- scopes -----------------------------------------------------------------

    /// What a step (or one part of it) sees: `$previous`, the enclosing
    /// loop's pass, the part's `$item` and `$index`.
    pub(in crate::engine) fn scope(&self, node: usize, part: Option<usize>) -> EvalScope<'_> {
        let item = part.and_then(|i| {
            let record = self.state.steps.get(self.flow.key(node))?;
            record.parts.get(i)?.item.as_ref()
        });
        self.scope_from(
            self.previous_node(node),
            self.iteration_of(node),
            item,
            part,
        )
    }

    /// What a loop's `until` sees after pass `iteration`: `$previous` is the
    /// last step of its body.
    pub(in crate::engine) fn scope_inside_loop(
        &self,
        node: usize,
        iteration: i32,
    ) -> EvalScope<'_> {
        let last = self.flow.body(node).last().copied();
        self.scope_from(last, Some(iteration), None, None)
    }

    /// What the flow's `output` sees: `$previous` is its last step.
    pub(in crate::engine) fn scope_at_end(&self) -> EvalScope<'_> {
        let last = self.flow.graph.lists[0].last().copied();
        self.scope_from(last, None, None, None)
    }

    /// The one place a scope is put together from the run's data.
    fn scope_from<'s>(
        &'s self,
        previous: Option<usize>,
        loop_iteration: Option<i32>,
        item: Option<&'s Value>,
        index: Option<usize>,
    ) -> EvalScope<'s> {
        EvalScope {
            input: &self.input,
            views: StepViews {
                graph: &self.flow.graph,
                values: &self.views,
            },
            previous: previous.and_then(|p| self.views.get(p)),
            loop_: loop_iteration.map(|i| serde_json::json!({ "iteration": i })),
            item,
            index: index.map(Value::from),
            run: &self.run_value,
        }
    }

    /// The step listed just before; for the first step of a later loop pass,
    /// the last step of the pass before.
    pub(in crate::engine) fn previous_node(&self, node: usize) -> Option<usize> {
        let list = self.flow.list_of(node);
        let position = self.flow.graph.nodes[node].position;
        if position > 0 {
            return list.get(position - 1).copied();
        }
        let parent = self.flow.graph.nodes[node].parent?;
        if self.pass_of(parent) > 1 {
            list.last().copied()
        } else {
            self.previous_node(parent)
        }
    }

    /// The pass of the loop closest around `node`, if it is in one.
    pub(in crate::engine) fn iteration_of(&self, node: usize) -> Option<i32> {
        let l = self.flow.graph.enclosing_loops(node).next()?;
        self.recorded_iteration(l)
    }

    /// The pass the loop `node` is in, 1 before its record says: the one
    /// reading of a loop's pass, so a rule about passes reads it alike.
    pub(in crate::engine) fn pass_of(&self, node: usize) -> i32 {
        self.recorded_iteration(node).unwrap_or(1)
    }

    /// The pass the status records for the loop `node`.
    fn recorded_iteration(&self, node: usize) -> Option<i32> {
        self.state.steps.get(self.flow.key(node))?.iteration
    }
}

/// The step's lookups as work, each with what the attempt's status says it
/// found (`None` until the driver ran it).
pub(super) fn lookup_work(compiled: &CompiledStep<'_>, found: Option<&Value>) -> Vec<LookupWork> {
    compiled
        .lookups
        .iter()
        .map(|l| LookupWork {
            name: l.spec.name.clone(),
            collection: l.spec.collection.clone(),
            where_: l.spec.where_.clone(),
            order_by: l.spec.order_by.clone(),
            descending: l.spec.descending,
            limit: l.spec.limit(),
            found: found.and_then(|f| f.get(&l.spec.name)).cloned(),
        })
        .collect()
}

/// The step keys the work's data must hold: those its placeholders read
/// and those its lookups' conditions read.
pub(super) fn data_keys(compiled: &CompiledStep<'_>) -> Vec<String> {
    let mut keys = compiled.placeholder_keys.clone();
    for l in &compiled.lookups {
        for r in l.where_.iter().flat_map(|e| e.references()) {
            if let Root::Step { key } = r.root() {
                keys.push(key.clone());
            }
        }
    }
    keys.sort();
    keys.dedup();
    keys
}

/// Hands what the lookups found to the step: one input of each lookup's
/// name (an object input gains the names; `null` becomes an object of
/// them; any other input moves under `input`), and the same under the name
/// in `data`, where `{{NAME.json…}}` placeholders read it.
fn hand_over(lookups: &[LookupWork], input: &mut Value, data: &mut DataView) {
    let found: Vec<(&str, &Value)> = lookups
        .iter()
        .filter_map(|l| Some((l.name.as_str(), l.found.as_ref()?)))
        .collect();
    if found.is_empty() {
        return;
    }
    let map = match input {
        Value::Object(map) => map,
        Value::Null => {
            *input = Value::Object(Default::default());
            input.as_object_mut().expect("made an object above")
        }
        other => {
            *other = json!({"input": other.take()});
            other.as_object_mut().expect("made an object above")
        }
    };
    for (name, value) in found {
        map.insert(name.to_string(), value.clone());
        data.steps.insert(
            name.to_string(),
            json!({"status": "completed", "output": value, "text": null, "error": null}),
        );
    }
}
