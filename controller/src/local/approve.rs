//! People in a local run: decisions given on the command line
//! (`--decide review=changes:Cut the intro.`), or asked at the terminal.
//! One person answers here, so a step that needs several approvers
//! (`approvals: 2`) takes the one answer as theirs.

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, IsTerminal, Write};

use serde_json::Value;

use coxswain_core::api::ApprovalMode;
use coxswain_core::engine::{ApprovalRequest, Decision};
use coxswain_core::flow::AnswerError;

/// Why no answer could be had from the command line or the terminal. Each
/// message names the step or the `--decide` value at fault.
#[derive(Debug, thiserror::Error)]
pub enum ApproveError {
    /// A `--decide` value without `=`.
    #[error("--decide {0}: write STEP=DECISION or STEP=DECISION:FEEDBACK")]
    NoStep(String),
    /// The terminal could not be read.
    #[error("{0}")]
    Terminal(#[from] std::io::Error),
    /// The terminal's input ended before an answer came.
    #[error("step `{0}` needs a person, but the input ended")]
    InputEnded(String),
    /// No `--decide` value for the step, and no terminal to ask at.
    #[error("step `{step}` needs a person: pass --decide {step}={example}")]
    NoOneToAsk {
        /// The approval step.
        step: String,
        /// An answer that would do (its first decision).
        example: String,
    },
    /// An answer the step does not offer or accept.
    #[error(transparent)]
    DoesNotFit(#[from] AnswerError),
    /// An entry that is not JSON.
    #[error("the entry for step `{step}` is not JSON: {source}")]
    NotJson {
        /// The approval step.
        step: String,
        /// Where the JSON went wrong.
        source: serde_json::Error,
    },
    /// A both-mode answer without the entry after the decision.
    #[error(
        "step `{step}` takes a decision and an entry: write DECISION:{{\"field\": …}}, optionally followed by feedback"
    )]
    NoEntry {
        /// The approval step.
        step: String,
    },
}

/// Answers approvals.
pub trait Approver: Send {
    /// The person's answer, or why there is none.
    fn decide(&mut self, request: &ApprovalRequest) -> Result<Decision, ApproveError>;
}

/// `--decide STEP=DECISION[:FEEDBACK]` values, used in order on later passes,
/// falling back to a prompt on a terminal.
#[derive(Debug, Default)]
pub struct CommandLineApprover {
    queued: BTreeMap<String, VecDeque<String>>,
    interactive: bool,
}

impl CommandLineApprover {
    /// Reads the `--decide` values; refuses one without `=`.
    pub fn new(decisions: &[String]) -> Result<Self, ApproveError> {
        let mut queued: BTreeMap<String, VecDeque<String>> = BTreeMap::new();
        for d in decisions {
            let (step, answer) = d
                .split_once('=')
                .ok_or_else(|| ApproveError::NoStep(d.clone()))?;
            queued
                .entry(step.to_string())
                .or_default()
                .push_back(answer.to_string());
        }
        let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
        Ok(CommandLineApprover {
            queued,
            interactive,
        })
    }

    /// The `--decide` answers no step has taken (yet), as `(step, answer)`
    /// in step order, then the order given.
    pub fn unused(&self) -> Vec<(&str, &str)> {
        self.queued
            .iter()
            .flat_map(|(step, answers)| answers.iter().map(move |a| (step.as_str(), a.as_str())))
            .collect()
    }

    fn prompt(&self, request: &ApprovalRequest) -> Result<String, ApproveError> {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "\n── {} needs a person ──", request.step);
        if let Some(i) = &request.instructions {
            let _ = writeln!(err, "{i}");
        }
        for (key, value) in &request.show {
            let pretty = serde_json::to_string_pretty(value).unwrap_or_default();
            let _ = writeln!(err, "{key}:\n{pretty}");
        }
        match request.mode {
            ApprovalMode::Review => {
                let _ = write!(
                    err,
                    "decision ({}), optionally `:feedback`: ",
                    request.decisions.join("/")
                );
            }
            ApprovalMode::Entry => {
                let names: Vec<&str> = request.fields.iter().map(|f| f.name.as_str()).collect();
                let _ = write!(err, "JSON with {}: ", names.join(", "));
            }
            ApprovalMode::Both => {
                let names: Vec<&str> = request.fields.iter().map(|f| f.name.as_str()).collect();
                let _ = write!(
                    err,
                    "decision ({}), `:`, JSON with {}, optionally feedback after it: ",
                    request.decisions.join("/"),
                    names.join(", ")
                );
            }
        }
        let _ = err.flush();
        let mut line = String::new();
        let read = std::io::stdin().lock().read_line(&mut line)?;
        if read == 0 {
            return Err(ApproveError::InputEnded(request.step.clone()));
        }
        Ok(line.trim().to_string())
    }
}

impl Approver for CommandLineApprover {
    fn decide(&mut self, request: &ApprovalRequest) -> Result<Decision, ApproveError> {
        let answer = match self
            .queued
            .get_mut(&request.step)
            .and_then(VecDeque::pop_front)
        {
            Some(answer) => answer,
            None if self.interactive => loop {
                // At the terminal, an answer that does not fit is explained
                // and asked again.
                let answer = self.prompt(request)?;
                match parse_answer(request, &answer) {
                    Ok(decision) => return Ok(decision),
                    Err(message) => eprintln!("{message}"),
                }
            },
            None => {
                return Err(ApproveError::NoOneToAsk {
                    step: request.step.clone(),
                    example: request
                        .decisions
                        .first()
                        .map_or("{\"field\": …}", String::as_str)
                        .to_string(),
                });
            }
        };
        parse_answer(request, &answer)
    }
}

