//! Whether a person's answer fits an approval step: a decision the step
//! offers, or an entry with exactly the fields it asks for, each of its
//! type (in `both` mode, the two together). One pure check for every place
//! an answer comes in: the engine, the terminal prompt, `--decide` and the
//! admission webhook. And, for a step that needs several approvers, which
//! decision their answers take ([`tally`]).

use serde_json::Value;

use crate::api::{ApprovalMode, ApprovalSpec, ApprovalStep, Field};
use crate::text::quote_list;

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
/// decision, in entry mode the response, in both mode the decision and the
/// response. Feedback is free text.
pub fn check_answer(
    step: &str,
    approval: &ApprovalStep,
    decision: Option<&str>,
    response: Option<&Value>,
) -> Result<(), AnswerError> {
    check_answer_in(
        step,
        approval.mode,
        &approval.decisions,
        &approval.fields,
        decision,
        response,
    )
}

/// What an answer is checked against, wherever it is kept: an Approval
/// object's copy of the step, or the engine's request to a person
/// (`engine::ApprovalRequest`).
pub trait Asked {
    /// The step's key, mode, decisions and fields.
    fn asked(&self) -> (&str, ApprovalMode, &[String], &[Field]);
}

impl Asked for ApprovalSpec {
    fn asked(&self) -> (&str, ApprovalMode, &[String], &[Field]) {
        (&self.step, self.mode, &self.decisions, &self.fields)
    }
}

/// [`check_answer`] against what a person was asked, as admission, the
/// controller and the local prompt check an answer.
pub fn check_answer_to(
    request: &impl Asked,
    decision: Option<&str>,
    response: Option<&Value>,
) -> Result<(), AnswerError> {
    let (step, mode, decisions, fields) = request.asked();
    check_answer_in(step, mode, decisions, fields, decision, response)
}

/// [`check_answer`] with the step's parts given one by one, as an
/// Approval object or a request carries them.
pub fn check_answer_in(
    step: &str,
    mode: ApprovalMode,
    decisions: &[String],
    fields: &[Field],
    decision: Option<&str>,
    response: Option<&Value>,
) -> Result<(), AnswerError> {
    if mode.decides() {
        check_decision(step, decisions, decision)?;
    }
    if mode.enters() {
        check_entry(step, fields, response.unwrap_or(&Value::Null))?;
    }
    Ok(())
}

/// One person's answer to a step that needs several approvers, already
/// checked to fit the step and to come from an approver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vote<'a> {
    /// Who answered (the stamped user name).
    pub by: &'a str,
    /// The decision they picked.
    pub decision: &'a str,
}

