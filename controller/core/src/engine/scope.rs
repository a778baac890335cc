//! The data an expression sees while a run is in progress, borrowed from
//! the engine's state: nothing is copied to answer a condition.

use serde_json::Value;

use crate::flow::FlowGraph;
use crate::scope::Scope;

/// The `$steps.KEY` views, one per node of the flow, found by key.
#[derive(Clone, Copy)]
pub struct StepViews<'a> {
    /// Keys to node indexes.
    pub graph: &'a FlowGraph<'a>,
    /// The view of each node, by index.
    pub values: &'a [Value],
}

impl<'a> StepViews<'a> {
    /// The view of the step called `key`.
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.graph.find(key).and_then(|n| self.values.get(n))
    }
}

/// Roots of the expression language, borrowed from a [`super::RunMachine`],
/// which puts it together in one place (`scope_from`).
pub struct EvalScope<'a> {
    /// `$input`.
    pub(in crate::engine) input: &'a Value,
    /// `$steps`.
    pub(in crate::engine) views: StepViews<'a>,
    /// `$previous`: the view of the step before.
    pub(in crate::engine) previous: Option<&'a Value>,
    /// `$loop`, `{"iteration": N}`: a small value made for the scope.
    pub(in crate::engine) loop_: Option<Value>,
    /// `$item`: the part's item.
    pub(in crate::engine) item: Option<&'a Value>,
    /// `$index`: the part's position, made for the scope.
    pub(in crate::engine) index: Option<Value>,
    /// `$run`.
    pub(in crate::engine) run: &'a Value,
}

impl Scope for EvalScope<'_> {
    fn input(&self) -> Option<&Value> {
        Some(self.input)
    }

    fn step(&self, key: &str) -> Option<&Value> {
        self.views.get(key)
    }

    fn root(&self, name: &str) -> Option<&Value> {
        match name {
            "previous" => self.previous,
            "loop" => self.loop_.as_ref(),
            "item" => self.item,
            "index" => self.index.as_ref(),
            "run" => Some(self.run),
            _ => None,
        }
    }
}
