//! The `coxswain.dev/v1alpha1` resources: `Flow`, `Run` and `Approval`.
//!
//! These types are the contract with users: they are what people write in
//! YAML, what `kubectl explain` teaches (every field's doc comment becomes its
//! description) and what `coxswain crd` turns into the CRDs in `crds/`.
//! They carry data only; checking a flow is the job of [`crate::flow`].

// kube's `printcolumn(...)` attributes repeat keys by design.
#[allow(clippy::duplicated_attributes)]
mod approval;
pub mod conditions;
#[allow(clippy::duplicated_attributes)]
mod flow;
mod log_tail;
pub mod offload;
#[allow(clippy::duplicated_attributes)]
mod run;
pub mod schema;
mod step;
mod workspace;

pub use approval::{
    Approval, ApprovalAnswer, ApprovalSpec, ApprovalState, ApprovalStatus, DecidedBy,
};
pub use flow::{
    Command, ConcurrencyPolicy, Flow, FlowSpec, FlowStatus, Retention, Schedule, StepProblem,
};
pub use log_tail::{LOG_TAIL_BYTES, LogTail};
pub use offload::MovedValue;
pub use run::stored;
pub use run::{
    Arrow, Attempt, CopiedFrom, FlowRef, MAX_VALUE_BYTES, PartStatus, RerunOf, ReviewNote, Run,
    RunFrom, RunPhase, RunSpec, RunStatus, StartedBy, StepError, StepPhase, StepStatus, TokenUsage,
};
pub use step::{
    AgentDecision, AgentStep, ApprovalMode, ApprovalStep, Approvers, ConditionPath, ConditionStep,
    EnvVar, Field, HttpBody, HttpHeader, HttpStep, Items, JoinStep, Lookup, LoopStep, MatrixTarget,
    MessageStep, NameValue, NamedObject, OnFailure, ParallelPart, ParallelStep, Reply, ReplyFormat,
    SaveStep, ScriptOutput, ScriptStep, SecretKeyRef, SendBack, SlackTarget, Step, StepKind,
    ValueFrom, WebhookTarget,
};

pub use workspace::{
    DEFAULT_BRANCH_PREFIX, KeepPolicy, OUTPUTS_DIR, PushPolicy, PushedBranch, RepoCheckout,
    RepoSecretRef, Workspace, WorkspaceRepo, WorkspaceStatus, kept_outputs_path,
};

/// The API group of every Coxswain resource.
pub const GROUP: &str = "coxswain.dev";
/// The API version of every Coxswain resource.
pub const VERSION: &str = "v1alpha1";
