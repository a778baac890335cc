//! `coxswain runs`: the Runs of a cluster and of the archive, together.
//!
//! Three sources, each read when it is there:
//! - the local records file `coxswain run` archives into (`--records`,
//!   `COXSWAIN_RECORDS`, else the user's data folder; not made when missing);
//! - the PostgreSQL archive a cluster's controller writes (`--database`,
//!   `COXSWAIN_RECORDS_DATABASE`);
//! - the cluster's live Runs, through the kubeconfig (or in-cluster
//!   settings). Without one the cluster is skipped with a note, unless
//!   `--cluster` (or `--context`, `--kubeconfig`) asks for it.
//!
//! A Run both live and archived (ended, not yet deleted by retention) is
//! shown once, by uid, the live object winning.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use jiff::Timestamp;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde::Serialize;
use serde_json::Value;

use coxswain_core::api::{Run, RunPhase};
use coxswain_records::{ArchivedRun, MAX_LIMIT, PgSettings, RunQuery, Store};

/// Where archived Runs are read (shared with `coxswain graph --archived`).
#[derive(clap::Args, Debug, Clone)]
pub struct Archive {
    /// The local records file `coxswain run` archives into.
    #[command(flatten)]
    pub place: super::records::Place,
    /// The PostgreSQL database a cluster's controller archives Runs into
    /// (its `--records-database`). Without `--records`, the local file is
    /// then not read.
    #[arg(
        long = "database",
        env = "COXSWAIN_RECORDS_DATABASE",
        value_name = "URL",
        global = true,
        hide_env_values = true
    )]
    pub database: Option<String>,
}

/// Which archive a store is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ArchiveKind {
    /// The local SQLite file: its runs are in namespace `local`.
    Local,
    /// A cluster's PostgreSQL archive.
    Database,
}

/// One opened archive.
struct Opened {
    kind: ArchiveKind,
    store: Store,
    /// Where it is, for messages.
    label: String,
}

impl Archive {
    /// The archives to read: the database when one is named; the local file
    /// when named, or when no database is and the default file exists. A
    /// local file is never made here: a missing one is an empty archive,
    /// noted on stderr when it was named.
    async fn open(&self) -> Result<Vec<Opened>, String> {
        let mut opened = Vec::new();
        let database = self.database.as_deref().filter(|d| !d.trim().is_empty());
        if let Some(url) = database {
            let settings = PgSettings {
                max_connections: 2,
                ..PgSettings::default()
            };
            let store = Store::connect_postgres(url, settings)
                .await
                .map_err(|e| format!("--database: {e}"))?;
            opened.push(Opened {
                kind: ArchiveKind::Database,
                store,
                label: "the database".into(),
            });
        }
        let named = self.place.path.is_some();
        if named || database.is_none() {
            let path = self.place.path()?;
            if path.exists() {
                let store = Store::open_sqlite(&path).await.map_err(|e| e.to_string())?;
                opened.push(Opened {
                    kind: ArchiveKind::Local,
                    store,
                    label: path.display().to_string(),
                });
            } else if named {
                eprintln!("note: there is no records file at {}", path.display());
            }
        }
        Ok(opened)
    }
}

/// The archived Run of this name (`namespace`, else `local` in the local
/// file and `default` in the database), the one that ended last when
/// several archives hold it; or why there is none. For `coxswain graph`.
pub fn archived_run(
    archive: &Archive,
    namespace: Option<&str>,
    name: &str,
) -> Result<ArchivedRun, String> {
    let runtime = runtime()?;
    runtime.block_on(async {
        let opened = archive.open().await?;
        if opened.is_empty() {
            return Err(format!(
                "no archive to read run `{name}` from: no records file at {} and no --database",
                archive.place.path().unwrap_or_default().display()
            ));
        }
        let default = |kind| namespace_for(namespace, kind, "default");
        match find_archived(&opened, &default, name).await? {
            Some(found) => Ok(found),
            None => Err(format!(
                "no archived run `{name}` in {}",
                searched(&opened, &default)
            )),
        }
    })
}

/// Options of `coxswain runs`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    archive: Archive,
    #[command(flatten)]
    cluster: ClusterArgs,
    /// The namespace (default: the kubeconfig's, `default` without one;
    /// in the local records file, `local`).
    #[arg(long, short = 'n', global = true)]
    namespace: Option<String>,
}