/// Reads one answer: `decision[:feedback]` for a review, JSON for an entry,
/// `decision:JSON[ feedback]` for both; refuses one that does not fit the
/// step (the engine's own check).
pub fn parse_answer(request: &ApprovalRequest, answer: &str) -> Result<Decision, ApproveError> {
    let decided_by = Some(std::env::var("USER").unwrap_or_else(|_| "local".into()));
    let (decision, feedback, response) = match request.mode {
        ApprovalMode::Review => {
            let (decision, feedback) = match answer.split_once(':') {
                Some((d, f)) => (d.trim(), Some(f.trim().to_string())),
                None => (answer.trim(), None),
            };
            (Some(decision.to_string()), feedback, None)
        }
        ApprovalMode::Entry => (None, None, Some(entry_json(&request.step, answer)?)),
        ApprovalMode::Both => {
            let (decision, rest) = answer
                .split_once(':')
                .ok_or_else(|| ApproveError::NoEntry {
                    step: request.step.clone(),
                })?;
            let rest = rest.trim_start();
            if !rest.starts_with('{') {
                return Err(ApproveError::NoEntry {
                    step: request.step.clone(),
                });
            }
            // The entry is the JSON object right after the decision;
            // whatever follows it is the feedback.
            let mut values = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
            let response = match values.next() {
                Some(Ok(value)) => value,
                Some(Err(source)) => {
                    return Err(ApproveError::NotJson {
                        step: request.step.clone(),
                        source,
                    });
                }
                None => {
                    return Err(ApproveError::NoEntry {
                        step: request.step.clone(),
                    });
                }
            };
            let feedback = rest[values.byte_offset()..].trim();
            (
                Some(decision.trim().to_string()),
                (!feedback.is_empty()).then(|| feedback.to_string()),
                Some(response),
            )
        }
    };
    coxswain_core::flow::check_answer_to(request, decision.as_deref(), response.as_ref())?;
    Ok(Decision {
        decision,
        feedback,
        response,
        decided_by,
        ballots: Vec::new(),
    })
}

/// An entry's JSON, or why it is not JSON.
fn entry_json(step: &str, answer: &str) -> Result<Value, ApproveError> {
    serde_json::from_str(answer).map_err(|source| ApproveError::NotJson {
        step: step.to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry_request() -> ApprovalRequest {
        ApprovalRequest {
            step: "form".into(),
            attempt: 1,
            mode: ApprovalMode::Entry,
            show: BTreeMap::new(),
            decisions: Vec::new(),
            fields: Vec::new(),
            approvers: None,
            instructions: None,
            allow_self_approval: false,
            approvals: 1,
            sends_back: Vec::new(),
            lookups: Vec::new(),
            data: Default::default(),
        }
    }

    fn both_request() -> ApprovalRequest {
        ApprovalRequest {
            step: "triage".into(),
            mode: ApprovalMode::Both,
            decisions: vec!["accept".into(), "changes".into()],
            fields: serde_json::from_str(r#"[{"name": "owner", "type": "string"}]"#)
                .expect("fields"),
            ..entry_request()
        }
    }

    #[test]
    fn a_both_answer_is_the_decision_the_entry_and_feedback() {
        let d = parse_answer(
            &both_request(),
            r#"changes:{"owner": "ana"} Pin the image."#,
        )
        .expect("fits");
        assert_eq!(d.decision.as_deref(), Some("changes"));
        assert_eq!(d.response, Some(serde_json::json!({"owner": "ana"})));
        assert_eq!(d.feedback.as_deref(), Some("Pin the image."));
        let d = parse_answer(&both_request(), r#"accept:{"owner": "bo"}"#).expect("fits");
        assert_eq!(d.feedback, None);
        for (answer, message) in [
            ("accept", "takes a decision and an entry"),
            ("accept:looks fine", "takes a decision and an entry"),
            (
                r#"accept:{"owner": 1}"#,
                "`owner` in the entry for step `triage` must be text",
            ),
            (
                r#"maybe:{"owner": "ana"}"#,
                "`maybe` is not a decision of step `triage`",
            ),
            (r#"accept:{"owner": "#, "is not JSON"),
        ] {
            let err = parse_answer(&both_request(), answer).expect_err(answer);
            assert!(err.to_string().contains(message), "{answer}: {err}");
        }
    }

    #[test]
    fn a_decide_value_without_a_step_is_named() {
        let err = CommandLineApprover::new(&["approve".into()]).unwrap_err();
        assert!(matches!(&err, ApproveError::NoStep(given) if given == "approve"));
        assert_eq!(
            err.to_string(),
            "--decide approve: write STEP=DECISION or STEP=DECISION:FEEDBACK"
        );
    }

    #[test]
    fn an_entry_that_is_not_json_names_its_step() {
        let err = parse_answer(&entry_request(), "{oops").unwrap_err();
        assert!(matches!(&err, ApproveError::NotJson { step, .. } if step == "form"));
        assert!(
            err.to_string()
                .starts_with("the entry for step `form` is not JSON: "),
            "{err}"
        );
    }
}
