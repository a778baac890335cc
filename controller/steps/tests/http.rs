//! The http executor against a stand-in server on 127.0.0.1.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{Answer, StandIn, assert_error, assert_error_starting, assert_unresolved, work};
use coxswain_core::api::{
    HttpBody, HttpHeader, HttpStep, NameValue, SecretKeyRef, StepError, ValueFrom,
};
use coxswain_core::engine::{Task, Work, codes};
use coxswain_steps::Executor;
use coxswain_steps::http::HttpExecutor;
use coxswain_steps::net::{self, NetPolicy, parse_block};
use coxswain_steps::secrets::MapSecrets;
use serde_json::{Value, json};

const SECRET: &str = "tok-very-secret-42";

fn executor() -> HttpExecutor {
    net::install_crypto_provider();
    HttpExecutor::new(Arc::new(MapSecrets::new().with("api", "token", SECRET))).unwrap()
}

/// Why a plain GET of `url` failed.
async fn get_error(url: &str) -> StepError {
    let step = HttpStep {
        url: url.into(),
        ..Default::default()
    };
    executor().run(&http_work(step)).await.unwrap_err().error
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
    let text = HttpBody {
        text: Some("T: {{src.json.amp}} / {{src.text}}".into()),
        ..Default::default()
    };
    let form = HttpBody {
        form: Some(vec![
            nv("a", "{{src.json.amp}}"),
            nv("b c", "{{src.json.name}}"),
        ]),
        ..Default::default()
    };
    for (method, body, sent, content_type) in [
        (
            "PUT",
            text,
            "T: x&y=z / raw text",
            "text/plain; charset=utf-8",
        ),
        (
            "POST",
            form,
            "a=x%26y%3Dz&b+c=a%2Fb%3Fc%23d%40e+f",
            "application/x-www-form-urlencoded",
        ),
    ] {
        let server = StandIn::start(Answer::text(200, "fine")).await;
        let step = HttpStep {
            method: Some(method.into()),
            url: server.base.clone(),
            body: Some(body),
            ..Default::default()
        };
        executor().run(&http_work(step)).await.unwrap();
        let seen = server.only();
        assert_eq!(seen.body_text(), sent, "{method}");
        assert_eq!(
            seen.header("content-type").as_deref(),
            Some(content_type),
            "{method}"
        );
    }
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
    let err = get_error(&format!("{}/items/1?key=hidden", server.base)).await;
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
        headers: vec![bound_header("Authorization")],
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
    let err = get_error(&format!("{}/{{{{ghost.json.id}}}}", server.base)).await;
    assert_unresolved(
        &err,
        "No value for {{ghost.json.id}}: that step did not run or did not produce it.",
        &server,
    );
}

