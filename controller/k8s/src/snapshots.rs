//! Removing the shared flow snapshots no Run names any more. Runs of one
//! flow version share a snapshot owned by none of them (`run::pin`), so
//! Kubernetes' garbage collector cannot tell when the last of them went;
//! the leader does, from the Runs it already watches (no extra list of
//! Runs), in two looks a grace period apart:
//!
//! 1. a snapshot no Run names gets a mark (`coxswain.dev/unreferenced-since`);
//! 2. one still marked and still named by no Run a grace period later is
//!    deleted, on the very version that was marked (uid and
//!    resourceVersion preconditions).
//!
//! A run that pins a marked snapshot meanwhile takes the mark off first, so
//! that deletion is refused; a run that pinned it before the mark has its
//! digest in its status long before the grace ends (the pin and that write
//! are one reconcile). A snapshot that is not a readable flow stored under
//! its own digest's name was not made by Coxswain and is left alone.

use std::collections::HashSet;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ListParams, PostParams, Preconditions};
use kube::runtime::reflector::Store;
use kube::{Api, Client, ResourceExt};

use crate::guard::Guarded;
use crate::names;
use crate::snapshot;
use coxswain_core::api::Run;

/// How often the leader looks, and how long a snapshot stays marked
/// before it goes.
#[derive(clap::Args, Debug, Clone)]
pub struct SnapshotSettings {
    /// How long a shared flow snapshot that no Run names is kept before it
    /// is deleted (it is looked at again after this long, and deleted only
    /// if still no Run names it).
    #[arg(
        long = "snapshot-grace",
        env = "COXSWAIN_SNAPSHOT_GRACE",
        value_name = "DURATION",
        default_value = "10m",
        value_parser = parse_grace
    )]
    pub grace: Duration,
}

impl Default for SnapshotSettings {
    fn default() -> Self {
        SnapshotSettings {
            grace: Duration::from_secs(600),
        }
    }
}

fn parse_grace(text: &str) -> Result<Duration, String> {
    let grace = coxswain_core::flow::parse_duration(text).map_err(|e| e.to_string())?;
    if grace < Duration::from_secs(1) {
        return Err(
            "must be at least 1s: a run pinning a snapshot needs that long to say so".into(),
        );
    }
    Ok(grace)
}

/// What becomes of one shared snapshot at a look.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Named by a Run, unmarked: nothing to do.
    Keep,
    /// Named by a Run again after it was marked: the mark goes.
    Unmark,
    /// Named by no Run, unmarked: marked now.
    Mark,
    /// Named by no Run, marked a grace period ago or more: deleted.
    Delete,
    /// Named by no Run, marked less than a grace period ago: wait.
    Wait,
}

/// The pure rule: `marked` is when the mark was put (`None`: unmarked, or
/// a mark that does not read as a time, which is marked again).
fn verdict(
    named: bool,
    marked: Option<Timestamp>,
    now: Timestamp,
    grace: SignedDuration,
) -> Verdict {
    match (named, marked) {
        (true, None) => Verdict::Keep,
        (true, Some(_)) => Verdict::Unmark,
        (false, None) => Verdict::Mark,
        (false, Some(since)) if now.duration_since(since) >= grace => Verdict::Delete,
        (false, Some(_)) => Verdict::Wait,
    }
}

/// What the Runs in the store name: `(namespace, digest)` pairs, and the
/// namespaces holding a Run that does not read (its digest is unknown, so
/// nothing there is deleted).
fn named_by(runs: &Store<Guarded<Run>>) -> (HashSet<(String, String)>, HashSet<String>) {
    let (mut named, mut unknown) = (HashSet::new(), HashSet::new());
    for run in runs.state() {
        match &run.0 {
            Ok(run) => {
                if let Some(digest) = run.status.as_ref().and_then(|s| s.flow_digest.clone()) {
                    named.insert((run.namespace().unwrap_or_default(), digest));
                }
            }
            Err(invalid) => {
                unknown.insert(invalid.metadata.namespace.clone().unwrap_or_default());
            }
        }
    }
    (named, unknown)
}

/// Looks every `grace / 2` (so a snapshot goes between one and one and a
/// half grace periods after its last Run), from when the Run store has
/// synced, until the task is aborted.
pub async fn remove_unnamed(
    client: Client,
    namespace: Option<String>,
    runs: Store<Guarded<Run>>,
    settings: SnapshotSettings,
) {
    if !crate::store::wait_until_ready(&runs).await {
        return;
    }
    let snapshots: Api<ConfigMap> = match &namespace {
        Some(ns) => Api::namespaced(client, ns),
        None => Api::all(client),
    };
    let grace = SignedDuration::try_from(settings.grace).unwrap_or(SignedDuration::MAX);
    tracing::info!(grace = ?settings.grace, "removing flow snapshots no Run names");
    loop {
        if let Err(e) = look(&snapshots, &runs, grace).await {
            tracing::warn!(error = %e, "looking for flow snapshots no Run names (tried again later)");
        }
        tokio::time::sleep(settings.grace / 2).await;
    }
}

