//! How deep a JSON value nests, and how deep a value the engine will keep.
//!
//! serde_json refuses to read a document whose arrays and objects nest 128
//! levels deep. A Run's status is read back by every list and watch of Runs,
//! so one value too deep to read would make every later list fail, for every
//! Run in every namespace. The bound here is what a single value (a run
//! input, a step's output, the run's output) may reach; the rest of the 128
//! is left to the levels the record and the API's list around it add.

use serde_json::Value;

/// The deepest nesting of arrays and objects a value kept in a Run may have.
/// Half of serde_json's limit: the record puts a value at most about ten
/// levels further in (`status.steps.KEY.parts[i].attempts[j].output`, inside
/// the API server's `items` list), and a flow's loops and parallel steps wrap
/// their children's outputs a few levels more.
pub const MAX_JSON_DEPTH: usize = 64;

/// How many arrays and objects nest in `value` at its deepest: `0` for a
/// scalar, `1` for `{}` or `[1, 2]`, `2` for `{"a": []}`. Walks without
/// recursion, so any value can be measured.
pub fn json_depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 1)];
    while let Some((value, level)) = stack.pop() {
        match value {
            Value::Array(items) => {
                deepest = deepest.max(level);
                stack.extend(items.iter().map(|v| (v, level + 1)));
            }
            Value::Object(map) => {
                deepest = deepest.max(level);
                stack.extend(map.values().map(|v| (v, level + 1)));
            }
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A value `levels` deep: objects inside lists inside objects….
    pub(crate) fn nested(levels: usize) -> Value {
        let mut value = json!("bottom");
        for level in 0..levels {
            value = if level % 2 == 0 {
                json!([value])
            } else {
                json!({ "k": value })
            };
        }
        value
    }

    #[test]
    fn scalars_are_flat_and_each_container_is_a_level() {
        assert_eq!(json_depth(&json!(1)), 0);
        assert_eq!(json_depth(&json!("[[[{{{")), 0);
        assert_eq!(json_depth(&json!({})), 1);
        assert_eq!(json_depth(&json!([])), 1);
        assert_eq!(json_depth(&json!({"a": 1, "b": [1, {"c": []}]})), 4);
        assert_eq!(json_depth(&json!([[1], [[2]], 3])), 3);
        assert_eq!(json_depth(&nested(MAX_JSON_DEPTH)), MAX_JSON_DEPTH);
    }

    #[test]
    fn the_depth_is_what_serde_json_counts() {
        // serde_json reads 127 levels and refuses 128.
        let text = |levels: usize| format!("{}{}", "[".repeat(levels), "]".repeat(levels));
        let read = serde_json::from_str::<Value>(&text(127)).unwrap();
        assert_eq!(json_depth(&read), 127);
        let err = serde_json::from_str::<Value>(&text(128)).unwrap_err();
        assert!(err.to_string().contains("recursion limit"), "{err}");
    }
}
