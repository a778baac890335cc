//! The shape of a flow: its steps in order, the arrows between them, and
//! which steps come before which on the path.
//!
//! The validator uses it to check references and arrows; the engine uses it
//! to decide what runs next. Built from a spec without judging it: arrows
//! that make no sense (unknown steps, arrows pointing forward) are left out
//! here and reported by the validator.

use std::collections::HashMap;

use crate::api::{Step, StepKind};

/// A node: one step that has a key, wherever it is nested.
#[derive(Debug, Clone)]
pub struct Node<'a> {
    /// The step as written.
    pub step: &'a Step,
    /// Its key.
    pub key: &'a str,
    /// Where it sits in the YAML (`steps[2]`, `steps[2].loop.steps[0]`).
    pub location: String,
    /// The loop or parallel step it is nested in, if any.
    pub parent: Option<usize>,
    /// Its position in its own list of steps.
    pub position: usize,
    /// The arrows into it.
    pub preds: Vec<Arrow<'a>>,
}

/// An arrow from a step (optionally from one of its exits) into another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrow<'a> {
    /// The node the arrow leaves.
    pub from: usize,
    /// The exit it leaves from (`approve` in `review.approve`), if named.
    pub exit: Option<&'a str>,
}

/// The steps of a flow as a graph.
#[derive(Debug, Clone)]
pub struct FlowGraph<'a> {
    /// Every keyed step, in document order (a composite before its children).
    pub nodes: Vec<Node<'a>>,
    /// The nodes of each list: index 0 is the flow's own list; a loop's body
    /// is the list named in `body_of`.
    pub lists: Vec<Vec<usize>>,
    /// For each node that is a loop (or a parallel step whose part is a loop),
    /// the list holding its body.
    pub body_of: HashMap<usize, usize>,
    by_key: HashMap<&'a str, usize>,
    /// For each node, the nodes with an arrow from it.
    next: Vec<Vec<usize>>,
}

impl<'a> FlowGraph<'a> {
    /// Builds the graph of a flow's steps.
    pub fn new(steps: &'a [Step]) -> Self {
        let mut graph = FlowGraph {
            nodes: Vec::new(),
            lists: Vec::new(),
            body_of: HashMap::new(),
            by_key: HashMap::new(),
            next: Vec::new(),
        };
        graph.add_list(steps, None, "steps");
        graph.link_both_ways();
        graph
    }

    fn add_list(&mut self, steps: &'a [Step], parent: Option<usize>, location: &str) -> usize {
        let list = self.lists.len();
        self.lists.push(Vec::new());
        for (position, step) in steps.iter().enumerate() {
            let here = format!("{location}[{position}]");
            let node = self.nodes.len();
            self.nodes.push(Node {
                step,
                key: &step.key,
                location: here.clone(),
                parent,
                position,
                preds: Vec::new(),
            });
            self.by_key.entry(step.key.as_str()).or_insert(node);
            self.lists[list].push(node);
            if let Some((inner, inner_location)) = nested_steps(step, &here) {
                let body = self.add_list(inner, Some(node), &inner_location);
                self.body_of.insert(node, body);
            }
        }
        self.link_list(list);
        list
    }

    /// Resolves `after` into arrows: only to steps listed earlier in the same list.
    fn link_list(&mut self, list: usize) {
        let members = self.lists[list].clone();
        for (position, &node) in members.iter().enumerate() {
            let step = self.nodes[node].step;
            let preds = match &step.after {
                None if position == 0 => Vec::new(),
                None => vec![Arrow {
                    from: members[position - 1],
                    exit: None,
                }],
                Some(after) => after
                    .iter()
                    .filter_map(|entry| {
                        let (key, exit) = split_after(entry);
                        let from = *members[..position]
                            .iter()
                            .find(|&&m| self.nodes[m].key == key)?;
                        Some(Arrow { from, exit })
                    })
                    .collect(),
            };
            self.nodes[node].preds = preds;
        }
    }

