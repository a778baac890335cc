//! The words kubectl reads differently: a YAML 1.1 reader (kubectl, Argo
//! CD, anything on go-yaml) takes the plain `on`, `yes`, `n` for booleans,
//! `0644` for an octal number and `1_000` for a thousand, where YAML 1.2
//! (serde_yaml, so `coxswain lint` and `coxswain run`) reads the text.
//! A step input key `n:` reaches the API server as `"false"`; a
//! `description: yes` is refused by the CRD's schema at `kubectl apply`.
//! Lint reports each one with its line and column, so it is quoted before
//! it ever reaches a cluster.
//!
//! A plain `true`, `True` or `10` reads alike in both versions, but where
//! the Flow's schema wants text (`when: true`, `description: 10`, an env
//! `value: false`) serde_yaml hands Coxswain the text `"true"` while kubectl
//! sends the boolean and the API server refuses the flow: those are found
//! by walking the CRD's schema alongside the YAML.

use kube::CustomResourceExt;
use saphyr_parser::{Event, Parser, ScalarStyle};
use serde_json::Value;

use crate::api::Flow;
use crate::portable_yaml::YAML_1_1_BOOLEANS;

/// One plain scalar a YAML 1.1 reader takes for something else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadsDifferently {
    /// The document it is in, counting from 0 (`---` starts the next).
    pub document: usize,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// The scalar as written.
    pub text: String,
    /// What YAML 1.1 reads: `true`, `false`, or a number.
    pub as_1_1: String,
    /// Whether it is a mapping key (a field name) rather than a value.
    pub key: bool,
    /// The field whose schema wants text here (`when`, `description`), when
    /// the scalar reads alike in both versions but as a non-string, so the
    /// API server refuses it; `None` when the two versions read it apart.
    pub wants_text: Option<String>,
}

impl std::fmt::Display for ReadsDifferently {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line,
            self.column,
            self.what()
        )
    }
}

impl ReadsDifferently {
    /// What is wrong and the fix, without the place.
    pub fn what(&self) -> String {
        let what = if self.key { "the key" } else { "the value" };
        if let Some(field) = &self.wants_text {
            return format!(
                "{what} `{}` is {} to kubectl and Argo CD, and the API server refuses it: `{field}` takes text{}; quote it: \"{}\"",
                self.text,
                self.as_1_1,
                if is_expression_field(field) {
                    " (an expression)"
                } else {
                    ""
                },
                self.suggestion()
            );
        }
        format!(
            "{what} `{}` is text here, but kubectl and Argo CD (YAML 1.1) read it as {}; quote it: \"{}\"",
            self.text, self.as_1_1, self.text
        )
    }

    /// The text to write between quotes: the scalar itself, but in lowercase
    /// for `True`/`FALSE` in an expression, whose keywords are lowercase.
    fn suggestion(&self) -> String {
        let lower = self.text.to_ascii_lowercase();
        let keyword = lower == "true" || lower == "false";
        match &self.wants_text {
            Some(field) if keyword && is_expression_field(field) => lower,
            _ => self.text.clone(),
        }
    }
}

/// The fields that hold an expression, whose keywords are lowercase.
fn is_expression_field(field: &str) -> bool {
    matches!(field, "when" | "until")
}

/// Where the scan is in the document's nesting: in a mapping, whether the
/// next scalar is a key, the last key read, and the mapping's schema (when
/// known); in a sequence, the schema of its items.
enum Frame<'s> {
    Map {
        next_is_key: bool,
        key: Option<String>,
        schema: Option<&'s Value>,
    },
    Seq {
        items: Option<&'s Value>,
    },
}

