//! How deeply JSON nests, and how deep a run's data may nest.
//!
//! Every Run is decoded by the controller whenever it lists Runs, and
//! serde_json refuses documents nested 128 levels deep or more. A run's
//! record holds its input and what its steps build from it, wrapped a few
//! levels deeper (`steps.<key>.output`, a part's item, a loop's passes), so
//! an input nested near that limit makes a status no replica can read, and
//! with it every later list of Runs fails. [`MAX_JSON_DEPTH`] leaves room
//! for every such wrapping; admission refuses deeper inputs and the engine
//! deeper outputs.

use serde_json::Value;

/// The deepest nesting of arrays and objects a Run's input (or anything a
/// flow builds from it) may have: half of serde_json's limit (128), so the
/// levels the status adds around a value never reach that limit.
pub const MAX_JSON_DEPTH: usize = 64;

/// How many arrays and objects nest in `value`: 0 for a number or a text,
/// 1 for `{"a": 1}` or `[]`, 2 for `{"a": [1]}`. Measured without
/// recursion, so no value is too deep to measure.
pub fn json_depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut pending: Vec<(&Value, usize)> = vec![(value, 0)];
    while let Some((value, above)) = pending.pop() {
        let depth = above + 1;
        match value {
            Value::Array(items) => pending.extend(items.iter().map(|c| (c, depth))),
            Value::Object(map) => pending.extend(map.values().map(|c| (c, depth))),
            _ => continue,
        }
        deepest = deepest.max(depth);
    }
    deepest
}

/// How many arrays and objects nest in JSON text, counted on the text
/// itself (brackets outside strings), so a document too deep for a JSON
/// parser to read can still be measured and refused with its depth. Text
/// that is not JSON gives a number too; it means nothing then.
pub fn text_depth(text: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &byte in text {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// `levels` arrays, one inside the other, around `1`.
    fn nested(levels: usize) -> String {
        format!("{}1{}", "[".repeat(levels), "]".repeat(levels))
    }

    #[test]
    fn depth_counts_arrays_and_objects_not_scalars() {
        assert_eq!(json_depth(&json!(1)), 0);
        assert_eq!(json_depth(&json!("[[[")), 0);
        assert_eq!(json_depth(&json!({})), 1);
        assert_eq!(json_depth(&json!({"a": 1, "b": [1, {"c": []}]})), 4);
        assert_eq!(json_depth(&json!([[1], [[2]], 3])), 3);
        let deep: Value = serde_json::from_str(&nested(100)).expect("100 levels read");
        assert_eq!(json_depth(&deep), 100);
    }

    #[test]
    fn text_depth_agrees_with_the_value_and_ignores_brackets_in_strings() {
        for text in [
            r#"{"a": 1, "b": [1, {"c": []}]}"#,
            r#"["[[[", {"k]": "\"[{"}]"#,
            r#"{"x": "\\", "y": [[]]}"#,
            "7",
        ] {
            let value: Value = serde_json::from_str(text).expect(text);
            assert_eq!(text_depth(text.as_bytes()), json_depth(&value), "{text}");
        }
    }

    #[test]
    fn text_too_deep_to_parse_is_still_measured() {
        let text = nested(5_000);
        assert!(serde_json::from_str::<Value>(&text).is_err());
        assert_eq!(text_depth(text.as_bytes()), 5_000);
    }

    #[test]
    fn the_limit_leaves_room_under_the_parsers() {
        // The parser's limit: 127 levels read, 128 not.
        assert!(serde_json::from_str::<Value>(&nested(127)).is_ok());
        assert!(serde_json::from_str::<Value>(&nested(128)).is_err());
        // A record wraps a value in a handful of levels; with the limit
        // there are 63 to spare.
        const { assert!(2 * MAX_JSON_DEPTH <= 128) };
    }
}
