//! `coxswain run`: run a flow on this machine, no cluster needed.

use std::{path::PathBuf, process::ExitCode, sync::Arc};

use serde_json::Value;

use super::CliError;
use crate::local::{CommandLineApprover, Progress, run_flow};
use coxswain_core::api::RunPhase;
use coxswain_core::engine::CompiledFlow;
use coxswain_core::flow::check_input;
use coxswain_steps::agent::{Mode, Provider};
use coxswain_steps::local::{AgentFlags, LocalConfig, LocalExecutors};

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
    /// stdout is exactly the final record, as a Run's status holds it.
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
        Ok((spec, input)) => execute(&args, &spec, input),
        Err(message) => {
            eprintln!("{message}");
            ExitCode::from(2)
        }
    }
}

fn prepare(args: &Args) -> Result<(coxswain_core::api::FlowSpec, Value), CliError> {
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
    Ok((flow, input))
}

fn execute(args: &Args, spec: &coxswain_core::api::FlowSpec, input: Value) -> ExitCode {
    let file = args.file.display();
    let flow = match CompiledFlow::new(spec.clone()) {
        Ok(flow) => flow,
        Err(problems) => {
            for p in problems {
                eprintln!("{file}: {p}");
            }
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
        Ok(e) if args.quiet || args.no_script_logs => Arc::new(e),
        Ok(e) => Arc::new(e.with_script_echo(progress.script_lines())),
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let cancel = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let state = runtime.block_on(run_flow(
        &flow,
        input,
        executors,
        &mut approver,
        &mut progress,
        cancel,
    ));
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
