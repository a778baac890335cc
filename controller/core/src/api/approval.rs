//! The `Approval` resource: a person's part of a run.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::step::{ApprovalMode, Approvers, Field};

/// Created by the controller when a run reaches a person step; the person
/// answers by patching `decision` and `feedback` (or `response`), or, on a
/// step that needs several approvers, by adding an entry to `answers`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "coxswain.dev",
    version = "v1alpha1",
    kind = "Approval",
    namespaced,
    status = "ApprovalStatus",
    category = "coxswain",
    doc = "A decision or an entry a person owes a Run.",
    printcolumn(name = "Run", type_ = "string", json_path = ".spec.run"),
    printcolumn(name = "Step", type_ = "string", json_path = ".spec.step"),
    printcolumn(name = "Mode", type_ = "string", json_path = ".spec.mode"),
    printcolumn(name = "Status", type_ = "string", json_path = ".status.state"),
    printcolumn(name = "Decision", type_ = "string", json_path = ".status.decision"),
    printcolumn(name = "Decided By", type_ = "string", json_path = ".status.decidedBy"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalSpec {
    /// The Run this belongs to.
    pub run: String,
    /// The step's key.
    pub step: String,
    /// The step's attempt this approval answers.
    pub attempt: i32,
    /// `review` (pick a decision), `entry` (fill in `fields`) or `both`.
    #[serde(default)]
    pub mode: ApprovalMode,
    /// What the person looks at, by step key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::api::schema::any_object")]
    pub show: Option<Value>,
    /// The decisions allowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<String>,
    /// In entry and both modes, what to fill in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<Field>,
    /// Who may decide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvers: Option<Approvers>,
    /// Guidance for the person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Whether the run's creator may decide; copied from the step's
    /// `allowSelfApproval` by the controller.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_self_approval: bool,
    /// How many different approvers must pick the same decision; copied
    /// from the step's `approvals` by the controller when it is more than 1.
    /// Such an Approval is answered in `answers`, not in `decision`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals: Option<i32>,
    /// On a step that needs several approvers, one entry per person, in the
    /// order written; each person adds theirs at the end and it is stamped
    /// like `decidedBy`. The controller writes it empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers: Option<Vec<ApprovalAnswer>>,
    /// The decision, written by the person; one of `decisions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    /// Instructions for whoever redoes the work, written by the person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
    /// In entry and both modes, the data, written by the person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::api::schema::any_json")]
    pub response: Option<Value>,
    /// Who decided; stamped by the admission webhook from the request's user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<DecidedBy>,
    /// When it was decided (RFC 3339); stamped by the admission webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<String>,
}

impl ApprovalSpec {
    /// How many approvers must agree (1 unless `approvals` says more).
    pub fn required_approvals(&self) -> u32 {
        self.approvals.map_or(1, |n| n.max(1) as u32)
    }

    /// Whether a person wrote an answer: the decision or response, or at
    /// least one entry of `answers`.
    pub fn answered(&self) -> bool {
        self.decision.is_some()
            || self.response.is_some()
            || self.answers.as_ref().is_some_and(|a| !a.is_empty())
    }
}

/// One approver's answer on a step that needs several.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalAnswer {
    /// The decision; one of `decisions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    /// Instructions for whoever redoes the work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
    /// The data, in both mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::api::schema::any_json")]
    pub response: Option<Value>,
    /// Who wrote this entry; stamped by the admission webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<DecidedBy>,
    /// When this entry was written (RFC 3339); stamped by the admission webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<String>,
}

/// Where an Approval stands, as `kubectl get approvals` shows it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ApprovalState {
    /// Waiting for an answer (or, on a step that needs several approvers,
    /// for more of them).
    Open,
    /// The answer written was not taken (`refused` says why); another may be
    /// written.
    Refused,
    /// The run took the answer in.
    Taken,
    /// No answer is needed any more (`closed` says why).
    Closed,
}

impl ApprovalState {
    /// The word the STATUS column shows.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalState::Open => "open",
            ApprovalState::Refused => "refused",
            ApprovalState::Taken => "taken",
            ApprovalState::Closed => "closed",
        }
    }
}

/// The user who decided an approval.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DecidedBy {
    /// The user name the API server authenticated.
    pub username: String,
    /// The user's groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

/// What the controller observed about an approval.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalStatus {
    /// `open`, `refused`, `taken` or `closed`: the STATUS column, kept by
    /// the controller beside the fields that say why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<ApprovalState>,
    /// On a step that needs several approvers, how the answers stand, such
    /// as `approve 1 of 2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tally: Option<String>,
    /// The decision the run took in (none for an entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    /// Who took the decision the run took in: the user name stamped on the
    /// answer, or those of the approvers who agreed, joined by `, `.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// True once the run has taken the decision in.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub consumed: bool,
    /// Why the answer written was not taken (it does not fit the step);
    /// the person may write another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// Why no answer is needed any more (the run ended before one was
    /// taken in): an answer written now would never be read, so it is
    /// refused, and tools stop showing the Approval as waiting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed: Option<String>,
}
