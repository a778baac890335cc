//! A flow's `workspace`: git checkouts (or an empty folder) that every
//! script step of one run shares, and what a run's status says of them.
//!
//! The types carry data only. Checking them is [`crate::flow::validate`]'s
//! job; cloning, branching and pushing are I/O and happen in the runner
//! (`coxswain run`) or in the controller's Jobs, which write back what they
//! found as a [`WorkspaceStatus`].

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The branch prefix when a flow gives none.
pub const DEFAULT_BRANCH_PREFIX: &str = "coxswain/";

/// The folder under `$WORKSPACE` where Coxswain keeps what steps leave in
/// `$OUTPUTS`, one folder per step and attempt. Repo names cannot start
/// with a dot, so no checkout is ever there.
pub const OUTPUTS_DIR: &str = ".coxswain/outputs";

/// Checkouts every script step of a run sees under `$WORKSPACE`, with a
/// branch of the run's own in each. `workspace: {}` is an empty folder the
/// run's steps share.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Workspace {
    /// The repositories to check out, each into `$WORKSPACE/<name>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repos: Vec<WorkspaceRepo>,
    /// The run's branch (`$BRANCH`) is this prefix followed by the Run's
    /// name; it is made in every repo from the repo's `ref`. Default
    /// `coxswain/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch_prefix: Option<String>,
    /// When the run's branch is pushed back to each repo at the end:
    /// `never` (default), `onSuccess` or `always`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push: Option<PushPolicy>,
    /// On a cluster, the size of the run's volume (such as `1Gi`); default
    /// from the controller's settings. `coxswain run` ignores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Quantity>,
    /// On a cluster, the storage class of the run's volume; default the
    /// cluster's default class. `coxswain run` ignores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
    /// On a cluster, whether the volume stays after the run: `never`
    /// (default), `onFailure` or `always`. Locally see `--keep-workspace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep: Option<KeepPolicy>,
}

impl Workspace {
    /// The branch prefix, with its default.
    pub fn branch_prefix(&self) -> &str {
        self.branch_prefix
            .as_deref()
            .unwrap_or(DEFAULT_BRANCH_PREFIX)
    }

    /// The branch of the run named `run_name` (`$BRANCH`).
    pub fn branch_for(&self, run_name: &str) -> String {
        format!("{}{run_name}", self.branch_prefix())
    }

    /// When to push, with its default.
    pub fn push(&self) -> PushPolicy {
        self.push.unwrap_or_default()
    }

    /// Whether the branch is pushed at the end of a run that ended
    /// succeeded (`true`) or not.
    pub fn pushes(&self, succeeded: bool) -> bool {
        match self.push() {
            PushPolicy::Never => false,
            PushPolicy::OnSuccess => succeeded,
            PushPolicy::Always => true,
        }
    }

    /// When to keep the volume, with its default.
    pub fn keep(&self) -> KeepPolicy {
        self.keep.unwrap_or_default()
    }
}

/// One repository of a workspace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkspaceRepo {
    /// The checkout's folder, `$WORKSPACE/<name>`: a lowercase letter, then
    /// lowercase letters, digits and `_`, unique in the workspace.
    pub name: String,
    /// Where to clone from, written out (no placeholders): an `https`,
    /// `http`, `git` or `ssh` URL; `coxswain run` also takes `file` URLs.
    /// Credentials go in `secretRef`, never in the URL.
    pub url: String,
    /// The branch, tag or commit to start from; default the remote's HEAD.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub ref_: Option<String>,
    /// How many commits of history to fetch: default 1, 0 for all of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<i32>,
    /// A Secret in the flow's namespace with `username` and `password`, or
    /// `token`, for cloning and pushing over http(s). Locally read from
    /// `COXSWAIN_SECRET_<NAME>_<KEY>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<RepoSecretRef>,
}

impl WorkspaceRepo {
    /// The history depth, with its default (0 means the whole history).
    pub fn depth(&self) -> u32 {
        self.depth.map_or(1, |d| u32::try_from(d).unwrap_or(1))
    }
}

/// Names the Secret a repository's credentials are in.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RepoSecretRef {
    /// The Secret's name, in the flow's namespace.
    pub name: String,
}

/// When a run's branch is pushed.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum PushPolicy {
    /// Never (default).
    #[default]
    Never,
    /// When the run succeeded.
    OnSuccess,
    /// However the run ended.
    Always,
}

/// When a run's volume is kept after the run (on a cluster).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum KeepPolicy {
    /// Deleted when the run ends (default).
    #[default]
    Never,
    /// Kept when the run did not succeed.
    OnFailure,
    /// Always kept.
    Always,
}

