//! A `where` condition compiled to PostgreSQL with the language's exact rules.
//!
//! [`compile`] walks a parsed condition ([`Expr`]) in which one root stands
//! for the record (`$record`; tests use `$item` until the language has it)
//! and every other reference is already bound to a JSON value
//! ([`Bindings`], made by [`bind`]). It answers with three SQL predicates
//! over the table of [`crate::record::SCHEMA`]:
//!
//! - `keep`: the evaluator surely answers `true` for the record;
//! - `drop`: it surely answers `false`;
//! - `fail`: it surely fails (`workflow.expression_error`).
//!
//! A record none of the three selects is *undecided*: SQL cannot tell, and
//! the caller evaluates it in memory ([`Filter::undecided`]). The three never
//! overlap and never disagree with the evaluator; [`Filter::exact`] says
//! that no record can be undecided, so `keep` alone is the answer and `fail`
//! alone says whether the lookup fails.
//!
//! # Why three predicates
//!
//! The evaluator fails rather than answer `false` when it cannot order two
//! values (`"high" >= 2`, `null < 3`) or a function gets the wrong type, and
//! `and`/`or` read their right side only when the left does not decide. A
//! single SQL boolean would turn those failures into a silent `false`. With
//! `fail` kept apart, `not`, `and` and `or` compose exactly:
//!
//! - `not a`: keep = drop(a), drop = keep(a), fail = fail(a);
//! - `a and b`: keep = keep(a) ∧ keep(b); fail = fail(a) ∨ (keep(a) ∧ fail(b));
//!   drop = drop(a) ∨ (keep(a) ∧ drop(b)), or drop(a) ∨ drop(b) when `a`
//!   can never fail;
//! - `a or b`: drop = drop(a) ∧ drop(b); fail = fail(a) ∨ (drop(a) ∧ fail(b));
//!   keep = keep(a) ∨ (drop(a) ∧ keep(b)), or keep(a) ∨ keep(b) when `a`
//!   can never fail.
//!
//! A part SQL cannot express (see [`NotCompiled`]) selects nothing in all
//! three, so by the rules above an `and` whose left side compiles still
//! narrows the candidates (`drop(a)` drops), and so does one whose right side
//! compiles when the left can never fail (an `==`, `!=`, a path, `not`/`and`/
//! `or` of those). When the left side *can* fail, a record the right side
//! drops may still fail the lookup, so it stays a candidate: narrowing never
//! hides a failure or drops a record the evaluator keeps.
//!
//! # The rules mapped
//!
//! - A missing path and JSON `null` are the same `null`.
//! - `==`/`!=`: same type and value, never a failure; numbers by exact value
//!   (`1 == 1.0`); lists and objects everything inside.
//! - `<`, `<=`, `>`, `>=`: two texts by their bytes (`COLLATE "C"`, whatever
//!   the database's collation), two numbers by value; anything else fails.
//! - `contains(a, b)`: `false` when `a` is null; a list holds an item equal
//!   to `b`; a text holds the text `b` (else a failure); anything else fails.
//!   `startswith`/`endswith` the same for texts only. `len(a)`: characters,
//!   items or keys, failing on anything else. A value alone is its truth.
//! - Numbers: the evaluator reads a record's numbers as they come back from
//!   `jsonb` (a decimal) through serde_json, which keeps a whole number of 64
//!   bits exact and turns anything else into a float — not always the float
//!   nearest the decimal. SQL sorts each stored number into one of three
//!   kinds: a whole number of 64 bits (compared exactly), a decimal of at
//!   most 16 digits and 22 places (whose float serde_json computes exactly
//!   as PostgreSQL's `float8` cast does: compared as `float8` against a float,
//!   exactly against a whole number), and any other (serde_json's float is
//!   within 1e-15 of it: decided only when the two sides are more than 1e-14
//!   of the larger apart and between 1e-307 and 1e308; else undecided).
//!   Constants are exact: whole numbers as such, floats as `float8`. Two
//!   numbers from the record compare the same way.
//! - Lists and objects: equal to a constant holding no number exactly as
//!   `jsonb` equality says; holding numbers, or both from the record, they
//!   are decided only when their types differ.
//! - Paths: `$record.value.k[0]` is `value -> 'k'` then the strict JSON path
//!   `$[0]` (a key never matches in a list, a position only in a list —
//!   `'true'::jsonb -> 0` would answer `true` — and negative positions count
//!   from the end); `key`, `run`, `step` are the text columns, `version` the number,
//!   `savedAt` the text [`crate::record::SAVED_AT_TEXT`]; any other field, or
//!   a path into a text or number, is `null`.
//!
//! # Values
//!
//! Every value — a literal in the condition, a bound reference — is a bind
//! parameter (`$n::text`, `$n::int8`, `$n::float8`, `$n::jsonb`), never text
//! in the query. Path keys and list positions are part of the condition's
//! text (validated when the flow is saved) and are written as quoted SQL
//! literals, so an expression index or the planner can match them.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::LazyLock;

use coxswain_core::expr::{
    CompareOp, EvalError, Expr, Function, Literal, Node, NodeKind, Reference, Root, Segment,
    SyntaxError, Val, parse,
};
use coxswain_core::scope::Scope;
use serde_json::{Number, Value, json};
use tokio_postgres::types::{ToSql, Type};

use crate::number::{Exact, exact};
use crate::record::SAVED_AT_TEXT;

/// The values of the references that do not read the record, by their text
/// as written (`$steps.fetch.output.component`): the run's data is bound
/// before the query, as the evaluator would read it (missing data is `null`).
pub type Bindings = BTreeMap<String, Value>;

/// The longest predicate text the compiler writes; past it the part is left
/// to memory. `and`/`or` repeat their sides across the three predicates, so a
/// deep mix of them could otherwise grow without bound.
pub const MAX_SQL_BYTES: usize = 256 * 1024;

/// Items of a constant list `contains` compares one by one in SQL; a longer
/// list is left to memory.
pub const MAX_LIST_ITEMS: usize = 1000;

/// A bind parameter of the compiled SQL, numbered from `first_param` in the
/// order of [`Filter::params`].
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    /// `$n::text`: a text, or an exact decimal read as `($n::text)::numeric`.
    Text(String),
    /// `$n::int8`.
    Int(i64),
    /// `$n::float8`: a float constant, compared exactly.
    Float(f64),
    /// `$n::jsonb`.
    Json(Value),
}

impl Param {
    /// The value as tokio-postgres binds it.
    pub fn as_sql(&self) -> &(dyn ToSql + Sync) {
        match self {
            Param::Text(s) => s,
            Param::Int(i) => i,
            Param::Float(f) => f,
            Param::Json(v) => v,
        }
    }

    /// The parameter's type, declared when the query is sent
    /// ([`Filter::typed_params`]).
    pub fn sql_type(&self) -> Type {
        match self {
            Param::Text(_) => Type::TEXT,
            Param::Int(_) => Type::INT8,
            Param::Float(_) => Type::FLOAT8,
            Param::Json(_) => Type::JSONB,
        }
    }

    fn cast(&self) -> &'static str {
        match self {
            Param::Text(_) => "text",
            Param::Int(_) => "int8",
            Param::Float(_) => "float8",
            Param::Json(_) => "jsonb",
        }
    }
}

/// A part of the condition left to the in-memory evaluator, and why, so the
/// caller can say what a lookup costs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotCompiled {
    /// 1-based character index where the part starts in the condition.
    pub position: usize,
    /// Why SQL cannot answer it exactly.
    pub reason: String,
}

/// A condition compiled to SQL: see the module documentation for what each
/// predicate promises.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    /// True for the records the evaluator surely keeps. Index-friendly
    /// where it can be (`key = $2::text`, `(value -> 'a') = $3::jsonb`).
    pub keep: String,
    /// True for the records the evaluator surely drops.
    pub drop: String,
    /// True for the records on which the evaluator surely fails.
    pub fail: String,
    /// The bind parameters, `$first_param` onwards.
    pub params: Vec<Param>,
    /// No record can be undecided: `keep` is the whole answer and `fail` the
    /// whole list of failures.
    pub exact: bool,
    /// Parts left to memory, with their reasons (empty when every part
    /// compiled; a compiled part may still leave some records undecided).
    pub not_compiled: Vec<NotCompiled>,
    /// True for every record the evaluator keeps or fails on (and maybe
    /// others): built from the index-friendly parts of `and`/`or` (an
    /// equality's `value @> …`, `key = …`), `TRUE` when no part narrows. A
    /// lookup that must read the failing or undecided records adds it to
    /// that query, so a selective equality beside a part SQL cannot decide
    /// still reads through an index.
    pub narrow: String,
}

