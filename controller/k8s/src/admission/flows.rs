//! Flow admission: the validator `coxswain lint` runs, and the Secret rule
//! — the person (or Argo CD) applying a flow must be allowed to read every
//! Secret it binds, asked of the API server with one SubjectAccessReview per
//! Secret, so nobody gains a Secret through a flow.

use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;

use coxswain_core::api::FlowSpec;
use coxswain_core::flow::{BoundSecret, bound_secrets, one_line, validate};

use super::review::Verdict;

/// Every problem of a flow, on one line (kubectl prints one line).
pub fn refusal(name: &str, problems: &[String]) -> String {
    let count = match problems.len() {
        1 => "1 problem".to_string(),
        n => format!("{n} problems"),
    };
    format!("flow {name} is not valid ({count}): {}", one_line(problems))
}

/// The line for a Secret the applier may not read.
pub fn unreadable_secret(user: &str, secret: &BoundSecret) -> String {
    let step = if secret.step.is_empty() {
        String::new()
    } else {
        format!("step {}: ", secret.step)
    };
    format!(
        "{step}{}: `{user}` may not read the Secret `{}`, so may not bind it in a flow (nobody gains a Secret through Coxswain)",
        secret.field, secret.name
    )
}

/// Checks a Flow being created or updated by `user`.
pub async fn review(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    spec: &FlowSpec,
    old: Option<&FlowSpec>,
    user: &UserInfo,
) -> Verdict {
    if old == Some(spec) {
        // Only metadata changed (labels, finalizers): nothing to check.
        return Verdict::Allow;
    }
    let mut problems: Vec<String> = validate(spec).iter().map(ToString::to_string).collect();
    let username = user.username.as_deref().unwrap_or("");
    let mut asked: Vec<(String, bool)> = Vec::new();
    for secret in bound_secrets(spec) {
        let known = asked.iter().find(|(n, _)| *n == secret.name).map(|a| a.1);
        let readable = match known {
            Some(readable) => readable,
            None => match may_read_secret(client, namespace, &secret.name, user).await {
                Ok(readable) => {
                    asked.push((secret.name.clone(), readable));
                    readable
                }
                Err(e) => return Verdict::Deny(e),
            },
        };
        if !readable {
            problems.push(unreadable_secret(username, &secret));
        }
    }
    if problems.is_empty() {
        Verdict::Allow
    } else {
        Verdict::Deny(refusal(name, &problems))
    }
}

/// Whether `user` may `get` the Secret `name` in `namespace`.
async fn may_read_secret(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    user: &UserInfo,
) -> Result<bool, String> {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: user.username.clone(),
            groups: user.groups.clone(),
            uid: user.uid.clone(),
            extra: user.extra.clone(),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(namespace.to_string()),
                verb: Some("get".into()),
                resource: Some("secrets".into()),
                name: Some(name.to_string()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let answer = api
        .create(&PostParams::default(), &review)
        .await
        .map_err(|e| {
            format!("cannot ask the API server whether the Secret `{name}` may be read: {e}")
        })?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_problem_is_on_one_line_with_step_field_and_character() {
        let spec: FlowSpec = serde_json::from_value(serde_json::json!({"steps": [
            {"key": "a", "agent": {"prompt": "x"}, "when": "$input.x == True"},
            {"key": "b", "agent": {"prompt": "y"}, "after": ["c"]},
            {"key": "c", "agent": {"prompt": "z"}},
        ]}))
        .expect("flow");
        let lines: Vec<String> = validate(&spec).iter().map(ToString::to_string).collect();
        let message = refusal("bad", &lines);
        assert!(!message.contains('\n'), "{message}");
        assert!(
            message.starts_with("flow bad is not valid (2 problems): step a: when: "),
            "{message}"
        );
        assert!(message.contains("(character 13)"), "{message}");
        assert!(
            message.contains("; step b: after[0]: `c` is listed after this step"),
            "{message}"
        );
    }
}