#[tokio::test]
async fn a_dot_segment_value_in_the_path_fails_before_any_request() {
    for id in ["..", ".", "%2e%2E", "%2e"] {
        let server = StandIn::start(Answer::text(200, "published")).await;
        let mut step = secret_header_step(&server.base);
        step.method = Some("POST".into());
        step.url = format!("{}/api/drafts/{{{{input.json.id}}}}/publish", server.base);
        let work = work(Task::Http(step), json!({"id": id}), &[]);
        let err = executor().run(&work).await.unwrap_err().error;
        assert_eq!(err.code, codes::PLACEHOLDER, "{id}");
        assert_eq!(
            err.message,
            "The value for {{input.json.id}} would make a segment of the URL's path `.` or `..` (also when percent-decoded), which would send the request to another path; a value in the path cannot be `.` or `..`.",
            "{id}"
        );
        assert!(
            server.requests().is_empty(),
            "{id}: {:?}",
            server.requests()
        );
    }
    // Beside it, an honest id reaches the endpoint the flow names.
    let server = StandIn::start(Answer::text(200, "published")).await;
    let mut step = secret_header_step(&server.base);
    step.url = format!("{}/api/drafts/{{{{input.json.id}}}}/publish", server.base);
    let work = work(Task::Http(step), json!({"id": "d-17.v2"}), &[]);
    executor().run(&work).await.unwrap();
    assert_eq!(server.only().uri, "/api/drafts/d-17.v2/publish");
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
    assert_error(&err, codes::PLACEHOLDER, &["line break"]);
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn link_local_and_metadata_addresses_are_refused() {
    for url in [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/latest",
        "http://[::ffff:169.254.169.254]/",
        "http://[::169.254.169.254]/",
        "http://[64:ff9b::a9fe:a9fe]/",
        "http://[2002:a9fe:a9fe::1]/",
    ] {
        let err = get_error(url).await;
        assert_error_starting(&err, codes::HTTP, "refused to connect to");
    }
}

#[tokio::test]
async fn a_configured_deny_list_applies_to_names_too() {
    let server = StandIn::start(Answer::text(200, "")).await;
    net::install_crypto_provider();
    let deny = NetPolicy::local().denying([
        parse_block("127.0.0.0/8").unwrap(),
        parse_block("::1").unwrap(),
    ]);
    let exec = HttpExecutor::with_policy(Arc::new(MapSecrets::new()), deny).unwrap();
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
    let (base, server) = common::serve(app).await;
    let err = get_error(&format!("{base}/start")).await;
    server.abort();
    assert_error(
        &err,
        codes::HTTP,
        &["refused to connect to 169.254.169.254"],
    );
}

/// A server that answers every request with `status` and `Location:
/// location`, recording what it receives.
async fn redirector(status: u16, location: String) -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
    use axum::http::{HeaderMap, StatusCode, Uri};
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    let app = axum::Router::new().fallback(move |uri: Uri, _headers: HeaderMap| {
        let record = record.clone();
        let location = location.clone();
        async move {
            record.lock().unwrap().push(uri.to_string());
            (
                StatusCode::from_u16(status).unwrap(),
                [("location", location)],
                "moved",
            )
        }
    });
    let (base, _server) = common::serve(app).await;
    (base, seen)
}

fn bound_header(name: &str) -> HttpHeader {
    HttpHeader {
        name: name.into(),
        value: None,
        value_from: Some(ValueFrom {
            secret_key_ref: SecretKeyRef {
                name: "api".into(),
                key: "token".into(),
            },
        }),
    }
}

