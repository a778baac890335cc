//! The `Run` resource: one execution of a flow, and its status.

pub mod stored;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The most one value (a script's stdout, an HTTP body, a model's reply) may
/// weigh to be kept in a run's status. The record is the Run's status in etcd,
/// which refuses objects past about 1.5 MiB; every executor stops reading at
/// this cap and fails the attempt naming it, rather than keeping a value
/// the status could not store.
pub const MAX_VALUE_BYTES: usize = 256 << 10;

/// Starts a flow. Only `cancel` may change after creation.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "coxswain.dev",
    version = "v1alpha1",
    kind = "Run",
    namespaced,
    status = "RunStatus",
    category = "coxswain",
    doc = "One run of a Flow: its input, and in its status what every step did.",
    printcolumn(name = "Flow", type_ = "string", json_path = ".spec.flowRef.name"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Step", type_ = "string", json_path = ".status.currentStep"),
    printcolumn(name = "Progress", type_ = "string", json_path = ".status.progress"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunSpec {
    /// The flow to run, in the Run's namespace.
    pub flow_ref: FlowRef,
    /// The run input (`$input`), checked against the flow's `input` schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::api::schema::any_json")]
    pub input: Option<Value>,
    /// Set to true to cancel the run: running work is stopped, phase `Cancelled`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancel: bool,
    /// Rerun an ended run from one of its steps: the new run runs the old
    /// run's pinned flow, keeps the old status of every step that is
    /// neither `step` nor after it, and runs `step` and what follows anew.
    /// `flowRef` must name the old run's Flow, unchanged since; a person's
    /// decision is copied only into a rerun made by the old run's creator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<RunFrom>,
}

/// Where a rerun starts: an ended Run of the same namespace and one of its
/// steps.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunFrom {
    /// The ended Run's name, in this Run's namespace.
    pub run: String,
    /// The step key to run again, with every step after it.
    pub step: String,
    /// The ended Run's `metadata.uid`. Coxswain's admission writes it when
    /// left out, so a Run deleted and made again under the same name is
    /// never read in its place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

/// The run a rerun came from, as the controller found it when the rerun
/// started: the uid pins that very Run, so a Run made again later under the
/// same name is never read in its place.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CopiedFrom {
    /// The old Run's name (locally: the status file's run name or path).
    pub run: String,
    /// The old Run's `metadata.uid` (locally: the status's flow digest
    /// is checked instead, and this is empty).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

/// Names a flow.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FlowRef {
    /// The Flow's name.
    pub name: String,
}

/// Where a run stands.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum RunPhase {
    /// Accepted, not started.
    #[default]
    Pending,
    /// Steps are running.
    Running,
    /// Nothing runs until a person decides.
    Waiting,
    /// Finished; every step that ran completed or was allowed to fail.
    Succeeded,
    /// Finished with a failure.
    Failed,
    /// Stopped on request.
    Cancelled,
}

impl RunPhase {
    /// Whether the run has ended (succeeded, failed or was cancelled):
    /// nothing of it runs again, and whatever of its work still runs is
    /// stopped. Every layer asks this one question the same way.
    pub fn is_over(self) -> bool {
        matches!(
            self,
            RunPhase::Succeeded | RunPhase::Failed | RunPhase::Cancelled
        )
    }
}

