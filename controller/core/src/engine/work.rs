//! What the engine hands to an executor, and what comes back.
//!
//! A [`Work`] is one attempt of one step, complete: the resolved input, the
//! data its placeholders may read, the timeout. Executors (local processes,
//! Kubernetes Jobs, HTTP clients, model servers) need nothing else, so the
//! same executor code serves `coxswain run` and the controller.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::{AgentStep, HttpStep, MessageStep, ScriptStep, StepError, TokenUsage};
use crate::scope::Scope;

/// One attempt of one step, ready to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Work {
    /// The step's key (for a parallel part, the parallel step's key).
    pub step: String,
    /// The part of a parallel step this work is for.
    pub part: Option<PartRef>,
    /// 1 for the first attempt; also counts attempts made by send-backs.
    pub attempt: u32,
    /// The loop pass (1 for the first), inside a loop.
    pub iteration: Option<u32>,
    /// What to do.
    pub task: Task,
    /// The resolved input (`input`, or the default).
    pub input: Value,
    /// The longest the attempt may take.
    pub timeout: Option<Duration>,
    /// The data placeholders may read: the run input and step records.
    pub data: DataView,
    /// Facts about the run, for `$RUN_NAME`, idempotency keys and logs.
    pub run: RunInfo,
    /// Set when a reviewer sent the work back to this step: what they
    /// decided and asked (a script reads it in `$INPUTS/review`; an agent
    /// gets the same in its prompt, from [`AgentTask::change_request`]).
    pub review: Option<ChangeRequest>,
    /// The step's queries for stored records. Once each has its
    /// [`LookupWork::found`], the records are in `input` and in `data`
    /// under the lookup's name; until then the work may not start
    /// ([`Work::lookups_due`]).
    pub lookups: Vec<LookupWork>,
}

/// One query for stored records, as the step asked it and, once the driver
/// ran it and the engine recorded it, what it found.
#[derive(Debug, Clone, PartialEq)]
pub struct LookupWork {
    /// The input's name.
    pub name: String,
    /// The collection, in the run's namespace.
    pub collection: String,
    /// The condition over `$record` and the run's data (`data` holds what
    /// its other references read).
    pub where_: Option<String>,
    /// A reference under `$record` to sort by.
    pub order_by: Option<String>,
    /// Largest first.
    pub descending: bool,
    /// The most records.
    pub limit: u32,
    /// The records found, a JSON array, once recorded in the attempt.
    pub found: Option<Value>,
}

/// A save, with its key and value read from the run.
#[derive(Debug, Clone, PartialEq)]
pub struct SaveTask {
    /// The collection, in the run's namespace.
    pub collection: String,
    /// The key as the reference gave it (text or a number is a key;
    /// [`SaveTask::key_text`] says what else is wrong).
    pub key: Value,
    /// What to store.
    pub value: Value,
}

impl SaveTask {
    /// The key as text: text as it is, a number as written; anything else
    /// fails the attempt saying what the key was.
    pub fn key_text(&self) -> Result<String, StepError> {
        match &self.key {
            Value::String(s) if !s.is_empty() => Ok(s.clone()),
            Value::Number(n) => Ok(n.to_string()),
            other => Err(step_error(
                codes::EXPRESSION,
                format!(
                    "a record's key must be non-empty text or a number; the save's key is {}",
                    match other {
                        Value::String(_) => "empty text".to_string(),
                        Value::Null => "null (the reference led nowhere)".to_string(),
                        v => format!("{} `{v}`", crate::expr::Val::from_json(v).type_name()),
                    }
                ),
            )),
        }
    }
}

impl Work {
    /// Whether a lookup still waits to be run and recorded: the driver
    /// runs it ([`crate::engine::Event::LookedUp`]) instead of starting the
    /// work.
    pub fn lookups_due(&self) -> bool {
        self.lookups.iter().any(|l| l.found.is_none())
    }
}

impl Work {
    /// A key that is the same for every retry of the same request after a
    /// crash, and different for each attempt: `run-uid/step/attempt`, or
    /// `run-uid/step/round.part/attempt` for a part of a parallel step.
    pub fn idempotency_key(&self) -> String {
        match &self.part {
            Some(part) => format!(
                "{}/{}/{}.{}/{}",
                self.run.uid, self.step, part.round, part.key, self.attempt
            ),
            None => format!("{}/{}/{}", self.run.uid, self.step, self.attempt),
        }
    }
}

