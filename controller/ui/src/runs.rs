//! Runs: the list of a namespace, one run as its page draws it, a step's
//! attempts, an arrow's values in full and a value moved out of the status
//! (the list's rows and the run's page are made in `run_page`).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use coxswain_core::api::{Run, RunStatus, Step};
use coxswain_core::view;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::Shared;
use crate::error::ApiError;
use crate::run_page::{flow_of, get_run, page, rows_of, whole_status_of};

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

/// `?watch=true`.
#[derive(Deserialize, Default)]
pub struct WatchQuery {
    #[serde(default)]
    pub watch: bool,
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
