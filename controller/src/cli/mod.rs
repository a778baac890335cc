//! The `coxswain` command line: one binary, one subcommand per job.

use std::process::ExitCode;

/// Parses the command line and runs the chosen subcommand.
pub fn main() -> ExitCode {
    ExitCode::SUCCESS
}
