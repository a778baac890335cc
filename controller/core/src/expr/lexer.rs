//! Splits expression text into tokens, each with the character where it starts.
//!
//! References (`$steps.x.output[0]`) are read whole here, because spaces are
//! not allowed inside them and their fixed parts (root, step key, field) are
//! checked as they are read, so the error can point at the exact character.
//! Positions are 1-based and count characters, not bytes, because that is what
//! a person sees in an editor.

use super::ast::{CompareOp, Field, Literal, Reference, Root, Segment};
use super::error::SyntaxError;

/// The longest expression accepted, in characters.
pub const MAX_CHARS: usize = 2000;

/// One token.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok<'a> {
    /// A number literal (`Literal::Int`, `Literal::UInt` or `Literal::Float`).
    Num(Literal),
    /// A quoted text literal, escapes applied.
    Str(String),
    /// A whole reference.
    Ref(Reference),
    /// A bare word: keyword, literal name or function name.
    Ident(&'a str),
    LParen,
    RParen,
    Comma,
    Cmp(CompareOp),
    End,
}

/// A token with where it stands in the source.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token<'a> {
    pub tok: Tok<'a>,
    /// 1-based character index of the first character.
    pub pos: usize,
    /// Byte range in the source, for quoting parts of it in messages.
    pub start: usize,
    pub end: usize,
}

/// Refuses text longer than [`MAX_CHARS`] characters without reading more of it
/// than needed, so a megabyte of input costs almost nothing.
pub(crate) fn check_length(src: &str) -> Result<(), SyntaxError> {
    if src.len() > MAX_CHARS && src.chars().nth(MAX_CHARS).is_some() {
        return Err(SyntaxError::new(
            MAX_CHARS + 1,
            format!("an expression can be at most {MAX_CHARS} characters long; this one is longer"),
        ));
    }
    Ok(())
}

