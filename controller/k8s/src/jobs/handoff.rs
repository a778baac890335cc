//! What one member of a script chain hands the next inside their shared
//! pod (see [`ScriptChains`](coxswain_core::engine::ScriptChains)).
//!
//! Each member runs in a container of its own. A member that has a next one
//! writes its result into a folder only it may write and only the next
//! member reads (`--hand-to`), after every process its script left behind
//! is gone, under a file name drawn at random when the chain's Job was made
//! ([`HAND_TO_ENV`], [`ChainTask::after`]): its script never learns that
//! name (the wrapper keeps it out of the script's environment and makes
//! itself unreadable to it), so no file the script writes there, while it
//! runs or after, is taken for the result. The next member (`--after`) waits for that result, makes its
//! input from it and the run input exactly as the engine would (the default
//! input, or its own `input` resolved by the engine's code), writes its task and input files into folders no other container
//! mounts, and runs its script; its result carries the digest of what it
//! made, which the controller compares with the engine's own before taking
//! it. When the member before it failed, it runs nothing and says so: the
//! engine decides what comes next, as it does for any failure.

use std::io;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::manifest::attempt_entries;
use super::pod::{PodPaths, run_task, write_entries};
use super::task::{PodTask, entries_digest};
use super::wire::WireResult;
use coxswain_core::api::StepError;
use coxswain_core::engine::{Failed, WorkResult, codes, member_input, step_error};
use coxswain_steps::script::input_files;
use rustix::process::{Pid, Signal, WaitOptions, kill_process, wait};

/// A later member's variable holding its [`ChainTask`] as JSON.
pub const CHAIN_ENV: &str = "COXSWAIN_CHAIN_TASK_JSON";

/// The variable of a member that hands over: the name of its result file
/// in the hand-over folder.
pub const HAND_TO_ENV: &str = "COXSWAIN_HAND_TO_NAME";

/// How often a waiting member looks for the hand-over: a step's pod checks
/// a file, which costs nothing beside the script it waits to run.
const POLL: Duration = Duration::from_millis(10);

/// What a later member is told in its container: its attempt as the
/// controller would have made it for a pod of its own, and what its input
/// is made from besides the result handed over.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainTask {
    /// The attempt (its first), without its input.
    pub task: PodTask,
    /// The run input.
    pub run_input: Value,
    /// The step's `input` as written in the flow (`None`: the default input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// The key of the member before it, which `input` may read as
    /// `$steps.<key>`.
    #[serde(default)]
    pub before: String,
    /// The name of the result file the member before hands over.
    pub after: String,
}

/// How a later member ended.
#[derive(Debug, Clone, PartialEq)]
pub enum MemberEnd {
    /// It ran: its result, and the digest of the task and inputs it made
    /// (none when it could not make them).
    Ran {
        /// The attempt's result.
        result: WorkResult,
        /// [`inputs_digest`] of what it made.
        inputs_sha256: Option<String>,
    },
    /// It ran nothing, for this reason.
    NotRun(String),
}

impl MemberEnd {
    /// What the pod reports.
    pub fn wire(&self) -> WireResult {
        match self {
            MemberEnd::Ran {
                result,
                inputs_sha256,
            } => WireResult {
                inputs_sha256: inputs_sha256.clone(),
                ..WireResult::from(result)
            },
            MemberEnd::NotRun(why) => WireResult {
                not_run: Some(why.clone()),
                ..WireResult::default()
            },
        }
    }
}

