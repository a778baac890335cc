//! Whether a person's answer fits an approval step: a decision the step
//! offers, or an entry with exactly the fields it asks for, each of its
//! type. One pure check for every place an answer comes in: the engine, the
//! terminal prompt, `--decide` and the admission webhook.

use serde_json::Value;

use crate::api::{ApprovalMode, ApprovalStep, Field};

use super::describe_type;

/// Why an answer does not fit the step it answers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// A review answer without a decision.
    #[error("step `{step}` needs a decision: one of {allowed}")]
    NoDecision {
        /// The approval step's key.
        step: String,
        /// The decisions it offers, listed.
        allowed: String,
    },
    /// A decision the step does not offer.
    #[error("`{given}` is not a decision of step `{step}`; choose one of {allowed}")]
    NotADecision {
        /// The approval step's key.
        step: String,
        /// What was answered.
        given: String,
        /// The decisions it offers, listed.
        allowed: String,
    },
    /// An entry that is not a JSON object.
    #[error("the entry for step `{step}` must be an object with {fields}; it is {found}")]
    NotAnObject {
        /// The approval step's key.
        step: String,
        /// The fields it asks for, listed.
        fields: String,
        /// What the entry is instead.
        found: &'static str,
    },
    /// A field the step asks for is not in the entry.
    #[error("the entry for step `{step}` lacks `{field}` ({expected})")]
    Missing {
        /// The approval step's key.
        step: String,
        /// The field missing.
        field: String,
        /// Its declared type, described.
        expected: &'static str,
    },
    /// A field the step does not ask for.
    #[error(
        "the entry for step `{step}` has `{field}`, which the step does not ask for; it asks for {fields}"
    )]
    Unexpected {
        /// The approval step's key.
        step: String,
        /// The extra field.
        field: String,
        /// The fields it asks for, listed.
        fields: String,
    },
    /// A field whose value is not of its declared type.
    #[error("`{field}` in the entry for step `{step}` must be {expected}; it is {found}")]
    WrongType {
        /// The approval step's key.
        step: String,
        /// The field.
        field: String,
        /// Its declared type, described.
        expected: &'static str,
        /// What the value is instead.
        found: &'static str,
    },
}

/// Checks an answer to `approval` (the step `step`): in review mode the
/// decision, in entry mode the response. Feedback is free text.
pub fn check_answer(
    step: &str,
    approval: &ApprovalStep,
    decision: Option<&str>,
    response: Option<&Value>,
) -> Result<(), AnswerError> {
    match approval.mode {
        ApprovalMode::Review => check_decision(step, &approval.decisions, decision),
        ApprovalMode::Entry => {
            check_entry(step, &approval.fields, response.unwrap_or(&Value::Null))
        }
    }
}

/// Checks that `given` is one of `decisions`.
pub fn check_decision(
    step: &str,
    decisions: &[String],
    given: Option<&str>,
) -> Result<(), AnswerError> {
    let allowed = || decisions.join(", ");
    match given {
        None => Err(AnswerError::NoDecision {
            step: step.into(),
            allowed: allowed(),
        }),
        Some(d) if decisions.iter().any(|x| x == d) => Ok(()),
        Some(d) => Err(AnswerError::NotADecision {
            step: step.into(),
            given: d.into(),
            allowed: allowed(),
        }),
    }
}

/// Checks that `response` is an object with exactly `fields`, each of its
/// declared type (`null` is of no type; an integer is a number without a
/// fraction).
pub fn check_entry(step: &str, fields: &[Field], response: &Value) -> Result<(), AnswerError> {
    let names = || {
        let names: Vec<String> = fields.iter().map(|f| format!("`{}`", f.name)).collect();
        names.join(", ")
    };
    let Value::Object(entry) = response else {
        return Err(AnswerError::NotAnObject {
            step: step.into(),
            fields: names(),
            found: describe_type(response),
        });
    };
    for field in fields {
        let expected = described(&field.type_);
        let Some(value) = entry.get(&field.name) else {
            return Err(AnswerError::Missing {
                step: step.into(),
                field: field.name.clone(),
                expected,
            });
        };
        if !field.accepts(value) {
            return Err(AnswerError::WrongType {
                step: step.into(),
                field: field.name.clone(),
                expected,
                found: describe_type(value),
            });
        }
    }
    if let Some(extra) = entry.keys().find(|k| !fields.iter().any(|f| &f.name == *k)) {
        return Err(AnswerError::Unexpected {
            step: step.into(),
            field: extra.clone(),
            fields: names(),
        });
    }
    Ok(())
}

/// A field type as a message says it.
fn described(type_: &str) -> &'static str {
    match type_ {
        "string" => "text",
        "number" => "a number",
        "integer" => "a whole number",
        "boolean" => "a boolean",
        "array" => "a list",
        "object" => "an object",
        _ => "of an unknown type",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn fields() -> Vec<Field> {
        serde_json::from_value(json!([
            {"name": "owner", "type": "string"},
            {"name": "count", "type": "integer"}
        ]))
        .expect("fields")
    }

    #[test]
    fn an_entry_has_exactly_the_declared_fields_with_their_types() {
        let ok = check_entry("assign", &fields(), &json!({"owner": "ana", "count": 2}));
        assert_eq!(ok, Ok(()));
        assert_eq!(
            check_entry("assign", &fields(), &json!({"owner": "ana", "count": 2.0})),
            Ok(())
        );
        let cases = [
            (
                json!({"owner": null, "count": 1}),
                "`owner` in the entry for step `assign` must be text; it is null",
            ),
            (
                json!({"owner": "ana", "count": "1"}),
                "`count` in the entry for step `assign` must be a whole number; it is text",
            ),
            (
                json!({"owner": "ana", "count": 1.5}),
                "`count` in the entry for step `assign` must be a whole number; it is a number",
            ),
            (
                json!({"owner": "ana", "count": 1, "extra": true}),
                "has `extra`, which the step does not ask for",
            ),
            (json!({"count": 1}), "lacks `owner` (text)"),
            (
                json!(["ana"]),
                "must be an object with `owner`, `count`; it is a list",
            ),
        ];
        for (entry, message) in cases {
            let error = check_entry("assign", &fields(), &entry).expect_err("refused");
            assert!(error.to_string().contains(message), "{entry}: {error}");
        }
    }

    #[test]
    fn the_issue_example_is_refused() {
        let entry = json!({"owner": null, "count": "1", "extra": true});
        assert!(matches!(
            check_entry("assign", &fields(), &entry),
            Err(AnswerError::WrongType { field, .. }) if field == "owner"
        ));
    }

    #[test]
    fn a_decision_must_be_one_the_step_offers() {
        let decisions = vec!["approve".to_string(), "reject".to_string()];
        assert_eq!(
            check_decision("review", &decisions, Some("approve")),
            Ok(())
        );
        let error = check_decision("review", &decisions, Some("maybe")).expect_err("refused");
        assert_eq!(
            error.to_string(),
            "`maybe` is not a decision of step `review`; choose one of approve, reject"
        );
        assert!(matches!(
            check_decision("review", &decisions, None),
            Err(AnswerError::NoDecision { .. })
        ));
    }
}
