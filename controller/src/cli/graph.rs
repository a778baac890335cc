//! `coxswain graph`: a flow as a Mermaid or DOT diagram; with a run's
//! record (`coxswain run --output json`, or `kubectl get run NAME -o json`),
//! each step's status and what moved along each arrow.

use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::Value;

use crate::api::RunStatus;
use crate::flow::draw::{Format, draw};

/// Arguments of `coxswain graph`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The YAML file holding the Flow.
    file: PathBuf,
    /// Which Flow in the file (by `metadata.name`); default: the first.
    #[arg(long)]
    flow: Option<String>,
    /// A run's record: the JSON `coxswain run --output json` prints, or a
    /// whole Run object (its `status` is read). `-` reads standard input.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// The diagram language.
    #[arg(long, value_enum, default_value = "mermaid")]
    format: DiagramFormat,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum DiagramFormat {
    Mermaid,
    Dot,
}

/// Prints the diagram; exit 2 when the flow or the record cannot be read.
pub fn run(args: Args) -> ExitCode {
    match diagram(&args) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("{message}");
            ExitCode::from(2)
        }
    }
}

fn diagram(args: &Args) -> Result<String, String> {
    let (_, flow) = super::load_flow(&args.file, args.flow.as_deref())?;
    let record = args.record.as_deref().map(read_record).transpose()?;
    let format = match args.format {
        DiagramFormat::Mermaid => Format::Mermaid,
        DiagramFormat::Dot => Format::Dot,
    };
    Ok(draw(&flow.steps, record.as_ref(), format))
}

fn read_record(path: &std::path::Path) -> Result<RunStatus, String> {
    let shown = path.display();
    let text = if path.as_os_str() == "-" {
        super::read::read_stdin("record")
    } else {
        super::read::read_text(path, "record")
    }
    .map_err(|e| e.to_string())?;
    let value: Value =
        serde_json::from_str(&text).map_err(|e| format!("record {shown} is not JSON: {e}"))?;
    let status = match value.get("status") {
        Some(status) if value.get("kind").and_then(Value::as_str) == Some("Run") => status.clone(),
        _ => value,
    };
    serde_json::from_value(status).map_err(|e| format!("record {shown} is not a run's record: {e}"))
}