/// The status of a run; the same shape `coxswain run --output json` prints.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunStatus {
    /// Where the run stands.
    #[serde(default)]
    pub phase: RunPhase,
    /// The Flow generation the run pinned when it started, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_generation: Option<i64>,
    /// The digest (`sha256:…`) of the flow spec the run started with: the
    /// engine refuses to resume this status with any other flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_digest: Option<String>,
    /// For scheduled runs, `$SINCE`: when the last successful scheduled run
    /// started (Unix seconds), kept so a resumed run reads the same value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// When the run started (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// When the run finished (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// The step running or waiting now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_step: Option<String>,
    /// Settled steps out of all steps, such as `3/7`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    /// Every step's status, by key. Each value is stored once: the latest
    /// completed attempt leaves its output and text to its step (or part),
    /// and an output that is exactly its text is kept as `text` alone.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        serialize_with = "stored::serialize_steps",
        deserialize_with = "stored::deserialize_steps"
    )]
    #[schemars(extend("x-kubernetes-map-type" = "atomic"))]
    pub steps: BTreeMap<String, StepStatus>,
    /// Every arrow, with what moved along it or why nothing did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arrows: Vec<Arrow>,
    /// The run's output: what the flow's `output:` computes, or without
    /// one the output of the last step that completed (named in
    /// `outputFrom`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::api::schema::keep_null"
    )]
    #[schemars(schema_with = "crate::api::schema::any_json")]
    pub output: Option<Value>,
    /// The step whose output is the run's output, when the flow has no
    /// `output:` of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_from: Option<String>,
    /// The run's workspace, for a flow with one: its branch, the commit
    /// each checkout started from, what was pushed, where it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<super::WorkspaceStatus>,
    /// The reason a run failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<StepError>,
    /// `Ready` and friends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::api::schema::conditions")]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Steps that still have to run (again) in their current pass; the engine's
    /// to-do list, kept here so a restarted controller resumes exactly.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub due: BTreeSet<String>,
    /// How often each send-back arrow (`from->to`) was taken.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub send_backs: BTreeMap<String, i32>,
    /// How many passes took each arrow (`from[.exit]->to`), counted as the
    /// step it reaches starts; `arrows[].count` reads it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("x-kubernetes-map-type" = "atomic"))]
    pub arrow_counts: BTreeMap<String, i32>,
    /// A send-back waiting for the steps in progress to finish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_send_back: Option<ReviewNote>,
    /// Values moved out of this status to keep the Run small, each into
    /// ConfigMaps the Run owns; in its place the status shows a preview
    /// that says so. Empty in a status put back together (and locally).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<super::offload::MovedValue>,
    /// For a rerun (`spec.from`): the old run it was seeded from, by name
    /// and uid, and the step it reran from. Set once, when the status is
    /// seeded; later passes check the old run by this uid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun_of: Option<RerunOf>,
}

/// The run a rerun was seeded from and the step it started again at.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RerunOf {
    /// The old Run's name.
    pub run: String,
    /// The old Run's `metadata.uid` (empty locally, where the status file
    /// is checked by its flow digest instead).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The step run again (with every step after it).
    pub step: String,
}

impl RunStatus {
    /// Notes what the push at the end of a run with a workspace did: the
    /// branches pushed and, when a push failed, why. A run that succeeded
    /// fails then, with that error (its work is done, but not where the
    /// flow said it goes); a run that ended otherwise keeps its own error.
    pub fn workspace_pushed(
        &mut self,
        pushed: Vec<super::PushedBranch>,
        failure: Option<StepError>,
    ) {
        if let Some(ws) = self.workspace.as_mut() {
            ws.pushed = pushed;
        }
        if let Some(error) = failure
            && self.phase == RunPhase::Succeeded
        {
            self.phase = RunPhase::Failed;
            self.error = Some(error);
        }
    }

    /// The run's result: its computed output, or the output of the step it
    /// names in `outputFrom`.
    pub fn result(&self) -> Option<&Value> {
        self.output.as_ref().or_else(|| {
            let key = self.output_from.as_ref()?;
            self.steps.get(key)?.output.as_ref()
        })
    }
}