impl Filter {
    /// The records the evaluator may keep or fail on: all but those surely
    /// dropped. A lookup that is not [`Filter::exact`] reads these and
    /// evaluates the ones `keep` does not select.
    pub fn candidates(&self) -> String {
        match self.drop.as_str() {
            "FALSE" => "TRUE".into(),
            "TRUE" => "FALSE".into(),
            d => format!("(NOT COALESCE({d}, FALSE))"),
        }
    }

    /// The records SQL cannot decide, to evaluate in memory (`FALSE` when
    /// [`Filter::exact`]).
    pub fn undecided(&self) -> String {
        if self.exact {
            return "FALSE".into();
        }
        format!(
            "(NOT (COALESCE({}, FALSE) OR COALESCE({}, FALSE) OR COALESCE({}, FALSE)))",
            self.keep, self.drop, self.fail
        )
    }

    /// The parameters with their types, to append after the caller's own
    /// (`$1` … `$first_param - 1`) for `Client::query_typed` or
    /// `prepare_typed`. The types must be declared: one predicate may not use
    /// every parameter, and PostgreSQL cannot infer the type of one a query
    /// does not mention.
    pub fn typed_params(&self) -> Vec<(&(dyn ToSql + Sync), Type)> {
        self.params
            .iter()
            .map(|p| (p.as_sql(), p.sql_type()))
            .collect()
    }
}

/// A condition that cannot be compiled at all: the caller did not bind a
/// reference it reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// A reference that does not read the record has no value in the
    /// bindings.
    #[error("`{reference}` (character {position}) has no bound value")]
    Unbound {
        /// The reference as written.
        reference: String,
        /// Where it stands in the condition.
        position: usize,
    },
}

/// Why [`bind`] could not read a reference from the run's data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindError {
    /// The reference's text did not parse on its own (it always should).
    #[error("reading `{reference}`: {source}")]
    Syntax {
        /// The reference as written.
        reference: String,
        /// What the parser said.
        source: SyntaxError,
    },
    /// The evaluator refused to read it (it never should: a path is `null`
    /// where it leads nowhere).
    #[error("reading `{reference}`: {source}")]
    Eval {
        /// The reference as written.
        reference: String,
        /// What the evaluator said.
        source: EvalError,
    },
}

/// Binds every reference of `expr` that does not start at `record` to its
/// value in `scope`, with the evaluator's own lookup, so SQL sees exactly what
/// the in-memory evaluator would.
pub fn bind<S: Scope + ?Sized>(
    expr: &Expr,
    record: &Root,
    scope: &S,
) -> Result<Bindings, BindError> {
    let mut out = Bindings::new();
    for r in expr.references() {
        if r.root() == record || out.contains_key(r.text()) {
            continue;
        }
        let alone = parse(r.text()).map_err(|source| BindError::Syntax {
            reference: r.text().to_string(),
            source,
        })?;
        let value = alone.eval(scope).map_err(|source| BindError::Eval {
            reference: r.text().to_string(),
            source,
        })?;
        out.insert(r.text().to_string(), value);
    }
    Ok(out)
}

/// Compiles `expr`, in which references starting at `record` read the record
/// and all others are in `bindings`, into a [`Filter`] whose parameters are
/// numbered from `$first_param` (so `$1` … can be the caller's own, such as
/// the collection).
pub fn compile(
    expr: &Expr,
    record: &Root,
    bindings: &Bindings,
    first_param: usize,
) -> Result<Filter, CompileError> {
    let mut c = Compiler {
        expr,
        record,
        bindings,
        first_param,
        params: Vec::new(),
        gaps: Vec::new(),
        aliases: 0,
        seen: HashMap::new(),
    };
    let t = c.truth(expr.node())?;
    let mut narrow = c.narrow(expr.node());
    if narrow.len() > MAX_SQL_BYTES {
        narrow = P::True;
    }
    Ok(Filter {
        keep: t.yes.text(),
        drop: t.no.text(),
        fail: t.err.text(),
        params: c.params,
        exact: t.decided,
        not_compiled: c.gaps,
        narrow: narrow.text(),
    })
}

// ---------------------------------------------------------------------------
// Predicates

/// A SQL boolean in which NULL means false. `and`/`or` keep that meaning;
/// `not` adds the COALESCE that keeps it.
#[derive(Debug, Clone, PartialEq)]
enum P {
    True,
    False,
    /// Parenthesized SQL.
    Sql(String),
}

impl P {
    fn sql(s: impl std::fmt::Display) -> P {
        P::Sql(format!("({s})"))
    }

    fn text(&self) -> String {
        match self {
            P::True => "TRUE".into(),
            P::False => "FALSE".into(),
            P::Sql(s) => s.clone(),
        }
    }

    fn len(&self) -> usize {
        match self {
            P::Sql(s) => s.len(),
            _ => 5,
        }
    }

    fn and(self, o: P) -> P {
        match (self, o) {
            (P::False, _) | (_, P::False) => P::False,
            (P::True, x) | (x, P::True) => x,
            (P::Sql(a), P::Sql(b)) => P::Sql(format!("({a} AND {b})")),
        }
    }

    fn or(self, o: P) -> P {
        match (self, o) {
            (P::True, _) | (_, P::True) => P::True,
            (P::False, x) | (x, P::False) => x,
            (P::Sql(a), P::Sql(b)) => P::Sql(format!("({a} OR {b})")),
        }
    }

    /// Negation of a predicate that may be NULL (read as false).
    fn not(self) -> P {
        match self {
            P::True => P::False,
            P::False => P::True,
            P::Sql(a) => P::Sql(format!("(NOT COALESCE({a}, FALSE))")),
        }
    }

    /// Negation of a predicate known never to be NULL where it is used.
    fn not_nonnull(self) -> P {
        match self {
            P::True => P::False,
            P::False => P::True,
            P::Sql(a) => P::Sql(format!("(NOT {a})")),
        }
    }
}

/// What SQL knows of one part of the condition, per record.
#[derive(Debug, Clone)]
struct Tri {
    /// Surely `true`.
    yes: P,
    /// Surely `false`.
    no: P,
    /// Surely a failure.
    err: P,
    /// Every record is in one of the three.
    decided: bool,
    /// The part can never fail, whatever the record (known from its form).
    infallible: bool,
}

impl Tri {
    fn fixed(outcome: Result<bool, ()>) -> Tri {
        let (yes, no, err) = match outcome {
            Ok(true) => (P::True, P::False, P::False),
            Ok(false) => (P::False, P::True, P::False),
            Err(()) => (P::False, P::False, P::True),
        };
        Tri {
            infallible: outcome.is_ok(),
            yes,
            no,
            err,
            decided: true,
        }
    }

    fn unknown(infallible: bool) -> Tri {
        Tri {
            yes: P::False,
            no: P::False,
            err: P::False,
            decided: false,
            infallible,
        }
    }

    fn from_arm(a: Arm) -> Tri {
        Tri {
            yes: a.yes,
            no: a.no,
            err: a.err,
            decided: a.decided,
            infallible: a.infallible,
        }
    }

    fn not(self) -> Tri {
        Tri {
            yes: self.no,
            no: self.yes,
            ..self
        }
    }

    fn size(&self) -> usize {
        self.yes.len() + self.no.len() + self.err.len()
    }

    fn any_true(&self) -> bool {
        self.yes == P::True || self.no == P::True || self.err == P::True
    }

    fn and(a: Tri, b: Tri) -> Tri {
        let yes = a.yes.clone().and(b.yes.clone());
        let no = if a.infallible {
            a.no.clone().or(b.no)
        } else {
            a.no.clone().or(a.yes.clone().and(b.no))
        };
        let err = a.err.or(a.yes.and(b.err));
        Tri::joined(
            [yes, no, err],
            a.decided && b.decided,
            a.infallible && b.infallible,
        )
    }

