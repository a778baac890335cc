//! The message executor against stand-in webhook and Slack servers.

mod common;

use std::sync::Arc;

use common::{Answer, Seen, StandIn, assert_error, assert_error_starting, assert_unresolved, work};
use coxswain_core::api::{
    MatrixTarget, MessageStep, SecretKeyRef, SlackTarget, StepError, WebhookTarget,
};
use coxswain_core::engine::{Done, Task, Work, WorkResult, codes};
use coxswain_steps::Executor;
use coxswain_steps::message::MessageExecutor;
use coxswain_steps::secrets::MapSecrets;
use serde_json::{Value, json};

const TOKEN: &str = "xoxb-test-token";

fn executor(slack_base: &str) -> MessageExecutor {
    coxswain_steps::net::install_crypto_provider();
    MessageExecutor::new(Arc::new(MapSecrets::new().with("slack", "bot", TOKEN)))
        .unwrap()
        .with_slack_api(slack_base)
}

fn message_work(step: MessageStep) -> Work {
    work(
        Task::Message(step),
        json!({}),
        &[(
            "draft",
            json!({"title": "Hi {{x.text}} and $steps.y.output"}),
            "body {{draft.text}}",
        )],
    )
}

/// Runs `step` as the message executor does, Slack's API at `slack_base`.
async fn send(slack_base: &str, step: MessageStep) -> WorkResult {
    executor(slack_base).run(&message_work(step)).await
}

/// A step that posts `text` to the webhook at `url`.
fn webhook_step(text: &str, url: &str) -> MessageStep {
    MessageStep {
        text: text.into(),
        webhook: Some(WebhookTarget { url: url.into() }),
        ..Default::default()
    }
}

fn slack_step() -> MessageStep {
    MessageStep {
        text: "New: {{draft.json.title}}".into(),
        slack: Some(SlackTarget {
            channel: "#ops".into(),
            token_secret_ref: SecretKeyRef {
                name: "slack".into(),
                key: "bot".into(),
            },
            thread: None,
        }),
        ..Default::default()
    }
}

/// Checks what a sent message leaves: the `body` posted with the work's
/// idempotency key, and the step's `output`.
fn assert_sent(seen: &Seen, body: Value, done: &Done, output: Value) {
    assert_eq!(seen.body_json(), body);
    assert_eq!(
        seen.header("idempotency-key").as_deref(),
        Some("uid-123/step_one/2")
    );
    assert_eq!(done.output, output);
}

#[tokio::test]
async fn webhook_gets_text_json_and_data_is_inserted_literally() {
    let server = StandIn::start(Answer::json(200, json!({"id": "m-1"}))).await;
    let step = webhook_step(
        "{{draft.json.title}} / {{draft.text}}",
        &format!("{}/hook", server.base),
    );
    let done = send("http://unused.invalid", step).await.unwrap();
    let seen = server.only();
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.uri, "/hook");
    assert_sent(
        &seen,
        json!({"text": "Hi {{x.text}} and $steps.y.output / body {{draft.text}}"}),
        &done,
        json!({"messageId": "m-1", "conversationName": "127.0.0.1"}),
    );
}

#[tokio::test]
async fn webhook_without_an_id_gets_a_generated_one() {
    let server = StandIn::start(Answer::text(200, "ok")).await;
    let step = webhook_step("plain", &server.base);
    let done = send("http://unused.invalid", step).await.unwrap();
    assert!(
        done.output["messageId"]
            .as_str()
            .unwrap()
            .starts_with("msg-")
    );
}

#[tokio::test]
async fn webhook_errors_fail_the_attempt() {
    let server = StandIn::start(Answer::text(500, "down")).await;
    let step = webhook_step("plain", &server.base);
    let err = send("http://unused.invalid", step).await.unwrap_err().error;
    assert_error(&err, codes::MESSAGE, &["500"]);
}

