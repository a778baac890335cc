//! One test per rule of the expression language: references, operators,
//! functions, conditions and values, and the error each misuse gets.

use serde_json::{Value, json};

use super::*;

fn ctx() -> Value {
    json!({
        "input": {
            "customer": {"email": "a@example.com"},
            "items": ["first", "middle", "last"],
            "first-name": "Ada",
            "brief": "Write a haiku",
            "priority": "high",
            "dry_run": false,
            "count": 3,
            "companies": ["acme", "globex"],
            "tags": ["x", 1, {"a": [1, 2]}]
        },
        "steps": {
            "review": {"status": "completed", "output": {"approved": true, "score": 0.85, "feedback": "tighter"}, "text": "ok", "error": null},
            "draft": {"status": "completed", "output": {"score": 0.9}, "text": "draft text", "error": null},
            "search": {"status": "completed", "output": {"results": [1, 2], "top_result": "wiki"}, "text": "", "error": null},
            "score": {"status": "completed", "output": {}, "text": "", "error": null},
            "lookup": {"status": "failed", "output": null, "text": "", "error": {"message": "timeout"}},
            "research": {"status": "completed", "output": {
                "parts": [{"key": "acme", "label": "Acme", "status": "completed", "output": {"summary": "s"}, "error": null}],
                "by_key": {"acme": {"summary": "s"}},
                "companies": [{"name": "Acme"}]
            }}
        },
        "previous": {"status": "skipped", "output": null, "text": null, "error": null},
        "loop": {"iteration": 2},
        "item": {"name": "acme"},
        "index": 0,
        "run": {"name": "r1", "namespace": "ns", "uid": "u-1", "since": "2026-01-01T00:00:00Z"}
    })
}

fn eval(src: &str) -> Value {
    parse(src)
        .unwrap_or_else(|e| panic!("{src}: {e}"))
        .eval(&ctx())
        .unwrap_or_else(|e| panic!("{src}: {e}"))
}

fn truth(src: &str) -> bool {
    parse(src)
        .unwrap_or_else(|e| panic!("{src}: {e}"))
        .eval_bool(&ctx())
        .unwrap_or_else(|e| panic!("{src}: {e}"))
}

fn syntax(src: &str) -> SyntaxError {
    match parse(src) {
        Ok(e) => panic!("{src} parsed: {e:?}"),
        Err(e) => e,
    }
}

/// The syntax error `src` gets, which the test knows says `fragment`.
fn syntax_saying(src: &str, fragment: &str) -> SyntaxError {
    let e = syntax(src);
    assert!(e.message.contains(fragment), "{src}: {}", e.message);
    e
}

fn runtime(src: &str) -> EvalError {
    match parse(src)
        .unwrap_or_else(|e| panic!("{src}: {e}"))
        .eval(&ctx())
    {
        Ok(v) => panic!("{src} evaluated to {v}"),
        Err(e) => e,
    }
}

// ---- literals ----

#[test]
fn numbers_integers_negatives_and_decimals() {
    assert_eq!(eval("3"), json!(3));
    assert_eq!(eval("-1"), json!(-1));
    assert_eq!(eval("0.75"), json!(0.75));
    assert_eq!(eval("-0.5"), json!(-0.5));
}

#[test]
fn numbers_refuse_trailing_dot_and_bare_minus() {
    assert_eq!(syntax("1.").position, 3);
    assert_eq!(syntax("- 1").position, 1);
    assert!(syntax("1e5").message.contains("digit"));
}

#[test]
fn text_in_single_or_double_quotes() {
    assert_eq!(eval("'EU'"), json!("EU"));
    assert_eq!(eval("\"EU\""), json!("EU"));
}