    fn or(a: Tri, b: Tri) -> Tri {
        let yes = if a.infallible {
            a.yes.clone().or(b.yes)
        } else {
            a.yes.clone().or(a.no.clone().and(b.yes))
        };
        let no = a.no.clone().and(b.no);
        let err = a.err.or(a.no.and(b.err));
        Tri::joined(
            [yes, no, err],
            a.decided && b.decided,
            a.infallible && b.infallible,
        )
    }

    /// A joined answer of the given conditions, decided too when it is
    /// surely true.
    fn joined([yes, no, err]: [P; 3], decided: bool, infallible: bool) -> Tri {
        let mut t = Tri {
            yes,
            no,
            err,
            decided,
            infallible,
        };
        t.decided |= t.any_true();
        t
    }
}

/// What SQL knows for one kind of value: a [`Tri`] built piece by piece.
#[derive(Debug, Clone)]
struct Arm {
    yes: P,
    no: P,
    err: P,
    decided: bool,
    infallible: bool,
}

impl Arm {
    fn t() -> Arm {
        Arm::of(P::True, P::False, P::False)
    }
    fn f() -> Arm {
        Arm::of(P::False, P::True, P::False)
    }
    fn e() -> Arm {
        Arm {
            infallible: false,
            ..Arm::of(P::False, P::False, P::True)
        }
    }
    fn of(yes: P, no: P, err: P) -> Arm {
        Arm {
            yes,
            no,
            err,
            decided: true,
            infallible: true,
        }
    }
    /// True where `sql` is, false elsewhere; `sql` is never NULL here.
    fn cond(sql: String) -> Arm {
        let p = P::sql(sql);
        Arm::of(p.clone(), p.not_nonnull(), P::False)
    }
    /// `inner` where `guard` holds, undecided elsewhere.
    fn guard(guard: String, inner: Arm) -> Arm {
        let g = P::sql(guard);
        Arm {
            yes: g.clone().and(inner.yes),
            no: g.clone().and(inner.no),
            err: g.and(inner.err),
            decided: false,
            infallible: inner.infallible,
        }
    }
}

/// `CASE scrutinee WHEN 'v' THEN p … ELSE default END`, shortened when the
/// arms agree. The default is the most common arm.
fn case(scrutinee: &str, arms: &[(&str, P)]) -> P {
    let mut best: Option<(&P, usize)> = None;
    for (_, p) in arms {
        let n = arms.iter().filter(|(_, q)| q == p).count();
        if best.is_none_or(|(_, m)| n > m) {
            best = Some((p, n));
        }
    }
    let Some((default, n)) = best else {
        return P::False;
    };
    if n == arms.len() {
        return default.clone();
    }
    // Arms that are TRUE/FALSE against a FALSE/TRUE default read as IN.
    let others: Vec<&(&str, P)> = arms.iter().filter(|(_, p)| p != default).collect();
    if matches!(default, P::False | P::True)
        && others
            .iter()
            .all(|(_, p)| matches!(p, P::True | P::False) && p != default)
    {
        let list = others
            .iter()
            .map(|(v, _)| format!("'{v}'"))
            .collect::<Vec<_>>()
            .join(", ");
        return if *default == P::False {
            P::sql(format!("{scrutinee} IN ({list})"))
        } else {
            P::sql(format!("{scrutinee} NOT IN ({list})"))
        };
    }
    let mut s = format!("CASE {scrutinee}");
    for (v, p) in others {
        let _ = write!(s, " WHEN '{v}' THEN {}", p.text());
    }
    let _ = write!(s, " ELSE {} END", default.text());
    P::sql(s)
}

/// The outcome for each kind of JSON value a path can hold. Numbers are
/// split by how exactly the evaluator reads them back (module docs).
struct Kinds {
    null: Arm,
    boolean: Arm,
    string: Arm,
    array: Arm,
    object: Arm,
    /// A whole number of 64 bits.
    int: Arm,
    /// A decimal of at most 16 digits and 22 places.
    float: Arm,
    /// Any other number.
    other: Arm,
}

impl Kinds {
    fn all(a: Arm) -> Kinds {
        Kinds {
            null: a.clone(),
            boolean: a.clone(),
            string: a.clone(),
            array: a.clone(),
            object: a.clone(),
            int: a.clone(),
            float: a.clone(),
            other: a,
        }
    }

    fn numbers(mut self, a: Arm) -> Kinds {
        self.int = a.clone();
        self.float = a.clone();
        self.other = a;
        self
    }

    /// The three predicates over a JSON expression `x` (SQL NULL when the
    /// path is missing).
    fn render(self, x: &str) -> Tri {
        let kind = json_kind(x);
        let nkind = number_kind(x);
        let arms = [
            &self.null,
            &self.boolean,
            &self.string,
            &self.array,
            &self.object,
            &self.int,
            &self.float,
            &self.other,
        ];
        let decided = arms.iter().all(|a| a.decided);
        let infallible = arms.iter().all(|a| a.infallible);
        let pick = |f: &dyn Fn(&Arm) -> P| -> P {
            let number = case(
                &nkind,
                &[
                    ("i", f(&self.int)),
                    ("f", f(&self.float)),
                    ("u", f(&self.other)),
                ],
            );
            case(
                &kind,
                &[
                    ("null", f(&self.null)),
                    ("boolean", f(&self.boolean)),
                    ("string", f(&self.string)),
                    ("array", f(&self.array)),
                    ("object", f(&self.object)),
                    ("number", number),
                ],
            )
        };
        Tri {
            yes: pick(&|a| a.yes.clone()),
            no: pick(&|a| a.no.clone()),
            err: pick(&|a| a.err.clone()),
            decided,
            infallible,
        }
    }
}

/// The JSON type of `x`, `null` when the path is missing.
fn json_kind(x: &str) -> String {
    format!("COALESCE(jsonb_typeof({x}), 'null')")
}

/// For a number `x`: `i` (a whole number of 64 bits: serde_json reads it
/// exactly), `f` (at most 16 digits in all and 22 places: serde_json divides
/// the digits, exact in a float, by an exact power of ten, which rounds as
/// PostgreSQL's `float8` cast does) or `u` (anything else).
fn number_kind(x: &str) -> String {
    let n = format!("({x})::numeric");
    format!(
        "(CASE WHEN scale({n}) = 0 THEN \
         (CASE WHEN {n} BETWEEN -9223372036854775808 AND 18446744073709551615 THEN 'i' ELSE 'u' END) \
         WHEN scale({n}) <= 22 AND abs({n}) * power(10::numeric, scale({n})) <= 9007199254740992 THEN 'f' \
         ELSE 'u' END)"
    )
}

fn sql_op(op: CompareOp) -> &'static str {
    match op {
        CompareOp::Eq => "=",
        CompareOp::Ne => "<>",
        CompareOp::Lt => "<",
        CompareOp::Le => "<=",
        CompareOp::Gt => ">",
        CompareOp::Ge => ">=",
    }
}

/// `b op a` for `a op' b`.
fn flip(op: CompareOp) -> CompareOp {
    match op {
        CompareOp::Lt => CompareOp::Gt,
        CompareOp::Le => CompareOp::Ge,
        CompareOp::Gt => CompareOp::Lt,
        CompareOp::Ge => CompareOp::Le,
        other => other,
    }
}

/// The opposite comparison (`<` for `>=`).
fn negate(op: CompareOp) -> CompareOp {
    match op {
        CompareOp::Eq => CompareOp::Ne,
        CompareOp::Ne => CompareOp::Eq,
        CompareOp::Lt => CompareOp::Ge,
        CompareOp::Le => CompareOp::Gt,
        CompareOp::Gt => CompareOp::Le,
        CompareOp::Ge => CompareOp::Lt,
    }
}

fn is_order(op: CompareOp) -> bool {
    !matches!(op, CompareOp::Eq | CompareOp::Ne)
}

/// A comparison of two values of different kinds (a text and a number, or
/// a constant of another kind): never equal, so `==` is false and `!=`
/// true; ordering them is an error. Every such pair answers alike.
fn other_kinds(op: CompareOp) -> Tri {
    Tri::fixed(if is_order(op) {
        Err(())
    } else {
        Ok(op == CompareOp::Ne)
    })
}

// ---------------------------------------------------------------------------
// Numbers