/// How the cluster is reached.
#[derive(clap::Args, Debug, Clone)]
struct ClusterArgs {
    /// Read the cluster's live Runs, and fail when it cannot be reached
    /// (default: read them when a kubeconfig or in-cluster settings are
    /// found, and go on without them, with a note, when not).
    #[arg(long, global = true, conflicts_with = "no_cluster")]
    cluster: bool,
    /// Read only the archive.
    #[arg(long, global = true)]
    no_cluster: bool,
    /// The kubeconfig context to use (implies `--cluster`).
    #[arg(
        long,
        global = true,
        value_name = "NAME",
        conflicts_with = "no_cluster"
    )]
    context: Option<String>,
    /// The kubeconfig file (default: `KUBECONFIG`, else `~/.kube/config`;
    /// implies `--cluster`).
    #[arg(
        long,
        global = true,
        value_name = "PATH",
        conflicts_with = "no_cluster"
    )]
    kubeconfig: Option<PathBuf>,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// List runs, newest first: those still running, then by when they ended.
    List {
        /// Only runs of this Flow.
        #[arg(long)]
        flow: Option<String>,
        /// Only runs in this phase (Pending, Running, Waiting, Succeeded,
        /// Failed, Cancelled).
        #[arg(long, value_parser = parse_phase)]
        phase: Option<String>,
        /// Only runs that ended (or, still going, started) at or after this
        /// time: RFC 3339 (`2026-05-01T09:30:00Z`) or a duration back from
        /// now (`90m`, `1h`, `2d`).
        #[arg(long, value_name = "TIME", value_parser = parse_since)]
        since: Option<Timestamp>,
        /// Every namespace.
        #[arg(long, short = 'A', conflicts_with = "namespace")]
        all_namespaces: bool,
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// `text` (a table) or `json`.
        #[arg(long, short, value_enum, default_value = "text")]
        output: ListOutput,
    },
    /// Print one Run object: the live one, else the archived one.
    Get {
        /// The Run's name.
        name: String,
        /// `json` or `yaml`.
        #[arg(long, short, value_enum, default_value = "json")]
        output: GetOutput,
    },
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum ListOutput {
    Text,
    Json,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum GetOutput {
    Json,
    Yaml,
}

const PHASES: [RunPhase; 6] = [
    RunPhase::Pending,
    RunPhase::Running,
    RunPhase::Waiting,
    RunPhase::Succeeded,
    RunPhase::Failed,
    RunPhase::Cancelled,
];

/// A phase by its name, in any case, written back as Runs write it.
fn parse_phase(text: &str) -> Result<String, String> {
    PHASES
        .iter()
        .map(|p| format!("{p:?}"))
        .find(|p| p.eq_ignore_ascii_case(text.trim()))
        .ok_or_else(|| {
            let names: Vec<String> = PHASES.iter().map(|p| format!("{p:?}")).collect();
            format!("one of {}", names.join(", "))
        })
}

/// An RFC 3339 time, or a duration back from now.
fn parse_since(text: &str) -> Result<Timestamp, String> {
    if let Ok(t) = text.parse::<Timestamp>() {
        return Ok(t);
    }
    let back = coxswain_core::flow::parse_duration(text).map_err(|e| {
        format!("an RFC 3339 time (2026-05-01T09:30:00Z) or a duration such as 1h or 2d: {e}")
    })?;
    let back = jiff::SignedDuration::try_from(back).map_err(|e| e.to_string())?;
    Timestamp::now()
        .checked_sub(back)
        .map_err(|_| format!("{text} back from now is before any time there is"))
}

/// Exit 0 when listed or found, 1 when the run is not there or a source
/// named failed, 2 when the command is wrong.
pub fn run(args: Args) -> ExitCode {
    let runtime = match runtime() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match &args.command {
            Command::List {
                flow,
                phase,
                since,
                all_namespaces,
                limit,
                output,
            } => {
                if !(1..=MAX_LIMIT).contains(limit) {
                    eprintln!("--limit: between 1 and {MAX_LIMIT}");
                    return Ok(ExitCode::from(2));
                }
                let filter = Filter {
                    namespace: (!all_namespaces).then(|| args.namespace.clone()),
                    flow: flow.clone(),
                    phase: phase.clone(),
                    since: *since,
                    limit: *limit,
                };
                list(&args, &filter, *output).await
            }
            Command::Get { name, output } => get(&args, name, *output).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))
}