    /// Lays out the arrows forwards, for [`FlowGraph::next`].
    fn link_both_ways(&mut self) {
        self.next = vec![Vec::new(); self.nodes.len()];
        for (node, item) in self.nodes.iter().enumerate() {
            for arrow in &item.preds {
                // Two exits of one step may lead to the same node.
                if self.next[arrow.from].last() != Some(&node) {
                    self.next[arrow.from].push(node);
                }
            }
        }
    }

    /// The nodes with an arrow from `node`.
    pub fn next(&self, node: usize) -> &[usize] {
        &self.next[node]
    }

    /// Where `arrow` leaves from as a run's status names it: `review.approve`
    /// for an exit, the step's key alone otherwise.
    pub fn source_label(&self, arrow: &Arrow<'_>) -> String {
        let key = self.nodes[arrow.from].key;
        match arrow.exit {
            Some(exit) => format!("{key}.{exit}"),
            None => key.to_string(),
        }
    }

    /// The first node of the body of the loop `node` (its "each pass"
    /// arrow leads there); `None` for a step that is no loop.
    pub fn first_in_body(&self, node: usize) -> Option<usize> {
        let list = self.body_of.get(&node)?;
        self.lists.get(*list)?.first().copied()
    }

    /// The node with this key (the first, when keys repeat).
    pub fn find(&self, key: &str) -> Option<usize> {
        self.by_key.get(key).copied()
    }

    /// Whether `before` lies on a path that leads to `node`: `node` comes
    /// after it, directly or through other steps.
    ///
    /// Searched on demand, backwards from `node`: every arrow and every
    /// nesting points forward in document order, so only the nodes between
    /// the two can lie on such a path, and the search visits no others.
    /// Nothing is kept between questions.
    pub fn comes_before(&self, before: usize, node: usize) -> bool {
        if node <= before {
            return false;
        }
        // The common question (a step reading the one before it) needs no search.
        if self.nodes[node].preds.iter().any(|a| a.from == before) {
            return true;
        }
        // Nodes in (before, node], indexed from before + 1.
        let mut seen = BitSet::new(node - before);
        let mut stack = vec![node];
        while let Some(at) = stack.pop() {
            let item = &self.nodes[at];
            if item.preds.iter().any(|a| a.from == before) {
                return true;
            }
            // A nested node also comes after whatever its parent comes after.
            let parent = item.parent.into_iter();
            for next in item.preds.iter().map(|a| a.from).chain(parent) {
                if next > before && !seen.contains(next - before - 1) {
                    seen.insert(next - before - 1);
                    stack.push(next);
                }
            }
        }
        false
    }

    /// The loops `node` is nested in, innermost first.
    pub fn enclosing_loops(&self, node: usize) -> impl Iterator<Item = usize> + '_ {
        self.enclosing(node)
            .filter(|p| self.body_of.contains_key(p))
    }

    /// The composites (loops and parallel steps) `node` is nested in, innermost first.
    pub fn enclosing(&self, node: usize) -> impl Iterator<Item = usize> + '_ {
        std::iter::successors(self.nodes[node].parent, |&p| self.nodes[p].parent)
    }

    /// Whether `reader` may read the status of `target`: `target` comes before
    /// it on the path, or finished inside a composite that did, or both sit in
    /// the same loop (a later step then reads the pass before), or `target` is
    /// `reader` itself inside a loop.
    pub fn can_read(&self, reader: usize, target: usize) -> bool {
        if target == reader {
            return self.enclosing_loops(reader).next().is_some();
        }
        if self.comes_before(target, reader) {
            return true;
        }
        self.enclosing(target).any(|outer| {
            self.comes_before(outer, reader)
                || (self.body_of.contains_key(&outer) && self.enclosing(reader).any(|r| r == outer))
        })
    }

    /// The arrows leaving `node`: every step that names it in `after` (or
    /// follows it by default).
    pub fn successors(&self, node: usize) -> impl Iterator<Item = (usize, Arrow<'a>)> + '_ {
        self.next[node].iter().flat_map(move |&to| {
            self.nodes[to]
                .preds
                .iter()
                .filter(move |a| a.from == node)
                .map(move |a| (to, *a))
        })
    }
}

