//! Every refusal admission gives, in one place: the texts a person reads
//! when kubectl prints what the webhook refused, by kind. The rules that
//! refuse live with their kind (`flows`, `runs`, `approvals`, `reserved`);
//! the HTTP side (`review`) turns a [`Refusal`] into the answer.

use coxswain_core::api::{ApprovalMode, StepProblem};
use coxswain_core::flow::{
    AnswerError, BoundSecret, DeciderError, InputProblem, MAX_JSON_DEPTH, one_line,
};
use coxswain_kube::names::CREATED_BY_ANNOTATION;

/// Why admission refuses a request. Its text is the whole message the
/// user reads (kubectl prints it on one line).
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The object does not read as the kind's type.
    #[error("the object cannot be read: {0}")]
    Unreadable(#[source] serde_json::Error),
    /// The API server could not answer a question the rule asks it.
    #[error(transparent)]
    CannotAsk(#[from] CannotAsk),
    /// A write only the controller makes.
    #[error(transparent)]
    Reserved(#[from] ReservedRefusal),
    /// A Flow's rules.
    #[error(transparent)]
    Flow(#[from] FlowRefusal),
    /// A Run's rules.
    #[error(transparent)]
    Run(#[from] RunRefusal),
    /// An Approval's rules.
    #[error(transparent)]
    Approval(#[from] ApprovalRefusal),
}

/// A question to the API server that a rule needs answered, unanswered:
/// the request is refused rather than let through unchecked.
#[derive(Debug, thiserror::Error)]
pub enum CannotAsk {
    /// The Flow a Run names could not be read.
    #[error("cannot read the Flow `{flow}`: {source}")]
    Flow {
        /// The Flow's name.
        flow: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The run an Approval belongs to could not be read.
    #[error("cannot read run {run}: {source}")]
    Run {
        /// The Run's name.
        run: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// Whether the applier of a Flow may read a Secret it binds could not
    /// be asked.
    #[error("cannot ask the API server whether the Secret `{secret}` may be read: {source}")]
    Secret {
        /// The Secret's name.
        secret: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
}

/// Why a write only the controller makes is refused from someone else.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReservedRefusal {
    /// A `coxswain.dev/` label or annotation set, changed or removed.
    #[error(
        "the {sort} `{key}` is written by the Coxswain controller, which acts on it; `{user}` may not {verb} on {what} (labels and annotations starting with `coxswain.dev/` are the controller's)"
    )]
    Key {
        /// `label` or `annotation`.
        sort: &'static str,
        /// The key.
        key: String,
        /// Who writes.
        user: String,
        /// `set it`, `change it`, `remove it`.
        verb: &'static str,
        /// The object, such as `Run r1` or `a Run`.
        what: String,
    },
    /// A write to a status.
    #[error(
        "the status of {kind} {name} is written by the Coxswain controller only; `{user}` may not write it (the controller acts on what the status records)"
    )]
    Status {
        /// The object's kind.
        kind: String,
        /// The object's name.
        name: String,
        /// Who writes.
        user: String,
    },
}

/// Why a Flow is refused: every problem it has, on one line (kubectl
/// prints one line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("flow {name} is not valid ({}): {}", count(.problems), one_line(.problems))]
pub struct FlowRefusal {
    /// The Flow's name.
    pub name: String,
    /// Every problem, validation's first, in document order.
    pub problems: Vec<FlowProblem>,
}

/// `1 problem`, `2 problems`.
fn count(problems: &[FlowProblem]) -> String {
    match problems.len() {
        1 => "1 problem".to_string(),
        n => format!("{n} problems"),
    }
}

/// One problem of a Flow being applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowProblem {
    /// What the validator found, as `coxswain lint` prints it.
    #[error("{0}")]
    Invalid(StepProblem),
    /// A Secret the flow binds that the applier may not read.
    #[error(
        "{}{}: `{user}` may not read the Secret `{}`, so may not bind it in a flow (nobody gains a Secret through Coxswain)",
        step_prefix(&.secret.step), .secret.field, .secret.name
    )]
    UnreadableSecret {
        /// Who applies the flow.
        user: String,
        /// The Secret and where the flow binds it.
        secret: BoundSecret,
    },
    /// A save or lookup in a cluster whose controller has no records
    /// database.
    #[error(
        "step {step}: {field}: this cluster has no records database to {what}; set `records.database` in the chart (the controller's --records-database)",
        what = if .field.starts_with("save") { "save into" } else { "look up in" }
    )]
    NoRecords {
        /// The step that saves or looks up.
        step: String,
        /// `save`, or `lookup[i]`.
        field: String,
    },
}

