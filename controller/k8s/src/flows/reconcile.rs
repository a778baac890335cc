//! One reconcile of one Flow: validate it, follow its schedule, and write
//! its status when (and only when) it changed.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::error_boundary::InvalidObject;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::Store;
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;

use super::runs::{self, Survey};
use super::schedule::{self, History, Skip, Timetable};
use super::status::{self, Bookkeeping};
use crate::Error;
use crate::guard::Guarded;
use crate::names;
use coxswain_core::api::{Flow, FlowStatus, Run, Schedule};

/// What every reconcile of a Flow shares.
pub struct Context {
    /// The API server.
    pub client: Client,
    /// Every Run the controller sees, kept current by a watch.
    pub runs: Store<Guarded<Run>>,
    /// The user the controller acts as: the `created-by` of the Runs its
    /// schedules start.
    pub me: String,
    /// Events on Flows (a slot taken by a Run the schedule did not make).
    pub recorder: Recorder,
}

/// How long a reconcile waits for the Run cache's first listing before it
/// gives up and is retried (the Run CRD may not be installed yet).
const RUN_CACHE_WAIT: Duration = Duration::from_secs(10);

/// Reconciles one Flow, readable or not.
pub async fn reconcile(flow: Arc<Guarded<Flow>>, ctx: Arc<Context>) -> Result<Action, Error> {
    match &flow.0 {
        Ok(flow) => reconcile_flow(flow, &ctx).await,
        Err(invalid) => reconcile_unreadable(invalid, &ctx).await,
    }
}

async fn reconcile_flow(flow: &Flow, ctx: &Context) -> Result<Action, Error> {
    if flow.metadata.deletion_timestamp.is_some() {
        // Going away: start nothing it would own, write nothing.
        return Ok(Action::await_change());
    }
    wait_for_runs(ctx).await?;
    let now = Timestamp::now();
    let verdict = status::check(&flow.spec);
    let survey = survey(flow, ctx);
    let old = flow.status.clone().unwrap_or_default();
    let mut book = Bookkeeping {
        last_run: survey.last_run.clone(),
        last_schedule_time: read_time(&old.last_schedule_time).max(survey.last_slot),
        last_successful_run_start: read_time(&old.last_successful_run_start)
            .max(survey.last_success_start),
        schedule_problem: None,
        next_schedule_time: None,
    };
    let mut wake_at = None;
    if verdict.problems.is_empty()
        && let Some(schedule) = &flow.spec.schedule
    {
        wake_at = follow(flow, schedule, &survey, &mut book, now, ctx).await?;
    }
    let new = status::compose(&old, flow.metadata.generation, &verdict, &book, now);
    if flow.status.as_ref() != Some(&new) {
        write_status(flow, new, ctx).await?;
    }
    Ok(match wake_at {
        Some(at) => Action::requeue(until(at, now)),
        None => Action::await_change(),
    })
}

/// The Runs of this flow in its namespace, surveyed.
fn survey(flow: &Flow, ctx: &Context) -> Survey {
    let namespace = flow.namespace();
    let all = ctx.runs.state();
    let runs = all
        .iter()
        .filter_map(|guard| guard.0.as_ref().ok())
        .map(|run| &**run)
        .filter(|run| run.namespace() == namespace);
    runs::survey(&flow.name_any(), &ctx.me, runs)
}

/// Follows the schedule: cancels what `Replace` replaces and starts the due
/// slot's Run. Returns when to look again.
async fn follow(
    flow: &Flow,
    schedule: &Schedule,
    survey: &Survey,
    book: &mut Bookkeeping,
    now: Timestamp,
    ctx: &Context,
) -> Result<Option<Timestamp>, Error> {
    let timetable = match Timetable::new(schedule) {
        Ok(timetable) => timetable,
        Err(error) => {
            book.schedule_problem = Some(error.to_string());
            return Ok(None);
        }
    };
    let created = flow.creation_timestamp().map(|t| t.0).unwrap_or(now);
    let history = History {
        settled_until: book.last_schedule_time.unwrap_or(created).max(created),
        active: survey.active.clone(),
    };
    let decision = schedule::decide(&timetable, now, &history);
    if let Some(skip) = &decision.skipped {
        log_skip(flow, skip);
    }
    let api: Api<Run> = Api::namespaced(ctx.client.clone(), &namespace(flow));
    for name in &decision.cancel {
        cancel(&api, name).await?;
    }
    if let Some(slot) = decision.start {
        let run = runs::scheduled_run(flow, slot, book.last_successful_run_start, &ctx.me);
        match start(&api, &run, flow, ctx).await? {
            Started::Yes => {
                book.last_schedule_time = Some(slot);
                book.last_run = Some(run.name_any());
            }
            Started::Taken(by) => {
                // Missed, as a slot past its deadline is: settled, never
                // retried, and nothing of the foreign Run is taken in.
                book.last_schedule_time = Some(slot);
                report_taken(flow, &run.name_any(), slot, &by, ctx).await;
            }
            Started::Refused(why) => book.schedule_problem = Some(why),
        }
    }
    // The slot the next wake-up starts; `compose` drops it when the
    // schedule cannot start runs.
    book.next_schedule_time = decision.wake_at;
    Ok(decision.wake_at)
}

