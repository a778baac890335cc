//! The kubectl plugin: this binary called as `kubectl-coxswain` (a link to
//! it on `PATH`, so `kubectl coxswain …` finds it), or as `coxswain kubectl
//! …`. It acts on Runs and Approvals of a cluster as the kubeconfig's user,
//! with kubectl's own `-n`, `--context` and `--kubeconfig`.
//!
//! Exit codes: commands that report how a run ended (`start --watch`,
//! `retry --watch`, `watch`, `wait`) exit 0 when it succeeded, 1 when it failed or was
//! cancelled and 2 when they could not tell; the others exit 0 when done
//! and 1 on an error (an admission refusal among them).

mod approve;
mod cluster;
mod error;
mod flow;
mod logs;
mod retry;
mod start;
mod tree;
mod watch;

use std::process::ExitCode;

use cluster::{Cluster, Target};
use error::PluginError;

/// Options of the plugin: kubectl's flags and one command.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    target: Target,
}

/// The plugin's command line when the binary is called `kubectl-coxswain`.
#[derive(clap::Parser, Debug)]
#[command(
    name = "kubectl-coxswain",
    bin_name = "kubectl coxswain",
    version,
    about = "Start, watch and answer Coxswain runs on a cluster."
)]
pub struct PluginCli {
    #[command(flatten)]
    args: Args,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Start a run of a Flow (a Run named FLOW-xxxxx); `--watch` follows it.
    Start {
        /// The Flow's name.
        flow: String,
        /// The run input: JSON, or `@FILE` to read it from a file (`@-`: stdin).
        #[arg(long, value_name = "JSON|@FILE")]
        input: Option<String>,
        /// Show the run's progress until it ends, then its output.
        #[arg(long, short = 'w')]
        watch: bool,
    },
    /// Show a run's progress live until it ends, then its output.
    Watch {
        /// The Run's name.
        run: String,
    },
    /// Show a run's steps as a tree: status, exits, times, errors.
    Get {
        /// The Run's name.
        run: String,
    },
    /// Print what script steps printed (from their pods, else the status's tail).
    Logs {
        /// The Run's name.
        run: String,
        /// Only this step.
        step: Option<String>,
        /// Follow the logs until the steps end.
        #[arg(long, short = 'f')]
        follow: bool,
    },
    /// Answer the run's open Approval (of STEP, when it waits on several).
    Approve {
        /// The Run's name.
        run: String,
        /// The step waiting for the answer.
        step: Option<String>,
        /// One of the step's decisions.
        #[arg(long, short = 'd')]
        decision: Option<String>,
        /// Instructions for whoever redoes the work.
        #[arg(long)]
        feedback: Option<String>,
        /// The entry (fields of an entry or `both` step), as JSON.
        #[arg(long, value_name = "JSON")]
        response: Option<String>,
    },
    /// Wait until a run ends: exit 0 succeeded, 1 failed or cancelled, 2 timed out.
    Wait {
        /// The Run's name.
        run: String,
        /// Give up after this long (`30s`, `10m`, `1h`).
        #[arg(long, value_name = "DURATION")]
        timeout: Option<String>,
    },
    /// Cancel a run: what runs is stopped and the run ends Cancelled.
    Cancel {
        /// The Run's name.
        run: String,
    },
    /// Rerun an ended run from a step (default: the first that failed); the
    /// steps before it keep the old run's status.
    Retry {
        /// The ended Run's name.
        run: String,
        /// The step to run again, with every step after it.
        #[arg(long, value_name = "STEP")]
        from: Option<String>,
        /// Show the new run's progress until it ends, then its output.
        #[arg(long, short = 'w')]
        watch: bool,
    },
    /// Draw a run's graph (Mermaid or DOT) with what happened on it.
    Graph {
        /// The Run's name.
        run: String,
        /// The diagram language.
        #[arg(long, value_enum, default_value = "mermaid")]
        format: super::graph::DiagramFormat,
    },
}

impl PluginCli {
    /// The options, as `coxswain kubectl` takes them.
    pub fn into_args(self) -> Args {
        self.args
    }
}

/// Whether the program was called as the plugin (`kubectl-coxswain`).
pub fn called_as_plugin() -> bool {
    std::env::args_os()
        .next()
        .map(std::path::PathBuf::from)
        .and_then(|p| p.file_name().map(|n| n.to_os_string()))
        .is_some_and(|n| n == "kubectl-coxswain")
}

/// Runs one plugin command.
pub fn run(args: Args) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    runtime.block_on(dispatch(args))
}

async fn dispatch(args: Args) -> ExitCode {
    let reports_a_run = matches!(
        args.command,
        Command::Watch { .. }
            | Command::Wait { .. }
            | Command::Start { watch: true, .. }
            | Command::Retry { watch: true, .. }
    );
    let failed = if reports_a_run {
        ExitCode::from(2)
    } else {
        ExitCode::FAILURE
    };
    let cluster = match Cluster::connect(&args.target).await {
        Ok(cluster) => cluster,
        Err(e) => {
            eprintln!("{e}");
            return failed;
        }
    };
    match command(&cluster, args.command).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{e}");
            failed
        }
    }
}

async fn command(cluster: &Cluster, command: Command) -> Result<ExitCode, PluginError> {
    let done = |text: String| {
        println!("{text}");
        ExitCode::SUCCESS
    };
    Ok(match command {
        Command::Start { flow, input, watch } => {
            let name = start::start(cluster, &flow, input.as_deref()).await?;
            println!("run.coxswain.dev/{name} created");
            if watch {
                watch::live(cluster, &name).await
            } else {
                ExitCode::SUCCESS
            }
        }
        Command::Retry { run, from, watch } => {
            let (name, step) = retry::retry(cluster, &run, from.as_deref()).await?;
            println!("run.coxswain.dev/{name} created (a rerun of {run} from step {step})");
            if watch {
                watch::live(cluster, &name).await
            } else {
                ExitCode::SUCCESS
            }
        }
        Command::Watch { run } => watch::live(cluster, &run).await,
        Command::Wait { run, timeout } => watch::wait(cluster, &run, timeout.as_deref()).await,
        Command::Get { run } => {
            let found = cluster.run(&run).await?;
            let flow = match flow::of_run(cluster, &found).await {
                Ok(flow) => Some(flow),
                Err(e) => {
                    eprintln!("note: {e}; steps listed in the order they started");
                    None
                }
            };
            print!("{}", tree::render(&found, flow.as_ref()));
            ExitCode::SUCCESS
        }
        Command::Logs { run, step, follow } => {
            let ask = logs::Ask {
                run: &run,
                step: step.as_deref(),
                follow,
            };
            logs::logs(cluster, &ask).await?;
            ExitCode::SUCCESS
        }
        Command::Approve {
            run,
            step,
            decision,
            feedback,
            response,
        } => {
            let answer = approve::Answer {
                run: &run,
                step: step.as_deref(),
                decision: decision.as_deref(),
                feedback: feedback.as_deref(),
                response: response.as_deref(),
            };
            done(approve::approve(cluster, &answer).await?)
        }
        Command::Cancel { run } => done(approve::cancel(cluster, &run).await?),
        Command::Graph { run, format } => {
            let found = cluster.run(&run).await?;
            let flow = flow::of_run(cluster, &found).await?;
            print!(
                "{}",
                super::graph::drawing(&flow.steps, found.status.as_ref(), format)
            );
            ExitCode::SUCCESS
        }
    })
}
