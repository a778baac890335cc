//! What a chat message means to the flows listening in its room: which flow
//! `!name …` starts, who may start it, the Run it becomes and the words the
//! controller answers with. Pure: the followers hand in what they heard.

use std::collections::{BTreeMap, BTreeSet};

use kube::api::ObjectMeta;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::names;
use coxswain_core::api::{Flow, FlowRef, Run, RunPhase, RunSpec};

/// One message heard in a room, as any chat service delivers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heard {
    /// The connection (Secret name) it came through.
    pub connection: String,
    /// The room's id (a Matrix room id, a Slack channel id).
    pub room: String,
    /// The message's id: the Matrix event id, or the Slack `ts`. Unique in
    /// the room, so the Run named after it is started once.
    pub event_id: String,
    /// The thread answers go to.
    pub thread_root: String,
    /// Who wrote it.
    pub sender: String,
    /// What they wrote.
    pub text: String,
}

/// A flow that listens: its command, with its rooms as ids.
#[derive(Debug, Clone)]
pub struct Listener<'a> {
    /// The flow.
    pub flow: &'a Flow,
    /// The ids of the rooms it listens in (aliases already looked up).
    pub rooms: BTreeSet<String>,
}

impl<'a> Listener<'a> {
    /// `flow` listening in its command's rooms, each turned into a room id
    /// by `room_id` (rooms it gives no id for are left out: not joined yet).
    pub fn of(flow: &'a Flow, room_id: impl Fn(&str) -> Option<String>) -> Self {
        Listener {
            flow,
            rooms: flow
                .spec
                .command
                .iter()
                .flat_map(|c| c.rooms.iter())
                .filter_map(|written| room_id(written))
                .collect(),
        }
    }
}

/// Whether `flow` has a command heard through `connection`; `valid` asks
/// also that the command passes its checks (only those start runs).
pub fn listens_on(flow: &Flow, connection: &str, valid: bool) -> bool {
    flow.spec.command.as_ref().is_some_and(|c| {
        c.chat == connection && (!valid || coxswain_core::flow::check_command(c).is_empty())
    })
}

/// What to do with a message.
#[derive(Debug, Clone)]
pub enum Decision {
    /// Not a command for any flow here: say nothing.
    Ignore,
    /// Create this Run and tell the sender its name.
    Start(Box<Run>),
    /// Tell the sender no, with this text.
    Refuse(String),
    /// `!help`: list the commands of this room.
    Help(String),
}

/// `!name the rest` → (`name`, `the rest`); anything else → `None`.
pub fn parse(text: &str) -> Option<(&str, &str)> {
    let rest = text.trim_start().strip_prefix('!')?;
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let (name, prompt) = rest.split_at(end);
    (!name.is_empty()).then(|| (name, prompt.trim()))
}

