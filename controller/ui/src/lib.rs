//! `coxswain ui`: a web app to look at runs and act on them, acting as the
//! person who uses it.
//!
//! Every read and write goes to the Kubernetes API with the person's own
//! credentials (their kubeconfig on a laptop, the bearer token they sign in
//! with on a cluster), so RBAC and the admission webhook judge them, and an
//! answer to an Approval is stamped with their name. The viewer keeps no
//! state of its own: pages are drawn from what the API server holds, and
//! live pages follow watches of it.
//!
//! Where a box stands and what an arrow says come from
//! [`coxswain_core::view`]; this crate only fetches, checks and serves.

mod access;
mod approvals;
mod error;
mod flows;
mod live;
mod local;
mod logs;
mod pages;
mod run_page;
mod runs;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};

pub use access::{Access, AccessError};
pub use error::ApiError;
pub use local::{Local, LocalFlow, NAMESPACE as LOCAL_NAMESPACE};

/// Where the viewer listens and whose credentials it uses.
pub struct Settings {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// Whose credentials reach the API server.
    pub access: Access,
    /// The namespace pages open on (the kubeconfig context's, or `default`).
    pub namespace: String,
    /// Local mode: the runs and flows shown instead of a cluster's (with
    /// [`Access::Local`]).
    pub local: Option<Local>,
}

/// What every handler shares: how to reach the API server as the caller.
struct Shared {
    access: Access,
    namespace: String,
    /// Local mode: each handler answers from here instead of the cluster.
    local: Option<Local>,
}

/// Serves the viewer until the process is stopped; `ready` gets the bound
/// address (the port is picked when `listen` asks for port 0).
pub async fn serve(
    settings: Settings,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), std::io::Error> {
    let listener = tokio::net::TcpListener::bind(settings.listen).await?;
    ready(listener.local_addr()?);
    let shared = Arc::new(Shared {
        access: settings.access,
        namespace: settings.namespace,
        local: settings.local,
    });
    axum::serve(listener, router(shared)).await
}

fn router(shared: Arc<Shared>) -> Router {
    let api = Router::new()
        .route("/whoami", get(access::whoami))
        .route("/namespaces/{ns}/runs", get(runs::list))
        .route("/namespaces/{ns}/runs/{name}", get(runs::one))
        .route("/namespaces/{ns}/runs/{name}/steps/{key}", get(runs::step))
        .route(
            "/namespaces/{ns}/runs/{name}/steps/{key}/log",
            get(logs::log),
        )
        .route("/namespaces/{ns}/runs/{name}/arrows/{id}", get(runs::arrow))
        .route("/namespaces/{ns}/runs/{name}/values", get(runs::value))
        .route(
            "/namespaces/{ns}/approvals/{name}/answer",
            if shared.local.is_some() {
                post(local::answer)
            } else {
                post(approvals::answer)
            },
        )
        .route("/namespaces/{ns}/flows", get(flows::list))
        .route("/namespaces/{ns}/flows/{name}", get(flows::one));
    Router::new()
        .nest("/api/v1", api)
        .route("/healthz", get(|| async { "ok" }))
        .route("/sign-in", post(access::sign_in))
        .merge(pages::routes())
        .layer(axum::middleware::from_fn_with_state(
            shared.clone(),
            access::guard,
        ))
        .with_state(shared)
}
