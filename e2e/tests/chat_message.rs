//! The `message` step's Matrix target against the real Synapse of
//! `e2e/chat/up`: a flow run with `coxswain run` posts as the bot, the
//! `messageId` it records is the event people see in the room, and an
//! attempt sent twice posts once.
//!
//! `coxswain run` must be built (`cargo build -p coxswain`); Synapse is
//! started by the first test that asks for it.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use coxswain_core::api::{MatrixTarget, MessageStep, SecretKeyRef};
use coxswain_core::engine::{DataView, RunInfo, Task, Work};
use coxswain_e2e::{Result, Synapse};
use coxswain_steps::Executor;
use coxswain_steps::message::MessageExecutor;
use coxswain_steps::secrets::MapSecrets;
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(60);

fn flow(homeserver: &str, room: &str) -> String {
    format!(
        r#"apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata:
  name: announce
spec:
  output:
    event: $steps.tell.output.messageId
    room: $steps.tell.output.conversationName
  steps:
    - key: draft
      script:
        source: printf '%s' 'v1.2 {{{{not a placeholder}}}}'
    - key: tell
      message:
        text: "Released {{{{draft.text}}}}"
        matrix:
          homeserver: "{homeserver}"
          room: "{room}"
          tokenSecretRef: {{name: matrix-bot, key: token}}
"#
    )
}

#[tokio::test]
async fn a_flow_run_posts_to_the_room_and_records_the_event_people_see() -> Result<()> {
    let synapse = Synapse::start().await?;
    let (alice, bot) = (synapse.user("alice")?, synapse.user("coxswain")?);
    let room = synapse.new_room(&alice, "Release notes", &[&bot]).await?;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("announce.yaml");
    std::fs::write(&path, flow(synapse.url(), &room))?;

    let out = Command::new(coxswain_e2e::coxswain_bin()?)
        .args(["run", &path.to_string_lossy(), "--output", "json"])
        .env("COXSWAIN_SECRET_MATRIX_BOT_TOKEN", &bot.token)
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains(&bot.token), "{stderr}");
    let record: Value = serde_json::from_slice(&out.stdout).expect("the record is JSON");
    assert_eq!(record["phase"], "Succeeded", "{record:#}");
    let event_id = record["output"]["event"]
        .as_str()
        .expect("messageId is text")
        .to_string();
    assert!(event_id.starts_with('$'), "{event_id}");
    assert_eq!(record["output"]["room"], "Release notes");

    let seen = synapse
        .wait_for(&alice, &room, |e| e["event_id"] == event_id.as_str(), BOUND)
        .await?;
    assert_eq!(seen["sender"], bot.id.as_str());
    assert_eq!(
        seen["content"],
        json!({"msgtype": "m.text", "body": "Released v1.2 {{not a placeholder}}"})
    );
    let events = synapse.events(&alice, &room).await?;
    assert_eq!(
        events.len(),
        1,
        "{}",
        coxswain_e2e::chat::transcript(&events)
    );
    Ok(())
}

fn work(step: MessageStep, uid: &str, attempt: u32) -> Work {
    Work {
        step: "tell".into(),
        part: None,
        attempt,
        iteration: None,
        task: Task::Message(step),
        input: json!({}),
        timeout: Some(BOUND),
        data: DataView::default(),
        run: RunInfo {
            name: "announce-1".into(),
            namespace: "local".into(),
            uid: uid.into(),
            since: None,
        },
        review: None,
        lookups: Vec::new(),
    }
}

#[tokio::test]
async fn an_attempt_sent_twice_posts_once_and_the_next_attempt_posts_again() -> Result<()> {
    let synapse = Synapse::start().await?;
    let (alice, bot) = (synapse.user("alice")?, synapse.user("coxswain")?);
    let room = synapse.new_room(&alice, "Retries", &[&bot]).await?;
    let alias_local = format!("retries-{}", rand_suffix());
    let alias = format!("#{alias_local}:{}", synapse.server_name()?);
    put_alias(&synapse, &alice.token, &alias, &room).await?;

    coxswain_steps::net::install_crypto_provider();
    let exec = MessageExecutor::new(Arc::new(MapSecrets::new().with(
        "matrix-bot",
        "token",
        &bot.token,
    )))
    .expect("executor");
    let step = MessageStep {
        text: "deploying".into(),
        matrix: Some(MatrixTarget {
            homeserver: synapse.url().into(),
            room: alias.clone(),
            token_secret_ref: SecretKeyRef {
                name: "matrix-bot".into(),
                key: "token".into(),
            },
            thread: None,
        }),
        ..Default::default()
    };
    let uid = format!("uid-{}", rand_suffix());
    let first = exec
        .run(&work(step.clone(), &uid, 1))
        .await
        .expect("posted");
    let again = exec
        .run(&work(step.clone(), &uid, 1))
        .await
        .expect("posted");
    assert_eq!(first.output, again.output);
    assert_eq!(first.output["conversationName"], "Retries");
    let next = exec.run(&work(step, &uid, 2)).await.expect("posted");
    assert_ne!(next.output["messageId"], first.output["messageId"]);

    let events = synapse.events(&alice, &room).await?;
    let ids: Vec<&str> = events
        .iter()
        .map(|e| e["event_id"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        ids,
        [
            first.output["messageId"].as_str().unwrap_or("?"),
            next.output["messageId"].as_str().unwrap_or("?"),
        ],
        "{}",
        coxswain_e2e::chat::transcript(&events)
    );
    Ok(())
}

/// Points `alias` at `room` (`PUT /directory/room/{alias}`) as `token`'s user.
async fn put_alias(synapse: &Synapse, token: &str, alias: &str, room: &str) -> Result<()> {
    let mut url = reqwest::Url::parse(synapse.url()).expect("homeserver URL");
    url.path_segments_mut().expect("a base URL").extend([
        "_matrix",
        "client",
        "v3",
        "directory",
        "room",
        alias,
    ]);
    let response = reqwest::Client::new()
        .put(url)
        .bearer_auth(token)
        .json(&json!({"room_id": room}))
        .send()
        .await
        .map_err(|e| coxswain_e2e::Error::Chat(format!("setting the alias {alias}: {e}")))?;
    let status = response.status();
    if !status.is_success() {
        let body = response.text().await.unwrap_or_default();
        return Err(coxswain_e2e::Error::Chat(format!(
            "setting the alias {alias}: {status} {body}"
        )));
    }
    Ok(())
}

/// A suffix that keeps aliases and run uids apart between test runs on the
/// same (persistent) homeserver.
fn rand_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{nanos:x}-{}", std::process::id())
}
