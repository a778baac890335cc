//! What `coxswain lint` says of a YAML file: every problem of every Flow in
//! it, each with the line and column it stands on.
//!
//! Admission and `coxswain run` refuse a Flow that does not fit its type at
//! the first field that does not (the API server's structural schema drops
//! or refuses unknown keys before the webhook even sees them). Lint goes on:
//! it names each unknown key (with the field it most likely meant), leaves
//! it out, reads each value that does not fit its field as absent, and then
//! runs the one validator on what is left, so one typo does not hide the
//! problems of every other step. What such a reading would only repeat (a
//! step "without a kind" whose `scirpt` was named) is not said again.

use serde::Serialize;
use serde_json::Value as Json;
use serde_yaml::Value as Yaml;

use super::documents::yaml_documents;
use super::validate::{Limits, closest, quote_list, validate_placed};
use super::yaml_1_1::Schemas;
use super::yaml_tree::{self, NodeKind, Place, Seg, Source, YamlNode, parse_path, write_path};
use super::{FlowError, reads_differently};
use crate::api::{Flow, StepProblem};

/// One problem lint reports, with where it stands in the file. `--output
/// json` prints the problem's fields with `line` and `column` beside them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LintProblem {
    /// The problem: step, field, message and the character of the field's
    /// text where reading stopped.
    #[serde(flatten)]
    pub problem: StepProblem,
    /// The 1-based line it stands on, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// The 1-based column (in characters) it stands on, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
    /// Whether `column` is that of the very character the problem names
    /// (so saying the character again would add nothing).
    #[serde(skip)]
    pub exact: bool,
}

impl std::fmt::Display for LintProblem {
    /// `line L, column C: step KEY: FIELD: MESSAGE`, with `(character N)`
    /// after the message when the column is not that character's own.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let (Some(line), Some(column)) = (self.line, self.column) {
            write!(f, "line {line}, column {column}: ")?;
            if self.exact {
                let shown = StepProblem {
                    character: None,
                    ..self.problem.clone()
                };
                return write!(f, "{shown}");
            }
        }
        write!(f, "{}", self.problem)
    }
}

/// The problems of one Flow document.
#[derive(Debug, Clone)]
pub struct LintedFlow {
    /// `metadata.name`, or `?`.
    pub name: String,
    /// Which document of the stream it is, counting from 0.
    pub document: usize,
    /// Every problem found, in the order they stand in the file.
    pub problems: Vec<LintProblem>,
}

/// Every problem of every Flow in a YAML stream: unknown keys, values that
/// do not fit their field, what the validator finds in the rest, and the
/// scalars kubectl reads differently ([`reads_differently`]). Refuses what
/// [`super::flows_in_yaml`] refuses (text that is not YAML).
pub fn lint_yaml(text: &str) -> Result<Vec<LintedFlow>, FlowError> {
    let documents = yaml_documents(text)?;
    let mut trees = yaml_tree::documents(text);
    if trees.len() != documents.len() {
        // The two readers disagree on where documents start: no places,
        // rather than wrong ones.
        trees.clear();
    }
    let source = Source::new(text);
    let schemas = Schemas::new();
    let surprises = reads_differently(text);
    let mut flows = Vec::new();
    for (index, (value, name)) in documents.into_iter().enumerate() {
        let Some(name) = name else { continue };
        let mut linter = Linter {
            tree: trees.get(index).and_then(Option::as_ref),
            source: &source,
            problems: Vec::new(),
            quiet: Vec::new(),
            meant: Vec::new(),
        };
        linter.lint(value, &schemas);
        let mut problems = linter.problems;
        problems.extend(
            surprises
                .iter()
                .filter(|s| s.document == index)
                .map(|s| LintProblem {
                    problem: StepProblem {
                        message: s.what(),
                        ..Default::default()
                    },
                    line: Some(s.line),
                    column: Some(s.column),
                    exact: true,
                }),
        );
        problems.sort_by_key(|p| (p.line, p.column));
        flows.push(LintedFlow {
            name,
            document: index,
            problems,
        });
    }
    Ok(flows)
}

