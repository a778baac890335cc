//! Conversation commands on Slack, on the real API server: a stand-in of
//! Slack's Web API (`chat.postMessage`, as Slack documents it: a JSON body,
//! the bot token as a Bearer, `{"ok": true, "channel", "ts", "message"}`
//! back) takes the controller's answers, and the test delivers Events API
//! requests to the controller's endpoint signed as Slack signs them.
//!
//! An allowed user's command starts a Run named from the message, answered
//! in its thread with the Run's name and then its outcome; Slack's retry of
//! the same event starts and posts nothing more; a request with a bad or
//! stale signature is refused and starts nothing; a user not allowed is
//! told no and starts nothing; Slack's URL check gets its challenge back.
//!
//! The Flow and the connection Secret go through kubectl, as people send
//! them.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use coxswain_core::api::Run;
use coxswain_e2e::{ControllerProcess, Kubectl, TestNamespace, wait_for};
use coxswain_k8s::names;
use kube::api::ListParams;
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(120);
const TOKEN: &str = "xoxb-17-e2e-token";
const SIGNING_SECRET: &str = "e2e-signing-secret-0f3c";
const CHANNEL: &str = "C0REVIEWS";
const ALICE: &str = "U0ALICE";
const BOB: &str = "U0BOB";

/// One `chat.postMessage` call the stand-in took.
#[derive(Debug, Clone)]
struct Post {
    channel: String,
    text: String,
    thread_ts: Option<String>,
    ts: String,
}

/// The stand-in's record: what was posted, and calls it refused.
#[derive(Default)]
struct Record {
    posts: Vec<Post>,
    refused: Vec<String>,
}

type Shared = Arc<Mutex<Record>>;

/// `POST /api/chat.postMessage` as Slack answers it. A wrong token gets
/// Slack's `invalid_auth` (HTTP 200 and `ok: false`, as Slack does).
async fn post_message(
    State(record): State<Shared>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Json<Value> {
    let mut record = record.lock().unwrap_or_else(|e| e.into_inner());
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if auth != format!("Bearer {TOKEN}") {
        record.refused.push(format!("authorization `{auth}`"));
        return Json(json!({"ok": false, "error": "invalid_auth"}));
    }
    let json_body = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/json"));
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        record.refused.push("a body that is not JSON".into());
        return Json(json!({"ok": false, "error": "invalid_json"}));
    };
    let (Some(channel), Some(text), true) = (
        message["channel"].as_str(),
        message["text"].as_str(),
        json_body,
    ) else {
        record.refused.push(format!("{message}"));
        return Json(json!({"ok": false, "error": "invalid_arguments"}));
    };
    let ts = format!("1800000000.{:06}", record.posts.len() + 1);
    let thread_ts = message["thread_ts"].as_str().map(str::to_string);
    record.posts.push(Post {
        channel: channel.to_string(),
        text: text.to_string(),
        thread_ts: thread_ts.clone(),
        ts: ts.clone(),
    });
    let mut posted = json!({"type": "message", "subtype": "bot_message", "text": text,
        "ts": ts, "user": "U0BOT", "bot_id": "B0BOT"});
    if let Some(thread) = thread_ts {
        posted["thread_ts"] = json!(thread);
    }
    Json(json!({"ok": true, "channel": channel, "ts": ts, "message": posted}))
}

/// Starts the stand-in on a free loopback port; returns its API base URL.
async fn standin(record: Shared) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the stand-in");
    let addr = listener.local_addr().expect("its address");
    let app = axum::Router::new()
        .route("/api/chat.postMessage", post(post_message))
        .with_state(record);
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/api")
}

/// `v0=` + hex(HMAC-SHA256(secret, "v0:<timestamp>:<body>")), as Slack
/// signs its requests (written here apart from the controller's check).
fn sign(secret: &str, timestamp: &str, body: &str) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
    let tag = ring::hmac::sign(&key, format!("v0:{timestamp}:{body}").as_bytes());
    let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("v0={hex}")
}

fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// An `event_callback` carrying a channel message, as Slack sends it.
fn message_event(user: &str, text: &str, ts: &str) -> String {
    json!({
        "token": "legacy-verification-token",
        "team_id": "T0TEAM",
        "api_app_id": "A0APP",
        "event": {
            "type": "message", "channel": CHANNEL, "user": user, "text": text,
            "ts": ts, "event_ts": ts, "channel_type": "channel",
        },
        "type": "event_callback",
        "event_id": format!("Ev{}", ts.replace('.', "")),
        "event_time": now(),
        "authorizations": [{"team_id": "T0TEAM", "user_id": "U0BOT", "is_bot": true}],
    })
    .to_string()
}

