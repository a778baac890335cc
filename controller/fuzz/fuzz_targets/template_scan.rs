//! Fuzzes template parsing and rendering.
//!
//! The first byte picks the place, the rest is the template text. Every
//! placeholder that parses gets a value (the input text itself, which often
//! holds braces, quotes and line breaks) built along its path. Checked
//! invariants: nothing panics; error positions fall inside the text (or just
//! after it); a JSON body that passes `check_json` renders to valid JSON; a
//! rendered header never holds a line break.

#![no_main]

use coxswain_core::template::{Place, Segment, Source, parse};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value, json};

/// A value that `segments` lead to `leaf` in (list positions over 64 are left
/// unreachable, which renders as a missing value).
fn along(segments: &[Segment], leaf: Value) -> Value {
    match segments.split_first() {
        None => leaf,
        Some((Segment::Name(name), rest)) => {
            let mut map = Map::new();
            map.insert(name.clone(), along(rest, leaf));
            Value::Object(map)
        }
        Some((Segment::Index(index), rest)) if *index <= 64 => {
            let mut list = vec![Value::Null; *index];
            list.push(along(rest, leaf));
            Value::Array(list)
        }
        Some((Segment::Index(_), _)) => json!([]),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let src = String::from_utf8_lossy(rest);
    let chars = src.chars().count();
    let (_, place) = Place::ALL[usize::from(selector) % Place::ALL.len()];
    let template = match parse(&src, place) {
        Ok(template) => template,
        Err(error) => {
            assert!(
                error.position >= 1 && error.position <= chars + 1,
                "{error}"
            );
            return;
        }
    };

    let leaf = if selector & 0x80 == 0 {
        Value::String(src.to_string())
    } else {
        json!({"s": src, "n": -1.5, "l": [true, null]})
    };
    let mut steps = Map::new();
    for placeholder in template.placeholders() {
        assert!(placeholder.position >= 1 && placeholder.position <= chars);
        let output = match placeholder.path.source {
            Source::Json => along(&placeholder.path.segments, leaf.clone()),
            Source::Text => json!({}),
        };
        steps.insert(
            placeholder.key.clone(),
            json!({"status": "completed", "text": src, "output": output}),
        );
    }
    let ctx = json!({"input": leaf, "steps": steps});

    let checked = template.check_json();
    if let Err(error) = &checked {
        assert!(
            error.position >= 1 && error.position <= chars + 1,
            "{error}"
        );
    }
    if let Ok(out) = template.render(&ctx) {
        if place == Place::Json
            && checked.is_ok()
            && let Err(error) = serde_json::from_str::<Value>(&out)
        {
            panic!("checked body rendered to invalid JSON ({error}): {out}");
        }
        if place == Place::Header {
            assert!(!out.contains(['\r', '\n']));
        }
    }
});
