//! The run engine: a pure state machine that decides what runs next.
//!
//! [`CompiledFlow`] reads a flow once; [`RunMachine`] takes events (start,
//! work finished, a person decided, time passed, cancel) and returns
//! [`Action`]s (run this work, ask this person, wake me then, stop that).
//! It does no I/O and reads no clock, so `coxswain run` and the controller
//! drive exactly the same logic, and a run resumes from its status alone.

mod arrows;
mod chains;
mod compiled;
mod describe;
mod machine;
mod plan;
mod rerun;
#[cfg(test)]
mod rerun_tests;
mod scope;
#[cfg(test)]
mod test_support;
mod work;

pub use chains::{ChainPlace, ScriptChains, default_input, member_input};
pub use compiled::{Compiled, CompiledFlow, CompiledStep, DEFAULT_BACKOFF};
pub use machine::{
    Action, ApprovalRequest, Ballot, DecideError, Decision, Event, MAX_PART_KEY_LEN,
    MAX_SEND_BACKS, ResumeError, RunMachine, WorkRef, WorkspaceEnded, WorkspaceWork,
    keep_stopped_log, releases, workspace_work,
};
pub use plan::{Answer, AskRef, HandOff, Plan, Seen, Settle, hand_off, same_attempt};
pub use rerun::{RerunError, copied_decisions, first_failed_step, rerun_from, rerun_nodes};
pub use work::{
    AgentTask, ChangeRequest, DataView, Done, Failed, Given, LookupWork, PartRef, RunInfo,
    SaveTask, Task, Work, WorkResult, codes, step_error,
};
