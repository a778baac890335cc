//! `coxswain graph`: a flow as a Mermaid or DOT diagram; with a run's
//! record (`coxswain run --output json`, or `kubectl get run NAME -o json`),
//! each step's status and what moved along each arrow.

use std::path::PathBuf;
use std::process::ExitCode;

use std::collections::BTreeSet;

use serde_json::Value;

use super::CliError;
use coxswain_core::api::{RunPhase, RunStatus, Step};
use coxswain_core::flow::FlowGraph;
use coxswain_core::flow::draw::{Format, draw};

/// Arguments of `coxswain graph`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The YAML file holding the Flow.
    file: PathBuf,
    /// Which Flow in the file (by `metadata.name`); default: the first.
    #[arg(long)]
    flow: Option<String>,
    /// A run's status: the JSON `coxswain run --output json` prints, or a
    /// whole Run object (its `status` is read). `-` reads standard input.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Draw the archived run of this name: its `status` is the status (the
    /// flow still comes from FILE: the archive keeps the Run, not its flow).
    #[arg(long, value_name = "NAME", conflicts_with = "record")]
    archived: Option<String>,
    /// Where `--archived` reads: the local records file and/or a database.
    #[command(flatten)]
    archive: super::runs::Archive,
    /// The archived run's namespace (default: `local` in the records file,
    /// `default` in the database).
    #[arg(long, short = 'n', requires = "archived")]
    namespace: Option<String>,
    /// The diagram language.
    #[arg(long, value_enum, default_value = "mermaid")]
    format: DiagramFormat,
}

/// The diagram language (`--format`), shared with `kubectl coxswain graph`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum DiagramFormat {
    /// Mermaid.
    Mermaid,
    /// Graphviz DOT.
    Dot,
}

/// Prints the diagram; exit 2 when the flow or the status cannot be read.
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

fn diagram(args: &Args) -> Result<String, CliError> {
    let (name, flow) = super::load_flow(&args.file, args.flow.as_deref())?;
    let record = match (&args.record, &args.archived) {
        (Some(path), _) => Some((read_status(path)?, path.clone())),
        (None, Some(run)) => Some(archived_status(args, run, &name, &flow)?),
        (None, None) => None,
    };
    if let Some((record, path)) = &record {
        check_belongs(record, &flow.steps, &name, path)?;
    }
    let record = record.map(|(record, _)| record);
    Ok(drawing(&flow.steps, record.as_ref(), args.format))
}

/// The diagram of `steps`, with what happened on a run when given its
/// record; values moved out of the status are listed at the end (and
/// noted on stderr). `kubectl coxswain graph` draws a live Run with it.
pub(super) fn drawing(steps: &[Step], record: Option<&RunStatus>, format: DiagramFormat) -> String {
    let format = match format {
        DiagramFormat::Mermaid => Format::Mermaid,
        DiagramFormat::Dot => Format::Dot,
    };
    let mut diagram = draw(steps, record, format);
    if let Some(record) = record {
        diagram.push_str(&moved_values(record, format));
        if !record.values.is_empty() {
            eprintln!(
                "note: {} value(s) of this record were moved out of the Run's status into \
                 ConfigMaps; the record holds a preview of each (listed at the end of the diagram)",
                record.values.len()
            );
        }
    }
    diagram
}

/// Comment lines naming each value the controller moved out of the Run's
/// status (`status.values`): where it was, its size and where it is kept.
/// The record holds only a preview of those, so the reader learns what the
/// diagram stands on instead of meeting a preview unawares.
fn moved_values(record: &RunStatus, format: Format) -> String {
    let comment = match format {
        Format::Mermaid => "%%",
        Format::Dot => "//",
    };
    record
        .values
        .iter()
        .map(|v| {
            let line = format!(
                "{comment} moved out of the status: {} ({} bytes, sha256 {}) is in ConfigMap {}",
                v.path,
                v.bytes,
                v.sha256,
                v.config_maps.join(", ")
            );
            // A record is read from a file: keep each note on its line.
            format!("{}\n", line.replace(['\n', '\r'], " "))
        })
        .collect()
}