/// How a step's latest attempt came to start, so progress lines and Events
/// tell a retry (after a failure) from work a reviewer sent back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StartedBy<'a> {
    /// The first attempt of its round.
    First,
    /// Another try after the attempt before it failed.
    Retry {
        /// The attempt's number within its round (2 for the first retry).
        attempt: usize,
        /// Why the attempt before it failed.
        after: Option<&'a StepError>,
    },
    /// The step is done again because a reviewer sent its work back.
    SentBack {
        /// Who sent it back, with the decision and feedback.
        note: &'a ReviewNote,
        /// The attempt's number within its round (1 unless it was retried).
        attempt: usize,
        /// Why the attempt before it failed, for a retry within the round.
        after: Option<&'a StepError>,
    },
}

impl StepStatus {
    /// How the latest attempt came to start.
    pub fn started_by(&self) -> StartedBy<'_> {
        let in_round = (self.attempts.len() as i64 - i64::from(self.round_start)).max(1) as usize;
        let after = if in_round > 1 {
            self.attempts
                .len()
                .checked_sub(2)
                .and_then(|i| self.attempts[i].error.as_ref())
        } else {
            None
        };
        match &self.review {
            Some(note) => StartedBy::SentBack {
                note,
                attempt: in_round,
                after,
            },
            None if in_round > 1 => StartedBy::Retry {
                attempt: in_round,
                after,
            },
            None => StartedBy::First,
        }
    }
}

impl ReviewNote {
    /// `sent back by review (changes, alice)`: the step, the decision and,
    /// when a person decided, who.
    pub fn sent_back(&self) -> String {
        if self.reviewer == self.from || self.reviewer.is_empty() {
            format!("sent back by {} ({})", self.from, self.decision)
        } else {
            format!(
                "sent back by {} ({}, {})",
                self.from, self.decision, self.reviewer
            )
        }
    }
}

/// What a reviewer said when sending work back; the redone step receives it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReviewNote {
    /// The step that sent the work back.
    pub from: String,
    /// The step that redoes it.
    pub to: String,
    /// Who decided: a user name, or the deciding step's key.
    pub reviewer: String,
    /// The exit taken (the decision).
    pub decision: String,
    /// The reviewer's instructions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// The reviewed work, by step key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::api::schema::any_json")]
    pub reviewed: Option<Value>,
}

/// Where a step stands: its phase, written as `status` in `status.steps.KEY`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum StepPhase {
    /// Not reached yet.
    #[default]
    Pending,
    /// Working.
    Running,
    /// Waiting for a person.
    Waiting,
    /// Finished with an output.
    Completed,
    /// Finished with an error.
    Failed,
    /// Not run on this path.
    Skipped,
}

impl StepPhase {
    /// The phase as the run's status and messages write it (`completed`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            StepPhase::Pending => "pending",
            StepPhase::Running => "running",
            StepPhase::Waiting => "waiting",
            StepPhase::Completed => "completed",
            StepPhase::Failed => "failed",
            StepPhase::Skipped => "skipped",
        }
    }
}

