//! A Matrix client-server API client: just the calls Coxswain makes, over
//! the network policy's HTTP client.
//!
//! Messages are sent with `PUT …/send/m.room.message/{txnId}`. The homeserver
//! remembers each transaction id of an access token and answers a repeat with
//! the first event's id, so a caller that derives the id from what it is
//! answering (a run's attempt, a chat event) never posts twice.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, HeaderValue};
use reqwest::{Method, Url};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::net::{self, NetPolicy, ReadError};

/// The longest a call other than a sync may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Answers larger than this are refused (a sync of busy rooms stays far below).
const RESPONSE_LIMIT: usize = 16 << 20;

/// Why a Matrix call failed. Messages name the homeserver and what was
/// asked, never the access token.
#[derive(Debug, thiserror::Error)]
pub enum MatrixError {
    /// The homeserver's URL does not parse or is not http(s).
    #[error("`{url}` is not a homeserver URL: {reason}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The access token cannot go in a header.
    #[error("the Matrix access token holds characters a header cannot carry")]
    TokenChars,
    /// The network policy refused the homeserver's address.
    #[error("{0}")]
    Refused(net::NetError),
    /// The request could not be sent or answered in time.
    #[error("{what} on {server} failed: {reason}")]
    Send {
        /// What was asked, such as `sending to !abc:example.org`.
        what: String,
        /// The homeserver, without credentials.
        server: String,
        /// Every cause, joined.
        reason: String,
    },
    /// The homeserver did not answer within the call's timeout.
    #[error("{what} on {server} took longer than {}s", .limit.as_secs_f64())]
    Timeout {
        /// What was asked.
        what: String,
        /// The homeserver, without credentials.
        server: String,
        /// The timeout that applied.
        limit: Duration,
    },
    /// The homeserver answered with an error.
    #[error("{what}: {server} answered {status} {errcode}: {error}")]
    Status {
        /// What was asked.
        what: String,
        /// The homeserver.
        server: String,
        /// The HTTP status.
        status: reqwest::StatusCode,
        /// Matrix's `errcode`, such as `M_FORBIDDEN`.
        errcode: String,
        /// Matrix's `error`, or the start of the body.
        error: String,
    },
    /// The answer is not what the API specifies.
    #[error("{what}: {server} gave an answer that is not the Matrix API's: {reason}")]
    Answer {
        /// What was asked.
        what: String,
        /// The homeserver.
        server: String,
        /// What is missing or wrong.
        reason: String,
    },
}

impl MatrixError {
    /// Whether asking again later may succeed: network trouble, rate limits
    /// and server errors; not a refusal such as `M_FORBIDDEN`.
    pub fn is_transient(&self) -> bool {
        match self {
            MatrixError::Send { .. } | MatrixError::Timeout { .. } => true,
            MatrixError::Status { status, .. } => {
                status.is_server_error() || *status == reqwest::StatusCode::TOO_MANY_REQUESTS
            }
            _ => false,
        }
    }
}

/// One homeserver, as one user (the access token's).
#[derive(Clone)]
pub struct Matrix {
    client: reqwest::Client,
    policy: Arc<NetPolicy>,
    base: Url,
    token: HeaderValue,
    call_timeout: Duration,
}

impl std::fmt::Debug for Matrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Matrix")
            .field("base", &self.server())
            .finish_non_exhaustive()
    }
}

/// An event of a room's timeline, with the fields commands read.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct MatrixEvent {
    /// The event's id, unique on the homeserver: `$…`.
    pub event_id: String,
    /// Who sent it: `@alice:example.org`.
    pub sender: String,
    /// `m.room.message` for messages.
    #[serde(rename = "type")]
    pub kind: String,
    /// The content; for a text message `{msgtype: "m.text", body}`.
    #[serde(default)]
    pub content: Value,
    /// When the sender's server received it, in milliseconds since 1970.
    #[serde(default)]
    pub origin_server_ts: i64,
    /// For state events such as memberships: whom it is about.
    #[serde(default)]
    pub state_key: Option<String>,
}

impl MatrixEvent {
    /// The text of a plain message (`m.text` or `m.notice`), not of an edit.
    pub fn text(&self) -> Option<&str> {
        if self.kind != "m.room.message" {
            return None;
        }
        let msgtype = self.content.get("msgtype")?.as_str()?;
        if !matches!(msgtype, "m.text" | "m.notice") || self.relation() == Some("m.replace") {
            return None;
        }
        self.content.get("body")?.as_str()
    }

