//! Property tests: the parser and evaluator never panic, well-formed
//! expressions always parse, and evaluation is deterministic.

use coxswain_core::expr::{Val, parse, parse_value};
use proptest::prelude::*;
use serde_json::{Value, json};

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        "[a-zA-Z0-9 é]{0,6}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-c]", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn context() -> impl Strategy<Value = Value> {
    (json_value(), json_value(), json_value(), any::<u8>()).prop_map(|(input, out_a, out_b, it)| {
        json!({
            "input": input,
            "steps": {
                "a": {"status": "completed", "output": out_a, "text": "t", "error": null},
                "b": {"status": "failed", "output": out_b, "text": "", "error": {"message": "m"}}
            },
            "previous": {"status": "skipped", "output": null},
            "loop": {"iteration": it},
            "item": out_b,
            "index": 1,
            "run": {"name": "r", "namespace": "n", "uid": "u", "since": "s"}
        })
    })
}

fn reference() -> impl Strategy<Value = String> {
    let root = prop_oneof![
        Just("$input".to_string()),
        Just("$steps.a.output".to_string()),
        Just("$steps.b.output".to_string()),
        Just("$steps.b.status".to_string()),
        Just("$steps.c.output".to_string()),
        Just("$previous.error".to_string()),
        Just("$previous.output".to_string()),
        Just("$loop.iteration".to_string()),
        Just("$item".to_string()),
        Just("$index".to_string()),
        Just("$run.name".to_string()),
    ];
    let seg = prop_oneof![
        "[a-c]".prop_map(|k| format!(".{k}")),
        (-3i64..4).prop_map(|i| format!("[{i}]")),
        "[a-c -]{1,3}".prop_map(|k| format!("[\"{k}\"]")),
    ];
    (root, prop::collection::vec(seg, 0..4)).prop_map(|(r, segs)| r + &segs.concat())
}

fn literal() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("true".to_string()),
        Just("false".to_string()),
        Just("null".to_string()),
        any::<i32>().prop_map(|i| i.to_string()),
        (-1000.0f64..1000.0).prop_map(|f| format!("{f:.3}")),
        "[a-z A-Z\\\\'\"]{0,5}"
            .prop_map(|s| format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))),
    ]
}

fn expression() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![reference(), literal()];
    leaf.prop_recursive(6, 40, 3, |inner| {
        let op = prop_oneof![
            Just("=="),
            Just("!="),
            Just("<"),
            Just("<="),
            Just(">"),
            Just(">=")
        ];
        prop_oneof![
            (inner.clone(), op, inner.clone()).prop_map(|(a, o, b)| format!("({a}) {o} ({b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a} and {b}")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} or {b})")),
            inner.clone().prop_map(|a| format!("not ({a})")),
            inner.clone().prop_map(|a| format!("len({a})")),
            (
                prop_oneof![Just("contains"), Just("startswith"), Just("endswith")],
                inner.clone(),
                inner
            )
                .prop_map(|(f, a, b)| format!("{f}({a}, {b})")),
        ]
    })
}

fn truthy(v: &Value) -> bool {
    Val::from_json(v).is_truthy()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_text_never_panics(src in any::<String>(), data in context()) {
        if let Ok(e) = parse(&src) {
            let _ = e.eval(&data);
        }
    }

    #[test]
    fn grammar_shaped_text_never_panics(src in "[$a-z_.\\[\\]()'\" 0-9<>=!,-]{0,80}", data in context()) {
        if let Ok(e) = parse(&src) {
            let a = e.eval(&data);
            let b = e.eval(&data);
            prop_assert_eq!(a, b);
        }
        let _ = parse_value(&Value::String(src));
    }

    #[test]
    fn well_formed_expressions_parse_and_evaluate_deterministically(src in expression(), data in context()) {
        let parsed = parse(&src);
        if src.chars().count() <= 2000 {
            prop_assert!(parsed.is_ok(), "{}: {:?}", src, parsed);
        }
        if let Ok(e) = parsed {
            let first = e.eval(&data);
            let second = parse(&src).unwrap().eval(&data);
            prop_assert_eq!(&first, &second);
            // eval_bool agrees with the truth of eval.
            let b = e.eval_bool(&data);
            match (&first, &b) {
                (Ok(v), Ok(t)) => prop_assert_eq!(truthy(v), *t),
                (Err(x), Err(y)) => prop_assert_eq!(x, y),
                _ => prop_assert!(false, "eval and eval_bool disagree on {}", src),
            }
        }
    }

    #[test]
    fn references_resolve_like_conditions(r in reference(), data in context()) {
        let expr = parse(&r).unwrap();
        let template = parse_value(&Value::String(r.clone())).unwrap();
        prop_assert_eq!(expr.eval(&data).unwrap(), template.resolve(&data));
    }

    #[test]
    fn values_without_dollar_pass_through(v in json_value(), data in context()) {
        let t = parse_value(&v).unwrap();
        prop_assert_eq!(t.resolve(&data), v);
    }
}
