//! The condition types and reasons Coxswain writes on its resources: the
//! words `kubectl wait --for=condition=…`, Argo CD's health check and
//! dashboards match on, so each is spelled in this one place.

/// A condition's status when it holds.
pub const TRUE: &str = "True";
/// A condition's status when it does not hold.
pub const FALSE: &str = "False";
/// A condition's status while it cannot be told yet.
pub const UNKNOWN: &str = "Unknown";

/// Flow: the flow passed validation.
pub const VALID: &str = "Valid";
/// Flow: Runs of the flow can start.
pub const READY: &str = "Ready";
/// Run: the run has not ended.
pub const RUNNING: &str = "Running";
/// Run: the run ended well.
pub const SUCCEEDED: &str = "Succeeded";

/// Reason of a flow that passed validation (`Valid` True).
pub const REASON_VALID: &str = "Valid";
/// Reason of a flow with problems (`Valid` and `Ready` False).
pub const REASON_INVALID: &str = "Invalid";
/// Reason of a flow whose schedule cannot be followed (`Ready` False).
pub const REASON_SCHEDULE_UNUSABLE: &str = "ScheduleUnusable";
/// Reason of a flow whose Runs can start (`Ready` True).
pub const REASON_READY: &str = "Ready";
/// Reason of a Run whose Flow is not there yet (`Running` False).
pub const REASON_FLOW_NOT_FOUND: &str = "FlowNotFound";
