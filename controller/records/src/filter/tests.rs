//! The SQL text of readable cases, the composition rules and the number
//! helpers. What the SQL *means* is tested against a real PostgreSQL and
//! the evaluator in tests/where_sql.rs.

use super::*;
use coxswain_core::expr::parse;

/// Compiles `src` with `$item` as the record and `input` as `$input`,
/// parameters from `$2`.
fn compiled(src: &str, input: Value) -> Filter {
    let e = parse(src).unwrap_or_else(|err| panic!("{src}: {err}"));
    let b = bind(&e, &Root::Item, &json!({ "input": input })).expect("binds");
    compile(&e, &Root::Item, &b, 2).expect("compiles")
}

#[test]
fn a_key_compares_as_the_text_column() {
    let f = compiled(r#"$item.key == "ticket-1""#, json!({}));
    assert_eq!(f.keep, "(key = $2::text)");
    assert_eq!(f.drop, "(NOT (key = $2::text))");
    assert_eq!(f.fail, "FALSE");
    assert_eq!(f.params, vec![Param::Text("ticket-1".into())]);
    assert!(f.exact && f.not_compiled.is_empty());
    assert_eq!(f.undecided(), "FALSE");
    assert_eq!(
        f.candidates(),
        "(NOT COALESCE((NOT (key = $2::text)), FALSE))"
    );
}

#[test]
fn a_bound_text_is_a_jsonb_parameter_with_a_containment_hint() {
    let f = compiled(
        "$item.value.component == $input.component",
        json!({"component": "db"}),
    );
    assert_eq!(
        f.keep,
        "((value @> $3::jsonb) AND ((value -> 'component') = $2::jsonb))"
    );
    assert_eq!(
        f.drop,
        "((value -> 'component') IS DISTINCT FROM $2::jsonb)"
    );
    assert_eq!(f.fail, "FALSE");
    assert_eq!(
        f.params,
        vec![
            Param::Json(json!("db")),
            Param::Json(json!({"component": "db"}))
        ]
    );
    assert!(f.exact);
    // The value is never in the text.
    assert!(!f.keep.contains("db") && !f.drop.contains("db"));
}

#[test]
fn texts_order_by_bytes_and_fail_on_anything_else() {
    let f = compiled(r#"$item.value.name < "m""#, json!({}));
    assert_eq!(
        f.keep,
        r#"(jsonb_typeof((value -> 'name')) = 'string' AND ((value -> 'name') #>> '{}') COLLATE "C" < $2::text)"#
    );
    assert_eq!(
        f.drop,
        r#"(jsonb_typeof((value -> 'name')) = 'string' AND ((value -> 'name') #>> '{}') COLLATE "C" >= $2::text)"#
    );
    assert_eq!(
        f.fail,
        "(jsonb_typeof((value -> 'name')) IS DISTINCT FROM 'string')"
    );
    assert!(f.exact);
}

#[test]
fn null_checks_cover_a_missing_path() {
    let f = compiled("$item.value.a != null", json!({}));
    assert_eq!(f.keep, "((value -> 'a') <> 'null'::jsonb)");
    assert_eq!(
        f.drop,
        "(COALESCE((value -> 'a'), 'null'::jsonb) = 'null'::jsonb)"
    );
    assert_eq!(f.fail, "FALSE");
    assert!(f.exact && f.params.is_empty());
}

#[test]
fn a_number_range_uses_the_jsonb_order_first_and_fails_on_other_types() {
    let f = compiled("$item.value.priority >= 2", json!({}));
    // jsonb orders numbers by value: an expression index on the path can
    // narrow before the exact test.
    assert!(
        f.keep
            .starts_with("(((value -> 'priority') >= $3::jsonb) AND (CASE"),
        "{}",
        f.keep
    );
    assert_eq!(
        f.fail,
        "(COALESCE(jsonb_typeof((value -> 'priority')), 'null') NOT IN ('number'))"
    );
    assert_eq!(f.params, vec![Param::Int(2), Param::Json(json!(2))]);
    // Numbers serde_json reads inexactly may sit too close to 2 to tell.
    assert!(!f.exact && f.not_compiled.is_empty());
}

#[test]
fn list_positions_read_only_lists_and_keys_are_quoted() {
    let f = compiled(
        r#"$item.value.tags[-1] == "x" or $item.value["it's"] == true"#,
        json!({}),
    );
    assert!(
        f.keep
            .contains("jsonb_path_query_first(value -> 'tags', 'strict $[last - 0]', '{}', true)")
    );
    assert!(
        f.keep.contains("(value -> 'it''s') = $3::jsonb"),
        "{}",
        f.keep
    );
    assert!(f.exact);
}

#[test]
fn parameters_start_where_the_caller_says() {
    let e = parse(r#"$item.run == "r" and $item.step == "s""#).unwrap();
    let f = compile(&e, &Root::Item, &Bindings::new(), 5).unwrap();
    assert_eq!(f.keep, "((run = $5::text) AND (step = $6::text))");
    assert_eq!(f.typed_params().len(), 2);
    assert_eq!(f.typed_params()[0].1, Type::TEXT);
}

#[test]
fn a_repeated_constant_is_one_parameter() {
    let f = compiled(r#"$item.key == "a" or $item.run == "a""#, json!({}));
    assert_eq!(f.params, vec![Param::Text("a".into())]);
    // -0.0 and 0.0 are one value to `==`, yet two parameters.
    let e = parse("$item.value.n < -0.0 or $item.value.n < 0.0").unwrap();
    let f = compile(&e, &Root::Item, &Bindings::new(), 2).unwrap();
    let floats = f
        .params
        .iter()
        .filter(|p| matches!(p, Param::Float(_)))
        .count();
    assert_eq!(floats, 2, "{:?}", f.params);
}

#[test]
fn constants_fold_with_the_evaluator() {
    let f = compiled("1 < 2.5 and $input.s == \"x\"", json!({"s": "x"}));
    assert_eq!(
        (f.keep.as_str(), f.drop.as_str(), f.fail.as_str()),
        ("TRUE", "FALSE", "FALSE")
    );
    let f = compiled("$input.n < \"a\"", json!({"n": 1}));
    assert_eq!((f.keep.as_str(), f.fail.as_str()), ("FALSE", "TRUE"));
    let f = compiled("len($input.l) == 3", json!({"l": [1, 2, 3]}));
    assert_eq!(f.keep, "TRUE");
    assert!(f.params.is_empty());
}

/// The narrowing rule: a part left to memory selects nothing, so the right
/// side of an `and` drops records only when the left side can never fail.
#[test]
fn and_narrows_only_past_a_part_that_cannot_fail() {
    let nul = json!({"t": "a\u{0}"});
    // Compiled left side: it narrows whatever the right is.
    let f = compiled(
        r#"$item.key == "x" and $item.value.a < $input.t"#,
        nul.clone(),
    );
    assert_eq!(f.drop, "(NOT (key = $2::text))");
    assert_eq!((f.keep.as_str(), f.fail.as_str()), ("FALSE", "FALSE"));
    assert!(!f.exact);
    assert_eq!(
        f.not_compiled,
        vec![NotCompiled {
            position: 22,
            reason: "a text holding the character NUL cannot be sent to PostgreSQL".into()
        }]
    );
    // Left side left to memory and able to fail (an order): a record the
    // right side drops may still fail, so nothing is dropped.
    let f = compiled(
        r#"$item.value.a < $input.t and $item.key == "x""#,
        nul.clone(),
    );
    assert_eq!(f.drop, "FALSE");
    assert_eq!(f.candidates(), "TRUE");
    // Left side left to memory but unable to fail (an equality): the right
    // side drops.
    let f = compiled(
        r#"$item.value.a == $input.t and $item.key == "x""#,
        nul.clone(),
    );
    assert_eq!(f.drop, "(NOT (key = $2::text))");
    // `or` keeps past a left side that cannot fail, the mirror image.
    let f = compiled(r#"$item.value.a == $input.t or $item.key == "x""#, nul);
    assert_eq!(f.keep, "(key = $2::text)");
    assert_eq!(f.drop, "FALSE");
}

#[test]
fn and_or_not_compose_the_three_predicates() {
    // `a and b` fails where a fails, or where a holds and b fails.
    let f = compiled(r#"$item.key == "k" and $item.value.s < "m""#, json!({}));
    assert_eq!(
        f.fail,
        "((key = $2::text) AND (jsonb_typeof((value -> 's')) IS DISTINCT FROM 'string'))"
    );
    // `not` swaps keep and drop and keeps fail.
    let g = compiled(
        r#"not ($item.key == "k" and $item.value.s < "m")"#,
        json!({}),
    );
    assert_eq!(
        (g.keep.as_str(), g.drop.as_str()),
        (f.drop.as_str(), f.keep.as_str())
    );
    assert_eq!(g.fail, f.fail);
    // `a or b` fails where a fails, or where a is false and b fails.
    let f = compiled(r#"$item.value.s < "m" or $item.key == "k""#, json!({}));
    assert!(
        f.fail
            .starts_with("(jsonb_typeof((value -> 's')) IS DISTINCT FROM 'string')")
    );
    // It holds where a holds, or where a is false and b holds (a may fail,
    // so b alone is not enough).
    assert_eq!(
        f.keep,
        r#"((jsonb_typeof((value -> 's')) = 'string' AND ((value -> 's') #>> '{}') COLLATE "C" < $2::text) OR ((jsonb_typeof((value -> 's')) = 'string' AND ((value -> 's') #>> '{}') COLLATE "C" >= $2::text) AND (key = $3::text)))"#
    );
}

#[test]
fn an_unbound_reference_is_an_error() {
    let e = parse(r#"$item.key == $steps.fetch.output.key"#).unwrap();
    let err = compile(&e, &Root::Item, &Bindings::new(), 2).unwrap_err();
    assert_eq!(
        err,
        CompileError::Unbound {
            reference: "$steps.fetch.output.key".into(),
            position: 14
        }
    );
    assert_eq!(
        err.to_string(),
        "`$steps.fetch.output.key` (character 14) has no bound value"
    );
}

#[test]
fn bind_reads_every_other_reference_as_the_evaluator_would() {
    let e = parse(r#"$item.key == $input.a and $item.run == $input.missing.deeper"#).unwrap();
    let b = bind(&e, &Root::Item, &json!({"input": {"a": [1, "x"]}})).unwrap();
    assert_eq!(
        b,
        Bindings::from([
            ("$input.a".to_string(), json!([1, "x"])),
            ("$input.missing.deeper".to_string(), Value::Null),
        ])
    );
}

#[test]
fn record_fields_map_to_columns_and_anything_else_is_null() {
    for (src, sql) in [
        (
            r#"$item.savedAt >= "2026""#,
            r#"to_char(saved_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') COLLATE "C" >= $2::text"#,
        ),
        ("$item.version > 3", "version > $2::int8"),
        ("$item.version > 2.5", "version >= $2::int8"),
    ] {
        let f = compiled(src, json!({}));
        assert_eq!(f.keep, format!("({sql})"), "{src}");
        assert!(f.exact);
    }
    // A path into a text, an unknown field, a position on the record: null.
    for src in [
        "$item.key.x == null",
        "$item.size == null",
        "$item[0] == null",
    ] {
        let f = compiled(src, json!({}));
        assert_eq!((f.keep.as_str(), f.exact), ("TRUE", true), "{src}");
    }
    // The whole record is an object.
    let f = compiled("$item != null", json!({}));
    assert!(
        f.keep
            .contains("jsonb_build_object('key', key, 'value', value")
    );
}

#[test]
fn whole_numbers_against_floats() {
    use CompareOp::*;
    assert_eq!(int_vs_float(Lt, 2.5), IntCmp::Cmp(Le, 2));
    assert_eq!(int_vs_float(Gt, 2.5), IntCmp::Cmp(Ge, 3));
    assert_eq!(int_vs_float(Ge, -2.5), IntCmp::Cmp(Ge, -2));
    assert_eq!(int_vs_float(Le, -2.5), IntCmp::Cmp(Le, -3));
    assert_eq!(int_vs_float(Eq, 2.5), IntCmp::Never);
    assert_eq!(int_vs_float(Ne, 2.5), IntCmp::Always);
    assert_eq!(int_vs_float(Eq, 3.0), IntCmp::Cmp(Eq, 3));
    assert_eq!(int_vs_float(Eq, -0.0), IntCmp::Cmp(Eq, 0));
    // 2^60 exactly, not its shortest decimal 1152921504606847000.
    assert_eq!(
        int_vs_float(Lt, 1_152_921_504_606_846_976.0),
        IntCmp::Cmp(Lt, 1_152_921_504_606_846_976)
    );
    assert_eq!(int_vs_float(Lt, 1e300), IntCmp::Always);
    assert_eq!(int_vs_float(Gt, 1e300), IntCmp::Never);
    assert_eq!(int_vs_float(Gt, -1e300), IntCmp::Always);
    assert_eq!(int_vs_float(Eq, -1e300), IntCmp::Never);
}

#[test]
fn the_shortest_case_is_written() {
    assert_eq!(case("k", &[("a", P::True), ("b", P::True)]), P::True);
    assert_eq!(
        case("k", &[("a", P::True), ("b", P::False), ("c", P::False)]),
        P::Sql("(k IN ('a'))".into())
    );
    assert_eq!(
        case("k", &[("a", P::True), ("b", P::False), ("c", P::True)]),
        P::Sql("(k NOT IN ('b'))".into())
    );
    assert_eq!(
        case(
            "k",
            &[
                ("a", P::Sql("(x)".into())),
                ("b", P::False),
                ("c", P::False)
            ]
        ),
        P::Sql("(CASE k WHEN 'a' THEN (x) ELSE FALSE END)".into())
    );
}