    /// Whether this is `user` joining the room.
    pub fn is_join_of(&self, user: &str) -> bool {
        self.kind == "m.room.member"
            && self.state_key.as_deref() == Some(user)
            && self.content.get("membership").and_then(Value::as_str) == Some("join")
    }

    /// The `rel_type` of the event's `m.relates_to`, if any.
    pub fn relation(&self) -> Option<&str> {
        self.content.get("m.relates_to")?.get("rel_type")?.as_str()
    }

    /// The root of the thread this event is in: its own id when it starts
    /// none, so answers to it open a thread under it.
    pub fn thread_root(&self) -> &str {
        if self.relation() == Some("m.thread")
            && let Some(root) = self
                .content
                .get("m.relates_to")
                .and_then(|r| r.get("event_id"))
                .and_then(Value::as_str)
        {
            return root;
        }
        &self.event_id
    }
}

/// What one `/sync` brought: per joined room, its new timeline events
/// oldest first; and where to continue.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SyncBatch {
    /// The position to pass as `since` next time.
    pub next_batch: String,
    /// Room id → the events, oldest first (gaps already filled).
    pub rooms: BTreeMap<String, Vec<MatrixEvent>>,
    /// Rooms the user is invited to and has not joined.
    pub invited: Vec<String>,
}

#[derive(Deserialize)]
struct SyncAnswer {
    next_batch: String,
    #[serde(default)]
    rooms: SyncRooms,
}

#[derive(Deserialize, Default)]
struct SyncRooms {
    #[serde(default)]
    join: BTreeMap<String, JoinedRoom>,
    #[serde(default)]
    invite: BTreeMap<String, Value>,
}

#[derive(Deserialize, Default)]
struct JoinedRoom {
    #[serde(default)]
    timeline: Timeline,
}

#[derive(Deserialize, Default)]
struct Timeline {
    #[serde(default)]
    events: Vec<Value>,
    #[serde(default)]
    limited: bool,
    #[serde(default)]
    prev_batch: Option<String>,
}

#[derive(Deserialize)]
struct MessagesPage {
    #[serde(default)]
    chunk: Vec<Value>,
    #[serde(default)]
    end: Option<String>,
}

/// How many events one sync or page brings per room.
const TIMELINE_LIMIT: u32 = 100;