/// One Flow document being linted.
struct Linter<'t> {
    /// The document with its places, when it could be read so.
    tree: Option<&'t YamlNode>,
    source: &'t Source,
    problems: Vec<LintProblem>,
    /// Paths (from the document's root) whose validator problems would
    /// repeat one already reported, and whether everything under them too.
    quiet: Vec<(Vec<Seg>, bool)>,
    /// The mapping and field an unknown key was most likely meant to be,
    /// where the mapping lacks that field.
    meant: Vec<(Vec<Seg>, String)>,
}

/// An unknown key found in the document.
struct Unknown {
    /// Its path from the root, the key last.
    path: Vec<Seg>,
    message: String,
    /// The known field it is closest to, when the mapping lacks it.
    meant: Option<String>,
}

impl Linter<'_> {
    fn lint(&mut self, mut value: Yaml, schemas: &Schemas) {
        if let Some(tree) = self.tree {
            let mut found = Vec::new();
            unknown_keys(
                tree,
                Some(&schemas.flow),
                schemas,
                &mut Vec::new(),
                &mut found,
            );
            for unknown in found {
                let mut problem = StepProblem {
                    message: unknown.message,
                    ..Default::default()
                };
                (problem.step, problem.field) = attribute(&value, &unknown.path);
                let place = self.tree.map(|t| self.source.place_key(t, &unknown.path));
                self.push(problem, place);
                remove(&mut value, &unknown.path);
                let parent = &unknown.path[..unknown.path.len() - 1];
                if let Some(meant) = unknown.meant {
                    self.quiet_around(parent);
                    self.quiet.push((extend(parent, &meant), true));
                    self.meant.push((parent.to_vec(), meant));
                }
            }
        }
        let Some(flow) = self.read(value) else {
            return;
        };
        for placed in validate_placed(&flow.spec, &Limits::default()) {
            let mut path = vec![Seg::Key("spec".into())];
            path.extend(parse_path(&placed.path));
            let quiet = self.quiet.iter().any(|(q, under)| {
                path == *q || (*under && path.len() > q.len() && path.starts_with(q))
            });
            if !quiet {
                self.report(placed.problem, &path);
            }
        }
    }

    /// The Flow in `value`, reading each value that does not fit its field
    /// as absent (and saying so), or `None` when what is left still cannot
    /// be a Flow.
    fn read(&mut self, mut value: Yaml) -> Option<Flow> {
        // Each round takes a node out of the document, so it ends; the bound
        // only keeps a pathological file from taking long.
        for _ in 0..1_000 {
            let error = match serde_path_to_error::deserialize::<_, Flow>(value.clone()) {
                Ok(flow) => return Some(flow),
                Err(error) => error,
            };
            let path: Vec<Seg> = error
                .path()
                .iter()
                .filter_map(|seg| match seg {
                    serde_path_to_error::Segment::Map { key } => Some(Seg::Key(key.clone())),
                    serde_path_to_error::Segment::Seq { index } => Some(Seg::Index(*index)),
                    _ => None,
                })
                .collect();
            let message = error.inner().to_string();
            let mut problem = StepProblem {
                message: message.clone(),
                ..Default::default()
            };
            (problem.step, problem.field) = attribute(&value, &path);
            // A field missing because it was misspelt or taken out is said.
            let said = self.meant.iter().any(|(object, field)| {
                *object == path && message.starts_with(&format!("missing field `{field}`"))
            });
            if !said {
                self.report(problem, &path);
            }
            let removed = take_out(&mut value, &path)?;
            let (last, parent) = removed.split_last()?;
            if let Seg::Key(field) = last {
                self.meant.push((parent.to_vec(), field.clone()));
            }
            self.quiet.push((removed.clone(), true));
            self.quiet_around(parent);
        }
        None
    }

    /// Keeps quiet the validator's problems with the mapping at `object`
    /// itself and with its kind (a step whose kind field was taken out).
    fn quiet_around(&mut self, object: &[Seg]) {
        self.quiet.push((object.to_vec(), false));
        self.quiet.push((extend(object, "kind"), false));
    }

    /// Reports `problem` where the node at `path` stands.
    fn report(&mut self, problem: StepProblem, path: &[Seg]) {
        let character = problem.character.and_then(|c| usize::try_from(c).ok());
        let place = self
            .tree
            .map(|tree| self.source.place(tree, path, character));
        self.push(problem, place);
    }

    fn push(&mut self, problem: StepProblem, place: Option<Place>) {
        self.problems.push(LintProblem {
            problem,
            line: place.map(|p: Place| p.line),
            column: place.map(|p| p.column),
            exact: place.is_some_and(|p| p.exact),
        });
    }
}

