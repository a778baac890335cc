//! A script step's log: what its pods printed, read as the caller; once
//! the pods are gone, the last lines each attempt's status kept.
//!
//! Pods are taken by their owners, not their labels: a pod counts only
//! when a Job the Run controls controls it, so a pod someone labelled
//! like a step's cannot put words in its log.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use coxswain_kube::names::{
    CHAIN_ANNOTATION, RUN_NAME_LABEL, STEP_LABEL, chain_container, controlled_by, step_label,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, LogParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use coxswain_core::api::Run;

use crate::Shared;
use crate::error::ApiError;
use crate::run_page::get_run;

/// The container a script runs in.
const STEP_CONTAINER: &str = "step";

/// `GET …/runs/{name}/steps/{key}/log`: `{"pods": [{pod, text}], "attempts":
/// [{number, text, cut}]}`.
pub async fn log(
    State(shared): State<Arc<Shared>>,
    Path((ns, name, key)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    if let Some(local) = &shared.local {
        // A local run's scripts ran on this machine: their tails are all
        // that is kept.
        let run = local.run(&ns, &name)?;
        let attempts = attempt_tails(run, &key);
        let pods: Vec<Value> = Vec::new();
        return Ok(Json(
            json!({ "step": key, "pods": pods, "attempts": attempts, "note": null }),
        ));
    }
    let client = shared.access.client(&headers)?;
    let run = get_run(&client, &ns, &name).await?;
    let uid = run.uid().unwrap_or_default();
    let selector = format!("{RUN_NAME_LABEL}={name}");
    let params = ListParams::default().labels(&selector);
    let (pods, note) = match from_pods(&client, &ns, &params, &uid, &key).await {
        Ok(pods) => (pods, None),
        // Someone who may read the Run but not its Jobs or pods still
        // reads what the status kept.
        Err(ApiError::Kube { code: 403, message }) => (Vec::new(), Some(message)),
        Err(e) => return Err(e),
    };
    let attempts = attempt_tails(&run, &key);
    Ok(Json(
        json!({ "step": key, "pods": pods, "attempts": attempts, "note": note }),
    ))
}

/// The last lines each attempt of step `key` kept in `run`'s record.
pub fn attempt_tails(run: &Run, key: &str) -> Vec<Value> {
    run.status
        .as_ref()
        .and_then(|s| s.steps.get(key))
        .map(|record| {
            record
                .attempts
                .iter()
                .chain(record.parts.iter().flat_map(|p| p.attempts.iter()))
                .filter_map(|a| {
                    let log = a.log.as_ref()?;
                    Some(json!({"number": a.number, "text": log.text, "cut": log.cut}))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// What the step's pods (those of Jobs the Run controls) printed, oldest
/// first: its own Jobs' `step` container, and its container in the pod of
/// a script chain it ran in.
async fn from_pods(
    client: &kube::Client,
    ns: &str,
    params: &ListParams,
    run_uid: &str,
    key: &str,
) -> Result<Vec<Value>, ApiError> {
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    let ours: Vec<(String, String)> = jobs
        .list(params)
        .await?
        .items
        .iter()
        .filter(|j| controlled_by(*j, run_uid))
        .filter_map(|j| Some((j.uid()?, container_for(j, key)?)))
        .collect();
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut pods: Vec<(Pod, String)> = pods_api
        .list(params)
        .await?
        .items
        .into_iter()
        .filter_map(|p| {
            let (_, container) = ours.iter().find(|(job, _)| controlled_by(&p, job))?;
            let container = container.clone();
            Some((p, container))
        })
        .collect();
    pods.sort_by_key(|(p, _)| p.creation_timestamp().map(|t| t.0));
    let mut out = Vec::new();
    for (pod, container) in &pods {
        let params = LogParams {
            container: Some(container.clone()),
            ..LogParams::default()
        };
        let text = match pods_api.logs(&pod.name_any(), &params).await {
            Ok(text) => text,
            Err(e) => format!("(the log cannot be read: {})", ApiError::from(e)),
        };
        out.push(json!({ "pod": pod.name_any(), "text": text }));
    }
    Ok(out)
}

/// The container of `job`'s pod that ran step `key`: `step` in the step's
/// own Job, its place in a script chain's Job that lists it; `None` for
/// another step's Job.
fn container_for(job: &Job, key: &str) -> Option<String> {
    if job.labels().get(STEP_LABEL) == Some(&step_label(key)) {
        return Some(STEP_CONTAINER.into());
    }
    let chain = job.annotations().get(CHAIN_ANNOTATION)?;
    let position = chain.split(',').position(|k| k == key)?;
    Some(chain_container(position + 1))
}
