//! The Secrets a flow binds, wherever they stand (nested steps included), so
//! admission can ask whether the person applying the flow may read each one
//! themselves: nobody gains a Secret through a flow.

use crate::api::{FlowSpec, Step, ValueFrom};

/// One Secret a step binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundSecret {
    /// The key of the step that binds it (the parallel step for its part);
    /// empty for the flow's `command` connection and a workspace repo's
    /// credentials.
    pub step: String,
    /// Where, such as `http.headers[0].valueFrom`.
    pub field: String,
    /// The Secret's name, in the flow's namespace.
    pub name: String,
}

/// Every Secret the flow binds, in document order; a Secret bound twice is
/// listed twice (each place is named).
pub fn bound_secrets(spec: &FlowSpec) -> Vec<BoundSecret> {
    let mut found = Vec::new();
    if let Some(command) = &spec.command {
        found.push(BoundSecret {
            step: String::new(),
            field: "command.chat".into(),
            name: command.chat.clone(),
        });
    }
    if let Some(workspace) = &spec.workspace {
        for (i, repo) in workspace.repos.iter().enumerate() {
            if let Some(secret) = &repo.secret_ref {
                found.push(BoundSecret {
                    step: String::new(),
                    field: format!("workspace.repos[{i}].secretRef"),
                    name: secret.name.clone(),
                });
            }
        }
    }
    for step in &spec.steps {
        collect(step, &step.key, "", &mut found);
    }
    found
}

fn collect(step: &Step, key: &str, prefix: &str, found: &mut Vec<BoundSecret>) {
    let mut push = |field: String, name: &str| {
        found.push(BoundSecret {
            step: key.to_string(),
            field: format!("{prefix}{field}"),
            name: name.to_string(),
        })
    };
    let headers = step.http.iter().flat_map(|h| &h.headers);
    let headers = headers.map(|h| h.value_from.as_ref());
    let env = step.script.iter().flat_map(|s| &s.env);
    let env = env.map(|e| e.value_from.as_ref());
    let value_froms = value_froms("http.headers", headers).chain(value_froms("script.env", env));
    for (field, name) in value_froms {
        push(field, name);
    }
    if let Some(slack) = step.message.as_ref().and_then(|m| m.slack.as_ref()) {
        push(
            "message.slack.tokenSecretRef".into(),
            &slack.token_secret_ref.name,
        );
    }
    if let Some(matrix) = step.message.as_ref().and_then(|m| m.matrix.as_ref()) {
        push(
            "message.matrix.tokenSecretRef".into(),
            &matrix.token_secret_ref.name,
        );
    }
    if let Some(parallel) = &step.parallel {
        collect(
            &parallel.step,
            key,
            &format!("{prefix}parallel.step."),
            found,
        );
    }
    if let Some(loop_) = &step.loop_ {
        for inner in &loop_.steps {
            collect(inner, &inner.key, "", found);
        }
    }
}

/// The Secrets a list of headers or variables takes values from, each at
/// `list[i].valueFrom`: headers and a script's env bind them alike.
fn value_froms<'s>(
    list: &'s str,
    froms: impl Iterator<Item = Option<&'s ValueFrom>>,
) -> impl Iterator<Item = (String, &'s str)> {
    froms.enumerate().filter_map(move |(i, from)| {
        let from = from?;
        Some((
            format!("{list}[{i}].valueFrom"),
            from.secret_key_ref.name.as_str(),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A flow's one step, for tests about what lies outside the steps.
    const ONE_STEP: &str = "steps:\n  - key: check\n    condition: {when: \"true\"}\n";

    /// The secrets `flow` binds, as `(step, field, name)`.
    fn found_in(flow: &str) -> Vec<(String, String, String)> {
        let spec: FlowSpec = serde_yaml::from_str(flow).expect("flow");
        bound_secrets(&spec)
            .into_iter()
            .map(|b| (b.step, b.field, b.name))
            .collect()
    }

    /// `expected` in the form [`found_in`] gives.
    fn owned(expected: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
        expected
            .iter()
            .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
            .collect()
    }

    #[test]
    fn a_commands_connection_is_a_bound_secret() {
        let flow = format!(
            "command: {{name: review, chat: team-chat, rooms: [\"!r:x\"], allowedUsers: [\"*\"]}}\n{ONE_STEP}"
        );
        assert_eq!(found_in(&flow), owned(&[("", "command.chat", "team-chat")]));
    }

    #[test]
    fn secrets_are_found_in_every_kind_and_nesting() {
        let found = found_in(
            r##"
steps:
  - key: call
    http:
      url: https://a.example/x
      headers:
        - {name: X-One, value: "1"}
        - {name: Authorization, valueFrom: {secretKeyRef: {name: api, key: token}}}
  - key: again
    loop:
      until: "true"
      maxIterations: 2
      steps:
        - key: build
          script:
            source: make
            env: [{name: TOKEN, valueFrom: {secretKeyRef: {name: registry, key: pass}}}]
  - key: fan
    parallel:
      items: $input.list
      step:
        message:
          text: hi
          slack: {channel: "#ops", tokenSecretRef: {name: slack, key: bot}}
  - key: tell
    message:
      text: done
      matrix: {homeserver: "https://m.example.org", room: "#ops:m.example.org", tokenSecretRef: {name: matrix-bot, key: token}}
"##,
        );
        let expected = [
            ("call", "http.headers[1].valueFrom", "api"),
            ("build", "script.env[0].valueFrom", "registry"),
            ("fan", "parallel.step.message.slack.tokenSecretRef", "slack"),
            ("tell", "message.matrix.tokenSecretRef", "matrix-bot"),
        ];
        assert_eq!(found, owned(&expected));
    }

    #[test]
    fn a_workspace_repos_credentials_are_a_bound_secret() {
        let flow = format!(
            r##"
workspace:
  repos:
    - {{name: app, url: "https://git.example.com/app.git", secretRef: {{name: git-app}}}}
    - {{name: docs, url: "https://git.example.com/docs.git"}}
{ONE_STEP}"##
        );
        let expected = [("", "workspace.repos[0].secretRef", "git-app")];
        assert_eq!(found_in(&flow), owned(&expected));
    }
}
