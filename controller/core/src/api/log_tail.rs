//! The last lines a script wrote to stderr, kept in its attempt's status so
//! a failed (or puzzling) attempt can be read after its pod is gone, and
//! bounded so a chatty script cannot grow the Run past what etcd stores.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The most bytes of log an attempt's status keeps.
pub const LOG_TAIL_BYTES: usize = 4096;

/// The end of an attempt's log, as its status keeps it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogTail {
    /// The last whole lines, at most [`LOG_TAIL_BYTES`] of them.
    pub text: String,
    /// Earlier lines were dropped to stay within the bound.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
}

impl LogTail {
    /// The tail of `log` within `keep` bytes: whole lines only (a cut line
    /// is dropped, unless it is the only one), invalid UTF-8 replaced, and
    /// `None` when nothing was written. `dropped` says `log` is itself the
    /// end of a longer log, so the tail is cut even when all of it fits.
    pub fn of(log: &[u8], keep: usize, dropped: bool) -> Option<LogTail> {
        if log.is_empty() {
            return None;
        }
        let mut cut = dropped;
        let mut start = 0;
        if dropped && !log.starts_with(b"\n") && log.len() <= keep {
            start = line_after_first_break(log);
        }
        if log.len() > keep {
            cut = true;
            start = log.len() - keep;
            // Start at a line: skip what is left of the line cut in two.
            if start > 0
                && log[start - 1] != b'\n'
                && let Some(newline) = log[start..].iter().position(|&b| b == b'\n')
                && start + newline + 1 < log.len()
            {
                start += newline + 1;
            }
        }
        let mut text = String::from_utf8_lossy(&log[start..]).into_owned();
        // A multi-byte character cut at the start shows as replacement
        // characters; they carry nothing.
        if cut {
            text = text.trim_start_matches('\u{FFFD}').to_string();
        }
        Some(LogTail { text, cut })
    }
}

/// Where the line after the first line break of `log` starts, when one
/// follows it; else 0 (a log of one cut line is kept as it is).
fn line_after_first_break(log: &[u8]) -> usize {
    match log.iter().position(|&b| b == b'\n') {
        Some(newline) if newline + 1 < log.len() => newline + 1,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_log_is_kept_whole() {
        let tail = LogTail::of(b"one\ntwo\n", 100, false).expect("a tail");
        assert_eq!(tail.text, "one\ntwo\n");
        assert!(!tail.cut);
        assert_eq!(LogTail::of(b"", 100, false), None);
    }

    #[test]
    fn a_long_log_keeps_its_last_whole_lines_and_says_it_was_cut() {
        let log: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        let tail = LogTail::of(log.as_bytes(), 30, false).expect("a tail");
        assert!(tail.cut);
        assert!(tail.text.len() <= 30, "{:?}", tail.text);
        assert!(tail.text.starts_with("line "), "{:?}", tail.text);
        assert!(tail.text.ends_with("line 100\n"), "{:?}", tail.text);
    }

    #[test]
    fn the_end_of_a_longer_log_is_cut_at_a_line() {
        let tail = LogTail::of(b"ne 7\nline 8\nline 9\n", 100, true).expect("a tail");
        assert!(tail.cut);
        assert_eq!(tail.text, "line 8\nline 9\n");
    }

    #[test]
    fn one_long_line_is_cut_rather_than_lost() {
        let log = "é".repeat(100);
        let tail = LogTail::of(log.as_bytes(), 31, false).expect("a tail");
        assert!(tail.cut);
        assert!(!tail.text.is_empty());
        assert!(tail.text.chars().all(|c| c == 'é'), "{:?}", tail.text);
    }
}
