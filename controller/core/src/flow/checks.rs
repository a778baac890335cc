//! Small rules that several of a flow's checks share, so that the same
//! mistake is worded the same wherever it is made.

/// The problems found, each as `(field, message)`: the checks that report
/// a list of fielded problems start from their single-field checks so.
pub(super) fn fielded<'f>(
    checks: impl IntoIterator<Item = (&'f str, Option<String>)>,
) -> Vec<(String, String)> {
    checks
        .into_iter()
        .filter_map(|(field, message)| Some((field.to_string(), message?)))
        .collect()
}

/// The spelling rules of a name after its first character: every character
/// one `allowed` accepts (described as `allowed_words`), and at most `max`
/// bytes. `thing` opens the message, as "the command" or "the repo name".
pub(super) fn spelling_problem(
    thing: &str,
    name: &str,
    allowed: impl Fn(char) -> bool,
    allowed_words: &str,
    max: usize,
) -> Option<String> {
    if let Some(c) = name.chars().find(|&c| !allowed(c)) {
        return Some(format!("{thing} `{name}` has `{c}`; use {allowed_words}"));
    }
    (name.len() > max).then(|| {
        format!(
            "{thing} `{name}` is {} characters long; at most {max} are allowed",
            name.len()
        )
    })
}
