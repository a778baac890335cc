//! Runs: the list of a namespace, one run as its page draws it, a step's
//! attempts, an arrow's values in full and a value moved out of the status.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use coxswain_client::flow::{self, FlowError};
use coxswain_client::whole_status;
use coxswain_core::api::{Run, RunStatus, Step};
use coxswain_core::engine::CompiledFlow;
use coxswain_core::view::{self, Picture};
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::Shared;
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

/// `GET /api/v1/namespaces/{ns}/runs` (`?watch=true`: a live stream).
pub async fn list(
    State(shared): State<Arc<Shared>>,
    Path(ns): Path<String>,
    Query(query): Query<WatchQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    if let Some(local) = &shared.local {
        return local.list(&ns, query.watch);
    }
    let client = shared.access.client(&headers)?;
    let api: Api<Run> = Api::namespaced(client, &ns);
    if query.watch {
        // Refused here, the refusal is an answer the page can read; inside
        // the stream it would only be an event.
        api.list(&ListParams::default().limit(1)).await?;
        return Ok(crate::live::runs(api).into_response());
    }
    let runs = api.list(&ListParams::default()).await?;
    Ok(Json(json!({ "namespace": ns, "runs": rows_of(&runs.items) })).into_response())
}

/// The rows of `runs`, newest first.
pub fn rows_of(runs: &[Run]) -> Vec<RunRow> {
    let mut rows: Vec<RunRow> = runs.iter().map(RunRow::of).collect();
    rows.sort_by(|a, b| b.created.cmp(&a.created).then(a.name.cmp(&b.name)));
    rows
}

/// `?watch=true`.
#[derive(Deserialize, Default)]
pub struct WatchQuery {
    #[serde(default)]
    pub watch: bool,
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

/// `GET /api/v1/namespaces/{ns}/runs/{name}` (`?watch=true`: a live stream
/// of the same, sent again whenever the Run or one of its Approvals changes).
pub async fn one(
    State(shared): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
    Query(query): Query<WatchQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    if let Some(local) = &shared.local {
        return local.one(&ns, &name, query.watch);
    }
    let client = shared.access.client(&headers)?;
    if query.watch {
        get_run(&client, &ns, &name).await?;
        return Ok(crate::live::run(client, ns, name).into_response());
    }
    let run = get_run(&client, &ns, &name).await?;
    Ok(Json(page(&client, &run).await?).into_response())
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

/// `GET …/runs/{name}/steps/{key}`: the step as written and all it did.
pub async fn step(
    State(shared): State<Arc<Shared>>,
    Path((ns, name, key)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    if let Some(local) = &shared.local {
        let (run, steps) = local.run_and_steps(&ns, &name)?;
        return step_detail(run, steps, &key).map(Json);
    }
    let client = shared.access.client(&headers)?;
    let run = get_run(&client, &ns, &name).await?;
    let flow = flow_of(&client, &run).await?;
    step_detail(&run, &flow.spec().steps, &key).map(Json)
}

/// A step as written and all it did in `run`, drawn with `steps`.
pub fn step_detail(run: &Run, steps: &[Step], key: &str) -> Result<Value, ApiError> {
    let name = run.name_any();
    let graph = coxswain_core::flow::FlowGraph::new(steps);
    let node = graph
        .find(key)
        .map(|n| &graph.nodes[n])
        .ok_or_else(|| ApiError::NotFound(format!("run {name}'s flow has no step `{key}`")))?;
    let record = run.status.as_ref().and_then(|s| s.steps.get(key));
    let into: Vec<_> = run
        .status
        .as_ref()
        .map(|status| {
            view::picture(steps, Some(status))
                .arrows
                .into_iter()
                .filter(|a| a.to == key)
                .collect()
        })
        .unwrap_or_default();
    Ok(json!({
        "key": key,
        "kind": node.step.kind().map_or("step", |k| k.name()),
        "location": node.location,
        "step": node.step,
        "record": record,
        "arrowsIn": into,
    }))
}

/// `GET …/runs/{name}/arrows/{id}`: the arrow with each value that moved
/// along it whole (moved-out values fetched).
pub async fn arrow(
    State(shared): State<Arc<Shared>>,
    Path((ns, name, id)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    if let Some(local) = &shared.local {
        let (run, steps) = local.run_and_steps(&ns, &name)?;
        let record = run.status.clone().unwrap_or_default();
        return arrow_line(&name, steps, &record, &id).map(Json);
    }
    let client = shared.access.client(&headers)?;
    let run = get_run(&client, &ns, &name).await?;
    let flow = flow_of(&client, &run).await?;
    // Someone who may read the Run but not the ConfigMaps its large values
    // moved to still sees the arrow, with the previews the status keeps.
    let (record, unread) = match whole_status_of(&client, &run).await {
        Ok(record) => (record, None),
        Err(e) => (run.status.clone().unwrap_or_default(), Some(e.to_string())),
    };
    let mut line = arrow_line(&name, &flow.spec().steps, &record, &id)?;
    if let Some(why) = unread {
        line["unread"] = json!(why);
    }
    Ok(Json(line))
}

/// The arrow `id` of run `name` with each value that moved along it whole.
fn arrow_line(name: &str, steps: &[Step], record: &RunStatus, id: &str) -> Result<Value, ApiError> {
    let line = view::arrow_in_full(steps, record, id)
        .ok_or_else(|| ApiError::NotFound(format!("run {name} has no arrow `{id}`")))?;
    Ok(json!(line))
}

/// `?path=/steps/KEY/output`.
#[derive(Deserialize)]
pub struct ValueQuery {
    path: String,
}

/// `GET …/runs/{name}/values?path=POINTER`: a value of the status whole,
/// where the status holds a preview because it was moved out.
pub async fn value(
    State(shared): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
    Query(query): Query<ValueQuery>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let record = match &shared.local {
        // A local run's status is whole: nothing was moved out of it.
        Some(local) => local.run(&ns, &name)?.status.clone().unwrap_or_default(),
        None => {
            let client = shared.access.client(&headers)?;
            let run = get_run(&client, &ns, &name).await?;
            whole_status_of(&client, &run).await?
        }
    };
    let whole = serde_json::to_value(&record).map_err(|e| ApiError::Internal(e.to_string()))?;
    let found = whole.pointer(&query.path).cloned().ok_or_else(|| {
        ApiError::NotFound(format!("run {name}'s record has nothing at {}", query.path))
    })?;
    Ok(Json(json!({ "path": query.path, "value": found })))
}
