//! A linear pre-scan of YAML text that refuses brackets nested absurdly deep.
//!
//! serde_yaml (libyaml) takes time quadratic in the nesting of flow-style
//! collections (`[`…`]`, `{`…`}`) before its recursion limit refuses them:
//! 80,000 levels took 34 s, so a hostile file could stall `coxswain lint` in
//! a GitOps pipeline. Block-style nesting (indentation, `- - -`) is read in
//! linear time and refused by the same limit, so only brackets are counted.
//!
//! The scan errs on the side of letting text through: a bracket inside a
//! plain scalar in block context, a quoted scalar or a comment is not
//! counted, and the contents of `|`/`>` block scalars are skipped, so a
//! valid flow is never refused; what slips through still meets serde_yaml's
//! own limit.

/// The deepest bracket nesting accepted: serde_yaml refuses anything deeper
/// than 128 levels of any kind anyway, so no readable flow is lost.
pub const MAX_BRACKET_DEPTH: usize = 128;

/// YAML whose brackets nest deeper than [`MAX_BRACKET_DEPTH`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "line {line}, column {column}: `{opener}` nests brackets more than {MAX_BRACKET_DEPTH} levels deep; no flow needs that many, so the file is not read"
)]
pub struct TooDeep {
    /// 1-based line of the bracket that went one level too deep.
    pub line: usize,
    /// 1-based column (in characters) of that bracket.
    pub column: usize,
    /// The bracket: `[` or `{`.
    pub opener: char,
}

/// Where the scan is inside the text.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Normal,
    SingleQuoted,
    DoubleQuoted,
    DoubleQuotedEscape,
    Comment,
    /// Lines of a block scalar: skipped while indented more than this.
    BlockScalar(usize),
}

/// The scanner's state, one character at a time.
struct Scan {
    mode: Mode,
    depth: usize,
    line: usize,
    column: usize,
    /// The indentation of the current line, once its first non-space is seen.
    indent: Option<usize>,
    /// The last character on this line that was not a space, and whether
    /// spaces came after it.
    last: Option<char>,
    spaced: bool,
    /// A `|` or `>` starting a block scalar was seen on this line.
    block_header: bool,
}

/// Refuses `text` when its flow-style brackets nest deeper than
/// [`MAX_BRACKET_DEPTH`], naming where, in one pass over the text.
pub fn check_nesting(text: &str) -> Result<(), TooDeep> {
    let mut scan = Scan {
        mode: Mode::Normal,
        depth: 0,
        line: 1,
        column: 0,
        indent: None,
        last: None,
        spaced: false,
        block_header: false,
    };
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        scan.column += 1;
        if c == '\n' {
            scan.end_line();
            continue;
        }
        if scan.skipping_block_line(c) {
            continue;
        }
        match scan.mode {
            Mode::Comment | Mode::BlockScalar(_) => {}
            Mode::SingleQuoted if c == '\'' => {
                if chars.peek() == Some(&'\'') {
                    chars.next();
                    scan.column += 1;
                } else {
                    scan.close_quote(c);
                }
            }
            Mode::DoubleQuoted if c == '\\' => scan.mode = Mode::DoubleQuotedEscape,
            Mode::DoubleQuoted if c == '"' => scan.close_quote(c),
            Mode::DoubleQuotedEscape => scan.mode = Mode::DoubleQuoted,
            Mode::SingleQuoted | Mode::DoubleQuoted => {}
            Mode::Normal => scan.normal(c)?,
        }
    }
    Ok(())
}

impl Scan {
    /// Whether a node may start here: at the start of a line, or after an
    /// indicator (`:`, `-`, `?`) and a space, or, inside brackets, after `[`,
    /// `{` or `,` (outside brackets they are plain text). Inside brackets a
    /// value may also follow `:` directly, as in JSON (`{"a":"b"}`).
    fn at_node_start(&self) -> bool {
        match self.last {
            None => true,
            Some('[' | '{' | ',') => self.depth > 0,
            Some(':') => self.spaced || self.depth > 0,
            Some('-' | '?') => self.spaced,
            Some(_) => false,
        }
    }

    fn normal(&mut self, c: char) -> Result<(), TooDeep> {
        if c == ' ' || c == '\t' {
            self.spaced = self.last.is_some();
            return Ok(());
        }
        if self.indent.is_none() {
            self.indent = Some(self.column - 1);
        }
        let start = self.at_node_start();
        let in_flow = self.depth > 0;
        match c {
            '#' if self.last.is_none() || self.spaced => self.mode = Mode::Comment,
            '\'' if start => self.mode = Mode::SingleQuoted,
            '"' if start => self.mode = Mode::DoubleQuoted,
            '|' | '>' if start && !in_flow => self.block_header = true,
            '[' | '{' if start || in_flow => {
                self.depth += 1;
                if self.depth > MAX_BRACKET_DEPTH {
                    return Err(TooDeep {
                        line: self.line,
                        column: self.column,
                        opener: c,
                    });
                }
            }
            ']' | '}' if in_flow => self.depth -= 1,
            _ => {}
        }
        self.last = Some(c);
        self.spaced = false;
        Ok(())
    }

    fn close_quote(&mut self, quote: char) {
        self.mode = Mode::Normal;
        self.last = Some(quote);
        self.spaced = false;
    }

    /// At a new line: a comment ends, and a block scalar header makes the
    /// following, more indented lines its content.
    fn end_line(&mut self) {
        match self.mode {
            Mode::Comment => self.mode = Mode::Normal,
            Mode::Normal if self.block_header => {
                self.mode = Mode::BlockScalar(self.indent.unwrap_or(0));
            }
            _ => {}
        }
        self.block_header = false;
        self.line += 1;
        self.column = 0;
        self.indent = None;
        self.last = None;
        self.spaced = false;
    }

    /// In a block scalar, whether `c` still belongs to its content: spaces
    /// up to the scalar's indentation do; the first other character decides
    /// whether the scalar goes on (indented more) or has ended.
    fn skipping_block_line(&mut self, c: char) -> bool {
        let Mode::BlockScalar(parent) = self.mode else {
            return false;
        };
        if self.indent.is_some() {
            return true;
        }
        if c == ' ' {
            return true;
        }
        let indent = self.column - 1;
        if indent > parent {
            self.indent = Some(indent);
            return true;
        }
        self.mode = Mode::Normal;
        false
    }
}

#[cfg(test)]
mod tests;