/// `step KEY: `, or nothing for a flow-level field.
fn step_prefix(step: &str) -> String {
    if step.is_empty() {
        String::new()
    } else {
        format!("step {step}: ")
    }
}

/// Why a Run is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunRefusal {
    /// The client wrote another creator than who creates the Run.
    #[error(
        "the annotation {CREATED_BY_ANNOTATION} is written by Coxswain from who creates the Run; `{given}` is not you (`{user}`): leave it out"
    )]
    ForgedCreator {
        /// The name the client wrote.
        given: String,
        /// Who creates the Run.
        user: String,
    },
    /// The creator is not stamped as the user creating the Run (the
    /// mutating webhook did not run).
    #[error(
        "the annotation {CREATED_BY_ANNOTATION} must name the user creating the Run (`{user}`); Coxswain's mutating webhook writes it"
    )]
    CreatorNotStamped {
        /// Who creates the Run.
        user: String,
    },
    /// The input nests deeper than the controller keeps reading.
    #[error(
        "the input nests arrays and objects {depth} levels deep; a Run's input may be nested at most {MAX_JSON_DEPTH} levels deep, so that its record, which wraps what steps make of the input a few levels deeper, stays readable"
    )]
    TooDeep {
        /// How deep it nests.
        depth: usize,
    },
    /// The Flow the Run names does not exist.
    #[error("there is no Flow `{flow}` in namespace `{namespace}`; apply the Flow before its Runs")]
    NoFlow {
        /// The Flow's name.
        flow: String,
        /// The Run's namespace.
        namespace: String,
    },
    /// The Flow the Run names is not valid.
    #[error("the Flow `{flow}` is not valid, so it cannot run: {}", one_line(.problems))]
    FlowNotValid {
        /// The Flow's name.
        flow: String,
        /// Every problem of the flow.
        problems: Vec<StepProblem>,
    },
    /// The input does not fit the Flow's schema.
    #[error("the input does not fit the Flow `{flow}`: {}", one_line(.problems))]
    InputDoesNotFit {
        /// The Flow's name.
        flow: String,
        /// Every way it does not fit.
        problems: Vec<InputProblem>,
    },
    /// An update changes who created the Run.
    #[error(
        "the annotation {CREATED_BY_ANNOTATION} records who created the Run and never changes (it was {}, the update makes it {})",
        shown(.before.as_ref()),
        shown(.after.as_ref())
    )]
    CreatorChanged {
        /// The creator recorded.
        before: Option<String>,
        /// The creator the update writes.
        after: Option<String>,
    },
    /// An update changes the spec other than `cancel`.
    #[error(
        "a Run's spec does not change after it is created, except `cancel`; this update changes {} (create a new Run instead)",
        .changed.join(" and ")
    )]
    SpecChanged {
        /// The fields changed: `flowRef`, `input`.
        changed: Vec<&'static str>,
    },
    /// A rerun (`spec.from`) whose old Run cannot be rerun from that step.
    #[error(transparent)]
    Rerun(#[from] coxswain_kube::rerun_source::SourceProblem),
    /// A rerun whose old Run's uid was not pinned (the mutating webhook did
    /// not run).
    #[error(
        "spec.from.uid must name the uid of the Run `{run}`; Coxswain's mutating webhook writes it when left out"
    )]
    RerunUnpinned {
        /// The old Run.
        run: String,
    },
    /// A rerun by someone who may not read the old Run.
    #[error(
        "spec.from: you (`{user}`) may not read the Run `{run}`, so you may not rerun it: a rerun copies its steps' outputs into a Run you can read"
    )]
    OldRunUnreadable {
        /// Who creates the rerun.
        user: String,
        /// The old Run.
        run: String,
    },
    /// The flow the old Run pinned could not be read, so its steps are unknown.
    #[error("spec.from: the flow the Run `{run}` ran cannot be read: {reason}")]
    RerunFlowUnreadable {
        /// The old Run.
        run: String,
        /// Why.
        reason: String,
    },
    /// An update takes `cancel` back.
    #[error("a cancelled Run stays cancelled; create a new Run instead")]
    Uncancelled,
}