/// Whether the API server took a scheduled Run.
enum Started {
    /// Created now, or before (a restarted controller).
    Yes,
    /// A Run the schedule did not make holds the slot's name; who made it.
    Taken(String),
    /// Refused for good (e.g. admission found its input wrong): why.
    Refused(String),
}

async fn start(api: &Api<Run>, run: &Run, flow: &Flow, ctx: &Context) -> Result<Started, Error> {
    let name = run.name_any();
    match api.create(&PostParams::default(), run).await {
        Ok(_) => {
            tracing::info!(run = %name, "the schedule started a run");
            Ok(Started::Yes)
        }
        Err(kube::Error::Api(status)) if status.code == 409 => {
            existing_is_ours(&name, flow, ctx).await
        }
        Err(kube::Error::Api(status)) if (400..500).contains(&status.code) => Ok(Started::Refused(
            format!("the scheduled run {name} was refused: {}", status.message),
        )),
        Err(e) => Err(Error::kube(format!("creating the scheduled run {name}"), e)),
    }
}

/// A create refused as existing: the slot is started when the Run under its
/// name is the schedule's own (a restarted controller made it); else it
/// was taken by someone else. Read as [`Guarded`], so even a Run that does
/// not decode is answered (as foreign) instead of failing every reconcile.
async fn existing_is_ours(name: &str, flow: &Flow, ctx: &Context) -> Result<Started, Error> {
    let api: Api<Guarded<Run>> = Api::namespaced(ctx.client.clone(), &namespace(flow));
    let found = api
        .get(name)
        .await
        .map_err(|e| Error::kube(format!("reading the scheduled run {name}"), e))?;
    let by = found
        .meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(names::CREATED_BY_ANNOTATION))
        .cloned()
        .unwrap_or_else(|| "nobody recorded".to_string());
    Ok(match &found.0 {
        Ok(run) if runs::schedules_own(run, &flow.name_any(), &ctx.me).is_some() => Started::Yes,
        _ => Started::Taken(by),
    })
}

/// A Warning Event on the Flow, and a log line, naming the Run that took
/// a slot.
async fn report_taken(flow: &Flow, run: &str, slot: Timestamp, by: &str, ctx: &Context) {
    let note = format!(
        "The Run {run} holds the name of the scheduled run for {slot}, but this schedule did not create it (created by: {by}); the slot is counted as missed, and that Run is not the schedule's: its input is not the schedule's, nor does it set $SINCE."
    );
    tracing::warn!(flow = %flow.name_any(), %run, %slot, %by, "a scheduled slot was taken by a Run the schedule did not create");
    let event = Event {
        type_: EventType::Warning,
        reason: "ScheduleSlotTaken".into(),
        note: Some(note),
        action: "Schedule".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &flow.object_ref(&())).await {
        tracing::debug!(error = %e, "could not publish the taken slot's event");
    }
}

