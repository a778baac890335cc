//! What `coxswain lint` says of a YAML file: every problem of every Flow in
//! it, each with the line and column it stands on.
//!
//! Admission and `coxswain run` refuse a Flow that does not fit its type at
//! the first field that does not (the API server's structural schema drops
//! or refuses unknown keys before the webhook even sees them). Lint goes on:
//! it names each unknown key, with the field it most likely meant, and reads
//! the key as that field (`atempts` as `attempts`, when the mapping has no
//! `attempts`) or, with no such field, leaves it out; it reads each value
//! that does not fit its field as absent; and then it runs the one validator
//! on what is left, so one typo neither hides the problems of every other
//! step nor makes new ones (an approval whose `decisons` were misspelt still
//! has its decisions). What a left-out value would only repeat (a script
//! "without a source" whose source was a list) is not said again.

use serde::Serialize;
use serde_json::Value as Json;

use super::documents::yaml_documents;
use super::suggest::closest;
use super::validate::{Limits, validate_placed};
use super::yaml_1_1::Schemas;
use super::yaml_tree::{self, NodeKind, Place, Seg, Source, YamlNode, parse_path, write_path};
use super::{FlowError, reads_differently};
use crate::api::{Flow, StepProblem};
use crate::text::quote_list;

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
    /// What lint warns of without refusing the flow (a file a script
    /// leaves with no workspace to keep it), in the order they stand.
    pub warnings: Vec<LintProblem>,
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
    for (index, (_, name)) in documents.into_iter().enumerate() {
        let Some(name) = name else { continue };
        let mut linter = Linter {
            tree: trees.get(index).and_then(Option::as_ref),
            source: &source,
            text: text.chars().collect(),
            document: index,
            problems: Vec::new(),
            warnings: Vec::new(),
            quiet: Vec::new(),
            meant: Vec::new(),
            taken: Vec::new(),
            renames: Vec::new(),
        };
        linter.lint(&schemas);
        let warnings = linter.warnings;
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
            warnings,
        });
    }
    Ok(flows)
}

/// One Flow document being linted.
struct Linter<'t> {
    /// The document with its places, when it could be read so.
    tree: Option<&'t YamlNode>,
    source: &'t Source,
    /// The whole text, with what has been left out blanked: spaces in
    /// place of every character but line breaks, so every place stays.
    text: Vec<char>,
    /// Which document of the text is the Flow.
    document: usize,
    problems: Vec<LintProblem>,
    /// Warnings found, which do not refuse the flow.
    warnings: Vec<LintProblem>,
    /// Paths (from the document's root) whose validator problems would
    /// repeat one already reported, and whether everything under them too.
    quiet: Vec<(Vec<Seg>, bool)>,
    /// A mapping and a field it lacks because a key was misspelt or left
    /// out, so "missing field" would repeat what was said.
    meant: Vec<(Vec<Seg>, String)>,
    /// What has been left out, so nothing is left out twice.
    taken: Vec<Vec<Seg>>,
    /// Misspelt keys read as the field they most likely meant, outermost
    /// first.
    renames: Vec<Rename>,
}

/// A misspelt key read as the field it most likely meant.
struct Rename {
    /// The mapping's path, as written in the file.
    parent: Vec<Seg>,
    /// The key as written.
    written: String,
    /// The field it is read as.
    meant: String,
    /// Where the key is written in the text: start and end character.
    span: (usize, usize),
}

/// An unknown key found in the document.
struct Unknown {
    /// Its path from the root, the key last.
    path: Vec<Seg>,
    message: String,
    /// The known field it is closest to, when the mapping lacks it.
    meant: Option<String>,
    /// Where the key is written: start and end character.
    span: (usize, usize),
}

