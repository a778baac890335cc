//! `coxswain run examples/review.yaml` against a stand-in OpenAI-compatible
//! server: the writer agent drafts, the reviewer sends the work back with
//! instructions, the redone draft carries them, and the post is published.

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use serde_json::{Value, json};

type Seen = Arc<Mutex<Vec<Value>>>;

async fn completions(State(seen): State<Seen>, Json(body): Json<Value>) -> Json<Value> {
    let n = {
        let mut seen = seen.lock().expect("lock");
        seen.push(body);
        seen.len()
    };
    let args =
        json!({"title": format!("Draft {n}"), "body": format!("Body of draft {n}.")}).to_string();
    Json(json!({
        "id": format!("chatcmpl-{n}"), "object": "chat.completion", "created": 1, "model": "stand-in",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "submit_output", "arguments": args}}]}}],
        "usage": {"prompt_tokens": 100 + n, "completion_tokens": 20, "total_tokens": 120 + n}
    }))
}

#[tokio::test(flavor = "multi_thread")]
async fn review_example_sends_work_back_to_the_agent_with_the_instructions() {
    let seen: Seen = Arc::default();
    let app = axum::Router::new()
        .route("/v1/chat/completions", post(completions))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });

    let flow = format!("{}/../examples/review.yaml", env!("CARGO_MANIFEST_DIR"));
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_coxswain"))
        .args([
            "run",
            &flow,
            "--agent-url",
            &format!("http://{addr}/v1"),
            "--agent-model",
            "stand-in",
        ])
        .args(["--input", r#"{"brief": "Why we moved to Rust"}"#])
        .args([
            "--decide",
            "review=changes:Cut the intro.",
            "--decide",
            "review=approve",
            "--output",
            "json",
        ])
        .env_remove("COXSWAIN_AGENT_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .output()
        .await
        .expect("coxswain runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let record: Value = serde_json::from_slice(&output.stdout).expect("one JSON record");

    assert_eq!(
        record["output"],
        json!({"title": "Draft 2", "body": "Body of draft 2."})
    );
    let attempts = record["steps"]["draft"]["attempts"]
        .as_array()
        .expect("attempts");
    assert_eq!(attempts.len(), 2, "the first draft is kept");
    assert_eq!(attempts[0]["output"]["title"], "Draft 1");
    assert_eq!(attempts[1]["feedback"], "Cut the intro.");
    assert_eq!(
        attempts[0]["usage"],
        json!({"promptTokens": 101, "completionTokens": 20})
    );
    assert_eq!(
        attempts[1]["usage"],
        json!({"promptTokens": 102, "completionTokens": 20})
    );
    assert_eq!(record["steps"]["publish"]["output"]["published"], true);

    let requests = seen.lock().expect("lock").clone();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0]["model"], "stand-in");
    assert_eq!(
        requests[0]["tool_choice"]["function"]["name"],
        "submit_output"
    );
    let second = requests[1]["messages"].to_string();
    assert!(
        second.contains("What the reviewer asked you to change"),
        "{second}"
    );
    assert!(second.contains("Cut the intro."), "{second}");
    assert!(
        second.contains("Draft 1"),
        "the reviewed work is shown: {second}"
    );
    assert!(
        requests[0]["messages"]
            .to_string()
            .contains("Why we moved to Rust")
    );
}