#[test]
fn text_escapes() {
    assert_eq!(eval(r#""say \"hi\"""#), json!("say \"hi\""));
    assert_eq!(eval(r"'it\'s'"), json!("it's"));
    assert_eq!(eval(r"'a\\b'"), json!("a\\b"));
    assert_eq!(eval(r"'a\nb\tc'"), json!("a\nb\tc"));
}

#[test]
fn unknown_escape_is_refused_at_the_backslash() {
    let e = syntax(r"'a\qb'");
    assert_eq!(e.position, 3);
    assert!(e.message.contains("escape"));
}

#[test]
fn missing_quote_reports_where_reading_stopped() {
    let e = syntax_saying("$input.priority == 'low", "missing closing quote");
    assert_eq!(e.position, 24);
    assert!(e.message.contains("character 20"), "{}", e.message);
}

#[test]
fn true_false_null_lowercase() {
    assert_eq!(eval("true"), json!(true));
    assert_eq!(eval("false"), json!(false));
    assert_eq!(eval("null"), json!(null));
}

#[test]
fn capitalised_literals_are_refused_with_a_hint() {
    for (src, hint) in [("True", "true"), ("FALSE", "false"), ("Null", "null")] {
        let e = syntax_saying(src, &format!("`{hint}`"));
        assert_eq!(e.position, 1);
    }
    let e = syntax("$input.dry_run == True");
    assert_eq!(e.position, 19);
}

/// `when: True` alone: lowercase is not enough, since a bare `when: true`
/// is a boolean kubectl refuses for the expression's text.
#[test]
fn a_capitalised_boolean_alone_is_told_to_be_quoted_too() {
    let e = syntax(" True ");
    assert_eq!(
        e.message,
        "write `true` in lowercase and quoted (`\"true\"`), not `True`: in YAML a bare true is a boolean, and kubectl refuses it where an expression (text) is expected"
    );
    assert!(!syntax("$input.x == True").message.contains("quoted"));
}

#[test]
fn capitalised_operators_are_refused_with_a_hint() {
    let e = syntax_saying("$input.a == 1 AND $input.b == 2", "`and`");
    assert_eq!(e.position, 15);
    syntax_saying("$input.a Or $input.b", "`or`");
    let e = syntax_saying("NOT $input.a", "`not`");
    assert_eq!(e.position, 1);
}

// ---- references ----

#[test]
fn reference_roots() {
    assert_eq!(eval("$input.brief"), json!("Write a haiku"));
    assert_eq!(eval("$steps.review.status"), json!("completed"));
    assert_eq!(eval("$steps.review.text"), json!("ok"));
    assert_eq!(eval("$steps.lookup.error.message"), json!("timeout"));
    assert_eq!(eval("$steps.review.output.feedback"), json!("tighter"));
    assert_eq!(eval("$previous.status"), json!("skipped"));
    assert_eq!(eval("$loop.iteration"), json!(2));
    assert_eq!(eval("$item.name"), json!("acme"));
    assert_eq!(eval("$index"), json!(0));
    assert_eq!(eval("$run.name"), json!("r1"));
    assert_eq!(eval("$run.namespace"), json!("ns"));
    assert_eq!(eval("$run.uid"), json!("u-1"));
    assert_eq!(eval("$run.since"), json!("2026-01-01T00:00:00Z"));
}

#[test]
fn bare_previous_and_bare_step_read_the_whole_record() {
    assert_eq!(eval("$previous")["status"], json!("skipped"));
    assert_eq!(eval("$steps.lookup")["status"], json!("failed"));
}

#[test]
fn skipped_previous_step_has_null_output() {
    assert_eq!(eval("$previous.output"), json!(null));
}

#[test]
fn previous_on_the_first_step_is_all_null() {
    let first = json!({"input": {}});
    let e = parse("$previous.output == null and $previous.status == null").unwrap();
    assert!(e.eval_bool(&first).unwrap());
}

#[test]
fn paths_fields_positions_negative_and_quoted() {
    assert_eq!(eval("$input.customer.email"), json!("a@example.com"));
    assert_eq!(eval("$input.items[0]"), json!("first"));
    assert_eq!(eval("$input.items[-1]"), json!("last"));
    assert_eq!(eval("$input[\"first-name\"]"), json!("Ada"));
    assert_eq!(eval("$input['first-name']"), json!("Ada"));
}

#[test]
fn paths_go_any_depth() {
    assert_eq!(
        eval("$steps.research.output.companies[0].name"),
        json!("Acme")
    );
    assert_eq!(eval("$input.tags[2].a[-1]"), json!(2));
}

#[test]
fn missing_values_are_null_not_errors() {
    assert_eq!(eval("$input.nope"), json!(null));
    assert_eq!(eval("$input.items[3]"), json!(null));
    assert_eq!(eval("$input.items[-4]"), json!(null));
    assert_eq!(eval("$input.items.name"), json!(null));
    assert_eq!(eval("$input.brief[0]"), json!(null));
    assert_eq!(eval("$steps.never_ran.output.x"), json!(null));
    assert_eq!(eval("$input.customer[0]"), json!(null));
}

#[test]
fn unknown_root_is_refused() {
    let e = syntax_saying("$foo.bar == 1", "$foo");
    assert_eq!(e.position, 2);
    syntax_saying("$Input.x", "`$input`");
}

#[test]
fn bad_step_field_is_refused() {
    let e = syntax_saying("$steps.x.bogus == 1", "bogus");
    assert_eq!(e.position, 10);
    assert!(syntax("$previous.bogus").message.contains("output"));
}

#[test]
fn step_keys_follow_the_key_rule() {
    assert!(parse("$steps.draft_2.output").is_ok());
    let e = syntax("$steps.Draft.output");
    assert_eq!(e.position, 8);
    assert!(syntax("$steps.2nd.output").message.contains("lowercase"));
    syntax_saying("$steps.my-step.output", "_");
    assert_eq!(syntax("$steps").position, 7);
}

#[test]
fn loop_and_run_need_their_field() {
    assert!(syntax("$loop").message.contains("iteration"));
    assert!(syntax("$loop.count").message.contains("iteration"));
    assert!(syntax("$run").message.contains("namespace"));
    assert!(syntax("$run.id").message.contains("uid"));
}

#[test]
fn path_mistakes_get_hints() {
    assert!(syntax("$input.items.0").message.contains("[0]"));
    assert!(
        syntax("$input.first-name")
            .message
            .contains("[\"first-name\"]")
    );
    assert!(syntax("$input.items[0").message.contains("]"));
    assert!(syntax("$input.items[x]").message.contains("[0]"));
    assert!(syntax("$input.items[1.5]").message.contains("whole number"));
}

#[test]
fn references_report_root_key_and_position() {
    let e =
        parse("$input.a == 1 and $steps.review.output.score > $steps.draft.output.score").unwrap();
    let refs: Vec<_> = e.references().collect();
    assert_eq!(refs.len(), 3);
    assert_eq!(refs[0].root(), &Root::Input);
    assert_eq!(refs[0].step_key(), None);
    assert_eq!(refs[1].step_key(), Some("review"));
    assert_eq!(refs[1].position(), 19);
    assert_eq!(refs[1].key_position(), 26);
    assert_eq!(refs[1].field(), Some(Field::Output));
    assert_eq!(refs[1].path(), &[Segment::Key("score".into())]);
    assert_eq!(refs[2].text(), "$steps.draft.output.score");
}

#[test]
fn positions_count_characters_not_bytes() {
    let e = syntax("'héllo' == $nope");
    assert_eq!(e.position, 13);
    let e = parse("'日本' == $steps.x.output").unwrap();
    assert_eq!(e.references().next().unwrap().position(), 9);
}

// ---- operators ----

#[test]
fn typical_conditions_hold() {
    assert!(truth("$steps.review.output.approved == true"));
    // draft score 0.9 >= 0.8, iteration 2 < 3
    assert!(truth(
        "$steps.draft.output.score >= 0.8 and $loop.iteration < 3"
    ));
    // priority is "high" and dry_run false
    assert!(truth("not ($input.priority == \"low\" or $input.dry_run)"));
}

#[test]
fn comparisons_bind_tighter_than_not() {
    // not ($input.count == 1) → true; (not $input.count) == 1 would be false
    assert!(truth("not $input.count == 1"));
    assert!(!truth("not $input.count == 3"));
}

#[test]
fn not_binds_tighter_than_and_and_and_tighter_than_or() {
    assert!(truth("true or false and false"));
    assert!(!truth("(true or false) and false"));
    assert!(truth("not false and true"));
    assert!(!truth("not (false or true)"));
    assert!(truth("not not true"));
}

#[test]
fn and_short_circuits() {
    let e = parse("$steps.score.output.value != null and $steps.score.output.value > 0.8").unwrap();
    assert_eq!(e.eval_bool(&ctx()), Ok(false));
    assert!(!truth("false and len(null) > 0"));
}

#[test]
fn or_short_circuits() {
    assert!(truth("true or len(null) > 0"));
}

#[test]
fn chained_comparison_is_refused_with_a_hint() {
    let e = syntax_saying("1 < $input.count < 5", "and");
    assert_eq!(e.position, 18);
    assert!(
        e.message.contains("1 < $input.count and $input.count < …"),
        "{}",
        e.message
    );
    assert!(syntax("1 == 1 == true").message.contains("chained"));
}

#[test]
fn all_six_comparisons() {
    assert!(truth("1 < 2") && truth("2 <= 2") && truth("3 > 2") && truth("2 >= 2"));
    assert!(truth("1 == 1") && truth("1 != 2"));
    assert!(!truth("2 < 1") && !truth("3 <= 2") && !truth("1 > 2") && !truth("1 >= 2"));
}

#[test]
fn operator_typos_get_hints() {
    assert!(syntax("$input.a = 1").message.contains("=="));
    assert!(syntax("!$input.a").message.contains("not"));
    assert!(syntax("true && false").message.contains("and"));
    assert!(syntax("true || false").message.contains("or"));
}

#[test]
fn parentheses_group() {
    assert!(truth("(((true)))"));
    let e = syntax_saying("(true", "character 1");
    assert_eq!(e.position, 6);
    assert!(syntax("true)").message.contains(')'));
}

#[test]
fn bare_value_is_read_for_truth() {
    assert!(!truth("$input.dry_run"));
    assert!(truth("$input.brief"));
    assert!(truth("$input.items"));
}

#[test]
fn truthiness_of_each_kind() {
    let data = json!({"input": {"f": false, "n": null, "z": 0, "zf": 0.0, "e": "", "l": [], "o": {},
        "t": true, "one": 1, "s": "x", "l1": [0], "o1": {"a": null}, "neg": -1}});
    for (path, want) in [
        ("f", false),
        ("n", false),
        ("z", false),
        ("zf", false),
        ("e", false),
        ("l", false),
        ("o", false),
        ("missing", false),
        ("t", true),
        ("one", true),
        ("s", true),
        ("l1", true),
        ("o1", true),
        ("neg", true),
    ] {
        let e = parse(&format!("$input.{path}")).unwrap();
        assert_eq!(e.eval_bool(&data), Ok(want), "{path}");
    }
    assert!(truth("'false'"));
    assert!(!truth("0"));
}

// ---- equality ----

#[test]
fn equality_is_exact() {
    assert!(truth("1 == 1.0"));
    assert!(!truth("true == 1"));
    assert!(!truth("\"1\" == 1"));
    assert!(!truth("null == false"));
    assert!(!truth("0 == ''"));
    assert!(truth("null == null"));
    assert!(truth("$input.nope == null"));
    assert!(truth("'a' != 'A'"));
}

#[test]
fn lists_and_objects_are_equal_when_everything_inside_is() {
    let data = json!({"input": {
        "a": [1, {"x": [1.0, "s"]}], "b": [1.0, {"x": [1, "s"]}], "c": [1, {"x": [1, "t"]}],
        "d": [1], "o": {"k": 1, "m": [true]}, "p": {"m": [true], "k": 1.0}, "q": {"k": 1}
    }});
    let check = |src: &str| parse(src).unwrap().eval_bool(&data).unwrap();
    assert!(check("$input.a == $input.b"));
    assert!(!check("$input.a == $input.c"));
    assert!(!check("$input.a == $input.d"));
    assert!(check("$input.o == $input.p"));
    assert!(!check("$input.o == $input.q"));
    assert!(!check("$input.d == $input.q"));
}

#[test]
fn integer_literals_beyond_i64_stay_exact() {
    assert!(!truth("9223372036854775807 == 9223372036854775808"));
    assert!(truth("9223372036854775807 < 9223372036854775808"));
    assert!(truth("9223372036854775808 == 9223372036854775808"));
    assert!(truth("18446744073709551615 > 18446744073709551614"));
    assert_eq!(
        eval("9223372036854775808"),
        json!(9_223_372_036_854_775_808u64)
    );
    // Beyond 64 bits a whole number is a float, compared exactly.
    assert!(truth("18446744073709551616 > 18446744073709551615"));
}

#[test]
fn integers_and_floats_compare_exactly() {
    assert!(!truth("9007199254740993 == 9007199254740992.0"));
    assert!(truth("9007199254740993 > 9007199254740992.0"));
    assert!(truth("9007199254740992 == 9007199254740992.0"));
    assert!(!truth("9223372036854775807 == 9223372036854775808.0"));
    let data = json!({"input": {"i": 9007199254740993u64, "f": 9007199254740992.0, "l": [9007199254740992.0]}});
    let check = |src: &str| parse(src).unwrap().eval_bool(&data).unwrap();
    assert!(!check("$input.i == $input.f"));
    assert!(check("$input.f < $input.i"));
    assert!(!check("contains($input.l, $input.i)"));
}

#[test]
fn large_integers_compare_exactly() {
    let data =
        json!({"input": {"a": 9007199254740993u64, "b": 9007199254740992u64, "u": u64::MAX}});
    let check = |src: &str| parse(src).unwrap().eval_bool(&data).unwrap();
    assert!(!check("$input.a == $input.b"));
    assert!(check("$input.a > $input.b"));
    assert!(check("$input.u > 9223372036854775807"));
}

// ---- ordering ----

#[test]
fn numbers_order_with_numbers() {
    assert!(truth("-1 < 0.5"));
    assert!(truth("$steps.review.output.score > 0.8"));
}

#[test]
fn text_orders_by_character_capitals_first() {
    assert!(truth("'Zebra' < 'apple'"));
    assert!(truth("'abc' < 'abd'"));
    assert!(truth("'ab' < 'abc'"));
    assert!(truth("'é' > 'z'"));
}

#[test]
fn ordering_null_is_a_runtime_error_naming_the_expression() {
    let e = runtime("$steps.score.output.value > 0.8");
    assert_eq!(e.code(), "workflow.expression_error");
    assert_eq!(e.expression, "$steps.score.output.value > 0.8");
    assert!(
        e.message.contains("null") && e.message.contains("number"),
        "{}",
        e.message
    );
    assert!(
        e.to_string()
            .contains("\"$steps.score.output.value > 0.8\"")
    );
}

#[test]
fn ordering_mixed_types_bools_and_lists_is_a_runtime_error() {
    for src in [
        "'1' < 2",
        "true < false",
        "$input.items > 1",
        "$input.customer >= $input.customer",
        "null <= null",
    ] {
        let e = runtime(src);
        assert_eq!(e.code(), "workflow.expression_error");
    }
}

#[test]
fn runtime_errors_are_never_quietly_false() {
    let e = parse("not ($steps.score.output.value > 0.8)").unwrap();
    assert!(e.eval_bool(&ctx()).is_err());
}

// ---- functions ----

#[test]
fn contains_substring_and_membership() {
    assert!(truth("contains($input.brief, 'haiku')"));
    assert!(!truth("contains($input.brief, 'sonnet')"));
    assert!(truth("contains($input.companies, 'acme')"));
    assert!(!truth("contains($input.companies, 'ac')"));
    assert!(truth("contains($input.tags, 1.0)"));
    assert!(!truth("contains($input.tags, '1')"));
}

#[test]
fn contains_on_null_is_false() {
    assert!(!truth("contains($input.nope, 'x')"));
    assert!(!truth("contains(null, null)"));
}

#[test]
fn startswith_and_endswith() {
    assert!(truth("startswith($input.brief, 'Write')"));
    assert!(!truth("startswith($input.brief, 'write')"));
    assert!(truth("endswith($input.customer.email, '@example.com')"));
    assert!(!truth("startswith($input.nope, 'x')"));
    assert!(!truth("endswith(null, 'x')"));
}

#[test]
fn a_missing_list_never_passes() {
    assert!(!truth("contains($steps.never_ran.output.items, 'x')"));
    assert!(truth("not contains($steps.never_ran.output.items, 'x')"));
}

#[test]
fn text_functions_refuse_other_types_at_runtime() {
    for src in [
        "contains(1, 1)",
        "contains($input.customer, 'email')",
        "startswith($input.items, 'f')",
        "endswith(true, 'e')",
        "contains('abc', 1)",
        "startswith('abc', null)",
    ] {
        assert_eq!(runtime(src).code(), "workflow.expression_error", "{src}");
    }
}

#[test]
fn len_counts_characters_items_and_keys() {
    assert_eq!(eval("len('héllo')"), json!(5));
    assert_eq!(eval("len($input.items)"), json!(3));
    assert_eq!(eval("len($input.customer)"), json!(1));
    assert_eq!(eval("len('')"), json!(0));
}

#[test]
fn len_of_null_number_or_bool_is_a_runtime_error() {
    let e = runtime("len($steps.never_ran.output.results) > 0");
    assert!(e.message.contains("null"), "{}", e.message);
    assert_eq!(runtime("len(3)").code(), "workflow.expression_error");
    assert_eq!(runtime("len(true)").code(), "workflow.expression_error");
}

#[test]
fn unknown_function_is_refused() {
    let e = syntax_saying("$input.a and lower($input.b)", "unknown function `lower`");
    assert_eq!(e.position, 14);
    assert!(syntax("LEN($input.a)").message.contains("`len`"));
}

#[test]
fn wrong_number_of_arguments_is_refused() {
    let e = syntax_saying("len($input.a, $input.b)", "1 argument");
    assert_eq!(e.position, 13);
    let e = syntax_saying("contains($input.a)", "2 arguments");
    assert_eq!(e.position, 18);
    assert!(syntax("len()").message.contains("not 0"));
}

#[test]
fn function_results_compare() {
    assert!(truth(
        "len($input.items) == 3 and contains($input.brief, 'haiku') == true"
    ));
}

// ---- other syntax errors ----

#[test]
fn empty_expression_is_refused() {
    assert_eq!(syntax("").position, 1);
    assert_eq!(syntax("   ").position, 1);
}

#[test]
fn unexpected_character_and_bare_words() {
    let e = syntax("$input.a == #");
    assert_eq!(e.position, 13);
    assert!(e.message.contains("unexpected character"));
    let e = syntax_saying("$input.region == EU", "'EU'");
    assert_eq!(e.position, 18);
}

#[test]
fn incomplete_expression_reports_the_end() {
    let e = syntax("$input.a and");
    assert_eq!(e.position, 13);
    assert!(e.message.contains("ends too soon"));
    assert_eq!(syntax("$input.a ==").position, 12);
    assert!(syntax("$input.a == not true").message.contains("not"));
}

#[test]
fn syntax_error_display_names_the_character() {
    assert_eq!(
        syntax("1 = 1").to_string(),
        "a single `=` isn't a comparison; write `==` (character 3)"
    );
}

#[test]
fn typical_expressions_parse() {
    for src in [
        "len($steps.search.output.results) > 0",
        "$steps.review.output.approved == true",
        "$steps.lookup.status == \"failed\"",
        "$loop.iteration >= 3 or ($steps.review.output.score != null and $steps.review.output.score >= 0.9)",
        "$steps.research.output.by_key.acme",
        "$steps.research.output.parts",
        "$steps.lookup.error.message",
    ] {
        parse(src).unwrap_or_else(|e| panic!("{src}: {e}"));
    }
    assert!(truth("len($steps.search.output.results) > 0"));
    assert!(truth("$steps.lookup.status == \"failed\""));
    assert!(!truth(
        "$loop.iteration >= 3 or ($steps.review.output.score != null and $steps.review.output.score >= 0.9)"
    ));
    assert_eq!(
        eval("$steps.research.output.by_key.acme"),
        json!({"summary": "s"})
    );
}

// ---- limits ----

#[test]
fn length_limit_is_2000_characters() {
    let ok = format!("'{}'", "a".repeat(MAX_CHARS - 2));
    assert!(parse(&ok).is_ok());
    let long = format!("'{}'", "a".repeat(MAX_CHARS - 1));
    let e = syntax(&long);
    assert_eq!(e.position, 2001);
    assert!(e.message.contains("2000"));
    // 2,000 multi-byte characters are within the limit.
    let wide = format!("'{}'", "é".repeat(MAX_CHARS - 2));
    assert!(parse(&wide).is_ok());
}

#[test]
fn a_megabyte_expression_is_refused_by_its_length_before_any_token_is_read() {
    // Lexed, a megabyte of `a` would be one unknown name at character 1, and
    // `True` at the start would be refused at character 1: the length error
    // at character 2001 proves reading stopped there, before any token.
    let big = "a".repeat(1 << 20);
    let e = syntax_saying(&big, "at most 2000 characters");
    assert_eq!(e.position, 2001);
    let bad_start = format!("True == {}", "1".repeat(1 << 20));
    assert_eq!(syntax(&bad_start).position, 2001);
    // 2000 characters are read as usual.
    let at_limit = format!("'{}'", "x".repeat(1998));
    assert!(parse(&at_limit).is_ok());
}

#[test]
fn ten_thousand_open_parentheses_are_refused_without_stack_overflow() {
    let deep = "(".repeat(10_000);
    let e = syntax(&deep);
    assert_eq!(e.position, 2001);
    let deep_short = format!("{}true{}", "(".repeat(990), ")".repeat(990));
    let e = syntax(&deep_short);
    assert_eq!(e.position, 33);
    assert!(e.message.contains("32"));
}

#[test]
fn nesting_limit_is_32_levels() {
    let ok = format!("{}true{}", "(".repeat(32), ")".repeat(32));
    assert!(parse(&ok).is_ok());
    let bad = format!("{}true{}", "(".repeat(33), ")".repeat(33));
    assert_eq!(syntax(&bad).position, 33);
    let nots_ok = format!("{}true", "not ".repeat(32));
    assert!(parse(&nots_ok).is_ok());
    let nots_bad = format!("{}true", "not ".repeat(33));
    assert_eq!(syntax(&nots_bad).position, 32 * 4 + 1);
    // function calls count too
    let mut calls = "'x'".to_string();
    for _ in 0..33 {
        calls = format!("contains({calls}, 'x')");
    }
    assert!(syntax(&calls).message.contains("nest"));
    // mixed: 16 parentheses around 16 nots are 32 levels
    let mixed = format!(
        "{}{}true{}",
        "(".repeat(16),
        "not ".repeat(16),
        ")".repeat(16)
    );
    assert!(parse(&mixed).is_ok());
    let mixed_bad = format!(
        "{}{}true{}",
        "(".repeat(17),
        "not ".repeat(16),
        ")".repeat(17)
    );
    assert!(parse(&mixed_bad).is_err());
}

// ---- values ----

fn value(v: Value) -> Value {
    parse_value(&v)
        .unwrap_or_else(|e| panic!("{v}: {e:?}"))
        .resolve(&ctx())
}

#[test]
fn a_value_with_references_resolves() {
    let got = value(json!({
        "brief": "$input.brief",
        "feedback": "$steps.review.output.feedback",
        "sources": ["$steps.search.output.top_result", "internal wiki"],
        "tone": "formal"
    }));
    assert_eq!(
        got,
        json!({"brief": "Write a haiku", "feedback": "tighter", "sources": ["wiki", "internal wiki"], "tone": "formal"})
    );
}

#[test]
fn value_double_dollar_is_a_literal_dollar() {
    assert_eq!(value(json!("$$5 per seat")), json!("$5 per seat"));
    assert_eq!(value(json!({"price": ["$$5"]})), json!({"price": ["$5"]}));
    assert_eq!(value(json!("$$")), json!("$"));
}

#[test]
fn value_other_text_passes_through() {
    assert_eq!(value(json!("costs $5")), json!("costs $5"));
    assert_eq!(
        value(json!({"n": 1, "b": true, "x": null, "s": "plain"})),
        json!({"n": 1, "b": true, "x": null, "s": "plain"})
    );
    let t = parse_value(&json!({"a": [1, "x"]})).unwrap();
    assert!(t.is_fixed());
}

#[test]
fn value_reference_keeps_the_json_type() {
    assert_eq!(
        value(json!("$input.items")),
        json!(["first", "middle", "last"])
    );
    assert_eq!(value(json!("$loop.iteration")), json!(2));
    assert_eq!(
        value(json!({"findings": "$steps.research.output.parts"}))["findings"][0]["key"],
        json!("acme")
    );
}

#[test]
fn value_missing_reference_is_null() {
    assert_eq!(
        value(json!({"feedback": "$steps.nope.output.feedback"})),
        json!({"feedback": null})
    );
}

#[test]
fn value_must_be_exactly_one_reference() {
    let errs = parse_value_at(&json!({"brief": "$input.brief and more"}), "input").unwrap_err();
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].path, "input.brief");
    assert_eq!(errs[0].position, 13);
    assert!(errs[0].message.contains("$$"), "{}", errs[0].message);
    let errs = parse_value(&json!("$5 per seat")).unwrap_err();
    assert_eq!(errs[0].position, 2);
    assert!(errs[0].message.contains("$$"));
}