impl Linter<'_> {
    fn lint(&mut self, schemas: &Schemas) {
        if let Some(tree) = self.tree {
            let mut found = Vec::new();
            let mut at = Walk::default();
            unknown_keys(tree, Some(&schemas.flow), schemas, &mut at, &mut found);
            for unknown in found {
                let mut problem = StepProblem {
                    message: unknown.message,
                    ..Default::default()
                };
                (problem.step, problem.field) = self.attribute(tree, &unknown.path);
                let place = self.source.place_key(tree, &unknown.path);
                self.push(problem, Some(place));
                let (Some(meant), Some((Seg::Key(written), parent))) =
                    (unknown.meant, unknown.path.split_last())
                else {
                    self.leave_out(tree, &unknown.path);
                    continue;
                };
                self.renames.push(Rename {
                    parent: parent.to_vec(),
                    written: written.clone(),
                    meant,
                    span: unknown.span,
                });
            }
        }
        let Some(flow) = self.read() else {
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
        for placed in super::workspace_warnings(&flow.spec) {
            let mut path = vec![Seg::Key("spec".into())];
            path.extend(parse_path(&placed.path));
            let before = self.problems.len();
            self.report(placed.problem, &path);
            let placed = self.problems.split_off(before);
            self.warnings.extend(placed);
        }
    }

    /// The Flow in the text, reading each value that does not fit its
    /// field as absent (and saying so), or `None` when what is left still
    /// cannot be a Flow. It is read from the text as `coxswain run` and
    /// admission read it, so a bare `True` is the same text to both.
    fn read(&mut self) -> Option<Flow> {
        // Each round leaves a field out, and none twice, so it ends; the
        // bound only keeps a pathological file from taking long.
        for _ in 0..1_000 {
            let text = self.edited();
            let document = serde_yaml::Deserializer::from_str(&text).nth(self.document)?;
            let error = match serde_path_to_error::deserialize::<_, Flow>(document) {
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
            let Some(tree) = self.tree else {
                // No places: say it as serde_yaml does, with its line.
                let problem = StepProblem {
                    message: FlowError::from(error.into_inner()).to_string(),
                    ..Default::default()
                };
                self.push(problem, None);
                return None;
            };
            let message = bare_message(error.inner(), &path);
            // A field missing because it was misspelt or left out is said.
            let said = self.meant.iter().any(|(object, field)| {
                *object == path && message.starts_with(&format!("missing field `{field}`"))
            });
            if !said {
                let mut problem = StepProblem {
                    message,
                    ..Default::default()
                };
                (problem.step, problem.field) = self.attribute(tree, &path);
                self.report(problem, &path);
            }
            let removed = self.take_out(tree, &path)?;
            let (last, parent) = removed.split_last()?;
            if let Seg::Key(field) = last {
                self.meant.push((parent.to_vec(), field.clone()));
            }
            self.quiet.push((removed.clone(), true));
            self.quiet_around(parent);
        }
        None
    }

    /// Leaves out the field holding what failed at `path`: the last key on
    /// the path, so no later item of a list moves (the validator's positions
    /// stay those of the file). A step that is not a mapping becomes an
    /// empty one rather than taking the whole list of steps with it.
    /// Returns the path of what was left out, or `None` when nothing could be.
    fn take_out(&mut self, tree: &YamlNode, path: &[Seg]) -> Option<Vec<Seg>> {
        let last_key = path.iter().rposition(|s| matches!(s, Seg::Key(_)))?;
        let what = match (&path[last_key], path.get(last_key + 1)) {
            (Seg::Key(k), Some(Seg::Index(_))) if k == "steps" => &path[..last_key + 2],
            _ => &path[..=last_key],
        };
        if self.taken.iter().any(|t| t == what) {
            return None;
        }
        let (node, _, whole) = tree.follow(&self.written(what));
        if !whole {
            return None;
        }
        if let Some(Seg::Index(_)) = what.last() {
            self.blank(node.start.index, node.end.index);
            let at = node.start.index;
            if at + 1 >= self.text.len() || self.text[at + 1] == '\n' {
                return None;
            }
            self.text[at] = '{';
            self.text[at + 1] = '}';
        } else if !self.leave_out(tree, what) {
            return None;
        }
        self.taken.push(what.to_vec());
        Some(what.to_vec())
    }

    /// Blanks the entry at `path` (the key last) out of the text, with the
    /// comma after it in a flow mapping; whether it was there.
    fn leave_out(&mut self, tree: &YamlNode, path: &[Seg]) -> bool {
        let (value, Some(key), true) = tree.follow(&self.written(path)) else {
            return false;
        };
        self.blank(key.start.index, value.end.index.max(key.end.index));
        let mut next = value.end.index.max(key.end.index);
        while self.text.get(next).is_some_and(|c| *c == ' ' || *c == '\t') {
            next += 1;
        }
        if self.text.get(next) == Some(&',') {
            self.text[next] = ' ';
        }
        true
    }

    fn blank(&mut self, from: usize, to: usize) {
        self.renames.retain(|r| !(from..to).contains(&r.span.0));
        let to = to.min(self.text.len());
        for c in self.text.get_mut(from..to).into_iter().flatten() {
            if *c != '\n' && *c != '\r' {
                *c = ' ';
            }
        }
    }

    /// Keeps quiet the validator's problems with the mapping at `object`
    /// itself, with its kind, and with the kind of the step it is in (a
    /// step whose kind field was left out, or emptied).
    fn quiet_around(&mut self, object: &[Seg]) {
        self.quiet.push((object.to_vec(), false));
        self.quiet.push((extend(object, "kind"), false));
        if let Some((_, parent)) = object.split_last() {
            self.quiet.push((extend(parent, "kind"), false));
        }
    }

    /// The text as serde reads it: blanked where something was left out,
    /// with each misspelt key written as the field it is read as.
    fn edited(&self) -> String {
        let mut text = String::with_capacity(self.text.len());
        let mut i = 0;
        while i < self.text.len() {
            match self.renames.iter().find(|r| r.span.0 == i) {
                Some(rename) if rename.span.1 > i => {
                    text.push_str(&rename.meant);
                    i = rename.span.1;
                }
                _ => {
                    text.push(self.text[i]);
                    i += 1;
                }
            }
        }
        text
    }

    /// A path as the flow is read (misspelt keys read as what they meant)
    /// turned into the path as the file writes it.
    fn written(&self, path: &[Seg]) -> Vec<Seg> {
        let mut path = path.to_vec();
        for rename in &self.renames {
            let n = rename.parent.len();
            if path.len() > n
                && path[..n] == rename.parent[..]
                && path[n] == Seg::Key(rename.meant.clone())
            {
                path[n] = Seg::Key(rename.written.clone());
            }
        }
        path
    }

    /// The step a path (as the flow is read) is in and the field within it,
    /// as the validator names them: `spec.steps[1].loop.steps[0].after[2]`
    /// is the nested step's `after[2]`; a path outside any step has no
    /// step, and its field is counted from `spec` (or the root, outside
    /// `spec`).
    fn attribute(&self, tree: &YamlNode, path: &[Seg]) -> (String, String) {
        let Some((Seg::Key(first), mut rest)) = path.split_first() else {
            return (String::new(), write_path(path));
        };
        if first != "spec" || rest.is_empty() {
            return (String::new(), write_path(path));
        }
        let mut at: Vec<Seg> = vec![Seg::Key("spec".into())];
        let mut key: Option<String> = None;
        loop {
            let keys: &[&str] = match key {
                None => &["steps"],
                Some(_) if rest.first() == Some(&Seg::Key("loop".into())) => &["loop", "steps"],
                Some(_) => &["parallel", "step", "loop", "steps"],
            };
            let leads = rest.len() > keys.len()
                && keys
                    .iter()
                    .zip(rest)
                    .all(|(k, seg)| *seg == Seg::Key((*k).to_string()))
                && matches!(rest[keys.len()], Seg::Index(_));
            if !leads {
                break;
            }
            at.extend_from_slice(&rest[..=keys.len()]);
            rest = &rest[keys.len() + 1..];
            let (step, _, _) = tree.follow(&self.written(&at));
            key = Some(
                step.entry("key")
                    .and_then(|(_, k)| k.text())
                    .unwrap_or_default()
                    .to_string(),
            );
        }
        match key {
            // A step without a key is named by its place.
            Some(key) if !key.is_empty() => (key, write_path(rest)),
            _ => (String::new(), write_path(&path[1..])),
        }
    }

    /// Reports `problem` where the node at `path` (as the flow is read)
    /// stands.
    fn report(&mut self, problem: StepProblem, path: &[Seg]) {
        let character = problem.character.and_then(|c| usize::try_from(c).ok());
        let path = self.written(path);
        let place = self
            .tree
            .map(|tree| self.source.place(tree, &path, character));
        self.push(problem, place);
    }

    fn push(&mut self, problem: StepProblem, place: Option<Place>) {
        self.problems.push(LintProblem {
            problem,
            line: place.map(|p| p.line),
            column: place.map(|p| p.column),
            exact: place.is_some_and(|p| p.exact),
        });
    }
}

/// serde_yaml's message without what lint says itself (the path it puts
/// first, the line and column it puts last) and in YAML's words rather
/// than Rust's: `a list`, `a mapping`, `a whole number`.
fn bare_message(error: &serde_yaml::Error, path: &[Seg]) -> String {
    let mut message = error.to_string();
    if let Some(at) = error.location() {
        let suffix = format!(" at line {} column {}", at.line(), at.column());
        if let Some(bare) = message.strip_suffix(&suffix) {
            message = bare.to_string();
        }
    }
    let prefix = format!("{}: ", write_path(path));
    if let Some(bare) = message.strip_prefix(&prefix) {
        message = bare.to_string();
    }
    in_yaml_words(&message)
}

/// serde's names of types (`sequence`, `map`, `i32`, `struct Step`) as a
/// person who wrote YAML calls them.
fn in_yaml_words(message: &str) -> String {
    let Some((head, expected)) = message.split_once(", expected ") else {
        return message.to_string();
    };
    let head = head
        .replace("invalid type: sequence", "invalid type: a list")
        .replace("invalid type: map", "invalid type: a mapping")
        .replace("invalid type: unit value", "invalid type: null");
    let whole = [
        "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "usize",
    ];
    let expected = match expected {
        e if whole.contains(&e) => "a whole number".to_string(),
        "f32" | "f64" => "a number".to_string(),
        "a sequence" => "a list".to_string(),
        e if e.starts_with("struct ") || e == "a map" => "a mapping".to_string(),
        e => e.to_string(),
    };
    format!("{head}, expected {expected}")
}

/// `path` with one key more (none when `key` is empty).
fn extend(path: &[Seg], key: &str) -> Vec<Seg> {
    let mut longer = path.to_vec();
    if !key.is_empty() {
        longer.push(Seg::Key(key.to_string()));
    }
    longer
}

/// Where [`unknown_keys`] is: the path as the file writes it, and as the
/// flow is read (misspelt keys read as the field they meant).
#[derive(Default)]
struct Walk {
    written: Vec<Seg>,
    read_as: Vec<Seg>,
}

impl Walk {
    fn push(&mut self, written: Seg, read_as: Seg) {
        self.written.push(written);
        self.read_as.push(read_as);
    }

    fn pop(&mut self) {
        self.written.pop();
        self.read_as.pop();
    }
}

/// Every key of a mapping whose schema lists its fields that is not one of
/// them, under `node` (at `at`).
fn unknown_keys(
    node: &YamlNode,
    schema: Option<&Json>,
    schemas: &Schemas,
    at: &mut Walk,
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
            if at.written.is_empty()
                && let Some(fields) = &mut fields
            {
                // The CRD's schema leaves out what every object has.
                fields.splice(0..0, ["apiVersion", "kind", "metadata"]);
            }
            let present: Vec<&str> = entries.iter().filter_map(|(k, _)| k.text()).collect();
            for (key, value) in entries {
                let Some(name) = key.text() else { continue };
                let known = fields.as_ref().is_none_or(|f| f.contains(&name));
                if known {
                    at.push(Seg::Key(name.into()), Seg::Key(name.into()));
                    unknown_keys(value, schemas.property(schema, name), schemas, at, found);
                    at.pop();
                    continue;
                }
                let fields = fields.as_deref().unwrap_or_default();
                let close = closest(name, fields.iter().copied());
                let owner = owner(&at.read_as);
                let message = match close {
                    Some(close) => {
                        format!("`{name}` is not a field of {owner} (did you mean `{close}`?)")
                    }
                    None => {
                        let names: Vec<String> = fields.iter().map(|f| f.to_string()).collect();
                        format!(
                            "`{name}` is not a field of {owner}; its fields are {}",
                            quote_list(&names)
                        )
                    }
                };
                let meant = close.filter(|c| !present.contains(c));
                at.push(
                    Seg::Key(name.into()),
                    Seg::Key(meant.unwrap_or(name).into()),
                );
                found.push(Unknown {
                    path: at.written.clone(),
                    message,
                    meant: meant.map(str::to_string),
                    span: (key.start.index, key.end.index),
                });
                // Read as the field it meant, it is checked as one.
                if let Some(meant) = meant {
                    let inner = schemas.property(schema, meant);
                    unknown_keys(value, inner, schemas, at, found);
                }
                at.pop();
            }
        }
        NodeKind::Seq(items) => {
            let items_schema = schema.and_then(|s| s.get("items"));
            for (i, item) in items.iter().enumerate() {
                at.push(Seg::Index(i), Seg::Index(i));
                unknown_keys(item, items_schema, schemas, at, found);
                at.pop();
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
                // Read as `source`, the misspelt key is checked as one.
                "line 13, column 7: step publish: script: give either `source` or `command`, not both",
                "line 14, column 9: step publish: script.sorce: `sorce` is not a field of `script` (did you mean `source`?)",
                "line 16, column 7: step publish: bogus: `bogus` is not a field of a step; its fields are `after`, `agent`, `approval`, `attempts`, `backoff`, `condition`, `description`, `http`, `input`, `join`, `key`, `lookup`, `loop`, `message`, `onFailure`, `parallel`, `save`, `script`, `sendBack`, `timeout`, `when`",
            ]
        );
    }

    /// A misspelt field is read as the one it meant: an approval whose
    /// `decisons` are named still has its exits, so neither its send-back
    /// nor an arrow from one of them is refused for want of them, and what
    /// is wrong inside it is found where it is written.
    #[test]
    fn a_misspelt_field_is_read_as_the_one_it_meant() {
        let text = format!(
            "{HEAD}  steps:
    - key: draft
      scirpt: {{sorce: echo, envv: [{{name: A, value: b}}]}}
    - key: review
      approval:
        decisons: [approve, Changes]
      sendBack: [{{exit: Changes, to: draft}}]
    - key: publish
      after: [review.approve]
      atempts: 99
      agent: {{prompt: go}}
"
        );
        assert_eq!(
            lines(&text),
            [
                "line 7, column 7: step draft: scirpt: `scirpt` is not a field of a step (did you mean `script`?)",
                "line 7, column 16: step draft: scirpt.sorce: `sorce` is not a field of `script` (did you mean `source`?)",
                "line 7, column 29: step draft: scirpt.envv: `envv` is not a field of `script` (did you mean `env`?)",
                "line 10, column 9: step review: approval.decisons: `decisons` is not a field of `approval` (did you mean `decisions`?)",
                "line 10, column 29: step review: approval.decisions[1]: the decision `Changes` must start with a lowercase letter",
                "line 14, column 7: step publish: atempts: `atempts` is not a field of a step (did you mean `attempts`?)",
                "line 14, column 16: step publish: attempts: attempts is 99; it must be between 1 and 20",
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
        // The misspelt `exit` is read as one, so the send-back stands.
        assert_eq!(
            lines(&text),
            [
                "line 7, column 17: step draft: attempts: invalid type: string \"two\", expected a whole number",
                "line 11, column 19: step review: sendBack[0].exti: `exti` is not a field of an entry of `sendBack` (did you mean `exit`?)",
                "line 13, column 25: step late: input.x: `later` runs later than this step, so its data cannot be read here; a step reads a later one only when both are inside the same loop",
                "line 14, column 16: step late: script.source: invalid type: a list, expected a string",
            ]
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
                "line 9, column 25: step draft: input.b[1]: unknown reference `$nope`; a reference starts with $input, $steps, $previous, $loop, $item, $index or $run (and $record in a lookup)",
                "line 13, column 37: step draft: script.output.fields[0].type: `bool` is not a field type; use one of string, number, integer, boolean, array, object",
                "line 15, column 15: step review: after[0]: no step has the key `drat` (did you mean `draft`?)",
                "line 17, column 25: step review: approval.decisions[1]: the decision `Changes` must start with a lowercase letter",
            ]
        );
    }

    /// A step that is no mapping is named by its place, and read as an
    /// empty step, whose want of a key and a kind is not said again.
    #[test]
    fn a_step_that_is_not_a_mapping_is_named_by_its_place() {
        let text = format!(
            "{HEAD}  steps:
    - {{key: a, bogus: 1, script: {{source: x}}}}
    - just text
    - {{key: b, script: {{source: x}}, input: {{x: $steps.nope.output}}}}
"
        );
        assert_eq!(
            lines(&text),
            [
                "line 6, column 16: step a: bogus: `bogus` is not a field of a step; its fields are `after`, `agent`, `approval`, `attempts`, `backoff`, `condition`, `description`, `http`, `input`, `join`, `key`, `lookup`, `loop`, `message`, `onFailure`, `parallel`, `save`, `script`, `sendBack`, `timeout`, `when`",
                "line 7, column 7: steps[1]: invalid type: string \"just text\", expected a mapping",
                "line 8, column 55: step b: input.x: no step has the key `nope`",
            ]
        );
    }

    /// Steps nested in a loop and the step of a parallel part are named
    /// and placed like the others, their misspelt keys read as meant.
    #[test]
    fn nested_steps_are_named_and_placed() {
        let text = format!(
            "{HEAD}  steps:
    - key: revise
      loop:
        until: $steps.check.output.ok == True
        maxIterations: 3
        steps:
          - key: write
            agent: {{prompt: go, gvie: [check]}}
          - key: check
            after: [wirte]
            script: {{source: x}}
    - key: each
      parallel:
        items: $input.list
        step:
          script: {{source: x, env: [{{name: \"A B\", vaule: \"1\"}}]}}
"
        );
        assert_eq!(
            lines(&text),
            [
                "line 8, column 42: step revise: loop.until: write `true` in lowercase, not `True`",
                "line 12, column 33: step write: agent.gvie: `gvie` is not a field of `agent` (did you mean `give`?)",
                "line 14, column 21: step check: after[0]: no step has the key `wirte` (did you mean `write`?)",
                "line 20, column 37: step each: parallel.step.script.env[0]: `A B` is not a variable name (letters, digits and `_`)",
                "line 20, column 51: step each: parallel.step.script.env[0].vaule: `vaule` is not a field of an entry of `env` (did you mean `value`?)",
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
            ["line 4, column 1: spec: invalid type: a list, expected a mapping"]
        );
    }
}