/// `path` with one key more (none when `key` is empty).
fn extend(path: &[Seg], key: &str) -> Vec<Seg> {
    let mut longer = path.to_vec();
    if !key.is_empty() {
        longer.push(Seg::Key(key.to_string()));
    }
    longer
}

/// Every key of a mapping whose schema lists its fields that is not one of
/// them, under `node` (at `path`).
fn unknown_keys(
    node: &YamlNode,
    schema: Option<&Json>,
    schemas: &Schemas,
    path: &mut Vec<Seg>,
    found: &mut Vec<Unknown>,
) {
    match &node.kind {
        NodeKind::Map(entries) => {
            let free = schema
                .and_then(|s| s.get("x-kubernetes-preserve-unknown-fields"))
                .is_some_and(|f| f == &Json::Bool(true));
            let mut fields: Option<Vec<&str>> = schema
                .filter(|_| !free)
                .and_then(|s| s.get("properties"))
                .and_then(Json::as_object)
                .map(|p| p.keys().map(String::as_str).collect());
            if path.is_empty()
                && let Some(fields) = &mut fields
            {
                // The CRD's schema leaves out what every object has.
                fields.splice(0..0, ["apiVersion", "kind", "metadata"]);
            }
            let present: Vec<&str> = entries.iter().filter_map(|(k, _)| k.text()).collect();
            for (key, value) in entries {
                let Some(name) = key.text() else { continue };
                path.push(Seg::Key(name.to_string()));
                match &fields {
                    Some(fields) if !fields.contains(&name) => {
                        let close = closest(name, fields.iter().copied());
                        let owner = owner(&path[..path.len() - 1]);
                        let message = match close {
                            Some(close) => format!(
                                "`{name}` is not a field of {owner} (did you mean `{close}`?)"
                            ),
                            None => {
                                let names: Vec<String> =
                                    fields.iter().map(|f| f.to_string()).collect();
                                format!(
                                    "`{name}` is not a field of {owner}; its fields are {}",
                                    quote_list(&names)
                                )
                            }
                        };
                        found.push(Unknown {
                            path: path.clone(),
                            message,
                            meant: close.filter(|c| !present.contains(c)).map(str::to_string),
                        });
                    }
                    _ => unknown_keys(value, schemas.property(schema, name), schemas, path, found),
                }
                path.pop();
            }
        }
        NodeKind::Seq(items) => {
            let items_schema = schema.and_then(|s| s.get("items"));
            for (i, item) in items.iter().enumerate() {
                path.push(Seg::Index(i));
                unknown_keys(item, items_schema, schemas, path, found);
                path.pop();
            }
        }
        NodeKind::Scalar(..) | NodeKind::Alias => {}
    }
}

/// What the mapping at `path` is, for a message: `a step`, `` `script` ``,
/// `` an entry of `headers` ``.
fn owner(path: &[Seg]) -> String {
    match path {
        [] => "a Flow".to_string(),
        [.., Seg::Key(k), Seg::Index(_)] if k == "steps" => "a step".to_string(),
        [.., Seg::Key(k)] if k == "step" => "a step".to_string(),
        [.., Seg::Key(k), Seg::Index(_)] => format!("an entry of `{k}`"),
        [.., Seg::Key(k)] => format!("`{k}`"),
        [.., Seg::Index(_)] => "an entry".to_string(),
    }
}