/// One look over every shared snapshot.
async fn look(
    snapshots: &Api<ConfigMap>,
    runs: &Store<Guarded<Run>>,
    grace: SignedDuration,
) -> Result<(), kube::Error> {
    let selector = format!("{}={}", names::ROLE_LABEL, names::ROLE_SHARED_SNAPSHOT);
    let found = snapshots
        .list(&ListParams::default().labels(&selector))
        .await?;
    // Read after the list: a Run that pinned a listed snapshot before this
    // read is seen naming it.
    let (named, unknown) = named_by(runs);
    let now = Timestamp::now();
    tracing::debug!(
        snapshots = found.items.len(),
        named = named.len(),
        "looking for flow snapshots no Run names"
    );
    for snapshot in found.items {
        let namespace = snapshot.namespace().unwrap_or_default();
        let Some(digest) = own_digest(&snapshot) else {
            continue;
        };
        let is_named = unknown.contains(&namespace) || named.contains(&(namespace.clone(), digest));
        let marked = snapshot
            .annotations()
            .get(names::UNREFERENCED_ANNOTATION)
            .and_then(|t| t.parse().ok());
        let api = Api::namespaced(snapshots.clone().into_client(), &namespace);
        let done = match verdict(is_named, marked, now, grace) {
            Verdict::Keep | Verdict::Wait => Ok(()),
            Verdict::Unmark => set_mark(&api, snapshot, None).await,
            Verdict::Mark => set_mark(&api, snapshot, Some(now)).await,
            Verdict::Delete => delete(&api, &snapshot).await,
        };
        match done {
            // Changed or gone since the list (a run pinned it): next look.
            Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => {}
            other => other?,
        }
    }
    Ok(())
}

/// The digest of the flow `snapshot` holds, when it is stored under that
/// digest's shared name; `None` for anything else.
fn own_digest(snapshot: &ConfigMap) -> Option<String> {
    let flow = snapshot::from_snapshot(snapshot).ok()?;
    let digest = flow.get().digest.clone();
    (names::shared_flow_snapshot(&digest) == snapshot.name_any()).then_some(digest)
}

/// Puts the mark (`Some(now)`) or takes it off, on the version read (the
/// leader's look, or a run pinning the snapshot).
pub(crate) async fn set_mark(
    api: &Api<ConfigMap>,
    mut snapshot: ConfigMap,
    mark: Option<Timestamp>,
) -> Result<(), kube::Error> {
    let annotations = snapshot.annotations_mut();
    match mark {
        Some(now) => annotations.insert(names::UNREFERENCED_ANNOTATION.into(), now.to_string()),
        None => annotations.remove(names::UNREFERENCED_ANNOTATION),
    };
    let name = snapshot.name_any();
    api.replace(&name, &PostParams::default(), &snapshot)
        .await?;
    tracing::debug!(snapshot = %name, marked = mark.is_some(), "flow snapshot no Run names");
    Ok(())
}

/// Deletes the marked version listed, and no other.
async fn delete(api: &Api<ConfigMap>, snapshot: &ConfigMap) -> Result<(), kube::Error> {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: snapshot.uid(),
            resource_version: snapshot.resource_version(),
        }),
        ..DeleteParams::default()
    };
    let name = snapshot.name_any();
    api.delete(&name, &params).await?;
    tracing::info!(snapshot = %name, namespace = ?snapshot.namespace(), "deleted a flow snapshot no Run names");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_goes_only_when_unnamed_through_a_whole_grace_period() {
        let grace = SignedDuration::from_mins(10);
        let now: Timestamp = "2030-01-01T10:00:00Z".parse().expect("a time");
        let ago = |mins| now - SignedDuration::from_mins(mins);
        assert_eq!(verdict(true, None, now, grace), Verdict::Keep);
        assert_eq!(verdict(true, Some(ago(60)), now, grace), Verdict::Unmark);
        assert_eq!(verdict(false, None, now, grace), Verdict::Mark);
        assert_eq!(verdict(false, Some(ago(9)), now, grace), Verdict::Wait);
        assert_eq!(verdict(false, Some(ago(10)), now, grace), Verdict::Delete);
        // A mark from the future (a clock set back) waits.
        assert_eq!(verdict(false, Some(now + grace), now, grace), Verdict::Wait);
    }

    #[test]
    fn the_grace_reads_as_flows_write_durations() {
        assert_eq!(parse_grace("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_grace("1h"), Ok(Duration::from_secs(3600)));
        let short = parse_grace("500ms").expect_err("too short");
        assert!(short.contains("at least 1s"), "{short}");
    }
}