/// Why a write to an Approval is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApprovalRefusal {
    /// Someone other than the controller creates one.
    #[error(
        "Approvals are created by the Coxswain controller when a run reaches a person step; `{user}` may answer one, not create it"
    )]
    NotTheController {
        /// Who creates it.
        user: String,
    },
    /// An update changes what the controller wrote.
    #[error(
        "only decision, feedback, response and answers of an Approval are written by people; the rest of approval {name} is the controller's"
    )]
    ControllersPart {
        /// The Approval's name.
        name: String,
    },
    /// An update that answers nothing moves the stamps.
    #[error(
        "decidedBy and decidedAt are stamped by Coxswain when the answer is written; leave them out"
    )]
    StampsMoved,
    /// The Approval was answered before.
    #[error(
        "approval {name} was already {}{}; an answer never changes",
        .decision.as_deref().map_or("answered".to_string(), |d| format!("decided `{d}`")),
        .decided_by.as_deref().map_or(String::new(), |d| format!(" by `{d}`"))
    )]
    AlreadyAnswered {
        /// The Approval's name.
        name: String,
        /// The decision taken, when it was one (not an entry).
        decision: Option<String>,
        /// Who decided, as stamped.
        decided_by: Option<String>,
    },
    /// Feedback without the decision or the response.
    #[error(
        "approval {name} needs {} written together with the feedback",
        match .mode {
            ApprovalMode::Review => "a decision",
            ApprovalMode::Entry => "the response",
            ApprovalMode::Both => "a decision and the response",
        }
    )]
    NoAnswer {
        /// The Approval's name.
        name: String,
        /// What it asks for.
        mode: ApprovalMode,
    },
    /// The answer does not fit the step (a decision it does not offer, an
    /// entry without its fields).
    #[error(transparent)]
    Answer(#[from] AnswerError),
    /// Who answers may not decide the step.
    #[error(transparent)]
    Decider(#[from] DeciderError),
    /// The mutating webhook did not stamp who answered and when.
    #[error(
        "decidedBy and decidedAt are stamped by Coxswain's mutating webhook, which did not run; is its MutatingWebhookConfiguration installed?"
    )]
    NotStamped,
    /// The controller closed the Approval (its run ended first).
    #[error("approval {name} is closed ({reason}); an answer would never be read")]
    Closed {
        /// The Approval's name.
        name: String,
        /// Why it was closed, as the controller wrote it.
        reason: String,
    },
    /// The Run under the Approval's `spec.run` is another one than its owner.
    #[error(
        "approval {approval} belongs to a run {run} that is gone (the Run of that name now is another one); there is nothing to decide"
    )]
    RunReplaced {
        /// The Approval's name.
        approval: String,
        /// The run's name.
        run: String,
    },
    /// The Approval's run is gone.
    #[error("the run {run} of approval {approval} is gone; there is nothing to decide")]
    RunGone {
        /// The Approval's name.
        approval: String,
        /// The run's name.
        run: String,
    },
    /// `decision`, `feedback` or `response` on a step that needs several
    /// approvers, whose answers go in `answers`.
    #[error(
        "step `{step}` needs {approvals} approvers to agree, so each adds an answer to spec.answers instead of writing spec.decision: kubectl patch approval {name} --type json -p '[{{\"op\": \"add\", \"path\": \"/spec/answers/-\", \"value\": {{\"decision\": \"…\"}}}}]'"
    )]
    UseAnswers {
        /// The Approval's name.
        name: String,
        /// The step's key.
        step: String,
        /// How many must agree.
        approvals: u32,
    },
    /// `answers` on a step that one person decides.
    #[error(
        "step `{step}` is decided by one person: write spec.decision (and feedback or response), not spec.answers, on approval {name}"
    )]
    OneApprover {
        /// The Approval's name.
        name: String,
        /// The step's key.
        step: String,
    },
    /// An update that removes or changes an earlier answer, or adds more than one.
    #[error(
        "answers on approval {name} are only added to, one per write, at the end (`add /spec/answers/-` in a JSON patch); the {had} written before stay as they are"
    )]
    AnswersOnlyGrow {
        /// The Approval's name.
        name: String,
        /// How many there were.
        had: usize,
    },
    /// A second answer from the same person.
    #[error(
        "`{user}` already answered approval {name} ({}); each approver answers once, and step `{step}` needs {approvals} different people",
        .decision.as_deref().map_or("with an entry".to_string(), |d| format!("`{d}`"))
    )]
    AnsweredTwice {
        /// The Approval's name.
        name: String,
        /// Who answered again.
        user: String,
        /// Their first decision.
        decision: Option<String>,
        /// The step's key.
        step: String,
        /// How many must agree.
        approvals: u32,
    },
    /// An answer to an Approval whose decision the run already took in.
    #[error("approval {name} was already taken in by its run; an answer never changes")]
    Taken {
        /// The Approval's name.
        name: String,
    },
}

/// A value as a refusal quotes it, or `absent`.
fn shown(value: Option<&String>) -> String {
    value.map_or("absent".into(), |v| format!("`{v}`"))
}