/// The whole numbers `n` with `n op c`, as one comparison of whole numbers.
#[derive(Debug, Clone, Copy, PartialEq)]
enum IntCmp {
    Always,
    Never,
    Cmp(CompareOp, i128),
}

/// `n op f` for every whole `n`, exactly: a float with a fraction lies
/// between two whole numbers, a whole float is one.
fn int_vs_float(op: CompareOp, f: f64) -> IntCmp {
    // 2^127: no i128 reaches it, every float at or past it is whole.
    const LIMIT: f64 = 170_141_183_460_469_231_731_687_303_715_884_105_728.0;
    if !(-LIMIT..LIMIT).contains(&f) {
        let above = f > 0.0; // the float is above every whole number here
        let holds = match op {
            CompareOp::Eq => false,
            CompareOp::Ne => true,
            CompareOp::Lt | CompareOp::Le => above,
            CompareOp::Gt | CompareOp::Ge => !above,
        };
        return if holds { IntCmp::Always } else { IntCmp::Never };
    }
    if f.fract() == 0.0 {
        // Whole and in range: the cast is exact.
        return IntCmp::Cmp(op, f as i128);
    }
    let below = f.floor() as i128;
    match op {
        CompareOp::Eq => IntCmp::Never,
        CompareOp::Ne => IntCmp::Always,
        CompareOp::Lt | CompareOp::Le => IntCmp::Cmp(CompareOp::Le, below),
        CompareOp::Gt | CompareOp::Ge => IntCmp::Cmp(CompareOp::Ge, below + 1),
    }
}

fn int_cmp(op: CompareOp, c: Exact) -> IntCmp {
    match c {
        Exact::Int(k) => IntCmp::Cmp(op, k),
        Exact::Float(f) => int_vs_float(op, f),
    }
}

// ---------------------------------------------------------------------------
// Operands

/// A value during compilation.
#[derive(Debug, Clone)]
enum V {
    /// Known now: a literal, a bound reference, a folded part.
    Const(Value),
    /// A `jsonb` expression; SQL NULL is a missing path (`null`).
    Json {
        sql: String,
        /// The keys from `value` down, when the path is keys only: lets an
        /// equality add `value @> {…}` for a GIN index.
        value_keys: Option<Vec<String>>,
    },
    /// A text expression, never NULL where the operand is valid.
    Text(String),
    /// A bigint expression, never NULL where the operand is valid.
    Int(String),
    /// A boolean expression (a condition used as a value), never NULL where
    /// the operand is valid.
    Bool(String),
}

/// A value and where computing it succeeds or fails.
#[derive(Debug, Clone)]
struct Operand {
    v: V,
    /// Surely computed.
    ok: P,
    /// Surely a failure.
    err: P,
    decided: bool,
    infallible: bool,
}

impl Operand {
    fn plain(v: V) -> Operand {
        Operand {
            v,
            ok: P::True,
            err: P::False,
            decided: true,
            infallible: true,
        }
    }

    /// A value whose computation always fails (`len(3)`).
    fn failing() -> Operand {
        Operand {
            v: V::Const(Value::Null),
            ok: P::False,
            err: P::True,
            decided: true,
            infallible: false,
        }
    }

    /// A condition used as a value: `true`/`false` where decided.
    fn from_tri(t: Tri) -> Operand {
        if t.yes == P::True {
            return Operand::plain(V::Const(Value::Bool(true)));
        }
        if t.no == P::True {
            return Operand::plain(V::Const(Value::Bool(false)));
        }
        if t.err == P::True {
            return Operand::failing();
        }
        if t.decided {
            // Every record is yes, no or err: where it is not err, the value
            // is whether it is yes.
            return Operand {
                v: V::Bool(format!("COALESCE({}, FALSE)", t.yes.text())),
                ok: t.err.clone().not(),
                err: t.err,
                decided: true,
                infallible: t.infallible,
            };
        }
        let sql = format!(
            "(CASE WHEN {} THEN TRUE WHEN {} THEN FALSE END)",
            t.yes.text(),
            t.no.text()
        );
        Operand {
            v: V::Bool(sql),
            ok: t.yes.or(t.no),
            err: t.err,
            decided: t.decided,
            infallible: t.infallible,
        }
    }
}

/// An operand, or a value SQL does not compute.
#[derive(Debug, Clone)]
enum Opnd {
    Known(Operand),
    Unknown,
}

fn literal_json(l: &Literal) -> Value {
    match l {
        Literal::Null => Value::Null,
        Literal::Bool(b) => Value::Bool(*b),
        Literal::Int(i) => Value::from(*i),
        Literal::UInt(u) => Value::from(*u),
        Literal::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
        Literal::Str(s) => Value::String(s.clone()),
    }
}

/// Whether any text (or key) inside holds NUL, which PostgreSQL's text and
/// `jsonb` cannot.
fn has_nul(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('\0'),
        Value::Array(a) => a.iter().any(has_nul),
        Value::Object(o) => o.iter().any(|(k, x)| k.contains('\0') || has_nul(x)),
        _ => false,
    }
}

fn has_number(v: &Value) -> bool {
    match v {
        Value::Number(_) => true,
        Value::Array(a) => a.iter().any(has_number),
        Value::Object(o) => o.values().any(has_number),
        _ => false,
    }
}

/// Whether the evaluator can fail on this part for some data.
fn can_fail(node: &Node) -> bool {
    match &node.kind {
        NodeKind::Literal(_) | NodeKind::Ref(_) => false,
        NodeKind::Not(a) => can_fail(a),
        NodeKind::And(a, b) | NodeKind::Or(a, b) => can_fail(a) || can_fail(b),
        NodeKind::Compare(CompareOp::Eq | CompareOp::Ne, a, b) => can_fail(a) || can_fail(b),
        NodeKind::Compare(..) | NodeKind::Call(..) => true,
    }
}

// ---------------------------------------------------------------------------
// Constant folding with the evaluator itself

/// What a part made only of constants folds with.
#[derive(Debug, Clone, Copy)]
enum Fold {
    Cmp(CompareOp),
    Call(Function),
}

static FOLDS: LazyLock<Vec<(String, Expr)>> = LazyLock::new(|| {
    let ops = ["==", "!=", "<", "<=", ">", ">="]
        .map(|op| format!("$input.a {op} $input.b"))
        .into_iter();
    let calls = ["contains", "startswith", "endswith"]
        .map(|f| format!("{f}($input.a, $input.b)"))
        .into_iter();
    ops.chain(calls)
        .chain(std::iter::once("len($input.a)".to_string()))
        .map(|src| {
            let e = parse(&src).expect("the folding expressions parse");
            (src, e)
        })
        .collect()
});

fn fold_expr(f: Fold) -> &'static Expr {
    let i = match f {
        Fold::Cmp(CompareOp::Eq) => 0,
        Fold::Cmp(CompareOp::Ne) => 1,
        Fold::Cmp(CompareOp::Lt) => 2,
        Fold::Cmp(CompareOp::Le) => 3,
        Fold::Cmp(CompareOp::Gt) => 4,
        Fold::Cmp(CompareOp::Ge) => 5,
        Fold::Call(Function::Contains) => 6,
        Fold::Call(Function::StartsWith) => 7,
        Fold::Call(Function::EndsWith) => 8,
        Fold::Call(Function::Len) => 9,
    };
    &FOLDS[i].1
}

/// The evaluator's answer for constants: `Err(())` when it fails.
fn fold_bool(f: Fold, a: &Value, b: &Value) -> Result<bool, ()> {
    let scope = json!({"input": {"a": a, "b": b}});
    fold_expr(f).eval_bool(&scope).map_err(|_| ())
}

fn fold_len(a: &Value) -> Result<Value, ()> {
    let scope = json!({"input": {"a": a}});
    fold_expr(Fold::Call(Function::Len))
        .eval(&scope)
        .map_err(|_| ())
}

// ---------------------------------------------------------------------------
// The compiler

struct Compiler<'a> {
    expr: &'a Expr,
    record: &'a Root,
    bindings: &'a Bindings,
    first_param: usize,
    params: Vec<Param>,
    gaps: Vec<NotCompiled>,
    aliases: usize,
    /// What [`Compiler::truth`] found for each part (by address in the
    /// tree), for [`Compiler::narrow`].
    seen: HashMap<*const Node, Tri>,
}

