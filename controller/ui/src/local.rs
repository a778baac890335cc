//! Local mode (`coxswain ui --flow FILE --record REC.json`): runs made on
//! this machine, from record files and the local archive, drawn with the
//! flows of the files given; no cluster is reached.
//!
//! A run is drawn only with a flow whose digest is the one the run pinned:
//! drawing it with another flow (or another version of it) would show
//! steps it never had. Everything is read once, at start.

use axum::Json;
use axum::response::{IntoResponse, Response};
use coxswain_core::api::{FlowSpec, Run, Step};
use coxswain_core::flow::flow_digest;
use coxswain_core::view;
use kube::ResourceExt;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::flows::{flow_page, flow_row};
use crate::live;
use crate::run_page::{RunPage, RunRow, rows_of};

/// The namespace local runs and flows are shown in.
pub const NAMESPACE: &str = "local";

/// A flow read from a `--flow` file.
pub struct LocalFlow {
    /// Its `metadata.name`.
    pub name: String,
    /// The file it came from, for messages.
    pub file: String,
    /// What it says.
    pub spec: FlowSpec,
}

/// What a local viewer shows: runs (as Run objects in namespace `local`,
/// their status the whole record) and flows.
pub struct Local {
    runs: Vec<Run>,
    flows: Vec<(LocalFlow, String)>,
}

impl Local {
    /// The viewer of `runs` drawn with `flows`.
    pub fn new(runs: Vec<Run>, flows: Vec<LocalFlow>) -> Self {
        let flows = flows
            .into_iter()
            .map(|f| {
                let digest = flow_digest(&f.spec);
                (f, digest)
            })
            .collect();
        Local { runs, flows }
    }

    fn check_namespace(ns: &str) -> Result<(), ApiError> {
        if ns == NAMESPACE {
            Ok(())
        } else {
            Err(ApiError::NotFound(format!(
                "this viewer shows local runs, all in namespace `{NAMESPACE}`, not `{ns}`"
            )))
        }
    }

    /// The run `name`, or 404.
    pub fn run(&self, ns: &str, name: &str) -> Result<&Run, ApiError> {
        Self::check_namespace(ns)?;
        self.runs
            .iter()
            .find(|r| r.name_any() == name)
            .ok_or_else(|| {
                ApiError::NotFound(format!(
                    "there is no local run {name} (runs come from --record files and the records file)"
                ))
            })
    }

    /// The flow `run` ran: the `--flow` one of the digest it pinned; else
    /// why there is none, in words.
    pub fn flow_of(&self, run: &Run) -> Result<&FlowSpec, String> {
        let digest = run.status.as_ref().and_then(|s| s.flow_digest.as_deref());
        let Some(digest) = digest else {
            return Err("the run's record holds no flow digest, so no --flow file can be known to hold its flow".into());
        };
        self.flows
            .iter()
            .find(|(_, d)| d == digest)
            .map(|(f, _)| &f.spec)
            .ok_or_else(|| format!("no --flow file holds the flow this run ran (digest {digest})"))
    }

    /// The run `name` and the steps of its flow; 409 when no flow is its.
    pub fn run_and_steps(&self, ns: &str, name: &str) -> Result<(&Run, &[Step]), ApiError> {
        let run = self.run(ns, name)?;
        let spec = self.flow_of(run).map_err(ApiError::Conflict)?;
        Ok((run, &spec.steps))
    }

    /// The page of `run` (no approvals: a local run's are answered at
    /// its terminal).
    pub fn page(&self, run: &Run) -> RunPage {
        match self.flow_of(run) {
            Ok(spec) => {
                let picture = view::picture(&spec.steps, run.status.as_ref());
                RunPage::new(run, Some(picture), None, Vec::new())
            }
            Err(why) => RunPage::new(run, None, Some(why), Vec::new()),
        }
    }

    /// The runs list, or (`watch`) the same as a stream.
    pub fn list(&self, ns: &str, watch: bool) -> Result<Response, ApiError> {
        Self::check_namespace(ns)?;
        if watch {
            let mut events = vec![live::json_event("init", &json!({}))];
            events.extend(
                self.runs
                    .iter()
                    .map(|r| live::json_event("run", &json!(RunRow::of(r)))),
            );
            events.push(live::json_event("ready", &json!({})));
            return Ok(live::once(events).into_response());
        }
        Ok(Json(json!({ "namespace": ns, "runs": rows_of(&self.runs) })).into_response())
    }

    /// One run's page, or (`watch`) the same as a stream.
    pub fn one(&self, ns: &str, name: &str, watch: bool) -> Result<Response, ApiError> {
        let page = json!(self.page(self.run(ns, name)?));
        if watch {
            let events = vec![live::json_event("run", &page)];
            return Ok(live::once(events).into_response());
        }
        Ok(Json(page).into_response())
    }

    /// The flows of the `--flow` files.
    pub fn flows(&self, ns: &str) -> Result<Value, ApiError> {
        Self::check_namespace(ns)?;
        let mut rows: Vec<(&str, Value)> = self
            .flows
            .iter()
            .map(|(f, _)| (f.name.as_str(), flow_row(&f.name, &f.spec)))
            .collect();
        rows.sort_by(|a, b| a.0.cmp(b.0));
        let rows: Vec<Value> = rows.into_iter().map(|(_, row)| row).collect();
        Ok(json!({ "namespace": ns, "flows": rows }))
    }

    /// The flow `name` of the `--flow` files (the first given, when
    /// several files hold one of that name).
    pub fn flow(&self, ns: &str, name: &str) -> Result<Value, ApiError> {
        Self::check_namespace(ns)?;
        let (flow, _) = self
            .flows
            .iter()
            .find(|(f, _)| f.name == name)
            .ok_or_else(|| ApiError::NotFound(format!("no --flow file holds a flow {name}")))?;
        let mut page = flow_page(name, ns, &flow.spec);
        page["file"] = json!(flow.file);
        Ok(page)
    }
}

/// `POST …/approvals/{name}/answer` in local mode: refused, saying where a
/// local run's approvals are answered.
pub async fn answer(
    axum::extract::Path((_ns, name)): axum::extract::Path<(String, String)>,
) -> ApiError {
    ApiError::BadRequest(format!(
        "approval {name} cannot be answered here: this viewer shows local runs (coxswain ui --flow/--record), and a local run's approvals are answered at the terminal it runs in (or with `coxswain run --decide STEP=ANSWER`)"
    ))
}
