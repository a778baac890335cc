//! A run as the viewer shows it: its row in a namespace's list and its
//! page, read with the caller's credentials. The handlers (`runs`) and the
//! live streams (`live`) both serve them.

use std::sync::Arc;

use coxswain_client::flow::{self, FlowError};
use coxswain_client::whole_status;
use coxswain_core::api::{Run, RunStatus};
use coxswain_core::engine::CompiledFlow;
use coxswain_core::view::{self, Picture};
use kube::{Api, Client, ResourceExt};
use serde::Serialize;
use serde_json::Value;

use crate::approvals::{self, OpenApproval};
use crate::error::ApiError;

/// A run as the Runs page lists it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRow {
    name: String,
    flow: String,
    phase: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    current_step: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    progress: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    created: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    started_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    finished_at: Option<String>,
}

impl RunRow {
    /// The row of `run`.
    pub fn of(run: &Run) -> Self {
        let status = run.status.as_ref();
        RunRow {
            name: run.name_any(),
            flow: run.spec.flow_ref.name.clone(),
            phase: status.map_or_else(|| "Pending".to_string(), |s| phase_name(s.phase)),
            current_step: status.and_then(|s| s.current_step.clone()),
            progress: status.and_then(|s| s.progress.clone()),
            created: run.creation_timestamp().map(|t| t.0.to_string()),
            started_at: status.and_then(|s| s.started_at.clone()),
            finished_at: status.and_then(|s| s.finished_at.clone()),
        }
    }
}

/// A phase as the API writes it (`Succeeded`).
pub fn phase_name(phase: coxswain_core::api::RunPhase) -> String {
    serde_json::to_value(phase)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The rows of `runs`, newest first.
pub fn rows_of(runs: &[Run]) -> Vec<RunRow> {
    let mut rows: Vec<RunRow> = runs.iter().map(RunRow::of).collect();
    rows.sort_by(|a, b| b.created.cmp(&a.created).then(a.name.cmp(&b.name)));
    rows
}

/// One run as its page shows it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunPage {
    #[serde(flatten)]
    row: RunRow,
    namespace: String,
    uid: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rerun_of: Option<Value>,
    /// Why the flow could not be drawn, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    flow_problem: Option<String>,
    picture: Option<Picture>,
    approvals: Vec<OpenApproval>,
}

/// The page of `run`, as `one` serves it and the live stream sends it.
pub async fn page(client: &Client, run: &Run) -> Result<RunPage, ApiError> {
    let status = run.status.as_ref();
    let (picture, flow_problem) = match flow_of(client, run).await {
        Ok(flow) => (Some(view::picture(&flow.spec().steps, status)), None),
        Err(ApiError::Conflict(why)) => (None, Some(why)),
        Err(e) => return Err(e),
    };
    let approvals = approvals::open(client, run).await?;
    Ok(RunPage::new(run, picture, flow_problem, approvals))
}

impl RunPage {
    /// The page of `run` drawn as `picture` (or not, for `flow_problem`),
    /// with the Approvals it waits on.
    pub fn new(
        run: &Run,
        picture: Option<Picture>,
        flow_problem: Option<String>,
        approvals: Vec<OpenApproval>,
    ) -> Self {
        let status = run.status.as_ref();
        RunPage {
            row: RunRow::of(run),
            namespace: run.namespace().unwrap_or_default(),
            uid: run.uid().unwrap_or_default(),
            error: status
                .and_then(|s| s.error.as_ref())
                .and_then(|e| serde_json::to_value(e).ok()),
            output: status.and_then(|s| s.output.clone()),
            rerun_of: status
                .and_then(|s| serde_json::to_value(s).ok())
                .and_then(|s| s.get("rerunOf").cloned()),
            flow_problem,
            picture,
            approvals,
        }
    }
}

/// The Run `name`, or 404 saying where it was looked for.
pub async fn get_run(client: &Client, ns: &str, name: &str) -> Result<Run, ApiError> {
    let api: Api<Run> = Api::namespaced(client.clone(), ns);
    api.get_opt(name)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("run {name} does not exist in namespace {ns}")))
}

/// The flow `run` goes on with, read as the person asking
/// (`coxswain_client::flow::of_run`); `Conflict` says why it cannot be had.
pub async fn flow_of(client: &Client, run: &Run) -> Result<Arc<CompiledFlow>, ApiError> {
    flow::of_run(client, run).await.map_err(|e| match e {
        FlowError::Kube { source, .. } => ApiError::from(source),
        other => ApiError::Conflict(other.to_string()),
    })
}

/// The status of `run` with every value moved out of it put back.
pub async fn whole_status_of(client: &Client, run: &Run) -> Result<RunStatus, ApiError> {
    whole_status(client, run)
        .await
        .map_err(|e| ApiError::Conflict(format!("the run's moved-out values: {e}")))
}