/// Why a part is left to memory.
type Gap = String;

impl Compiler<'_> {
    /// The placeholder of `p`, reusing one already made for the same value
    /// (a constant appears in several predicates and arms).
    fn param(&mut self, p: Param) -> String {
        let cast = p.cast();
        let same = |q: &Param| match (q, &p) {
            // By bits: -0.0 and 0.0 are one value to `==` but not the same.
            (Param::Float(a), Param::Float(b)) => a.to_bits() == b.to_bits(),
            (q, p) => q == p,
        };
        let i = match self.params.iter().position(same) {
            Some(i) => i,
            None => {
                self.params.push(p);
                self.params.len() - 1
            }
        };
        format!("${}::{cast}", self.first_param + i)
    }

    /// An exact decimal as `numeric`: an `int8` parameter when it fits.
    fn numeric(&mut self, k: i128) -> String {
        match i64::try_from(k) {
            Ok(i) => self.param(Param::Int(i)),
            Err(_) => format!("({}::numeric)", self.param(Param::Text(k.to_string()))),
        }
    }

    fn json_param(&mut self, v: &Value) -> Result<String, Gap> {
        if has_nul(v) {
            return Err(nul_gap());
        }
        Ok(self.param(Param::Json(v.clone())))
    }

    fn text_param(&mut self, s: &str) -> Result<String, Gap> {
        if s.contains('\0') {
            return Err(nul_gap());
        }
        Ok(self.param(Param::Text(s.to_string())))
    }

    fn gap(&mut self, node: &Node, reason: Gap) -> Tri {
        self.gaps.push(NotCompiled {
            position: node.position,
            reason,
        });
        Tri::unknown(!can_fail(node))
    }

    /// Keeps a part only while its SQL stays small.
    fn bounded(&mut self, node: &Node, t: Tri) -> Tri {
        if t.size() > MAX_SQL_BYTES {
            return self.gap(
                node,
                format!("its SQL would pass {MAX_SQL_BYTES} bytes; it is evaluated in memory"),
            );
        }
        t
    }

    fn truth(&mut self, node: &Node) -> Result<Tri, CompileError> {
        let t = match &node.kind {
            NodeKind::Not(a) => self.truth(a)?.not(),
            NodeKind::And(a, b) => {
                let (a, b) = (self.truth(a)?, self.truth(b)?);
                Tri::and(a, b)
            }
            NodeKind::Or(a, b) => {
                let (a, b) = (self.truth(a)?, self.truth(b)?);
                Tri::or(a, b)
            }
            NodeKind::Compare(op, a, b) => {
                let (x, y) = (self.value(a)?, self.value(b)?);
                self.wrapped(node, x, y, |c, x, y| c.compare(*op, x, y))
            }
            NodeKind::Call(f, args) if *f != Function::Len => {
                let x = self.arg(args, 0)?;
                let y = self.arg(args, 1)?;
                self.wrapped(node, x, y, |c, x, y| c.call(*f, x, y))
            }
            _ => {
                let v = self.value(node)?;
                match v {
                    Opnd::Unknown => Tri::unknown(!can_fail(node)),
                    Opnd::Known(o) => {
                        let core = self.truthy(&o.v);
                        wrap1(&o, core)
                    }
                }
            }
        };
        let t = self.bounded(node, t);
        self.seen.insert(node as *const Node, t.clone());
        Ok(t)
    }

    /// A predicate true for every record on which the evaluator answers
    /// `true` or fails on `node` ([`Filter::narrow`]):
    ///
    /// - a decided part that never fails: where it is surely true;
    /// - `a or b`: narrow(a) ∨ narrow(b) (true or failing needs one side
    ///   true or failing);
    /// - `a and b`: narrow(a), and narrow(b) too when `a` can never fail (`b`
    ///   decides whenever `a` is true);
    /// - anything else (`not`, an undecided part): every record.
    fn narrow(&self, node: &Node) -> P {
        let seen = |n: &Node| self.seen.get(&(n as *const Node));
        match &node.kind {
            NodeKind::And(a, b) => {
                let na = self.narrow(a);
                if seen(a).is_some_and(|t| t.infallible) {
                    na.and(self.narrow(b))
                } else {
                    na
                }
            }
            NodeKind::Or(a, b) => self.narrow(a).or(self.narrow(b)),
            NodeKind::Not(_) => P::True,
            // Only where it never fails: there `yes` is an equality an index
            // may answer; `yes ∨ err` of a part that can fail would only
            // repeat the part.
            _ => match seen(node) {
                Some(t) if t.decided && t.err == P::False => t.yes.clone(),
                _ => P::True,
            },
        }
    }

    fn arg(&mut self, args: &[Node], i: usize) -> Result<Opnd, CompileError> {
        match args.get(i) {
            Some(n) => self.value(n),
            None => Ok(Opnd::Known(Operand::plain(V::Const(Value::Null)))),
        }
    }

    /// Both operands, then `core` on the records where both are computed;
    /// a failure of either is the part's failure (the evaluator computes
    /// both before comparing).
    fn wrapped(
        &mut self,
        node: &Node,
        x: Opnd,
        y: Opnd,
        core: impl FnOnce(&mut Self, &V, &V) -> Result<Tri, Gap>,
    ) -> Tri {
        let (Opnd::Known(x), Opnd::Known(y)) = (x, y) else {
            return Tri::unknown(!can_fail(node));
        };
        let core = match core(self, &x.v, &y.v) {
            Ok(t) => t,
            Err(reason) => return self.gap(node, reason),
        };
        let ok = x.ok.clone().and(y.ok.clone());
        Tri {
            yes: ok.clone().and(core.yes),
            no: ok.clone().and(core.no),
            err: x.err.or(y.err).or(ok.and(core.err)),
            decided: x.decided && y.decided && core.decided,
            infallible: x.infallible && y.infallible && core.infallible,
        }
    }

    fn value(&mut self, node: &Node) -> Result<Opnd, CompileError> {
        Ok(match &node.kind {
            NodeKind::Literal(l) => Opnd::Known(Operand::plain(V::Const(literal_json(l)))),
            NodeKind::Ref(i) => {
                let r = self
                    .expr
                    .references()
                    .nth(*i)
                    .expect("a reference node points into the list");
                Opnd::Known(Operand::plain(self.reference(r)?))
            }
            NodeKind::Call(Function::Len, args) => match self.arg(args, 0)? {
                Opnd::Unknown => Opnd::Unknown,
                Opnd::Known(o) => Opnd::Known(self.len(o)),
            },
            _ => {
                let t = self.truth(node)?;
                if !t.decided && t.yes == P::False && t.no == P::False && t.err == P::False {
                    Opnd::Unknown
                } else {
                    Opnd::Known(Operand::from_tri(t))
                }
            }
        })
    }

    fn reference(&self, r: &Reference) -> Result<V, CompileError> {
        if r.root() != self.record {
            return match self.bindings.get(r.text()) {
                Some(v) => Ok(V::Const(v.clone())),
                None => Err(CompileError::Unbound {
                    reference: r.text().to_string(),
                    position: r.position(),
                }),
            };
        }
        let mut path: Vec<Segment> = Vec::new();
        if let Some(f) = r.field() {
            path.push(Segment::Key(f.as_str().to_string()));
        }
        path.extend(r.path().iter().cloned());
        let Some((first, rest)) = path.split_first() else {
            return Ok(V::Json {
                sql: format!(
                    "jsonb_build_object('key', key, 'value', value, 'version', version, 'savedAt', {SAVED_AT_TEXT}, 'run', run, 'step', step)"
                ),
                value_keys: None,
            });
        };
        let Segment::Key(first) = first else {
            return Ok(V::Const(Value::Null));
        };
        let column = match first.as_str() {
            "value" => return Ok(value_path(rest)),
            "key" => V::Text("key".into()),
            "run" => V::Text("run".into()),
            "step" => V::Text("step".into()),
            "savedAt" => V::Text(SAVED_AT_TEXT.into()),
            "version" => V::Int("version".into()),
            _ => return Ok(V::Const(Value::Null)),
        };
        // A path into a text or a number leads nowhere.
        Ok(if rest.is_empty() {
            column
        } else {
            V::Const(Value::Null)
        })
    }

    // --- comparisons ------------------------------------------------------

    fn compare(&mut self, op: CompareOp, x: &V, y: &V) -> Result<Tri, Gap> {
        match (x, y) {
            (V::Const(a), V::Const(b)) => Ok(Tri::fixed(fold_bool(Fold::Cmp(op), a, b))),
            (V::Const(_), _) => self.compare(flip(op), y, x),
            (_, V::Bool(_)) if !matches!(x, V::Bool(_)) => self.compare(flip(op), y, x),
            // True/false have no order, and equal only true/false.
            (V::Bool(_), _) if is_order(op) => Ok(Tri::fixed(Err(()))),
            (V::Bool(a), V::Const(c)) => Ok(match c {
                Value::Bool(b) => {
                    let t =
                        Tri::from_arm(Arm::cond(if *b { a.clone() } else { format!("NOT {a}") }));
                    if op == CompareOp::Ne { t.not() } else { t }
                }
                _ => Tri::fixed(Ok(op == CompareOp::Ne)),
            }),
            (V::Bool(a), V::Bool(b)) => {
                Ok(Tri::from_arm(Arm::cond(format!("{a} {} {b}", sql_op(op)))))
            }
            (V::Bool(_), V::Text(_) | V::Int(_)) => Ok(Tri::fixed(Ok(op == CompareOp::Ne))),
            (V::Bool(a), V::Json { sql: y, .. }) => {
                let same = format!("jsonb_typeof({y}) = 'boolean' AND {y} = to_jsonb({a})");
                let t = Tri::from_arm(Arm::of(
                    P::sql(&same),
                    P::sql(format!("NOT COALESCE({same}, FALSE)")),
                    P::False,
                ));
                Ok(if op == CompareOp::Ne { t.not() } else { t })
            }
            (V::Json { sql, value_keys }, V::Const(c)) => {
                self.json_vs_const(op, sql, value_keys.as_deref(), c)
            }
            (V::Text(t), V::Const(c)) => self.text_vs_const(op, t, c),
            (V::Int(v), V::Const(c)) => self.int_vs_const(op, v, c),
            (V::Text(a), V::Text(b)) => Ok(text_vs_text(op, a, b)),
            (V::Int(a), V::Int(b)) => {
                Ok(Tri::from_arm(Arm::cond(format!("{a} {} {b}", sql_op(op)))))
            }
            (V::Text(_), V::Int(_)) | (V::Int(_), V::Text(_)) => Ok(other_kinds(op)),
            _ => {
                let a = self.as_json(x)?;
                let b = self.as_json(y)?;
                Ok(self.json_vs_json(op, &a, &b))
            }
        }
    }

    /// Two computed JSON values. Each appears many times in the SQL, so
    /// long ones are computed once in a subquery and named there.
    fn json_vs_json(&mut self, op: CompareOp, x: &str, y: &str) -> Tri {
        if x.len() + y.len() <= 160 {
            return json_vs_json_inline(op, x, y);
        }
        self.aliases += 1;
        let s = format!("s{}", self.aliases);
        let t = json_vs_json_inline(op, &format!("{s}.x"), &format!("{s}.y"));
        let bind = |p: P| match p {
            P::Sql(p) => P::sql(format!(
                "SELECT {p} FROM (SELECT {x} AS x, {y} AS y) AS {s}"
            )),
            other => other,
        };
        Tri {
            yes: bind(t.yes),
            no: bind(t.no),
            err: bind(t.err),
            ..t
        }
    }

    fn as_json(&mut self, v: &V) -> Result<String, Gap> {
        Ok(match v {
            V::Const(c) => self.json_param(c)?,
            V::Json { sql, .. } => sql.clone(),
            V::Text(t) => format!("to_jsonb({t})"),
            V::Int(i) => format!("to_jsonb({i})"),
            V::Bool(b) => format!("to_jsonb({b})"),
        })
    }

    fn json_vs_const(
        &mut self,
        op: CompareOp,
        x: &str,
        value_keys: Option<&[String]>,
        c: &Value,
    ) -> Result<Tri, Gap> {
        if op == CompareOp::Ne {
            return Ok(self.json_vs_const(CompareOp::Eq, x, value_keys, c)?.not());
        }
        let order = is_order(op);
        if order && !matches!(c, Value::Number(_) | Value::String(_)) {
            // Only two numbers or two texts have an order.
            return Ok(Tri::fixed(Err(())));
        }
        Ok(match c {
            Value::Null => Tri::from_arm(Arm::of(
                P::sql(format!("COALESCE({x}, 'null'::jsonb) = 'null'::jsonb")),
                P::sql(format!("{x} <> 'null'::jsonb")),
                P::False,
            )),
            Value::String(s) if order => {
                let p = self.text_param(s)?;
                let cmp = |op| format!("({x} #>> '{{}}') COLLATE \"C\" {} {p}", sql_op(op));
                Tri::from_arm(Arm {
                    infallible: false,
                    ..Arm::of(
                        P::sql(format!("jsonb_typeof({x}) = 'string' AND {}", cmp(op))),
                        P::sql(format!(
                            "jsonb_typeof({x}) = 'string' AND {}",
                            cmp(negate(op))
                        )),
                        P::sql(format!("jsonb_typeof({x}) IS DISTINCT FROM 'string'")),
                    )
                })
            }
            Value::Number(n) => self.json_number(op, x, value_keys, n),
            Value::Array(_) | Value::Object(_) if has_number(c) => {
                // Numbers inside compare by the evaluator's reading of each;
                // only a different type is surely unequal.
                let ty = if c.is_array() { "array" } else { "object" };
                Tri {
                    decided: false,
                    ..Tri::from_arm(Arm::of(
                        P::False,
                        P::sql(format!("jsonb_typeof({x}) IS DISTINCT FROM '{ty}'")),
                        P::False,
                    ))
                }
            }
            // Texts, true/false, and lists and objects without numbers:
            // `jsonb` equality is exactly the evaluator's.
            _ => {
                let p = self.json_param(c)?;
                let mut yes = P::sql(format!("{x} = {p}"));
                if matches!(c, Value::String(_) | Value::Bool(_)) {
                    yes = self.containment_hint(value_keys, c)?.and(yes);
                }
                Tri::from_arm(Arm::of(
                    yes,
                    P::sql(format!("{x} IS DISTINCT FROM {p}")),
                    P::False,
                ))
            }
        })
    }

    /// `value @> {"a": {"b": c}}`, implied by `value.a.b == c` for a text,
    /// true/false or whole number `c`: lets a GIN index on `value` find the
    /// candidates.
    fn containment_hint(&mut self, keys: Option<&[String]>, c: &Value) -> Result<P, Gap> {
        let Some(keys) = keys.filter(|k| !k.is_empty()) else {
            return Ok(P::True);
        };
        let mut doc = c.clone();
        for k in keys.iter().rev() {
            doc = json!({ k: doc });
        }
        let p = self.json_param(&doc)?;
        Ok(P::sql(format!("value @> {p}")))
    }

    /// A JSON value against a constant number, `op` one of `==` and the
    /// orderings.
    fn json_number(
        &mut self,
        op: CompareOp,
        x: &str,
        value_keys: Option<&[String]>,
        c: &Number,
    ) -> Tri {
        let order = is_order(op);
        let n = format!("({x})::numeric");
        let c_exact = exact(c);
        // Whole numbers of 64 bits: exactly.
        let int_arm = match int_cmp(op, c_exact) {
            IntCmp::Always => Arm::t(),
            IntCmp::Never => Arm::f(),
            IntCmp::Cmp(op2, k) => {
                let k = self.numeric(k);
                Arm::cond(format!("{n} {} {k}", sql_op(op2)))
            }
        };
        // Short decimals: their float is PostgreSQL's float8 of them.
        let (float_arm, decimal) = match c_exact {
            Exact::Int(k) => {
                // Such a decimal is never within a rounding of a whole
                // number it is not equal to, so the decimal's order is the
                // float's.
                let k = self.numeric(k);
                (Arm::cond(format!("{n} {} {k}", sql_op(op))), k)
            }
            Exact::Float(f) => {
                let p = self.param(Param::Float(f));
                let d = format!("({}::numeric)", self.param(Param::Text(format!("{f:e}"))));
                (Arm::cond(format!("({x})::float8 {} {p}", sql_op(op))), d)
            }
        };
        // Anything else: decided only far from the constant, where the
        // evaluator's float (within 1e-15 of the decimal) cannot cross it.
        let far = format!(
            "abs({n}) BETWEEN 1e-307 AND 1e308 AND abs({n} - {decimal}) > 1e-14 * abs({n})"
        );
        let other_arm = Arm::guard(
            far,
            if order {
                Arm::cond(format!("{n} {} {decimal}", sql_op(op)))
            } else {
                Arm::f()
            },
        );
        let not_number = if order { Arm::e() } else { Arm::f() };
        let mut kinds = Kinds::all(not_number);
        kinds.int = int_arm;
        kinds.float = float_arm;
        kinds.other = other_arm;
        let mut t = kinds.render(x);
        if matches!(c_exact, Exact::Int(_)) {
            // `jsonb` orders numbers by value, so a whole constant lets an
            // expression index on the path narrow first.
            let j = self.param(Param::Json(Value::Number(c.clone())));
            let mut hint = P::sql(format!("{x} {} {j}", sql_op(op)));
            if !order {
                hint = self
                    .containment_hint(value_keys, &Value::Number(c.clone()))
                    .unwrap_or(P::True)
                    .and(hint);
            }
            t.yes = hint.and(t.yes);
        }
        t
    }

    fn text_vs_const(&mut self, op: CompareOp, t: &str, c: &Value) -> Result<Tri, Gap> {
        let Value::String(s) = c else {
            return Ok(other_kinds(op));
        };
        let p = self.text_param(s)?;
        let collate = if is_order(op) { " COLLATE \"C\"" } else { "" };
        Ok(Tri::from_arm(Arm::cond(format!(
            "{t}{collate} {} {p}",
            sql_op(op)
        ))))
    }

    fn int_vs_const(&mut self, op: CompareOp, v: &str, c: &Value) -> Result<Tri, Gap> {
        let Value::Number(n) = c else {
            return Ok(other_kinds(op));
        };
        Ok(match int_cmp(op, exact(n)) {
            IntCmp::Always => Tri::fixed(Ok(true)),
            IntCmp::Never => Tri::fixed(Ok(false)),
            IntCmp::Cmp(op2, k) => {
                let k = self.numeric(k);
                Tri::from_arm(Arm::cond(format!("{v} {} {k}", sql_op(op2))))
            }
        })
    }

    // --- functions --------------------------------------------------------

    fn call(&mut self, f: Function, x: &V, y: &V) -> Result<Tri, Gap> {
        if let (V::Const(a), V::Const(b)) = (x, y) {
            return Ok(Tri::fixed(fold_bool(Fold::Call(f), a, b)));
        }
        match x {
            V::Const(Value::Null) => Ok(Tri::fixed(Ok(false))),
            V::Const(Value::Array(items)) if f == Function::Contains => {
                if items.len() > MAX_LIST_ITEMS {
                    return Err(format!(
                        "a list of more than {MAX_LIST_ITEMS} items is searched in memory"
                    ));
                }
                let mut t = Tri::fixed(Ok(false));
                for item in items {
                    let eq = self.compare(CompareOp::Eq, &V::Const(item.clone()), y)?;
                    t = Tri::or(t, eq);
                }
                Ok(t)
            }
            V::Const(Value::String(s)) => {
                let hay = self.text_param(s)?;
                Ok(Tri::from_arm(self.needle(f, &hay, y)?))
            }
            V::Const(_) | V::Int(_) | V::Bool(_) => Ok(Tri::fixed(Err(()))),
            V::Text(t) => Ok(Tri::from_arm(self.needle(f, t, y)?)),
            V::Json { sql: x, .. } => {
                let hay = format!("({x} #>> '{{}}')");
                let mut kinds = Kinds::all(Arm::e());
                kinds.null = Arm::f();
                kinds.string = self.needle(f, &hay, y)?;
                if f == Function::Contains {
                    kinds.array = self.member(x, y)?;
                }
                Ok(kinds.render(x))
            }
        }
    }

    /// `f(hay, y)` for a text `hay`: `y` must be text too.
    fn needle(&mut self, f: Function, hay: &str, y: &V) -> Result<Arm, Gap> {
        let test = |n: &str| match f {
            Function::StartsWith => format!("starts_with({hay}, {n})"),
            Function::EndsWith => format!("(right({hay}, length({n})) = {n})"),
            _ => format!("(strpos({hay}, {n}) > 0)"),
        };
        Ok(match y {
            V::Const(Value::String(s)) => {
                let n = self.text_param(s)?;
                Arm::cond(test(&n))
            }
            V::Const(_) | V::Int(_) | V::Bool(_) => Arm::e(),
            V::Text(t) => Arm::cond(test(t)),
            V::Json { sql: y, .. } => {
                let is_text = format!("jsonb_typeof({y}) = 'string'");
                let hit = test(&format!("({y} #>> '{{}}')"));
                Arm {
                    infallible: false,
                    ..Arm::of(
                        P::sql(format!("{is_text} AND {hit}")),
                        P::sql(format!("{is_text} AND NOT {hit}")),
                        P::sql(format!("jsonb_typeof({y}) IS DISTINCT FROM 'string'")),
                    )
                }
            }
        })
    }

    /// `contains(x, y)` for a list `x`: an item equal to `y`.
    fn member(&mut self, x: &str, y: &V) -> Result<Arm, Gap> {
        if let V::Const(c @ (Value::String(_) | Value::Bool(_) | Value::Null)) = y {
            // A list holds such a scalar exactly when `jsonb` containment
            // says so (`[c]` is contained in it).
            let p = self.json_param(&json!([c]))?;
            return Ok(Arm::cond(format!("{x} @> {p}")));
        }
        self.aliases += 1;
        let alias = format!("e{}", self.aliases);
        let item = V::Json {
            sql: format!("{alias}.v"),
            value_keys: None,
        };
        let eq = self.compare(CompareOp::Eq, &item, y)?;
        let from = format!("jsonb_array_elements({x}) AS {alias}(v)");
        let yes = match eq.yes {
            P::False => P::False,
            p => P::sql(format!("EXISTS (SELECT 1 FROM {from} WHERE {})", p.text())),
        };
        let no = match eq.no {
            P::True => P::True,
            p => P::sql(format!(
                "NOT EXISTS (SELECT 1 FROM {from} WHERE {})",
                p.not().text()
            )),
        };
        Ok(Arm {
            yes,
            no,
            err: P::False,
            decided: eq.decided,
            infallible: true,
        })
    }

    fn len(&mut self, o: Operand) -> Operand {
        let inner = match &o.v {
            V::Const(c) => match fold_len(c) {
                Ok(v) => Operand::plain(V::Const(v)),
                Err(()) => Operand::failing(),
            },
            V::Text(t) => Operand::plain(V::Int(format!("length({t})::bigint"))),
            V::Int(_) | V::Bool(_) => Operand::failing(),
            V::Json { sql: x, .. } => Operand {
                v: V::Int(format!(
                    "(CASE jsonb_typeof({x}) WHEN 'string' THEN length({x} #>> '{{}}')::bigint \
                     WHEN 'array' THEN jsonb_array_length({x})::bigint \
                     WHEN 'object' THEN (SELECT count(*) FROM jsonb_object_keys({x})) END)"
                )),
                ok: P::sql(format!(
                    "jsonb_typeof({x}) IN ('string', 'array', 'object')"
                )),
                err: P::sql(format!(
                    "COALESCE(jsonb_typeof({x}) NOT IN ('string', 'array', 'object'), TRUE)"
                )),
                decided: true,
                infallible: false,
            },
        };
        // Computing `o` comes first: its failure is the failure.
        let ok = o.ok.clone().and(inner.ok);
        Operand {
            v: inner.v,
            ok,
            err: o.err.clone().or(o.ok.and(inner.err)),
            decided: o.decided && inner.decided,
            infallible: o.infallible && inner.infallible,
        }
    }

    /// A value's own truth: `false`, `null`, `0`, empty text, list or
    /// object are false.
    fn truthy(&mut self, v: &V) -> Tri {
        match v {
            V::Const(c) => Tri::fixed(Ok(Val::from_json(c).is_truthy())),
            V::Text(t) => Tri::from_arm(Arm::cond(format!("{t} <> ''"))),
            V::Int(i) => Tri::from_arm(Arm::cond(format!("{i} <> 0"))),
            V::Bool(b) => Tri::from_arm(Arm::cond(b.clone())),
            V::Json { sql: x, .. } => {
                let n = format!("({x})::numeric");
                let mut kinds = Kinds::all(Arm::f());
                kinds.boolean = Arm::cond(format!("{x} = 'true'::jsonb"));
                kinds.string = Arm::cond(format!("{x} <> '\"\"'::jsonb"));
                kinds.array = Arm::cond(format!("{x} <> '[]'::jsonb"));
                kinds.object = Arm::cond(format!("{x} <> '{{}}'::jsonb"));
                // A number is true unless 0. serde_json turns no decimal of
                // 3e-324 or more into 0.0, and nothing below 2.47e-324 into
                // anything else; between the two is left to memory.
                let number = Arm {
                    decided: false,
                    ..Arm::of(
                        P::sql(format!("abs({n}) >= 3e-324")),
                        P::sql(format!("{n} = 0")),
                        P::False,
                    )
                };
                kinds.numbers(number).render(x)
            }
        }
    }
}