#[tokio::test]
async fn a_step_with_a_secret_does_not_follow_a_redirect_to_another_origin() {
    for (status, method, header) in [(302, "GET", "X-Api-Key"), (307, "POST", "Authorization")] {
        let other = StandIn::start(Answer::text(200, "second origin")).await;
        let (first, _) = redirector(status, format!("{}/landing?leak=1", other.base)).await;
        let step = HttpStep {
            method: Some(method.into()),
            url: format!("{first}/start?q=private"),
            headers: vec![bound_header(header)],
            body: Some(HttpBody {
                text: Some("the body".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let err = executor().run(&http_work(step)).await.unwrap_err().error;
        assert_eq!(err.code, codes::HTTP, "{status}");
        assert!(
            err.message.contains(&format!(
                "refused to follow the redirect to {}/landing",
                other.base
            )),
            "{status}: {}",
            err.message
        );
        assert!(
            err.message.contains(&format!("bound to {first}")),
            "{status}: {}",
            err.message
        );
        assert!(
            other.requests().is_empty(),
            "{status}: the second origin was reached: {:?}",
            other.requests()
        );
    }
}

#[tokio::test]
async fn a_step_with_a_secret_follows_redirects_within_its_origin() {
    use axum::http::HeaderMap;
    let seen = Arc::new(std::sync::Mutex::new(Vec::<(String, Option<String>)>::new()));
    let record = seen.clone();
    let app = axum::Router::new()
        .route(
            "/start",
            axum::routing::post(|| async { axum::response::Redirect::temporary("/final") }),
        )
        .route(
            "/final",
            axum::routing::post(move |headers: HeaderMap, body: String| {
                let record = record.clone();
                async move {
                    let key = headers
                        .get("x-api-key")
                        .map(|v| v.to_str().unwrap().to_string());
                    record.lock().unwrap().push((body, key));
                    "done"
                }
            }),
        );
    let (base, _server) = common::serve(app).await;
    let step = HttpStep {
        method: Some("POST".into()),
        url: format!("{base}/start"),
        headers: vec![bound_header("X-Api-Key")],
        body: Some(HttpBody {
            text: Some("the body".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let done = executor().run(&http_work(step)).await.unwrap();
    assert_eq!(done.output["body"], "done");
    assert_eq!(
        seen.lock().unwrap().clone(),
        vec![("the body".to_string(), Some(SECRET.to_string()))]
    );
}

#[tokio::test]
async fn redirects_carry_no_referer() {
    let other = StandIn::start(Answer::text(200, "arrived")).await;
    let (first, _) = redirector(302, format!("{}/landing", other.base)).await;
    let step = HttpStep {
        url: format!("{first}/start?token=in-the-query"),
        ..Default::default()
    };
    let done = executor().run(&http_work(step)).await.unwrap();
    assert_eq!(done.output["body"], "arrived");
    let seen = other.only();
    assert_eq!(seen.uri, "/landing");
    assert_eq!(seen.header("referer"), None);
}

#[tokio::test]
async fn a_secret_echoed_by_the_server_is_redacted_from_the_record() {
    use axum::http::{HeaderMap, StatusCode};
    for status in [500u16, 200] {
        let app = axum::Router::new().fallback(move |headers: HeaderMap| async move {
            let auth = headers
                .get("authorization")
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default();
            (
                StatusCode::from_u16(status).unwrap(),
                [("content-type", "application/json")],
                serde_json::json!({"error": format!("bad token {auth}"), "echo": auth}).to_string(),
            )
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let step = HttpStep {
            keep: BTreeMap::from([("echo".to_string(), "json.echo".to_string())]),
            ..secret_header_step(&format!("http://{addr}"))
        };
        let result = executor().run(&http_work(step)).await;
        let recorded = match result {
            Ok(done) => {
                assert_eq!(status, 200);
                assert_eq!(done.output["values"]["echo"], "[redacted secret api/token]");
                format!("{} {}", done.output, done.text.unwrap_or_default())
            }
            Err(failed) => {
                assert_eq!(status, 500);
                failed.error.message
            }
        };
        assert!(!recorded.contains(SECRET), "{status}: {recorded}");
        assert!(
            recorded.contains("bad token [redacted secret api/token]"),
            "{status}: {recorded}"
        );
    }
}

#[tokio::test]
async fn the_cluster_policy_refuses_loopback_unless_allowed() {
    net::install_crypto_provider();
    let server = StandIn::start(Answer::text(200, "inside")).await;
    let step = HttpStep {
        url: server.base.clone(),
        ..Default::default()
    };
    let cluster =
        HttpExecutor::with_policy(Arc::new(MapSecrets::new()), NetPolicy::cluster()).unwrap();
    let err = cluster
        .run(&http_work(step.clone()))
        .await
        .unwrap_err()
        .error;
    assert!(
        err.message.starts_with("refused to connect to 127.0.0.1"),
        "{}",
        err.message
    );
    assert!(err.message.contains("127.0.0.0/8"), "{}", err.message);
    assert!(server.requests().is_empty());

    let allowed = NetPolicy::cluster().allowing([parse_block("127.0.0.1").unwrap()]);
    let cluster = HttpExecutor::with_policy(Arc::new(MapSecrets::new()), allowed).unwrap();
    let done = cluster.run(&http_work(step)).await.unwrap();
    assert_eq!(done.output["body"], "inside");
}

#[tokio::test]
async fn bodies_stop_at_what_a_record_keeps_by_default() {
    let server = StandIn::start(Answer::text(200, &"x".repeat(300 << 10))).await;
    let err = get_error(&server.base).await;
    assert_eq!(err.code, codes::HTTP);
    assert!(
        err.message.ends_with("is larger than the 256 KiB limit"),
        "{}",
        err.message
    );
}
