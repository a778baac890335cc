//! Evaluation of a parsed expression against the data of a run.
//!
//! Conditions are evaluated on every scheduling decision, so evaluation never
//! copies run data: references yield borrowed [`serde_json::Value`]s wrapped in
//! the small [`Val`] enum, and a condition such as
//! `$steps.review.output.score >= 0.8 and $loop.iteration < 3` runs without a
//! single heap allocation. Only the error path allocates.

use std::cmp::Ordering;

use serde_json::{Map, Number, Value};

use super::ast::{CompareOp, Expr, Function, Literal, Node, NodeKind, Reference, Root, Segment};
use super::error::EvalError;
use super::numbers::Num;
use crate::scope::Scope;

/// A value during evaluation, borrowed from the run data or the expression.
///
/// Numbers keep their integer form when they have one, so large whole numbers
/// compare exactly and come back out as integers.
#[derive(Debug, Clone, Copy)]
pub enum Val<'a> {
    /// `null`, also what a missing path reads as.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A whole number that fits in `i64`.
    Int(i64),
    /// A whole number above `i64::MAX`.
    UInt(u64),
    /// Any other number.
    Float(f64),
    /// Text.
    Str(&'a str),
    /// A list from the run data.
    List(&'a [Value]),
    /// An object from the run data.
    Object(&'a Map<String, Value>),
}

impl<'a> Val<'a> {
    /// Views a JSON value without copying it.
    pub fn from_json(v: &'a Value) -> Val<'a> {
        match v {
            Value::Null => Val::Null,
            Value::Bool(b) => Val::Bool(*b),
            Value::Number(n) => from_number(n),
            Value::String(s) => Val::Str(s),
            Value::Array(a) => Val::List(a),
            Value::Object(o) => Val::Object(o),
        }
    }

    fn from_literal(l: &'a Literal) -> Val<'a> {
        match l {
            Literal::Null => Val::Null,
            Literal::Bool(b) => Val::Bool(*b),
            Literal::Int(i) => Val::Int(*i),
            Literal::UInt(u) => Val::UInt(*u),
            Literal::Float(f) => Val::Float(*f),
            Literal::Str(s) => Val::Str(s),
        }
    }

    /// Whether a value on its own counts as true: `false`, `null`, `0`, empty
    /// text, an empty list and an empty object are false; all else is true.
    pub fn is_truthy(&self) -> bool {
        match *self {
            Val::Null => false,
            Val::Bool(b) => b,
            Val::Int(i) => i != 0,
            Val::UInt(u) => u != 0,
            Val::Float(f) => f != 0.0,
            Val::Str(s) => !s.is_empty(),
            Val::List(l) => !l.is_empty(),
            Val::Object(o) => !o.is_empty(),
        }
    }

    /// Copies the value out as JSON (for the command line and for results
    /// that outlive the run data).
    pub fn to_json(&self) -> Value {
        match *self {
            Val::Null => Value::Null,
            Val::Bool(b) => Value::Bool(b),
            Val::Int(i) => Value::from(i),
            Val::UInt(u) => Value::from(u),
            Val::Float(f) => Number::from_f64(f).map_or(Value::Null, Value::Number),
            Val::Str(s) => Value::String(s.to_string()),
            Val::List(l) => Value::Array(l.to_vec()),
            Val::Object(o) => Value::Object(o.clone()),
        }
    }

    /// The type name used in error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Val::Null => "null",
            Val::Bool(_) => "true/false",
            Val::Int(_) | Val::UInt(_) | Val::Float(_) => "number",
            Val::Str(_) => "text",
            Val::List(_) => "list",
            Val::Object(_) => "object",
        }
    }

    /// Exact equality: same type and value; numbers compare by value,
    /// exactly (`1 == 1.0`, but `9007199254740993 != 9007199254740992.0`);
    /// lists and objects compare everything inside.
    pub fn equals(&self, other: &Val<'_>) -> bool {
        match (*self, *other) {
            (Val::Null, Val::Null) => true,
            (Val::Bool(a), Val::Bool(b)) => a == b,
            (Val::Str(a), Val::Str(b)) => a == b,
            (Val::List(a), Val::List(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .zip(b)
                        .all(|(x, y)| Val::from_json(x).equals(&Val::from_json(y)))
            }
            (Val::Object(a), Val::Object(b)) => {
                a.len() == b.len()
                    && a.iter().all(|(k, x)| {
                        b.get(k)
                            .is_some_and(|y| Val::from_json(x).equals(&Val::from_json(y)))
                    })
            }
            (a, b) => match (a.number(), b.number()) {
                (Some(x), Some(y)) => x.compare(y) == Some(Ordering::Equal),
                _ => false,
            },
        }
    }

    fn number(&self) -> Option<Num> {
        match *self {
            Val::Int(i) => Some(Num::Int(i128::from(i))),
            Val::UInt(u) => Some(Num::Int(i128::from(u))),
            Val::Float(f) => Some(Num::Float(f)),
            _ => None,
        }
    }
}

fn from_number(n: &Number) -> Val<'_> {
    if let Some(i) = n.as_i64() {
        Val::Int(i)
    } else if let Some(u) = n.as_u64() {
        Val::UInt(u)
    } else {
        Val::Float(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// What went wrong, kept small and allocation-free until it is turned into an
/// [`EvalError`] with the expression's text.
#[derive(Debug, Clone, Copy)]
enum Fault {
    Order {
        op: CompareOp,
        left: &'static str,
        right: &'static str,
    },
    Arg {
        func: Function,
        got: &'static str,
    },
    Needle {
        func: Function,
        got: &'static str,
    },
}

impl Fault {
    fn message(self) -> String {
        match self {
            Fault::Order { op, left, right } => format!(
                "cannot order {left} and {right} with `{}`: only two numbers or two texts have an order",
                op.as_str()
            ),
            Fault::Arg {
                func: Function::Len,
                got,
            } => format!("`len` needs text, a list or an object, not {got}"),
            Fault::Arg {
                func: Function::Contains,
                got,
            } => format!("`contains` needs text or a list as its first argument, not {got}"),
            Fault::Arg { func, got } => {
                format!(
                    "`{}` needs text as its first argument, not {got}",
                    func.name()
                )
            }
            Fault::Needle { func, got } => {
                format!(
                    "`{}` on text needs text to look for, not {got}",
                    func.name()
                )
            }
        }
    }
}

/// Finds what a reference points to, or `None` when the path leads nowhere.
pub(crate) fn lookup<'s, S: Scope + ?Sized>(r: &Reference, scope: &'s S) -> Option<&'s Value> {
    let mut v = match &r.root {
        Root::Input => scope.input(),
        Root::Step { key } => scope.step(key),
        Root::Previous => scope.root("previous"),
        Root::Loop => scope.root("loop"),
        Root::Item => scope.root("item"),
        Root::Index => scope.root("index"),
        Root::Run => scope.root("run"),
        Root::Record => scope.root("record"),
    }?;
    if let Some(f) = r.field {
        v = v.as_object()?.get(f.as_str())?;
    }
    for seg in &r.path {
        v = match seg {
            Segment::Key(k) => v.as_object()?.get(k.as_str())?,
            Segment::Index(i) => {
                let list = v.as_array()?;
                let at = if *i < 0 {
                    list.len()
                        .checked_sub(usize::try_from(i.unsigned_abs()).ok()?)?
                } else {
                    usize::try_from(*i).ok()?
                };
                list.get(at)?
            }
        };
    }
    Some(v)
}

impl Expr {
    /// Evaluates to a borrowed value: the allocation-free form the others use.
    pub fn eval_borrowed<'a, S: Scope + ?Sized>(
        &'a self,
        scope: &'a S,
    ) -> Result<Val<'a>, EvalError> {
        eval(self, &self.root, scope).map_err(|f| self.error(f))
    }

    /// Evaluates and copies the result out as JSON (for `coxswain eval` and
    /// anything that keeps the result).
    pub fn eval<S: Scope + ?Sized>(&self, scope: &S) -> Result<Value, EvalError> {
        self.eval_borrowed(scope).map(|v| v.to_json())
    }

    /// Evaluates as a condition: the truth of the result. This is the hot
    /// path for `when`, `condition` and `loop.until`.
    pub fn eval_bool<S: Scope + ?Sized>(&self, scope: &S) -> Result<bool, EvalError> {
        truth(self, &self.root, scope).map_err(|f| self.error(f))
    }

    fn error(&self, fault: Fault) -> EvalError {
        EvalError {
            expression: self.source.clone(),
            message: fault.message(),
        }
    }
}

fn truth<S: Scope + ?Sized>(expr: &Expr, node: &Node, scope: &S) -> Result<bool, Fault> {
    match &node.kind {
        NodeKind::Not(inner) => Ok(!truth(expr, inner, scope)?),
        NodeKind::And(a, b) => Ok(truth(expr, a, scope)? && truth(expr, b, scope)?),
        NodeKind::Or(a, b) => Ok(truth(expr, a, scope)? || truth(expr, b, scope)?),
        NodeKind::Compare(op, a, b) => compare(*op, eval(expr, a, scope)?, eval(expr, b, scope)?),
        _ => Ok(eval(expr, node, scope)?.is_truthy()),
    }
}

fn eval<'a, S: Scope + ?Sized>(
    expr: &'a Expr,
    node: &'a Node,
    scope: &'a S,
) -> Result<Val<'a>, Fault> {
    Ok(match &node.kind {
        NodeKind::Literal(l) => Val::from_literal(l),
        NodeKind::Ref(i) => expr
            .refs
            .get(*i)
            .and_then(|r| lookup(r, scope))
            .map_or(Val::Null, Val::from_json),
        NodeKind::Not(_) | NodeKind::And(..) | NodeKind::Or(..) | NodeKind::Compare(..) => {
            Val::Bool(truth(expr, node, scope)?)
        }
        NodeKind::Call(func, args) => {
            let a = match args.first() {
                Some(n) => eval(expr, n, scope)?,
                None => Val::Null,
            };
            if *func == Function::Len {
                return len(a);
            }
            let b = match args.get(1) {
                Some(n) => eval(expr, n, scope)?,
                None => Val::Null,
            };
            Val::Bool(text_fn(*func, a, b)?)
        }
    })
}

