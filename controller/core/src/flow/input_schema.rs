//! Checking a run's input against the flow's `input` schema, before anything
//! runs: the subset of JSON Schema people write for inputs (type,
//! properties, required, additionalProperties, items, enum, bounds).
//! [`check_schema`] refuses, when the flow is saved, every keyword outside
//! that subset (`pattern`, `oneOf`, `$ref`…): a keyword that is read but not
//! enforced would let inputs through that its author meant to refuse.

use serde_json::{Map, Value};

use super::FlowError;

/// One way the input does not fit, with where (`input.brief`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputProblem {
    /// The path of the offending value, starting at `input`.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for InputProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Every way `input` does not fit `schema`; empty when it fits.
pub fn check_input(schema: &Value, input: &Value) -> Vec<InputProblem> {
    let mut problems = Vec::new();
    check(schema, input, "input", &mut problems);
    problems
}

/// What is wrong with a length `len` under the schema's bounds `min_key`
/// and `max_key`: a text and a list are measured by the same rule.
fn length_problems(
    schema: &Map<String, Value>,
    [min_key, max_key]: [&str; 2],
    len: u64,
    what: &str,
) -> impl Iterator<Item = String> {
    let bound = |key: &str| schema.get(key).and_then(Value::as_u64);
    let short = bound(min_key).filter(|&min| len < min);
    let long = bound(max_key).filter(|&max| len > max);
    let short = short.map(|min| format!("{what} is shorter than {min}"));
    short
        .into_iter()
        .chain(long.map(|max| format!("{what} is longer than {max}")))
}

fn check(schema: &Value, value: &Value, path: &str, problems: &mut Vec<InputProblem>) {
    let Some(schema) = schema.as_object() else {
        return;
    };
    let mut push = |message: String| {
        problems.push(InputProblem {
            path: path.to_string(),
            message,
        })
    };
    if let Some(expected) = schema.get("type") {
        let types: Vec<&str> = match expected {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !types.is_empty() && !types.iter().any(|t| has_type(value, t)) {
            push(format!(
                "expected {}, got {}",
                types.join(" or "),
                describe_type(value)
            ));
            return;
        }
    }
    if let Some(Value::Array(options)) = schema.get("enum")
        && !options.contains(value)
    {
        let list: Vec<String> = options.iter().map(Value::to_string).collect();
        push(format!("{value} is not one of {}", list.join(", ")));
    }
    match value {
        Value::Number(n) => {
            let n = n.as_f64().unwrap_or(f64::NAN);
            if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
                && n < min
            {
                push(format!("{n} is below the minimum {min}"));
            }
            if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
                && n > max
            {
                push(format!("{n} is above the maximum {max}"));
            }
        }
        Value::String(s) => {
            let len = s.chars().count() as u64;
            let what = format!("text of {len} characters");
            length_problems(schema, ["minLength", "maxLength"], len, &what).for_each(&mut push);
        }
        Value::Array(items) => {
            let len = items.len() as u64;
            let what = format!("a list of {len} items");
            length_problems(schema, ["minItems", "maxItems"], len, &what).for_each(&mut push);
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check(item_schema, item, &format!("{path}[{i}]"), problems);
                }
            }
        }
        Value::Object(fields) => {
            for name in schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(name) = name.as_str()
                    && !fields.contains_key(name)
                {
                    push(format!("`{name}` is required"));
                }
            }
            let properties = schema.get("properties").and_then(Value::as_object);
            for (name, field) in fields {
                let field_path = format!("{path}.{name}");
                match properties.and_then(|p| p.get(name)) {
                    Some(field_schema) => check(field_schema, field, &field_path, problems),
                    None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                        problems.push(InputProblem {
                            path: field_path,
                            message: "is not an input of this flow".into(),
                        })
                    }
                    None => {}
                }
            }
        }
        _ => {}
    }
}

/// The type names `type` takes.
const TYPES: [&str; 7] = [
    "null", "boolean", "string", "number", "integer", "array", "object",
];

/// Keywords that say something about a schema without constraining values.
const ANNOTATIONS: [&str; 4] = ["title", "description", "examples", "$comment"];

/// Every problem of a flow's `input` schema, with the path of the keyword
/// (`input.properties.brief.pattern`): keywords the check does not enforce
/// are refused by name, and enforced ones must have the right form.
pub fn check_schema(schema: &Value) -> Vec<InputProblem> {
    let mut problems = Vec::new();
    check_schema_at(schema, "input", &mut problems);
    problems
}

fn check_schema_at(schema: &Value, path: &str, problems: &mut Vec<InputProblem>) {
    let Some(keywords) = schema.as_object() else {
        problems.push(InputProblem {
            path: path.to_string(),
            message: format!("a schema is an object, not {}", describe_type(schema)),
        });
        return;
    };
    for (keyword, value) in keywords {
        let here = format!("{path}.{keyword}");
        if let Err(error) = check_keyword(keyword, value, &here, problems) {
            problems.push(InputProblem {
                path: here,
                message: error.to_string(),
            });
        }
    }
}