/// What `list` keeps.
struct Filter {
    /// `None`: every namespace (`-A`); `Some(None)`: each source's default;
    /// `Some(Some(ns))`: that one.
    namespace: Option<Option<String>>,
    flow: Option<String>,
    phase: Option<String>,
    since: Option<Timestamp>,
    limit: usize,
}

/// One line of `list`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct Row {
    namespace: String,
    name: String,
    uid: String,
    flow: String,
    phase: String,
    /// When it started (archived: when it was created), RFC 3339.
    started: Option<String>,
    /// When it ended, RFC 3339.
    finished: Option<String>,
    /// `cluster` or `archive`.
    source: &'static str,
}

impl Row {
    fn from_live(run: &Value) -> Row {
        let text = |v: &Value| v.as_str().map(String::from);
        let meta = &run["metadata"];
        let status = &run["status"];
        Row {
            namespace: text(&meta["namespace"]).unwrap_or_default(),
            name: text(&meta["name"]).unwrap_or_default(),
            uid: text(&meta["uid"]).unwrap_or_default(),
            flow: text(&run["spec"]["flowRef"]["name"]).unwrap_or_default(),
            phase: text(&status["phase"]).unwrap_or_else(|| "Pending".into()),
            started: text(&status["startedAt"]).or_else(|| text(&meta["creationTimestamp"])),
            finished: text(&status["finishedAt"]),
            source: "cluster",
        }
    }

    fn keep(&self, f: &Filter) -> bool {
        f.flow.as_ref().is_none_or(|x| *x == self.flow)
            && f.phase.as_ref().is_none_or(|x| *x == self.phase)
            && f.since.is_none_or(|since| {
                time(self.finished.as_deref().or(self.started.as_deref()))
                    .is_some_and(|t| t >= since)
            })
    }
}

fn time(text: Option<&str>) -> Option<Timestamp> {
    text.and_then(|t| t.parse().ok())
}

/// Newest first: runs still going, then by when they ended, then by when
/// they started; name last, so the order is stable.
fn newest_first(rows: &mut [Row]) {
    rows.sort_by(|a, b| {
        let key = |r: &Row| {
            (
                r.finished.is_none(),
                time(r.finished.as_deref()),
                time(r.started.as_deref()),
            )
        };
        key(b)
            .cmp(&key(a))
            .then_with(|| a.namespace.cmp(&b.namespace))
            .then_with(|| a.name.cmp(&b.name))
    });
}

/// The namespace to read in a source: the one asked for, else `local` in
/// the local file and the cluster's default elsewhere.
fn namespace_for(asked: Option<&str>, kind: ArchiveKind, cluster_default: &str) -> String {
    match (asked, kind) {
        (Some(ns), _) => ns.to_string(),
        (None, ArchiveKind::Local) => "local".into(),
        (None, ArchiveKind::Database) => cluster_default.to_string(),
    }
}

/// The cluster, when reachable: its client and default namespace.
struct Cluster {
    client: kube::Client,
    default_namespace: String,
    url: String,
}

impl ClusterArgs {
    fn required(&self) -> bool {
        self.cluster || self.context.is_some() || self.kubeconfig.is_some()
    }

    /// The cluster's client; `Ok(None)` (with a note) when none is set up
    /// and none was asked for.
    async fn connect(&self) -> Result<Option<Cluster>, String> {
        if self.no_cluster {
            return Ok(None);
        }
        let options = KubeConfigOptions {
            context: self.context.clone(),
            ..KubeConfigOptions::default()
        };
        let config = match &self.kubeconfig {
            Some(path) => match Kubeconfig::read_from(path) {
                Ok(k) => kube::Config::from_custom_kubeconfig(k, &options)
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            },
            None if self.context.is_some() => kube::Config::from_kubeconfig(&options)
                .await
                .map_err(|e| e.to_string()),
            None => kube::Config::infer().await.map_err(|e| e.to_string()),
        };
        let mut config = match config {
            Ok(config) => config,
            Err(e) if self.required() => return Err(format!("the cluster: {e}")),
            Err(_) => {
                eprintln!("note: no kubeconfig (or in-cluster settings): reading the archive only");
                return Ok(None);
            }
        };
        config.connect_timeout = Some(Duration::from_secs(5));
        config.read_timeout = Some(Duration::from_secs(20));
        let url = config.cluster_url.to_string();
        let default_namespace = config.default_namespace.clone();
        match kube::Client::try_from(config) {
            Ok(client) => Ok(Some(Cluster {
                client,
                default_namespace,
                url,
            })),
            Err(e) if self.required() => Err(format!("the cluster at {url}: {e}")),
            Err(e) => {
                eprintln!(
                    "note: the cluster at {url} cannot be used ({e}): reading the archive only"
                );
                Ok(None)
            }
        }
    }
}

