//! YAML documents as trees that remember where each node stands, which
//! serde_yaml forgets: `coxswain lint` names the line and column of an
//! unknown key, of a value that does not fit its field, and of the entry a
//! validator problem is about (`after[1]`, `approval.decisions[0]`), down to
//! the character of an expression where reading stopped.

use saphyr_parser::{Event, Parser, ScalarStyle, Span};

/// A place in the text: 1-based line and column (in characters), and the
/// 0-based character index from the start of the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pos {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// 0-based index of the character in the whole text.
    pub index: usize,
}

impl Pos {
    fn start_of(span: &Span) -> Pos {
        Pos {
            line: span.start.line(),
            column: span.start.col() + 1,
            index: span.start.index(),
        }
    }

    fn end_of(span: &Span) -> Pos {
        Pos {
            line: span.end.line(),
            column: span.end.col() + 1,
            index: span.end.index(),
        }
    }
}

/// One node of a YAML document and where it starts: a scalar at its first
/// character (its quote; a block's first line of text), a block mapping at
/// its first key, a flow collection at its bracket.
#[derive(Debug, Clone)]
pub(crate) struct YamlNode {
    /// Where the node starts.
    pub start: Pos,
    /// Just after its last character (a flow collection's closing bracket
    /// included); a block collection ends where the next node starts.
    pub end: Pos,
    /// What it holds.
    pub kind: NodeKind,
}

/// The three kinds of YAML node, and aliases (`*name`), which are not
/// followed.
#[derive(Debug, Clone)]
pub(crate) enum NodeKind {
    /// A scalar: its value and how it is written.
    Scalar(String, ScalarStyle),
    /// A mapping's entries, key and value, in order.
    Map(Vec<(YamlNode, YamlNode)>),
    /// A sequence's items.
    Seq(Vec<YamlNode>),
    /// An alias to an anchored node.
    Alias,
}

/// One step of a path into a document: a mapping's key or a sequence's
/// position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg {
    /// The value under this key.
    Key(String),
    /// The item at this position, from 0.
    Index(usize),
}

/// A collection being read, with the key read last in a mapping.
struct Open {
    node: YamlNode,
    key: Option<YamlNode>,
}

/// The root node of each document of `text`, by document number (from 0,
/// as [`super::reads_differently`] counts them). Reading stops at the first
/// syntax error; the documents read by then are kept.
pub(crate) fn documents(text: &str) -> Vec<Option<YamlNode>> {
    let mut documents: Vec<Option<YamlNode>> = Vec::new();
    let mut stack: Vec<Open> = Vec::new();
    for item in Parser::new_from_str(text) {
        let Ok((event, span)) = item else { break };
        let done = match event {
            Event::DocumentStart(_) => {
                documents.push(None);
                stack.clear();
                continue;
            }
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                let kind = if matches!(event, Event::MappingStart(..)) {
                    NodeKind::Map(Vec::new())
                } else {
                    NodeKind::Seq(Vec::new())
                };
                stack.push(Open {
                    node: YamlNode {
                        start: Pos::start_of(&span),
                        end: Pos::end_of(&span),
                        kind,
                    },
                    key: None,
                });
                continue;
            }
            Event::MappingEnd | Event::SequenceEnd => match stack.pop() {
                Some(mut open) => {
                    open.node.end = Pos::end_of(&span);
                    open.node
                }
                None => continue,
            },
            Event::Scalar(value, style, ..) => YamlNode {
                start: Pos::start_of(&span),
                end: Pos::end_of(&span),
                kind: NodeKind::Scalar(value.into_owned(), style),
            },
            Event::Alias(_) => YamlNode {
                start: Pos::start_of(&span),
                end: Pos::end_of(&span),
                kind: NodeKind::Alias,
            },
            _ => continue,
        };
        match stack.last_mut() {
            None => {
                if let Some(last) = documents.last_mut() {
                    *last = Some(done);
                }
            }
            Some(open) => match &mut open.node.kind {
                NodeKind::Map(entries) => match open.key.take() {
                    None => open.key = Some(done),
                    Some(key) => entries.push((key, done)),
                },
                NodeKind::Seq(items) => items.push(done),
                NodeKind::Scalar(..) | NodeKind::Alias => {}
            },
        }
    }
    documents
}

impl YamlNode {
    /// The scalar text of a node, if it is a scalar (a mapping's key).
    pub fn text(&self) -> Option<&str> {
        match &self.kind {
            NodeKind::Scalar(text, _) => Some(text),
            _ => None,
        }
    }

    /// The value under `key`, with its key node, in a mapping.
    pub fn entry(&self, key: &str) -> Option<(&YamlNode, &YamlNode)> {
        match &self.kind {
            NodeKind::Map(entries) => entries
                .iter()
                .find(|(k, _)| k.text() == Some(key))
                .map(|(k, v)| (k, v)),
            _ => None,
        }
    }