fn nul_gap() -> Gap {
    "a text holding the character NUL cannot be sent to PostgreSQL".into()
}

/// `core` on the records where the one operand is computed.
fn wrap1(o: &Operand, core: Tri) -> Tri {
    Tri {
        yes: o.ok.clone().and(core.yes),
        no: o.ok.clone().and(core.no),
        err: o.err.clone().or(o.ok.clone().and(core.err)),
        decided: o.decided && core.decided,
        infallible: o.infallible && core.infallible,
    }
}

/// A path under `value`: `value -> 'a'` for a key (NULL on anything but an
/// object), a strict JSON path for a list position (NULL on anything but a
/// list, or past its end; negative positions count from the end). A key
/// holding NUL, or a position past 32 bits, leads nowhere (no `jsonb` key
/// holds NUL, no list is that long).
fn value_path(rest: &[Segment]) -> V {
    let mut sql = String::from("value");
    let mut keys = Some(Vec::new());
    for seg in rest {
        match seg {
            Segment::Key(k) => {
                if k.contains('\0') {
                    return V::Const(Value::Null);
                }
                let _ = write!(sql, " -> '{}'", k.replace('\'', "''"));
                if let Some(keys) = keys.as_mut() {
                    keys.push(k.clone());
                }
            }
            Segment::Index(i) => {
                let Ok(i) = i32::try_from(*i) else {
                    return V::Const(Value::Null);
                };
                // Not `-> i`: on a text, number or true/false, `-> 0` and
                // `-> -1` answer the value itself. A strict path fails on
                // anything but a list, and `silent` makes that NULL.
                let at = if i < 0 {
                    format!("last - {}", -(i64::from(i) + 1))
                } else {
                    i.to_string()
                };
                sql = format!("jsonb_path_query_first({sql}, 'strict $[{at}]', '{{}}', true)");
                keys = None;
            }
        }
    }
    V::Json {
        sql: if rest.is_empty() {
            sql
        } else {
            format!("({sql})")
        },
        value_keys: keys,
    }
}

