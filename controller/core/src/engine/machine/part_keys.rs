//! Keys of the parts a parallel step makes from its items. A key names the
//! part in `by_key`, in idempotency keys and (through the controller) in Job
//! names and labels, so it must be unique within the step and safe there;
//! and it is derived from the items alone, so a resumed run finds the same.

use std::collections::HashSet;

use serde_json::Value;

use crate::api::PartStatus;

/// Longest key made from an item: with a `-N` suffix added to tell two
/// items apart it still fits a Kubernetes label value (63 characters).
pub const MAX_PART_KEY_LEN: usize = 40;

/// One part per item, in order, with unique keys: an item whose key was
/// already taken gets `-2`, `-3`… (`ana-b`, `ana-b-2`).
pub(super) fn part_records(items: Vec<Value>) -> Vec<PartStatus> {
    let mut taken = HashSet::new();
    items
        .into_iter()
        .enumerate()
        .map(|(index, item)| {
            let (base, label) = key_and_label(index, &item);
            let key = unique(&base, &mut taken);
            PartStatus {
                key,
                label,
                item: Some(item),
                ..Default::default()
            }
        })
        .collect()
}

/// The wanted key (before de-duplication) and the readable label of an item:
/// a string names itself; an object its `key`, or else its `label`, `name`,
/// `title` or `id`; anything else goes by its position.
fn key_and_label(index: usize, item: &Value) -> (String, String) {
    match item {
        Value::String(s) => (slug(s, index), s.clone()),
        Value::Object(m) => {
            let label = ["label", "name", "title", "key", "id"]
                .iter()
                .find_map(|k| m.get(*k).and_then(Value::as_str))
                .map_or_else(|| index.to_string(), str::to_string);
            let wanted = m.get("key").and_then(Value::as_str).unwrap_or(&label);
            (slug(wanted, index), label)
        }
        other => (index.to_string(), other.to_string()),
    }
}

/// A key from a text: lowercase ASCII letters and digits, every other run
/// of characters one `-`, at most [`MAX_PART_KEY_LEN`] characters; the
/// position when nothing is left.
pub(super) fn slug(text: &str, index: usize) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if out.len() >= MAX_PART_KEY_LEN {
            break;
        }
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    let out = out.trim_end_matches('-');
    if out.is_empty() {
        index.to_string()
    } else {
        out.to_string()
    }
}

/// `base`, or `base-2`, `base-3`… whichever is free first; marks it taken.
fn unique(base: &str, taken: &mut HashSet<String>) -> String {
    let mut key = base.to_string();
    let mut n = 1;
    while taken.contains(&key) {
        n += 1;
        key = format!("{base}-{n}");
    }
    taken.insert(key.clone());
    key
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn keys(items: Value) -> Vec<String> {
        let Value::Array(items) = items else {
            panic!("a list")
        };
        part_records(items).into_iter().map(|p| p.key).collect()
    }

    #[test]
    fn keys_that_would_clash_are_told_apart() {
        assert_eq!(
            keys(json!(["Ana B", "ana-b", "ana_b", "Ana B"])),
            ["ana-b", "ana-b-2", "ana-b-3", "ana-b-4"]
        );
        // A derived key may meet an item that spells its suffix.
        assert_eq!(keys(json!(["x", "x", "x-2"])), ["x", "x-2", "x-2-2"]);
        assert_eq!(keys(json!([7, "1", {"n": 1}])), ["0", "1", "2"]);
        assert_eq!(keys(json!([1, "0"])), ["0", "0-2"]);
    }

    #[test]
    fn keys_are_safe_for_names_and_labels() {
        let long = "A".repeat(100);
        let got = keys(json!([{"key": "x/../y"}, "Größe über", "", long, {"key": "../.."}]));
        assert_eq!(got[..4], ["x-y", "gr-e-ber", "2", "a".repeat(40).as_str()]);
        assert_eq!(got[4], "4");
        for key in &got {
            assert!(key.len() <= MAX_PART_KEY_LEN, "{key}");
            assert!(
                key.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{key}"
            );
            assert!(!key.starts_with('-') && !key.ends_with('-'), "{key}");
        }
    }

    #[test]
    fn the_same_items_give_the_same_keys() {
        let items = json!(["Ana B", {"key": "Ana B"}, {"name": "ana b"}, null]);
        assert_eq!(keys(items.clone()), keys(items));
    }
}