impl Matrix {
    /// A client for `homeserver` (such as `https://matrix.example.org`)
    /// acting with `token`. `client` must come from [`net::client`] so
    /// every address is checked by `policy`.
    pub fn new(
        client: reqwest::Client,
        policy: Arc<NetPolicy>,
        homeserver: &str,
        token: &str,
    ) -> Result<Self, MatrixError> {
        let bad = |reason: String| MatrixError::BadUrl {
            url: homeserver.to_string(),
            reason,
        };
        let mut base = Url::parse(homeserver.trim()).map_err(|e| bad(e.to_string()))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(bad(format!("it is {}, not http or https", base.scheme())));
        }
        if base.cannot_be_a_base() {
            return Err(bad("it cannot be a base URL".into()));
        }
        base.set_query(None);
        base.set_fragment(None);
        let mut token = HeaderValue::from_str(&format!("Bearer {}", token.trim()))
            .map_err(|_| MatrixError::TokenChars)?;
        token.set_sensitive(true);
        Ok(Matrix {
            client,
            policy,
            base,
            token,
            call_timeout: CALL_TIMEOUT,
        })
    }

    /// Gives each call other than a sync at most `limit` (30 s unless set):
    /// a `message` step keeps within its attempt's timeout.
    pub fn with_timeout(mut self, limit: Duration) -> Self {
        self.call_timeout = limit;
        self
    }

    /// The homeserver as messages name it.
    pub fn server(&self) -> String {
        net::redact(&self.base)
    }

    /// `{base}/_matrix/client/v3/{segments…}`, each segment percent-encoded.
    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(["_matrix", "client", "v3"]);
            path.extend(segments);
        }
        url
    }

    async fn call(
        &self,
        what: &str,
        method: Method,
        url: Url,
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<Value, MatrixError> {
        self.policy
            .check_url(&url)
            .await
            .map_err(MatrixError::Refused)?;
        let server = self.server();
        let send_error = |reason: String| MatrixError::Send {
            what: what.to_string(),
            server: server.clone(),
            reason,
        };
        let mut request = self
            .client
            .request(method, url)
            .timeout(timeout)
            .header(AUTHORIZATION, self.token.clone());
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| {
            if e.is_timeout() {
                MatrixError::Timeout {
                    what: what.to_string(),
                    server: server.clone(),
                    limit: timeout,
                }
            } else {
                send_error(net::chain(&e))
            }
        })?;
        let status = response.status();
        let bytes = match net::read_capped(response, RESPONSE_LIMIT).await {
            Ok(bytes) => bytes,
            Err(ReadError::TooLarge(limit)) => {
                return Err(send_error(format!(
                    "the answer is larger than {}",
                    net::size(limit)
                )));
            }
            Err(ReadError::Failed(e)) => return Err(send_error(net::chain(&e))),
        };
        let answer: Option<Value> = serde_json::from_slice(&bytes).ok();
        if !status.is_success() {
            let field = |name: &str| {
                answer
                    .as_ref()
                    .and_then(|a| a.get(name))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            };
            return Err(MatrixError::Status {
                what: what.to_string(),
                server,
                status,
                errcode: field("errcode").unwrap_or_default(),
                error: field("error")
                    .unwrap_or_else(|| net::preview(String::from_utf8_lossy(&bytes).trim(), 300)),
            });
        }
        answer.ok_or_else(|| MatrixError::Answer {
            what: what.to_string(),
            server,
            reason: "it is not JSON".into(),
        })
    }

    fn missing(&self, what: &str, field: &str) -> MatrixError {
        MatrixError::Answer {
            what: what.to_string(),
            server: self.server(),
            reason: format!("it has no `{field}`"),
        }
    }

    /// The user the token acts as: `@bot:example.org`.
    pub async fn whoami(&self) -> Result<String, MatrixError> {
        let what = "asking who the token belongs to";
        let answer = self
            .call(
                what,
                Method::GET,
                self.url(&["account", "whoami"]),
                None,
                self.call_timeout,
            )
            .await?;
        string_field(&answer, "user_id").ok_or_else(|| self.missing(what, "user_id"))
    }

    /// Joins a room by id or alias (accepting an invitation, or doing
    /// nothing when already in it) and returns its id.
    pub async fn join(&self, room: &str) -> Result<String, MatrixError> {
        let what = format!("joining {room}");
        let answer = self
            .call(
                &what,
                Method::POST,
                self.url(&["join", room]),
                Some(&json!({})),
                self.call_timeout,
            )
            .await?;
        string_field(&answer, "room_id").ok_or_else(|| self.missing(&what, "room_id"))
    }

    /// A room's id: an alias (`#ops:example.org`) is looked up in the
    /// directory; anything else is taken as an id.
    pub async fn room_id(&self, room: &str) -> Result<String, MatrixError> {
        if !room.starts_with('#') {
            return Ok(room.to_string());
        }
        let what = format!("looking up the room alias {room}");
        let answer = self
            .call(
                &what,
                Method::GET,
                self.url(&["directory", "room", room]),
                None,
                self.call_timeout,
            )
            .await?;
        string_field(&answer, "room_id").ok_or_else(|| self.missing(&what, "room_id"))
    }

    /// The room's display name (`m.room.name`), else its canonical alias;
    /// `None` when it has neither or they cannot be read.
    pub async fn room_name(&self, room_id: &str) -> Option<String> {
        for (kind, field) in [("m.room.name", "name"), ("m.room.canonical_alias", "alias")] {
            let url = self.url(&["rooms", room_id, "state", kind, ""]);
            if let Ok(answer) = self
                .call(
                    "reading the room's name",
                    Method::GET,
                    url,
                    None,
                    self.call_timeout,
                )
                .await
                && let Some(name) = string_field(&answer, field).filter(|n| !n.is_empty())
            {
                return Some(name);
            }
        }
        None
    }

    /// Posts `text` to a room as `m.text` under the transaction id `txn`:
    /// the same `txn` from the same token posts once, however often it is
    /// sent. With `thread_root` the message goes into that event's thread.
    /// Returns the event's id.
    pub async fn send_text(
        &self,
        room_id: &str,
        txn: &str,
        text: &str,
        thread_root: Option<&str>,
    ) -> Result<String, MatrixError> {
        let mut content = json!({"msgtype": "m.text", "body": text});
        if let Some(root) = thread_root {
            content["m.relates_to"] = json!({
                "rel_type": "m.thread",
                "event_id": root,
                "is_falling_back": true,
                "m.in_reply_to": {"event_id": root},
            });
        }
        let what = format!("sending a message to {room_id}");
        let url = self.url(&["rooms", room_id, "send", "m.room.message", txn]);
        let answer = self
            .call(&what, Method::PUT, url, Some(&content), self.call_timeout)
            .await?;
        string_field(&answer, "event_id").ok_or_else(|| self.missing(&what, "event_id"))
    }

    /// The position of "now", for a follower that has none yet: what it
    /// reads from there on is new.
    ///
    /// Synapse keeps the answer to a sync for a while (two minutes by
    /// default) and gives it again to the same request: a follower started
    /// twice within that time would get the first start's position back and
    /// hear again what was said in between. The filter names a room no one
    /// can be in, different each time, so no earlier answer matches.
    pub async fn now(&self) -> Result<String, MatrixError> {
        let nowhere = format!("!now-{:016x}:coxswain.invalid", rand::random::<u64>());
        let filter = json!({
            "room": {"timeline": {"limit": 0}, "not_rooms": [nowhere]},
            "presence": {"types": []},
        });
        let what = "reading the current sync position";
        let answer = self.sync_call(what, None, &filter, Duration::ZERO).await?;
        Ok(answer.next_batch)
    }

    /// The messages and memberships in `rooms` (ids) since `since`,
    /// waiting up to `wait` for something to happen. A timeline cut short by
    /// the homeserver is completed from the room's history, so no event
    /// between `since` and the returned position is left out; except in
    /// `fresh` rooms (joined since `since`), whose earlier history is not
    /// news to a follower.
    pub async fn sync(
        &self,
        since: &str,
        rooms: &[String],
        fresh: &BTreeSet<String>,
        wait: Duration,
    ) -> Result<SyncBatch, MatrixError> {
        let filter = json!({
            "room": {
                "rooms": rooms,
                "timeline": {"limit": TIMELINE_LIMIT, "types": ["m.room.message", "m.room.member"]},
                "state": {"types": []},
                "ephemeral": {"types": []},
                "account_data": {"types": []},
            },
            "presence": {"types": []},
            "account_data": {"types": []},
        });
        let what = "following the rooms (sync)";
        let answer = self.sync_call(what, Some(since), &filter, wait).await?;
        let mut batch = SyncBatch {
            next_batch: answer.next_batch,
            invited: answer.rooms.invite.into_keys().collect(),
            ..Default::default()
        };
        for (room, joined) in answer.rooms.join {
            let timeline = joined.timeline;
            let mut events = Vec::new();
            if timeline.limited
                && !fresh.contains(&room)
                && let Some(from) = &timeline.prev_batch
            {
                events = self.history(&room, from, Back::To(since)).await?;
            }
            events.extend(timeline.events.into_iter().filter_map(event));
            batch.rooms.insert(room, events);
        }
        Ok(batch)
    }

    async fn sync_call(
        &self,
        what: &str,
        since: Option<&str>,
        filter: &Value,
        wait: Duration,
    ) -> Result<SyncAnswer, MatrixError> {
        let mut url = self.url(&["sync"]);
        {
            let mut query = url.query_pairs_mut();
            query.append_pair("filter", &filter.to_string());
            query.append_pair("timeout", &wait.as_millis().to_string());
            if let Some(since) = since {
                query.append_pair("since", since);
            }
        }
        let answer = self
            .call(what, Method::GET, url, None, wait + CALL_TIMEOUT)
            .await?;
        serde_json::from_value(answer).map_err(|e| MatrixError::Answer {
            what: what.to_string(),
            server: self.server(),
            reason: e.to_string(),
        })
    }

    /// The messages and memberships of a room sent at or after `since_ms`
    /// (the sender's server's clock, in ms since 1970) and before the sync
    /// position `until`, oldest first: for a room the bot was in before it
    /// began to follow it, whose earlier events no sync will bring.
    pub async fn sent_since(
        &self,
        room_id: &str,
        until: &str,
        since_ms: i64,
    ) -> Result<Vec<MatrixEvent>, MatrixError> {
        let mut events = self.history(room_id, until, Back::Since(since_ms)).await?;
        events.retain(|e| e.origin_server_ts >= since_ms);
        Ok(events)
    }

    /// The events of a room from `from` back as far as `back` says, oldest
    /// first.
    async fn history(
        &self,
        room_id: &str,
        from: &str,
        back: Back<'_>,
    ) -> Result<Vec<MatrixEvent>, MatrixError> {
        let what = format!("reading the history of {room_id}");
        let mut from = from.to_string();
        let mut newest_first: Vec<MatrixEvent> = Vec::new();
        loop {
            let mut url = self.url(&["rooms", room_id, "messages"]);
            {
                let mut query = url.query_pairs_mut();
                query
                    .append_pair("dir", "b")
                    .append_pair("from", &from)
                    .append_pair("limit", &TIMELINE_LIMIT.to_string());
                if let Back::To(to) = back {
                    query.append_pair("to", to);
                }
            }
            let answer = self
                .call(&what, Method::GET, url, None, self.call_timeout)
                .await?;
            let page: MessagesPage =
                serde_json::from_value(answer).map_err(|e| MatrixError::Answer {
                    what: what.clone(),
                    server: self.server(),
                    reason: e.to_string(),
                })?;
            let empty = page.chunk.is_empty();
            newest_first.extend(page.chunk.into_iter().filter_map(event));
            let far_enough = match back {
                Back::To(_) => false,
                Back::Since(ms) => newest_first.last().is_some_and(|e| e.origin_server_ts < ms),
            };
            match page.end {
                Some(end) if !empty && !far_enough && end != from => from = end,
                _ => break,
            }
        }
        newest_first.reverse();
        Ok(newest_first)
    }
}