/// What an `orderBy` path reads, as SQL over the columns of
/// [`crate::record::SCHEMA`] (the order itself is [`crate::order`]'s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Column {
    /// A `jsonb` expression; SQL NULL where the path is missing.
    Json(String),
    /// A text column, never NULL.
    Text(&'static str),
    /// `version`.
    Version,
    /// `saved_at`: its order is the order of the `savedAt` text, and an
    /// index can give it.
    SavedAt,
    /// A path that reads `null` for every record (`$record.nothing`,
    /// `$record.key.x`), or the whole record (an object for every record):
    /// all records tie.
    Same,
}

/// The column an `orderBy` reference under `$record` reads, with the same
/// paths as a condition ([`value_path`]).
pub(crate) fn order_column(r: &Reference) -> Column {
    let mut path: Vec<Segment> = Vec::new();
    if let Some(f) = r.field() {
        path.push(Segment::Key(f.as_str().to_string()));
    }
    path.extend(r.path().iter().cloned());
    let Some((Segment::Key(first), rest)) = path.split_first() else {
        return Column::Same;
    };
    if first == "value" {
        return match value_path(rest) {
            V::Json { sql, .. } => Column::Json(sql),
            _ => Column::Same,
        };
    }
    if !rest.is_empty() {
        return Column::Same;
    }
    match first.as_str() {
        "key" => Column::Text("key"),
        "run" => Column::Text("run"),
        "step" => Column::Text("step"),
        "savedAt" => Column::SavedAt,
        "version" => Column::Version,
        _ => Column::Same,
    }
}

