//! The `Approval` resource: a person's part of a run.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::step::{ApprovalMode, Approvers, Field};

/// Created by the controller when a run reaches a person step; the person
/// answers by patching `decision` and `feedback` (or `response`).
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
    printcolumn(name = "Decision", type_ = "string", json_path = ".spec.decision"),
    printcolumn(
        name = "Decided By",
        type_ = "string",
        json_path = ".spec.decidedBy.username"
    ),
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
    /// `review` (pick a decision) or `entry` (fill in `fields`).
    #[serde(default)]
    pub mode: ApprovalMode,
    /// What the person looks at, by step key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::api::schema::any_object")]
    pub show: Option<Value>,
    /// The decisions allowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<String>,
    /// In entry mode, what to fill in.
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
    /// The decision, written by the person; one of `decisions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    /// Instructions for whoever redoes the work, written by the person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
    /// In entry mode, the data, written by the person.
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