/// What a run's status says of its workspace: the branch, the commit each
/// checkout started from, what was pushed, and where the files are.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceStatus {
    /// The run's branch (`$BRANCH`), made in every repo.
    pub branch: String,
    /// Each checkout, in the flow's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repos: Vec<RepoCheckout>,
    /// The repos the branch was pushed to, with the commit pushed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pushed: Vec<PushedBranch>,
    /// Where the workspace is: on a cluster the PersistentVolumeClaim's
    /// name, locally the folder's path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<String>,
    /// On a cluster with a ReadWriteOnce volume, the node holding it; every
    /// pod of the run is placed there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// On a cluster, the uid of the PersistentVolumeClaim the controller
    /// made: only that object is mounted, and deleted, as the run's volume
    /// (anyone may make a claim under its name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_uid: Option<String>,
    /// On a cluster, the flow's `keep` as the run started, so the volume's
    /// end is decided from the status alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep: Option<KeepPolicy>,
    /// On a cluster, while the run's branch is being pushed: how the run
    /// ended. The run stays `Running` until the push is done, then takes
    /// this phase (or `Failed`, when the push of a run that succeeded
    /// failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pushing: Option<super::RunPhase>,
}

/// One checkout as it was made.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RepoCheckout {
    /// The repo's name in the flow (its folder under `$WORKSPACE`).
    pub name: String,
    /// The URL it was cloned from, as the flow writes it.
    pub url: String,
    /// The ref asked for; absent for the remote's HEAD.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub ref_: Option<String>,
    /// The commit the ref resolved to, which the run's branch starts from.
    pub commit: String,
}

/// The run's branch as pushed to one repo.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushedBranch {
    /// The repo's name in the flow.
    pub name: String,
    /// The commit the branch pointed to when pushed.
    pub commit: String,
}

/// Where the files an attempt left in `$OUTPUTS` are kept, relative to
/// `$WORKSPACE`: `.coxswain/outputs/<step>/<attempt>` for a step, and
/// `.coxswain/outputs/<step>/<round>.<part>/<attempt>` for a part of a
/// parallel step (whose attempts count from 1 in each round). The same
/// place whoever runs the attempt, so a later step finds them.
pub fn kept_outputs_path(step: &str, part: Option<(u32, &str)>, attempt: u32) -> String {
    match part {
        Some((round, key)) => format!("{OUTPUTS_DIR}/{step}/{round}.{key}/{attempt}"),
        None => format!("{OUTPUTS_DIR}/{step}/{attempt}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_read_not_written() {
        let ws: Workspace = serde_json::from_str("{}").expect("empty workspace");
        assert_eq!(ws.branch_for("r1"), "coxswain/r1");
        assert_eq!(ws.push(), PushPolicy::Never);
        assert_eq!(ws.keep(), KeepPolicy::Never);
        assert!(!ws.pushes(true));
        assert_eq!(serde_json::to_string(&ws).expect("json"), "{}");
    }

    #[test]
    fn policies_read_as_written() {
        let ws: Workspace = serde_json::from_str(
            r#"{"push": "onSuccess", "keep": "onFailure", "branchPrefix": "bot/", "repos": [{"name": "app", "url": "https://x/app.git", "ref": "main"}]}"#,
        )
        .expect("workspace");
        assert!(ws.pushes(true) && !ws.pushes(false));
        assert_eq!(ws.keep(), KeepPolicy::OnFailure);
        assert_eq!(ws.branch_for("r"), "bot/r");
        assert_eq!(ws.repos[0].ref_.as_deref(), Some("main"));
        assert_eq!(ws.repos[0].depth(), 1);
    }

    #[test]
    fn kept_paths_tell_parts_and_attempts_apart() {
        assert_eq!(
            kept_outputs_path("make", None, 2),
            ".coxswain/outputs/make/2"
        );
        assert_eq!(
            kept_outputs_path("each", Some((1, "eu")), 1),
            ".coxswain/outputs/each/1.eu/1"
        );
    }
}

#[cfg(test)]
mod push_tests {
    use super::*;
    use crate::api::{RunPhase, RunStatus, StepError};

    fn ended(phase: RunPhase) -> RunStatus {
        RunStatus {
            phase,
            finished_at: Some("2026-12-02T04:00:00Z".into()),
            workspace: Some(WorkspaceStatus {
                branch: "coxswain/r".into(),
                volume: Some("r-workspace-0011aabb".into()),
                volume_uid: Some("u-1".into()),
                ..WorkspaceStatus::default()
            }),
            ..RunStatus::default()
        }
    }

    #[test]
    fn a_failed_push_fails_a_run_that_succeeded_and_keeps_what_was_pushed() {
        let mut run = ended(RunPhase::Succeeded);
        let pushed = vec![PushedBranch {
            name: "app".into(),
            commit: "abc".into(),
        }];
        let error = StepError {
            code: "workspace.failed".into(),
            message: "repo `docs`: refused".into(),
        };
        run.workspace_pushed(pushed.clone(), Some(error));
        assert_eq!(run.phase, RunPhase::Failed);
        assert_eq!(run.workspace.expect("workspace").pushed, pushed);
    }
}