/// The controller's endpoint for the connection.
struct Endpoint {
    http: reqwest::Client,
    url: String,
}

impl Endpoint {
    /// Delivers `body` with `headers` (the signature among them); returns
    /// the status and the answer's text.
    async fn deliver(&self, body: &str, headers: &[(&str, String)]) -> (u16, String) {
        let mut request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .body(body.to_string());
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let response = request.send().await.expect("the endpoint answers");
        let status = response.status().as_u16();
        (status, response.text().await.unwrap_or_default())
    }

    /// Delivers `body` signed as Slack signs it now, with `extra` headers.
    async fn signed(&self, body: &str, extra: &[(&str, String)]) -> (u16, String) {
        let timestamp = now().to_string();
        let mut headers = vec![
            ("x-slack-request-timestamp", timestamp.clone()),
            ("x-slack-signature", sign(SIGNING_SECRET, &timestamp, body)),
        ];
        headers.extend(extra.iter().cloned());
        self.deliver(body, &headers).await
    }
}

fn posts(record: &Shared) -> Vec<Post> {
    record
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .posts
        .clone()
}

async fn wait_posts(
    record: &Shared,
    thread: &str,
    count: usize,
    controller: &ControllerProcess,
) -> Vec<Post> {
    wait_for(
        &format!("{count} posts in the thread {thread}"),
        BOUND,
        || async {
            let found: Vec<Post> = posts(record)
                .into_iter()
                .filter(|p| p.thread_ts.as_deref() == Some(thread))
                .collect();
            Ok((found.len() >= count).then_some(found))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\nposts: {:?}\n{}", posts(record), controller.log_text()))
}

#[tokio::test(flavor = "multi_thread")]
async fn slack_commands_start_runs_once_and_are_answered_in_their_thread() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let record = Shared::default();
    let api = standin(record.clone()).await;
    let kubectl = Kubectl::new().await.expect("kubectl");
    kubectl.install_crds().await.expect("CRDs");
    let ns = TestNamespace::new().await.expect("namespace");
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "team-slack"},
        "type": "Opaque",
        "stringData": {"type": "slack", "token": TOKEN, "signingSecret": SIGNING_SECRET, "url": api},
    });
    kubectl
        .apply(ns.name(), &secret.to_string())
        .expect("the connection Secret");
    let flow = coxswain_e2e::chat::review_flow("team-slack", CHANNEL, ALICE);
    kubectl.apply(ns.name(), &flow).expect("the flow");
    let port = coxswain_e2e::free_port().expect("a port");
    let listen = format!("127.0.0.1:{port}");
    let controller =
        ControllerProcess::for_namespace(ns.name(), &["--slack-events-listen", &listen])
            .await
            .expect("controller");
    let endpoint = Endpoint {
        http: reqwest::Client::new(),
        url: format!("http://{listen}/slack/events/{}/team-slack", ns.name()),
    };

    // Slack checks the Request URL when it is saved: the challenge back.
    let challenge = r#"{"token":"legacy","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
    let answered = wait_for("the endpoint answers Slack's URL check", BOUND, || async {
        let timestamp = now().to_string();
        let Ok(response) = endpoint
            .http
            .post(&endpoint.url)
            .header("x-slack-request-timestamp", &timestamp)
            .header(
                "x-slack-signature",
                sign(SIGNING_SECRET, &timestamp, challenge),
            )
            .body(challenge)
            .send()
            .await
        else {
            return Ok(None);
        };
        let status = response.status().as_u16();
        Ok(Some((status, response.text().await.unwrap_or_default())))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", controller.log_text()));
    assert_eq!(
        answered,
        (
            200,
            "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P".to_string()
        )
    );

    // Not signed by the connection's secret, or signed long ago: refused,
    // and nothing is started.
    let forged_ts = "1700000001.000100";
    let forged = message_event(ALICE, "!review forged", forged_ts);
    let timestamp = now().to_string();
    let (status, text) = endpoint
        .deliver(
            &forged,
            &[
                ("x-slack-request-timestamp", timestamp.clone()),
                (
                    "x-slack-signature",
                    sign("another-secret", &timestamp, &forged),
                ),
            ],
        )
        .await;
    assert_eq!(status, 401, "{text}");
    assert!(text.contains("does not match"), "{text}");
    let old = (now() - 600).to_string();
    let (status, text) = endpoint
        .deliver(
            &forged,
            &[
                ("x-slack-request-timestamp", old.clone()),
                ("x-slack-signature", sign(SIGNING_SECRET, &old, &forged)),
            ],
        )
        .await;
    assert_eq!(status, 401, "a replayed request: {text}");
    let (status, _) = endpoint.deliver(&forged, &[]).await;
    assert_eq!(status, 401, "unsigned");
    // A connection that is not there: a request of Slack's form is told
    // so; one that is not even that is refused before any Secret is read.
    let elsewhere = endpoint.url.replace("/team-slack", "/no-such-connection");
    let timestamp = now().to_string();
    let response = endpoint
        .http
        .post(&elsewhere)
        .header("x-slack-request-timestamp", &timestamp)
        .header(
            "x-slack-signature",
            sign(SIGNING_SECRET, &timestamp, &forged),
        )
        .body(forged.clone())
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status().as_u16(), 404);
    let response = endpoint
        .http
        .post(&elsewhere)
        .body(forged.clone())
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status().as_u16(), 401, "unsigned");

    // alice asks: a Run named from the message, announced in its thread.
    let asked_ts = "1700000002.000200";
    let asked = message_event(ALICE, "!review the intro &amp; the outro", asked_ts);
    let (status, text) = endpoint.signed(&asked, &[]).await;
    assert_eq!(status, 200, "{text}\n{}", controller.log_text());
    let run_name = names::command_run("review", &format!("{CHANNEL}/{asked_ts}"));
    let started = wait_posts(&record, asked_ts, 1, &controller).await;
    assert_eq!(started[0].channel, CHANNEL);
    assert!(
        started[0]
            .text
            .starts_with(&format!("Started run `{run_name}` of flow `review`")),
        "{started:?}"
    );

    // Slack delivers the same event again (it thought our 200 late): the
    // Run is there already, and nothing more is started or posted.
    let (status, text) = endpoint
        .signed(
            &asked,
            &[
                ("x-slack-retry-num", "1".into()),
                ("x-slack-retry-reason", "http_timeout".into()),
            ],
        )
        .await;
    assert_eq!(status, 200, "{text}");

    // bob may not: told so in his thread, and nothing started.
    let refused_ts = "1700000003.000300";
    let (status, _) = endpoint
        .signed(&message_event(BOB, "!review mine too", refused_ts), &[])
        .await;
    assert_eq!(status, 200);
    let refusal = wait_posts(&record, refused_ts, 1, &controller).await;
    assert!(
        refusal[0]
            .text
            .starts_with(&format!("Sorry {BOB}, you may not start `!review` here")),
        "{refusal:?}"
    );
    // Chatter gets nothing.
    let (status, _) = endpoint
        .signed(
            &message_event(ALICE, "thanks! !review is neat", "1700000004.000400"),
            &[],
        )
        .await;
    assert_eq!(status, 200);

    // The run ends; its outcome is posted in alice's thread.
    let run = kubectl
        .wait_run(ns.name(), &run_name, &["Succeeded"], BOUND)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", controller.log_text()));
    assert_eq!(
        run["spec"]["input"]["text"],
        "!review the intro & the outro"
    );
    assert_eq!(run["spec"]["input"]["prompt"], "the intro & the outro");
    assert_eq!(run["spec"]["input"]["sender"], ALICE);
    assert_eq!(run["spec"]["input"]["room"], CHANNEL);
    let answers = wait_posts(&record, asked_ts, 2, &controller).await;
    assert!(
        answers[1]
            .text
            .starts_with(&format!("Run `{run_name}` succeeded. Output:")),
        "{answers:?}"
    );
    assert!(
        answers[1]
            .text
            .contains("\"reviewed\": \"the intro & the outro\""),
        "{}",
        answers[1].text
    );
    let marked = coxswain_e2e::chat::wait_answered(&kubectl, ns.name(), &run_name, BOUND).await;
    assert_eq!(marked, answers[1].ts, "the outcome's ts");

    // Everything said: one started answer (the retry posted nothing), one
    // outcome, one refusal; one Run; the stand-in refused no call.
    let all = posts(&record);
    let in_thread = |ts: &str| {
        all.iter()
            .filter(|p| p.thread_ts.as_deref() == Some(ts))
            .count()
    };
    assert_eq!(in_thread(asked_ts), 2, "{all:?}");
    assert_eq!(in_thread(refused_ts), 1, "{all:?}");
    assert_eq!(all.len(), 3, "{all:?}");
    assert!(
        record
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .refused
            .is_empty(),
        "calls the stand-in refused"
    );
    let runs: Vec<String> = ns
        .api::<Run>()
        .list(&ListParams::default())
        .await
        .expect("runs")
        .items
        .iter()
        .map(|r| r.metadata.name.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        runs,
        [run_name],
        "the forged and refused commands started nothing"
    );
}
