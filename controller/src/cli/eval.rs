//! `coxswain eval`: one expression, one answer — for trying conditions and
//! for scripts that want the exact semantics the engine uses.

use std::{path::PathBuf, process::ExitCode};

use coxswain_core::expr;

/// Options of `coxswain eval`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A JSON file with the run data: `{"input", "steps": {KEY: {"status",
    /// "output", "text", "error"}}, "previous", "loop", "item", "run"}`.
    #[arg(long, value_name = "FILE")]
    context: Option<PathBuf>,
    /// The expression, such as `$steps.review.output.score >= 0.8`. It may
    /// start with `-` (`-1 < 0`): it is never read as an option.
    #[arg(allow_hyphen_values = true)]
    expression: String,
}

/// Exit 0 with the value as JSON; 1 when the data cannot answer it
/// (`workflow.expression_error`); 2 when it would be refused at save.
pub fn run(args: Args) -> ExitCode {
    let context = match super::read_context("eval", args.context.as_deref()) {
        Ok(context) => context,
        Err(code) => return code,
    };
    let parsed = match expr::parse(&args.expression) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("character {}: {}", e.position, e.message);
            return ExitCode::from(2);
        }
    };
    match parsed.eval(&context) {
        Ok(value) => {
            println!("{value}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{}: {e}", e.code());
            ExitCode::FAILURE
        }
    }
}