/// The steps nested in a loop (or in a parallel step whose part is a loop).
fn nested_steps<'a>(step: &'a Step, here: &str) -> Option<(&'a [Step], String)> {
    if let Some(l) = &step.loop_ {
        return Some((&l.steps, format!("{here}.loop.steps")));
    }
    let part = &step.parallel.as_ref()?.step;
    let l = part.loop_.as_ref()?;
    Some((&l.steps, format!("{here}.parallel.step.loop.steps")))
}

/// Splits an `after` entry into key and exit: `review.approve` → (`review`, `approve`).
pub fn split_after(entry: &str) -> (&str, Option<&str>) {
    match entry.split_once('.') {
        Some((key, exit)) => (key, Some(exit)),
        None => (entry, None),
    }
}

/// The named exits of a step, or `None` when it has just one unnamed way out.
pub fn exits(step: &Step) -> Option<Vec<String>> {
    match step.kind()? {
        StepKind::Condition(c) if c.paths.is_empty() => Some(vec!["true".into(), "false".into()]),
        StepKind::Condition(c) => {
            let mut names: Vec<String> = c.paths.iter().map(|p| p.name.clone()).collect();
            names.push(c.otherwise.clone().unwrap_or_else(|| "otherwise".into()));
            Some(names)
        }
        StepKind::Approval(a) if !a.decisions.is_empty() => Some(a.decisions.clone()),
        StepKind::Agent(a) if !a.decisions.is_empty() => {
            Some(a.decisions.iter().map(|d| d.name.clone()).collect())
        }
        _ => None,
    }
}

/// A fixed-size set of node indices.
#[derive(Debug, Clone)]
struct BitSet(Vec<u64>);

impl BitSet {
    fn new(n: usize) -> Self {
        BitSet(vec![0; n.div_ceil(64)])
    }
    fn insert(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn contains(&self, i: usize) -> bool {
        self.0[i / 64] & (1 << (i % 64)) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::FlowSpec;

    /// The ancestors of every node, the slow way: the rule written out.
    fn ancestors(graph: &FlowGraph<'_>) -> Vec<Vec<bool>> {
        let n = graph.nodes.len();
        let mut all: Vec<Vec<bool>> = Vec::with_capacity(n);
        for node in 0..n {
            let mut set = vec![false; n];
            if let Some(parent) = graph.nodes[node].parent {
                set = all[parent].clone();
            }
            for arrow in &graph.nodes[node].preds {
                for (i, &yes) in all[arrow.from].iter().enumerate() {
                    set[i] |= yes;
                }
                set[arrow.from] = true;
            }
            all.push(set);
        }
        all
    }

    #[test]
    fn comes_before_agrees_with_the_rule_on_branches_and_loops() {
        let spec: FlowSpec = serde_yaml::from_str(
            "steps:
  - {key: a, script: {source: x}}
  - {key: check, condition: {when: 'true'}}
  - {key: yes, after: [check.true], script: {source: x}}
  - {key: no, after: [check.false], script: {source: x}}
  - key: again
    after: [yes]
    loop:
      until: 'true'
      maxIterations: 2
      steps:
        - {key: l1, script: {source: x}}
        - {key: l2, script: {source: x}}
        - {key: l3, after: [l1], script: {source: x}}
  - {key: join, after: [again, no], script: {source: x}}
  - {key: lone, after: [], script: {source: x}}
",
        )
        .expect("flow");
        let graph = FlowGraph::new(&spec.steps);
        let expected = ancestors(&graph);
        for (node, row) in expected.iter().enumerate() {
            for (before, &comes) in row.iter().enumerate() {
                assert_eq!(
                    graph.comes_before(before, node),
                    comes,
                    "{} before {}",
                    graph.nodes[before].key,
                    graph.nodes[node].key
                );
            }
        }
        let l3 = graph.find("l3").expect("l3");
        let a = graph.find("a").expect("a");
        assert!(
            graph.comes_before(a, l3),
            "a nested step follows its loop's past"
        );
        assert!(!graph.comes_before(graph.find("l2").expect("l2"), l3));
        assert_eq!(graph.next(graph.find("check").expect("check")).len(), 2);
    }
}
