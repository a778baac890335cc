//! The http executor against a stand-in server on 127.0.0.1.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{Answer, StandIn, work};
use coxswain::api::{HttpBody, HttpHeader, HttpStep, NameValue, SecretKeyRef, ValueFrom};
use coxswain::engine::{Task, Work, codes};
use coxswain::steps::Executor;
use coxswain::steps::http::HttpExecutor;
use coxswain::steps::net::DenyList;
use coxswain::steps::secrets::MapSecrets;
use serde_json::{Value, json};

const SECRET: &str = "tok-very-secret-42";

fn executor() -> HttpExecutor {
    HttpExecutor::new(Arc::new(MapSecrets::new().with("api", "token", SECRET))).unwrap()
}

/// Work whose step `src` completed with an awkward output.
fn http_work(step: HttpStep) -> Work {
    work(
        Task::Http(step),
        json!({"who": "ada"}),
        &[(
            "src",
            json!({
                "name": "a/b?c#d@e f",
                "amp": "x&y=z",
                "quote": "say \"hi\"\n",
                "tags": ["a", "b"],
                "n": 3,
                "sneaky": "{{src.json.n}} $steps.src.output",
            }),
            "raw text",
        )],
    )
}

fn nv(name: &str, value: &str) -> NameValue {
    NameValue {
        name: name.into(),
        value: value.into(),
    }
}

#[tokio::test]
async fn placeholders_reach_the_server_encoded_for_their_place() {
    let server = StandIn::start(Answer::json(200, json!({"ok": 1}))).await;
    let step = HttpStep {
        method: Some("post".into()),
        url: format!("{}/items/{{{{src.json.name}}}}", server.base),
        query: vec![nv("q", "{{src.json.amp}}"), nv("who", "{{input.json.who}}")],
        headers: vec![HttpHeader {
            name: "X-Name".into(),
            value: Some("n={{src.json.name}}".into()),
            value_from: None,
        }],
        body: Some(HttpBody {
            json: Some(
                r#"{"quote": "{{src.json.quote}}", "tags": {{src.json.tags}}, "n": {{src.json.n}}, "sneaky": "{{src.json.sneaky}}"}"#
                    .into(),
            ),
            ..Default::default()
        }),
        ..Default::default()
    };
    executor().run(&http_work(step)).await.unwrap();
    let seen = server.only();
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.uri, "/items/a%2Fb%3Fc%23d%40e%20f?q=x%26y%3Dz&who=ada");
    assert_eq!(seen.header("x-name").as_deref(), Some("n=a/b?c#d@e f"));
    assert_eq!(
        seen.header("content-type").as_deref(),
        Some("application/json")
    );
    assert_eq!(
        seen.body_json(),
        json!({
            "quote": "say \"hi\"\n",
            "tags": ["a", "b"],
            "n": 3,
            "sneaky": "{{src.json.n}} $steps.src.output",
        })
    );
}

