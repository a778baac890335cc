//! People in a local run: decisions given on the command line
//! (`--decide review=changes:Cut the intro.`), or asked at the terminal.

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, IsTerminal, Write};

use serde_json::Value;

use crate::api::ApprovalMode;
use crate::engine::{ApprovalRequest, Decision};
use crate::flow::{check_decision, check_entry};

/// Answers approvals.
pub trait Approver: Send {
    /// The person's answer, or why there is none.
    fn decide(&mut self, request: &ApprovalRequest) -> Result<Decision, String>;
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
    pub fn new(decisions: &[String]) -> Result<Self, String> {
        let mut queued: BTreeMap<String, VecDeque<String>> = BTreeMap::new();
        for d in decisions {
            let (step, answer) = d.split_once('=').ok_or_else(|| {
                format!("--decide {d}: write STEP=DECISION or STEP=DECISION:FEEDBACK")
            })?;
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

    fn prompt(&self, request: &ApprovalRequest) -> Result<String, String> {
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
        }
        let _ = err.flush();
        let mut line = String::new();
        let read = std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        if read == 0 {
            return Err(format!(
                "step `{}` needs a person, but the input ended",
                request.step
            ));
        }
        Ok(line.trim().to_string())
    }
}

impl Approver for CommandLineApprover {
    fn decide(&mut self, request: &ApprovalRequest) -> Result<Decision, String> {
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
                return Err(format!(
                    "step `{}` needs a person: pass --decide {}={}",
                    request.step,
                    request.step,
                    request
                        .decisions
                        .first()
                        .map_or("{\"field\": …}", String::as_str)
                ));
            }
        };
        parse_answer(request, &answer)
    }
}

/// Reads one answer: `decision[:feedback]` for a review, JSON for an entry;
/// refuses one that does not fit the step (the engine's own check).
pub fn parse_answer(request: &ApprovalRequest, answer: &str) -> Result<Decision, String> {
    let decided_by = Some(std::env::var("USER").unwrap_or_else(|_| "local".into()));
    match request.mode {
        ApprovalMode::Review => {
            let (decision, feedback) = match answer.split_once(':') {
                Some((d, f)) => (d.trim(), Some(f.trim().to_string())),
                None => (answer.trim(), None),
            };
            check_decision(&request.step, &request.decisions, Some(decision))
                .map_err(|e| e.to_string())?;
            Ok(Decision {
                decision: Some(decision.to_string()),
                feedback,
                response: None,
                decided_by,
            })
        }
        ApprovalMode::Entry => {
            let response: Value = serde_json::from_str(answer)
                .map_err(|e| format!("the entry for step `{}` is not JSON: {e}", request.step))?;
            check_entry(&request.step, &request.fields, &response).map_err(|e| e.to_string())?;
            Ok(Decision {
                decision: None,
                feedback: None,
                response: Some(response),
                decided_by,
            })
        }
    }
}
