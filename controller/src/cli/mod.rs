//! The `coxswain` command line: one binary, one subcommand per job.

mod crd;
mod decide;
mod eval;
mod graph;
mod lint;
mod read;
mod render;
mod run;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
    /// Check flows in YAML files or directories, as the admission webhook would.
    Lint(lint::Args),
    /// Evaluate one expression against a JSON context.
    Eval(eval::Args),
    /// Render one placeholder template against a JSON context.
    Render(render::Args),
    /// Write the CustomResourceDefinitions generated from the Rust types.
    Crd(crd::Args),
    /// Draw a flow (Mermaid or DOT), with what happened on a run when given its record.
    Graph(graph::Args),
}

/// Parses the command line and runs the chosen subcommand.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => run::run(args),
        Command::Lint(args) => lint::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Render(args) => render::run(args),
        Command::Crd(args) => crd::run(args),
        Command::Graph(args) => graph::run(args),
    }
}

/// The flow named `name` in a YAML file (the first one when no name is
/// given), with its name; or what is wrong, naming the file.
fn load_flow(
    path: &std::path::Path,
    name: Option<&str>,
) -> Result<(String, crate::api::FlowSpec), String> {
    let file = path.display();
    let text = read::read_text(path, "flow").map_err(|e| e.to_string())?;
    let documents =
        crate::flow::flows_in_yaml(&text).map_err(|e| format!("{file}: not YAML: {e}"))?;
    let document = match name {
        Some(name) => documents.into_iter().find(|d| d.name == name),
        None => documents.into_iter().next(),
    }
    .ok_or_else(|| {
        let named = name.map(|n| format!(" named {n}")).unwrap_or_default();
        format!("{file}: no Flow{named} in it")
    })?;
    let flow = document
        .flow
        .map_err(|e| format!("{file}: flow {}: {e}", document.name))?;
    Ok((document.name, flow.spec))
}

/// Reads a JSON context file for `eval` and `render`; no file means `{}`.
fn read_context(path: Option<&std::path::Path>) -> Result<serde_json::Value, String> {
    let Some(path) = path else {
        return Ok(serde_json::Value::Object(Default::default()));
    };
    let text = read::read_text(path, "context").map_err(|e| e.to_string())?;
    serde_json::from_str(&text).map_err(|e| format!("context {} is not JSON: {e}", path.display()))
}