/// The step a path from the document's root is in and the field within it,
/// as the validator names them: `spec.steps[1].loop.steps[0].after[2]` is
/// the nested step's `after[2]`; a path outside any step has no step, and
/// its field is counted from `spec` (or the root, outside `spec`).
fn attribute(value: &Yaml, path: &[Seg]) -> (String, String) {
    let Some((Seg::Key(first), mut rest)) = path.split_first() else {
        return (String::new(), write_path(path));
    };
    if first != "spec" || rest.is_empty() {
        return (String::new(), write_path(path));
    }
    let mut node = value.get("spec");
    let mut key: Option<String> = None;
    loop {
        let (list_path, after): (&[&str], usize) = match rest {
            [Seg::Key(s), Seg::Index(_), ..] if s == "steps" && key.is_none() => (&["steps"], 1),
            [Seg::Key(l), Seg::Key(s), Seg::Index(_), ..]
                if key.is_some() && l == "loop" && s == "steps" =>
            {
                (&["loop", "steps"], 2)
            }
            [
                Seg::Key(p),
                Seg::Key(st),
                Seg::Key(l),
                Seg::Key(s),
                Seg::Index(_),
                ..,
            ] if key.is_some()
                && p == "parallel"
                && st == "step"
                && l == "loop"
                && s == "steps" =>
            {
                (&["parallel", "step", "loop", "steps"], 4)
            }
            _ => break,
        };
        let Seg::Index(i) = rest[after] else { break };
        node = list_path
            .iter()
            .try_fold(node, |n, k| Some(n?.get(*k)))
            .flatten()
            .and_then(|list| list.get(i));
        key = Some(
            node.and_then(|step| step.get("key"))
                .and_then(Yaml::as_str)
                .unwrap_or_default()
                .to_string(),
        );
        rest = &rest[after + 1..];
    }
    (key.unwrap_or_default(), write_path(rest))
}

/// Whether a mapping's key is `name` (keys are compared as written: `1`
/// and `true` as the text they were).
fn key_is(key: &Yaml, name: &str) -> bool {
    match key {
        Yaml::String(s) => s == name,
        Yaml::Number(n) => n.to_string() == name,
        Yaml::Bool(b) => b.to_string() == name,
        _ => false,
    }
}

/// The value at `path`, if the document has it.
fn at_mut<'v>(value: &'v mut Yaml, path: &[Seg]) -> Option<&'v mut Yaml> {
    path.iter().try_fold(value, |node, seg| match seg {
        Seg::Key(k) => node
            .as_mapping_mut()?
            .iter_mut()
            .find(|(key, _)| key_is(key, k))
            .map(|(_, v)| v),
        Seg::Index(i) => node.as_sequence_mut()?.get_mut(*i),
    })
}

/// Takes the key at the end of `path` out of its mapping; whether it was there.
fn remove(value: &mut Yaml, path: &[Seg]) -> bool {
    let Some((Seg::Key(last), parent)) = path.split_last() else {
        return false;
    };
    let Some(map) = at_mut(value, parent).and_then(Yaml::as_mapping_mut) else {
        return false;
    };
    let before = map.len();
    map.retain(|key, _| !key_is(key, last));
    map.len() < before
}