    /// Follows `path` as far as the document has it. Returns the node
    /// reached, the key node it stands under (when the last step taken was
    /// a key) and whether the whole path was followed.
    pub fn follow(&self, path: &[Seg]) -> (&YamlNode, Option<&YamlNode>, bool) {
        let mut node = self;
        let mut key = None;
        for seg in path {
            let next = match (seg, &node.kind) {
                (Seg::Key(k), NodeKind::Map(_)) => node.entry(k).map(|(k, v)| (Some(k), v)),
                (Seg::Index(i), NodeKind::Seq(items)) => items.get(*i).map(|v| (None, v)),
                _ => None,
            };
            let Some((k, v)) = next else {
                return (node, key, false);
            };
            node = v;
            key = k;
        }
        (node, key, true)
    }
}

/// Where a problem stands in the text: the line and column, and whether
/// the column is that of the very character the problem names (else it is
/// where the node starts, and the character is still worth saying).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Place {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// Whether the column is the named character's own.
    pub exact: bool,
}

/// The text of a document as characters, for finding a character of a
/// scalar in it.
pub(crate) struct Source {
    chars: Vec<char>,
    /// The index of the first character of each line, from line 1.
    line_starts: Vec<usize>,
}

impl Source {
    /// Indexes `text`.
    pub fn new(text: &str) -> Self {
        let chars: Vec<char> = text.chars().collect();
        let mut line_starts = vec![0];
        line_starts.extend(
            chars
                .iter()
                .enumerate()
                .filter(|(_, c)| **c == '\n')
                .map(|(i, _)| i + 1),
        );
        Source { chars, line_starts }
    }

    /// The characters of 1-based `line`, without its line break.
    fn line(&self, line: usize) -> Option<&[char]> {
        let start = *self.line_starts.get(line.checked_sub(1)?)?;
        let end = self
            .line_starts
            .get(line)
            .map_or(self.chars.len(), |next| next - 1);
        self.chars.get(start..end.max(start))
    }

    /// Where the problem at `path` stands. `character` is the 1-based
    /// character of the node's text where reading stopped, if the problem
    /// names one. A path that goes further than the document (a `kind` no
    /// step writes, an `after` a join lacks) stands on the deepest node it
    /// reaches. A collection reached by a key stands on its key.
    pub fn place(&self, root: &YamlNode, path: &[Seg], character: Option<usize>) -> Place {
        let (node, key, whole) = root.follow(path);
        let at = |pos: Pos, exact| Place {
            line: pos.line,
            column: pos.column,
            exact,
        };
        match (&node.kind, key) {
            (NodeKind::Scalar(text, style), _) if whole => match character {
                Some(c) => match self.character_in(node.start, text, *style, c) {
                    Some(pos) => at(pos, true),
                    None => at(node.start, false),
                },
                None => at(node.start, true),
            },
            (NodeKind::Map(_) | NodeKind::Seq(_), Some(key)) => at(key.start, character.is_none()),
            _ => at(node.start, character.is_none()),
        }
    }

    /// Where the key at the end of `path` is written (an unknown key), or
    /// the deepest node the path reaches.
    pub fn place_key(&self, root: &YamlNode, path: &[Seg]) -> Place {
        match root.follow(path) {
            (_, Some(key), true) => Place {
                line: key.start.line,
                column: key.start.column,
                exact: true,
            },
            _ => self.place(root, path, None),
        }
    }

    /// The place of the 1-based `character` of a scalar's value, when it
    /// can be found for sure: in a one-line plain or quoted scalar with no
    /// escape before it, or in a literal block (`|`). `None` otherwise.
    fn character_in(
        &self,
        start: Pos,
        text: &str,
        style: ScalarStyle,
        character: usize,
    ) -> Option<Pos> {
        let before: Vec<char> = text.chars().take(character.checked_sub(1)?).collect();
        match style {
            ScalarStyle::Plain | ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted => {
                let skip = usize::from(style != ScalarStyle::Plain);
                let from = start.index + skip;
                let raw = self.chars.get(from..from + before.len())?;
                (raw == before.as_slice() && !before.contains(&'\n')).then_some(Pos {
                    line: start.line,
                    column: start.column + skip + before.len(),
                    index: from + before.len(),
                })
            }
            ScalarStyle::Literal => {
                // The block starts at its first line's text (saphyr's span),
                // and each line of the value is a line of the block after
                // that indentation.
                let lines_before = before.iter().filter(|c| **c == '\n').count();
                let in_line = before.iter().rev().take_while(|c| **c != '\n').count();
                let line = start.line + lines_before;
                let column = start.column + in_line;
                let wanted = text.chars().nth(character - 1);
                let found = self.line(line)?.get(column - 1).copied();
                (wanted.is_none() || wanted == found).then_some(Pos {
                    line,
                    column,
                    index: self.line_starts.get(line - 1)? + column - 1,
                })
            }
            _ => None,
        }
    }
}