#[test]
fn value_reports_every_bad_string_with_its_path() {
    let errs = parse_value_at(
        &json!({"a": "$foo", "list": ["ok", "$steps.X.output"], "first-name": "$input.x y", "fine": "$input"}),
        "input",
    )
    .unwrap_err();
    let paths: Vec<_> = errs.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["input.a", "input[\"first-name\"]", "input.list[1]"]);
    assert_eq!(errs[2].position, 8);
    assert_eq!(
        errs[0].to_string(),
        format!("input.a: {} (character 2)", errs[0].message)
    );
}

#[test]
fn value_references_are_listed_with_their_paths() {
    let t = parse_value_at(
        &json!({"brief": "$input.brief", "s": ["$steps.review.output", "x"]}),
        "input",
    )
    .unwrap();
    let located: Vec<_> = t
        .located_references()
        .map(|(p, r)| (p.to_string(), r.text().to_string()))
        .collect();
    assert_eq!(
        located,
        [
            ("input.brief".to_string(), "$input.brief".to_string()),
            ("input.s[0]".to_string(), "$steps.review.output".to_string())
        ]
    );
    assert_eq!(
        t.references()
            .filter_map(|r| r.step_key())
            .collect::<Vec<_>>(),
        ["review"]
    );
}

#[test]
fn value_for_parallel_items() {
    let t = parse_value_at(&json!("$input.companies"), "parallel.items").unwrap();
    assert_eq!(t.resolve(&ctx()), json!(["acme", "globex"]));
}

// ---- evaluation API ----

#[test]
fn eval_borrowed_does_not_copy() {
    let data = ctx();
    let e = parse("$input.items").unwrap();
    match e.eval_borrowed(&data).unwrap() {
        Val::List(l) => assert!(std::ptr::eq(
            l,
            data["input"]["items"].as_array().unwrap().as_slice()
        )),
        other => panic!("{other:?}"),
    }
}

#[test]
fn eval_works_through_dyn_scope() {
    let data = ctx();
    let scope: &dyn crate::scope::Scope = &data;
    assert_eq!(
        parse("$loop.iteration + 0")
            .map(|_| ())
            .unwrap_err()
            .position,
        17
    );
    assert!(
        parse("$loop.iteration == 2")
            .unwrap()
            .eval_bool(scope)
            .unwrap()
    );
}

#[test]
fn source_is_kept() {
    assert_eq!(parse(" $input.a ").unwrap().source(), " $input.a ");
}