/// Takes out the field holding what failed at `path`: the last key on the
/// path, so no later item of a list moves (the validator's positions stay
/// those of the file). A step that is no mapping at all becomes an empty
/// one rather than taking the whole list of steps with it. Returns the
/// path of what was taken out, or `None` when nothing could be.
fn take_out(value: &mut Yaml, path: &[Seg]) -> Option<Vec<Seg>> {
    let last_key = path.iter().rposition(|s| matches!(s, Seg::Key(_)))?;
    if let (Seg::Key(k), Some(Seg::Index(_))) = (&path[last_key], path.get(last_key + 1))
        && k == "steps"
    {
        let step = &path[..last_key + 2];
        let node = at_mut(value, step)?;
        if node.as_mapping().is_some_and(|m| m.is_empty()) {
            return None;
        }
        *node = Yaml::Mapping(Default::default());
        return Some(step.to_vec());
    }
    let field = &path[..=last_key];
    remove(value, field).then(|| field.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        let flows = lint_yaml(text).expect("YAML");
        flows[0].problems.iter().map(|p| p.to_string()).collect()
    }

    const HEAD: &str =
        "apiVersion: coxswain.dev/v1alpha1\nkind: Flow\nmetadata: {name: t}\nspec:\n";

    #[test]
    fn an_unknown_key_is_named_and_every_other_step_still_checked() {
        let text = format!(
            "{HEAD}  steps:
    - key: draft
      atempts: 2
      scirpt: {{source: echo}}
    - key: check
      condition:
        when: $steps.draft.output.ok == True
    - key: publish
      script:
        sorce: echo x
        command: [echo]
      bogus: 1
"
        );
        assert_eq!(
            lines(&text),
            [
                "line 7, column 7: step draft: atempts: `atempts` is not a field of a step (did you mean `attempts`?)",
                "line 8, column 7: step draft: scirpt: `scirpt` is not a field of a step (did you mean `script`?)",
                "line 11, column 41: step check: condition.when: write `true` in lowercase, not `True`",
                "line 14, column 9: step publish: script.sorce: `sorce` is not a field of `script` (did you mean `source`?)",
                "line 16, column 7: step publish: bogus: `bogus` is not a field of a step; its fields are `after`, `agent`, `approval`, `attempts`, `backoff`, `condition`, `description`, `http`, `input`, `join`, `key`, `loop`, `message`, `onFailure`, `parallel`, `script`, `sendBack`, `timeout`, `when`",
            ]
        );
    }

    #[test]
    fn a_value_that_does_not_fit_is_named_and_the_rest_still_checked() {
        let text = format!(
            "{HEAD}  steps:
    - key: draft
      attempts: two
      script: {{source: echo}}
    - key: review
      approval: {{decisions: [ok, redo]}}
      sendBack: [{{exti: redo, to: draft}}]
    - key: late
      input: {{x: $steps.later.output}}
      script: {{source: [echo]}}
    - key: later
      script: {{source: echo}}
"
        );
        let found = lines(&text);
        assert_eq!(found.len(), 4, "{found:#?}");
        assert!(
            found[0].starts_with(
                "line 7, column 17: step draft: attempts: invalid type: string \"two\""
            ),
            "{found:#?}"
        );
        assert_eq!(
            found[1],
            "line 11, column 19: step review: sendBack[0].exti: `exti` is not a field of an entry of `sendBack` (did you mean `exit`?)"
        );
        assert_eq!(
            found[2],
            "line 13, column 25: step late: input.x: `later` runs later than this step, so its data cannot be read here; a step reads a later one only when both are inside the same loop"
        );
        assert!(
            found[3].starts_with(
                "line 14, column 16: step late: script.source: invalid type: sequence"
            ),
            "{found:#?}"
        );
    }

    #[test]
    fn list_entries_and_flow_fields_stand_where_they_are_written() {
        let text = format!(
            "{HEAD}  schedule: {{cron: \"* *\"}}
  steps:
    - key: draft
      input:
        b: [$input.y, \"$nope.z\"]
      script:
        source: echo
        output:
          fields: [{{name: ok, type: bool}}]
    - key: review
      after: [drat]
      approval:
        decisions: [ok, Changes]
"
        );
        let found = lines(&text);
        assert_eq!(
            found,
            [
                "line 5, column 20: schedule.cron: `* *` has 2 fields; a cron schedule has five: minute, hour, day of month, month, day of week",
                "line 9, column 25: step draft: input.b[1]: unknown reference `$nope`; a reference starts with $input, $steps, $previous, $loop, $item, $index or $run",
                "line 13, column 37: step draft: script.output.fields[0].type: `bool` is not a field type; use one of string, number, integer, boolean, array, object",
                "line 15, column 15: step review: after[0]: no step has the key `drat` (did you mean `draft`?)",
                "line 17, column 25: step review: approval.decisions[1]: the decision `Changes` must start with a lowercase letter",
            ]
        );
    }

    #[test]
    fn text_that_is_not_a_flow_at_all_is_still_one_problem() {
        let text =
            "apiVersion: coxswain.dev/v1alpha1\nkind: Flow\nmetadata: {name: t}\nspec: [1]\n";
        let found = lines(text);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!(
            found,
            ["line 4, column 1: spec: invalid type: sequence, expected struct FlowSpec"]
        );
    }
}
