//! `coxswain ui`: the run viewer, acting as you (your kubeconfig) on a
//! laptop, or as whoever signs in with a token on a cluster; or, with
//! `--flow`/`--record`, showing runs made on this machine (no cluster).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use coxswain_ui::{Access, Settings};

mod local;

/// Options of `coxswain ui`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Address to serve on; port 0 picks a free one (the address is printed).
    #[arg(long, env = "COXSWAIN_UI_LISTEN", default_value = "127.0.0.1:8484")]
    listen: SocketAddr,
    /// Whose credentials reach the API server: `kubeconfig` (yours: every
    /// read and write is yours), or `token` (in a cluster: each person signs
    /// in with a bearer token and the viewer acts with it; it has no rights
    /// of its own).
    #[arg(
        long,
        env = "COXSWAIN_UI_AUTH",
        value_enum,
        default_value = "kubeconfig"
    )]
    auth: Auth,
    /// The namespace pages open on (default: the kubeconfig context's).
    #[arg(long, short = 'n')]
    namespace: Option<String>,
    /// Local mode (no cluster): a flow file whose flows draw the local
    /// runs (each run with the flow of the digest it ran). Repeat it.
    #[arg(long, value_name = "FILE")]
    flow: Vec<PathBuf>,
    /// Local mode: a run's status file (what `coxswain run --output json`
    /// printed, or a whole Run object), shown in namespace `local` along
    /// with the runs of the records file. Repeat it.
    #[arg(long, value_name = "REC.json")]
    record: Vec<PathBuf>,
    /// In local mode, the records file whose archived runs are shown too.
    #[command(flatten)]
    records: super::records::Place,
}

/// `--auth`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Auth {
    /// The kubeconfig's user.
    Kubeconfig,
    /// Each request's bearer token.
    Token,
}

/// Serves until stopped; exit 1 when it cannot start.
pub fn run(args: Args) -> ExitCode {
    super::serve("ui", serve(args))
}

async fn serve(args: Args) -> Result<(), String> {
    if !args.flow.is_empty() || !args.record.is_empty() {
        return serve_local(args).await;
    }
    let (access, namespace) = match args.auth {
        Auth::Kubeconfig => Access::kubeconfig().await,
        Auth::Token => Access::token().await,
    }
    .map_err(|e| e.to_string())?;
    if args.auth == Auth::Kubeconfig && !args.listen.ip().is_loopback() {
        return Err(format!(
            "--listen {} is not a loopback address: with --auth kubeconfig anyone reaching it would act as you; use --auth token to serve others",
            args.listen
        ));
    }
    let settings = Settings {
        listen: args.listen,
        access,
        namespace: args.namespace.unwrap_or(namespace),
        local: None,
    };
    listen(settings).await
}

/// Local mode: the runs of `--record` files and of the records file, drawn
/// with the `--flow` files' flows, on loopback only.
async fn serve_local(args: Args) -> Result<(), String> {
    if !args.listen.ip().is_loopback() {
        return Err(format!(
            "--listen {} is not a loopback address: local mode shows your records to whoever reaches it",
            args.listen
        ));
    }
    let shown = local::load(&args.flow, &args.record, &args.records).await?;
    let settings = Settings {
        listen: args.listen,
        access: Access::Local,
        namespace: coxswain_ui::LOCAL_NAMESPACE.into(),
        local: Some(shown),
    };
    listen(settings).await
}

async fn listen(settings: Settings) -> Result<(), String> {
    let addr = settings.listen;
    coxswain_ui::serve(settings, |addr| {
        eprintln!("coxswain ui: serving on http://{addr}/");
    })
    .await
    .map_err(|e| format!("cannot serve on {addr}: {e}"))
}