#[tokio::test]
async fn slack_wire_format_and_success() {
    let slack = StandIn::start(Answer::json(
        200,
        json!({"ok": true, "channel": "C123", "ts": "1712345678.000100"}),
    ))
    .await;
    let done = send(&format!("{}/api", slack.base), slack_step())
        .await
        .unwrap();
    let seen = slack.only();
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.uri, "/api/chat.postMessage");
    assert_eq!(
        seen.header("authorization").as_deref(),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    assert!(
        seen.header("content-type")
            .unwrap()
            .starts_with("application/json")
    );
    assert_sent(
        &seen,
        json!({"channel": "#ops", "text": "New: Hi {{x.text}} and $steps.y.output"}),
        &done,
        json!({"messageId": "1712345678.000100", "conversationName": "ops"}),
    );
    assert!(!done.output.to_string().contains(TOKEN));
}

#[tokio::test]
async fn slack_answers_in_the_thread_the_placeholder_names() {
    let slack = StandIn::start(Answer::json(200, json!({"ok": true, "ts": "2.0"}))).await;
    let mut step = slack_step();
    step.slack.as_mut().unwrap().thread = Some("{{input.json.thread}}".into());
    let work = with_input(
        message_work(step.clone()),
        json!({"thread": "1712345678.000100"}),
    );
    executor(&slack.base).run(&work).await.unwrap();
    assert_eq!(slack.only().body_json()["thread_ts"], "1712345678.000100");
    // A run started otherwise has no thread to give: a missing value fails
    // the step before anything is posted, as any placeholder does.
    let err = send(&slack.base, step).await.unwrap_err().error;
    assert_eq!(err.code, codes::PLACEHOLDER, "{}", err.message);
    assert_eq!(slack.requests().len(), 1);
}

#[tokio::test]
async fn slack_server_errors_and_odd_answers_fail_the_attempt_by_name() {
    let cases = [
        (
            Answer::text(503, "upstream gone"),
            "answered 503 Service Unavailable: upstream gone",
        ),
        (
            Answer::text(200, "<html>login</html>"),
            "Slack's answer is not JSON: <html>login</html>",
        ),
        (
            Answer::json(200, json!({"ok": true})),
            "Slack accepted the message but gave no `ts`",
        ),
    ];
    for (answer, expected) in cases {
        let slack = StandIn::start(answer).await;
        let err = send(&slack.base, slack_step()).await.unwrap_err().error;
        assert_eq!(err.code, codes::MESSAGE, "{}", err.message);
        assert!(err.message.contains(expected), "{}", err.message);
        assert!(!err.message.contains(TOKEN));
        assert_eq!(slack.requests().len(), 1, "{expected}: posted once");
    }
}