/// The schema of a Flow object (`openAPIV3Schema` of its CRD).
fn flow_schema() -> Value {
    let crd = serde_json::to_value(Flow::crd()).unwrap_or_default();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

/// The schemas the scan walks: a Flow's, and a step's for the steps nested
/// in a loop (`steps`) or a parallel step (`step`), which the CRD leaves
/// free (a schema cannot refer to itself) but the controller reads as steps.
pub(super) struct Schemas {
    /// A Flow's schema.
    pub flow: Value,
    step: Value,
    steps: Value,
}

impl Schemas {
    /// Reads the schemas from the Flow's CRD.
    pub fn new() -> Self {
        let flow = flow_schema();
        let step = flow["properties"]["spec"]["properties"]["steps"]["items"].clone();
        let steps = serde_json::json!({ "type": "array", "items": step.clone() });
        Schemas { flow, step, steps }
    }

    /// The schema of the value under `key` in a mapping with `schema`.
    pub fn property<'s>(&'s self, schema: Option<&'s Value>, key: &str) -> Option<&'s Value> {
        let schema = schema?;
        if let Some(field) = schema.get("properties").and_then(|p| p.get(key)) {
            let nested = |s: &Value| {
                s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
                    && s.get("properties").is_none()
            };
            return Some(match key {
                "step" if nested(field) => &self.step,
                "steps" if field.get("items").is_some_and(nested) => &self.steps,
                _ => field,
            });
        }
        schema.get("additionalProperties").filter(|a| a.is_object())
    }
}

/// Whether the schema says the value is a string and nothing else.
fn wants_string(schema: Option<&Value>) -> bool {
    schema.and_then(|s| s.get("type")).and_then(Value::as_str) == Some("string")
}

/// Every plain, untagged scalar of `text` that YAML 1.1 reads as something
/// other than YAML 1.2 does, and every one that both read as a non-string
/// where the Flow's schema wants text, in order. Text that does not parse
/// yields what was found before the error (serde_yaml reports the error
/// itself).
pub fn reads_differently(text: &str) -> Vec<ReadsDifferently> {
    let schemas = Schemas::new();
    let mut found = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut document = 0usize;
    let mut started = false;
    for item in Parser::new_from_str(text) {
        let Ok((event, span)) = item else { break };
        match event {
            Event::DocumentStart(_) => {
                if started {
                    document += 1;
                }
                started = true;
                stack.clear();
            }
            Event::MappingStart(..) => {
                let schema = match take_slot(&mut stack, &schemas) {
                    Slot::Root => Some(&schemas.flow),
                    Slot::Value { schema, .. } => schema,
                    Slot::Key => None,
                };
                stack.push(Frame::Map {
                    next_is_key: true,
                    key: None,
                    schema,
                });
            }
            Event::SequenceStart(..) => {
                let items = match take_slot(&mut stack, &schemas) {
                    Slot::Value { schema, .. } => schema.and_then(|s| s.get("items")),
                    Slot::Root | Slot::Key => None,
                };
                stack.push(Frame::Seq { items });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                stack.pop();
            }
            Event::Alias(_) => {
                take_slot(&mut stack, &schemas);
            }
            Event::Scalar(value, style, _, tag) => {
                let slot = take_slot(&mut stack, &schemas);
                let key = matches!(slot, Slot::Key);
                if key && let Some(Frame::Map { key: last, .. }) = stack.last_mut() {
                    *last = Some(value.to_string());
                }
                if style != ScalarStyle::Plain || tag.is_some() {
                    continue;
                }
                let reading = yaml_1_1_reading(&value).map(|as_1_1| (as_1_1, None));
                let refused = || match &slot {
                    Slot::Value {
                        schema,
                        field: Some(field),
                    } if wants_string(*schema) => {
                        non_string(&value).map(|as_both| (as_both, Some(field.clone())))
                    }
                    _ => None,
                };
                if let Some((as_1_1, wants_text)) = reading.or_else(refused) {
                    found.push(ReadsDifferently {
                        document,
                        line: span.start.line(),
                        column: span.start.col() + 1,
                        text: value.to_string(),
                        as_1_1,
                        key,
                        wants_text,
                    });
                }
            }
            _ => {}
        }
    }
    found
}

/// The place the next node fills: a document's root, a mapping key, or a
/// value (under `field` in a mapping, or an item of a sequence) with the
/// schema it must fit, when known.
enum Slot<'s> {
    Root,
    Key,
    Value {
        schema: Option<&'s Value>,
        field: Option<String>,
    },
}