/// Decides what `heard` asks of the flows listening on its connection.
/// A command two flows claim in one room starts neither: the sender is told
/// which flows clash, so nobody starts the wrong one by surprise.
pub fn decide(heard: &Heard, listeners: &[Listener<'_>]) -> Decision {
    let Some((name, prompt)) = parse(&heard.text) else {
        return Decision::Ignore;
    };
    let claimed: Vec<&Flow> = listeners
        .iter()
        .filter(|l| l.rooms.contains(&heard.room))
        .map(|l| l.flow)
        .filter(|f| {
            f.spec
                .command
                .as_ref()
                .is_some_and(|c| c.name == name && c.chat == heard.connection)
        })
        .collect();
    let flow = match claimed.as_slice() {
        [] if name == "help" => return help(heard, listeners),
        [] => return Decision::Ignore,
        [flow] => *flow,
        many => {
            let names: Vec<String> = many.iter().map(|f| format!("`{}`", f.name_any())).collect();
            return Decision::Refuse(format!(
                "`!{name}` is claimed by the flows {} in this room, so none was started; ask their owners to pick different names.",
                names.join(" and ")
            ));
        }
    };
    if !allowed(flow, &heard.sender) {
        return Decision::Refuse(format!(
            "Sorry {}, you may not start `!{name}` here. The flow `{}` lists who may.",
            heard.sender,
            flow.name_any()
        ));
    }
    Decision::Start(Box::new(command_run(flow, heard, prompt)))
}

/// The commands that start flows in the room of `heard`, one line each
/// with the flow's description; nothing when no flow listens there (the
/// room may have other bots that answer `!help`).
fn help(heard: &Heard, listeners: &[Listener<'_>]) -> Decision {
    let mut lines: Vec<String> = listeners
        .iter()
        .filter(|l| l.rooms.contains(&heard.room))
        .filter_map(|l| {
            let command = l.flow.spec.command.as_ref()?;
            if command.chat != heard.connection {
                return None;
            }
            let mut line = format!(
                "`!{} …` starts the flow `{}`",
                command.name,
                l.flow.name_any()
            );
            if let Some(description) = &l.flow.spec.description {
                line.push_str(&format!(": {}", description.trim()));
            }
            if !allowed(l.flow, &heard.sender) {
                line.push_str(" (not by you)");
            }
            Some(line)
        })
        .collect();
    if lines.is_empty() {
        return Decision::Ignore;
    }
    lines.sort();
    Decision::Help(format!(
        "Commands here (the words after the command become the run's `prompt`):\n{}",
        lines.join("\n")
    ))
}

fn allowed(flow: &Flow, sender: &str) -> bool {
    flow.spec.command.as_ref().is_some_and(|c| {
        c.allowed_users
            .iter()
            .any(|u| u == "*" || u.eq_ignore_ascii_case(sender))
    })
}

/// The Run a command starts: named after the flow and the chat event, so
/// hearing the message again finds it already there; labelled with its
/// flow and connection; owned by the flow (as scheduled runs are); annotated
/// with where to answer. Its input is `{text, prompt, sender, room,
/// thread}`: `thread` is what a message step's `thread` takes to answer in
/// the command's thread.
pub fn command_run(flow: &Flow, heard: &Heard, prompt: &str) -> Run {
    let name = flow.name_any();
    let annotations = BTreeMap::from([
        (
            names::CHAT_CONNECTION_ANNOTATION.to_string(),
            heard.connection.clone(),
        ),
        (names::CHAT_ROOM_ANNOTATION.to_string(), heard.room.clone()),
        (
            names::CHAT_EVENT_ANNOTATION.to_string(),
            heard.event_id.clone(),
        ),
        (
            names::CHAT_THREAD_ANNOTATION.to_string(),
            heard.thread_root.clone(),
        ),
        (
            names::CHAT_SENDER_ANNOTATION.to_string(),
            heard.sender.clone(),
        ),
    ]);
    let labels = BTreeMap::from([
        (names::FLOW_LABEL.to_string(), names::flow_label(&name)),
        (
            names::CHAT_LABEL.to_string(),
            names::flow_label(&heard.connection),
        ),
    ]);
    Run {
        metadata: ObjectMeta {
            name: Some(names::command_run(&name, &heard.event_id)),
            namespace: flow.namespace(),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: flow.controller_owner_ref(&()).map(|o| vec![o]),
            ..Default::default()
        },
        spec: RunSpec {
            flow_ref: FlowRef { name },
            input: Some(json!({
                "text": heard.text,
                "prompt": prompt,
                "sender": heard.sender,
                "room": heard.room,
                "thread": heard.thread_root,
            })),
            cancel: false,
            from: None,
        },
        status: None,
    }
}

/// `run` with the controller (`me`) as its `created-by`, as admission
/// stamps it: written by the controller too, so its own chat Runs are known
/// as its own where no webhook runs.
pub fn created_by(run: &Run, me: &str) -> Run {
    let mut run = run.clone();
    run.annotations_mut()
        .insert(names::CREATED_BY_ANNOTATION.to_string(), me.to_string());
    run
}

/// Whether the controller (`me`) started `run` from a chat command, so the
/// bot may post its outcome where its annotations say. Labels and
/// annotations can be written by whoever may create a Run, and a command
/// Run's name can be computed from any event id; `created-by` is stamped by
/// admission from who made the request, so a Run someone else created —
/// aiming the bot at a room of their choice — gets nothing posted. The name
/// must also be the one the command's event gives, so the controller's own
/// Runs of other kinds (a schedule's) are not taken for command Runs.
pub fn started_by_me(run: &Run, me: &str) -> bool {
    let annotations = run.annotations();
    let made_by_me = annotations
        .get(names::CREATED_BY_ANNOTATION)
        .map(String::as_str)
        == Some(me);
    let named = annotations
        .get(names::CHAT_EVENT_ANNOTATION)
        .is_some_and(|event| {
            run.metadata.name.as_deref()
                == Some(names::command_run(&run.spec.flow_ref.name, event).as_str())
        });
    made_by_me && named
}

/// A transaction id for one answer about one chat event or run: the same
/// answer always gets the same id, so the chat service posts it once.
pub fn transaction(kind: &str, about: &str) -> String {
    let digest = names::hex(&Sha256::digest(about.as_bytes()));
    format!("coxswain-{kind}-{}", &digest[..32])
}

/// The answer to a started command.
pub fn started_text(run: &Run) -> String {
    let name = run.name_any();
    let namespace = run.namespace().unwrap_or_default();
    format!(
        "Started run `{name}` of flow `{}` (kubectl get run {name} -n {namespace}). I will answer here when it ends.",
        run.spec.flow_ref.name
    )
}

/// The answer when the Run could not be created (admission refused its
/// input, the flow is gone…).
pub fn not_started_text(command: &str, why: &str) -> String {
    format!("Could not start `!{command}`: {why}")
}

/// The most of a run's output an answer quotes; the rest is in the Run.
const OUTPUT_SHOWN: usize = 3000;

/// The answer when a run ends: its phase, its error or its output.
pub fn outcome_text(run: &Run) -> String {
    let name = run.name_any();
    let Some(status) = &run.status else {
        return format!("Run `{name}` ended.");
    };
    let mut text = format!("Run `{name}` {}", phase_word(status.phase));
    if let Some(error) = &status.error {
        text.push_str(&format!(": {}", error.message));
        return text;
    }
    if status.phase == RunPhase::Succeeded
        && let Some(output) = result_of(run)
    {
        let shown = match &output {
            Value::String(s) => s.clone(),
            other => serde_json::to_string_pretty(other).unwrap_or_default(),
        };
        text.push_str(". Output:\n");
        text.push_str(&cut(&shown, OUTPUT_SHOWN));
        return text;
    }
    text.push('.');
    text
}

/// The run's result: the computed output, else its output step's output or
/// (an output kept as its text alone) that step's text.
fn result_of(run: &Run) -> Option<Value> {
    let status = run.status.as_ref()?;
    if let Some(value) = status.result() {
        return Some(value.clone());
    }
    let step = status.steps.get(status.output_from.as_ref()?)?;
    step.text.clone().map(Value::String)
}

fn phase_word(phase: RunPhase) -> &'static str {
    match phase {
        RunPhase::Succeeded => "succeeded",
        RunPhase::Failed => "failed",
        RunPhase::Cancelled => "was cancelled",
        _ => "ended",
    }
}

fn cut(text: &str, most: usize) -> String {
    if text.len() <= most {
        return text.to_string();
    }
    let end = coxswain_core::text::floor_boundary(text, most);
    format!("{}… (cut; the whole output is in the Run)", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_core::api::{Command, FlowSpec, RunStatus, StepError};

    fn flow(name: &str, command: &str, rooms: &[&str], users: &[&str]) -> Flow {
        let mut flow = Flow::new(
            name,
            FlowSpec {
                command: Some(Command {
                    name: command.into(),
                    chat: "team-chat".into(),
                    rooms: rooms.iter().map(|r| r.to_string()).collect(),
                    allowed_users: users.iter().map(|u| u.to_string()).collect(),
                }),
                ..Default::default()
            },
        );
        flow.metadata.namespace = Some("demo".into());
        flow.metadata.uid = Some(format!("uid-{name}"));
        flow
    }

    fn listen(flow: &Flow) -> Listener<'_> {
        let rooms = flow.spec.command.as_ref().expect("command").rooms.clone();
        Listener {
            flow,
            rooms: rooms.into_iter().collect(),
        }
    }

    fn heard(sender: &str, text: &str) -> Heard {
        Heard {
            connection: "team-chat".into(),
            room: "!room:x".into(),
            event_id: "$event1".into(),
            thread_root: "$event1".into(),
            sender: sender.into(),
            text: text.into(),
        }
    }

    #[test]
    fn only_command_runs_the_controller_created_get_an_outcome() {
        const ME: &str = "system:serviceaccount:coxswain:coxswain";
        let review = flow("review", "review", &["!room:x"], &["@alice:x"]);
        let own = created_by(&command_run(&review, &heard("@alice:x", "!review"), ""), ME);
        assert!(started_by_me(&own, ME));
        // Not stamped by the controller (or stamped by someone else): a
        // member made it, chat marks and all, to aim the bot at a room.
        let plain = command_run(&review, &heard("@alice:x", "!review"), "");
        assert!(!started_by_me(&plain, ME));
        assert!(!started_by_me(&created_by(&plain, "mallory"), ME));
        // The controller's Run, but not under the name its event gives.
        let mut renamed = own.clone();
        renamed.metadata.name = Some("review-anything".into());
        assert!(!started_by_me(&renamed, ME));
        // The event annotation moved to another event.
        let mut moved = own.clone();
        moved
            .annotations_mut()
            .insert(names::CHAT_EVENT_ANNOTATION.into(), "$other".into());
        assert!(!started_by_me(&moved, ME));
        // No event at all.
        let mut bare = own;
        bare.annotations_mut().remove(names::CHAT_EVENT_ANNOTATION);
        assert!(!started_by_me(&bare, ME));
    }

    #[test]
    fn commands_are_read_with_their_words() {
        assert_eq!(
            parse("!review fix the intro"),
            Some(("review", "fix the intro"))
        );
        assert_eq!(
            parse("  !review\n  two\nlines "),
            Some(("review", "two\nlines"))
        );
        assert_eq!(parse("!review"), Some(("review", "")));
        assert_eq!(parse("review this"), None);
        assert_eq!(parse("! review"), None);
        assert_eq!(parse(""), None);
    }

    #[test]
    fn an_allowed_user_starts_a_run_named_after_the_event() {
        let review = flow("review", "review", &["!room:x"], &["@alice:x"]);
        let listeners = [listen(&review)];
        let Decision::Start(run) = decide(&heard("@alice:x", "!review the intro"), &listeners)
        else {
            panic!("expected a start");
        };
        assert_eq!(
            run.spec.input,
            Some(json!({"text": "!review the intro", "prompt": "the intro",
                "sender": "@alice:x", "room": "!room:x", "thread": "$event1"}))
        );
        assert_eq!(run.namespace().as_deref(), Some("demo"));
        assert_eq!(run.labels()[names::CHAT_LABEL], "team-chat");
        assert_eq!(run.annotations()[names::CHAT_THREAD_ANNOTATION], "$event1");
        assert_eq!(run.owner_references()[0].uid, "uid-review");
        // The same event gives the same name; another event another name.
        let again = command_run(&review, &heard("@alice:x", "!review the intro"), "x");
        assert_eq!(again.name_any(), run.name_any());
        let mut other = heard("@alice:x", "!review the intro");
        other.event_id = "$event2".into();
        assert_ne!(command_run(&review, &other, "x").name_any(), run.name_any());
        assert!(run.name_any().starts_with("review-"), "{}", run.name_any());
    }

    #[test]
    fn others_are_refused_politely_and_nobody_is_started() {
        let review = flow("review", "review", &["!room:x"], &["@alice:x"]);
        let listeners = [listen(&review)];
        let Decision::Refuse(text) = decide(&heard("@bob:x", "!review please"), &listeners) else {
            panic!("expected a refusal");
        };
        assert!(
            text.contains("@bob:x") && text.contains("`!review`"),
            "{text}"
        );
        let everyone = flow("open", "open", &["!room:x"], &["*"]);
        let listeners = [listen(&everyone)];
        assert!(matches!(
            decide(&heard("@bob:x", "!open"), &listeners),
            Decision::Start(_)
        ));
    }

    #[test]
    fn other_rooms_other_words_and_other_connections_are_ignored() {
        let review = flow("review", "review", &["!other:x"], &["*"]);
        let listeners = [listen(&review)];
        assert!(matches!(
            decide(&heard("@a:x", "!review"), &listeners),
            Decision::Ignore
        ));
        let here = flow("here", "review", &["!room:x"], &["*"]);
        let listeners = [listen(&here)];
        assert!(matches!(
            decide(&heard("@a:x", "!deploy"), &listeners),
            Decision::Ignore
        ));
        assert!(matches!(
            decide(&heard("@a:x", "hello"), &listeners),
            Decision::Ignore
        ));
        let mut elsewhere = heard("@a:x", "!review");
        elsewhere.connection = "another".into();
        assert!(matches!(decide(&elsewhere, &listeners), Decision::Ignore));
    }

    #[test]
    fn help_lists_the_rooms_commands_and_who_may_not() {
        let mut review = flow("review", "review", &["!room:x"], &["@alice:x"]);
        review.spec.description = Some("Reviews a draft.".into());
        let deploy = flow("deploy", "deploy", &["!room:x"], &["*"]);
        let elsewhere = flow("other", "other", &["!other:x"], &["*"]);
        let listeners = [listen(&review), listen(&deploy), listen(&elsewhere)];
        let Decision::Help(text) = decide(&heard("@bob:x", "!help"), &listeners) else {
            panic!("expected help");
        };
        assert_eq!(
            text,
            "Commands here (the words after the command become the run's `prompt`):\n\
             `!deploy …` starts the flow `deploy`\n\
             `!review …` starts the flow `review`: Reviews a draft. (not by you)"
        );
        // A room where no flow listens gets no help from us.
        let listeners = [listen(&elsewhere)];
        assert!(matches!(
            decide(&heard("@bob:x", "!help"), &listeners),
            Decision::Ignore
        ));
        // A flow may claim `help` itself.
        let own = flow("own", "help", &["!room:x"], &["*"]);
        assert!(matches!(
            decide(&heard("@bob:x", "!help"), &[listen(&own)]),
            Decision::Start(_)
        ));
    }

    #[test]
    fn a_command_two_flows_claim_starts_neither() {
        let a = flow("a", "review", &["!room:x"], &["*"]);
        let b = flow("b", "review", &["!room:x"], &["*"]);
        let listeners = [listen(&a), listen(&b)];
        let Decision::Refuse(text) = decide(&heard("@a:x", "!review"), &listeners) else {
            panic!("expected a refusal");
        };
        assert!(text.contains("`a` and `b`"), "{text}");
    }

    #[test]
    fn transactions_are_stable_and_path_safe() {
        let t = transaction("started", "$abc/def:x");
        assert_eq!(t, transaction("started", "$abc/def:x"));
        assert_ne!(t, transaction("outcome", "$abc/def:x"));
        assert!(
            t.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
            "{t}"
        );
    }

    #[test]
    fn outcomes_say_the_phase_and_the_output_or_the_error() {
        let review = flow("review", "review", &["!room:x"], &["*"]);
        let mut run = command_run(&review, &heard("@a:x", "!review"), "");
        run.status = Some(RunStatus {
            phase: RunPhase::Succeeded,
            output: Some(json!({"verdict": "ship it"})),
            ..Default::default()
        });
        let text = outcome_text(&run);
        assert!(
            text.contains("succeeded. Output:") && text.contains("ship it"),
            "{text}"
        );
        run.status = Some(RunStatus {
            phase: RunPhase::Failed,
            error: Some(StepError {
                code: "x".into(),
                message: "step build: exit 2".into(),
            }),
            ..Default::default()
        });
        assert!(outcome_text(&run).ends_with("failed: step build: exit 2"));
        let long = "é".repeat(OUTPUT_SHOWN);
        assert!(cut(&long, OUTPUT_SHOWN).ends_with("(cut; the whole output is in the Run)"));
    }
}
