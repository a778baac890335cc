//! `coxswain step-exec`: the wrapper inside a script step's pod (see
//! `coxswain_k8s::jobs`). `install DEST` copies this executable into the
//! pod (the init container); `run` runs the script and hands its result
//! back through the termination message and, when large, the log.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use coxswain_k8s::jobs::handoff;
use coxswain_k8s::jobs::paths;
use coxswain_k8s::jobs::pod::{self, PodPaths};
use coxswain_k8s::jobs::wire::WireResult;
use coxswain_k8s::jobs::workspace::{self, GitAct, GitTask};

/// Options of `coxswain step-exec`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Copy this executable to DEST (the init container of a step's pod).
    Install {
        /// Where the copy goes.
        dest: PathBuf,
    },
    /// Run the step described by the task file and report its result.
    Run(RunArgs),
    /// Check a run's workspace out into its volume (the checkout Job).
    Checkout(GitArgs),
    /// Push a run's branch from its volume (the push Job).
    Push(GitArgs),
}

/// What a workspace's git Job is told.
#[derive(clap::Args, Debug)]
struct GitArgs {
    /// The repos and the branch, as JSON (the controller writes it).
    #[arg(long)]
    task: String,
    /// The run's volume.
    #[arg(long, default_value = paths::WORKSPACE)]
    dir: PathBuf,
    /// Where each repo's Secret is mounted (`DIR/<secret>/<key>`).
    #[arg(long, default_value = workspace::SECRETS_DIR)]
    secrets: PathBuf,
    /// Where the termination message is written.
    #[arg(long, default_value = paths::TERMINATION_LOG)]
    termination_log: PathBuf,
}

/// Where `run` finds things; the defaults are the pod's paths.
#[derive(clap::Args, Debug)]
struct RunArgs {
    /// The step's task (the inputs ConfigMap's `step.json`).
    #[arg(long, default_value = paths::TASK_FILE)]
    task: PathBuf,
    /// `$INPUTS`.
    #[arg(long, default_value = paths::INPUTS)]
    inputs: PathBuf,
    /// `$OUTPUTS`.
    #[arg(long, default_value = paths::OUTPUTS)]
    outputs: PathBuf,
    /// `$WORKSPACE`.
    #[arg(long, default_value = paths::WORKSPACE)]
    workspace: PathBuf,
    /// `$HOME`.
    #[arg(long, default_value = paths::HOME)]
    home: PathBuf,
    /// `$TMPDIR`.
    #[arg(long, default_value = paths::TMP)]
    tmp: PathBuf,
    /// Where the termination message is written.
    #[arg(long, default_value = paths::TERMINATION_LOG)]
    termination_log: PathBuf,
    /// The digest the task and inputs must have (the controller gives it);
    /// nothing runs when they differ.
    #[arg(long, requires = "given")]
    inputs_sha256: Option<String>,
    /// The inputs ConfigMap's name (mounted), for the message when they differ.
    #[arg(long, group = "given", requires = "inputs_sha256")]
    inputs_from: Option<String>,
    /// The task and inputs are in the container's environment (small ones
    /// ride in the Job): written into their folders once checked.
    #[arg(long, group = "given", requires = "inputs_sha256")]
    inputs_inline: bool,
    /// A later member of a script chain: wait for the member before it to
    /// hand its result over in this folder, and make this step's task and
    /// inputs from it (the task rides in the container's environment).
    #[arg(long, conflicts_with = "given")]
    after: Option<PathBuf>,
    /// Hand this step's result to the next member of its chain in this
    /// folder once the script and whatever it left running have ended.
    #[arg(long)]
    hand_to: Option<PathBuf>,
}