/// Splits a problem's path (`steps[2].input["first-name"].x`,
/// `parallel.step.script`) into keys and positions. Empty keys (a trailing
/// `.`) are dropped.
pub(crate) fn parse_path(path: &str) -> Vec<Seg> {
    let mut segs = Vec::new();
    let mut chars = path.chars().peekable();
    let mut key = String::new();
    let flush = |key: &mut String, segs: &mut Vec<Seg>| {
        if !key.is_empty() {
            segs.push(Seg::Key(std::mem::take(key)));
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '.' => flush(&mut key, &mut segs),
            '[' => {
                flush(&mut key, &mut segs);
                let mut inside = String::new();
                let mut quoted = false;
                let mut escaped = false;
                for c in chars.by_ref() {
                    if c == ']' && !quoted {
                        break;
                    }
                    if c == '"' && !escaped {
                        quoted = !quoted;
                    }
                    escaped = c == '\\' && !escaped;
                    inside.push(c);
                }
                if let Ok(i) = inside.parse::<usize>() {
                    segs.push(Seg::Index(i));
                } else if let Ok(k) = serde_json::from_str::<String>(&inside) {
                    segs.push(Seg::Key(k));
                }
            }
            c => key.push(c),
        }
    }
    flush(&mut key, &mut segs);
    segs
}

/// Writes a path the way problems name fields: `script.env[0].value`, a
/// key that is not a plain name as `input["first-name"]`.
pub(crate) fn write_path(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
            Seg::Key(k) => {
                let plain = k
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
                    && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !plain {
                    out.push_str(&format!("[{}]", serde_json::Value::String(k.clone())));
                } else {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(k);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &str) -> Seg {
        Seg::Key(k.into())
    }

    const TEXT: &str = "\
a: 1
---
spec:
  steps:
    - key: draft
      after: [one, \"two\", 'three']
      when: $x == True
      q: \"say \\\"hi\\\" $y\"
      script:
        source: |
          echo one
            $broken
";

    #[test]
    fn nodes_know_where_they_start() {
        let docs = documents(TEXT);
        assert_eq!(docs.len(), 2);
        let root = docs[1].as_ref().expect("second document");
        let step = [key("spec"), key("steps"), Seg::Index(0)];
        let (node, _, whole) = root.follow(&step);
        assert!(whole);
        assert_eq!((node.start.line, node.start.column), (5, 7));
        let source = Source::new(TEXT);
        let at = |path: &[Seg], c| {
            let p = source.place(root, path, c);
            (p.line, p.column, p.exact)
        };
        let with = |more: &[Seg]| [step.as_slice(), more].concat();
        assert_eq!(
            at(&with(&[key("after"), Seg::Index(0)]), Some(1)),
            (6, 15, true)
        );
        assert_eq!(
            at(&with(&[key("after"), Seg::Index(1)]), Some(2)),
            (6, 22, true)
        );
        assert_eq!(
            at(&with(&[key("after"), Seg::Index(2)]), None),
            (6, 27, true)
        );
        assert_eq!(at(&with(&[key("when")]), Some(7)), (7, 19, true));
        // Past an escape the column is not sure: the scalar's start, inexact.
        assert_eq!(at(&with(&[key("q")]), Some(12)), (8, 10, false));
        assert_eq!(at(&with(&[key("q")]), Some(4)), (8, 14, true));
        // A literal block: its lines and their indentation.
        let source_path = with(&[key("script"), key("source")]);
        assert_eq!(at(&source_path, Some(12)), (12, 13, true));
        // A collection stands on its key; a path beyond the document on
        // the deepest node it reaches.
        assert_eq!(at(&with(&[key("script")]), None), (9, 7, true));
        assert_eq!(at(&with(&[key("kind")]), None), (5, 7, true));
        assert_eq!(
            at(&with(&[key("after"), Seg::Index(9)]), Some(1)),
            (6, 7, false)
        );
    }

    #[test]
    fn paths_are_read_and_written_as_problems_name_fields() {
        let path = parse_path("steps[2].input[\"first-name\"].x[10].parallel.step.");
        assert_eq!(
            path,
            [
                key("steps"),
                Seg::Index(2),
                key("input"),
                key("first-name"),
                key("x"),
                Seg::Index(10),
                key("parallel"),
                key("step"),
            ]
        );
        assert_eq!(
            write_path(&path),
            "steps[2].input[\"first-name\"].x[10].parallel.step"
        );
    }

    #[test]
    fn broken_yaml_keeps_the_documents_read_before() {
        let docs = documents("a: 1\n---\nb: [\n");
        assert!(docs[0].is_some());
    }
}