fn text_vs_text(op: CompareOp, a: &str, b: &str) -> Tri {
    let collate = if is_order(op) { " COLLATE \"C\"" } else { "" };
    Tri::from_arm(Arm::cond(format!("{a}{collate} {} {b}", sql_op(op))))
}

/// Two computed JSON values (paths, bound values, columns), named `x` and
/// `y` in the SQL.
fn json_vs_json_inline(op: CompareOp, x: &str, y: &str) -> Tri {
    let (kx, ky) = (json_kind(x), json_kind(y));
    let (nx, ny) = (number_kind(x), number_kind(y));
    let numbers = format!("jsonb_typeof({x}) = 'number' AND jsonb_typeof({y}) = 'number'");
    // NULL unless both are numbers the evaluator reads exactly, or they are
    // so far apart that its floats (within 1e-15 of each decimal) cannot
    // cross (module docs).
    let (a, b) = (format!("({x})::numeric"), format!("({y})::numeric"));
    let far = format!(
        "({a} = 0 OR abs({a}) BETWEEN 1e-307 AND 1e308) AND ({b} = 0 OR abs({b}) BETWEEN 1e-307 AND 1e308) \
         AND abs({a} - {b}) > 1e-14 * greatest(abs({a}), abs({b}))"
    );
    let num = |op: CompareOp| {
        format!(
            "(CASE WHEN {numbers} THEN (CASE WHEN ({nx}) IN ('i', 'f') AND ({ny}) IN ('i', 'f') THEN \
             (CASE WHEN ({nx}) = 'f' AND ({ny}) = 'f' THEN ({x})::float8 {o} ({y})::float8 \
             ELSE {a} {o} {b} END) WHEN {far} THEN {a} {o} {b} END) END)",
            o = sql_op(op)
        )
    };
    if op == CompareOp::Ne {
        return json_vs_json_inline(CompareOp::Eq, x, y).not();
    }
    if op == CompareOp::Eq {
        let eq = num(CompareOp::Eq);
        return Tri {
            yes: P::sql(format!(
                "({kx} = 'null' AND {ky} = 'null') \
                 OR (jsonb_typeof({x}) IN ('string', 'boolean') AND {x} = {y}) \
                 OR {eq} IS TRUE"
            )),
            no: P::sql(format!(
                "{kx} <> {ky} \
                 OR (jsonb_typeof({x}) IN ('string', 'boolean') AND {x} <> {y}) \
                 OR {eq} IS FALSE"
            )),
            err: P::False,
            // Lists and objects, and numbers read inexactly, are left to
            // memory.
            decided: false,
            infallible: true,
        };
    }
    let texts = format!("jsonb_typeof({x}) = 'string' AND jsonb_typeof({y}) = 'string'");
    let text_cmp = |op: CompareOp| {
        format!(
            "({x} #>> '{{}}') COLLATE \"C\" {} ({y} #>> '{{}}')",
            sql_op(op)
        )
    };
    let (cmp, neg) = (num(op), num(negate(op)));
    Tri {
        yes: P::sql(format!("({texts} AND {}) OR {cmp} IS TRUE", text_cmp(op))),
        no: P::sql(format!(
            "({texts} AND {}) OR {neg} IS TRUE",
            text_cmp(negate(op))
        )),
        err: P::sql(format!(
            "NOT COALESCE({texts}, FALSE) AND NOT COALESCE({numbers}, FALSE)"
        )),
        decided: false,
        infallible: false,
    }
}

#[cfg(test)]
mod tests;
