//! The `coxswain` command line: one binary, one subcommand per job.

mod controller;
mod crd;
mod decide;
pub mod docs;
mod error;
mod eval;
mod graph;
mod lint;
mod plugin;
mod read;
mod records;
mod render;
mod run;
mod runs;
mod step_exec;
mod ui;
mod webhook;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use error::CliError;

/// Coxswain runs flows of AI agents, scripts, HTTP calls and people.
#[derive(Parser, Debug)]
#[command(name = "coxswain", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a flow on this machine: scripts as processes, people at the terminal.
    Run(run::Args),
    /// List or delete the stored records of this machine (what `save` steps saved).
    Records(records::Args),
    /// List or show Runs, live on the cluster and archived (locally, or a cluster's database).
    Runs(runs::Args),
    /// Check flows in YAML files or directories, as the admission webhook would.
    Lint(lint::Args),
    /// Evaluate one expression against a JSON context.
    Eval(eval::Args),
    /// Render one placeholder template against a JSON context.
    Render(render::Args),
    /// Write the CustomResourceDefinitions generated from the Rust types.
    Crd(crd::Args),
    /// Write the book's generated reference pages (fields, commands, chart values).
    Docs(docs::Args),
    /// Draw a flow (Mermaid or DOT), with what happened on a run when given its status.
    Graph(graph::Args),
    /// Run Flows and Runs on Kubernetes (the kubeconfig's cluster, or in-cluster).
    Controller(Box<controller::Args>),
    /// Serve the run viewer: runs drawn live, steps and arrows explained, approvals answered as you.
    Ui(ui::Args),
    /// Serve admission alone: check Flows, Runs and Approvals as the API server stores them.
    Webhook(webhook::Args),
    /// The kubectl plugin (`kubectl coxswain …` once linked as `kubectl-coxswain`):
    /// start, watch, approve and wait on runs of a cluster.
    Kubectl(plugin::Args),
    /// Inside a script step's pod: run the script and hand its result back.
    #[command(hide = true)]
    StepExec(step_exec::Args),
}

/// Parses the command line and runs the chosen subcommand.
pub fn main() -> ExitCode {
    if plugin::called_as_plugin() {
        let cli = <plugin::PluginCli as Parser>::parse();
        return plugin::run(cli.into_args());
    }
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => run::run(args),
        Command::Records(args) => records::run(args),
        Command::Runs(args) => runs::run(args),
        Command::Lint(args) => lint::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Render(args) => render::run(args),
        Command::Crd(args) => crd::run(args),
        Command::Docs(args) => docs::run(args),
        Command::Graph(args) => graph::run(args),
        Command::Controller(args) => controller::run(*args),
        Command::Webhook(args) => webhook::run(args),
        Command::Ui(args) => ui::run(args),
        Command::Kubectl(args) => plugin::run(args),
        Command::StepExec(args) => step_exec::run(args),
    }
}

/// A Tokio runtime built from `builder`; when none can be built, says so
/// and gives the command's exit code.
fn runtime(mut builder: tokio::runtime::Builder) -> Result<tokio::runtime::Runtime, ExitCode> {
    builder.enable_all().build().map_err(|e| {
        eprintln!("cannot start the runtime: {e}");
        ExitCode::FAILURE
    })
}

/// The flow named `name` in a YAML file (the first one when no name is
/// given), with its name; or what is wrong, naming the file.
/// Runs a long-lived server (`coxswain controller`, `coxswain webhook`) on
/// its own runtime until it returns: exit 0 when it stopped on a signal, 1
/// (with the reason on stderr) when it could not start or had to stop.
fn serve<E: std::fmt::Display>(
    what: &str,
    server: impl std::future::Future<Output = Result<(), E>>,
) -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(server) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("coxswain {what}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn load_flow(
    path: &std::path::Path,
    name: Option<&str>,
) -> Result<(String, coxswain_core::api::FlowSpec), CliError> {
    let text = read::read_text(path, "flow")?;
    let documents =
        coxswain_core::flow::flows_in_yaml(&text).map_err(|source| CliError::NotYaml {
            file: path.to_path_buf(),
            source: Box::new(source),
        })?;
    let document = match name {
        Some(name) => documents.into_iter().find(|d| d.name == name),
        None => documents.into_iter().next(),
    }
    .ok_or_else(|| CliError::NoFlow {
        file: path.to_path_buf(),
        name: name.map(String::from),
    })?;
    // kubectl (YAML 1.1) would read these scalars otherwise, or refuse
    // them: refused here with lint's messages, so the file means one thing.
    let found: Vec<String> = coxswain_core::flow::reads_differently(&text)
        .iter()
        .filter(|r| r.document == document.document)
        .map(ToString::to_string)
        .collect();
    if !found.is_empty() {
        return Err(CliError::ReadsDifferently {
            file: path.to_path_buf(),
            name: document.name,
            found,
        });
    }
    let flow = document.flow.map_err(|source| CliError::BadFlow {
        file: path.to_path_buf(),
        name: document.name.clone(),
        source: Box::new(source),
    })?;
    Ok((document.name, flow.spec))
}

/// Writes each `(name, text)` of `files` as `dir/name`, saying so on
/// stderr; the first that cannot be written fails `coxswain command`.
fn write_files(
    command: &str,
    dir: &std::path::Path,
    files: &[(String, String)],
) -> std::process::ExitCode {
    for (name, text) in files {
        let path = dir.join(name);
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("coxswain {command}: cannot write {}: {e}", path.display());
            return std::process::ExitCode::FAILURE;
        }
        eprintln!("wrote {}", path.display());
    }
    std::process::ExitCode::SUCCESS
}

/// Reads a JSON context file for `eval` and `render`; no file means `{}`.
/// What is wrong is said for `command`, and its exit code returned.
fn read_context(
    command: &str,
    path: Option<&std::path::Path>,
) -> Result<serde_json::Value, std::process::ExitCode> {
    let Some(path) = path else {
        return Ok(serde_json::Value::Object(Default::default()));
    };
    let read = read::read_text(path, "context")
        .map_err(CliError::from)
        .and_then(|text| {
            serde_json::from_str(&text).map_err(|source| CliError::ContextNotJson {
                path: path.to_path_buf(),
                source,
            })
        });
    read.map_err(|message| {
        eprintln!("coxswain {command}: {message}");
        std::process::ExitCode::from(2)
    })
}
