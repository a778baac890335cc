//! The Approvals a run waits on, and a person's answer to one.
//!
//! An Approval is shown only when it is the one the controller made for
//! the run (its name is derived from the run's uid, its spec and its
//! controller owner agree): anyone who may create Approvals in the
//! namespace can make one that looks like it, and a person must never be
//! asked to decide on words the run never showed.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use coxswain_client::answer;
use coxswain_client::not_ours;
use coxswain_core::api::{Approval, ApprovalState, Run};
use coxswain_core::flow::describe_approvers;
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::Shared;
use crate::error::ApiError;

/// An Approval waiting for an answer, as its form shows it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenApproval {
    name: String,
    step: String,
    attempt: i32,
    mode: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    show: Option<Value>,
    decisions: Vec<String>,
    fields: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<String>,
    /// Who may decide, in words.
    approvers: String,
    /// How many people must agree (answers go to `spec.answers` past one).
    needed: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    tally: Option<String>,
    /// Why the last answer written was not taken.
    #[serde(skip_serializing_if = "Option::is_none")]
    refused: Option<String>,
}

/// The open Approvals the controller made for `run`.
pub async fn open(client: &Client, run: &Run) -> Result<Vec<OpenApproval>, ApiError> {
    let api: Api<Approval> = Api::namespaced(client.clone(), &run.namespace().unwrap_or_default());
    let selector = format!(
        "{}={}",
        coxswain_kube::names::RUN_NAME_LABEL,
        run.name_any()
    );
    let listed = match api.list(&ListParams::default().labels(&selector)).await {
        Ok(list) => list.items,
        // Someone who may read the run but not its Approvals sees none.
        Err(kube::Error::Api(e)) if e.code == 403 => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    Ok(listed
        .into_iter()
        .filter(|a| {
            let attempt = u32::try_from(a.spec.attempt).unwrap_or(0);
            not_ours(a, run, &a.spec.step, attempt).is_none()
        })
        .filter(|a| {
            let state = a.status.as_ref().and_then(|s| s.state);
            matches!(
                state,
                None | Some(ApprovalState::Open | ApprovalState::Refused)
            )
        })
        .map(|a| shown(&a))
        .collect())
}

fn shown(a: &Approval) -> OpenApproval {
    let spec = &a.spec;
    let status = a.status.as_ref();
    OpenApproval {
        name: a.name_any(),
        step: spec.step.clone(),
        attempt: spec.attempt,
        mode: json!(spec.mode),
        show: spec.show.clone(),
        decisions: spec.decisions.clone(),
        fields: json!(spec.fields),
        instructions: spec.instructions.clone(),
        approvers: spec.approvers.as_ref().map_or_else(
            || "anyone who may update this Approval".into(),
            |a| describe_approvers(&a.users, &a.groups),
        ),
        needed: spec.approvals.unwrap_or(1).max(1),
        tally: status.and_then(|s| s.tally.clone()),
        refused: status.and_then(|s| s.refused.clone()),
    }
}

/// A person's answer, as the form sends it.
#[derive(Deserialize)]
pub struct Answer {
    #[serde(default)]
    decision: Option<String>,
    #[serde(default)]
    feedback: Option<String>,
    #[serde(default)]
    response: Option<Value>,
}

/// `POST /api/v1/namespaces/{ns}/approvals/{name}/answer`: writes the
/// answer as the caller, where the Approval wants it (`spec` for one
/// approver, appended to `spec.answers` when several must agree). The
/// admission webhook's refusal comes back as it came.
pub async fn answer(
    State(shared): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
    headers: HeaderMap,
    Json(answer): Json<Answer>,
) -> Result<Json<Value>, ApiError> {
    let given = answer::Answer {
        decision: answer.decision,
        feedback: answer.feedback,
        response: answer.response,
    };
    if given.is_empty() {
        return Err(ApiError::BadRequest(
            "an answer needs a decision, or a response for an entry".into(),
        ));
    }
    let client = shared.access.client(&headers)?;
    let api: Api<Approval> = Api::namespaced(client, &ns);
    let approval = api.get_opt(&name).await?.ok_or_else(|| {
        ApiError::NotFound(format!("approval {name} does not exist in namespace {ns}"))
    })?;
    let written = answer::write(&api, &approval, &given).await?;
    Ok(Json(json!({
        "name": written.name_any(),
        "decidedBy": written.spec.decided_by,
        "answers": written.spec.answers,
    })))
}
