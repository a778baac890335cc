//! Recursive-descent parser from tokens to the tree in [`super::ast`].
//!
//! Binding, loosest first: `or`, `and`, `not`, then a single comparison.
//! Comparisons bind tighter than `not`, so `not $a == 1` means
//! `not ($a == 1)`. Depth is counted for parentheses, `not` and function calls
//! and refused past [`MAX_DEPTH`], so hostile input cannot exhaust the stack.

use super::ast::{Expr, Function, Literal, Node, NodeKind, Reference};
use super::error::SyntaxError;
use super::lexer::{Lexer, Tok, Token, check_length};

/// How deep parentheses, `not` and function calls may nest.
pub const MAX_DEPTH: usize = 32;

const KEYWORDS: [&str; 6] = ["true", "false", "null", "and", "or", "not"];

/// Parses an expression (a condition, or a bare value read for its truth).
///
/// This is the save-time check: every way an expression can be malformed is
/// reported here with the character where reading stopped.
pub fn parse(src: &str) -> Result<Expr, SyntaxError> {
    check_length(src)?;
    let mut lexer = Lexer::new(src);
    let tok = lexer.next_token()?;
    let mut p = Parser {
        src,
        lexer,
        tok,
        depth: 0,
        refs: Vec::new(),
    };
    if p.tok.tok == Tok::End {
        return Err(SyntaxError::new(1, "the expression is empty"));
    }
    let root = p.or()?;
    if p.tok.tok != Tok::End {
        return Err(p.unexpected("`and`, `or` or the end of the expression"));
    }
    Ok(Expr {
        source: src.to_string(),
        root,
        refs: p.refs,
    })
}

struct Parser<'a> {
    src: &'a str,
    lexer: Lexer<'a>,
    tok: Token<'a>,
    depth: usize,
    refs: Vec<Reference>,
}

