//! The run engine: a pure state machine that decides what runs next.

mod work;

pub use work::{
    AgentTask, ChangeRequest, DataView, Done, Given, PartRef, RunInfo, Task, Work, WorkResult,
    codes, step_error,
};
