//! `coxswain lint`: the admission webhook's verdict, in a GitOps repository's CI.

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
};

use serde::Serialize;

use super::CliError;
use coxswain_core::{
    api::StepProblem,
    flow::{self, LintProblem},
};

/// Options of `coxswain lint`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Output format: one line per problem, or a JSON array for machines.
    #[arg(long, value_enum, default_value = "text")]
    output: Output,
    /// YAML files, or directories searched for `*.yaml` and `*.yml`
    /// (hidden entries skipped). Under a directory, symbolic links to
    /// directories are not followed; links to files are read. Only regular
    /// files are read (a FIFO or device is reported, never opened), each up
    /// to 16 MiB.
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Output {
    Text,
    Json,
}

/// One problem with where it was found, as `--output json` prints it
/// (with `line` and `column` when the problem stands somewhere in the file).
#[derive(Serialize, Debug)]
struct Finding {
    file: String,
    flow: String,
    #[serde(flatten)]
    problem: LintProblem,
    /// A warning: said, but the flow is not refused for it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    warning: bool,
}

impl Finding {
    /// `FILE: flow NAME: line L, column C: step KEY: FIELD: MESSAGE`, with
    /// `warning: ` before the place of a warning.
    fn line(&self) -> String {
        let warning = if self.warning { "warning: " } else { "" };
        format!(
            "{}: flow {}: {warning}{}",
            self.file, self.flow, self.problem
        )
    }
}

/// Exit 0 when every flow is valid, 1 when any problem was found.
pub fn run(args: Args) -> ExitCode {
    let mut files = Vec::new();
    let mut findings = Vec::new();
    for path in &args.paths {
        if let Err(e) = collect_files(path, &mut files) {
            findings.push(Finding {
                file: path.display().to_string(),
                flow: "?".into(),
                problem: flow_problem(e.to_string()),
                warning: false,
            });
        }
    }
    let mut flows = 0;
    for file in &files {
        flows += lint_file(file, &mut findings);
    }
    match args.output {
        Output::Text => findings.iter().for_each(|f| println!("{}", f.line())),
        Output::Json => match serde_json::to_string_pretty(&findings) {
            Ok(json) => println!("{json}"),
            Err(e) => eprintln!("coxswain lint: {e}"),
        },
    }
    let warnings = findings.iter().filter(|f| f.warning).count();
    let problems = findings.len() - warnings;
    let warned = match warnings {
        0 => String::new(),
        n => format!(", {n} warning{}", plural(n)),
    };
    eprintln!(
        "checked {flows} flow{} in {} file{}: {problems} problem{}{warned}",
        plural(flows),
        files.len(),
        plural(files.len()),
        plural(problems)
    );
    if problems == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Lints one file, returning how many flows it held.
fn lint_file(file: &Path, findings: &mut Vec<Finding>) -> usize {
    let name = file.display().to_string();
    let text = match super::read::read_regular_text(file, "flow") {
        Ok(text) => text,
        Err(e) => {
            findings.push(Finding {
                file: name,
                flow: "?".into(),
                problem: flow_problem(e.to_string()),
                warning: false,
            });
            return 0;
        }
    };
    let flows = match flow::lint_yaml(&text) {
        Ok(flows) => flows,
        Err(e) => {
            findings.push(Finding {
                file: name,
                flow: "?".into(),
                problem: flow_problem(format!("not YAML: {e}")),
                warning: false,
            });
            return 0;
        }
    };
    for linted in &flows {
        let warnings = linted.warnings.iter().map(|w| (w, true));
        let mut found: Vec<(&LintProblem, bool)> = linted
            .problems
            .iter()
            .map(|p| (p, false))
            .chain(warnings)
            .collect();
        found.sort_by_key(|(p, _)| (p.line, p.column));
        findings.extend(found.into_iter().map(|(problem, warning)| Finding {
            file: name.clone(),
            flow: linted.name.clone(),
            problem: problem.clone(),
            warning,
        }));
    }
    flows.len()
}

/// A problem of a whole file, which stands nowhere in particular.
fn flow_problem(message: String) -> LintProblem {
    LintProblem {
        problem: StepProblem {
            message,
            ..Default::default()
        },
        line: None,
        column: None,
        exact: false,
    }
}

/// Files named on the command line, and YAML files under named directories,
/// sorted. A path named on the command line is followed wherever it points.
fn collect_files(path: &Path, files: &mut Vec<PathBuf>) -> Result<(), CliError> {
    let meta = std::fs::metadata(path).map_err(|source| CliError::Walk {
        act: "read",
        path: path.to_path_buf(),
        source,
    })?;
    if meta.is_dir() {
        walk(path, files)
    } else {
        files.push(path.to_path_buf());
        Ok(())
    }
}

/// The `*.yaml` and `*.yml` files under `dir`, skipping hidden entries.
/// A symbolic link to a directory is not followed: two links to `..` would
/// make the walk exponential, and a pull request can add them. A link to a
/// file is read like the file.
fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), CliError> {
    let mut entries: Vec<(PathBuf, std::fs::FileType)> = std::fs::read_dir(dir)
        .map_err(|source| CliError::Walk {
            act: "list",
            path: dir.to_path_buf(),
            source,
        })?
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| Some((entry.path(), entry.file_type().ok()?)))
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (entry, file_type) in entries {
        let hidden = entry
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if hidden {
            continue;
        }
        if file_type.is_dir() {
            walk(&entry, files)?;
        } else if file_type.is_symlink() && entry.is_dir() {
            continue;
        } else if entry.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            files.push(entry);
        }
    }
    Ok(())
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
