//! What Slack's Events API sends, read into what the controller acts on:
//! the URL check Slack makes when the Request URL is saved, and people's
//! messages in channels. Everything else is acknowledged and ignored.

use serde::Deserialize;
use serde_json::Value;

use crate::chat::command::Heard;

/// One Events API request, as far as the controller cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    /// `url_verification`: answer with this challenge.
    Challenge(String),
    /// A person's message in a channel.
    Message(Message),
    /// Anything else (other event types, bots, edits): why it is ignored.
    Ignored(String),
}

/// A person's message, as the `message` event carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The channel id (`C…`, `G…`, `D…`).
    pub channel: String,
    /// The author's user id (`U…`, `W…`).
    pub user: String,
    /// The text, with Slack's `&amp;`, `&lt;` and `&gt;` turned back.
    pub text: String,
    /// The message's `ts`: its id in the channel.
    pub ts: String,
    /// The thread it was written in, if any.
    pub thread_ts: Option<String>,
}

/// The body is not an Events API request.
#[derive(Debug, thiserror::Error)]
#[error("the body is not a Slack Events API request: {0}")]
pub struct EventError(String);

#[derive(Deserialize)]
#[serde(tag = "type")]
enum Envelope {
    #[serde(rename = "url_verification")]
    UrlVerification { challenge: String },
    #[serde(rename = "event_callback")]
    EventCallback { event: Value },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct MessageEvent {
    #[serde(rename = "type")]
    kind: String,
    subtype: Option<String>,
    bot_id: Option<String>,
    channel: Option<String>,
    user: Option<String>,
    text: Option<String>,
    ts: Option<String>,
    thread_ts: Option<String>,
}

/// Reads a (verified) request body.
pub fn read(body: &[u8]) -> Result<Incoming, EventError> {
    let envelope: Envelope = serde_json::from_slice(body).map_err(|e| EventError(e.to_string()))?;
    Ok(match envelope {
        Envelope::UrlVerification { challenge } => Incoming::Challenge(challenge),
        Envelope::EventCallback { event } => message(event),
        Envelope::Other => Incoming::Ignored("not an event_callback".into()),
    })
}

/// A `message` event written by a person, or why it is ignored: edits,
/// deletions, joins and the like come with a `subtype`; bots (this one's
/// own answers among them) with a `bot_id`.
fn message(event: Value) -> Incoming {
    let Ok(event) = serde_json::from_value::<MessageEvent>(event) else {
        return Incoming::Ignored("an event without the fields of a message".into());
    };
    if event.kind != "message" {
        return Incoming::Ignored(format!("a `{}` event", event.kind));
    }
    if let Some(subtype) = event.subtype {
        return Incoming::Ignored(format!("a message of subtype `{subtype}`"));
    }
    if event.bot_id.is_some() {
        return Incoming::Ignored("a bot's message".into());
    }
    let (Some(channel), Some(user), Some(text), Some(ts)) =
        (event.channel, event.user, event.text, event.ts)
    else {
        return Incoming::Ignored("a message without channel, user, text or ts".into());
    };
    Incoming::Message(Message {
        channel,
        user,
        text: unescape(&text),
        ts,
        thread_ts: event.thread_ts,
    })
}

/// Slack escapes these three in message text; a command's words are the
/// person's, so they are turned back.
fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

impl Message {
    /// The message as any chat's follower hands it to
    /// [`crate::chat::command::decide`].
    ///
    /// Its event id is `<channel>/<ts>`: a `ts` is unique only within its
    /// channel, and it names the message itself, whereas Slack's
    /// `event_id` names one delivery of one event type (the same message
    /// can arrive as more than one event). So a retry, a duplicate delivery
    /// or a second subscription all lead to the same Run name.
    pub fn heard(&self, connection: &str) -> Heard {
        Heard {
            connection: connection.to_string(),
            room: self.channel.clone(),
            event_id: format!("{}/{}", self.channel, self.ts),
            thread_root: self.thread_ts.clone().unwrap_or_else(|| self.ts.clone()),
            sender: self.user.clone(),
            text: self.text.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn callback(event: Value) -> Incoming {
        let body = json!({
            "token": "legacy", "team_id": "T1", "api_app_id": "A1",
            "type": "event_callback", "event_id": "Ev1", "event_time": 1700000000,
            "event": event,
        });
        read(body.to_string().as_bytes()).expect("reads")
    }

    #[test]
    fn a_url_verification_is_answered_with_its_challenge() {
        let body = br#"{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
        assert_eq!(
            read(body).expect("reads"),
            Incoming::Challenge("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P".into())
        );
    }

    #[test]
    fn a_persons_message_is_heard_with_its_thread() {
        let incoming = callback(json!({
            "type": "message", "channel": "C024BE91L", "user": "U2147483697",
            "text": "!review a &lt;b&gt; &amp;amp; c", "ts": "1355517523.000005",
            "channel_type": "channel", "event_ts": "1355517523.000005",
        }));
        let Incoming::Message(message) = incoming else {
            panic!("a message: {incoming:?}");
        };
        assert_eq!(message.text, "!review a <b> &amp; c");
        let heard = message.heard("team-slack");
        assert_eq!(heard.event_id, "C024BE91L/1355517523.000005");
        assert_eq!(heard.thread_root, "1355517523.000005");
        assert_eq!(
            (heard.room.as_str(), heard.sender.as_str()),
            ("C024BE91L", "U2147483697")
        );
        assert_eq!(heard.connection, "team-slack");

        let Incoming::Message(reply) = callback(json!({
            "type": "message", "channel": "C1", "user": "U1", "text": "!review",
            "ts": "2.000002", "thread_ts": "1.000001",
        })) else {
            panic!("a reply in a thread");
        };
        assert_eq!(reply.heard("c").thread_root, "1.000001");
        assert_eq!(reply.heard("c").event_id, "C1/2.000002");
    }

    #[test]
    fn bots_edits_and_other_events_are_ignored() {
        for event in [
            json!({"type": "message", "subtype": "bot_message", "channel": "C1", "text": "!review", "ts": "1.1", "bot_id": "B1"}),
            json!({"type": "message", "channel": "C1", "user": "U1", "text": "!review", "ts": "1.1", "bot_id": "B1"}),
            json!({"type": "message", "subtype": "message_changed", "channel": "C1", "ts": "1.2",
                   "message": {"user": "U1", "text": "!review", "ts": "1.1"}}),
            json!({"type": "app_mention", "channel": "C1", "user": "U1", "text": "<@U0> !review", "ts": "1.1"}),
            json!({"type": "message", "channel": "C1", "user": "U1", "ts": "1.1"}),
            json!("not an object"),
        ] {
            assert!(
                matches!(callback(event.clone()), Incoming::Ignored(_)),
                "{event}"
            );
        }
        assert!(matches!(
            read(br#"{"type": "app_rate_limited", "minute_rate_limited": 1}"#).expect("reads"),
            Incoming::Ignored(_)
        ));
    }

    #[test]
    fn a_body_that_is_not_json_is_an_error() {
        let error = read(b"token=x&command=/review").expect_err("not JSON");
        assert!(
            error
                .to_string()
                .starts_with("the body is not a Slack Events API request"),
            "{error}"
        );
        assert!(read(br#"{"challenge": "x"}"#).is_err(), "no type");
    }
}