/// The decision `votes` (in the order written) take on a step that needs
/// `required` different people to agree, with the positions of the votes
/// that took it; `None` while they take none. A decision in `sends_back`
/// (one that sends work back) is taken on the first vote for it; any
/// other once `required` different people picked it. A person counts once,
/// with their first vote.
pub fn tally(
    required: u32,
    sends_back: &[String],
    votes: &[Vote<'_>],
) -> Option<(String, Vec<usize>)> {
    let mut counted: Vec<(&str, Vec<usize>)> = Vec::new();
    for (i, vote) in votes.iter().enumerate() {
        if votes[..i].iter().any(|v| v.by == vote.by) {
            continue;
        }
        if sends_back.iter().any(|d| d == vote.decision) {
            return Some((vote.decision.to_string(), vec![i]));
        }
        let position = match counted.iter().position(|(d, _)| *d == vote.decision) {
            Some(p) => p,
            None => {
                counted.push((vote.decision, Vec::new()));
                counted.len() - 1
            }
        };
        let (decision, by) = &mut counted[position];
        by.push(i);
        if by.len() as u32 >= required.max(1) {
            return Some((decision.to_string(), by.clone()));
        }
    }
    None
}

/// How `votes` stand against `required`, for people to read: each decision
/// picked with how many picked it, such as `approve 1 of 2, reject 1 of 2`;
/// `no answer yet of 2` when there is none.
pub fn describe_tally(required: u32, votes: &[Vote<'_>]) -> String {
    let mut counted: Vec<(&str, u32)> = Vec::new();
    for (i, vote) in votes.iter().enumerate() {
        if votes[..i].iter().any(|v| v.by == vote.by) {
            continue;
        }
        match counted.iter_mut().find(|(d, _)| *d == vote.decision) {
            Some((_, n)) => *n += 1,
            None => counted.push((vote.decision, 1)),
        }
    }
    if counted.is_empty() {
        return format!("no answer yet of {required}");
    }
    let parts: Vec<String> = counted
        .iter()
        .map(|(d, n)| format!("{d} {n} of {required}"))
        .collect();
    parts.join(", ")
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
    let names = || quote_list(fields.iter().map(|f| &f.name));
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
    fn both_mode_needs_the_decision_and_the_entry() {
        let decisions = vec!["accept".to_string(), "changes".to_string()];
        let check = |d: Option<&str>, r: Option<&Value>| {
            check_answer_in("triage", ApprovalMode::Both, &decisions, &fields(), d, r)
        };
        let entry = json!({"owner": "ana", "count": 1});
        assert_eq!(check(Some("accept"), Some(&entry)), Ok(()));
        assert!(matches!(
            check(None, Some(&entry)),
            Err(AnswerError::NoDecision { .. })
        ));
        assert!(matches!(
            check(Some("accept"), None),
            Err(AnswerError::NotAnObject { .. })
        ));
        assert!(matches!(
            check(Some("maybe"), Some(&entry)),
            Err(AnswerError::NotADecision { .. })
        ));
        // Review mode ignores a response; entry mode a decision.
        assert_eq!(
            check_answer_in(
                "r",
                ApprovalMode::Review,
                &decisions,
                &[],
                Some("accept"),
                None
            ),
            Ok(())
        );
        assert_eq!(
            check_answer_in("e", ApprovalMode::Entry, &[], &fields(), None, Some(&entry)),
            Ok(())
        );
    }

    fn vote<'a>(by: &'a str, decision: &'a str) -> Vote<'a> {
        Vote { by, decision }
    }

    #[test]
    fn a_decision_is_taken_when_enough_different_people_agree() {
        let back = vec!["changes".to_string()];
        // One approve of two: nothing yet.
        assert_eq!(tally(2, &back, &[vote("ana", "approve")]), None);
        // The same person twice still counts once.
        assert_eq!(
            tally(2, &back, &[vote("ana", "approve"), vote("ana", "approve")]),
            None
        );
        // Two people: taken, with both.
        assert_eq!(
            tally(2, &back, &[vote("ana", "approve"), vote("bob", "approve")]),
            Some(("approve".to_string(), vec![0, 1]))
        );
        // Disagreeing people: the first decision to reach two.
        let votes = [
            vote("ana", "approve"),
            vote("bob", "reject"),
            vote("cy", "reject"),
        ];
        assert_eq!(
            tally(2, &back, &votes),
            Some(("reject".to_string(), vec![1, 2]))
        );
        assert_eq!(
            describe_tally(3, &votes[..2]),
            "approve 1 of 3, reject 1 of 3"
        );
        assert_eq!(describe_tally(2, &[]), "no answer yet of 2");
        // One send-back is enough, even after an approve.
        assert_eq!(
            tally(2, &back, &[vote("ana", "approve"), vote("bob", "changes")]),
            Some(("changes".to_string(), vec![1]))
        );
        // A person's second vote does not count, a send-back neither.
        assert_eq!(
            tally(2, &back, &[vote("ana", "approve"), vote("ana", "changes")]),
            None
        );
        // One approval needed: the first vote decides.
        assert_eq!(
            tally(1, &back, &[vote("ana", "approve")]),
            Some(("approve".to_string(), vec![0]))
        );
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