/// Runs a later member: waits for the member before it to hand over in
/// `after`, makes this one's input from that member's output, writes it
/// where `paths` say, and runs the script there.
pub async fn run_member(
    paths: &PodPaths,
    after: &Path,
    env: impl Fn(&str) -> Option<String>,
) -> MemberEnd {
    let chain = match read_chain_task(env(CHAIN_ENV).as_deref()) {
        Ok(chain) => chain,
        Err(error) => {
            return MemberEnd::Ran {
                result: Err(Failed::from(error)),
                inputs_sha256: None,
            };
        }
    };
    let previous = match handed_over(after, &chain.after).await {
        Ok(previous) => previous,
        Err(why) => return MemberEnd::NotRun(why),
    };
    if previous.error.is_some() || previous.not_run.is_some() {
        return MemberEnd::NotRun("the step before it in the pod did not finish".into());
    }
    let mut task = chain.task;
    let input = match member_input(
        chain.input.as_ref(),
        &chain.run_input,
        &chain.before,
        previous.output.unwrap_or(Value::Null),
        previous.text,
    ) {
        Ok(input) => input,
        Err(why) => return MemberEnd::NotRun(format!("its input could not be made here: {why}")),
    };
    let files = input_files(&input).map_err(StepError::from);
    let (_, entries) = attempt_entries(&mut task, files);
    let digest = entries_digest(&entries);
    if let Err(error) = write_entries(paths, &entries) {
        return MemberEnd::Ran {
            result: Err(Failed::from(error)),
            inputs_sha256: Some(digest),
        };
    }
    let own = PodPaths {
        expected: None,
        ..paths.clone()
    };
    MemberEnd::Ran {
        result: run_task(&own, env).await,
        inputs_sha256: Some(digest),
    }
}

fn read_chain_task(json: Option<&str>) -> Result<ChainTask, StepError> {
    let json = json.ok_or_else(|| {
        step_error(
            codes::INTERNAL,
            format!(
                "the step's task is not in its container's {CHAIN_ENV}; do the controller and the image differ in version?"
            ),
        )
    })?;
    serde_json::from_str(json).map_err(|e| {
        step_error(
            codes::INTERNAL,
            format!(
                "{CHAIN_ENV} does not hold a task this coxswain reads ({e}); do the controller and the image differ in version?"
            ),
        )
    })
}

/// The result the member before handed over in `dir` as `name`, once it
/// has.
async fn handed_over(dir: &Path, name: &str) -> Result<WireResult, String> {
    let path = result_file(dir, name).map_err(|e| e.to_string())?;
    while !path.exists() {
        tokio::time::sleep(POLL).await;
    }
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read what the step before it handed over: {e}"))?;
    serde_json::from_str(&text)
        .map_err(|e| format!("what the step before it handed over is not a result: {e}"))
}

/// Hands `result` to the next member in `dir` as the file `name`, which
/// appears whole or not at all.
pub fn hand_over(dir: &Path, name: &str, result: &WireResult) -> io::Result<()> {
    let path = result_file(dir, name)?;
    let text = serde_json::to_string(result).map_err(io::Error::other)?;
    let partial = path.with_extension("partial");
    std::fs::write(&partial, text)?;
    std::fs::rename(&partial, path)
}

/// The hand-over file `name` in `dir`; a name that is not plain letters and
/// digits is refused (it comes from the Job, never from a script).
fn result_file(dir: &Path, name: &str) -> io::Result<std::path::PathBuf> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(io::Error::other(format!(
            "`{name}` cannot name a hand-over file"
        )));
    }
    Ok(dir.join(format!("{name}.json")))
}

/// A fresh hand-over name: 128 random bits, which no script can guess.
pub fn random_name() -> String {
    use rand::RngExt;
    let bits: u128 = rand::rng().random();
    format!("{bits:032x}")
}

/// Makes this process unreadable to the processes it starts (its
/// `/proc/PID/environ`, which holds the hand-over names, included): the
/// script runs as the same user, and must not learn them.
pub fn hide_from_script() {
    if let Err(e) =
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
    {
        tracing::warn!("cannot keep the step's wrapper from its script: {e}");
    }
}

/// Ends every other process of this container, and waits until they are
/// gone, when this process is the container's first (PID 1 of its own
/// process namespace, as a step's wrapper is): a script's background
/// process, even one that left its process group, must not outlive its
/// step and change what the next member reads. Anywhere else (a test, a
/// shared process namespace) it does nothing: there the processes listed
/// are not only the step's.
pub fn end_leftovers() {
    if std::process::id() != 1 {
        return;
    }
    // Again until none is left: one may fork between a listing and its end.
    for _ in 0..1000 {
        let others = other_processes();
        if others.is_empty() {
            return;
        }
        for pid in others {
            let _ = kill_process(pid, Signal::KILL);
        }
        // Every orphan of the container is this process's child: reap
        // them, so they leave the listing.
        while let Ok(Some(_)) = wait(WaitOptions::NOHANG) {}
        std::thread::sleep(Duration::from_millis(1));
    }
    tracing::warn!("processes the step's script left could not all be ended");
}

