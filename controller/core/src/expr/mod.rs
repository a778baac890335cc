//! The expression language: references to run data, conditions and values.
//!
//! - [`parse`] reads a condition (`when`, `condition`, `loop.until`) once, when
//!   the flow is saved, and reports malformed text with the character where
//!   reading stopped ([`SyntaxError`]).
//! - [`Expr::eval_bool`] answers a condition against a [`Scope`](crate::scope::Scope)
//!   without copying run data; problems that only real data reveals become an
//!   [`EvalError`] with code `workflow.expression_error`.
//! - [`parse_value`] reads a JSON value whose strings may be references
//!   (`"$input.brief"`) and [`ValueTemplate::resolve`] fills them in.
//!
//! Files: `lexer` (tokens and references), `parser` (tree building, limits),
//! `ast` (the tree), `eval` (evaluation and value rules), `numbers` (what
//! numbers mean: exact integers, exact comparisons, out-of-range JSON),
//! `value` (value templates), `error` (error types).

mod ast;
mod error;
mod eval;
mod lexer;
pub mod numbers;
mod parser;
mod value;

pub use ast::{
    CompareOp, Expr, Field, Function, Literal, Node, NodeKind, Reference, Root, Segment,
};
pub use error::{EvalError, SyntaxError, ValueError};
pub use eval::Val;
pub(crate) use eval::lookup;
pub use lexer::MAX_CHARS;
pub use parser::{MAX_DEPTH, parse};
pub use value::{ValueTemplate, parse_value, parse_value_at};

#[cfg(test)]
mod tests;
