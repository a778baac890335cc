//! The `Flow` resource: a graph of steps kept in Git.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::step::Step;

/// A flow of steps. Only its author writes `spec` (GitOps: no defaulting, no
/// controller writes); defaults are applied when the flow is read.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "coxswain.dev",
    version = "v1alpha1",
    kind = "Flow",
    namespaced,
    status = "FlowStatus",
    category = "coxswain",
    doc = "A flow of AI agents, scripts, HTTP calls and people. Start it with a Run.",
    printcolumn(name = "Steps", type_ = "integer", json_path = ".status.stepCount"),
    printcolumn(
        name = "Valid",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Valid\")].status"
    ),
    printcolumn(name = "Schedule", type_ = "string", json_path = ".spec.schedule.cron"),
    printcolumn(
        name = "Next",
        type_ = "string",
        json_path = ".status.nextScheduleTime"
    ),
    printcolumn(name = "Last Run", type_ = "string", json_path = ".status.lastRun"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FlowSpec {
    /// What the flow does, in a sentence or two; agents with `tellFlow` see it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A JSON Schema (type, properties, required, items, enum) that a Run's
    /// `input` must satisfy; checked when the Run is created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::api::schema::any_object")]
    pub input: Option<Value>,
    /// Starts runs on a timetable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Schedule>,
    /// Starts runs from a chat room: `!NAME some words` typed by an allowed
    /// user starts a run with `{text, prompt, sender, room}` as its input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Command>,
    /// The run's output: JSON in which `$...` strings are references, such as
    /// `{post: $steps.draft.output}`. Default: the last step's output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::api::schema::any_json")]
    pub output: Option<Value>,
    /// Git checkouts (or an empty folder) every script step of a run
    /// shares at `$WORKSPACE`, on a branch of the run's own (`$BRANCH`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<super::Workspace>,
    /// How long the cluster keeps this flow's finished Runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<Retention>,
    /// The steps, in order. Unless a step says `after`, it comes after the one
    /// listed before it.
    pub steps: Vec<Step>,
}

/// How long finished Runs stay in the cluster. A Run is deleted (its Jobs,
/// ConfigMaps and Approvals with it) only once it is archived in the
/// records database, and never without one.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Retention {
    /// Keep a finished Run this long after it ended, as a duration such as
    /// `1h` or `7d` (default: the controller's `--retention-finished-runs`,
    /// else forever).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_runs: Option<String>,
}

/// A timetable for a flow.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Schedule {
    /// Five cron fields: minute, hour, day of month, month, day of week.
    pub cron: String,
    /// An IANA time zone such as `Europe/Paris` (default UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// The input of each scheduled run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::api::schema::any_json")]
    pub input: Option<Value>,
    /// What to do when a run is due while the last one still runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_policy: Option<ConcurrencyPolicy>,
    /// A start missed by more than this many seconds is skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting_deadline_seconds: Option<i64>,
}

/// A conversation command: how people start this flow from a chat.
///
/// The controller follows `rooms` through the connection `chat` names. For
/// `!review fix the intro` it creates a Run named after the chat event (a
/// message replayed after a restart finds the Run already there), answers in
/// the message's thread with the Run's name, and again with the outcome and
/// the output when the run ends.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Command {
    /// The word typed after `!`: `review` is started by `!review …`.
    /// Lowercase letters, digits, `-` and `_`.
    pub name: String,
    /// The chat connection: the name of a Secret in the flow's namespace with
    /// `type` (`matrix` or `slack`) and `token`; Matrix adds `url` (the
    /// homeserver), Slack adds `signingSecret` (and `url` for another Web API).
    pub chat: String,
    /// Where the command is heard: Matrix room ids (`!abc:example.org`) or
    /// aliases (`#ops:example.org`), or Slack channel ids.
    pub rooms: Vec<String>,
    /// Who may start a run: Matrix user ids (`@alice:example.org`) or Slack
    /// user ids; `"*"` lets everyone in the rooms. Others are told no.
    pub allowed_users: Vec<String>,
}

/// What a schedule does when the previous run is still going.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ConcurrencyPolicy {
    /// Start the new run anyway (default).
    #[default]
    Allow,
    /// Skip the new run.
    Forbid,
    /// Cancel the running one and start the new run.
    Replace,
}

/// What the controller observed about a flow.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlowStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Valid` (the flow passed validation) and `Ready` (runs can start).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::api::schema::conditions")]
    pub conditions: Vec<Condition>,
    /// How many steps the flow has, counting nested ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_count: Option<i32>,
    /// Each problem validation found, on the step it belongs to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<StepProblem>,
    /// The name of the latest run started from this flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<String>,
    /// When the schedule last started a run (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<String>,
    /// When the last scheduled run that succeeded started (`$SINCE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_successful_run_start: Option<String>,
    /// The next slot the schedule will start a run for (RFC 3339); absent
    /// without a schedule, or while the flow or its schedule cannot start
    /// runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_schedule_time: Option<String>,
}

/// One validation problem, as the validator reports it.
///
/// It reads as `coxswain lint` prints it (without file and flow), in the
/// Flow's `Valid` condition and in a refused Run:
/// `step KEY: FIELD: MESSAGE (character N)`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepProblem {
    /// The step's key; empty for a problem of the flow as a whole.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub step: String,
    /// Where in the step, such as `when` or `http.url`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field: String,
    /// What is wrong, written for the flow's author.
    pub message: String,
    /// The 1-based character of `field`'s text where reading stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub character: Option<i32>,
}

impl std::fmt::Display for StepProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.step.is_empty() {
            write!(f, "step {}: ", self.step)?;
        }
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        f.write_str(&self.message)?;
        if let Some(c) = self.character {
            write!(f, " (character {c})")?;
        }
        Ok(())
    }
}
