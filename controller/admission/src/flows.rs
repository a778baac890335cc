//! Flow admission: the validator `coxswain lint` runs, and the Secret rule
//! — the person (or Argo CD) applying a flow must be allowed to read every
//! Secret it binds, asked of the API server with one SubjectAccessReview per
//! Secret, so nobody gains a Secret through a flow.

use k8s_openapi::api::authentication::v1::UserInfo;
use serde_json::Value;

use coxswain_core::api::{Flow, FlowSpec};
use coxswain_core::flow::{boolean_looking_keys, bound_secrets, validate};

use super::admit::{Admit, CannotAsk, Refusal, Request, Reviewer, may_get};
pub use super::refusal::{FlowProblem, FlowRefusal};

/// The steps (parts and loop bodies too) that save or look up, with the
/// field that does.
fn record_users(steps: &[coxswain_core::api::Step]) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for step in steps {
        let key = &step.key;
        if step.save.is_some() {
            found.push((key.clone(), "save".to_string()));
        }
        for i in 0..step.lookup.len() {
            found.push((key.clone(), format!("lookup[{i}]")));
        }
        if let Some(p) = &step.parallel {
            for (_, field) in record_users(std::slice::from_ref(&*p.step)) {
                found.push((key.clone(), format!("parallel.step.{field}")));
            }
        }
        if let Some(l) = &step.loop_ {
            found.extend(record_users(&l.steps));
        }
    }
    found
}

impl Admit for Flow {
    async fn review(reviewer: &Reviewer, request: &Request<'_>) -> Result<(), Refusal> {
        let (Some(new), old) = (request.object::<Flow>()?, request.old_object::<Flow>()?) else {
            return Ok(());
        };
        review(
            reviewer,
            &request.namespace(),
            request.name(),
            &new.spec,
            old.as_ref().map(|o| &o.spec),
            request.user_info(),
        )
        .await
    }

    /// Nothing is stamped on a Flow.
    async fn stamp(_: &Reviewer, _: &Request<'_>) -> Result<Vec<Value>, Refusal> {
        Ok(Vec::new())
    }

    /// Keys `"true"`/`"false"` in the flow's free JSON: most likely a bare
    /// `n`, `yes` or `on` that kubectl or Argo CD (YAML 1.1) turned into a
    /// boolean before the API server saw it.
    fn warnings(request: &Request<'_>) -> Vec<String> {
        match request.object::<Flow>() {
            Ok(Some(flow)) => boolean_looking_keys(&flow.spec),
            _ => Vec::new(),
        }
    }
}

/// Checks a Flow being created or updated by `user`.
pub async fn review(
    reviewer: &Reviewer,
    namespace: &str,
    name: &str,
    spec: &FlowSpec,
    old: Option<&FlowSpec>,
    user: &UserInfo,
) -> Result<(), Refusal> {
    if old == Some(spec) {
        // Only metadata changed (labels, finalizers): nothing to check.
        return Ok(());
    }
    let client = &reviewer.client;
    let mut problems: Vec<FlowProblem> = validate(spec)
        .into_iter()
        .map(FlowProblem::Invalid)
        .collect();
    if !reviewer.records {
        problems.extend(
            record_users(&spec.steps)
                .into_iter()
                .map(|(step, field)| FlowProblem::NoRecords { step, field }),
        );
    }
    let username = user.username.as_deref().unwrap_or("");
    let mut asked: Vec<(String, bool)> = Vec::new();
    for secret in bound_secrets(spec) {
        let known = asked.iter().find(|(n, _)| *n == secret.name).map(|a| a.1);
        let readable = match known {
            Some(readable) => readable,
            None => {
                let readable = may_read_secret(client, namespace, &secret.name, user).await?;
                asked.push((secret.name.clone(), readable));
                readable
            }
        };
        if !readable {
            problems.push(FlowProblem::UnreadableSecret {
                user: username.to_string(),
                secret,
            });
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(FlowRefusal {
            name: name.to_string(),
            problems,
        }
        .into())
    }
}

/// Whether `user` may `get` the Secret `name` in `namespace`.
async fn may_read_secret(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    user: &UserInfo,
) -> Result<bool, CannotAsk> {
    may_get(client, user, "secrets", namespace, name)
        .await
        .map_err(|source| CannotAsk::Secret {
            secret: name.to_string(),
            source,
        })
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
        let message = FlowRefusal {
            name: "bad".into(),
            problems: validate(&spec)
                .into_iter()
                .map(FlowProblem::Invalid)
                .collect(),
        }
        .to_string();
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
