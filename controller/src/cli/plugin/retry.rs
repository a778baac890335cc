//! `retry RUN [--from STEP]`: a new Run of the ended run's flow and input
//! with `spec.from`, so the controller reruns STEP and what follows and
//! keeps the old status of every other step. Without `--from`, the first
//! step that failed (the core's own choice, as `coxswain run --from` makes it).

use kube::ResourceExt;
use kube::api::{ObjectMeta, PostParams};

use super::cluster::Cluster;
use super::error::PluginError;
use coxswain_core::api::{Run, RunFrom, RunSpec};
use coxswain_core::engine::{CompiledFlow, first_failed_step};
use coxswain_core::flow::one_line;

/// Creates the rerun; returns its name and the step it reruns from.
pub async fn retry(
    cluster: &Cluster,
    name: &str,
    from: Option<&str>,
) -> Result<(String, String), PluginError> {
    let old = cluster.run(name).await?;
    let status = old.status.clone().unwrap_or_default();
    if !status.phase.is_over() {
        return Err(PluginError::Retry(format!(
            "run `{name}` has not ended (it is {:?}); wait for it or cancel it first",
            status.phase
        )));
    }
    let spec = super::flow::of_run(cluster, &old).await?;
    let flow = CompiledFlow::new(spec).map_err(|problems| {
        PluginError::Retry(format!(
            "run `{name}`'s flow is not valid: {}",
            one_line(&problems)
        ))
    })?;
    let step = match from {
        Some(step) => {
            if flow.get().graph.find(step).is_none() {
                return Err(PluginError::Retry(format!(
                    "run `{name}`'s flow has no step `{step}`"
                )));
            }
            step.to_string()
        }
        None => first_failed_step(flow.get(), &status).ok_or_else(|| {
            PluginError::Retry(format!(
                "no step of run `{name}` failed; name the step to rerun from with --from"
            ))
        })?,
    };
    let flow_name = &old.spec.flow_ref.name;
    let rerun = Run {
        metadata: ObjectMeta {
            generate_name: Some(format!("{flow_name}-")),
            ..ObjectMeta::default()
        },
        spec: RunSpec {
            flow_ref: old.spec.flow_ref.clone(),
            input: old.spec.input.clone(),
            from: Some(RunFrom {
                run: old.name_any(),
                step: step.clone(),
                uid: old.uid(),
            }),
            ..RunSpec::default()
        },
        status: None,
    };
    let created = cluster
        .runs()
        .create(&PostParams::default(), &rerun)
        .await?;
    Ok((created.metadata.name.unwrap_or_default(), step))
}