/// Uses the slot the next node fills and says which it is.
fn take_slot<'s>(stack: &mut [Frame<'s>], schemas: &'s Schemas) -> Slot<'s> {
    match stack.last_mut() {
        None => Slot::Root,
        Some(Frame::Map {
            next_is_key,
            key,
            schema,
        }) => {
            let is_key = *next_is_key;
            *next_is_key = !is_key;
            if is_key {
                Slot::Key
            } else {
                Slot::Value {
                    schema: key.as_deref().and_then(|k| schemas.property(*schema, k)),
                    field: key.clone(),
                }
            }
        }
        Some(Frame::Seq { items }) => Slot::Value {
            schema: *items,
            field: None,
        },
    }
}

/// What a plain scalar that YAML 1.1 and 1.2 read alike is when it is not
/// text: a boolean (`true`, `True`, `FALSE`) or a number (`10`, `-1.5`,
/// `1e3`, `0x1f`, `.inf`). Null (`~`, `null`) is left out: both read it as
/// no value, which an optional text field takes as absent.
fn non_string(plain: &str) -> Option<String> {
    match plain {
        "true" | "True" | "TRUE" => return Some("the boolean true".into()),
        "false" | "False" | "FALSE" => return Some("the boolean false".into()),
        _ => {}
    }
    let unsigned = plain.strip_prefix(['-', '+']).unwrap_or(plain);
    let special = [".inf", ".Inf", ".INF", ".nan", ".NaN", ".NAN"];
    let radix = ["0x", "0o", "0b"].iter().any(|p| {
        unsigned
            .strip_prefix(p)
            .is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_hexdigit()))
    });
    if special.contains(&unsigned)
        || radix
        || plain.parse::<f64>().is_ok_and(|_| looks_numeric(unsigned))
    {
        return Some(format!("the number {plain}"));
    }
    None
}

/// Digits, at most one `.`, and an optional exponent: what both YAML
/// versions read as a number (Rust also parses `inf` and `NaN`, which YAML
/// reads as text).
fn looks_numeric(unsigned: &str) -> bool {
    unsigned.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        && unsigned.chars().any(|c| c.is_ascii_digit())
        && unsigned
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '-' | '+'))
}

/// What YAML 1.1 makes of a plain scalar that YAML 1.2 keeps as text: a
/// boolean word, digits with a leading zero (octal when they can be), or
/// digits with `_`.
fn yaml_1_1_reading(plain: &str) -> Option<String> {
    if YAML_1_1_BOOLEANS.contains(&plain) {
        return match plain.to_ascii_lowercase().as_str() {
            "true" | "false" => None, // both versions read these alike
            "y" | "yes" | "on" => Some("true".into()),
            _ => Some("false".into()),
        };
    }
    let (sign, digits) = match plain.strip_prefix(['-', '+']) {
        Some(rest) => (&plain[..1], rest),
        None => ("", plain),
    };
    if digits.is_empty() || !digits.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if !digits.chars().all(|c| c.is_ascii_digit() || c == '_') {
        return None;
    }
    let bare: String = digits.chars().filter(|c| *c != '_').collect();
    // A leading zero: YAML 1.2 (serde_yaml) keeps the text; go-yaml reads
    // octal digits as an octal number, others as a decimal one.
    if bare.len() > 1 && bare.starts_with('0') {
        if bare.chars().all(|c| ('0'..='7').contains(&c)) {
            let value = i64::from_str_radix(&bare, 8).ok()?;
            return Some(format!("the octal number {sign}{value}"));
        }
        let value: i64 = bare.parse().ok()?;
        return Some(format!("the number {sign}{value}"));
    }
    if digits.contains('_') {
        let value: i64 = bare.parse().ok()?;
        return Some(format!("the number {sign}{value}"));
    }
    None
}

/// Warnings for keys that look like kubectl's reading of a bare word: a
/// `"true"` or `"false"` key in a Flow's free JSON (step `input`, the flow's
/// `output`) is most likely `y`, `yes`, `on`, `n`, `no` or `off` written
/// bare, turned into a boolean by kubectl or Argo CD (YAML 1.1) before the
/// API server saw it. No Flow field has such a name, so any such key is one.
/// Admission returns these as warnings (kubectl prints `Warning:`), since
/// the key may be meant; each names its path.
pub fn boolean_looking_keys(spec: &crate::api::FlowSpec) -> Vec<String> {
    let mut found = Vec::new();
    if let Ok(value) = serde_json::to_value(spec) {
        boolean_keys_in(&value, "spec", &mut found);
    }
    found
}

