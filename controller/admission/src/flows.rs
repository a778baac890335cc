//! Flow admission: the validator `coxswain lint` runs, and the Secret rule
//! — the person (or Argo CD) applying a flow must be allowed to read every
//! Secret it binds, asked of the API server with one SubjectAccessReview per
//! Secret, so nobody gains a Secret through a flow.

use k8s_openapi::api::authentication::v1::UserInfo;
use serde_json::Value;

use coxswain_core::api::{Flow, FlowSpec, StepProblem};
use coxswain_core::flow::{BoundSecret, boolean_looking_keys, bound_secrets, one_line, validate};

use super::admit::{Admit, CannotAsk, Refusal, Request, Reviewer, may_get};

/// Why a Flow is refused: every problem it has, on one line (kubectl
/// prints one line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("flow {name} is not valid ({}): {}", count(.problems), one_line(.problems))]
pub struct FlowRefusal {
    /// The Flow's name.
    pub name: String,
    /// Every problem, validation's first, in document order.
    pub problems: Vec<FlowProblem>,
}

/// `1 problem`, `2 problems`.
fn count(problems: &[FlowProblem]) -> String {
    match problems.len() {
        1 => "1 problem".to_string(),
        n => format!("{n} problems"),
    }
}

/// One problem of a Flow being applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowProblem {
    /// What the validator found, as `coxswain lint` prints it.
    #[error("{0}")]
    Invalid(StepProblem),
    /// A Secret the flow binds that the applier may not read.
    #[error(
        "{}{}: `{user}` may not read the Secret `{}`, so may not bind it in a flow (nobody gains a Secret through Coxswain)",
        step_prefix(&.secret.step), .secret.field, .secret.name
    )]
    UnreadableSecret {
        /// Who applies the flow.
        user: String,
        /// The Secret and where the flow binds it.
        secret: BoundSecret,
    },
    /// A save or lookup in a cluster whose controller has no records
    /// database.
    #[error(
        "step {step}: {field}: this cluster has no records database to {what}; set `records.database` in the chart (the controller's --records-database)",
        what = if .field.starts_with("save") { "save into" } else { "look up in" }
    )]
    NoRecords {
        /// The step that saves or looks up.
        step: String,
        /// `save`, or `lookup[i]`.
        field: String,
    },
}

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

/// `step KEY: `, or nothing for a flow-level field.
fn step_prefix(step: &str) -> String {
    if step.is_empty() {
        String::new()
    } else {
        format!("step {step}: ")
    }
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