pub(crate) struct Lexer<'a> {
    src: &'a str,
    /// Byte offset of the next character.
    byte: usize,
    /// 1-based character index of the next character.
    pos: usize,
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn is_step_key(key: &str) -> bool {
    let mut chars = key.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

const ROOTS: &str =
    "$input, $steps, $previous, $loop, $item, $index or $run (and $record in a lookup)";

/// The fields of a stored record, as `$record` reads it.
pub(crate) const RECORD_FIELDS: [&str; 6] = ["key", "value", "version", "savedAt", "run", "step"];

impl<'a> Lexer<'a> {
    pub fn new(src: &'a str) -> Self {
        Lexer {
            src,
            byte: 0,
            pos: 1,
        }
    }

    /// 1-based character index of the next unread character.
    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn at_end(&self) -> bool {
        self.byte >= self.src.len()
    }

    fn peek(&self) -> Option<char> {
        self.src[self.byte..].chars().next()
    }

    fn peek2(&self) -> Option<char> {
        let mut it = self.src[self.byte..].chars();
        it.next();
        it.next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.byte += c.len_utf8();
        self.pos += 1;
        Some(c)
    }

    fn skip_space(&mut self) {
        while let Some(c) = self.peek() {
            if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
                self.bump();
            } else {
                break;
            }
        }
    }

    fn err<T>(&self, pos: usize, msg: impl Into<String>) -> Result<T, SyntaxError> {
        Err(SyntaxError::new(pos, msg))
    }

    /// Reads the next token.
    pub fn next_token(&mut self) -> Result<Token<'a>, SyntaxError> {
        self.skip_space();
        let start = self.byte;
        let pos = self.pos;
        let Some(c) = self.peek() else {
            return Ok(Token {
                tok: Tok::End,
                pos,
                start,
                end: start,
            });
        };
        let tok = match c {
            '(' => {
                self.bump();
                Tok::LParen
            }
            ')' => {
                self.bump();
                Tok::RParen
            }
            ',' => {
                self.bump();
                Tok::Comma
            }
            '=' => self.then_equals(
                CompareOp::Eq,
                pos,
                "a single `=` isn't a comparison; write `==`",
            )?,
            '!' => self.then_equals(
                CompareOp::Ne,
                pos,
                "`!` isn't an operator; write `not` to negate or `!=` to compare",
            )?,
            '<' | '>' => {
                self.bump();
                let eq = self.peek() == Some('=');
                if eq {
                    self.bump();
                }
                Tok::Cmp(match (c, eq) {
                    ('<', false) => CompareOp::Lt,
                    ('<', true) => CompareOp::Le,
                    (_, false) => CompareOp::Gt,
                    (_, true) => CompareOp::Ge,
                })
            }
            '&' => return self.err(pos, "`&` isn't an operator; write `and`"),
            '|' => return self.err(pos, "`|` isn't an operator; write `or`"),
            '"' | '\'' => Tok::Str(self.string()?),
            '$' => Tok::Ref(self.reference()?),
            '-' | '0'..='9' => Tok::Num(self.number()?),
            c if is_ident_start(c) => Tok::Ident(self.ident()),
            c => return self.err(pos, format!("unexpected character `{c}`")),
        };
        Ok(Token {
            tok,
            pos,
            start,
            end: self.byte,
        })
    }

    /// `==` or `!=`: the character at `pos` and then `=`; without the `=`,
    /// the error `alone` says what to write instead.
    fn then_equals(
        &mut self,
        op: CompareOp,
        pos: usize,
        alone: &str,
    ) -> Result<Tok<'a>, SyntaxError> {
        self.bump();
        if self.peek() != Some('=') {
            return self.err(pos, alone);
        }
        self.bump();
        Ok(Tok::Cmp(op))
    }

    /// Reads letters, digits and `_` (callers check what the word must start with).
    fn ident(&mut self) -> &'a str {
        let start = self.byte;
        while matches!(self.peek(), Some(c) if is_ident_char(c)) {
            self.bump();
        }
        &self.src[start..self.byte]
    }

    fn number(&mut self) -> Result<Literal, SyntaxError> {
        let start = self.byte;
        let pos = self.pos;
        if self.peek() == Some('-') {
            self.bump();
            if !matches!(self.peek(), Some('0'..='9')) {
                return self.err(
                    pos,
                    "`-` can only start a negative number such as `-1`; there is no subtraction",
                );
            }
        }
        while matches!(self.peek(), Some('0'..='9')) {
            self.bump();
        }
        let mut float = false;
        if self.peek() == Some('.') {
            self.bump();
            if !matches!(self.peek(), Some('0'..='9')) {
                return self.err(
                    self.pos,
                    "a decimal point must be followed by digits, as in `0.5`",
                );
            }
            float = true;
            while matches!(self.peek(), Some('0'..='9')) {
                self.bump();
            }
        }
        if matches!(self.peek(), Some(c) if is_ident_char(c) || c == '.') {
            return self.err(
                self.pos,
                "a number must end with a digit, as in `3` or `0.75`",
            );
        }
        let text = &self.src[start..self.byte];
        if !float && let Ok(i) = text.parse::<i64>() {
            return Ok(Literal::Int(i));
        }
        if !float && let Ok(u) = text.parse::<u64>() {
            return Ok(Literal::UInt(u));
        }
        match text.parse::<f64>() {
            Ok(f) if f.is_finite() => Ok(Literal::Float(f)),
            _ => self.err(pos, "this number is too large"),
        }
    }

    /// Reads a quoted text; the next character is the opening quote.
    fn string(&mut self) -> Result<String, SyntaxError> {
        let open_pos = self.pos;
        let Some(quote) = self.bump() else {
            return self.err(open_pos, "expected a quote");
        };
        let mut out = String::new();
        loop {
            let here = self.pos;
            match self.bump() {
                None => {
                    return self.err(
                        self.pos,
                        format!("missing closing quote {quote} for the text that starts at character {open_pos}"),
                    );
                }
                Some(c) if c == quote => return Ok(out),
                Some('\\') => match self.bump() {
                    Some('"') => out.push('"'),
                    Some('\'') => out.push('\''),
                    Some('\\') => out.push('\\'),
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some(other) => {
                        return self.err(
                            here,
                            format!(
                                "unknown escape `\\{other}`; the escapes are \\\", \\', \\\\, \\n and \\t"
                            ),
                        );
                    }
                    None => {
                        return self.err(
                            self.pos,
                            format!("missing closing quote {quote} for the text that starts at character {open_pos}"),
                        );
                    }
                },
                Some(c) => out.push(c),
            }
        }
    }

    /// Reads a reference; the next character is `$`.
    pub fn reference(&mut self) -> Result<Reference, SyntaxError> {
        let start = self.byte;
        let position = self.pos;
        self.bump();
        let name_pos = self.pos;
        match self.peek() {
            Some(c) if is_ident_start(c) => {}
            _ => {
                return self.err(
                    name_pos,
                    format!(
                        "`$` must be followed by a name: {ROOTS}; text that starts with `$` goes in quotes in a condition, or is written `$$` at the start of a value"
                    ),
                );
            }
        }
        let name = self.ident();
        let root = match name {
            "input" => Root::Input,
            "steps" => Root::Step { key: String::new() },
            "previous" => Root::Previous,
            "loop" => Root::Loop,
            "item" => Root::Item,
            "index" => Root::Index,
            "run" => Root::Run,
            "record" => Root::Record,
            _ => {
                let lower = name.to_ascii_lowercase();
                let known = [
                    "input", "steps", "previous", "loop", "item", "index", "run", "record",
                ];
                return if known.contains(&lower.as_str()) {
                    self.err(name_pos, format!("write `${lower}` in lowercase"))
                } else {
                    self.err(
                        name_pos,
                        format!("unknown reference `${name}`; a reference starts with {ROOTS}"),
                    )
                };
            }
        };
        let mut key_position = position;
        let (root, field) = match root {
            Root::Step { .. } => {
                if self.peek() != Some('.') {
                    return self.err(
                        self.pos,
                        "`$steps` needs a step key, as in `$steps.draft.output`",
                    );
                }
                self.bump();
                key_position = self.pos;
                let key = self.ident();
                if key.is_empty() {
                    return self.err(key_position, "expected a step key after `$steps.`");
                }
                if !is_step_key(key) {
                    return self.err(
                        key_position,
                        format!("`{key}` isn't a step key; keys start with a lowercase letter and use only lowercase letters, digits and `_`"),
                    );
                }
                if self.peek() == Some('-') {
                    return self.err(self.pos, "step keys use `_`, not `-`");
                }
                let field = self.fixed_field(
                    &Field::STEP,
                    "a step record has `output`, `text`, `status` and `error`",
                    false,
                )?;
                (
                    Root::Step {
                        key: key.to_string(),
                    },
                    field,
                )
            }
            other => {
                let field = match fixed_fields(&other) {
                    Some((allowed, what, required)) => self.fixed_field(allowed, what, required)?,
                    None => None,
                };
                (other, field)
            }
        };
        let mut path = Vec::new();
        if root == Root::Record {
            path.push(Segment::Key(self.record_field()?.to_string()));
        }
        loop {
            match self.peek() {
                Some('.') => {
                    self.bump();
                    let at = self.pos;
                    match self.peek() {
                        Some(c) if is_ident_start(c) => {}
                        Some('0'..='9') => {
                            return self.err(at, "list items are read with brackets, as in `[0]`");
                        }
                        _ => return self.err(at, "expected a field name after `.`"),
                    }
                    let name = self.ident();
                    path.push(Segment::Key(name.to_string()));
                    if self.peek() == Some('-')
                        && matches!(self.peek2(), Some(c) if c.is_alphanumeric())
                    {
                        return self.err(
                            self.pos,
                            "a field name with `-` or spaces goes in brackets and quotes, as in `[\"first-name\"]`",
                        );
                    }
                }
                Some('[') => {
                    self.bump();
                    let at = self.pos;
                    match self.peek() {
                        Some('"' | '\'') => path.push(Segment::Key(self.string()?)),
                        Some('-' | '0'..='9') => match self.number()? {
                            Literal::Int(i) => path.push(Segment::Index(i)),
                            _ => {
                                return self.err(
                                    at,
                                    "a list position is a whole number, as in `[0]` or `[-1]`",
                                );
                            }
                        },
                        _ => {
                            return self.err(
                                at,
                                "expected a list position or a quoted name inside `[ ]`, as in `[0]` or `[\"first-name\"]`",
                            );
                        }
                    }
                    if self.peek() != Some(']') {
                        return self.err(self.pos, "missing `]`");
                    }
                    self.bump();
                }
                _ => break,
            }
        }
        Ok(Reference {
            root,
            field,
            path,
            position,
            key_position,
            text: self.src[start..self.byte].to_string(),
        })
    }

    /// Reads `.field` after a root whose next name is fixed.
    /// The field after `$record` (a status is an object with fixed
    /// fields; what follows them is the saved value's own path).
    fn record_field(&mut self) -> Result<&'static str, SyntaxError> {
        let what = "a record has `key`, `value`, `version`, `savedAt`, `run` and `step`";
        if self.peek() != Some('.') {
            return self.err(self.pos, what.to_string());
        }
        self.bump();
        let at = self.pos;
        let name = self.ident();
        match RECORD_FIELDS.iter().find(|f| **f == name) {
            Some(f) => Ok(f),
            None if name.is_empty() => {
                self.err(at, format!("expected a field name after `.`: {what}"))
            }
            None => self.err(at, format!("`{name}` isn't a field here: {what}")),
        }
    }

    fn fixed_field(
        &mut self,
        allowed: &[Field],
        what: &str,
        required: bool,
    ) -> Result<Option<Field>, SyntaxError> {
        if self.peek() != Some('.') {
            return if required {
                self.err(self.pos, what.to_string())
            } else {
                Ok(None)
            };
        }
        self.bump();
        let at = self.pos;
        let name = self.ident();
        match allowed.iter().find(|f| f.as_str() == name) {
            Some(f) => Ok(Some(*f)),
            None if name.is_empty() => {
                self.err(at, format!("expected a field name after `.`: {what}"))
            }
            None => self.err(at, format!("`{name}` isn't a field here: {what}")),
        }
    }
}

/// The fields a root other than `$steps.KEY` may name, what to say when
/// another is named, and whether one must be: one row per root.
fn fixed_fields(root: &Root) -> Option<(&'static [Field], &'static str, bool)> {
    match root {
        Root::Previous => Some((
            &Field::STEP,
            "`$previous` has `output`, `text`, `status` and `error`",
            false,
        )),
        Root::Loop => Some((
            &Field::LOOP,
            "`$loop` has only `iteration`; write `$loop.iteration`",
            true,
        )),
        Root::Run => Some((
            &Field::RUN,
            "`$run` has `name`, `namespace`, `uid` and `since`",
            true,
        )),
        _ => None,
    }
}

/// Reads a value string that must be exactly one reference (`"$input.brief"`).
pub(crate) fn single_reference(src: &str) -> Result<Reference, SyntaxError> {
    check_length(src)?;
    let mut lx = Lexer::new(src);
    let r = lx.reference()?;
    if !lx.at_end() {
        return Err(SyntaxError::new(
            lx.pos(),
            "a value that starts with `$` must be exactly one reference and nothing else; to start text with `$`, write `$$`",
        ));
    }
    Ok(r)
}
