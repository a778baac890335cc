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

/// Roots of the expression language, borrowed from a [`super::RunMachine`].
pub struct EvalScope<'a> {
    input: &'a Value,
    views: StepViews<'a>,
    previous: Option<&'a Value>,
    loop_: Option<Value>,
    item: Option<&'a Value>,
    index: Option<Value>,
    run: &'a Value,
}

impl<'a> EvalScope<'a> {
    /// A scope for one evaluation. `loop_iteration` and `index` are small
    /// values made here; everything else is borrowed.
    pub fn new(
        input: &'a Value,
        views: StepViews<'a>,
        previous: Option<&'a Value>,
        loop_iteration: Option<i32>,
        item: Option<&'a Value>,
        index: Option<usize>,
        run: &'a Value,
    ) -> Self {
        EvalScope {
            input,
            views,
            previous,
            loop_: loop_iteration.map(|i| serde_json::json!({ "iteration": i })),
            item,
            index: index.map(Value::from),
            run,
        }
    }
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
