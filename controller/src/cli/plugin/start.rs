//! `start FLOW`: a Run of the Flow, named by the API server from
//! `generateName: FLOW-`, as a person would create it with kubectl.

use kube::api::{ObjectMeta, PostParams};
use serde_json::Value;

use super::super::CliError;
use super::cluster::Cluster;
use super::error::PluginError;
use coxswain_core::api::{Flow, FlowRef, Run, RunSpec};
use coxswain_core::flow::{StartProblem, input_fits};

/// Creates the Run and returns its name. The input is checked against the
/// Flow's `input` schema first, so a mistake is said before anything exists.
pub async fn start(
    cluster: &Cluster,
    flow: &str,
    input: Option<&str>,
) -> Result<String, PluginError> {
    let input = input.map(read_input).transpose()?;
    let found = cluster
        .api::<Flow>()
        .get_opt(flow)
        .await?
        .ok_or_else(|| PluginError::NoFlow {
            flow: flow.to_string(),
            namespace: cluster.namespace.clone(),
        })?;
    if let Err(StartProblem::Input(problems)) = input_fits(&found.spec, input.as_ref()) {
        return Err(CliError::InputDoesNotFit {
            flow: flow.to_string(),
            problems,
        }
        .into());
    }
    let run = Run {
        metadata: ObjectMeta {
            generate_name: Some(format!("{flow}-")),
            ..ObjectMeta::default()
        },
        spec: RunSpec {
            flow_ref: FlowRef {
                name: flow.to_string(),
            },
            input,
            ..RunSpec::default()
        },
        status: None,
    };
    let created = cluster.runs().create(&PostParams::default(), &run).await?;
    Ok(created.metadata.name.unwrap_or_default())
}

/// `--input`: JSON, or `@FILE` holding JSON (`@-`: standard input).
fn read_input(text: &str) -> Result<Value, CliError> {
    let raw = match text.strip_prefix('@') {
        Some("-") => super::super::read::read_stdin("input")?,
        Some(path) => super::super::read::read_text(path.as_ref(), "input")?,
        None => text.to_string(),
    };
    serde_json::from_str(&raw).map_err(CliError::InputNotJson)
}