#[tokio::test]
async fn text_and_form_bodies() {
    let server = StandIn::start(Answer::text(200, "fine")).await;
    let step = HttpStep {
        method: Some("PUT".into()),
        url: server.base.clone(),
        body: Some(HttpBody {
            text: Some("T: {{src.json.amp}} / {{src.text}}".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    executor().run(&http_work(step)).await.unwrap();
    let seen = server.only();
    assert_eq!(seen.body_text(), "T: x&y=z / raw text");
    assert_eq!(
        seen.header("content-type").as_deref(),
        Some("text/plain; charset=utf-8")
    );

    let server = StandIn::start(Answer::text(200, "fine")).await;
    let step = HttpStep {
        method: Some("POST".into()),
        url: server.base.clone(),
        body: Some(HttpBody {
            form: Some(vec![
                nv("a", "{{src.json.amp}}"),
                nv("b c", "{{src.json.name}}"),
            ]),
            ..Default::default()
        }),
        ..Default::default()
    };
    executor().run(&http_work(step)).await.unwrap();
    let seen = server.only();
    assert_eq!(seen.body_text(), "a=x%26y%3Dz&b+c=a%2Fb%3Fc%23d%40e+f");
    assert_eq!(
        seen.header("content-type").as_deref(),
        Some("application/x-www-form-urlencoded")
    );
}

#[tokio::test]
async fn idempotency_key_and_output_with_kept_values() {
    let server = StandIn::start(Answer::json(
        201,
        json!({"id": "abc", "items": [{"url": "u0"}, {"url": "u1"}]}),
    ))
    .await;
    let step = HttpStep {
        url: server.base.clone(),
        keep: BTreeMap::from([
            ("id".to_string(), "json.id".to_string()),
            ("second".to_string(), "json.items.1.url".to_string()),
            ("nowhere".to_string(), "json.items.5.url".to_string()),
            ("code".to_string(), "status".to_string()),
        ]),
        ..Default::default()
    };
    let done = executor().run(&http_work(step)).await.unwrap();
    let seen = server.only();
    assert_eq!(seen.method, "GET");
    assert_eq!(
        seen.header("idempotency-key").as_deref(),
        Some("uid-123/step_one/2")
    );
    assert_eq!(
        done.output,
        json!({
            "status": 201,
            "ok": true,
            "body": {"id": "abc", "items": [{"url": "u0"}, {"url": "u1"}]},
            "values": {"id": "abc", "second": "u1", "nowhere": null, "code": 201},
        })
    );
    assert_eq!(
        done.text.as_deref(),
        Some(r#"{"id":"abc","items":[{"url":"u0"},{"url":"u1"}]}"#)
    );
}

#[tokio::test]
async fn a_body_that_is_not_json_is_text() {
    let server = StandIn::start(Answer::text(200, "plain answer")).await;
    let step = HttpStep {
        url: server.base.clone(),
        ..Default::default()
    };
    let done = executor().run(&http_work(step)).await.unwrap();
    assert_eq!(done.output["body"], "plain answer");
}

#[tokio::test]
async fn non_2xx_fails_with_status_and_preview() {
    let server = StandIn::start(Answer::text(404, "no such item")).await;
    let step = HttpStep {
        url: format!("{}/items/1?key=hidden", server.base),
        ..Default::default()
    };
    let err = executor().run(&http_work(step)).await.unwrap_err().error;
    assert_eq!(err.code, codes::HTTP);
    assert_eq!(
        err.message,
        format!(
            "GET {}/items/1 answered 404 Not Found: no such item",
            server.base
        )
    );
}

#[tokio::test]
async fn responses_are_capped() {
    let server = StandIn::start(Answer::text(200, &"x".repeat(5000))).await;
    let step = HttpStep {
        url: server.base.clone(),
        ..Default::default()
    };
    let err = executor()
        .with_response_limit(1024)
        .run(&http_work(step))
        .await
        .unwrap_err()
        .error;
    assert_eq!(err.code, codes::HTTP);
    assert!(
        err.message.ends_with("is larger than the 1 KiB limit"),
        "{}",
        err.message
    );
}

fn secret_header_step(base: &str) -> HttpStep {
    HttpStep {
        url: base.to_string(),
        headers: vec![HttpHeader {
            name: "Authorization".into(),
            value: None,
            value_from: Some(ValueFrom {
                secret_key_ref: SecretKeyRef {
                    name: "api".into(),
                    key: "token".into(),
                },
            }),
        }],
        ..Default::default()
    }
}

#[tokio::test]
async fn secret_headers_reach_the_server_and_nothing_else() {
    let server = StandIn::start(Answer::json(200, json!({"fine": true}))).await;
    let done = executor()
        .run(&http_work(secret_header_step(&server.base)))
        .await
        .unwrap();
    assert_eq!(
        server.only().header("authorization").as_deref(),
        Some(SECRET)
    );
    assert!(!done.output.to_string().contains(SECRET));
    assert!(!done.text.unwrap_or_default().contains(SECRET));

    let server = StandIn::start(Answer::text(500, "broken")).await;
    let err = executor()
        .run(&http_work(secret_header_step(&server.base)))
        .await
        .unwrap_err()
        .error;
    assert!(!err.message.contains(SECRET), "{}", err.message);
    assert!(!format!("{err:?}").contains(SECRET));
    assert!(!format!("{:?}", executor()).contains(SECRET));
}

#[tokio::test]
async fn a_missing_value_fails_with_the_exact_message() {
    let server = StandIn::start(Answer::text(200, "")).await;
    let step = HttpStep {
        url: format!("{}/{{{{ghost.json.id}}}}", server.base),
        ..Default::default()
    };
    let err = executor().run(&http_work(step)).await.unwrap_err().error;
    assert_eq!(err.code, codes::PLACEHOLDER);
    assert_eq!(
        err.message,
        "No value for {{ghost.json.id}}: that step did not run or did not produce it."
    );
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn a_line_break_in_a_header_value_is_refused() {
    let server = StandIn::start(Answer::text(200, "")).await;
    let step = HttpStep {
        url: server.base.clone(),
        headers: vec![HttpHeader {
            name: "X-Quote".into(),
            value: Some("{{src.json.quote}}".into()),
            value_from: None,
        }],
        ..Default::default()
    };
    let err = executor().run(&http_work(step)).await.unwrap_err().error;
    assert_eq!(err.code, codes::PLACEHOLDER);
    assert!(err.message.contains("line break"), "{}", err.message);
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn link_local_and_metadata_addresses_are_refused() {
    for url in [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/latest",
        "http://[::ffff:169.254.169.254]/",
    ] {
        let step = HttpStep {
            url: url.into(),
            ..Default::default()
        };
        let err = executor().run(&http_work(step)).await.unwrap_err().error;
        assert_eq!(err.code, codes::HTTP, "{url}");
        assert!(
            err.message.starts_with("refused to connect to"),
            "{url}: {}",
            err.message
        );
    }
}

#[tokio::test]
async fn a_configured_deny_list_applies_to_names_too() {
    let server = StandIn::start(Answer::text(200, "")).await;
    let deny = DenyList::new(vec!["127.0.0.0/8".parse().unwrap(), "::1".parse().unwrap()]);
    let exec = HttpExecutor::with_deny_list(Arc::new(MapSecrets::new()), deny).unwrap();
    let port = server.base.rsplit(':').next().unwrap();
    let step = HttpStep {
        url: format!("http://localhost:{port}/"),
        ..Default::default()
    };
    let err = exec.run(&http_work(step)).await.unwrap_err().error;
    assert!(
        err.message.starts_with("refused to connect to localhost"),
        "{}",
        err.message
    );
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn wrong_task_is_an_error_not_a_panic() {
    let w = work(Task::Script(Default::default()), Value::Null, &[]);
    assert!(executor().run(&w).await.is_err());
}

#[tokio::test]
async fn a_redirect_to_a_metadata_address_is_refused() {
    use axum::response::Redirect;
    let app = axum::Router::new()
        .fallback(|| async { Redirect::temporary("http://169.254.169.254/latest/meta-data/") });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let step = HttpStep {
        url: format!("http://{addr}/start"),
        ..Default::default()
    };
    let err = executor().run(&http_work(step)).await.unwrap_err().error;
    server.abort();
    assert_eq!(err.code, codes::HTTP);
    assert!(
        err.message
            .contains("refused to connect to 169.254.169.254"),
        "{}",
        err.message
    );
}
