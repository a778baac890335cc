//! `coxswain run`: run a flow on this machine, no cluster needed.

use std::{path::PathBuf, process::ExitCode, sync::Arc};

use serde_json::Value;

use super::CliError;
use crate::local::{CommandLineApprover, LocalWorkspace, Progress, Start, local_run, run_flow};
use coxswain_core::api::{CopiedFrom, RunPhase, RunStatus};
use coxswain_core::engine::{CompiledFlow, rerun_from};
use coxswain_core::flow::{Limits, RunsOn, check_input, workspace_warnings};
use coxswain_steps::agent::{Mode, Provider};
use coxswain_steps::local::{AgentFlags, LocalConfig, LocalExecutors};
use coxswain_steps::records::Records;

/// Options of `coxswain run`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The flow file (the first Flow in it, or the one named by `--flow`).
    file: PathBuf,
    /// Which Flow of the file to run, by `metadata.name`.
    #[arg(long)]
    flow: Option<String>,
    /// The run input: JSON, or `@FILE` to read it from a file.
    #[arg(long, default_value = "{}")]
    input: String,
    /// An approval's answer: `STEP=DECISION[:FEEDBACK]`, `STEP=JSON` for
    /// an entry, or `STEP=DECISION:JSON[ FEEDBACK]` for mode both. Repeat
    /// it; answers for one step are used in order.
    #[arg(long = "decide", value_name = "STEP=ANSWER")]
    decide: Vec<String>,
    /// `text`: progress on stderr, the run's output on stdout. `json`:
    /// stdout is exactly the run's final status, as a Run holds it.
    #[arg(long, value_enum, default_value = "text")]
    output: Output,
    /// The OpenAI-compatible endpoint for agent steps (else
    /// `COXSWAIN_AGENT_BASE_URL` or `OPENAI_BASE_URL`).
    #[arg(long, value_name = "URL")]
    agent_url: Option<String>,
    /// The model id that `model: default` stands for (else `COXSWAIN_AGENT_MODEL`).
    #[arg(long, value_name = "ID")]
    agent_model: Option<String>,
    /// The kind of server (openai, vllm, ollama, llama.cpp,
    /// llama-cpp-python); it picks how a reply's fields are asked for
    /// (else `COXSWAIN_AGENT_PROVIDER`; default: forced tool calls).
    #[arg(long, value_name = "NAME", value_parser = parse_provider)]
    agent_provider: Option<Provider>,
    /// How a reply's fields are asked for: tools, json_schema, json_object
    /// or text (else `COXSWAIN_AGENT_MODE`; wins over the provider's).
    #[arg(long, value_name = "MODE", value_parser = parse_mode)]
    agent_mode: Option<Mode>,
    /// Print no progress (and no script lines).
    #[arg(long, short)]
    quiet: bool,
    /// Do not show the lines scripts write to stderr under their step
    /// (their records keep the last lines all the same).
    #[arg(long)]
    no_script_logs: bool,
    /// Keep the run's workspace (the checkouts, and the files steps left in
    /// `$OUTPUTS`) after the run instead of removing it, and print where.
    #[arg(long)]
    keep_workspace: bool,
    /// Use the checkouts already in DIR (one folder per repo) as the run's
    /// workspace: nothing is cloned, no branch made, nothing pushed.
    #[arg(long, value_name = "DIR", conflicts_with = "keep_workspace")]
    workspace: Option<PathBuf>,
    /// Where saves go, lookups read and the finished run is archived.
    #[command(flatten)]
    records: super::records::Place,
    /// Rerun an ended run from `--step`: REC is its status (what
    /// `--output json` printed, or a whole Run object). Its steps that do not
    /// follow KEY keep their records and do not run again; FILE must hold
    /// the flow it ran (same digest). Give the run's `--input` again.
    #[arg(long, value_name = "REC.json", requires = "step")]
    from: Option<PathBuf>,
    /// The step a rerun (`--from`) starts again at, with what follows it.
    #[arg(long, value_name = "KEY", requires = "from")]
    step: Option<String>,
}

fn parse_provider(s: &str) -> Result<Provider, String> {
    Provider::parse(s).ok_or_else(|| format!("expected {}", Provider::NAMES))
}