/// One keyword of a schema: Ok when it is enforced and well formed (its
/// sub-schemas are checked into `problems`), else what is wrong with it.
fn check_keyword(
    keyword: &str,
    value: &Value,
    path: &str,
    problems: &mut Vec<InputProblem>,
) -> Result<(), FlowError> {
    match keyword {
        "type" => {
            let names: Vec<&Value> = match value {
                Value::Array(names) => names.iter().collect(),
                one => vec![one],
            };
            for name in names {
                if !name.as_str().is_some_and(|n| TYPES.contains(&n)) {
                    return Err(FlowError::UnknownType {
                        name: name.to_string(),
                        types: TYPES.join(", "),
                    });
                }
            }
        }
        "properties" => {
            let Some(fields) = value.as_object() else {
                return Err(FlowError::PropertiesNotObject);
            };
            for (name, field) in fields {
                check_schema_at(field, &format!("{path}.{name}"), problems);
            }
        }
        "items" => check_schema_at(value, path, problems),
        "required" => {
            if !value
                .as_array()
                .is_some_and(|names| names.iter().all(Value::is_string))
            {
                return Err(FlowError::RequiredNotNames);
            }
        }
        "additionalProperties" if !value.is_boolean() => {
            return Err(FlowError::AdditionalPropertiesSchema);
        }
        "enum" if !value.is_array() => return Err(FlowError::EnumNotList),
        "minimum" | "maximum" if !value.is_number() => {
            return Err(FlowError::NotANumber(keyword.into()));
        }
        "minLength" | "maxLength" | "minItems" | "maxItems" if !value.is_u64() => {
            return Err(FlowError::NotACount(keyword.into()));
        }
        "additionalProperties"
        | "enum"
        | "minimum"
        | "maximum"
        | "minLength"
        | "maxLength"
        | "minItems"
        | "maxItems" => {}
        annotation if ANNOTATIONS.contains(&annotation) => {}
        other => {
            return Err(FlowError::UnsupportedKeyword(other.into()));
        }
    }
    Ok(())
}

fn has_type(value: &Value, t: &str) -> bool {
    match t {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.as_f64().is_some_and(|n| n.fract() == 0.0),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => true,
    }
}

/// How a JSON value's type is named in messages: `text`, `a list`, `null`…
pub fn describe_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "text",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "required": ["brief"], "additionalProperties": false,
               "properties": {"brief": {"type": "string", "minLength": 2},
                              "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                              "tone": {"enum": ["formal", "casual"]},
                              "n": {"type": "integer", "minimum": 1}}})
    }

    #[test]
    fn a_fitting_input_has_no_problems() {
        assert!(
            check_input(
                &schema(),
                &json!({"brief": "Rust", "tags": ["a"], "tone": "formal", "n": 2})
            )
            .is_empty()
        );
    }

    #[test]
    fn a_schema_of_supported_keywords_has_no_problems() {
        let mut schema = schema();
        schema["description"] = json!("What to write about.");
        schema["properties"]["nullable"] = json!({"type": ["string", "null"], "title": "N"});
        assert_eq!(check_schema(&schema), []);
    }

    #[test]
    fn keywords_that_would_not_be_checked_are_refused_by_name_and_path() {
        let schema = json!({"type": "object",
            "properties": {"brief": {"type": "string", "pattern": "^[a-z]+$"},
                           "tags": {"type": "array", "items": {"const": "x"}},
                           "n": {"type": "int", "minimum": "1"}},
            "oneOf": [{"required": ["brief"]}],
            "$ref": "#/defs/x",
            "additionalProperties": {"type": "string"}});
        let problems: Vec<String> = check_schema(&schema)
            .iter()
            .map(ToString::to_string)
            .collect();
        let paths: Vec<&str> = problems
            .iter()
            .filter_map(|p| p.split(": ").next())
            .collect();
        assert_eq!(
            paths,
            [
                "input.$ref",
                "input.additionalProperties",
                "input.oneOf",
                "input.properties.brief.pattern",
                "input.properties.n.minimum",
                "input.properties.n.type",
                "input.properties.tags.items.const",
            ]
        );
        assert!(
            problems[3].starts_with(
                "input.properties.brief.pattern: `pattern` is not supported in an input schema, so it would not be checked"
            ),
            "{problems:#?}"
        );
        assert!(
            problems[5].contains("\"int\" is not a type"),
            "{problems:#?}"
        );
        let not_object = check_schema(&json!("string"));
        assert_eq!(
            not_object[0].to_string(),
            "input: a schema is an object, not text"
        );
    }

    #[test]
    fn each_problem_names_its_path() {
        let problems = check_input(
            &schema(),
            &json!({"tags": ["a", 3, "c"], "tone": "loud", "n": 0.5, "x": 1}),
        );
        let lines: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            [
                "input: `brief` is required",
                "input.n: expected integer, got a number",
                "input.tags: a list of 3 items is longer than 2",
                "input.tags[1]: expected string, got a number",
                "input.tone: \"loud\" is not one of \"formal\", \"casual\"",
                "input.x: is not an input of this flow",
            ]
        );
    }
}
