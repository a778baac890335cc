//! The chat harness itself, against the real Synapse of `e2e/chat/up`: what
//! the message step and conversation commands rely on — ordered history,
//! thread relations, per-device transaction ids — really holds there, and
//! the harness's rooms, users and errors are what the chat tests assume.

use std::time::Duration;

use coxswain_e2e::chat::thread_root;
use coxswain_e2e::{Error, Result, Synapse};
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(60);

fn bodies(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["content"]["body"].as_str().unwrap_or_default())
        .collect()
}

fn ids(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["event_id"].as_str().unwrap_or_default())
        .collect()
}

/// More messages than one page of history (50) and than Synapse's default
/// burst (10): the raised rate limits and the paging are both needed.
#[tokio::test]
async fn two_users_in_a_fresh_room_see_each_others_messages_in_order() -> Result<()> {
    let synapse = Synapse::start().await?;
    let (alice, bob) = (synapse.user("alice")?, synapse.user("bob")?);
    let room = synapse.new_room(&alice, "in order", &[&bob]).await?;

    let mut sent = Vec::new();
    let mut expected = Vec::new();
    for i in 0..60 {
        let (who, name) = if i % 2 == 0 {
            (&alice, "alice")
        } else {
            (&bob, "bob")
        };
        let body = format!("{name} says {i}");
        sent.push(synapse.send_text(who, &room, &body).await?);
        expected.push(body);
    }

    for reader in [&alice, &bob] {
        let events = synapse.events(reader, &room).await?;
        assert_eq!(bodies(&events), expected, "as {} reads it", reader.id);
        assert_eq!(ids(&events), sent, "as {} reads it", reader.id);
        let senders: Vec<&str> = events
            .iter()
            .map(|e| e["sender"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(senders[..2], [alice.id.as_str(), bob.id.as_str()]);
    }
    Ok(())
}

#[tokio::test]
async fn a_thread_reply_carries_the_thread_relation_to_its_root() -> Result<()> {
    let synapse = Synapse::start().await?;
    let (alice, bob) = (synapse.user("alice")?, synapse.user("bob")?);
    let room = synapse.new_room(&alice, "threads", &[&bob]).await?;

    let root = synapse
        .send_text(&alice, &room, "!review the intro")
        .await?;
    synapse.send_text(&alice, &room, "unrelated").await?;
    let reply = synapse.send_in_thread(&bob, &room, &root, "on it").await?;

    let event = synapse.event(&alice, &room, &reply).await?;
    assert_eq!(event["content"]["m.relates_to"]["rel_type"], "m.thread");
    assert_eq!(event["content"]["m.relates_to"]["event_id"], root.as_str());
    assert_eq!(event["sender"], bob.id.as_str());

    let found = synapse
        .wait_for(
            &alice,
            &room,
            |e| thread_root(e) == Some(root.as_str()),
            BOUND,
        )
        .await?;
    assert_eq!(found["event_id"], reply.as_str());
    assert_eq!(
        synapse.transcript(&alice, &room).await?,
        "alice: !review the intro\n  ↳ bob: on it\nalice: unrelated\n"
    );
    Ok(())
}

/// The message step's idempotency: a retried PUT with the same transaction
/// id returns the first event and posts nothing, even with other content.
/// Synapse keys transaction ids by user and device: another user, or the
/// same user logged in again (a new device, a new token), posts anew.
#[tokio::test]
async fn sending_twice_with_one_transaction_id_gives_one_event() -> Result<()> {
    let synapse = Synapse::start().await?;
    let (alice, bob) = (synapse.user("alice")?, synapse.user("bob")?);
    let room = synapse.new_room(&alice, "txn", &[&bob]).await?;
    let text = |body: &str| json!({"msgtype": "m.text", "body": body});

    let first = synapse
        .send_message(&alice, &room, "attempt-1", &text("first"))
        .await?;
    let again = synapse
        .send_message(&alice, &room, "attempt-1", &text("second"))
        .await?;
    assert_eq!(again, first);
    assert_eq!(bodies(&synapse.events(&alice, &room).await?), ["first"]);

    let by_bob = synapse
        .send_message(&bob, &room, "attempt-1", &text("bob's"))
        .await?;
    let alice_again = synapse.login("alice").await?;
    assert_ne!(alice_again.token, alice.token);
    let new_device = synapse
        .send_message(&alice_again, &room, "attempt-1", &text("new device"))
        .await?;
    assert_ne!(by_bob, first);
    assert_ne!(new_device, first);
    let events = synapse.events(&alice, &room).await?;
    assert_eq!(bodies(&events), ["first", "bob's", "new device"]);
    assert_eq!(ids(&events), [&first, &by_bob, &new_device]);
    Ok(())
}

#[tokio::test]
async fn the_shared_room_has_alice_and_bob_joined_and_the_bot_invited() -> Result<()> {
    let synapse = Synapse::start().await?;
    let alice = synapse.user("alice")?;
    let room = synapse.shared_room()?;
    assert_eq!(synapse.shared_room_alias()?, "#review:localhost");
    assert_eq!(
        synapse.resolve_alias(synapse.shared_room_alias()?).await?,
        room
    );
    for name in ["alice", "bob"] {
        let user = synapse.user(name)?;
        assert_eq!(synapse.whoami(&user).await?, user.id);
        let membership = synapse.membership(&alice, room, &user.id).await?;
        assert_eq!(membership.as_deref(), Some("join"), "{name}");
    }
    // invited by up; joined once a controller has followed the room
    let bot = synapse.user("coxswain")?;
    assert_eq!(synapse.whoami(&bot).await?, "@coxswain:localhost");
    let membership = synapse.membership(&alice, room, &bot.id).await?;
    assert!(
        matches!(membership.as_deref(), Some("invite" | "join")),
        "the bot's membership: {membership:?}"
    );

    // the connection Secret a Flow's `command.chat` names speaks as the bot
    let secret = synapse.connection_secret("matrix", &bot);
    assert_eq!(secret["stringData"]["type"], "matrix");
    let data = &secret["stringData"];
    let whoami: Value = reqwest::Client::new()
        .get(format!(
            "{}/_matrix/client/v3/account/whoami",
            data["url"].as_str().unwrap_or_default()
        ))
        .bearer_auth(data["token"].as_str().unwrap_or_default())
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .expect("whoami with the Secret's url and token")
        .json()
        .await
        .expect("whoami answers JSON");
    assert_eq!(whoami["user_id"], bot.id.as_str());
    Ok(())
}

#[tokio::test]
async fn a_registered_user_is_made_once_and_logs_in_again_later() -> Result<()> {
    let synapse = Synapse::start().await?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let name = format!("carol-{}-{nanos}", std::process::id());

    match synapse.user(&name) {
        Err(Error::Chat(message)) => assert!(message.contains("register"), "{message}"),
        other => panic!("a user up did not make: {other:?}"),
    }
    let made = synapse.register(&name).await?;
    let again = synapse.register(&name).await?;
    assert_eq!(made.id, format!("@{name}:{}", synapse.server_name()?));
    assert_eq!(again.id, made.id);
    assert_ne!(again.token, made.token);
    assert_eq!(synapse.whoami(&made).await?, made.id);
    assert_eq!(synapse.whoami(&again).await?, made.id);

    let alice = synapse.user("alice")?;
    let room = synapse.new_room(&alice, "with carol", &[&made]).await?;
    synapse.send_text(&again, &room, "hello").await?;
    let seen = synapse
        .wait_for(&alice, &room, |e| e["sender"] == made.id.as_str(), BOUND)
        .await?;
    assert_eq!(seen["content"]["body"], "hello");
    Ok(())
}

/// Rooms keep parallel tests apart: someone outside a room reads nothing
/// of it, and the error says what Matrix said.
#[tokio::test]
async fn someone_outside_a_room_cannot_read_it() -> Result<()> {
    let synapse = Synapse::start().await?;
    let (alice, bob) = (synapse.user("alice")?, synapse.user("bob")?);
    let room = synapse.new_room(&alice, "alice alone", &[]).await?;
    synapse.send_text(&alice, &room, "private").await?;

    match synapse.events(&bob, &room).await {
        Err(Error::MatrixRefused {
            status, errcode, ..
        }) => {
            assert_eq!(status, 403);
            assert_eq!(errcode, "M_FORBIDDEN");
        }
        other => panic!("bob read a room he is not in: {other:?}"),
    }
    Ok(())
}
