//! `approve RUN [STEP]` and `cancel RUN`: the writes a person makes on a
//! run, made as kubectl makes them, so admission judges them as it judges
//! the person's own `kubectl patch` (and its refusal is printed as it came).

use futures::TryStreamExt;
use kube::ResourceExt;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

use super::cluster::{Cluster, uid};
use super::error::PluginError;
use coxswain_core::api::{Approval, ApprovalState, Run};
use coxswain_kube::names;

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
    let name = approval.name_any();
    let given = coxswain_client::answer::Answer {
        decision: answer.decision.map(str::to_string),
        feedback: answer.feedback.map(str::to_string),
        response,
    };
    let written =
        coxswain_client::answer::write(&cluster.api::<Approval>(), &approval, &given).await?;
    let answered = format!(
        "approval.coxswain.dev/{name} answered (run {}, step {})",
        answer.run, approval.spec.step
    );
    if approval.spec.required_approvals() > 1 {
        return Ok(answered);
    }
    // Without admission an answer that does not fit is written, and only
    // the controller says it was not taken: wait for its word, briefly.
    let verdict = tokio::time::timeout(VERDICT_WAIT, verdict(cluster, &written)).await;
    match verdict {
        Ok(Ok(None)) => Ok(format!("{answered}; the run took it in")),
        Ok(Ok(Some(why))) => Err(PluginError::Approval(format!(
            "approval.coxswain.dev/{name}: the answer was not taken: {why}"
        ))),
        Ok(Err(e)) => Err(e),
        Err(_) => {
            eprintln!(
                "note: the controller has not taken the answer in yet; \
                 `kubectl get approval {name} -n {}` shows where it stands",
                cluster.namespace
            );
            Ok(answered)
        }
    }
}

/// How long `approve` waits for the controller to take the answer in.
const VERDICT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Watches the Approval after the answer was written (`written`) until the
/// controller judged it: `None` when taken, else why it was not (refused,
/// or closed because the run ended).
async fn verdict(cluster: &Cluster, written: &Approval) -> Result<Option<String>, PluginError> {
    let name = written.name_any();
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = Box::pin(watcher(cluster.api::<Approval>(), config).default_backoff());
    let before = written.resource_version();
    while let Some(event) = events.try_next().await? {
        let (watcher::Event::Apply(now) | watcher::Event::InitApply(now)) = event else {
            continue;
        };
        // Only a status written after the answer judges it.
        if now.resource_version() == before {
            continue;
        }
        let status = now.status.clone().unwrap_or_default();
        match status.state {
            Some(ApprovalState::Taken) => return Ok(None),
            Some(ApprovalState::Refused) => {
                return Ok(Some(status.refused.unwrap_or_else(|| "refused".into())));
            }
            Some(ApprovalState::Closed) => {
                return Ok(Some(status.closed.unwrap_or_else(|| "closed".into())));
            }
            _ if status.consumed => return Ok(None),
            _ => {}
        }
    }
    Err(PluginError::Client(
        "the watch of the Approval ended".into(),
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