/// The processes of this namespace other than this one, from `/proc`.
fn other_processes() -> Vec<Pid> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != 1)
        .filter_map(Pid::from_raw)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_core::api::ScriptStep;
    use coxswain_core::engine::Done;
    use serde_json::json;

    fn dirs() -> (tempfile::TempDir, PodPaths) {
        let dir = tempfile::tempdir().expect("temp dir");
        let at = |name: &str| dir.path().join(name);
        for name in ["task", "outputs", "workspace", "home", "tmp", "after"] {
            std::fs::create_dir(at(name)).expect("folder");
        }
        let paths = PodPaths {
            task: at("task/step.json"),
            inputs: at("task/inputs"),
            outputs: at("outputs"),
            workspace: at("workspace"),
            home: at("home"),
            tmp: at("tmp"),
            termination_log: at("termination-log"),
            expected: None,
        };
        (dir, paths)
    }

    const NAME: &str = "0123abcd";

    fn chain_task(source: &str, run_input: Value) -> String {
        chain_task_with(source, run_input, None)
    }

    fn chain_task_with(source: &str, run_input: Value, input: Option<Value>) -> String {
        let task = PodTask {
            step: ScriptStep {
                source: Some(source.into()),
                ..ScriptStep::default()
            },
            step_key: "second".into(),
            run_name: "nightly".into(),
            attempt: 1,
            part_key: None,
            since: None,
            timeout_ms: None,
            max_output: 1 << 16,
            branch: None,
            part_round: None,
            error: None,
        };
        serde_json::to_string(&ChainTask {
            task,
            run_input,
            input,
            before: "first".into(),
            after: NAME.into(),
        })
        .expect("json")
    }

    /// Runs the member told `task` after what `after` holds; its result
    /// and the digest it reports (the test fails if it ran nothing).
    async fn ran(paths: &PodPaths, after: &Path, task: &str) -> (WorkResult, Option<String>) {
        let env = |name: &str| (name == CHAIN_ENV).then(|| task.to_string());
        match run_member(paths, after, env).await {
            MemberEnd::Ran {
                result,
                inputs_sha256,
            } => (result, inputs_sha256),
            end => panic!("the member ran nothing: {end:?}"),
        }
    }

    /// The controller's digest for the attempt of `task` whose input the
    /// engine makes as `input`.
    fn digest_of(task: &str, input: &Value) -> String {
        let mut task = serde_json::from_str::<ChainTask>(task).expect("task").task;
        let files = input_files(input).map_err(StepError::from);
        let (_, entries) = attempt_entries(&mut task, files);
        entries_digest(&entries)
    }

    fn done(output: Value) -> WireResult {
        WireResult::from(&Ok(Done {
            output,
            text: None,
            usage: None,
            log: None,
        }))
    }

    #[tokio::test]
    async fn a_member_makes_its_input_from_the_one_before_and_says_what_it_made() {
        let (dir, paths) = dirs();
        let after = dir.path().join("after");
        hand_over(&after, NAME, &done(json!({"n": 2}))).expect("hand over");
        let task = chain_task(
            r#"cat "$INPUTS/n" "$INPUTS/team""#,
            json!({"team": "a", "n": 1}),
        );
        let (result, inputs_sha256) = ran(&paths, &after, &task).await;
        assert_eq!(
            result.expect("done").text.as_deref(),
            Some(r#"{"data":2}{"data":"a"}"#)
        );
        // The controller's digest for the same attempt, made from the
        // engine's input for it, is the one the pod reports.
        let engines = json!({"team": "a", "n": 2});
        assert_eq!(inputs_sha256, Some(digest_of(&task, &engines)));
        // Its inputs are read-only, as a mounted ConfigMap's are.
        let mode = std::fs::metadata(&paths.inputs)
            .expect("inputs")
            .permissions();
        assert!(mode.readonly());
    }

    #[tokio::test]
    async fn a_member_with_its_own_input_resolves_it_from_the_one_before() {
        let (dir, paths) = dirs();
        let after = dir.path().join("after");
        let handed = WireResult::from(&Ok(Done {
            output: json!({"n": 2}),
            text: Some("{\"n\": 2}".into()),
            usage: None,
            log: None,
        }));
        hand_over(&after, NAME, &handed).expect("hand over");
        let input = json!({"count": "$steps.first.output.n", "team": "$input.team", "raw": "$previous.text"});
        let task = chain_task_with(
            r#"cat "$INPUTS/count" "$INPUTS/team" "$INPUTS/raw""#,
            json!({"team": "a"}),
            Some(input),
        );
        let (result, inputs_sha256) = ran(&paths, &after, &task).await;
        assert_eq!(
            result.expect("done").text.as_deref(),
            Some(r#"{"data":2}{"data":"a"}{"data":"{\"n\": 2}"}"#)
        );
        let engines = json!({"count": 2, "team": "a", "raw": "{\"n\": 2}"});
        assert_eq!(inputs_sha256, Some(digest_of(&task, &engines)));
    }

    #[tokio::test]
    async fn a_member_whose_input_does_not_parse_runs_nothing() {
        let (dir, paths) = dirs();
        let after = dir.path().join("after");
        hand_over(&after, NAME, &done(json!(1))).expect("hand over");
        let marker = dir.path().join("ran");
        let task = chain_task_with(
            &format!("touch {}", marker.display()),
            Value::Null,
            Some(json!({"x": "$steps."})),
        );
        let env = |name: &str| (name == CHAIN_ENV).then(|| task.clone());
        let end = run_member(&paths, &after, env).await;
        assert!(
            matches!(&end, MemberEnd::NotRun(why) if why.contains("input")),
            "{end:?}"
        );
        assert!(!marker.exists(), "the script ran");
    }

    #[tokio::test]
    async fn a_member_after_a_failure_runs_nothing() {
        let (dir, paths) = dirs();
        let after = dir.path().join("after");
        let failed = WireResult::from(&Err(Failed::from(step_error(codes::SCRIPT, "exit 3"))));
        hand_over(&after, NAME, &failed).expect("hand over");
        let marker = dir.path().join("ran");
        let task = chain_task(&format!("touch {}", marker.display()), Value::Null);
        let env = |name: &str| (name == CHAIN_ENV).then(|| task.clone());
        let end = run_member(&paths, &after, env).await;
        assert!(matches!(&end, MemberEnd::NotRun(_)), "{end:?}");
        assert!(end.wire().not_run.is_some());
        assert!(!marker.exists(), "the script ran");
    }

    #[tokio::test]
    async fn a_member_waits_for_the_hand_over() {
        let (dir, paths) = dirs();
        let after = dir.path().join("after");
        let task = chain_task("cat \"$INPUTS/input\"", Value::Null);
        let env = move |name: &str| (name == CHAIN_ENV).then(|| task.clone());
        let waiting = tokio::spawn({
            let paths = paths.clone();
            let after = after.clone();
            async move { run_member(&paths, &after, env).await }
        });
        // A file under any other name is not the hand-over.
        hand_over(&after, "guessed", &done(json!("forged"))).expect("forge");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!waiting.is_finished(), "it ran before the hand-over");
        hand_over(&after, NAME, &done(json!("hello"))).expect("hand over");
        let end = waiting.await.expect("member");
        let MemberEnd::Ran { result, .. } = end else {
            panic!("the member ran nothing: {end:?}");
        };
        assert_eq!(result.expect("done").text.as_deref(), Some("hello"));
    }

    #[test]
    fn a_hand_over_name_is_letters_and_digits_and_never_repeats() {
        let dir = tempfile::tempdir().expect("dir");
        assert!(hand_over(dir.path(), "../x", &WireResult::default()).is_err());
        assert!(hand_over(dir.path(), "", &WireResult::default()).is_err());
        let (a, b) = (random_name(), random_name());
        assert_ne!(a, b);
        assert!(result_file(dir.path(), &a).is_ok());
    }

    #[test]
    fn a_chain_task_that_is_missing_is_an_internal_error_naming_the_variable() {
        let error = read_chain_task(None).expect_err("no task");
        assert_eq!(error.code, codes::INTERNAL);
        assert!(error.message.contains(CHAIN_ENV), "{}", error.message);
    }
}
