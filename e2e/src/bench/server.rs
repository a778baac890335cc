//! The local HTTP server the benchmark's http steps call. It answers at
//! once and notes when each call arrived and was answered, keyed by the
//! call's `Idempotency-Key` (`run-uid/step/attempt`), so the time between
//! one step's answer and the next step's call (the controller's own work
//! between two steps) is measured outside the controller.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::{get, post};

use crate::{Error, Result};

/// How long the stand-in model (`POST /v1/chat/completions`, an
/// OpenAI-compatible answer "ok") takes to answer: an agent step that
/// holds its call open, as a real model does.
pub const MODEL_DELAY: std::time::Duration = std::time::Duration::from_secs(2);

/// One call: which step of which run, when it came and when it was answered.
#[derive(Debug, Clone)]
pub struct Call {
    /// The step's key.
    pub step: String,
    /// When the request arrived.
    pub arrived: Instant,
    /// When the answer was handed to the connection.
    pub answered: Instant,
}

/// The calls seen so far, by run uid.
#[derive(Clone, Default)]
pub struct Calls(Arc<Mutex<HashMap<String, Vec<Call>>>>);

impl Calls {
    fn note(&self, key: &str, arrived: Instant) {
        let mut parts = key.split('/');
        let (Some(run), Some(step)) = (parts.next(), parts.next()) else {
            return;
        };
        let call = Call {
            step: step.to_string(),
            arrived,
            answered: Instant::now(),
        };
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(run.to_string())
            .or_default()
            .push(call);
    }

    /// How many calls came in all.
    pub fn count(&self) -> usize {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .map(Vec::len)
            .sum()
    }

    /// The gaps between one call's answer and the run's next call, in
    /// seconds, over every run: the step-to-step latency.
    pub fn gaps(&self) -> Vec<f64> {
        let runs = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mut gaps = Vec::new();
        for calls in runs.values() {
            let mut calls = calls.clone();
            calls.sort_by_key(|c| c.arrived);
            for pair in calls.windows(2) {
                let gap = pair[1].arrived.saturating_duration_since(pair[0].answered);
                gaps.push(gap.as_secs_f64());
            }
        }
        gaps
    }

    /// Forgets every call (between workloads).
    pub fn clear(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// Starts the server on a free loopback port; it serves `GET /step` until
/// the process ends.
pub async fn start() -> Result<(SocketAddr, Calls)> {
    let calls = Calls::default();
    let app = axum::Router::new()
        .route(
            "/step",
            get(
                |State(calls): State<Calls>, headers: HeaderMap| async move {
                    let arrived = Instant::now();
                    let key = headers
                        .get("idempotency-key")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default();
                    calls.note(key, arrived);
                    axum::Json(serde_json::json!({"ok": true}))
                },
            ),
        )
        .route(
            "/v1/chat/completions",
            post(|| async {
                tokio::time::sleep(MODEL_DELAY).await;
                axum::Json(serde_json::json!({
                    "id": "chatcmpl-bench", "object": "chat.completion", "created": 0,
                    "model": "stand-in",
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": "ok"}}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}
                }))
            }),
        )
        .with_state(calls.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| Error::Bench(format!("binding the benchmark's HTTP server: {e}")))?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((addr, calls))
}
