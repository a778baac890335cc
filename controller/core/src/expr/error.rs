//! The two ways an expression can fail: when the flow is saved, and while it runs.

use thiserror::Error;

/// An expression that cannot be read, found when the flow is saved.
///
/// The validator prints `message` and `position` in its own line format
/// (`FILE: flow NAME: step KEY: MESSAGE (character N)`), so both are public
/// fields rather than only a rendered string.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{message} (character {position})")]
pub struct SyntaxError {
    /// 1-based index, counted in characters, of the character where reading
    /// stopped. One past the last character means "the expression ended too soon".
    pub position: usize,
    /// What went wrong, written for the person who typed the flow.
    pub message: String,
}

impl SyntaxError {
    pub(crate) fn new(position: usize, message: impl Into<String>) -> Self {
        SyntaxError {
            position,
            message: message.into(),
        }
    }
}

/// An expression that was well formed but could not be answered with the data
/// of this run (ordering `null`, `len(null)`, …).
///
/// The step that owns the expression fails with [`EvalError::code`]; the
/// problem is never quietly treated as `false`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{message} in \"{expression}\"")]
pub struct EvalError {
    /// The source text of the expression that failed, so the person reading
    /// the run can find it in the flow.
    pub expression: String,
    /// What went wrong with the values at hand.
    pub message: String,
}

impl EvalError {
    /// The error code a step fails with when one of its expressions cannot be
    /// answered.
    pub const CODE: &'static str = "workflow.expression_error";

    /// The error code recorded on the failed step (`workflow.expression_error`).
    pub fn code(&self) -> &'static str {
        Self::CODE
    }
}

/// A value template string that is not a valid reference, found when the flow
/// is saved.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{path}: {message} (character {position})")]
pub struct ValueError {
    /// Where the string sits in the JSON value, e.g. `input.brief` or
    /// `input.sources[0]`, so the person can find it in the YAML.
    pub path: String,
    /// 1-based character index inside that string where reading stopped.
    pub position: usize,
    /// What went wrong.
    pub message: String,
}
