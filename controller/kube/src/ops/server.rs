//! The HTTP endpoint Prometheus and the kubelet call: `/metrics` (text
//! format), `/healthz` (the process serves) and `/readyz` (see [`Health`]).

use std::{net::SocketAddr, sync::Arc};

use axum::{
    Router,
    extract::State,
    http::{StatusCode, header},
    response::IntoResponse,
    routing::get,
};
use tokio::net::TcpListener;

use super::{Health, Metrics, OpsError, OpsSettings};

/// What the handlers read.
#[derive(Clone)]
struct Shared {
    metrics: Arc<Metrics>,
    health: Arc<Health>,
}

/// Binds `--metrics-addr` and serves in a spawned task; returns the address
/// bound (with `127.0.0.1:0`, the port the system picked), which is logged.
pub async fn serve(
    settings: &OpsSettings,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
) -> Result<SocketAddr, OpsError> {
    let addr = settings.metrics_addr;
    let bind_error = |source| OpsError::Bind { addr, source };
    let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
    let bound = listener.local_addr().map_err(bind_error)?;
    let app = router(Shared { metrics, health });
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, %bound, "the metrics and health server stopped");
        }
    });
    tracing::info!(%bound, "serving /metrics, /healthz and /readyz");
    Ok(bound)
}

fn router(shared: Shared) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(shared)
}

async fn metrics(State(shared): State<Shared>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, prometheus::TEXT_FORMAT)],
        shared.metrics.encode(),
    )
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(shared): State<Shared>) -> impl IntoResponse {
    let now = shared.health.get();
    let status = if now.is_ready() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, format!("{}\n", now.as_str()))
}

#[cfg(test)]
mod tests {
    use tokio::{
        io::{AsyncReadExt, AsyncWriteExt},
        net::TcpStream,
    };

    use super::*;
    use crate::ops::Readiness;

    /// A plain HTTP/1.1 GET: the status code and the body.
    async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.expect("send");
        let mut response = String::new();
        stream.read_to_string(&mut response).await.expect("read");
        let (head, body) = response.split_once("\r\n\r\n").expect("a head and a body");
        let code = head
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .expect("a status line");
        (code, body.to_string())
    }

    fn local() -> OpsSettings {
        OpsSettings {
            metrics_addr: "127.0.0.1:0".parse().expect("address"),
            ..OpsSettings::default()
        }
    }

    #[tokio::test]
    async fn serves_metrics_health_and_readiness() {
        let metrics = Metrics::new();
        let health = Health::new();
        let addr = serve(&local(), metrics.clone(), health.clone())
            .await
            .expect("serves");
        assert_ne!(addr.port(), 0, "the bound port is reported");

        metrics.set_active_runs(7);
        let (code, body) = get(addr, "/metrics").await;
        assert_eq!(code, 200);
        assert!(body.contains("coxswain_active_runs 7"), "{body}");
        assert!(
            body.contains("# TYPE coxswain_reconcile_duration_seconds histogram"),
            "{body}"
        );

        assert_eq!(get(addr, "/healthz").await.0, 200);

        let (code, body) = get(addr, "/readyz").await;
        assert_eq!((code, body.trim()), (503, "starting"));
        health.set(Readiness::Standby);
        assert_eq!(get(addr, "/readyz").await.0, 200);
        health.set(Readiness::Syncing);
        let (code, body) = get(addr, "/readyz").await;
        assert_eq!((code, body.trim()), (503, "syncing caches"));
        health.set(Readiness::Ready);
        assert_eq!(get(addr, "/readyz").await.0, 200);

        assert_eq!(get(addr, "/nothing").await.0, 404);
    }

    #[tokio::test]
    async fn two_servers_share_a_host() {
        let a = serve(&local(), Metrics::new(), Health::new())
            .await
            .expect("first");
        let b = serve(&local(), Metrics::new(), Health::new())
            .await
            .expect("second");
        assert_ne!(a, b);
    }

    #[tokio::test]
    async fn a_taken_address_is_a_clear_error() {
        let taken = serve(&local(), Metrics::new(), Health::new())
            .await
            .expect("first");
        let settings = OpsSettings {
            metrics_addr: taken,
            ..OpsSettings::default()
        };
        let err = serve(&settings, Metrics::new(), Health::new())
            .await
            .expect_err("in use");
        let message = err.to_string();
        assert!(message.contains(&taken.to_string()), "{message}");
        assert!(message.contains("--metrics-addr"), "{message}");
    }
}
