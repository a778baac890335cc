//! Behaviour of placeholders through the public API: one test per rule.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::scope::Scope;

fn step(output: Value, text: &str) -> Value {
    json!({"status": "completed", "output": output, "text": text})
}

fn ctx() -> Value {
    json!({
        "input": {"brief": "Why we moved to Rust", "n": 3},
        "steps": {
            "draft": step(json!({
                "title": "Say \"hi\"\nnow ✓",
                "count": 42,
                "ratio": 0.5,
                "ok": true,
                "none": null,
                "tags": ["a", "b"],
                "meta": {"k": "v"},
                "items": [{"title": "first"}, {"title": "second"}],
                "by_year": {"2024": "y"},
                "path": "a/b?c#d@e f",
                "inject": "{{secret.text}} $steps.secret.output",
                "lines": "x\r\nEvil: 1",
                "deep": {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": "bottom"}}}}}}}}
            }), "The full reply"),
            "failed": {"status": "failed", "output": {"x": 1}, "text": "t", "error": {"code": "E", "message": "m"}},
            "skipped": {"status": "skipped"},
            "empty": {"status": "completed", "output": null},
            "secret": step(json!("s3cret"), "s3cret")
        }
    })
}

fn render(src: &str, place: Place) -> Result<String, RenderError> {
    parse(src, place).expect("template parses").render(&ctx())
}

fn parse_err(src: &str) -> TemplateError {
    parse(src, Place::Text).expect_err("template is refused")
}

/// The error `src` gets, which the test knows says `fragment`.
fn parse_err_saying(src: &str, fragment: &str) -> TemplateError {
    let err = parse_err(src);
    assert!(err.message.contains(fragment), "{src}: {}", err.message);
    err
}

// ---- places -------------------------------------------------------------

#[test]
fn url_values_cannot_add_separators() {
    let out = render(
        "https://x.test/p/{{draft.json.path}}?q={{draft.json.count}}",
        Place::Url,
    )
    .unwrap();
    assert_eq!(out, "https://x.test/p/a%2Fb%3Fc%23d%40e%20f?q=42");
}

fn url_with_id(id: &str) -> Result<String, RenderError> {
    let ctx = json!({"input": {"id": id}});
    parse(
        "https://cms.test/api/drafts/{{input.json.id}}/publish?from={{input.json.id}}",
        Place::Url,
    )
    .unwrap()
    .render(&ctx)
}

#[test]
fn url_path_values_that_read_as_dots_are_refused_naming_the_placeholder() {
    for id in [
        ".",
        "..",
        "%2e",
        "%2E%2e",
        ".%2e",
        "%252e%252e",
        "a/..",
        "..\\x",
    ] {
        let err = url_with_id(id).expect_err(id);
        assert_eq!(
            err,
            RenderError::DotSegment {
                placeholder: "{{input.json.id}}".into(),
                position: 29,
            },
            "{id}"
        );
        assert_eq!(
            err.to_string(),
            "The value for {{input.json.id}} would make a segment of the URL's path `.` or `..` (also when percent-decoded), which would send the request to another path; a value in the path cannot be `.` or `..`."
        );
    }
    // Dots that are not a whole segment, and dots in the query, are values.
    for id in ["...", "v1.2"] {
        let url = format!("https://cms.test/api/drafts/{id}/publish?from={id}");
        assert_eq!(url_with_id(id).unwrap(), url);
    }
    let ctx = json!({"input": {"id": ".."}});
    let query_only = parse(
        "https://cms.test/api?from={{input.json.id}}#{{input.json.id}}",
        Place::Url,
    )
    .unwrap()
    .render(&ctx);
    assert_eq!(query_only.unwrap(), "https://cms.test/api?from=..#..");
}

#[test]
fn a_url_value_glued_to_a_dot_the_author_wrote_is_judged_with_it() {
    let ctx = json!({"input": {"dot": "."}});
    let err = parse("https://cms.test/a/.{{input.json.dot}}/b", Place::Url)
        .unwrap()
        .render(&ctx)
        .unwrap_err();
    assert!(matches!(err, RenderError::DotSegment { .. }), "{err:?}");
    // Dots the author wrote alone are the author's path.
    let out = parse("https://cms.test/a/../{{input.json.dot}}x", Place::Url)
        .unwrap()
        .render(&ctx)
        .unwrap();
    assert_eq!(out, "https://cms.test/a/../.x");
}

#[test]
fn url_values_are_encoded_as_utf8_bytes() {
    let out = render("/t/{{draft.json.title}}", Place::Url).unwrap();
    assert_eq!(out, "/t/Say%20%22hi%22%0Anow%20%E2%9C%93");
}

#[test]
fn header_values_are_text() {
    assert_eq!(
        render("Bearer {{secret.text}} {{draft.json.count}}", Place::Header).unwrap(),
        "Bearer s3cret 42"
    );
}

#[test]
fn header_value_with_line_break_is_refused() {
    let err = render("x {{draft.json.lines}}", Place::Header).unwrap_err();
    assert_eq!(
        err,
        RenderError::HeaderLineBreak {
            placeholder: "{{draft.json.lines}}".into(),
            position: 3
        }
    );
    // a bare LF too
    let err = render("{{draft.json.title}}", Place::Header).unwrap_err();
    assert!(matches!(err, RenderError::HeaderLineBreak { .. }));
}

#[test]
fn header_template_with_literal_line_break_is_refused_when_saved() {
    let err = parse("a\r\nX-Evil: 1 {{draft.text}}", Place::Header).unwrap_err();
    assert_eq!(err.position, 2);
    assert!(parse("a\nb", Place::Text).is_ok());
}

#[test]
fn text_places_write_strings_as_themselves_and_others_as_compact_json() {
    for place in [Place::Query, Place::Form, Place::Text, Place::Message] {
        let out = render(
            "{{draft.text}}|{{draft.json.count}}|{{draft.json.ratio}}|{{draft.json.ok}}|{{draft.json.tags}}|{{draft.json.meta}}|{{draft.json.none}}",
            place,
        )
        .unwrap();
        assert_eq!(
            out, r#"The full reply|42|0.5|true|["a","b"]|{"k":"v"}|null"#,
            "{place:?}"
        );
    }
}

#[test]
fn query_and_form_values_are_not_encoded_by_the_template() {
    assert_eq!(
        render("{{draft.json.path}}", Place::Query).unwrap(),
        "a/b?c#d@e f"
    );
    assert_eq!(
        render("{{draft.json.path}}", Place::Form).unwrap(),
        "a/b?c#d@e f"
    );
}

#[test]
fn json_inside_quotes_is_escaped_string_content() {
    let out = render(r#"{"title": "{{draft.json.title}}"}"#, Place::Json).unwrap();
    assert_eq!(out, r#"{"title": "Say \"hi\"\nnow ✓"}"#);
    let back: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(back["title"], "Say \"hi\"\nnow ✓");
}

#[test]
fn json_inside_quotes_writes_other_values_as_escaped_json_text() {
    let out = render(
        r#"{"a": "n={{draft.json.count}} t={{draft.json.tags}} m={{draft.json.meta}} z={{draft.json.none}}"}"#,
        Place::Json,
    )
    .unwrap();
    let back: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(back["a"], r#"n=42 t=["a","b"] m={"k":"v"} z=null"#);
}

#[test]
fn json_outside_quotes_is_json() {
    let out = render(
        r#"{"n": {{draft.json.count}}, "tags": {{draft.json.tags}}, "meta": {{draft.json.meta}}, "t": {{draft.json.title}}, "z": {{draft.json.none}}, "all": {{secret.json}}}"#,
        Place::Json,
    )
    .unwrap();
    let back: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        back,
        json!({"n": 42, "tags": ["a", "b"], "meta": {"k": "v"}, "t": "Say \"hi\"\nnow ✓", "z": null, "all": "s3cret"})
    );
}

#[test]
fn json_outside_quotes_text_paths_become_json_strings() {
    let out = render(r#"{"b": {{input.text}}, "r": {{draft.text}}}"#, Place::Json).unwrap();
    let back: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        back,
        json!({"b": r#"{"brief":"Why we moved to Rust","n":3}"#, "r": "The full reply"})
    );
}

#[test]
fn json_quote_tracking_follows_escapes() {
    // an escaped quote keeps the string open
    let out = render(r#"{"a": "say \"{{draft.json.count}}\""}"#, Place::Json).unwrap();
    assert_eq!(out, r#"{"a": "say \"42\""}"#);
    // an escaped backslash closes it at the next quote
    let out = render(r#"{"a\\": {{draft.json.count}}}"#, Place::Json).unwrap();
    assert_eq!(out, r#"{"a\\": 42}"#);
    // a placeholder in a key is inside quotes
    let out = render(r#"{"{{draft.json.meta}}": 1}"#, Place::Json).unwrap();
    assert_eq!(out, r#"{"{\"k\":\"v\"}": 1}"#);
}

#[test]
fn json_placeholder_after_backslash_is_refused() {
    let err = parse(r#"{"a": "\{{draft.text}}"}"#, Place::Json).unwrap_err();
    assert_eq!(err.position, 9);
}

#[test]
fn placeholder_right_after_an_opening_brace_or_before_a_closing_one() {
    let out = render("[{{draft.json.meta}}]", Place::Json).unwrap();
    assert_eq!(out, r#"[{"k":"v"}]"#);
    let out = render(r#"{"m": {{draft.json.meta}}}"#, Place::Json).unwrap();
    assert_eq!(out, r#"{"m": {"k":"v"}}"#);
    let out = render("{{{draft.json.count}}}", Place::Text).unwrap();
    assert_eq!(out, "{42}");
}

// ---- lookup -----------------------------------------------------------------

#[test]
fn lookups_read_text_output_paths_and_input() {
    for (src, expected) in [
        ("{{draft.text}}", "The full reply"),
        ("{{draft.json.items.1.title}}", "second"),
        ("{{draft.json.by_year.2024}}", "y"),
        ("{{input.json.brief}}", "Why we moved to Rust"),
        (
            "{{input.text}}",
            r#"{"brief":"Why we moved to Rust","n":3}"#,
        ),
    ] {
        assert_eq!(render(src, Place::Text).unwrap(), expected, "{src}");
    }
    let string_input = json!({"input": "plain brief"});
    let t = parse("{{input.text}}/{{input.json}}", Place::Text).unwrap();
    assert_eq!(t.render(&string_input).unwrap(), "plain brief/plain brief");
}

#[test]
fn eight_levels_are_read() {
    assert_eq!(
        render("{{draft.json.deep.a.b.c.d.e.f.g}}", Place::Text).unwrap(),
        r#"{"h":"bottom"}"#
    );
}

const MISSING: &str = "that step did not run or did not produce it.";

fn missing(src: &str) -> String {
    render(src, Place::Text).unwrap_err().to_string()
}

#[test]
fn missing_value_message_is_exact() {
    assert_eq!(
        missing("{{nope.json.x}}"),
        "No value for {{nope.json.x}}: that step did not run or did not produce it."
    );
}

#[test]
fn every_kind_of_missing_value_fails() {
    for src in [
        "{{nope.text}}",
        "{{failed.json.x}}",
        "{{failed.text}}",
        "{{skipped.json}}",
        "{{skipped.text}}",
        "{{empty.json}}",
        "{{empty.text}}",
        "{{draft.json.absent}}",
        "{{draft.json.items.9}}",
        "{{draft.json.count.x}}",
        "{{draft.json.tags.x}}",
        "{{draft.json.none.x}}",
    ] {
        assert_eq!(missing(src), format!("No value for {src}: {MISSING}"));
    }
    let no_input = json!({"steps": {}});
    let t = parse("{{input.json.x}}", Place::Text).unwrap();
    assert_eq!(
        t.render(&no_input).unwrap_err().to_string(),
        format!("No value for {{{{input.json.x}}}}: {MISSING}")
    );
}

#[test]
fn missing_value_quotes_the_placeholder_without_inner_spaces_and_its_position() {
    let err = render("ab {{  nope.json.x\t}}", Place::Text).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("No value for {{{{nope.json.x}}}}: {MISSING}")
    );
    assert_eq!(err.position(), 4);
}

#[test]
fn missing_is_never_an_empty_string_in_any_place() {
    for (_, place) in Place::ALL {
        assert!(matches!(
            render("x{{draft.json.absent}}", place),
            Err(RenderError::Missing { .. })
        ));
    }
}

#[test]
fn inserted_values_are_never_evaluated() {
    for place in [
        Place::Header,
        Place::Query,
        Place::Form,
        Place::Text,
        Place::Message,
    ] {
        assert_eq!(
            render("{{draft.json.inject}}", place).unwrap(),
            "{{secret.text}} $steps.secret.output"
        );
    }
    let out = render(
        r#"{"a": "{{draft.json.inject}}", "b": {{draft.json.inject}}}"#,
        Place::Json,
    )
    .unwrap();
    let back: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(back["a"], "{{secret.text}} $steps.secret.output");
    assert_eq!(back["b"], "{{secret.text}} $steps.secret.output");
    assert!(!out.contains("s3cret"));
    assert_eq!(
        render("{{draft.json.inject}}", Place::Url).unwrap(),
        "%7B%7Bsecret.text%7D%7D%20%24steps.secret.output"
    );
}

#[test]
fn render_takes_any_scope_including_a_trait_object() {
    let c = ctx();
    let scope: &dyn Scope = &c;
    assert_eq!(
        parse("{{draft.json.count}}", Place::Text)
            .unwrap()
            .render(scope)
            .unwrap(),
        "42"
    );
}

// ---- parsing ----------------------------------------------------------------

#[test]
fn placeholders_are_listed_with_key_path_and_position() {
    let t = parse(
        "é {{draft.json.items.0.title}} and {{ input.text }}",
        Place::Text,
    )
    .unwrap();
    let list: Vec<_> = t.placeholders().collect();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0].key, "draft");
    assert_eq!(list[0].path.to_string(), "json.items.0.title");
    assert_eq!(list[0].position, 3);
    assert_eq!(
        list[0].path.segments,
        vec![
            Segment::Name("items".into()),
            Segment::Index(0),
            Segment::Name("title".into())
        ]
    );
    assert!(list[1].reads_input());
    assert_eq!(list[1].path.source, Source::Text);
    assert_eq!(list[1].written(), "{{input.text}}");
    assert_eq!(
        t.source(),
        "é {{draft.json.items.0.title}} and {{ input.text }}"
    );
    assert_eq!(t.place(), Place::Text);
}

#[test]
fn text_without_placeholders_is_kept_as_is() {
    for src in ["", "plain", "{ } }} {a} {", "a { b } c"] {
        assert_eq!(render(src, Place::Text).unwrap(), src);
    }
}

#[test]
fn whole_output_is_allowed() {
    assert_eq!(
        render("{{draft.json.meta}}", Place::Text).unwrap(),
        r#"{"k":"v"}"#
    );
    assert!(parse("{{draft.json}}", Place::Json).is_ok());
}

#[test]
fn surrounding_spaces_are_accepted_inner_spaces_are_not() {
    assert_eq!(render("{{ draft.json.count }}", Place::Text).unwrap(), "42");
    assert_eq!(
        render("{{\tdraft.json.count\t}}", Place::Text).unwrap(),
        "42"
    );
    let err = parse_err("{{draft. json.count}}");
    assert_eq!(err.position, 9);
    assert!(err.message.contains("spaces"));
    assert!(parse_err("{{ draft .text }}").message.contains("spaces"));
}

#[test]
fn eight_levels_parse_nine_do_not() {
    assert!(parse("{{a.json.l1.l2.l3.l4.l5.l6.l7.l8}}", Place::Text).is_ok());
    assert!(parse("{{a.json.0.1.2.3.4.5.6.7}}", Place::Text).is_ok());
    let err = parse_err_saying("{{a.json.l1.l2.l3.l4.l5.l6.l7.l8.l9}}", "at most 8 levels");
    assert_eq!(err.position, 34);
}

#[test]
fn dashed_names_are_refused_with_a_hint_to_use_the_parent() {
    let err = parse_err_saying("{{fetch.json.user.user-name}}", "{{fetch.json.user}}");
    assert_eq!(err.position, 23);
    parse_err_saying("{{fetch.json.user-name}}", "{{fetch.json}}");
    assert_eq!(
        parse_err_saying("{{user-name.text}}", "step key").position,
        7
    );
}

#[test]
fn list_positions_are_non_negative_integers() {
    assert!(parse("{{a.json.items.0}}", Place::Text).is_ok());
    assert!(parse("{{a.json.items.12.x}}", Place::Text).is_ok());
    assert!(
        parse_err("{{a.json.items.-1}}")
            .message
            .contains("not a plain name")
    );
    assert!(
        parse_err("{{a.json.items.1.5e}}")
            .message
            .contains("plain name")
    );
    assert!(
        parse_err("{{a.json.items.01}}")
            .message
            .contains("leading zero")
    );
}

#[test]
fn malformed_placeholders_are_refused_with_positions() {
    let cases: &[(&str, usize, &str)] = &[
        ("abc {{draft.text", 5, "never closed"),
        ("{{}}", 1, "empty"),
        ("x{{   }}", 2, "empty"),
        ("{{Draft.text}}", 3, "lowercase"),
        ("{{1draft.text}}", 3, "lowercase"),
        ("{{steps.draft.text}}", 3, "reserved"),
        ("{{loop.json.iteration}}", 3, "reserved"),
        ("{{draft}}", 8, "path must follow"),
        ("{{draft.output.x}}", 9, "text or json"),
        ("{{draft.body}}", 9, "text or json"),
        ("{{draft.text.x}}", 14, "no fields"),
        ("{{draft.json..x}}", 14, "missing"),
        ("{{draft.json.x.}}", 16, "missing"),
        ("{{.text}}", 3, "step key"),
        ("{{$steps.draft.output}}", 3, "`$`"),
        ("{{draft.json.count + 1}}", 20, "operators"),
        ("{{draft.json.count 1}}", 19, "spaces"),
        ("{{draft.json.count+1}}", 19, "operators"),
        ("{{upper(draft.text)}}", 8, "function calls"),
        ("{{draft.json.items[0]}}", 19, "brackets"),
        ("{{draft.json.a|b}}", 15, "operators"),
        ("{{draft.text}", 1, "never closed"),
        ("{{draft.text} }}", 13, "single `}`"),
        ("{{dräft.text}}", 5, "cannot appear"),
        ("{{draft.json.tïtle}}", 15, "cannot appear"),
    ];
    for (src, position, fragment) in cases {
        let err = parse_err(src);
        assert_eq!(err.position, *position, "{src}: {}", err.message);
        assert!(err.message.contains(fragment), "{src}: {}", err.message);
    }
}

#[test]
fn template_error_display_has_position_and_message() {
    let err = parse_err("{{}}");
    assert!(err.to_string().starts_with("character 1: "));
}

// ---- check_json -------------------------------------------------------------

fn check(src: &str) -> Result<(), TemplateError> {
    parse(src, Place::Json).unwrap().check_json()
}

#[test]
fn check_json_accepts_bodies_that_are_json_whatever_the_values() {
    assert!(check(r#"{"title": "{{draft.json.title}}", "body": "{{draft.json.body}}"}"#).is_ok());
    assert!(check(r#"{"tags": {{draft.json.tags}}, "n": [{{a.json}}, {{b.json}}]}"#).is_ok());
    assert!(check("{{draft.json}}").is_ok());
    assert!(check(r#""pre {{a.text}} post""#).is_ok());
}

#[test]
fn check_json_reports_where_reading_stopped() {
    // missing comma after the placeholder: error at the next `"`
    let err = check(r#"{"a": {{x.json}} "b": 1}"#).unwrap_err();
    assert_eq!(err.position, 18, "{}", err.message);
    assert!(err.message.contains("not JSON"));
    // characters, not bytes, before the error
    let err = check("{\"é✓\": x}").unwrap_err();
    assert_eq!(err.position, 8, "{}", err.message);
    // on a second line
    let err = check("{\n  \"a\": 1,\n  x}").unwrap_err();
    assert_eq!(err.position, 15, "{}", err.message);
}

#[test]
fn check_json_refuses_values_glued_to_other_tokens() {
    // `-` then a value: a number would do, a string would not
    let err = check(r#"{"a": -{{x.json}}}"#).unwrap_err();
    assert_eq!(err.position, 8, "{}", err.message);
    // two values in a row
    assert!(check("{{a.json}}{{b.json}}").is_err());
    // a value in a key position
    assert!(check(r#"{ {{a.json}}: 1}"#).is_err());
}

#[test]
fn check_json_reports_an_unfinished_body_at_its_end() {
    let err = check(r#"{"a": "{{x.text}}""#).unwrap_err();
    assert_eq!(err.position, 19, "{}", err.message);
    let err = check(r#"{"a": "{{x.text}}"#).unwrap_err();
    assert_eq!(err.position, 18, "{}", err.message);
    assert_eq!(check("").unwrap_err().position, 1);
}

#[test]
fn check_json_passes_for_other_places() {
    assert!(
        parse("not json {{a.text}}", Place::Text)
            .unwrap()
            .check_json()
            .is_ok()
    );
}

// ---- properties -------------------------------------------------------------

fn value_with(s: &str) -> Value {
    json!({
        "input": s,
        "steps": {"a": {"status": "completed", "output": {"s": s, "list": [s, 1]}, "text": s}}
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn parse_and_render_never_panic(src in "\\PC*", value in "\\PC*") {
        let c = value_with(&value);
        for (_, place) in Place::ALL {
            if let Ok(t) = parse(&src, place) {
                let _ = t.render(&c);
                let _ = t.check_json();
            }
        }
    }

    #[test]
    fn parse_and_render_never_panic_on_brace_heavy_text(src in "[{}a-z._ \"\\\\$-]{0,40}") {
        let c = value_with("v");
        for (_, place) in Place::ALL {
            if let Ok(t) = parse(&src, place) {
                let _ = t.render(&c);
                if let Err(e) = t.check_json() {
                    prop_assert!(e.position >= 1 && e.position <= src.chars().count() + 1);
                }
            }
        }
    }

    #[test]
    fn json_inside_quotes_round_trips_any_string(value in any::<String>()) {
        let t = parse(r#"{"s": "{{a.json.s}}", "t": "<{{a.text}}>", "i": "{{input.text}}"}"#, Place::Json).unwrap();
        let out = t.render(&value_with(&value)).unwrap();
        let back: Value = serde_json::from_str(&out).unwrap();
        prop_assert_eq!(&back["s"], &json!(value));
        prop_assert_eq!(&back["t"], &json!(format!("<{value}>")));
        prop_assert_eq!(&back["i"], &json!(value));
    }

    #[test]
    fn json_outside_quotes_round_trips_any_string(value in any::<String>()) {
        let t = parse(r#"{"s": {{a.json.s}}, "l": {{a.json.list}}, "t": {{a.text}}}"#, Place::Json).unwrap();
        let out = t.render(&value_with(&value)).unwrap();
        let back: Value = serde_json::from_str(&out).unwrap();
        prop_assert_eq!(back, json!({"s": value, "l": [value, 1], "t": value}));
    }

    #[test]
    fn url_values_only_hold_unreserved_characters_and_escapes(value in any::<String>()) {
        let t = parse("{{a.text}}", Place::Url).unwrap();
        match t.render(&value_with(&value)) {
            Ok(out) => prop_assert!(out.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~%".contains(&b))),
            Err(e) => prop_assert!(matches!(e, RenderError::DotSegment { .. }), "{e:?}"),
        }
    }

    #[test]
    fn a_url_value_never_changes_the_path_s_shape(value in "([./\\\\%2eE5cCfF]|%2[eEfF]|%25){0,8}|\\PC{0,8}") {
        let t = parse("https://x.test/a/{{a.text}}/b", Place::Url).unwrap();
        if let Ok(out) = t.render(&value_with(&value)) {
            let url = url::Url::parse(&out).unwrap();
            let segments: Vec<&str> = url.path_segments().unwrap().collect();
            prop_assert_eq!(segments.len(), 3, "{}", out);
            prop_assert_eq!(segments[0], "a");
            prop_assert_eq!(segments[2], "b");
        }
    }

    #[test]
    fn header_values_never_hold_line_breaks(value in any::<String>()) {
        let t = parse("v={{a.text}}", Place::Header).unwrap();
        if let Ok(out) = t.render(&value_with(&value)) {
            prop_assert!(!out.contains('\r') && !out.contains('\n'));
        }
    }

    #[test]
    fn bodies_that_pass_check_json_render_to_json(
        tokens in proptest::collection::vec(
            prop::sample::select(vec![
                "{", "}", "[", "]", "\"", ":", ",", " ", "\\", "1", "-", "null", "x",
                "{{a.json}}", "{{a.text}}", "{{a.json.s}}", "{{a.json.list}}", "{{input.json}}",
            ]),
            0..24,
        ),
        value in any::<String>(),
    ) {
        let src: String = tokens.concat();
        if let Ok(t) = parse(&src, Place::Json)
            && t.check_json().is_ok()
        {
            let out = t.render(&value_with(&value)).unwrap();
            prop_assert!(serde_json::from_str::<Value>(&out).is_ok(), "{} -> {}", src, out);
        }
    }

    #[test]
    fn valid_placeholders_always_parse(
        key in "[a-z][a-z0-9_]{0,10}",
        segs in proptest::collection::vec("[A-Za-z_][A-Za-z0-9_]{0,5}|[1-9][0-9]{0,3}|0", 0..=8),
    ) {
        prop_assume!(!["steps", "previous", "loop", "item", "index", "run"].contains(&key.as_str()));
        let mut path = format!("{key}.json");
        for s in &segs { path.push('.'); path.push_str(s); }
        let src = format!("x {{{{{path}}}}} y");
        let t = parse(&src, Place::Text).unwrap();
        let p = t.placeholders().next().unwrap();
        prop_assert_eq!(p.written(), format!("{{{{{path}}}}}"));
        prop_assert_eq!(p.position, 3);
    }
}
