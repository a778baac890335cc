//! Parses arbitrary UTF-8 as an expression and as a value string, and
//! evaluates whatever parses against a fixed run context. Any panic, stack
//! overflow or hang is a bug.
#![no_main]

use std::sync::OnceLock;

use coxswain_core::expr::{parse, parse_value};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

fn context() -> &'static Value {
    static CTX: OnceLock<Value> = OnceLock::new();
    CTX.get_or_init(|| {
        json!({
            "input": {"a": [1, 2.5, "x", null, {"b": true}], "s": "héllo", "n": 0, "first-name": "Ada"},
            "steps": {
                "a": {"status": "completed", "output": {"score": 0.9, "items": []}, "text": "t", "error": null},
                "b": {"status": "failed", "output": null, "text": "", "error": {"message": "m"}}
            },
            "previous": {"status": "skipped", "output": null},
            "loop": {"iteration": 3},
            "item": "x",
            "index": 2,
            "run": {"name": "r", "namespace": "n", "uid": "u", "since": "s"}
        })
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(expr) = parse(src) {
        let a = expr.eval(context());
        let b = expr.eval_bool(context());
        assert_eq!(a.is_ok(), b.is_ok());
        for r in expr.references() {
            assert!(r.position() >= 1 && r.position() <= src.chars().count());
        }
    } else if let Err(e) = parse(src) {
        assert!(
            e.position >= 1 && e.position <= src.chars().count() + 1,
            "{e:?}"
        );
    }
    if let Ok(t) = parse_value(&Value::String(src.to_string())) {
        let _ = t.resolve(context());
    }
});
