//! Helpers shared by the executor tests: building work and a stand-in HTTP
//! server that records what it receives.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use coxswain_core::api::StepError;
use coxswain_core::engine::{DataView, RunInfo, Task, Work, codes};
use serde_json::{Value, json};

/// Work for `task` with the given input and step records.
pub fn work(task: Task, input: Value, steps: &[(&str, Value, &str)]) -> Work {
    let mut records = BTreeMap::new();
    for (key, output, text) in steps {
        records.insert(
            key.to_string(),
            json!({"status": "completed", "output": output, "text": text}),
        );
    }
    Work {
        step: "step_one".into(),
        part: None,
        attempt: 2,
        iteration: None,
        task,
        input: input.clone(),
        timeout: Some(Duration::from_secs(60)),
        data: DataView {
            input,
            steps: records,
            roots: BTreeMap::new(),
        },
        run: RunInfo {
            name: "demo-run".into(),
            namespace: "local".into(),
            uid: "uid-123".into(),
            since: None,
        },
        review: None,
        lookups: Vec::new(),
    }
}

/// Checks that a step failed with the error `code` and a message that says
/// each of `parts`.
pub fn assert_error(err: &StepError, code: &str, parts: &[&str]) {
    assert_eq!(err.code, code);
    for part in parts {
        assert!(err.message.contains(part), "{}", err.message);
    }
}

/// Checks that a step failed for a placeholder with no value, with exactly
/// `message`, before sending `server` anything.
pub fn assert_unresolved(err: &StepError, message: &str, server: &StandIn) {
    assert_eq!(err.code, codes::PLACEHOLDER);
    assert_eq!(err.message, message);
    assert!(server.requests().is_empty());
}

/// Checks that a step failed with the error `code` and a message that
/// starts with `prefix`.
pub fn assert_error_starting(err: &StepError, code: &str, prefix: &str) {
    assert_eq!(err.code, code);
    assert!(err.message.starts_with(prefix), "{}", err.message);
}

/// Serves `app` on a free loopback port until the task is aborted; its
/// base URL (`http://127.0.0.1:PORT`) and the task.
pub async fn serve(app: Router) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (format!("http://{addr}"), task)
}

/// One request as the stand-in server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    /// Path and query, exactly as sent.
    pub uri: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    }
    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn body_json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// A canned answer.
#[derive(Clone)]
pub struct Answer {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn json(status: u16, body: Value) -> Self {
        Answer {
            status,
            content_type: "application/json",
            body: serde_json::to_vec(&body).unwrap(),
        }
    }
    pub fn text(status: u16, body: &str) -> Self {
        Answer {
            status,
            content_type: "text/plain",
            body: body.as_bytes().to_vec(),
        }
    }
}

#[derive(Clone)]
struct Shared {
    seen: Arc<Mutex<Vec<Seen>>>,
    answer: Answer,
}

/// A server on 127.0.0.1 that answers every request with `answer` and
/// records it. Dropping the handle stops the server.
pub struct StandIn {
    pub base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl StandIn {
    pub async fn start(answer: Answer) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let shared = Shared {
            seen: seen.clone(),
            answer,
        };
        let app = Router::new().fallback(record).with_state(shared);
        let (base, task) = serve(app).await;
        StandIn { base, seen, task }
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub fn only(&self) -> Seen {
        let all = self.requests();
        assert_eq!(all.len(), 1, "expected one request, got {}", all.len());
        all.into_iter().next().unwrap()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn record(State(shared): State<Shared>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    shared.seen.lock().unwrap().push(Seen {
        method: parts.method.to_string(),
        uri: parts.uri.to_string(),
        headers: parts.headers,
        body,
    });
    let answer = shared.answer.clone();
    (
        StatusCode::from_u16(answer.status).unwrap(),
        [("content-type", answer.content_type)],
        answer.body,
    )
        .into_response()
}
