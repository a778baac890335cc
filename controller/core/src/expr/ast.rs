//! The parsed form of an expression.
//!
//! Parsing happens once, when a flow is saved or loaded; evaluation walks this
//! tree many times, so it keeps literals ready to compare (numbers already
//! converted, escapes already applied) and records where each part started so
//! errors can point at it.

use std::fmt;

/// A parsed expression: its source text, its tree and the references it reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub(crate) source: String,
    pub(crate) root: Node,
    pub(crate) refs: Vec<Reference>,
}

impl Expr {
    /// The text the expression was parsed from, used to name it in errors.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Every reference in the expression, in the order written, so the
    /// validator can check step keys and report where each one stands.
    pub fn references(&self) -> impl Iterator<Item = &Reference> {
        self.refs.iter()
    }

    /// The top of the tree, for tools that want to walk it.
    pub fn node(&self) -> &Node {
        &self.root
    }

    /// The reference, when the expression is exactly one (a lookup's
    /// `orderBy` must be).
    pub fn as_reference(&self) -> Option<&Reference> {
        match self.root.kind {
            NodeKind::Ref(i) => self.refs.get(i),
            _ => None,
        }
    }
}

/// One node of the tree with the character where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// 1-based character index where this part of the expression starts.
    pub position: usize,
    /// What this node is.
    pub kind: NodeKind,
}

/// The kinds of node an expression is built from.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeKind {
    /// A number, text, `true`, `false` or `null` written in the expression.
    Literal(Literal),
    /// A reference to run data; the index points into [`Expr::references`].
    Ref(usize),
    /// `not X`.
    Not(Box<Node>),
    /// `X and Y` (the right side is read only when the left is true).
    And(Box<Node>, Box<Node>),
    /// `X or Y` (the right side is read only when the left is false).
    Or(Box<Node>, Box<Node>),
    /// `X op Y` for one of the six comparisons.
    Compare(CompareOp, Box<Node>, Box<Node>),
    /// A call of one of the built-in functions.
    Call(Function, Vec<Node>),
}

/// A value written directly in an expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A whole number that fits in `i64`.
    Int(i64),
    /// A whole number above `i64::MAX` that fits in `u64`: kept exact, so
    /// `9223372036854775807 == 9223372036854775808` is false.
    UInt(u64),
    /// A number with decimals (or a whole one too large for 64 bits).
    Float(f64),
    /// Text with its escapes already applied.
    Str(String),
}

/// The six comparisons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl CompareOp {
    /// The operator as written.
    pub fn as_str(self) -> &'static str {
        match self {
            CompareOp::Eq => "==",
            CompareOp::Ne => "!=",
            CompareOp::Lt => "<",
            CompareOp::Le => "<=",
            CompareOp::Gt => ">",
            CompareOp::Ge => ">=",
        }
    }
}

/// The built-in functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    /// `contains(a, b)`: substring of text, or member of a list.
    Contains,
    /// `startswith(a, b)`: text begins with other text.
    StartsWith,
    /// `endswith(a, b)`: text ends with other text.
    EndsWith,
    /// `len(a)`: characters of text, items of a list, keys of an object.
    Len,
}

impl Function {
    /// All functions, for lookups and for listing them in error messages.
    pub const ALL: [Function; 4] = [
        Function::Contains,
        Function::StartsWith,
        Function::EndsWith,
        Function::Len,
    ];

    /// The name as written in expressions.
    pub fn name(self) -> &'static str {
        match self {
            Function::Contains => "contains",
            Function::StartsWith => "startswith",
            Function::EndsWith => "endswith",
            Function::Len => "len",
        }
    }

    /// How many arguments the function takes.
    pub fn arity(self) -> usize {
        match self {
            Function::Len => 1,
            _ => 2,
        }
    }

    /// The function with exactly this name, if any.
    pub fn from_name(name: &str) -> Option<Function> {
        Function::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// A reference to run data such as `$steps.review.output.score`.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    pub(crate) root: Root,
    pub(crate) field: Option<Field>,
    pub(crate) path: Vec<Segment>,
    pub(crate) position: usize,
    pub(crate) key_position: usize,
    pub(crate) text: String,
}

impl Reference {
    /// Which part of the run the reference starts from.
    pub fn root(&self) -> &Root {
        &self.root
    }

    /// The step key of a `$steps.<key>` reference, for the "unknown step" and
    /// "step that runs later" checks.
    pub fn step_key(&self) -> Option<&str> {
        match &self.root {
            Root::Step { key } => Some(key),
            _ => None,
        }
    }

    /// The fixed field after the root (`output` in `$steps.x.output`,
    /// `iteration` in `$loop.iteration`), when there is one.
    pub fn field(&self) -> Option<Field> {
        self.field
    }

    /// The path read inside the value (`.name`, `[0]`, …).
    pub fn path(&self) -> &[Segment] {
        &self.path
    }

    /// 1-based character index of the `$` that starts the reference.
    pub fn position(&self) -> usize {
        self.position
    }

    /// 1-based character index of the step key for `$steps.<key>` (where the
    /// validator points for an unknown key); the `$` position otherwise.
    pub fn key_position(&self) -> usize {
        self.key_position
    }

    /// The reference as written.
    pub fn text(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Where a reference starts reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Root {
    /// `$input`: the run input.
    Input,
    /// `$steps.<key>`: the status of a step.
    Step {
        /// The step key.
        key: String,
    },
    /// `$previous`: the status of the step just before.
    Previous,
    /// `$loop`: the current loop pass.
    Loop,
    /// `$item`: the item of the current parallel part.
    Item,
    /// `$index`: the position of the current parallel part.
    Index,
    /// `$run`: facts about the run itself.
    Run,
    /// `$record`: one stored record, in a lookup's `where` and `orderBy`
    /// (`{key, value, version, savedAt, run, step}`).
    Record,
}

impl Root {
    /// The name as written after `$`.
    pub fn name(&self) -> &'static str {
        match self {
            Root::Input => "input",
            Root::Step { .. } => "steps",
            Root::Previous => "previous",
            Root::Loop => "loop",
            Root::Item => "item",
            Root::Index => "index",
            Root::Run => "run",
            Root::Record => "record",
        }
    }
}

/// The fixed field names that may follow a root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// Step record: `output`.
    Output,
    /// Step record: `text`.
    Text,
    /// Step record: `status`.
    Status,
    /// Step record: `error`.
    Error,
    /// `$loop.iteration`.
    Iteration,
    /// `$run.name`.
    Name,
    /// `$run.namespace`.
    Namespace,
    /// `$run.uid`.
    Uid,
    /// `$run.since`.
    Since,
}

impl Field {
    /// The name as written.
    pub fn as_str(self) -> &'static str {
        match self {
            Field::Output => "output",
            Field::Text => "text",
            Field::Status => "status",
            Field::Error => "error",
            Field::Iteration => "iteration",
            Field::Name => "name",
            Field::Namespace => "namespace",
            Field::Uid => "uid",
            Field::Since => "since",
        }
    }

    pub(crate) const STEP: [Field; 4] = [Field::Output, Field::Text, Field::Status, Field::Error];
    pub(crate) const LOOP: [Field; 1] = [Field::Iteration];
    pub(crate) const RUN: [Field; 4] = [Field::Name, Field::Namespace, Field::Uid, Field::Since];
}

/// One step of a path inside a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// `.name` or `["name"]`: a field of an object.
    Key(String),
    /// `[n]`: an item of a list; negative counts from the end.
    Index(i64),
}
