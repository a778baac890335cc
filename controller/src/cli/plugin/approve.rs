//! `approve RUN [STEP]` and `cancel RUN`: the writes a person makes on a
//! run, made as kubectl makes them, so admission judges them as it judges
//! the person's own `kubectl patch` (and its refusal is printed as it came).

use kube::ResourceExt;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use super::cluster::{Cluster, uid};
use super::error::PluginError;
use coxswain_core::api::{Approval, ApprovalState, Run};
use coxswain_k8s::names;

/// The answer given on the command line.
pub struct Answer<'a> {
    /// The run.
    pub run: &'a str,
    /// The step, when the run waits on several.
    pub step: Option<&'a str>,
    /// One of the step's decisions.
    pub decision: Option<&'a str>,
    /// Instructions for whoever redoes the work.
    pub feedback: Option<&'a str>,
    /// The entry, as JSON.
    pub response: Option<&'a str>,
}

/// Finds the run's open Approval (of the step) and writes the answer on
/// it; returns what to print.
pub async fn approve(cluster: &Cluster, answer: &Answer<'_>) -> Result<String, PluginError> {
    let response = answer
        .response
        .map(serde_json::from_str::<Value>)
        .transpose()
        .map_err(PluginError::ResponseNotJson)?;
    if answer.decision.is_none() && response.is_none() {
        return Err(PluginError::NoAnswer);
    }
    let run = cluster.run(answer.run).await?;
    let approval = open_approval(cluster, &run, answer.step).await?;
    let mut fields = serde_json::Map::new();
    if let Some(decision) = answer.decision {
        fields.insert("decision".into(), json!(decision));
    }
    if let Some(feedback) = answer.feedback {
        fields.insert("feedback".into(), json!(feedback));
    }
    if let Some(response) = response {
        fields.insert("response".into(), response);
    }
    let name = approval.name_any();
    let patch = if approval.spec.required_approvals() > 1 {
        // Each person adds an entry at the end of `answers`: the list as
        // read plus this one, written only over the version read.
        let mut answers = serde_json::to_value(approval.spec.answers.clone().unwrap_or_default())
            .unwrap_or_else(|_| json!([]));
        if let Some(list) = answers.as_array_mut() {
            list.push(Value::Object(fields));
        }
        json!({
            "metadata": {"resourceVersion": approval.resource_version()},
            "spec": {"answers": answers},
        })
    } else {
        json!({"spec": fields})
    };
    cluster
        .api::<Approval>()
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(format!(
        "approval.coxswain.dev/{name} answered (run {}, step {})",
        answer.run, approval.spec.step
    ))
}

/// The one Approval of the run (and step) still waiting for an answer.
async fn open_approval(
    cluster: &Cluster,
    run: &Run,
    step: Option<&str>,
) -> Result<Approval, PluginError> {
    let run_uid = uid(run);
    let selector = format!("{}={run_uid}", names::RUN_UID_LABEL);
    let all = cluster
        .api::<Approval>()
        .list(&ListParams::default().labels(&selector))
        .await?;
    let open: Vec<Approval> = all
        .into_iter()
        .filter(|a| names::controlled_by(a, &run_uid) && is_open(a))
        .collect();
    let name = run.name_any();
    let matching: Vec<&Approval> = open
        .iter()
        .filter(|a| step.is_none_or(|s| a.spec.step == s))
        .collect();
    match matching.as_slice() {
        [one] => Ok((*one).clone()),
        [] if open.is_empty() => Err(PluginError::Approval(format!(
            "run `{name}` waits for no answer: it has no open Approval"
        ))),
        [] => Err(PluginError::Approval(format!(
            "run `{name}` has no open Approval for step `{}`; open:\n{}",
            step.unwrap_or_default(),
            listing(open.iter())
        ))),
        several => Err(PluginError::Approval(format!(
            "run `{name}` waits on several Approvals; name the step:\n{}",
            listing(several.iter().copied())
        ))),
    }
}

/// Whether the Approval still takes an answer: open, or refused (another
/// answer may be written); not taken in, and not closed.
fn is_open(approval: &Approval) -> bool {
    let status = approval.status.clone().unwrap_or_default();
    match status.state {
        Some(state) => matches!(state, ApprovalState::Open | ApprovalState::Refused),
        None => !status.consumed && status.closed.is_none() && !approval.spec.answered(),
    }
}

fn listing<'a>(approvals: impl Iterator<Item = &'a Approval>) -> String {
    approvals
        .map(|a| {
            let decisions = if a.spec.decisions.is_empty() {
                "an entry".to_string()
            } else {
                format!("decisions {}", a.spec.decisions.join(", "))
            };
            format!(
                "  step {} ({decisions}): approval {}",
                a.spec.step,
                a.name_any()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `cancel RUN`: sets `spec.cancel`; the controller stops what runs and
/// the run ends `Cancelled`.
pub async fn cancel(cluster: &Cluster, name: &str) -> Result<String, PluginError> {
    let patch = json!({"spec": {"cancel": true}});
    cluster
        .runs()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| match e {
            kube::Error::Api(s) if s.code == 404 => PluginError::NoRun {
                run: name.to_string(),
                namespace: cluster.namespace.clone(),
            },
            other => other.into(),
        })?;
    Ok(format!("run.coxswain.dev/{name} cancelled"))
}
