//! `coxswain records`: the stored records of this machine (the SQLite file
//! `coxswain run` saves into and looks up from), listed and deleted by hand;
//! and where that file is.

use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::{Value, json};

use coxswain_core::api::RunStatus;
use coxswain_core::engine::RunInfo;
use coxswain_core::expr::{self, Root};
use coxswain_records::{ArchivedRun, Lookup, MAX_LIMIT, Store};

/// Where the local records database is: `--records`, else
/// `COXSWAIN_RECORDS`, else the user's data folder.
#[derive(clap::Args, Debug, Clone)]
pub struct Place {
    /// The records database (SQLite) saves go to, lookups read and finished
    /// runs are archived in (default: `$XDG_DATA_HOME/coxswain/records.sqlite3`,
    /// or `~/.local/share/coxswain/records.sqlite3`).
    #[arg(
        long = "records",
        env = "COXSWAIN_RECORDS",
        value_name = "PATH",
        global = true
    )]
    pub path: Option<PathBuf>,
}

impl Place {
    /// The file, or why none can be named (no `HOME` and no setting).
    pub fn path(&self) -> Result<PathBuf, String> {
        if let Some(path) = &self.path {
            return Ok(path.clone());
        }
        let data = match std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
            Some(dir) => PathBuf::from(dir),
            None => match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
                Some(home) => PathBuf::from(home).join(".local/share"),
                None => {
                    return Err("no place for the records database: set --records PATH, COXSWAIN_RECORDS, XDG_DATA_HOME or HOME".into());
                }
            },
        };
        Ok(data.join("coxswain/records.sqlite3"))
    }

    /// Opens (making it when missing) the database.
    pub async fn open(&self) -> Result<Store, String> {
        let path = self.path()?;
        Store::open_sqlite(&path).await.map_err(|e| e.to_string())
    }
}

/// Options of `coxswain records`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    place: Place,
    /// Whose records: locally every run saves into `local`.
    #[arg(long, short = 'n', global = true, default_value = "local")]
    namespace: String,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// List the records of a collection, newest first unless `--order-by` says otherwise.
    List {
        /// The collection.
        collection: String,
        /// Keep the records this condition holds for (`$record.value.priority >= 2`).
        #[arg(long = "where", value_name = "EXPR")]
        where_: Option<String>,
        /// Sort by this path under `$record` (default: `$record.savedAt`, newest first).
        #[arg(long, value_name = "REF")]
        order_by: Option<String>,
        /// With `--order-by`: largest first.
        #[arg(long)]
        descending: bool,
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// `text` (a table) or `json` (the records as lookups hand them over).
        #[arg(long, short, value_enum, default_value = "text")]
        output: Output,
    },
    /// Delete one record.
    Delete {
        /// The collection.
        collection: String,
        /// The record's key.
        key: String,
    },
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Output {
    Text,
    Json,
}

/// Exit 0 when done, 1 when the record to delete is not there or the
/// database failed, 2 when the command is wrong.
pub fn run(args: Args) -> ExitCode {
    let runtime = match super::runtime(tokio::runtime::Builder::new_current_thread()) {
        Ok(r) => r,
        Err(code) => return code,
    };
    runtime.block_on(async move {
        let store = match args.place.open().await {
            Ok(store) => store,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        };
        match args.command {
            Command::List {
                collection,
                where_,
                order_by,
                descending,
                limit,
                output,
            } => {
                let order = Order {
                    by: order_by,
                    descending,
                };
                list(
                    &store,
                    &args.namespace,
                    &collection,
                    where_.as_deref(),
                    order,
                    limit,
                    output,
                )
                .await
            }
            Command::Delete { collection, key } => {
                match store.delete(&args.namespace, &collection, &key).await {
                    Ok(true) => {
                        eprintln!("deleted `{key}` from `{collection}`");
                        ExitCode::SUCCESS
                    }
                    Ok(false) => {
                        eprintln!(
                            "no record `{key}` in `{collection}` (namespace {})",
                            args.namespace
                        );
                        ExitCode::FAILURE
                    }
                    Err(e) => {
                        eprintln!("{e}");
                        ExitCode::FAILURE
                    }
                }
            }
        }
    })
}

struct Order {
    by: Option<String>,
    descending: bool,
}

async fn list(
    store: &Store,
    namespace: &str,
    collection: &str,
    condition: Option<&str>,
    order: Order,
    limit: usize,
    output: Output,
) -> ExitCode {
    let parsed = |what: &str, text: &str| match expr::parse(text) {
        Ok(e) if e.references().all(|r| *r.root() == Root::Record) => Ok(e),
        Ok(_) => Err(format!(
            "--{what}: only `$record` can be read here (there is no run)"
        )),
        Err(e) => Err(format!("--{what}: character {}: {}", e.position, e.message)),
    };
    let condition = match condition.map(|c| parsed("where", c)).transpose() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let (by, descending) = match &order.by {
        Some(by) => (by.as_str(), order.descending),
        None => ("$record.savedAt", true),
    };
    let order_expr = match parsed("order-by", by) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let Some(order_by) = order_expr.as_reference() else {
        eprintln!("--order-by: give one reference under `$record`, as in `$record.value.priority`");
        return ExitCode::from(2);
    };
    if !(1..=MAX_LIMIT).contains(&limit) {
        eprintln!("--limit: between 1 and {MAX_LIMIT}");
        return ExitCode::from(2);
    }
    let nothing = Value::Null;
    let query = Lookup {
        namespace,
        collection,
        condition: condition.as_ref(),
        scope: &nothing,
        order_by: Some(order_by),
        descending,
        limit,
    };
    let records = match store.lookup(&query).await {
        Ok(records) => records,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    match output {
        Output::Json => {
            let all: Vec<Value> = records.iter().map(|r| r.to_json()).collect();
            println!("{}", serde_json::to_string_pretty(&all).unwrap_or_default());
        }
        Output::Text => {
            println!(
                "{:<24} {:>7} {:<27} {:<24} VALUE",
                "KEY", "VERSION", "SAVED", "RUN/STEP"
            );
            for r in &records {
                let value = r.value.to_string();
                let value = if value.chars().count() > 60 {
                    format!("{}…", value.chars().take(59).collect::<String>())
                } else {
                    value
                };
                println!(
                    "{:<24} {:>7} {:<27} {:<24} {value}",
                    r.key,
                    r.version,
                    r.saved_at,
                    format!("{}/{}", r.run, r.step)
                );
            }
            if records.is_empty() {
                eprintln!("no records in `{collection}` (namespace {namespace})");
            }
        }
    }
    ExitCode::SUCCESS
}

/// A local run as the archive keeps it: the Run it would have been (flow,
/// input, record), so `coxswain runs` shows local and cluster runs alike.
pub fn local_archive(flow: &str, run: &RunInfo, input: &Value, state: &RunStatus) -> ArchivedRun {
    let created = state.started_at.clone().unwrap_or_default();
    ArchivedRun {
        namespace: run.namespace.clone(),
        name: run.name.clone(),
        uid: run.uid.clone(),
        flow: flow.to_string(),
        phase: format!("{:?}", state.phase),
        created,
        finished: state.finished_at.clone(),
        flow_digest: state.flow_digest.clone(),
        run: json!({
            "apiVersion": "coxswain.dev/v1alpha1",
            "kind": "Run",
            "metadata": {"name": run.name, "namespace": run.namespace, "uid": run.uid},
            "spec": {"flowRef": {"name": flow}, "input": input},
            "status": state,
        }),
        offloaded: json!({}),
    }
}