/// How far back a room's history is read.
#[derive(Clone, Copy)]
enum Back<'a> {
    /// To this sync position.
    To(&'a str),
    /// Until an event older than this time (ms since 1970).
    Since(i64),
}

/// An event the commands can read; anything else (state, redactions with
/// no sender) is skipped.
fn event(value: Value) -> Option<MatrixEvent> {
    serde_json::from_value(value).ok()
}

fn string_field(answer: &Value, field: &str) -> Option<String> {
    answer.get(field)?.as_str().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(base: &str) -> Result<Matrix, MatrixError> {
        crate::net::install_crypto_provider();
        let policy = Arc::new(NetPolicy::local());
        let client = net::client(policy.clone(), net::Redirects::SameOrigin).expect("client");
        Matrix::new(client, policy, base, "secret-token")
    }

    #[test]
    fn room_ids_and_aliases_are_encoded_in_paths() {
        let m = matrix("http://127.0.0.1:8008/").expect("matrix");
        let url = m.url(&["rooms", "!abc:example.org", "send", "m.room.message", "t/1"]);
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:8008/_matrix/client/v3/rooms/!abc:example.org/send/m.room.message/t%2F1"
        );
        let url = m.url(&["directory", "room", "#ops:example.org"]);
        assert!(
            url.as_str().ends_with("/directory/room/%23ops:example.org"),
            "{url}"
        );
    }

    #[test]
    fn a_bad_homeserver_is_refused_by_name() {
        let error = matrix("ftp://example.org").expect_err("not http");
        assert!(error.to_string().contains("`ftp://example.org`"), "{error}");
        let debug = format!("{:?}", matrix("http://example.org").expect("ok"));
        assert!(!debug.contains("secret-token"), "{debug}");
    }

    /// A text message event from `@a:x` with `content` added to its body.
    fn message(id: &str, body: &str, more: Value) -> MatrixEvent {
        let mut content = json!({"msgtype": "m.text", "body": body});
        if let (Some(content), Value::Object(more)) = (content.as_object_mut(), more) {
            content.extend(more);
        }
        serde_json::from_value(json!({
            "event_id": id, "sender": "@a:x", "type": "m.room.message", "content": content
        }))
        .expect("event")
    }

    #[test]
    fn text_threads_and_edits_are_read_from_content() {
        let plain = message("$1", "!review now", json!({}));
        assert_eq!(plain.text(), Some("!review now"));
        assert_eq!(plain.thread_root(), "$1");
        let thread = json!({"m.relates_to": {"rel_type": "m.thread", "event_id": "$root"}});
        let threaded = message("$2", "!review again", thread);
        assert_eq!(threaded.thread_root(), "$root");
        let replace = json!({"m.relates_to": {"rel_type": "m.replace", "event_id": "$1"}});
        let edit = message("$3", "* !review", replace);
        assert_eq!(edit.text(), None);
    }
}
