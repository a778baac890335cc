//! The start check: a run may start only when its flow is valid and its
//! input fits the flow's `input` schema. The admission webhook asks it of
//! a Run being created, the controller again when it pins a run to its
//! flow (a Run made where the webhook is not installed, or a Flow changed
//! in between), so both refuse the same runs for the same reasons.

use serde_json::Value;

use crate::api::{FlowSpec, StepProblem};

use super::{InputProblem, check_input, validate};

/// Why a run of a flow cannot start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartProblem {
    /// The flow has problems (every one, in document order).
    Invalid(Vec<StepProblem>),
    /// The input does not fit the flow's schema (every way it does not).
    Input(Vec<InputProblem>),
}

impl StartProblem {
    /// The problems on one line, `; ` between them: the one way a list of
    /// problems becomes text, so a caller only adds its own sentence.
    pub fn list(&self) -> String {
        match self {
            StartProblem::Invalid(problems) => one_line(problems),
            StartProblem::Input(problems) => one_line(problems),
        }
    }
}

/// Problems on one line, `; ` between them (kubectl and a run's status show
/// one line), each as its `Display` writes it.
pub fn one_line<P: std::fmt::Display>(problems: &[P]) -> String {
    let lines: Vec<String> = problems.iter().map(ToString::to_string).collect();
    lines.join("; ")
}

/// Checks that a run of `spec` with `input` may start: the flow is valid
/// ([`validate`]), then the input fits ([`input_fits`]).
pub fn check_start(spec: &FlowSpec, input: Option<&Value>) -> Result<(), StartProblem> {
    let problems = validate(spec);
    if !problems.is_empty() {
        return Err(StartProblem::Invalid(problems));
    }
    input_fits(spec, input)
}

/// The second half of [`check_start`], for a flow already known valid
/// (compiling a flow validates it first): `input` fits the flow's schema.
/// A run without input is checked as `{}`; a flow without a schema takes
/// any input.
pub fn input_fits(spec: &FlowSpec, input: Option<&Value>) -> Result<(), StartProblem> {
    let Some(schema) = &spec.input else {
        return Ok(());
    };
    let empty = Value::Object(Default::default());
    let problems = check_input(schema, input.unwrap_or(&empty));
    if problems.is_empty() {
        Ok(())
    } else {
        Err(StartProblem::Input(problems))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(json: Value) -> FlowSpec {
        serde_json::from_value(json).expect("flow")
    }

    #[test]
    fn a_valid_flow_starts_with_input_that_fits_and_not_otherwise() {
        let flow = spec(json!({
            "input": {"type": "object", "required": ["brief"], "properties": {"brief": {"type": "string"}}},
            "steps": [{"key": "a", "agent": {"prompt": "x"}}]
        }));
        assert_eq!(check_start(&flow, Some(&json!({"brief": "hi"}))), Ok(()));
        let Err(problem) = check_start(&flow, Some(&json!({"brief": 3}))) else {
            panic!("the input does not fit");
        };
        assert!(matches!(problem, StartProblem::Input(_)));
        assert!(
            problem
                .list()
                .starts_with("input.brief: expected string, got"),
            "{}",
            problem.list()
        );
        // No input is checked as `{}`: `brief` is missing.
        assert!(matches!(
            check_start(&flow, None),
            Err(StartProblem::Input(_))
        ));
    }

    #[test]
    fn an_invalid_flow_never_starts_and_its_problems_are_on_one_line() {
        let flow = spec(json!({"steps": [
            {"key": "b", "agent": {"prompt": "y"}, "after": ["c"]},
            {"key": "c", "agent": {"prompt": "z"}, "after": ["b"]},
        ]}));
        let Err(problem) = check_start(&flow, None) else {
            panic!("not valid");
        };
        let StartProblem::Invalid(problems) = &problem else {
            panic!("{problem:?}");
        };
        assert!(!problems.is_empty());
        assert_eq!(problem.list(), one_line(problems));
        assert!(!problem.list().contains('\n'));
    }

    #[test]
    fn a_flow_without_a_schema_takes_any_input() {
        let flow = spec(json!({"steps": [{"key": "a", "agent": {"prompt": "x"}}]}));
        assert_eq!(check_start(&flow, Some(&json!([1, 2]))), Ok(()));
        assert_eq!(one_line(&["a", "b"]), "a; b");
    }
}