/// Everything a step did: its entry in the run's status
/// (`status.steps.KEY`), with its phase, output, error and attempts.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepStatus {
    /// Where the step stands.
    #[serde(default)]
    pub status: StepPhase,
    /// The output of the latest attempt (`$steps.KEY.output`); left out when
    /// it is exactly `text`, or gathered from `parts` (`outputFromParts`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::api::schema::keep_null"
    )]
    #[schemars(schema_with = "crate::api::schema::any_json")]
    pub output: Option<Value>,
    /// The raw text of the latest attempt (`$steps.KEY.text`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Only in the stored record: the text is the output written as JSON
    /// (a script that printed JSON), rebuilt from `output` when read.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub text_from_output: bool,
    /// Why the latest attempt failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<StepError>,
    /// Every attempt, oldest first; none is ever dropped silently.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
    /// The exit the step took (`true`, a path name, a decision).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<String>,
    /// Why the step was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When the latest run of the step started (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// When it settled (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// When the next attempt is due, after a failed one (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<String>,
    /// For a loop: the pass it is on. For a step in a loop: its latest pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration: Option<i32>,
    /// Index in `attempts` where the current round of tries began; attempts
    /// before it belong to earlier passes or to work that was sent back.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub round_start: i32,
    /// The parts of a parallel step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<PartStatus>,
    /// A parallel step: how many times its parts were started (loop passes
    /// and send-backs start them again), so each round's attempts have an
    /// identity of their own.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rounds: i32,
    /// Only in the stored record: this parallel step's output is what its
    /// parts gathered (`parts`, `by_key`), rebuilt from `parts` when read.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub output_from_parts: bool,
    /// The change request the next attempt answers, after a send-back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<ReviewNote>,
    /// In a rerun (`spec.from`): this step's status was copied whole from the old
    /// run named here (the step did not run again in this run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copied_from: Option<CopiedFrom>,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// One part of a parallel step.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PartStatus {
    /// The part's key in `by_key`.
    pub key: String,
    /// A readable name.
    pub label: String,
    /// What the part reads as `$item`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::api::schema::any_json")]
    pub item: Option<Value>,
    /// Where it stands.
    #[serde(default)]
    pub status: StepPhase,
    /// Its output; left out when it is exactly its text.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::api::schema::keep_null"
    )]
    #[schemars(schema_with = "crate::api::schema::any_json")]
    pub output: Option<Value>,
    /// Its raw text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Only in the stored record: the text is the output written as JSON
    /// (a script that printed JSON), rebuilt from `output` when read.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub text_from_output: bool,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<StepError>,
    /// Every attempt.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
    /// When the next attempt is due (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<String>,
}

/// One try of a step.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Attempt {
    /// 1 for the first attempt.
    pub number: i32,
    /// The loop pass it ran in (1 for the first), when inside a loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration: Option<i32>,
    /// How it ended.
    #[serde(default)]
    pub status: StepPhase,
    /// When it started (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// When it ended (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// What it produced; the latest completed attempt shows it on its step
    /// (or part) instead.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::api::schema::keep_null"
    )]
    #[schemars(schema_with = "crate::api::schema::any_json")]
    pub output: Option<Value>,
    /// Its raw text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Only in the stored record: the text is the output written as JSON
    /// (a script that printed JSON), rebuilt from `output` when read.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub text_from_output: bool,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<StepError>,
    /// The reviewer's instructions this attempt answered (after a send-back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
    /// Tokens an agent used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
    /// The last lines a script wrote to stderr (for one stopped by a
    /// cancel, of its container's whole log), whether it succeeded or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<crate::api::LogTail>,
    /// Its output, text, feedback and log were dropped to keep the Run small:
    /// only the latest attempts of a step keep theirs (a long loop would
    /// otherwise outgrow what etcd stores). Status, times, error and usage stay.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub trimmed: bool,
    /// What the step's lookups found for this attempt, by lookup name (each
    /// a JSON array of records), recorded before the work started: the
    /// records may change later, so what the attempt saw is kept.
    /// Free JSON, so a large one moves out of the status whole, as an
    /// output does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::api::schema::any_json")]
    pub lookups: Option<Value>,
    /// Why the attempt has not started yet: its lookups wait for the
    /// records database, which did not answer (its words). The controller
    /// asks again every few seconds; cleared once the lookups ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
}

/// Tokens an agent attempt used, as the provider reported them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    /// Tokens sent.
    pub prompt_tokens: i64,
    /// Tokens received.
    pub completion_tokens: i64,
}

/// A step's failure: a stable code and a message for people.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepError {
    /// A stable code such as `workflow.expression_error`.
    pub code: String,
    /// What went wrong.
    pub message: String,
}

/// An arrow between two steps and what moved along it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Arrow {
    /// The step it leaves, with its exit (`review.approve`).
    pub from: String,
    /// The step it reaches.
    pub to: String,
    /// Whether it was taken on its latest pass.
    pub taken: bool,
    /// What moved along it, or why nothing did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// How many passes took it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i32>,
}