/// Asks a Run to stop (`spec.cancel: true`), as a person would.
async fn cancel(api: &Api<Run>, name: &str) -> Result<(), Error> {
    let patch = Patch::Merge(json!({"spec": {"cancel": true}}));
    match api.patch(name, &PatchParams::default(), &patch).await {
        Ok(_) => {
            tracing::info!(run = %name, "the schedule replaced a running run");
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(e) => Err(Error::kube(format!("cancelling run {name}"), e)),
    }
}

fn log_skip(flow: &Flow, skip: &Skip) {
    let flow = flow.name_any();
    match skip {
        Skip::TooLate { slot, late_by } => tracing::warn!(
            %flow, %slot, late_by = %format!("{late_by:#}"),
            "a scheduled start was missed by more than startingDeadlineSeconds; skipped"
        ),
        Skip::Busy { slot, active } => tracing::debug!(
            %flow, %slot, ?active,
            "concurrencyPolicy Forbid: the slot waits for the running runs to end"
        ),
    }
}

/// Writes the status through `/status` only, guarded by the resource
/// version it was computed from.
async fn write_status(flow: &Flow, status: FlowStatus, ctx: &Context) -> Result<(), Error> {
    let api: Api<Flow> = Api::namespaced(ctx.client.clone(), &namespace(flow));
    let mut updated = flow.clone();
    updated.status = Some(status);
    api.replace_status(&flow.name_any(), &PostParams::default(), &updated)
        .await
        .map_err(|e| {
            Error::kube(
                format!(
                    "writing the status of flow {}/{}",
                    namespace(flow),
                    flow.name_any()
                ),
                e,
            )
        })?;
    Ok(())
}

/// A Flow whose spec does not read as Coxswain's types: `Valid` False with
/// the reason, written on the raw object so nothing else of it is touched.
async fn reconcile_unreadable(invalid: &InvalidObject, ctx: &Context) -> Result<Action, Error> {
    let meta = &invalid.metadata;
    let (Some(ns), Some(name)) = (&meta.namespace, &meta.name) else {
        return Ok(Action::await_change());
    };
    let what = format!("writing the status of flow {ns}/{name}");
    let head = read_head(&ctx.client, ns, name).await?;
    let old = head.status.unwrap_or_default();
    let verdict = status::unreadable(&invalid.error);
    let book = Bookkeeping {
        last_run: old.last_run.clone(),
        last_schedule_time: read_time(&old.last_schedule_time),
        last_successful_run_start: read_time(&old.last_successful_run_start),
        schedule_problem: None,
        next_schedule_time: None,
    };
    let new = status::compose(
        &old,
        head.metadata.generation,
        &verdict,
        &book,
        Timestamp::now(),
    );
    if new != old {
        let value = serde_json::to_value(&new).map_err(|e| Error::Corrupt(e.to_string()))?;
        let patch: json_patch::Patch =
            serde_json::from_value(json!([{"op": "add", "path": "/status", "value": value}]))
                .map_err(|e| Error::Corrupt(e.to_string()))?;
        // The answer is the whole Flow again, read through the guard: one
        // too deep for serde_json must not fail the write that reports it.
        let api: Api<Guarded<Flow>> = Api::namespaced(ctx.client.clone(), ns);
        api.patch_status(name, &PatchParams::default(), &Patch::<()>::Json(patch))
            .await
            .map_err(|e| Error::kube(&what, e))?;
    }
    Ok(Action::await_change())
}

/// What an unreadable Flow's status write needs: its generation and its
/// status, read from the raw text with the spec skipped unread (a spec
/// nested past serde_json's limit is why the Flow could not be read).
#[derive(serde::Deserialize)]
struct Head {
    #[serde(default)]
    metadata: HeadMeta,
    #[serde(default)]
    status: Option<FlowStatus>,
    #[serde(default, rename = "spec")]
    _spec: Option<Box<serde_json::value::RawValue>>,
}

#[derive(serde::Deserialize, Default)]
struct HeadMeta {
    #[serde(default)]
    generation: Option<i64>,
}

async fn read_head(client: &Client, ns: &str, name: &str) -> Result<Head, Error> {
    let what = format!("reading flow {ns}/{name}");
    let request = kube::core::Request::new(Flow::url_path(&(), Some(ns)))
        .get(name, &kube::api::GetParams::default())
        .map_err(|e| Error::Corrupt(format!("{what}: {e}")))?;
    let text = client
        .request_text(request)
        .await
        .map_err(|e| Error::kube(&what, e))?;
    // The other fields (`metadata.managedFields` among them) are skipped,
    // which serde_json does without counting their nesting.
    serde_json::from_str(&text).map_err(|e| Error::Corrupt(format!("{what}: {e}")))
}

/// Waits for the Run cache's first listing: deciding on an empty cache
/// would forget active runs (Forbid) and the last success (`$SINCE`).
async fn wait_for_runs(ctx: &Context) -> Result<(), Error> {
    match tokio::time::timeout(RUN_CACHE_WAIT, ctx.runs.wait_until_ready()).await {
        Ok(Ok(())) => Ok(()),
        _ => Err(Error::CacheNotReady("runs")),
    }
}

fn read_time(text: &Option<String>) -> Option<Timestamp> {
    text.as_deref().and_then(|t| t.parse().ok())
}

fn namespace(flow: &Flow) -> String {
    flow.namespace().unwrap_or_default()
}

/// How long until `at`, at least a moment (a wake-up never spins).
fn until(at: Timestamp, now: Timestamp) -> Duration {
    let wait = at.duration_since(now);
    Duration::try_from(wait)
        .unwrap_or_default()
        .max(Duration::from_millis(100))
}