/// Which part of a parallel step.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PartRef {
    /// Position among the parts, from 0.
    pub index: usize,
    /// The part's key in `by_key`.
    pub key: String,
    /// Which start of its parallel step the part belongs to (1 for the
    /// first; a loop pass or a send-back starts the parts again, and their
    /// attempts count from 1 each time), so a part's attempt has an identity
    /// of its own in idempotency keys and Job names.
    pub round: u32,
}

/// The kinds of step an executor runs. Conditions, joins, loops and
/// parallel steps are the engine's own business; approvals go to people.
#[derive(Debug, Clone, PartialEq)]
pub enum Task {
    /// Ask a model.
    Agent(AgentTask),
    /// Run a program.
    Script(ScriptStep),
    /// Send a request.
    Http(HttpStep),
    /// Post a message.
    Message(MessageStep),
    /// Store a record (the driver's records database).
    Save(SaveTask),
}

impl Task {
    /// The kind's name as a flow's YAML writes it (`script`, `agent`…), for
    /// messages, Job labels and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Task::Agent(_) => "agent",
            Task::Script(_) => "script",
            Task::Http(_) => "http",
            Task::Message(_) => "message",
            Task::Save(_) => "save",
        }
    }

    /// Whether the executor fills `{{…}}` placeholders (and so needs the
    /// run data in [`Work::data`]): HTTP and message steps do.
    pub fn has_placeholders(&self) -> bool {
        matches!(self, Task::Http(_) | Task::Message(_))
    }
}

/// An agent step with everything its prompt is built from.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentTask {
    /// The step as written.
    pub spec: AgentStep,
    /// The outputs it was given (`give`), in order.
    pub given: Vec<Given>,
    /// Set when a reviewer sent the work back.
    pub change_request: Option<ChangeRequest>,
    /// A short description of the flow, when `tellFlow` is set.
    pub flow_description: Option<String>,
}

/// One input an agent receives as untrusted data.
#[derive(Debug, Clone, PartialEq)]
pub struct Given {
    /// The step key or input name.
    pub name: String,
    /// The step's status (`completed`, `skipped`…), shown as the input's state.
    pub state: String,
    /// `instrument` (read only) or `affected` (the agent changes it).
    pub role: &'static str,
    /// The value; `None` when the step did not run on this path.
    pub value: Option<Value>,
}

/// What a reviewer asked to change.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeRequest {
    /// Who reviewed: a user name, or the key of the step that decided.
    pub reviewer: String,
    /// The decision taken (the exit that sent the work back).
    pub decision: String,
    /// The reviewed work, by step key.
    pub reviewed: Vec<(String, Value)>,
    /// The reviewer's instructions.
    pub instructions: String,
}

impl ChangeRequest {
    /// The change request as a script reads it: `decision`, `feedback`
    /// (the instructions, `null` when none were written), `by` (who
    /// reviewed) and `reviewed` (the work they looked at, by step key).
    pub fn for_script(&self) -> Value {
        let reviewed: serde_json::Map<String, Value> = self.reviewed.iter().cloned().collect();
        serde_json::json!({
            "decision": self.decision,
            "feedback": (!self.instructions.is_empty()).then_some(&self.instructions),
            "by": self.reviewer,
            "reviewed": reviewed,
        })
    }
}

/// The run data a step may read, owned so work can move to another task.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DataView {
    /// The run input.
    pub input: Value,
    /// Step records (`status`, `output`, `text`, `error`) by key.
    pub steps: BTreeMap<String, Value>,
    /// `previous`, `loop`, `item`, `index`, `run`.
    pub roots: BTreeMap<String, Value>,
}

impl Scope for DataView {
    fn input(&self) -> Option<&Value> {
        Some(&self.input)
    }
    fn step(&self, key: &str) -> Option<&Value> {
        self.steps.get(key)
    }
    fn root(&self, name: &str) -> Option<&Value> {
        self.roots.get(name)
    }
}

/// Facts about the run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunInfo {
    /// The Run's name.
    pub name: String,
    /// Its namespace (`local` for `coxswain run`).
    pub namespace: String,
    /// Its uid (a random one locally).
    pub uid: String,
    /// For scheduled runs: when the last successful scheduled run started
    /// (Unix seconds); empty otherwise.
    pub since: Option<String>,
}

