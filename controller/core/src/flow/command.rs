//! Checking a flow's conversation `command` when it is saved: the word people
//! type, the connection Secret's name, and that someone is listening and
//! someone may ask.

use super::checks::{fielded, spelling_problem};
use crate::api::Command;

/// The longest command word; longer ones are typos more often than names.
const MAX_NAME: usize = 32;
/// The longest Secret name Kubernetes accepts.
const MAX_SECRET_NAME: usize = 253;

/// Every problem of a command, as `(field, message)` with the field relative
/// to the flow's spec (`command.name`, `command.rooms[1]`, ...).
pub fn check_command(command: &Command) -> Vec<(String, String)> {
    let mut problems = fielded([
        ("command.name", name_problem(&command.name)),
        ("command.chat", secret_name_problem(&command.chat)),
    ]);
    id_list_problems(
        &mut problems,
        "command.rooms",
        &command.rooms,
        "list at least one room or channel where the command is heard",
        |room| format!("`{room}` is not a room: write its id or alias without spaces around it"),
    );
    id_list_problems(
        &mut problems,
        "command.allowedUsers",
        &command.allowed_users,
        "list who may start a run (user ids, or \"*\" for everyone in the rooms)",
        |user| format!("`{user}` is not a user id: write it without spaces around it"),
    );
    problems
}

/// The command word: what follows `!`, so no spaces and nothing a chat would
/// mangle.
fn name_problem(name: &str) -> Option<String> {
    let Some(first) = name.chars().next() else {
        return Some("the command name is empty; write the word typed after `!`".into());
    };
    if name.starts_with('!') {
        return Some(format!(
            "write the command without its `!`: `{}`",
            name.trim_start_matches('!')
        ));
    }
    if !(first.is_ascii_lowercase() || first.is_ascii_digit()) {
        return Some(format!(
            "the command `{name}` must start with a lowercase letter or a digit"
        ));
    }
    spelling_problem(
        "the command",
        name,
        |c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_',
        "lowercase letters, digits, `-` and `_`",
        MAX_NAME,
    )
}

/// A list of ids (rooms, users): at least one (else `empty`), each written
/// without spaces around it (else `padded` of it), at `field[i]`.
fn id_list_problems(
    problems: &mut Vec<(String, String)>,
    field: &str,
    ids: &[String],
    empty: &str,
    padded: impl Fn(&str) -> String,
) {
    if ids.is_empty() {
        problems.push((field.to_string(), empty.to_string()));
    }
    for (i, id) in ids.iter().enumerate() {
        if id.trim().is_empty() || id.trim() != id {
            problems.push((format!("{field}[{i}]"), padded(id)));
        }
    }
}

/// A Secret's name is a DNS subdomain: lowercase letters, digits, `-` and
/// `.`, starting and ending with a letter or digit.
fn secret_name_problem(name: &str) -> Option<String> {
    let edge_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if name.is_empty() {
        return Some("name the Secret that holds the chat connection".into());
    }
    let ok = name.len() <= MAX_SECRET_NAME
        && edge_ok(name.chars().next())
        && edge_ok(name.chars().last())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    (!ok).then(|| {
        format!(
            "`{name}` is not a Secret name: lowercase letters, digits, `-` and `.`, starting and ending with a letter or digit"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(name: &str, chat: &str, rooms: &[&str], users: &[&str]) -> Command {
        Command {
            name: name.into(),
            chat: chat.into(),
            rooms: rooms.iter().map(|r| r.to_string()).collect(),
            allowed_users: users.iter().map(|u| u.to_string()).collect(),
        }
    }

    #[test]
    fn a_good_command_has_no_problem() {
        let good = command("review", "team-chat", &["!abc:example.org"], &["@a:x"]);
        assert_eq!(check_command(&good), Vec::<(String, String)>::new());
    }

    #[test]
    fn each_mistake_is_named_with_its_field() {
        let bad = command("!Review", "Team_Chat", &[" #ops:x"], &[]);
        let fields: Vec<String> = check_command(&bad).into_iter().map(|(f, _)| f).collect();
        assert_eq!(
            fields,
            [
                "command.name",
                "command.chat",
                "command.rooms[0]",
                "command.allowedUsers"
            ]
        );
        let problems = check_command(&command("rev iew", "c", &[], &["*"]));
        assert_eq!(problems[0].0, "command.name");
        assert!(problems[0].1.contains("has ` `"), "{}", problems[0].1);
        assert_eq!(problems[1].0, "command.rooms");
        assert!(
            check_command(&command("!review", "c", &["r"], &["*"]))[0]
                .1
                .contains("`review`")
        );
    }
}
