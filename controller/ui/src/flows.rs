//! Flows: each valid or with its problems (checked here as admission and
//! `coxswain lint` check them), and one flow drawn with nothing run yet.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use coxswain_core::api::{Flow, FlowSpec};
use coxswain_core::flow::validate;
use coxswain_core::view;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use crate::Shared;
use crate::error::ApiError;

/// `GET /api/v1/namespaces/{ns}/flows`.
pub async fn list(
    State(shared): State<Arc<Shared>>,
    Path(ns): Path<String>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    if let Some(local) = &shared.local {
        return local.flows(&ns).map(Json);
    }
    let client = shared.access.client(&headers)?;
    let api: Api<Flow> = Api::namespaced(client, &ns);
    let mut flows = api.list(&ListParams::default()).await?.items;
    flows.sort_by_key(|f| f.name_any());
    let rows: Vec<Value> = flows
        .iter()
        .map(|flow| flow_row(&flow.name_any(), &flow.spec))
        .collect();
    Ok(Json(json!({ "namespace": ns, "flows": rows })))
}

/// A flow as the Flows page lists it.
pub fn flow_row(name: &str, spec: &FlowSpec) -> Value {
    let problems = validate(spec);
    json!({
        "name": name,
        "steps": spec.steps.len(),
        "valid": problems.is_empty(),
        "problems": problems,
    })
}

/// `GET /api/v1/namespaces/{ns}/flows/{name}`: its problems and its picture.
pub async fn one(
    State(shared): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    if let Some(local) = &shared.local {
        return local.flow(&ns, &name).map(Json);
    }
    let client = shared.access.client(&headers)?;
    let api: Api<Flow> = Api::namespaced(client, &ns);
    let flow = api.get_opt(&name).await?.ok_or_else(|| {
        ApiError::NotFound(format!("flow {name} does not exist in namespace {ns}"))
    })?;
    Ok(Json(flow_page(&name, &ns, &flow.spec)))
}

/// A flow's page: its problems and its picture with nothing run yet.
pub fn flow_page(name: &str, ns: &str, spec: &FlowSpec) -> Value {
    let problems = validate(spec);
    json!({
        "name": name,
        "namespace": ns,
        "valid": problems.is_empty(),
        "problems": problems,
        "digest": coxswain_core::flow::flow_digest(spec),
        "picture": view::picture(&spec.steps, None),
    })
}