fn compare(op: CompareOp, a: Val<'_>, b: Val<'_>) -> Result<bool, Fault> {
    let ord = match op {
        CompareOp::Eq => return Ok(a.equals(&b)),
        CompareOp::Ne => return Ok(!a.equals(&b)),
        _ => match (a, b) {
            (Val::Str(x), Val::Str(y)) => Some(x.cmp(y)),
            _ => match (a.number(), b.number()) {
                (Some(x), Some(y)) => x.compare(y),
                _ => None,
            },
        },
    };
    let Some(ord) = ord else {
        return Err(Fault::Order {
            op,
            left: a.type_name(),
            right: b.type_name(),
        });
    };
    Ok(match op {
        CompareOp::Lt => ord.is_lt(),
        CompareOp::Le => ord.is_le(),
        CompareOp::Gt => ord.is_gt(),
        _ => ord.is_ge(),
    })
}

fn len(a: Val<'_>) -> Result<Val<'static>, Fault> {
    let n = match a {
        Val::Str(s) => s.chars().count(),
        Val::List(l) => l.len(),
        Val::Object(o) => o.len(),
        other => {
            return Err(Fault::Arg {
                func: Function::Len,
                got: other.type_name(),
            });
        }
    };
    Ok(Val::Int(i64::try_from(n).unwrap_or(i64::MAX)))
}

fn text_fn(func: Function, a: Val<'_>, b: Val<'_>) -> Result<bool, Fault> {
    let hay = match a {
        Val::Null => return Ok(false),
        Val::List(items) if func == Function::Contains => {
            return Ok(items.iter().any(|x| Val::from_json(x).equals(&b)));
        }
        Val::Str(s) => s,
        other => {
            return Err(Fault::Arg {
                func,
                got: other.type_name(),
            });
        }
    };
    let Val::Str(needle) = b else {
        return Err(Fault::Needle {
            func,
            got: b.type_name(),
        });
    };
    Ok(match func {
        Function::Contains => hay.contains(needle),
        Function::StartsWith => hay.starts_with(needle),
        _ => hay.ends_with(needle),
    })
}
