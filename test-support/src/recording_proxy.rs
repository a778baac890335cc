//! A proxy on 127.0.0.1 in front of a real Chat Completions server that
//! keeps every exchange: what was sent, what came back, and how long the
//! server took. Shared by the controller's `tests/model_server.rs` (what did
//! the model receive?) and `benches/agent_overhead.rs` (how much of a call is
//! ours?).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use serde_json::{Value, json};

/// One request through the proxy.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The request body as the client sent it.
    pub request: Value,
    /// The reply as the client received it.
    pub reply: Value,
    /// From sending upstream to reading the whole reply.
    pub upstream: Duration,
}

/// Every exchange so far, in order.
pub type Exchanges = Arc<Mutex<Vec<Exchange>>>;

#[derive(Clone)]
struct Proxy {
    upstream: String,
    client: reqwest::Client,
    seen: Exchanges,
    spoil_first: bool,
}

async fn forward(State(p): State<Proxy>, Json(request): Json<Value>) -> (StatusCode, Json<Value>) {
    let start = Instant::now();
    let sent = p
        .client
        .post(format!("{}/chat/completions", p.upstream))
        .json(&request)
        .send()
        .await;
    let (status, mut reply) = match sent {
        Ok(r) => {
            let status =
                StatusCode::from_u16(r.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
            (status, r.json::<Value>().await.unwrap_or(Value::Null))
        }
        Err(e) => (
            StatusCode::BAD_GATEWAY,
            json!({"error": {"message": e.to_string()}}),
        ),
    };
    let upstream = start.elapsed();
    let Ok(mut seen) = p.seen.lock() else {
        return (StatusCode::INTERNAL_SERVER_ERROR, Json(Value::Null));
    };
    let spoil = p.spoil_first && seen.is_empty();
    if let Some(args) = reply
        .pointer_mut("/choices/0/message/tool_calls/0/function/arguments")
        .filter(|_| spoil)
    {
        *args = Value::String("{\"title\": 7}".into());
    }
    seen.push(Exchange {
        request,
        reply: reply.clone(),
        upstream,
    });
    (status, Json(reply))
}

/// Starts a proxy to `upstream` (a `/v1` base URL) and returns its own base
/// URL. With `spoil_first`, the first reply's tool arguments are replaced by
/// ones that do not fit, so the repair turn that follows reaches the server.
pub async fn start(upstream: String, spoil_first: bool) -> Result<(String, Exchanges), String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let seen: Exchanges = Arc::default();
    let state = Proxy {
        upstream,
        client: reqwest::Client::new(),
        seen: seen.clone(),
        spoil_first,
    };
    let app = axum::Router::new()
        .route("/v1/chat/completions", post(forward))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("bind: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((format!("http://{addr}/v1"), seen))
}