/// The status of an archived run, named for messages as `archived run
/// NAMESPACE/NAME`. A run of another flow name or digest than the file's is
/// drawn all the same, with a warning: the steps may have changed since.
fn archived_status(
    args: &Args,
    name: &str,
    flow_name: &str,
    flow: &coxswain_core::api::FlowSpec,
) -> Result<(RunStatus, PathBuf), CliError> {
    let archived = super::runs::archived_run(&args.archive, args.namespace.as_deref(), name)
        .map_err(CliError::Archive)?;
    let path = PathBuf::from(format!(
        "archived run {}/{}",
        archived.namespace, archived.name
    ));
    if archived.flow != flow_name {
        eprintln!(
            "warning: {} is a run of flow `{}`, not of `{flow_name}` (the flow drawn, from {})",
            path.display(),
            archived.flow,
            args.file.display()
        );
    }
    let status = status_of(archived.run, path.clone())?;
    let digest = coxswain_core::flow::flow_digest(flow);
    if let Some(ran) = status.flow_digest.as_deref().filter(|d| *d != digest) {
        eprintln!(
            "warning: {} ran a flow of digest {ran}; the flow in {} has {digest}: drawn all the same",
            path.display(),
            args.file.display()
        );
    }
    Ok((status, path))
}

/// A run's status read from `path` (`-`: stdin): what `coxswain run
/// --output json` printed, or a whole Run object. Shared with `coxswain ui`.
pub(super) fn read_status(path: &std::path::Path) -> Result<RunStatus, CliError> {
    let text = if path.as_os_str() == "-" {
        super::read::read_stdin("record")
    } else {
        super::read::read_text(path, "record")
    }?;
    let path = path.to_path_buf();
    let value: Value = match serde_json::from_str(&text) {
        Ok(value) => value,
        Err(source) => return Err(CliError::RecordNotJson { path, source }),
    };
    status_of(value, path)
}

/// A record, or a whole Run object's status, read as a run's status
/// (shared with `coxswain run --from`).
pub(super) fn status_of(value: Value, path: PathBuf) -> Result<RunStatus, CliError> {
    let status = if value.get("kind").and_then(Value::as_str) == Some("Run") {
        match value.get("status") {
            Some(status) => status.clone(),
            None => return Err(CliError::RecordNoStatus { path }),
        }
    } else {
        value
    };
    // `phase` is always written; without it, every field would default
    // and any JSON object (`{}`) would read as a run where nothing ran.
    if status.get("phase").is_none() {
        return Err(CliError::RecordNoPhase { path });
    }
    serde_json::from_value(status).map_err(|source| CliError::RecordShape { path, source })
}

/// Whether a status was made by a run of this flow: every step and arrow
/// it names is the flow's, and a run that succeeded ran some of its steps.
/// Drawing another flow's record would show every step pending, as if
/// nothing had gone wrong.
fn check_belongs(
    record: &RunStatus,
    steps: &[Step],
    flow: &str,
    path: &std::path::Path,
) -> Result<(), CliError> {
    let graph = FlowGraph::new(steps);
    let known: BTreeSet<&str> = graph.nodes.iter().map(|n| n.key).collect();
    let arrow_steps = record.arrows.iter().flat_map(|a| {
        let from = a.from.split_once('.').map_or(a.from.as_str(), |(k, _)| k);
        [from, a.to.as_str()]
    });
    let strangers: BTreeSet<&str> = record
        .steps
        .keys()
        .map(String::as_str)
        .chain(arrow_steps)
        .filter(|k| !known.contains(k))
        .collect();
    if !strangers.is_empty() {
        let names: Vec<String> = strangers.iter().take(5).map(|k| format!("`{k}`")).collect();
        let more = strangers.len().saturating_sub(5);
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        return Err(CliError::RecordStrangeSteps {
            path: path.to_path_buf(),
            flow: flow.to_string(),
            names: format!("{}{more}", names.join(", ")),
        });
    }
    if record.steps.is_empty() && record.phase == RunPhase::Succeeded && !steps.is_empty() {
        return Err(CliError::RecordNothingRan {
            path: path.to_path_buf(),
            flow: flow.to_string(),
        });
    }
    Ok(())
}
