//! The words kubectl reads differently: a YAML 1.1 reader (kubectl, Argo
//! CD, anything on go-yaml) takes the plain `on`, `yes`, `n` for booleans,
//! `0644` for an octal number and `1_000` for a thousand, where YAML 1.2
//! (serde_yaml, so `coxswain lint` and `coxswain run`) reads the text.
//! A step input key `n:` reaches the API server as `"false"`; a
//! `description: yes` is refused by the CRD's schema at `kubectl apply`.
//! Lint reports each one with its line and column, so it is quoted before
//! it ever reaches a cluster.

use saphyr_parser::{Event, Parser, ScalarStyle};

use crate::portable_yaml::YAML_1_1_BOOLEANS;

/// One plain scalar a YAML 1.1 reader takes for something else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadsDifferently {
    /// The document it is in, counting from 0 (`---` starts the next).
    pub document: usize,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// The scalar as written.
    pub text: String,
    /// What YAML 1.1 reads: `true`, `false`, or a number.
    pub as_1_1: String,
    /// Whether it is a mapping key (a field name) rather than a value.
    pub key: bool,
}

impl std::fmt::Display for ReadsDifferently {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = if self.key { "the key" } else { "the value" };
        write!(
            f,
            "line {}, column {}: {what} `{}` is text here, but kubectl and Argo CD (YAML 1.1) read it as {}; quote it: \"{}\"",
            self.line, self.column, self.text, self.as_1_1, self.text
        )
    }
}

/// Where the scan is in the document's nesting: in a mapping, whether the
/// next scalar is a key.
enum Frame {
    Map { next_is_key: bool },
    Seq,
}

/// Every plain, untagged scalar of `text` that YAML 1.1 reads as something
/// other than YAML 1.2 does, in order. Text that does not parse yields what
/// was found before the error (serde_yaml reports the error itself).
pub fn reads_differently(text: &str) -> Vec<ReadsDifferently> {
    let mut found = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut document = 0usize;
    let mut started = false;
    for item in Parser::new_from_str(text) {
        let Ok((event, span)) = item else { break };
        match event {
            Event::DocumentStart(_) => {
                if started {
                    document += 1;
                }
                started = true;
                stack.clear();
            }
            Event::MappingStart(..) => {
                take_slot(&mut stack);
                stack.push(Frame::Map { next_is_key: true });
            }
            Event::SequenceStart(..) => {
                take_slot(&mut stack);
                stack.push(Frame::Seq);
            }
            Event::MappingEnd | Event::SequenceEnd => {
                stack.pop();
            }
            Event::Alias(_) => {
                take_slot(&mut stack);
            }
            Event::Scalar(value, style, _, tag) => {
                let key = take_slot(&mut stack);
                if style == ScalarStyle::Plain
                    && tag.is_none()
                    && let Some(as_1_1) = yaml_1_1_reading(&value)
                {
                    found.push(ReadsDifferently {
                        document,
                        line: span.start.line(),
                        column: span.start.col() + 1,
                        text: value.to_string(),
                        as_1_1,
                        key,
                    });
                }
            }
            _ => {}
        }
    }
    found
}

/// Uses the slot the next node fills; returns whether it is a key.
fn take_slot(stack: &mut [Frame]) -> bool {
    match stack.last_mut() {
        Some(Frame::Map { next_is_key }) => {
            let key = *next_is_key;
            *next_is_key = !key;
            key
        }
        _ => false,
    }
}

/// What YAML 1.1 makes of a plain scalar that YAML 1.2 keeps as text: a
/// boolean word, digits with a leading zero (octal when they can be), or
/// digits with `_`.
fn yaml_1_1_reading(plain: &str) -> Option<String> {
    if YAML_1_1_BOOLEANS.contains(&plain) {
        return match plain.to_ascii_lowercase().as_str() {
            "true" | "false" => None, // both versions read these alike
            "y" | "yes" | "on" => Some("true".into()),
            _ => Some("false".into()),
        };
    }
    let (sign, digits) = match plain.strip_prefix(['-', '+']) {
        Some(rest) => (&plain[..1], rest),
        None => ("", plain),
    };
    if digits.is_empty() || !digits.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if !digits.chars().all(|c| c.is_ascii_digit() || c == '_') {
        return None;
    }
    let bare: String = digits.chars().filter(|c| *c != '_').collect();
    // A leading zero: YAML 1.2 (serde_yaml) keeps the text; go-yaml reads
    // octal digits as an octal number, others as a decimal one.
    if bare.len() > 1 && bare.starts_with('0') {
        if bare.chars().all(|c| ('0'..='7').contains(&c)) {
            let value = i64::from_str_radix(&bare, 8).ok()?;
            return Some(format!("the octal number {sign}{value}"));
        }
        let value: i64 = bare.parse().ok()?;
        return Some(format!("the number {sign}{value}"));
    }
    if digits.contains('_') {
        let value: i64 = bare.parse().ok()?;
        return Some(format!("the number {sign}{value}"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Vec<(usize, usize, String, String, bool)> {
        reads_differently(text)
            .into_iter()
            .map(|r| (r.line, r.column, r.text, r.as_1_1, r.key))
            .collect()
    }

    #[test]
    fn boolean_words_numbers_and_keys_are_found_with_their_place() {
        let text = "\
kind: Flow
spec:
  description: yes
  steps:
    - key: a
      input: {n: 1, ok: on, mode: 0644, big: 1_000, plain: 10, quoted: \"no\", t: true, z: 089}
";
        assert_eq!(
            found(text),
            [
                (3, 16, "yes".into(), "true".into(), false),
                (6, 15, "n".into(), "false".into(), true),
                (6, 25, "on".into(), "true".into(), false),
                (6, 35, "0644".into(), "the octal number 420".into(), false),
                (6, 46, "1_000".into(), "the number 1000".into(), false),
                (6, 90, "089".into(), "the number 89".into(), false),
            ]
        );
        let first = &reads_differently(text)[0];
        assert_eq!(
            first.to_string(),
            "line 3, column 16: the value `yes` is text here, but kubectl and Argo CD (YAML 1.1) read it as true; quote it: \"yes\""
        );
    }

    #[test]
    fn quoted_tagged_block_and_ordinary_scalars_are_left_alone() {
        let text = "\
a: 'on'
b: !!str yes
c: |
  yes
  on
d: [1, 0, -0, 10_, onward, Norway, 1.5]
";
        assert_eq!(
            found(text),
            [(6, 15, "10_".into(), "the number 10".into(), false)]
        );
    }

    #[test]
    fn documents_are_counted_and_sequences_hold_values_not_keys() {
        let text = "a: 1\n---\n- off\n- {y: 2}\n";
        let all = reads_differently(text);
        assert_eq!(
            all.iter()
                .map(|r| (r.document, r.text.as_str(), r.key))
                .collect::<Vec<_>>(),
            [(1, "off", false), (1, "y", true)]
        );
        // Broken YAML gives what came before the error, and no panic.
        assert_eq!(found("a: on\nb: [\n").len(), 1);
    }
}