fn parse_mode(s: &str) -> Result<Mode, String> {
    Mode::parse(s).ok_or_else(|| format!("expected {}", Mode::NAMES))
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Output {
    Text,
    Json,
}

/// Exit 0 when the run succeeded, 1 when it failed or was cancelled, 2 when
/// the flow, the input or a `--decide` answer is invalid (nothing ran).
pub fn run(args: Args) -> ExitCode {
    match prepare(&args) {
        Ok((name, spec, input)) => execute(&args, &name, &spec, input),
        Err(message) => {
            eprintln!("{message}");
            ExitCode::from(2)
        }
    }
}

fn prepare(args: &Args) -> Result<(String, coxswain_core::api::FlowSpec, Value), CliError> {
    let (name, flow) = super::load_flow(&args.file, args.flow.as_deref())?;
    let raw = match args.input.strip_prefix('@') {
        Some(path) => super::read::read_text(path.as_ref(), "input")?,
        None => args.input.clone(),
    };
    let input: Value = serde_json::from_str(&raw).map_err(CliError::InputNotJson)?;
    if let Some(schema) = &flow.input {
        let problems = check_input(schema, &input);
        if !problems.is_empty() {
            return Err(CliError::InputDoesNotFit {
                flow: name,
                problems,
            });
        }
    }
    super::decide::check_answers(&flow.steps, &args.decide)?;
    Ok((name, flow, input))
}

fn execute(args: &Args, name: &str, spec: &coxswain_core::api::FlowSpec, input: Value) -> ExitCode {
    let file = args.file.display();
    let limits = Limits {
        runs_on: RunsOn::Local,
        ..Limits::default()
    };
    let flow = match CompiledFlow::new_with(spec.clone(), &limits) {
        Ok(flow) => flow,
        Err(problems) => {
            for p in problems {
                eprintln!("{file}: {p}");
            }
            return ExitCode::from(2);
        }
    };
    let seed = match rerun_seed(args, &flow) {
        Ok(seed) => seed,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    let mut approver = match CommandLineApprover::new(&args.decide) {
        Ok(a) => a,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    let flags = AgentFlags {
        url: args.agent_url.clone(),
        model: args.agent_model.clone(),
        provider: args.agent_provider,
        mode: args.agent_mode,
    };
    let mut progress = Progress::new(args.quiet);
    let executors = match LocalConfig::from_env(flags).and_then(LocalExecutors::new) {
        Ok(e) if args.quiet || args.no_script_logs => e,
        Ok(e) => e.with_script_echo(progress.script_lines()),
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    for warning in workspace_warnings(spec) {
        eprintln!("warning: {}", warning.problem);
    }
    if args.workspace.is_some() && spec.workspace.is_none() {
        eprintln!(
            "warning: --workspace is ignored: the flow declares no workspace (`spec.workspace`)"
        );
    }
    let runtime = match super::runtime(tokio::runtime::Builder::new_multi_thread()) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let cancel = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    // A flow that saves or looks up needs the database; any other run is
    // archived there when it can be, and runs all the same when not.
    let store = match runtime.block_on(args.records.open()) {
        Ok(store) => Some(store),
        Err(e) if uses_records(spec) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
        Err(e) => {
            if !args.quiet {
                eprintln!("warning: the run will not be archived: {e}");
            }
            None
        }
    };
    let records = store.clone().map(Records::new).unwrap_or_default();
    let run = local_run();
    let workspace = spec.workspace.as_ref().map(|workspace| {
        let given = args.workspace.as_deref();
        LocalWorkspace::new(workspace, &run, given, args.keep_workspace)
    });
    let mut executors = executors.with_records(records.clone());
    if let Some(workspace) = &workspace {
        executors = executors.with_workspace(workspace.shared());
    }
    let start = Start {
        run,
        workspace,
        records,
        seed,
    };
    let run_info = start.run.clone();
    let archived_input = input.clone();
    let state = runtime.block_on(run_flow(
        &flow,
        input,
        start,
        Arc::new(executors),
        &mut approver,
        &mut progress,
        cancel,
    ));
    // The engine's hand-off of the ended run: here, kept in the database
    // (a local run has no retention to wait out).
    let handed = coxswain_core::engine::hand_off(spec, &state);
    if let (Some(store), Some(_)) = (&store, handed) {
        let archived = super::records::local_archive(name, &run_info, &archived_input, &state);
        if let Err(e) = runtime.block_on(store.archive(&archived)) {
            eprintln!("warning: the run could not be archived: {e}");
        }
    }
    warn_unused(&approver);
    // Text mode prints the output of a run that succeeded, and nothing
    // otherwise: a failed run's `null` would read like a result.
    let printed = match (args.output, state.phase) {
        (Output::Json, _) => Some(serde_json::to_string(&state)),
        (Output::Text, RunPhase::Succeeded) => Some(serde_json::to_string_pretty(
            state.result().unwrap_or(&Value::Null),
        )),
        (Output::Text, _) => None,
    };
    match printed {
        Some(Ok(text)) => println!("{text}"),
        Some(Err(e)) => eprintln!("cannot print the record: {e}"),
        None => {}
    }
    if state.phase == RunPhase::Succeeded {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Answers given with `--decide` that no step asked for by the end of the
/// run: not an error (a run may end before a step is reached), but said,
/// since a typo would otherwise pass unnoticed.
fn warn_unused(approver: &CommandLineApprover) {
    for (step, answer) in approver.unused() {
        eprintln!("warning: --decide {step}={answer} was never used: no step asked for it");
    }
}

/// Whether a step of the flow (or a parallel part) saves or looks up.
/// For `--from REC --step KEY`: the rerun's starting record, seeded from
/// the old record (which must be an ended run of this very flow).
fn rerun_seed(args: &Args, flow: &CompiledFlow) -> Result<Option<RunStatus>, CliError> {
    let (Some(path), Some(step)) = (&args.from, &args.step) else {
        return Ok(None);
    };
    let text = super::read::read_text(path, "record")?;
    let value: Value = serde_json::from_str(&text).map_err(|source| CliError::RecordNotJson {
        path: path.clone(),
        source,
    })?;
    let old = old_status(value, path)?;
    let from = CopiedFrom {
        run: path.display().to_string(),
        uid: String::new(),
    };
    rerun_from(flow.get(), &old, step, from)
        .map(Some)
        .map_err(|source| CliError::Rerun {
            path: path.clone(),
            step: step.clone(),
            source,
        })
}

/// A record, or a whole Run object's status, read as the old run's status.
fn old_status(value: Value, path: &std::path::Path) -> Result<RunStatus, CliError> {
    super::graph::status_of(value, path.to_path_buf())
}

fn uses_records(spec: &coxswain_core::api::FlowSpec) -> bool {
    fn step(s: &coxswain_core::api::Step) -> bool {
        s.save.is_some()
            || !s.lookup.is_empty()
            || s.parallel.as_ref().is_some_and(|p| step(&p.step))
            || s.loop_.as_ref().is_some_and(|l| l.steps.iter().any(step))
    }
    spec.steps.iter().any(step)
}
