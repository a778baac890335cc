//! What `coxswain ui` shows in local mode: the flows of the `--flow` files,
//! the runs of the `--record` files and of the local records file, read
//! once at start.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use coxswain_core::api::{FlowRef, Run, RunSpec, RunStatus};
use coxswain_core::flow::flow_digest;
use coxswain_records::{MAX_LIMIT, RunQuery, Store};
use coxswain_ui::{LOCAL_NAMESPACE, Local, LocalFlow};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;

use crate::cli::records::Place;

/// What a run of no known flow is listed under.
const UNKNOWN_FLOW: &str = "(no --flow file)";

/// The flows and runs to show; an unreadable `--flow` or `--record` file
/// stops the start, saying which and why.
pub async fn load(flows: &[PathBuf], records: &[PathBuf], place: &Place) -> Result<Local, String> {
    let flows = read_flows(flows)?;
    let mut names = BTreeSet::new();
    let mut runs = Vec::new();
    for path in records {
        let status = crate::cli::graph::read_status(path).map_err(|e| e.to_string())?;
        let name = unique(&mut names, &stem(path));
        let flow = flow_name(&flows, &status);
        let created = status.started_at.clone();
        runs.push(run_object(name, None, flow, created.as_deref(), status));
    }
    for run in archived(place).await? {
        let name = unique(&mut names, &run.metadata.name.clone().unwrap_or_default());
        runs.push(Run {
            metadata: kube::api::ObjectMeta {
                name: Some(name),
                ..run.metadata
            },
            ..run
        });
    }
    Ok(Local::new(runs, flows))
}

/// Every flow of every `--flow` file, read as `coxswain run` reads one.
fn read_flows(files: &[PathBuf]) -> Result<Vec<LocalFlow>, String> {
    let mut flows = Vec::new();
    for path in files {
        let text = crate::cli::read::read_text(path, "flow").map_err(|e| e.to_string())?;
        let documents = coxswain_core::flow::flows_in_yaml(&text)
            .map_err(|e| format!("--flow {}: {e}", path.display()))?;
        if documents.is_empty() {
            return Err(format!("--flow {}: the file holds no Flow", path.display()));
        }
        for document in documents {
            let (name, spec) =
                crate::cli::load_flow(path, Some(&document.name)).map_err(|e| e.to_string())?;
            flows.push(LocalFlow {
                name,
                file: path.display().to_string(),
                spec,
            });
        }
    }
    Ok(flows)
}

/// The runs archived in the records file (none when there is no file).
async fn archived(place: &Place) -> Result<Vec<Run>, String> {
    let path = match place.path() {
        Ok(path) if path.exists() => path,
        // Without a records file (or a place for one) there is nothing
        // archived; --record files are shown all the same.
        Ok(path) => {
            if place.path.is_some() {
                eprintln!("note: there is no records file at {}", path.display());
            }
            return Ok(Vec::new());
        }
        Err(_) => return Ok(Vec::new()),
    };
    let store = Store::open_sqlite(&path)
        .await
        .map_err(|e| format!("records file {}: {e}", path.display()))?;
    let query = RunQuery {
        namespace: Some(LOCAL_NAMESPACE.into()),
        flow: None,
        phase: None,
        since: None,
        limit: MAX_LIMIT,
    };
    let listed = store
        .list_runs(&query)
        .await
        .map_err(|e| format!("records file {}: {e}", path.display()))?;
    let mut runs = Vec::new();
    for summary in listed {
        let found = store
            .archived_run(&summary.namespace, &summary.name)
            .await
            .map_err(|e| format!("records file {}: {e}", path.display()))?;
        // A name used again: the archive gives the last run of that name,
        // already taken when its own row came.
        let Some(archived) = found.filter(|a| a.uid == summary.uid) else {
            continue;
        };
        let label = PathBuf::from(format!("archived run {LOCAL_NAMESPACE}/{}", archived.name));
        let status =
            crate::cli::graph::status_of(archived.run, label).map_err(|e| e.to_string())?;
        runs.push(run_object(
            archived.name,
            Some(archived.uid),
            archived.flow,
            Some(&archived.created),
            status,
        ));
    }
    Ok(runs)
}

/// The flow a status ran, by name: the `--flow` one of its digest.
fn flow_name(flows: &[LocalFlow], status: &RunStatus) -> String {
    status
        .flow_digest
        .as_deref()
        .and_then(|digest| flows.iter().find(|f| flow_digest(&f.spec) == digest))
        .map_or_else(|| UNKNOWN_FLOW.to_string(), |f| f.name.clone())
}

/// A Run object in namespace `local` holding `status`, as the viewer's
/// pages read runs.
fn run_object(
    name: String,
    uid: Option<String>,
    flow: String,
    created: Option<&str>,
    status: RunStatus,
) -> Run {
    let mut run = Run::new(
        &name,
        RunSpec {
            flow_ref: FlowRef { name: flow },
            input: None,
            cancel: false,
            from: None,
        },
    );
    run.metadata.namespace = Some(LOCAL_NAMESPACE.into());
    run.metadata.uid = uid;
    run.metadata.creation_timestamp =
        created.and_then(|t| serde_json::from_value::<Time>(json!(t)).ok());
    run.status = Some(status);
    run
}

/// A run name from a status file's name (`rec.json` → `rec`).
fn stem(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    if name.is_empty() {
        "record".into()
    } else {
        name
    }
}

/// `name`, or `name-2`, `name-3`… when it is already taken.
fn unique(taken: &mut BTreeSet<String>, name: &str) -> String {
    let mut candidate = name.to_string();
    let mut n = 2;
    while taken.contains(&candidate) {
        candidate = format!("{name}-{n}");
        n += 1;
    }
    taken.insert(candidate.clone());
    candidate
}
