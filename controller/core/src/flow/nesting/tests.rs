use super::{MAX_BRACKET_DEPTH, TooDeep, check_nesting};

const HEAD: &str = "apiVersion: coxswain.dev/v1alpha1\nkind: Flow\nmetadata: {name: x}\nspec: ";

fn nested(open: &str, close: &str, levels: usize) -> String {
    format!("{HEAD}{}1{}\n", open.repeat(levels), close.repeat(levels))
}

/// The column where the bracket one past the limit sits in `nested(...)`.
fn refused_at(open: &str) -> TooDeep {
    TooDeep {
        line: 4,
        column: "spec: ".len() + open.len() * MAX_BRACKET_DEPTH + 1,
        opener: open.chars().next().expect("an opener"),
    }
}

#[test]
fn a_hundred_thousand_levels_of_maps_are_refused_where_they_go_too_deep() {
    let text = nested("{a: ", "}", 100_000);
    assert_eq!(check_nesting(&text), Err(refused_at("{a: ")));
}

#[test]
fn a_hundred_thousand_levels_of_lists_are_refused() {
    let text = nested("[", "]", 100_000);
    assert_eq!(check_nesting(&text), Err(refused_at("[")));
}

#[test]
fn the_limit_itself_is_accepted() {
    assert_eq!(check_nesting(&nested("[", "]", MAX_BRACKET_DEPTH)), Ok(()));
    assert_eq!(
        check_nesting(&nested("{a: ", "}", MAX_BRACKET_DEPTH)),
        Ok(())
    );
    assert!(check_nesting(&nested("[", "]", MAX_BRACKET_DEPTH + 1)).is_err());
}

#[test]
fn the_message_names_the_line_column_and_limit() {
    let text = format!("a: 1\nb:\n  - {}\n", "[".repeat(200));
    let err = check_nesting(&text).expect_err("too deep");
    assert_eq!(
        (err.line, err.column, err.opener),
        (3, 5 + MAX_BRACKET_DEPTH, '[')
    );
    let message = err.to_string();
    assert!(message.starts_with("line 3, column 133: `[`"), "{message}");
    assert!(message.contains("128 levels"), "{message}");
}

/// Brackets that are text, not structure, never count: in quotes, comments,
/// plain scalars and block scalars. Each line would otherwise add 200 levels.
#[test]
fn brackets_in_text_do_not_count() {
    let many = "[".repeat(200);
    let braces = "{".repeat(200);
    let texts = [
        format!("a: '{many}'\n"),
        format!("a: 'it''s {many}'\n"),
        format!("a: \"{many} \\\" {braces}\"\n"),
        format!("a: \"two\n  lines {many}\"\n"),
        format!("a: 1 # {many}\n"),
        format!("# {many}\n"),
        format!("a: text with {many}\n"),
        format!("a: [x, 'y{many}', \"z{braces}\"]\n"),
        format!("a: {{\"k\":\"{many}\"}}\n"),
        format!("a: [don't, {{b: c}}] # {many}\n"),
        format!("script: |\n  {many}\n\n  {braces}\nnext: [1]\n"),
        format!("- key: >-\n    {many}\n- after {braces}\n"),
    ];
    for text in &texts {
        assert_eq!(check_nesting(text), Ok(()), "refused:\n{text}");
    }
}

/// After a block scalar ends, brackets count again.
#[test]
fn brackets_after_a_block_scalar_count() {
    let text = format!("script: |\n  echo {{\nnext: {}\n", "[".repeat(200));
    let err = check_nesting(&text).expect_err("too deep");
    assert_eq!(err.line, 3);
}

#[test]
fn the_examples_pass() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut folders = vec![dir];
    let mut checked = 0;
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("examples/") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                folders.push(path);
                continue;
            }
            if path.extension().is_none_or(|x| x != "yaml" && x != "yml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("readable");
            assert_eq!(check_nesting(&text), Ok(()), "{}", path.display());
            checked += 1;
        }
    }
    assert!(checked >= 5, "{checked} example files");
}