/// What a finished attempt produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Done {
    /// The output (`$steps.KEY.output`).
    pub output: Value,
    /// The raw text (`$steps.KEY.text`).
    pub text: Option<String>,
    /// Tokens used, for agents.
    pub usage: Option<TokenUsage>,
    /// The end of a script's stderr, for its attempt's status.
    pub log: Option<crate::api::LogTail>,
}

/// A failed attempt: why, and what it had cost by then (an agent that
/// answered twice and still did not fit has used tokens all the same).
#[derive(Debug, Clone, PartialEq)]
pub struct Failed {
    /// Why it failed.
    pub error: StepError,
    /// Tokens used before it failed, for agents.
    pub usage: Option<TokenUsage>,
    /// The end of a script's stderr, for its attempt's status.
    pub log: Option<crate::api::LogTail>,
}

impl From<StepError> for Failed {
    fn from(error: StepError) -> Self {
        Failed {
            error,
            usage: None,
            log: None,
        }
    }
}

/// The result of one attempt.
pub type WorkResult = Result<Done, Failed>;

/// Error codes executors fail with, so runs can be searched by cause.
pub mod codes {
    /// An expression could not be answered with the run's data.
    pub const EXPRESSION: &str = "workflow.expression_error";
    /// A placeholder had no value, or a value that may not go where it stands.
    pub const PLACEHOLDER: &str = "workflow.placeholder_error";
    /// The attempt took longer than its timeout.
    pub const TIMEOUT: &str = "workflow.timeout";
    /// The output did not match what the step declared.
    pub const OUTPUT: &str = "workflow.output_error";
    /// A script exited with a non-zero status.
    pub const SCRIPT: &str = "script.failed";
    /// An HTTP request failed or got a non-2xx answer.
    pub const HTTP: &str = "http.failed";
    /// A message could not be posted.
    pub const MESSAGE: &str = "message.failed";
    /// A model call failed, or its reply did not fit after the repair turn.
    pub const AGENT: &str = "agent.failed";
    /// The model server gave no usable answer for now (no answer, 429, 5xx);
    /// another attempt later may succeed.
    pub const AGENT_UNAVAILABLE: &str = "agent.unavailable";
    /// A secret could not be read.
    pub const SECRET: &str = "workflow.secret_error";
    /// The records database could not save or look up (unreachable, or
    /// none configured); the message says which.
    pub const RECORDS: &str = "records.failed";
    /// Too many send-backs along one arrow.
    pub const SEND_BACK_LIMIT: &str = "workflow.send_back_limit";
    /// A loop needed more passes than allowed.
    pub const LOOP_LIMIT: &str = "workflow.loop_limit";
    /// The run was cancelled.
    pub const CANCELLED: &str = "workflow.cancelled";
    /// A person step needs an answer no one can give here (`coxswain run`
    /// with no terminal and no `--decide` for it).
    pub const NO_ANSWER: &str = "workflow.no_answer";
    /// The run's input does not fit the flow's `input` schema (found when
    /// the run starts, where no admission webhook refused it).
    pub const INPUT: &str = "workflow.input_invalid";
    /// The flow a run starts from has problems (found when the run starts,
    /// where no admission webhook refused the Flow).
    pub const FLOW_INVALID: &str = "workflow.flow_invalid";
    /// The run's workspace could not be made (a clone, a ref, credentials)
    /// or its branch could not be pushed; the message names the repo.
    pub const WORKSPACE: &str = "workspace.failed";
    /// Coxswain itself could not run or follow the work (an executor broke,
    /// or the place work runs could not be reached).
    pub const INTERNAL: &str = "workflow.internal_error";
    /// An object the controller would have made (a flow snapshot, a step's
    /// inputs, a Job, an Approval) exists under the expected name but is not
    /// the one it made: someone else wrote it, so nothing runs from it.
    pub const TAMPERED: &str = "workflow.tampered";
    /// A rerun (`spec.from`) cannot start from the run and step it names
    /// (the run is gone, has not ended, ran another flow or input, or has
    /// no such step).
    pub const RERUN: &str = "workflow.rerun_refused";
}

/// Builds a [`StepError`].
pub fn step_error(code: &str, message: impl Into<String>) -> StepError {
    StepError {
        code: code.to_string(),
        message: message.into(),
    }
}

impl Done {
    /// A result with just an output.
    pub fn output(output: Value) -> Self {
        Done {
            output,
            ..Default::default()
        }
    }
}