#[tokio::test]
async fn slack_past_the_attempts_timeout_is_a_timeout() {
    // Accepts connections and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let mut w = message_work(slack_step());
    w.timeout = Some(std::time::Duration::from_millis(200));
    let err = executor(&format!("http://{addr}/api"))
        .run(&w)
        .await
        .unwrap_err()
        .error;
    assert_eq!(err.code, codes::TIMEOUT, "{}", err.message);
    assert!(
        err.message
            .contains("/api/chat.postMessage took longer than 0.2s"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn slack_ok_false_fails_naming_the_error() {
    let slack = StandIn::start(Answer::json(
        200,
        json!({"ok": false, "error": "channel_not_found"}),
    ))
    .await;
    let err = send(&slack.base, slack_step()).await.unwrap_err().error;
    assert_eq!(err.code, codes::MESSAGE);
    assert_eq!(
        err.message,
        "Slack refused the message to #ops: channel_not_found"
    );
    assert!(!err.message.contains(TOKEN));
}

#[tokio::test]
async fn a_missing_slack_token_is_a_secret_error() {
    let slack = StandIn::start(Answer::json(200, json!({"ok": true, "ts": "1"}))).await;
    coxswain_steps::net::install_crypto_provider();
    let exec = MessageExecutor::new(Arc::new(MapSecrets::new()))
        .unwrap()
        .with_slack_api(&slack.base);
    let err = exec
        .run(&message_work(slack_step()))
        .await
        .unwrap_err()
        .error;
    assert_eq!(err.code, codes::SECRET);
    assert!(slack.requests().is_empty());
}

#[tokio::test]
async fn a_missing_value_fails_before_sending() {
    let server = StandIn::start(Answer::json(200, json!({}))).await;
    let step = webhook_step("{{nobody.text}}", &server.base);
    let err = send("http://unused.invalid", step).await.unwrap_err().error;
    assert_unresolved(
        &err,
        "No value for {{nobody.text}}: that step did not run or did not produce it.",
        &server,
    );
}

#[tokio::test]
async fn a_metadata_webhook_is_refused() {
    let step = webhook_step("x", "http://169.254.169.254/hook");
    let err = send("http://unused.invalid", step).await.unwrap_err().error;
    assert_error_starting(&err, codes::MESSAGE, "refused to connect");
}

#[tokio::test]
async fn placeholders_in_the_webhook_url_are_filled_url_encoded() {
    let server = StandIn::start(Answer::json(200, json!({"id": "m-2"}))).await;
    let step = webhook_step(
        "hello",
        &format!(
            "{}/hooks/{{{{route.text}}}}?room={{{{route.text}}}}",
            server.base
        ),
    );
    let w = work(
        Task::Message(step),
        json!({}),
        &[("route", json!(null), "team a/b?c")],
    );
    let done = executor("http://unused.invalid").run(&w).await.unwrap();
    assert_eq!(
        server.only().uri,
        "/hooks/team%20a%2Fb%3Fc?room=team%20a%2Fb%3Fc"
    );
    assert_eq!(done.output["messageId"], "m-2");
}

#[tokio::test]
async fn a_webhook_url_placeholder_without_a_value_fails_before_sending() {
    let server = StandIn::start(Answer::json(200, json!({}))).await;
    let step = webhook_step(
        "hello",
        &format!("{}/hooks/{{{{nowhere.text}}}}", server.base),
    );
    let err = send("http://unused.invalid", step).await.unwrap_err().error;
    assert_error(&err, codes::PLACEHOLDER, &["nowhere"]);
    assert!(server.requests().is_empty());
}

// ---- Matrix -----------------------------------------------------------------

const MATRIX_TOKEN: &str = "syt_bot_secret_token";

/// A homeserver stand-in speaking the client-server API's wire format for
/// the calls a message step makes. Like Synapse it remembers each
/// transaction id of an access token and answers a repeat with the first
/// event's id.
mod homeserver {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use axum::Router;
    use axum::extract::{Path, State};
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::{IntoResponse, Response};
    use axum::routing::{get, put};
    use serde_json::{Value, json};

    /// One posted event.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Posted {
        pub room: String,
        pub event_id: String,
        pub content: Value,
    }

    #[derive(Default)]
    struct Rooms {
        /// Room id to its `m.room.name`, if it has one.
        names: BTreeMap<String, Option<String>>,
        aliases: BTreeMap<String, String>,
        /// Rooms the bot is not in: sending answers 403 M_FORBIDDEN.
        closed: Vec<String>,
        /// Rooms whose sends never answer.
        slow: Vec<String>,
        txns: BTreeMap<(String, String), String>,
        posted: Vec<Posted>,
        requests: Vec<String>,
    }

    #[derive(Clone)]
    struct Shared {
        token: String,
        rooms: Arc<Mutex<Rooms>>,
    }

    pub struct Homeserver {
        pub base: String,
        rooms: Arc<Mutex<Rooms>>,
        task: tokio::task::JoinHandle<()>,
    }

    impl Homeserver {
        /// Rooms `!ops:example.org` (named "Ops room", alias
        /// `#ops:example.org`), `!plain:example.org` (no name, alias
        /// `#plain:example.org`), `!closed:example.org` (the bot is not in
        /// it) and `!slow:example.org` (never answers).
        pub async fn start(token: &str) -> Self {
            let mut rooms = Rooms::default();
            rooms
                .names
                .insert("!ops:example.org".into(), Some("Ops room".into()));
            rooms.names.insert("!plain:example.org".into(), None);
            rooms
                .aliases
                .insert("#ops:example.org".into(), "!ops:example.org".into());
            rooms
                .aliases
                .insert("#plain:example.org".into(), "!plain:example.org".into());
            rooms.closed.push("!closed:example.org".into());
            rooms.slow.push("!slow:example.org".into());
            let rooms = Arc::new(Mutex::new(rooms));
            let shared = Shared {
                token: token.to_string(),
                rooms: rooms.clone(),
            };
            let app = Router::new()
                .route(
                    "/_matrix/client/v3/rooms/{room}/send/{kind}/{txn}",
                    put(send),
                )
                .route("/_matrix/client/v3/directory/room/{alias}", get(alias))
                .route("/_matrix/client/v3/rooms/{room}/state/{kind}/", get(state))
                .with_state(shared);
            let (base, task) = crate::common::serve(app).await;
            Homeserver { base, rooms, task }
        }

        pub fn posted(&self) -> Vec<Posted> {
            self.rooms.lock().unwrap().posted.clone()
        }

        /// Every request's method and path, in order.
        pub fn requests(&self) -> Vec<String> {
            self.rooms.lock().unwrap().requests.clone()
        }
    }

    impl Drop for Homeserver {
        fn drop(&mut self) {
            self.task.abort();
        }
    }

    fn error(status: StatusCode, errcode: &str, error: &str) -> Response {
        (
            status,
            axum::Json(json!({"errcode": errcode, "error": error})),
        )
            .into_response()
    }

    /// The 401 a request without the right token gets, if it lacks it.
    fn refusal(shared: &Shared, headers: &HeaderMap) -> Option<Response> {
        let expected = format!("Bearer {}", shared.token);
        match headers.get("authorization").and_then(|v| v.to_str().ok()) {
            Some(given) if given == expected => None,
            Some(_) => Some(error(
                StatusCode::UNAUTHORIZED,
                "M_UNKNOWN_TOKEN",
                "Invalid access token passed.",
            )),
            None => Some(error(
                StatusCode::UNAUTHORIZED,
                "M_MISSING_TOKEN",
                "Missing access token.",
            )),
        }
    }

    /// Notes `request`, then refuses it as `refusal` does.
    fn noted(shared: &Shared, request: String, headers: &HeaderMap) -> Option<Response> {
        shared.rooms.lock().unwrap().requests.push(request);
        refusal(shared, headers)
    }

    async fn send(
        State(shared): State<Shared>,
        Path((room, kind, txn)): Path<(String, String, String)>,
        headers: HeaderMap,
        axum::Json(content): axum::Json<Value>,
    ) -> Response {
        let slow = {
            let mut rooms = shared.rooms.lock().unwrap();
            rooms.requests.push(format!("PUT send {room} {kind} {txn}"));
            rooms.slow.contains(&room)
        };
        if slow {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        if let Some(refused) = refusal(&shared, &headers) {
            return refused;
        }
        let mut rooms = shared.rooms.lock().unwrap();
        if rooms.closed.contains(&room) {
            // A careless server echoing the request's token.
            let text = format!(
                "User @bot:example.org not in room {room} (token {})",
                shared.token
            );
            return error(StatusCode::FORBIDDEN, "M_FORBIDDEN", &text);
        }
        if !rooms.names.contains_key(&room) {
            return error(StatusCode::NOT_FOUND, "M_NOT_FOUND", "Unknown room");
        }
        let key = (shared.token.clone(), txn);
        if let Some(event_id) = rooms.txns.get(&key) {
            return axum::Json(json!({"event_id": event_id})).into_response();
        }
        let event_id = format!("$event{}", rooms.posted.len() + 1);
        rooms.txns.insert(key, event_id.clone());
        rooms.posted.push(Posted {
            room,
            event_id: event_id.clone(),
            content,
        });
        axum::Json(json!({"event_id": event_id})).into_response()
    }

    async fn alias(
        State(shared): State<Shared>,
        Path(alias): Path<String>,
        headers: HeaderMap,
    ) -> Response {
        if let Some(refused) = noted(&shared, format!("GET alias {alias}"), &headers) {
            return refused;
        }
        let rooms = shared.rooms.lock().unwrap();
        match rooms.aliases.get(&alias) {
            Some(id) => {
                axum::Json(json!({"room_id": id, "servers": ["example.org"]})).into_response()
            }
            None => error(
                StatusCode::NOT_FOUND,
                "M_NOT_FOUND",
                &format!("Room alias {alias} not found"),
            ),
        }
    }

    async fn state(
        State(shared): State<Shared>,
        Path((room, kind)): Path<(String, String)>,
        headers: HeaderMap,
    ) -> Response {
        if let Some(refused) = noted(&shared, format!("GET state {room} {kind}"), &headers) {
            return refused;
        }
        let rooms = shared.rooms.lock().unwrap();
        match (kind.as_str(), rooms.names.get(&room)) {
            ("m.room.name", Some(Some(name))) => axum::Json(json!({"name": name})).into_response(),
            _ => error(StatusCode::NOT_FOUND, "M_NOT_FOUND", "Event not found."),
        }
    }
}

use homeserver::Homeserver;

fn matrix_executor() -> MessageExecutor {
    coxswain_steps::net::install_crypto_provider();
    MessageExecutor::new(Arc::new(MapSecrets::new().with(
        "matrix",
        "token",
        MATRIX_TOKEN,
    )))
    .unwrap()
}

/// Why `step`, run with the bot's Matrix token, failed.
async fn matrix_error(step: MessageStep) -> StepError {
    matrix_executor()
        .run(&message_work(step))
        .await
        .unwrap_err()
        .error
}

fn matrix_step(homeserver: &str, room: &str) -> MessageStep {
    MessageStep {
        text: "Ready: {{draft.json.title}}".into(),
        matrix: Some(MatrixTarget {
            homeserver: homeserver.into(),
            room: room.into(),
            token_secret_ref: SecretKeyRef {
                name: "matrix".into(),
                key: "token".into(),
            },
            thread: None,
        }),
        ..Default::default()
    }
}

/// `work` with the run's input replaced.
fn with_input(mut work: Work, input: serde_json::Value) -> Work {
    work.data = coxswain_core::engine::DataView { input, ..work.data };
    work
}

#[tokio::test]
async fn matrix_answers_in_the_thread_the_placeholder_names_and_not_when_it_is_empty() {
    let server = Homeserver::start(MATRIX_TOKEN).await;
    let exec = matrix_executor();
    let mut step = matrix_step(&server.base, "!ops:example.org");
    step.matrix.as_mut().unwrap().thread = Some("{{input.json.thread}}".into());
    let threaded = with_input(
        message_work(step.clone()),
        json!({"thread": "$root:example.org"}),
    );
    exec.run(&threaded).await.unwrap();
    let plain = attempt(with_input(message_work(step), json!({"thread": ""})), 3);
    exec.run(&plain).await.unwrap();
    let posted = server.posted();
    assert_eq!(posted.len(), 2, "{posted:?}");
    assert_eq!(
        posted[0].content["m.relates_to"],
        json!({"rel_type": "m.thread", "event_id": "$root:example.org", "is_falling_back": true,
               "m.in_reply_to": {"event_id": "$root:example.org"}})
    );
    assert!(
        posted[1].content.get("m.relates_to").is_none(),
        "{:?}",
        posted[1]
    );
}

fn attempt(mut work: Work, number: u32) -> Work {
    work.attempt = number;
    work
}

#[tokio::test]
async fn matrix_posts_once_per_attempt_however_often_it_is_sent() {
    let server = Homeserver::start(MATRIX_TOKEN).await;
    let exec = matrix_executor();
    let step = matrix_step(&server.base, "!ops:example.org");
    let first = exec.run(&message_work(step.clone())).await.unwrap();
    let again = exec.run(&message_work(step.clone())).await.unwrap();
    assert_eq!(
        first.output,
        json!({"messageId": "$event1", "conversationName": "Ops room"})
    );
    assert_eq!(again.output, first.output);
    let posted = server.posted();
    assert_eq!(posted.len(), 1, "{posted:#?}");
    assert_eq!(posted[0].room, "!ops:example.org");
    assert_eq!(
        posted[0].content,
        json!({"msgtype": "m.text", "body": "Ready: Hi {{x.text}} and $steps.y.output"})
    );
    let next = exec.run(&attempt(message_work(step), 3)).await.unwrap();
    assert_eq!(next.output["messageId"], "$event2");
    assert_eq!(server.posted().len(), 2);
    let txns: Vec<String> = server
        .requests()
        .into_iter()
        .filter(|r| r.starts_with("PUT send"))
        .collect();
    assert_eq!(txns.len(), 3);
    assert_eq!(txns[0], txns[1]);
    assert_ne!(txns[0], txns[2]);
    assert!(
        txns[0].starts_with("PUT send !ops:example.org m.room.message coxswain-"),
        "{txns:?}"
    );
}

#[tokio::test]
async fn matrix_aliases_are_resolved_and_a_nameless_room_is_named_as_written() {
    let server = Homeserver::start(MATRIX_TOKEN).await;
    let exec = matrix_executor();
    let done = exec
        .run(&message_work(matrix_step(&server.base, "#ops:example.org")))
        .await
        .unwrap();
    assert_eq!(done.output["conversationName"], "Ops room");
    assert_eq!(server.posted()[0].room, "!ops:example.org");
    assert_eq!(server.requests()[0], "GET alias #ops:example.org");
    let another = attempt(
        message_work(matrix_step(&server.base, "#plain:example.org")),
        3,
    );
    let done = exec.run(&another).await.unwrap();
    assert_eq!(
        done.output,
        json!({"messageId": "$event2", "conversationName": "#plain:example.org"})
    );
    assert_eq!(server.posted()[1].room, "!plain:example.org");
}

#[tokio::test]
async fn matrix_refusal_names_room_homeserver_and_errcode_never_the_token() {
    let server = Homeserver::start(MATRIX_TOKEN).await;
    let err = matrix_error(matrix_step(&server.base, "!closed:example.org")).await;
    assert_eq!(err.code, codes::MESSAGE);
    for part in [
        "!closed:example.org",
        "M_FORBIDDEN",
        "403",
        server.base.trim_start_matches("http://"),
        "[redacted secret matrix/token]",
    ] {
        assert!(
            err.message.contains(part),
            "{part:?} not in {}",
            err.message
        );
    }
    assert!(!err.message.contains(MATRIX_TOKEN), "{}", err.message);
    assert!(server.posted().is_empty());
}

#[tokio::test]
async fn matrix_unknown_alias_and_wrong_token_fail_by_name() {
    let server = Homeserver::start(MATRIX_TOKEN).await;
    let err = matrix_error(matrix_step(&server.base, "#nowhere:example.org")).await;
    assert_error(
        &err,
        codes::MESSAGE,
        &["#nowhere:example.org", "M_NOT_FOUND"],
    );

    coxswain_steps::net::install_crypto_provider();
    let wrong = MessageExecutor::new(Arc::new(MapSecrets::new().with(
        "matrix",
        "token",
        "syt_someone_else",
    )))
    .unwrap();
    let err = wrong
        .run(&message_work(matrix_step(&server.base, "!ops:example.org")))
        .await
        .unwrap_err()
        .error;
    assert_error(&err, codes::MESSAGE, &["M_UNKNOWN_TOKEN"]);
    assert!(!err.message.contains("syt_someone_else"), "{}", err.message);
    assert!(server.posted().is_empty());
}

#[tokio::test]
async fn matrix_without_its_token_is_a_secret_error_and_sends_nothing() {
    let server = Homeserver::start(MATRIX_TOKEN).await;
    coxswain_steps::net::install_crypto_provider();
    let exec = MessageExecutor::new(Arc::new(MapSecrets::new())).unwrap();
    let err = exec
        .run(&message_work(matrix_step(&server.base, "!ops:example.org")))
        .await
        .unwrap_err()
        .error;
    assert_error_starting(&err, codes::SECRET, "Matrix token: ");
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn matrix_past_the_attempts_timeout_is_a_timeout() {
    let server = Homeserver::start(MATRIX_TOKEN).await;
    let mut w = message_work(matrix_step(&server.base, "!slow:example.org"));
    w.timeout = Some(std::time::Duration::from_millis(200));
    let err = matrix_executor().run(&w).await.unwrap_err().error;
    assert_error(&err, codes::TIMEOUT, &["!slow:example.org"]);
}

#[tokio::test]
async fn a_step_with_two_targets_names_them_and_sends_nothing() {
    let server = Homeserver::start(MATRIX_TOKEN).await;
    let mut step = matrix_step(&server.base, "!ops:example.org");
    step.webhook = Some(WebhookTarget {
        url: server.base.clone(),
    });
    let err = matrix_error(step).await;
    assert_error(
        &err,
        codes::MESSAGE,
        &["this step gives `webhook` and `matrix`"],
    );
    assert!(server.requests().is_empty());
}

// ---- Slack channel names ------------------------------------------------------

/// A Slack Web API stand-in: `chat.postMessage` posts to channel `C123`
/// whatever it is given; `conversations.info` answers with `info`.
async fn slack_api(info: serde_json::Value) -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
    use axum::extract::{Query, State};
    use axum::http::HeaderMap;
    use axum::routing::{get, post};
    type Seen = Arc<std::sync::Mutex<Vec<String>>>;
    let seen: Seen = Arc::default();
    let posted = |State((seen, _)): State<(Seen, serde_json::Value)>, headers: HeaderMap| async move {
        let auth = headers.get("authorization").unwrap().to_str().unwrap();
        seen.lock()
            .unwrap()
            .push(format!("POST chat.postMessage {auth}"));
        axum::Json(json!({"ok": true, "channel": "C123", "ts": "1712345678.000200"}))
    };
    let info_handler = |State((seen, info)): State<(Seen, serde_json::Value)>,
                        Query(query): Query<std::collections::BTreeMap<String, String>>,
                        headers: HeaderMap| async move {
        let auth = headers.get("authorization").unwrap().to_str().unwrap();
        seen.lock().unwrap().push(format!(
            "GET conversations.info channel={} {auth}",
            query.get("channel").map(String::as_str).unwrap_or("")
        ));
        axum::Json(info)
    };
    let app = axum::Router::new()
        .route("/api/chat.postMessage", post(posted))
        .route("/api/conversations.info", get(info_handler))
        .with_state((seen.clone(), info));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (format!("http://{addr}/api"), seen)
}

fn slack_channel_step(channel: &str) -> MessageStep {
    let mut step = slack_step();
    step.slack.as_mut().unwrap().channel = channel.into();
    step
}

#[tokio::test]
async fn slack_channel_ids_are_named_by_conversations_info() {
    let (base, seen) = slack_api(json!({
        "ok": true,
        "channel": {"id": "C123", "name": "ops-alerts", "is_channel": true}
    }))
    .await;
    let done = send(&base, slack_channel_step("C123")).await.unwrap();
    assert_eq!(
        done.output,
        json!({"messageId": "1712345678.000200", "conversationName": "ops-alerts"})
    );
    assert_eq!(
        *seen.lock().unwrap(),
        [
            format!("POST chat.postMessage Bearer {TOKEN}"),
            format!("GET conversations.info channel=C123 Bearer {TOKEN}"),
        ]
    );
}

#[tokio::test]
async fn slack_name_lookup_failing_keeps_the_channel_as_written_and_the_post() {
    let (base, seen) = slack_api(json!({"ok": false, "error": "missing_scope"})).await;
    let done = send(&base, slack_channel_step("C123")).await.unwrap();
    assert_eq!(
        done.output,
        json!({"messageId": "1712345678.000200", "conversationName": "C123"})
    );
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn slack_channel_written_as_a_name_needs_no_lookup() {
    let (base, seen) = slack_api(json!({"ok": true, "channel": {"name": "wrong"}})).await;
    let done = send(&base, slack_channel_step("#release-notes"))
        .await
        .unwrap();
    assert_eq!(done.output["conversationName"], "release-notes");
    assert_eq!(seen.lock().unwrap().len(), 1);
}
