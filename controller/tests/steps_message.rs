//! The message executor against stand-in webhook and Slack servers.

mod common;

use std::sync::Arc;

use common::{Answer, StandIn, work};
use coxswain::api::{MessageStep, SecretKeyRef, SlackTarget, WebhookTarget};
use coxswain::engine::{Task, Work, codes};
use coxswain::steps::Executor;
use coxswain::steps::message::MessageExecutor;
use coxswain::steps::secrets::MapSecrets;
use serde_json::json;

const TOKEN: &str = "xoxb-test-token";

fn executor(slack_base: &str) -> MessageExecutor {
    coxswain::steps::net::install_crypto_provider();
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

fn slack_step() -> MessageStep {
    MessageStep {
        text: "New: {{draft.json.title}}".into(),
        slack: Some(SlackTarget {
            channel: "#ops".into(),
            token_secret_ref: SecretKeyRef {
                name: "slack".into(),
                key: "bot".into(),
            },
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn webhook_gets_text_json_and_data_is_inserted_literally() {
    let server = StandIn::start(Answer::json(200, json!({"id": "m-1"}))).await;
    let step = MessageStep {
        text: "{{draft.json.title}} / {{draft.text}}".into(),
        webhook: Some(WebhookTarget {
            url: format!("{}/hook", server.base),
        }),
        ..Default::default()
    };
    let done = executor("http://unused.invalid")
        .run(&message_work(step))
        .await
        .unwrap();
    let seen = server.only();
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.uri, "/hook");
    assert_eq!(
        seen.body_json(),
        json!({"text": "Hi {{x.text}} and $steps.y.output / body {{draft.text}}"})
    );
    assert_eq!(
        seen.header("idempotency-key").as_deref(),
        Some("uid-123/step_one/2")
    );
    assert_eq!(
        done.output,
        json!({"messageId": "m-1", "conversationName": "127.0.0.1"})
    );
}

#[tokio::test]
async fn webhook_without_an_id_gets_a_generated_one() {
    let server = StandIn::start(Answer::text(200, "ok")).await;
    let step = MessageStep {
        text: "plain".into(),
        webhook: Some(WebhookTarget {
            url: server.base.clone(),
        }),
        ..Default::default()
    };
    let done = executor("http://unused.invalid")
        .run(&message_work(step))
        .await
        .unwrap();
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
    let step = MessageStep {
        text: "plain".into(),
        webhook: Some(WebhookTarget {
            url: server.base.clone(),
        }),
        ..Default::default()
    };
    let err = executor("http://unused.invalid")
        .run(&message_work(step))
        .await
        .unwrap_err()
        .error;
    assert_eq!(err.code, codes::MESSAGE);
    assert!(err.message.contains("500"), "{}", err.message);
}

#[tokio::test]
async fn slack_wire_format_and_success() {
    let slack = StandIn::start(Answer::json(
        200,
        json!({"ok": true, "channel": "C123", "ts": "1712345678.000100"}),
    ))
    .await;
    let done = executor(&format!("{}/api", slack.base))
        .run(&message_work(slack_step()))
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
    assert_eq!(
        seen.body_json(),
        json!({"channel": "#ops", "text": "New: Hi {{x.text}} and $steps.y.output"})
    );
    assert_eq!(
        done.output,
        json!({"messageId": "1712345678.000100", "conversationName": "#ops"})
    );
    assert!(!done.output.to_string().contains(TOKEN));
}

#[tokio::test]
async fn slack_ok_false_fails_naming_the_error() {
    let slack = StandIn::start(Answer::json(
        200,
        json!({"ok": false, "error": "channel_not_found"}),
    ))
    .await;
    let err = executor(&slack.base)
        .run(&message_work(slack_step()))
        .await
        .unwrap_err()
        .error;
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
    coxswain::steps::net::install_crypto_provider();
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
    let step = MessageStep {
        text: "{{nobody.text}}".into(),
        webhook: Some(WebhookTarget {
            url: server.base.clone(),
        }),
        ..Default::default()
    };
    let err = executor("http://unused.invalid")
        .run(&message_work(step))
        .await
        .unwrap_err()
        .error;
    assert_eq!(err.code, codes::PLACEHOLDER);
    assert_eq!(
        err.message,
        "No value for {{nobody.text}}: that step did not run or did not produce it."
    );
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn a_metadata_webhook_is_refused() {
    let step = MessageStep {
        text: "x".into(),
        webhook: Some(WebhookTarget {
            url: "http://169.254.169.254/hook".into(),
        }),
        ..Default::default()
    };
    let err = executor("http://unused.invalid")
        .run(&message_work(step))
        .await
        .unwrap_err()
        .error;
    assert_eq!(err.code, codes::MESSAGE);
    assert!(
        err.message.starts_with("refused to connect"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn placeholders_in_the_webhook_url_are_filled_url_encoded() {
    let server = StandIn::start(Answer::json(200, json!({"id": "m-2"}))).await;
    let step = MessageStep {
        text: "hello".into(),
        webhook: Some(WebhookTarget {
            url: format!(
                "{}/hooks/{{{{route.text}}}}?room={{{{route.text}}}}",
                server.base
            ),
        }),
        ..Default::default()
    };
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
    let step = MessageStep {
        text: "hello".into(),
        webhook: Some(WebhookTarget {
            url: format!("{}/hooks/{{{{nowhere.text}}}}", server.base),
        }),
        ..Default::default()
    };
    let err = executor("http://unused.invalid")
        .run(&message_work(step))
        .await
        .unwrap_err()
        .error;
    assert_eq!(err.code, codes::PLACEHOLDER);
    assert!(err.message.contains("nowhere"), "{}", err.message);
    assert!(server.requests().is_empty());
}