fn boolean_keys_in(value: &Value, path: &str, found: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                if key == "true" || key == "false" {
                    let words = if key == "true" {
                        "y, yes or on"
                    } else {
                        "n, no or off"
                    };
                    found.push(format!(
                        "{path}: the key \"{key}\" is what kubectl makes of a bare {words} (YAML 1.1 reads it as a boolean); if you meant the word, quote it in the YAML, as in \"{}\":",
                        if key == "true" { "yes" } else { "no" }
                    ));
                }
                boolean_keys_in(inner, &format!("{path}.{key}"), found);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                boolean_keys_in(item, &format!("{path}[{i}]"), found);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Vec<(usize, usize, String, String, bool)> {
        reads_differently(text)
            .into_iter()
            .map(|r| (r.line, r.column, r.text, r.as_1_1, r.key))
            .collect()
    }

    #[test]
    fn boolean_words_numbers_and_keys_are_found_with_their_place() {
        let text = "\
kind: Flow
spec:
  description: yes
  steps:
    - key: a
      input: {n: 1, ok: on, mode: 0644, big: 1_000, plain: 10, quoted: \"no\", t: true, z: 089}
";
        assert_eq!(
            found(text),
            [
                (3, 16, "yes".into(), "true".into(), false),
                (6, 15, "n".into(), "false".into(), true),
                (6, 25, "on".into(), "true".into(), false),
                (6, 35, "0644".into(), "the octal number 420".into(), false),
                (6, 46, "1_000".into(), "the number 1000".into(), false),
                (6, 90, "089".into(), "the number 89".into(), false),
            ]
        );
        let first = &reads_differently(text)[0];
        assert_eq!(
            first.to_string(),
            "line 3, column 16: the value `yes` is text here, but kubectl and Argo CD (YAML 1.1) read it as true; quote it: \"yes\""
        );
    }

    #[test]
    fn quoted_tagged_block_and_ordinary_scalars_are_left_alone() {
        let text = "\
a: 'on'
b: !!str yes
c: |
  yes
  on
d: [1, 0, -0, 10_, onward, Norway, 1.5]
";
        assert_eq!(
            found(text),
            [(6, 15, "10_".into(), "the number 10".into(), false)]
        );
    }

    #[test]
    fn documents_are_counted_and_sequences_hold_values_not_keys() {
        let text = "a: 1\n---\n- off\n- {y: 2}\n";
        let all = reads_differently(text);
        assert_eq!(
            all.iter()
                .map(|r| (r.document, r.text.as_str(), r.key))
                .collect::<Vec<_>>(),
            [(1, "off", false), (1, "y", true)]
        );
        // Broken YAML gives what came before the error, and no panic.
        assert_eq!(found("a: on\nb: [\n").len(), 1);
    }

    fn refused(text: &str) -> Vec<(usize, usize, String, Option<String>)> {
        reads_differently(text)
            .into_iter()
            .map(|r| (r.line, r.column, r.to_string(), r.wants_text))
            .collect()
    }

    #[test]
    fn a_bare_boolean_or_number_where_the_schema_wants_text_is_found() {
        let text = "\
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: traps}
spec:
  description: 10
  steps:
    - key: a
      when: true
      script:
        run: echo
        env:
          - {name: LOUD, value: false}
    - key: b
      when: True
      condition: {when: FALSE}
      input: {t: true, count: 10}
";
        let all = refused(text);
        assert_eq!(
            all.iter()
                .map(|(l, c, _, f)| (*l, *c, f.clone().unwrap_or_default()))
                .collect::<Vec<_>>(),
            [
                (5, 16, "description".into()),
                (8, 13, "when".into()),
                (12, 33, "value".into()),
                (14, 13, "when".into()),
                (15, 25, "when".into()),
            ]
        );
        assert_eq!(
            all[1].2,
            "line 8, column 13: the value `true` is the boolean true to kubectl and Argo CD, and the API server refuses it: `when` takes text (an expression); quote it: \"true\""
        );
        // `True` in an expression: lowercase and quoted, never a bare `true`.
        assert_eq!(
            all[3].2,
            "line 14, column 13: the value `True` is the boolean true to kubectl and Argo CD, and the API server refuses it: `when` takes text (an expression); quote it: \"true\""
        );
        assert_eq!(
            all[0].2,
            "line 5, column 16: the value `10` is the number 10 to kubectl and Argo CD, and the API server refuses it: `description` takes text; quote it: \"10\""
        );
    }

    #[test]
    fn every_case_of_the_boolean_words_is_found_as_key_and_value() {
        for word in [
            "y", "Y", "n", "N", "yes", "Yes", "YES", "no", "No", "NO", "on", "On", "ON", "off",
            "Off", "OFF",
        ] {
            let text = format!(
                "spec:\n  steps:\n    - key: a\n      input: {{{word}: {word}}}\n      script: {{source: x, env: [{{name: A, value: {word}}}]}}\n"
            );
            let all = found(&text);
            let lower = word.to_ascii_lowercase();
            let as_1_1 = if matches!(lower.as_str(), "y" | "yes" | "on") {
                "true"
            } else {
                "false"
            };
            let column = 15 + word.len() + 2;
            assert_eq!(
                all,
                [
                    (4, 15, word.to_string(), as_1_1.to_string(), true),
                    (4, column, word.to_string(), as_1_1.to_string(), false),
                    (5, 50, word.to_string(), as_1_1.to_string(), false),
                ],
                "{word}"
            );
        }
    }

    /// What reads alike to go-yaml v2 (kubectl) and serde_yaml: sexagesimal
    /// `1:30` (go-yaml has no base 60: text to both), `0o755` (octal to
    /// both), `~` (null to both), and quoted or free-JSON booleans.
    #[test]
    fn what_both_versions_read_alike_is_left_alone() {
        let text = "\
spec:
  description: \"true\"
  steps:
    - key: a
      when: \"True\"
      input: {at: 1:30, mode: 0o755, none: ~, t: true, f: False}
      script: {source: x, env: [{name: A, value: '10'}]}
";
        assert_eq!(found(text), []);
    }

    #[test]
    fn keys_kubectl_made_booleans_are_named_with_their_path() {
        let spec: crate::api::FlowSpec = serde_json::from_value(serde_json::json!({
            "steps": [{"key": "a", "join": {}, "input": {"false": 1, "n": 2, "deep": [{"true": 3}]}}],
            "output": {"true": "$steps.a.output"},
        }))
        .expect("a flow");
        assert_eq!(
            boolean_looking_keys(&spec),
            [
                "spec.output: the key \"true\" is what kubectl makes of a bare y, yes or on (YAML 1.1 reads it as a boolean); if you meant the word, quote it in the YAML, as in \"yes\":",
                "spec.steps[0].input.deep[0]: the key \"true\" is what kubectl makes of a bare y, yes or on (YAML 1.1 reads it as a boolean); if you meant the word, quote it in the YAML, as in \"yes\":",
                "spec.steps[0].input: the key \"false\" is what kubectl makes of a bare n, no or off (YAML 1.1 reads it as a boolean); if you meant the word, quote it in the YAML, as in \"no\":",
            ]
        );
    }

    /// Steps nested in a loop or a parallel step are free JSON to the API
    /// server, but the controller reads them as steps: a bare `when: true`
    /// there is found too, and their `input` stays free.
    #[test]
    fn steps_nested_in_a_loop_or_a_parallel_step_are_checked_as_steps() {
        let text = "\
spec:
  steps:
    - key: l
      loop:
        until: $pass > 2
        steps:
          - {key: i, when: true, input: {t: true}}
    - key: p
      parallel:
        parts: [{name: a}]
        step: {description: 7, script: {source: x}}
";
        assert_eq!(
            refused(text)
                .into_iter()
                .map(|(l, c, _, f)| (l, c, f))
                .collect::<Vec<_>>(),
            [
                (7, 28, Some("when".into())),
                (11, 29, Some("description".into()))
            ]
        );
    }
}