/// The Run resource, untyped: a Run is shown as the cluster holds it,
/// whatever fields a newer controller added.
fn run_resource() -> ApiResource {
    ApiResource::erase::<Run>(&())
}

/// A failure to read the cluster: fatal when the cluster was asked for,
/// a note otherwise.
fn cluster_failed(args: &Args, url: &str, e: impl std::fmt::Display) -> Result<(), String> {
    if args.cluster.required() {
        Err(format!("reading Runs from the cluster at {url}: {e}"))
    } else {
        eprintln!(
            "note: could not read Runs from the cluster at {url} ({e}): reading the archive only"
        );
        Ok(())
    }
}

/// Gives the cluster at most this long to answer one request.
const CLUSTER_WAIT: Duration = Duration::from_secs(30);

async fn live_runs(cluster: &Cluster, namespace: Option<&str>) -> Result<Vec<Value>, String> {
    let resource = run_resource();
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(cluster.client.clone(), ns, &resource),
        None => Api::all_with(cluster.client.clone(), &resource),
    };
    let mut runs = Vec::new();
    let mut params = ListParams::default().limit(500);
    loop {
        let page = tokio::time::timeout(CLUSTER_WAIT, api.list(&params))
            .await
            .map_err(|_| format!("no answer in {} s", CLUSTER_WAIT.as_secs()))?
            .map_err(|e| e.to_string())?;
        for item in page.items {
            runs.push(serde_json::to_value(item).map_err(|e| e.to_string())?);
        }
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(runs),
        }
    }
}

