//! Values: JSON written in a flow where strings may be references.
//!
//! Used for a step's `input`, a parallel step's `items` and the flow's
//! `output`. A string that starts with `$` must be exactly one reference and is
//! replaced by what it points to; `$$` at the start stands for a literal `$`;
//! everything else passes through as written. Values are parsed once when the
//! flow is saved, so every bad string is reported with its place in the JSON.

use serde_json::{Map, Value};

use super::ast::Reference;
use super::error::ValueError;
use super::eval::lookup;
use super::lexer::single_reference;
use crate::scope::Scope;

/// A parsed value, ready to be filled in with run data.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueTemplate {
    node: Part,
    refs: Vec<(String, Reference)>,
}

#[derive(Debug, Clone, PartialEq)]
enum Part {
    /// A subtree with no references, passed through as written.
    Fixed(Value),
    /// A reference; the index points into `refs`.
    Ref(usize),
    List(Vec<Part>),
    Object(Vec<(String, Part)>),
}

/// Parses a value whose place in the flow is unnamed; error paths are relative
/// to the value itself (empty for the value as a whole).
pub fn parse_value(v: &Value) -> Result<ValueTemplate, Vec<ValueError>> {
    parse_value_at(v, "")
}

/// Parses a value that sits at `base` in the flow (e.g. `input`), so errors
/// read `input.brief` or `input.sources[0]`.
pub fn parse_value_at(v: &Value, base: &str) -> Result<ValueTemplate, Vec<ValueError>> {
    let mut refs = Vec::new();
    let mut errors = Vec::new();
    let node = part(v, base.to_string(), &mut refs, &mut errors);
    if errors.is_empty() {
        Ok(ValueTemplate { node, refs })
    } else {
        Err(errors)
    }
}

fn child_key(base: &str, key: &str) -> String {
    let plain = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        if base.is_empty() {
            key.to_string()
        } else {
            format!("{base}.{key}")
        }
    } else {
        format!("{base}[{}]", Value::String(key.to_string()))
    }
}

fn part(
    v: &Value,
    path: String,
    refs: &mut Vec<(String, Reference)>,
    errors: &mut Vec<ValueError>,
) -> Part {
    match v {
        Value::String(s) if s.starts_with("$$") => Part::Fixed(Value::String(s[1..].to_string())),
        Value::String(s) if s.starts_with('$') => match single_reference(s) {
            Ok(r) => {
                refs.push((path, r));
                Part::Ref(refs.len() - 1)
            }
            Err(e) => {
                errors.push(ValueError {
                    path,
                    position: e.position,
                    message: e.message,
                });
                Part::Fixed(Value::Null)
            }
        },
        Value::Array(items) => {
            let before = refs.len();
            let parts: Vec<Part> = items
                .iter()
                .enumerate()
                .map(|(i, x)| part(x, format!("{path}[{i}]"), refs, errors))
                .collect();
            if refs.len() == before && !has_dollar(v) {
                Part::Fixed(v.clone())
            } else {
                Part::List(parts)
            }
        }
        Value::Object(map) => {
            let before = refs.len();
            let parts: Vec<(String, Part)> = map
                .iter()
                .map(|(k, x)| (k.clone(), part(x, child_key(&path, k), refs, errors)))
                .collect();
            if refs.len() == before && !has_dollar(v) {
                Part::Fixed(v.clone())
            } else {
                Part::Object(parts)
            }
        }
        other => Part::Fixed(other.clone()),
    }
}

/// Whether a string anywhere inside starts with `$` (and so needs rewriting
/// even when it holds no reference, as `$$` does).
fn has_dollar(v: &Value) -> bool {
    match v {
        Value::String(s) => s.starts_with('$'),
        Value::Array(a) => a.iter().any(has_dollar),
        Value::Object(o) => o.values().any(has_dollar),
        _ => false,
    }
}

impl ValueTemplate {
    /// Every reference in the value, for the validator's step-key checks.
    pub fn references(&self) -> impl Iterator<Item = &Reference> {
        self.refs.iter().map(|(_, r)| r)
    }

    /// Every reference with its place in the JSON (`input.brief`), so the
    /// validator can say where an unknown step key was written.
    pub fn located_references(&self) -> impl Iterator<Item = (&str, &Reference)> {
        self.refs.iter().map(|(p, r)| (p.as_str(), r))
    }

    /// Whether the value holds no reference at all.
    pub fn is_fixed(&self) -> bool {
        self.refs.is_empty()
    }

    /// Fills in every reference with run data. Missing data is `null`, never an
    /// error. The result is new data for the next step, so it is owned.
    pub fn resolve<S: Scope + ?Sized>(&self, scope: &S) -> Value {
        self.fill(&self.node, scope)
    }

    fn fill<S: Scope + ?Sized>(&self, part: &Part, scope: &S) -> Value {
        match part {
            Part::Fixed(v) => v.clone(),
            Part::Ref(i) => self
                .refs
                .get(*i)
                .and_then(|(_, r)| lookup(r, scope))
                .cloned()
                .unwrap_or(Value::Null),
            Part::List(items) => Value::Array(items.iter().map(|p| self.fill(p, scope)).collect()),
            Part::Object(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(k, p)| (k.clone(), self.fill(p, scope)))
                    .collect::<Map<String, Value>>(),
            ),
        }
    }
}