impl<'a> Parser<'a> {
    fn advance(&mut self) -> Result<Token<'a>, SyntaxError> {
        let next = self.lexer.next_token()?;
        Ok(std::mem::replace(&mut self.tok, next))
    }

    fn is_word(&self, w: &str) -> bool {
        matches!(self.tok.tok, Tok::Ident(x) if x == w)
    }

    fn enter(&mut self, pos: usize) -> Result<(), SyntaxError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(SyntaxError::new(
                pos,
                format!(
                    "nested too deeply: parentheses, `not` and function calls can nest at most {MAX_DEPTH} levels"
                ),
            ));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    /// The error for a token that cannot stand where it is.
    fn unexpected(&self, expected: &str) -> SyntaxError {
        let pos = self.tok.pos;
        match &self.tok.tok {
            Tok::End => SyntaxError::new(
                pos,
                format!("the expression ends too soon; expected {expected}"),
            ),
            Tok::Ident(w) => {
                let lower = w.to_ascii_lowercase();
                if (lower == "true" || lower == "false") && self.src.trim() == *w {
                    // The whole expression: lowercase alone would leave a
                    // bare `when: true`, a boolean kubectl refuses for text.
                    SyntaxError::new(
                        pos,
                        format!(
                            "write `{lower}` in lowercase and quoted (`\"{lower}\"`), not `{w}`: in YAML a bare {lower} is a boolean, and kubectl refuses it where an expression (text) is expected"
                        ),
                    )
                } else if KEYWORDS.contains(&lower.as_str()) && lower != *w {
                    SyntaxError::new(pos, format!("write `{lower}` in lowercase, not `{w}`"))
                } else if KEYWORDS.contains(w) {
                    SyntaxError::new(pos, format!("unexpected `{w}`; expected {expected}"))
                } else {
                    SyntaxError::new(
                        pos,
                        format!(
                            "unexpected word `{w}`; put text in quotes ('{w}') and start references with `$`"
                        ),
                    )
                }
            }
            _ => {
                let text = &self.src[self.tok.start..self.tok.end];
                SyntaxError::new(pos, format!("unexpected `{text}`; expected {expected}"))
            }
        }
    }

    fn or(&mut self) -> Result<Node, SyntaxError> {
        self.chain("or", Self::and, NodeKind::Or)
    }

    fn and(&mut self) -> Result<Node, SyntaxError> {
        self.chain("and", Self::not, NodeKind::And)
    }

    /// `operand (word operand)*`, grouped to the left: `or` and `and` are
    /// the same rule at two levels of binding, so they are parsed alike.
    fn chain(
        &mut self,
        word: &str,
        operand: fn(&mut Self) -> Result<Node, SyntaxError>,
        kind: fn(Box<Node>, Box<Node>) -> NodeKind,
    ) -> Result<Node, SyntaxError> {
        let mut left = operand(self)?;
        while self.is_word(word) {
            self.advance()?;
            let right = operand(self)?;
            left = Node {
                position: left.position,
                kind: kind(Box::new(left), Box::new(right)),
            };
        }
        Ok(left)
    }

    fn not(&mut self) -> Result<Node, SyntaxError> {
        if self.is_word("not") {
            let position = self.tok.pos;
            self.enter(position)?;
            self.advance()?;
            let inner = self.not()?;
            self.leave();
            return Ok(Node {
                position,
                kind: NodeKind::Not(Box::new(inner)),
            });
        }
        self.compare()
    }

    fn compare(&mut self) -> Result<Node, SyntaxError> {
        let left_start = self.tok.start;
        let left = self.primary()?;
        let Tok::Cmp(op) = self.tok.tok else {
            return Ok(left);
        };
        self.advance()?;
        let right_start = self.tok.start;
        let right = self.primary()?;
        let right_end = self.last_end();
        if let Tok::Cmp(op2) = self.tok.tok {
            let a = self.src[left_start..right_start].trim_end();
            let a = a.strip_suffix(op.as_str()).unwrap_or(a).trim_end();
            let b = &self.src[right_start..right_end];
            return Err(SyntaxError::new(
                self.tok.pos,
                format!(
                    "comparisons can't be chained; write each one on its own and join them with `and`, as in `{a} {} {b} and {b} {} …`",
                    op.as_str(),
                    op2.as_str()
                ),
            ));
        }
        Ok(Node {
            position: left.position,
            kind: NodeKind::Compare(op, Box::new(left), Box::new(right)),
        })
    }

    /// Byte offset just past the last token consumed.
    fn last_end(&self) -> usize {
        self.src[..self.tok.start].trim_end().len()
    }

    fn primary(&mut self) -> Result<Node, SyntaxError> {
        let position = self.tok.pos;
        let kind = match &self.tok.tok {
            Tok::Num(_) | Tok::Str(_) | Tok::Ref(_) => match self.advance()?.tok {
                Tok::Num(n) => NodeKind::Literal(n),
                Tok::Str(s) => NodeKind::Literal(Literal::Str(s)),
                Tok::Ref(r) => {
                    self.refs.push(r);
                    NodeKind::Ref(self.refs.len() - 1)
                }
                _ => return Err(SyntaxError::new(position, "internal parser error")),
            },
            Tok::LParen => {
                self.enter(position)?;
                self.advance()?;
                let inner = self.or()?;
                if self.tok.tok != Tok::RParen {
                    return Err(
                        self.unexpected(&format!("`)` to close the `(` at character {position}"))
                    );
                }
                self.advance()?;
                self.leave();
                return Ok(inner);
            }
            Tok::Ident(w) => {
                let w = *w;
                match w {
                    "true" => {
                        self.advance()?;
                        NodeKind::Literal(Literal::Bool(true))
                    }
                    "false" => {
                        self.advance()?;
                        NodeKind::Literal(Literal::Bool(false))
                    }
                    "null" => {
                        self.advance()?;
                        NodeKind::Literal(Literal::Null)
                    }
                    "not" => {
                        return Err(SyntaxError::new(
                            position,
                            "`not` can't stand here; put it in parentheses, as in `(not …)`",
                        ));
                    }
                    _ => {
                        let next_is_paren = self.src[self.tok.end..].trim_start().starts_with('(');
                        if next_is_paren && !KEYWORDS.contains(&w.to_ascii_lowercase().as_str()) {
                            return self.call(w, position);
                        }
                        return Err(self.unexpected("a value"));
                    }
                }
            }
            _ => return Err(self.unexpected("a value")),
        };
        Ok(Node { position, kind })
    }

    fn call(&mut self, name: &'a str, position: usize) -> Result<Node, SyntaxError> {
        let func = match Function::from_name(name) {
            Some(f) => f,
            None => {
                let lower = name.to_ascii_lowercase();
                let msg = match Function::from_name(&lower) {
                    Some(f) => format!("write `{}` in lowercase, not `{name}`", f.name()),
                    None => format!(
                        "unknown function `{name}`; the functions are contains, startswith, endswith and len"
                    ),
                };
                return Err(SyntaxError::new(position, msg));
            }
        };
        self.enter(position)?;
        self.advance()?; // name
        self.advance()?; // (
        let arity = func.arity();
        let plural = if arity == 1 { "argument" } else { "arguments" };
        let mut args = Vec::with_capacity(arity);
        if self.tok.tok != Tok::RParen {
            loop {
                args.push(self.or()?);
                match self.tok.tok {
                    Tok::Comma if args.len() < arity => {
                        self.advance()?;
                    }
                    Tok::Comma => {
                        return Err(SyntaxError::new(
                            self.tok.pos,
                            format!("`{}` takes {arity} {plural}", func.name()),
                        ));
                    }
                    Tok::RParen => break,
                    _ => return Err(self.unexpected("`,` or `)`")),
                }
            }
        }
        if args.len() != arity {
            return Err(SyntaxError::new(
                self.tok.pos,
                format!(
                    "`{}` takes {arity} {plural}, not {}",
                    func.name(),
                    args.len()
                ),
            ));
        }
        self.advance()?; // )
        self.leave();
        Ok(Node {
            position,
            kind: NodeKind::Call(func, args),
        })
    }
}