async fn list(args: &Args, filter: &Filter, output: ListOutput) -> Result<ExitCode, String> {
    let cluster = args.cluster.connect().await?;
    let cluster_default = cluster
        .as_ref()
        .map_or("default", |c| c.default_namespace.as_str());
    let mut by_uid: HashMap<String, Row> = HashMap::new();
    let key = |r: &Row| {
        if r.uid.is_empty() {
            format!("{}/{}", r.namespace, r.name)
        } else {
            r.uid.clone()
        }
    };
    let archives = args.archive.open().await?;
    for opened in &archives {
        let namespace = filter
            .namespace
            .as_ref()
            .map(|asked| namespace_for(asked.as_deref(), opened.kind, cluster_default));
        let query = RunQuery {
            namespace,
            flow: filter.flow.clone(),
            phase: filter.phase.clone(),
            since: filter.since.map(|t| t.to_string()),
            limit: filter.limit,
        };
        let summaries = opened
            .store
            .list_runs(&query)
            .await
            .map_err(|e| format!("reading the archive in {}: {e}", opened.label))?;
        for s in summaries {
            let row = Row {
                namespace: s.namespace,
                name: s.name,
                uid: s.uid,
                flow: s.flow,
                phase: s.phase,
                started: Some(s.created),
                finished: s.finished,
                source: "archive",
            };
            by_uid.insert(key(&row), row);
        }
    }
    if let Some(cluster) = &cluster {
        let namespace = filter.namespace.as_ref().map(|asked| {
            asked
                .clone()
                .unwrap_or_else(|| cluster.default_namespace.clone())
        });
        match live_runs(cluster, namespace.as_deref()).await {
            Ok(runs) => {
                for run in &runs {
                    let row = Row::from_live(run);
                    if row.keep(filter) {
                        by_uid.insert(key(&row), row);
                    }
                }
            }
            Err(e) => cluster_failed(args, &cluster.url, e)?,
        }
    }
    if archives.is_empty() && cluster.is_none() {
        eprintln!(
            "note: nothing to read: no cluster, no records file at {} and no --database",
            args.archive.place.path().unwrap_or_default().display()
        );
    }
    let mut rows: Vec<Row> = by_uid.into_values().collect();
    newest_first(&mut rows);
    rows.truncate(filter.limit);
    match output {
        ListOutput::Json => {
            let text = serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?;
            println!("{text}");
        }
        ListOutput::Text => {
            print!("{}", table(&rows));
            if rows.is_empty() {
                eprintln!("no runs found");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `2026-05-01T09:30:00Z`: a time to the second, in UTC; `-` for none.
fn short_time(text: Option<&str>) -> String {
    match (text, time(text)) {
        (_, Some(t)) => t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        (Some(text), None) => text.to_string(),
        (None, None) => "-".into(),
    }
}

fn table(rows: &[Row]) -> String {
    let header = [
        "NAMESPACE",
        "NAME",
        "FLOW",
        "PHASE",
        "STARTED",
        "FINISHED",
        "SOURCE",
    ];
    let cells: Vec<[String; 7]> = rows
        .iter()
        .map(|r| {
            [
                r.namespace.clone(),
                r.name.clone(),
                r.flow.clone(),
                r.phase.clone(),
                short_time(r.started.as_deref()),
                short_time(r.finished.as_deref()),
                r.source.to_string(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[&str]| {
        let mut out = String::new();
        for (i, (cell, width)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<width$}   "));
            }
        }
        out.push('\n');
        out
    };
    let mut out = line(&header);
    for row in &cells {
        let row: Vec<&str> = row.iter().map(String::as_str).collect();
        out.push_str(&line(&row));
    }
    out
}

/// The archived Run of this name among the archives, the one that ended
/// last when several hold it.
async fn find_archived(
    opened: &[Opened],
    namespace: &dyn Fn(ArchiveKind) -> String,
    name: &str,
) -> Result<Option<ArchivedRun>, String> {
    let mut found: Option<ArchivedRun> = None;
    for o in opened {
        let run = o
            .store
            .archived_run(&namespace(o.kind), name)
            .await
            .map_err(|e| format!("reading the archive in {}: {e}", o.label))?;
        if let Some(run) = run {
            let later = found
                .as_ref()
                .is_none_or(|f| time(run.finished.as_deref()) > time(f.finished.as_deref()));
            if later {
                found = Some(run);
            }
        }
    }
    Ok(found)
}

/// Where a run was looked for, for the message when it is nowhere.
fn searched(opened: &[Opened], namespace: &dyn Fn(ArchiveKind) -> String) -> String {
    let places: Vec<String> = opened
        .iter()
        .map(|o| format!("namespace {} of {}", namespace(o.kind), o.label))
        .collect();
    places.join(" nor in ")
}

async fn get(args: &Args, name: &str, output: GetOutput) -> Result<ExitCode, String> {
    let cluster = args.cluster.connect().await?;
    let asked = args.namespace.as_deref();
    let mut looked = Vec::new();
    if let Some(cluster) = &cluster {
        let ns = asked.unwrap_or(&cluster.default_namespace);
        let api: Api<DynamicObject> =
            Api::namespaced_with(cluster.client.clone(), ns, &run_resource());
        match tokio::time::timeout(CLUSTER_WAIT, api.get_opt(name)).await {
            Ok(Ok(Some(run))) => {
                let mut run = serde_json::to_value(run).map_err(|e| e.to_string())?;
                with_type(&mut run);
                print_run(&run, output)?;
                return Ok(ExitCode::SUCCESS);
            }
            Ok(Ok(None)) => looked.push(format!("namespace {ns} of the cluster")),
            Ok(Err(e)) => cluster_failed(args, &cluster.url, e)?,
            Err(_) => cluster_failed(
                args,
                &cluster.url,
                format!("no answer in {} s", CLUSTER_WAIT.as_secs()),
            )?,
        }
    }
    let cluster_default = cluster
        .as_ref()
        .map_or("default", |c| c.default_namespace.as_str())
        .to_string();
    let archives = args.archive.open().await?;
    let namespace = |kind| namespace_for(asked, kind, &cluster_default);
    if let Some(archived) = find_archived(&archives, &namespace, name).await? {
        eprintln!(
            "note: run {}/{} ended {}; shown from the archive",
            archived.namespace,
            archived.name,
            archived.finished.as_deref().unwrap_or("at an unknown time")
        );
        let mut run = archived.run;
        with_type(&mut run);
        print_run(&run, output)?;
        return Ok(ExitCode::SUCCESS);
    }
    if !archives.is_empty() {
        looked.push(searched(&archives, &namespace));
    }
    if looked.is_empty() {
        eprintln!(
            "no run `{name}`: nothing to read (no cluster, no records file at {} and no --database)",
            args.archive.place.path().unwrap_or_default().display()
        );
    } else {
        eprintln!("no run `{name}` in {}", looked.join(" nor in "));
    }
    Ok(ExitCode::FAILURE)
}

/// Lists leave out each item's `apiVersion` and `kind`; a Run printed
/// alone has them.
fn with_type(run: &mut Value) {
    if let Some(object) = run.as_object_mut() {
        object
            .entry("apiVersion")
            .or_insert_with(|| "coxswain.dev/v1alpha1".into());
        object.entry("kind").or_insert_with(|| "Run".into());
    }
}

fn print_run(run: &Value, output: GetOutput) -> Result<(), String> {
    let text = match output {
        GetOutput::Json => serde_json::to_string_pretty(run).map_err(|e| e.to_string())?,
        GetOutput::Yaml => serde_yaml::to_string(run).map_err(|e| e.to_string())?,
    };
    println!("{}", text.trim_end());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, started: Option<&str>, finished: Option<&str>) -> Row {
        Row {
            namespace: "ns".into(),
            name: name.into(),
            uid: name.into(),
            flow: "f".into(),
            phase: "Succeeded".into(),
            started: started.map(String::from),
            finished: finished.map(String::from),
            source: "archive",
        }
    }

    #[test]
    fn runs_still_going_come_first_then_the_latest_to_end() {
        let mut rows = vec![
            row(
                "old",
                Some("2026-01-01T00:00:00Z"),
                Some("2026-01-01T01:00:00Z"),
            ),
            row("going", Some("2025-01-01T00:00:00Z"), None),
            // Another offset, a fraction: compared as times, not texts.
            row(
                "new",
                Some("2026-01-01T00:00:00Z"),
                Some("2026-01-01T03:30:00.5+02:00"),
            ),
            row(
                "newest",
                Some("2026-01-01T00:00:00Z"),
                Some("2026-01-01T02:00:00Z"),
            ),
        ];
        newest_first(&mut rows);
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["going", "newest", "new", "old"]);
    }

    #[test]
    fn since_takes_a_time_or_a_duration_back_from_now() {
        assert_eq!(
            parse_since("2026-05-01T11:30:00+02:00").unwrap(),
            "2026-05-01T09:30:00Z".parse::<Timestamp>().unwrap()
        );
        let back = Timestamp::now().duration_since(parse_since("2h").unwrap());
        assert!((7199..=7201).contains(&back.as_secs()), "{back:?}");
        assert!(parse_since("yesterday").is_err());
    }

    #[test]
    fn phases_are_read_in_any_case_and_written_as_runs_write_them() {
        assert_eq!(parse_phase("failed").unwrap(), "Failed");
        assert_eq!(parse_phase("Succeeded").unwrap(), "Succeeded");
        assert!(parse_phase("done").unwrap_err().contains("Cancelled"));
    }

    #[test]
    fn a_live_run_reads_its_times_from_the_status_else_its_creation() {
        let run = serde_json::json!({
            "metadata": {"name": "r", "namespace": "team", "uid": "u-1", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"flowRef": {"name": "tickets"}},
        });
        let r = Row::from_live(&run);
        assert_eq!(
            (
                r.phase.as_str(),
                r.started.as_deref(),
                r.finished.as_deref(),
                r.flow.as_str()
            ),
            ("Pending", Some("2026-01-01T00:00:00Z"), None, "tickets")
        );
        let filter = Filter {
            namespace: None,
            flow: Some("tickets".into()),
            phase: None,
            since: Some("2026-01-02T00:00:00Z".parse().unwrap()),
            limit: 10,
        };
        assert!(!r.keep(&filter), "started before --since");
    }
}
