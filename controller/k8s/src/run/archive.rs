//! What happens to a Run once it ended: it is archived in the records
//! database (the Run object with every value moved out of its status put
//! back), and, once its retention is up, deleted from the cluster — its
//! Jobs, ConfigMaps and Approvals with it, by their owner references.
//!
//! What becomes of it is the engine's [`HandOff`]: the plan that ends a
//! run carries it out at once, from the status it just wrote; every later
//! look at the ended run asks [`engine::hand_off`] the same of its status
//! and pinned flow.
//!
//! Nothing is deleted that the database does not hold: the archive is
//! asked for the Run's uid just before the delete, and the delete itself
//! carries the uid as a precondition, so a Run re-made under the same name
//! is never the one that goes. Without a database nothing is archived and
//! nothing is deleted.

use std::time::Duration;

use jiff::Timestamp;
use kube::api::{DeleteParams, Preconditions, PropagationPolicy};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};

use coxswain_core::api::{Run, RunStatus};
use coxswain_core::engine::{self, HandOff};
use coxswain_records::{ArchivedRun, Store};

use super::Context;
use super::pin::{self, Pinned};
use crate::error::Error;
use crate::settings::ERROR_REQUEUE;

/// An ended run read back: its status and pinned flow give its hand-off,
/// as the plan that ended it did, and [`hand_off`] carries it out.
pub async fn look_after_end(ctx: &Context, run: &Run) -> Result<Action, Error> {
    let Some(stored) = run.status.as_ref().filter(|_| ctx.records.is_some()) else {
        return Ok(Action::await_change());
    };
    // The phase and the pinned digest are never moved out of the status:
    // the stored form answers, and the values are put back only to archive.
    let digest = stored.flow_digest.as_deref();
    let handed = match pin::pinned_flow(&ctx.client, &ctx.flows, run, digest).await {
        Ok(Pinned::Flow(flow)) => engine::hand_off(flow.spec(), stored),
        // A snapshot gone or replaced: the controller's default retention.
        _ => None,
    };
    hand_off(ctx, run, None, handed.unwrap_or_default()).await
}

/// Carries out `handed` for `run`, which ended: archives it when it is not
/// yet (with `whole`, its status with every value in place, when the
/// caller has it; else read back), then deletes it if its retention (the
/// flow's, else the controller's default) is up; says when to look again
/// (at the end of its retention).
pub async fn hand_off(
    ctx: &Context,
    run: &Run,
    whole: Option<&RunStatus>,
    handed: HandOff,
) -> Result<Action, Error> {
    let Some(store) = &ctx.records else {
        return Ok(Action::await_change());
    };
    let Some(uid) = run.uid() else {
        return Ok(Action::await_change());
    };
    match store.is_archived(&uid).await {
        Ok(true) => {}
        Ok(false) => {
            let loaded;
            let status = match whole {
                Some(status) => status,
                None => {
                    loaded = ctx.offloader.load(run).await?;
                    &loaded
                }
            };
            if let Err(e) = store.archive(&archived(run, status)).await {
                tracing::warn!(run = %run.name_any(), error = %e, "could not archive the run; trying again");
                return Ok(Action::requeue(ERROR_REQUEUE));
            }
            ctx.metrics.run_archived();
            tracing::debug!(run = %run.name_any(), "archived");
        }
        Err(e) => {
            tracing::warn!(run = %run.name_any(), error = %e, "could not ask the archive; trying again");
            return Ok(Action::requeue(ERROR_REQUEUE));
        }
    }
    let Some(keep) = handed.keep_for.or(ctx.settings.records.finished_runs) else {
        return Ok(Action::await_change());
    };
    let ended = whole
        .or(run.status.as_ref())
        .and_then(|s| s.finished_at.as_deref())
        .and_then(|t| t.parse::<Timestamp>().ok());
    let Some(ended) = ended else {
        return Ok(Action::await_change());
    };
    let left = Duration::try_from(ended.duration_until(Timestamp::now()))
        .map(|waited| keep.saturating_sub(waited))
        .unwrap_or(keep);
    if !left.is_zero() {
        return Ok(Action::requeue(left));
    }
    delete(ctx, store, run, &uid).await
}

/// Deletes the Run of uid `uid` once the archive confirms it holds it.
async fn delete(ctx: &Context, store: &Store, run: &Run, uid: &str) -> Result<Action, Error> {
    match store.is_archived(uid).await {
        Ok(true) => {}
        Ok(false) | Err(_) => return Ok(Action::requeue(ERROR_REQUEUE)),
    }
    let api: Api<Run> = Api::namespaced(ctx.client.clone(), &run.namespace().unwrap_or_default());
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&run.name_any(), &params).await {
        Ok(_) => {
            ctx.metrics.run_deleted_by_retention();
            tracing::info!(run = %run.name_any(), "deleted by retention (archived)");
            Ok(Action::await_change())
        }
        // Gone already, or another Run under the name now.
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(Action::await_change()),
        Err(source) => Err(Error::Kube {
            action: format!("deleting the finished run {}", run.name_any()),
            source,
        }),
    }
}

/// The archive's copy of `run`, with `status` (values put back) as its
/// status.
fn archived(run: &Run, run_status: &RunStatus) -> ArchivedRun {
    let mut whole = run.clone();
    whole.status = Some(run_status.clone());
    whole.metadata.managed_fields = None;
    ArchivedRun {
        namespace: run.namespace().unwrap_or_default(),
        name: run.name_any(),
        uid: run.uid().unwrap_or_default(),
        flow: run.spec.flow_ref.name.clone(),
        phase: format!("{:?}", run_status.phase),
        created: run
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .or_else(|| run_status.started_at.clone())
            .unwrap_or_default(),
        finished: run_status.finished_at.clone(),
        flow_digest: run_status.flow_digest.clone(),
        run: serde_json::to_value(&whole).unwrap_or_default(),
        offloaded: serde_json::json!({}),
    }
}
