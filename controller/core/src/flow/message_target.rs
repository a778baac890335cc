//! Checking where a `message` step posts when the flow is saved: exactly one
//! target, and a Matrix target's homeserver, room and token written so that
//! a run can reach them. A room or homeserver is never filled from run data:
//! the token in the Secret goes to the server the flow names.

use super::checks::fielded;
use crate::api::{MatrixTarget, MessageStep, SecretKeyRef};
use crate::text::quote_list;

/// The problem with the step's choice of target, if it gives none or more
/// than one of `webhook`, `slack` and `matrix`.
pub fn target_problem(step: &MessageStep) -> Option<String> {
    match step.targets().as_slice() {
        [_] => None,
        [] => Some("give one of `webhook`, `slack` or `matrix`: where the message goes".into()),
        [first @ .., last] => Some(format!(
            "give only one of `webhook`, `slack` or `matrix`; this step gives {} and `{last}`",
            quote_list(first)
        )),
    }
}

/// Every problem of a Matrix target, as `(field, message)` with the field
/// relative to the target (`homeserver`, `room`, `tokenSecretRef.name`).
pub fn check_matrix(target: &MatrixTarget) -> Vec<(String, String)> {
    let mut problems = fielded([
        ("homeserver", homeserver_problem(&target.homeserver)),
        ("room", room_problem(&target.room)),
    ]);
    problems.extend(
        secret_ref_problems(&target.token_secret_ref)
            .into_iter()
            .map(|(field, message)| (format!("tokenSecretRef.{field}"), message)),
    );
    problems
}

/// The homeserver is an http(s) URL with a host, written out.
fn homeserver_problem(homeserver: &str) -> Option<String> {
    if homeserver.trim().is_empty() {
        return Some("give the homeserver's URL, such as `https://matrix.example.org`".into());
    }
    if homeserver.contains("{{") {
        return Some(format!(
            "`{homeserver}` holds a placeholder; the homeserver is written out, so the token goes only where the flow says"
        ));
    }
    let url = match url::Url::parse(homeserver.trim()) {
        Ok(url) => url,
        Err(e) => {
            return Some(format!(
                "`{homeserver}` is not a URL ({e}); write it like `https://matrix.example.org`"
            ));
        }
    };
    if !matches!(url.scheme(), "http" | "https") {
        return Some(format!(
            "`{homeserver}` is {}, not http or https",
            url.scheme()
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Some(format!("`{homeserver}` has no host"));
    }
    None
}

/// A room id (`!abc:example.org`, or `!` and a hash from room version 12
/// on, which has no server part) or an alias (`#ops:example.org`, always
/// with its server), written out.
fn room_problem(room: &str) -> Option<String> {
    const SHAPE: &str =
        "a room id such as `!abc:example.org` or an alias such as `#ops:example.org`";
    if room.is_empty() {
        return Some(format!("name the room: {SHAPE}"));
    }
    if room.contains("{{") {
        return Some(format!(
            "`{room}` holds a placeholder; the room is written out: {SHAPE}"
        ));
    }
    if room.chars().any(char::is_whitespace) {
        return Some(format!("`{room}` holds a space; write {SHAPE}"));
    }
    let well_formed = if let Some(id) = room.strip_prefix('!') {
        !id.is_empty() && !id.starts_with(':')
    } else if let Some(alias) = room.strip_prefix('#') {
        alias
            .split_once(':')
            .is_some_and(|(local, server)| !local.is_empty() && !server.is_empty())
    } else {
        false
    };
    (!well_formed).then(|| format!("`{room}` is not {SHAPE}"))
}

/// Both halves of a Secret key reference are given.
fn secret_ref_problems(r: &SecretKeyRef) -> Vec<(String, String)> {
    let mut problems = Vec::new();
    if r.name.trim().is_empty() {
        problems.push((
            "name".to_string(),
            "name the Secret that holds the access token".to_string(),
        ));
    }
    if r.key.trim().is_empty() {
        problems.push((
            "key".to_string(),
            "name the Secret's key that holds the access token".to_string(),
        ));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{SlackTarget, WebhookTarget};

    fn matrix(homeserver: &str, room: &str) -> MatrixTarget {
        MatrixTarget {
            homeserver: homeserver.into(),
            room: room.into(),
            token_secret_ref: SecretKeyRef {
                name: "matrix".into(),
                key: "token".into(),
            },
            thread: None,
        }
    }

    fn fields(target: &MatrixTarget) -> Vec<String> {
        check_matrix(target).into_iter().map(|(f, _)| f).collect()
    }

    #[test]
    fn ids_and_aliases_on_http_homeservers_pass() {
        for room in [
            "!abc:example.org",
            "!DRtI5QtkUsoaKPKk7zOA0EMGLETGdwL-zrZEYdHWiNA",
            "#ops:example.org",
            "#ops:localhost:8448",
        ] {
            let target = matrix("https://matrix.example.org", room);
            assert!(check_matrix(&target).is_empty(), "{room}");
        }
        assert!(check_matrix(&matrix("http://127.0.0.1:8008/", "!a:b")).is_empty());
    }

    #[test]
    fn rooms_that_are_not_ids_or_aliases_are_refused() {
        for room in [
            "ops",
            "#ops",
            "!",
            "!:example.org",
            "#ops:",
            "",
            "# ops:x",
            "@bot:x",
        ] {
            assert_eq!(
                fields(&matrix("https://m.example.org", room)),
                ["room"],
                "{room:?}"
            );
        }
        let problems = check_matrix(&matrix("https://m.example.org", "#{{input.room}}:x"));
        assert!(problems[0].1.contains("placeholder"), "{problems:?}");
    }

    #[test]
    fn homeservers_that_are_not_http_urls_are_refused() {
        for homeserver in [
            "",
            "matrix.example.org",
            "ftp://m.example.org",
            "https://{{input.host}}",
        ] {
            let problems = check_matrix(&matrix(homeserver, "!a:b"));
            assert_eq!(problems.len(), 1, "{homeserver:?}: {problems:?}");
            assert_eq!(problems[0].0, "homeserver");
        }
        let problems = check_matrix(&matrix("ftp://m.example.org", "!a:b"));
        assert!(problems[0].1.contains("not http or https"), "{problems:?}");
    }

    #[test]
    fn an_empty_token_reference_is_refused_by_half() {
        let mut target = matrix("https://m.example.org", "!a:b");
        target.token_secret_ref = SecretKeyRef::default();
        assert_eq!(
            fields(&target),
            ["tokenSecretRef.name", "tokenSecretRef.key"]
        );
    }

    #[test]
    fn the_target_problem_names_what_is_given() {
        let mut step = MessageStep::default();
        assert!(target_problem(&step).unwrap().starts_with("give one of"));
        step.webhook = Some(WebhookTarget::default());
        assert_eq!(target_problem(&step), None);
        step.slack = Some(SlackTarget::default());
        step.matrix = Some(matrix("https://m.example.org", "!a:b"));
        assert_eq!(
            target_problem(&step).unwrap(),
            "give only one of `webhook`, `slack` or `matrix`; this step gives `webhook`, `slack` and `matrix`"
        );
    }
}