/// Runs the chosen act. `run` exits 0 when the attempt succeeded, 1 when it
/// failed (its error is in the result), 2 when the result could not be
/// written, 143 when stopped by SIGTERM (the Job was deleted).
pub fn run(args: Args) -> ExitCode {
    match args.command {
        Command::Install { dest } => match pod::install(&dest) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("coxswain step-exec install: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Run(args) => run_step(args),
        Command::Checkout(args) => run_git(GitAct::Checkout, args),
        Command::Push(args) => run_git(GitAct::Push, args),
    }
}

/// Runs a workspace's git Job and reports its result as a step's is.
fn run_git(act: GitAct, args: GitArgs) -> ExitCode {
    let result = match serde_json::from_str::<GitTask>(&args.task) {
        Ok(task) => match tokio::runtime::Runtime::new() {
            Ok(runtime) => {
                runtime.block_on(workspace::run_git(act, &task, &args.dir, &args.secrets))
            }
            Err(e) => {
                eprintln!("coxswain step-exec: cannot start the async runtime: {e}");
                return ExitCode::from(2);
            }
        },
        Err(e) => Err(coxswain_core::engine::Failed::from(
            coxswain_core::engine::step_error(
                coxswain_core::engine::codes::INTERNAL,
                format!(
                    "the workspace task is not one this coxswain reads ({e}); do the controller and the image differ in version?"
                ),
            ),
        )),
    };
    if let Err(e) = &result {
        eprintln!("{}", e.error.message);
    }
    report(&result, &args.termination_log)
}

fn run_step(args: RunArgs) -> ExitCode {
    let paths = PodPaths {
        task: args.task,
        inputs: args.inputs,
        outputs: args.outputs,
        workspace: args.workspace,
        home: args.home,
        tmp: args.tmp,
        termination_log: args.termination_log,
        expected: args.inputs_sha256.map(|digest| pod::Expected {
            digest,
            given: match args.inputs_from {
                Some(config_map) => pod::Given::ConfigMap(config_map),
                None => pod::Given::Inline,
            },
        }),
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("coxswain step-exec: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    if args.after.is_some() || args.hand_to.is_some() {
        handoff::hide_from_script();
    }
    let Some(result) = runtime.block_on(until_sigterm(&paths, args.after.as_deref())) else {
        return ExitCode::from(143);
    };
    drop(runtime);
    if let Some(dir) = &args.hand_to {
        handoff::end_leftovers();
        let name = std::env::var(handoff::HAND_TO_ENV).unwrap_or_default();
        if let Err(e) = handoff::hand_over(dir, &name, &result) {
            // The next member waits until the Job's deadline or the run's
            // end; this step's own result still goes back.
            eprintln!(
                "coxswain step-exec: cannot hand the result to the next step in {}: {e}",
                dir.display()
            );
        }
    }
    report_wire(&result, &paths.termination_log)
}

/// Hands `result` back through `termination_log` (and stdout when large);
/// exits 0 when it succeeded, 1 when it failed or ran nothing, 2 when it
/// could not be written.
fn report_wire(result: &WireResult, termination_log: &std::path::Path) -> ExitCode {
    if let Err(e) = pod::report_wire(result, termination_log, &mut std::io::stdout()) {
        eprintln!(
            "coxswain step-exec: cannot write the result to {}: {e}",
            termination_log.display()
        );
        return ExitCode::from(2);
    }
    if result.error.is_none() && result.not_run.is_none() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// [`report_wire`] for a workspace's git Job.
fn report(
    result: &coxswain_core::engine::WorkResult,
    termination_log: &std::path::Path,
) -> ExitCode {
    report_wire(&WireResult::from(result), termination_log)
}

/// The attempt's result, or `None` when SIGTERM came first: the script's
/// process group is killed as the attempt is dropped. (As PID 1 of a
/// container, this process would otherwise ignore SIGTERM until SIGKILL.)
async fn until_sigterm(paths: &PodPaths, after: Option<&Path>) -> Option<WireResult> {
    let mut sigterm =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let stopped = async {
        match sigterm.as_mut() {
            Some(signal) => {
                signal.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    // The hand-over name is the wrapper's alone, whatever the step's `env`
    // names.
    let env = |name: &str| {
        (name != handoff::HAND_TO_ENV)
            .then(|| std::env::var(name).ok())
            .flatten()
    };
    let work = async {
        match after {
            Some(after) => handoff::run_member(paths, after, env).await.wire(),
            None => WireResult::from(&pod::run_task(paths, env).await),
        }
    };
    tokio::select! {
        result = work => Some(result),
        () = stopped => None,
    }
}
