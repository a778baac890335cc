//! A real Matrix homeserver for tests of chat features, and a small client
//! of its client-server API written for assertions.
//!
//! [`Synapse::start`] runs `e2e/chat/up` (Synapse from PyPI on 127.0.0.1,
//! users `coxswain`, `alice` and `bob`, the room `#review:localhost`) once per
//! test binary and reads the env file it writes. The server outlives the
//! tests (stop it with `e2e/chat/down`), so the next binary reuses it. Tests
//! run in parallel on that one server and keep apart by room: each makes its
//! own with [`Synapse::new_room`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use reqwest::{Method, Url};
use serde_json::{Value, json};

use crate::{Error, Result, workspace_root};

/// Events per page when reading a room's history.
const PAGE: &str = "50";
/// Pages read at most: 50,000 messages, far beyond any test.
const MAX_PAGES: usize = 1000;

/// A Matrix account the tests act as: its full id and an access token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatrixUser {
    /// The full user id, `@alice:localhost`.
    pub id: String,
    /// A bearer token of one of its devices.
    pub token: String,
}

impl MatrixUser {
    /// The local part of the id (`alice` for `@alice:localhost`), as the
    /// transcript names senders.
    pub fn localpart(&self) -> &str {
        localpart(&self.id)
    }
}

/// The e2e Synapse as `e2e/chat/up` left it: where it listens, its shared
/// room, the users it made, and an HTTP client to drive it as them.
#[derive(Clone, Debug)]
pub struct Synapse {
    env_file: PathBuf,
    env: HashMap<String, String>,
    url: Url,
    http: reqwest::Client,
}

impl Synapse {
    /// The running homeserver: `e2e/chat/up` is run once per test binary
    /// (it reuses a live server and starts one otherwise), or
    /// `COXSWAIN_MATRIX_ENV=path` names the env file of one already up.
    pub async fn start() -> Result<Self> {
        static ENV_FILE: tokio::sync::OnceCell<PathBuf> = tokio::sync::OnceCell::const_new();
        let env_file = ENV_FILE
            .get_or_try_init(|| async {
                if let Some(path) = std::env::var_os("COXSWAIN_MATRIX_ENV") {
                    return Ok(PathBuf::from(path));
                }
                tokio::task::spawn_blocking(run_up)
                    .await
                    .map_err(|e| Error::Chat(e.to_string()))?
            })
            .await?;
        Self::from_env_file(env_file)
    }

    /// A client for the homeserver an env file (as `e2e/chat/up` writes it)
    /// describes, without starting anything.
    pub fn from_env_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Chat(format!("reading {}: {e}", path.display())))?;
        let env = parse_env(&text);
        let url = env
            .get("MATRIX_URL")
            .ok_or_else(|| Error::Chat(format!("{} has no MATRIX_URL", path.display())))?;
        let url = Url::parse(url)
            .map_err(|e| Error::Chat(format!("{}: MATRIX_URL {url:?}: {e}", path.display())))?;
        crate::cluster::install_crypto_provider();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| Error::Chat(format!("building the HTTP client: {e}")))?;
        Ok(Self {
            env_file: path.to_path_buf(),
            env,
            url,
            http,
        })
    }

    /// The env file read (`target/e2e/chat/env`), for a controller or a
    /// note that wants the same values.
    pub fn env_file(&self) -> &Path {
        &self.env_file
    }

    /// The homeserver's base URL, `http://127.0.0.1:PORT` (no trailing
    /// slash), as a chat connection Secret's `url` holds it.
    pub fn url(&self) -> &str {
        self.url.as_str().trim_end_matches('/')
    }

    /// The server name in user ids and aliases (`localhost`).
    pub fn server_name(&self) -> Result<&str> {
        self.value("MATRIX_SERVER_NAME")
    }

    /// The room every up makes, `#review:localhost`, by id. Tests that
    /// post should make their own room instead ([`Synapse::new_room`]).
    pub fn shared_room(&self) -> Result<&str> {
        self.value("MATRIX_ROOM_ID")
    }

    /// The shared room's alias, `#review:localhost`.
    pub fn shared_room_alias(&self) -> Result<&str> {
        self.value("MATRIX_ROOM_ALIAS")
    }

    /// A user `e2e/chat/up` made: `coxswain` (the bot the controller acts
    /// as), `alice` (allowed to run commands in tests) or `bob` (not).
    pub fn user(&self, name: &str) -> Result<MatrixUser> {
        let upper = name.to_ascii_uppercase();
        Ok(MatrixUser {
            id: self.value(&format!("MATRIX_{upper}_ID"))?.to_string(),
            token: self.value(&format!("MATRIX_{upper}_TOKEN"))?.to_string(),
        })
    }

    /// The user `name` (`@name:localhost`), made with the admin register
    /// API (shared secret) on first use and logged in again later (the
    /// database outlives runs), for a test that needs someone else.
    pub async fn register(&self, name: &str) -> Result<MatrixUser> {
        let path = ["_synapse", "admin", "v1", "register"];
        let nonce = self.call(Method::GET, None, &path, &[], None).await?;
        let nonce = str_field(&nonce, "nonce")?;
        let password = password(name);
        let secret = self.value("MATRIX_REGISTRATION_SHARED_SECRET")?;
        let body = json!({
            "nonce": nonce,
            "username": name,
            "password": password,
            "admin": false,
            "mac": register_mac(secret, nonce, name, &password),
        });
        match self.call(Method::POST, None, &path, &[], Some(&body)).await {
            Ok(answer) => Ok(MatrixUser {
                id: str_field(&answer, "user_id")?.to_string(),
                token: str_field(&answer, "access_token")?.to_string(),
            }),
            Err(Error::MatrixRefused { errcode, .. }) if errcode == "M_USER_IN_USE" => {
                self.login(name).await
            }
            Err(e) => Err(e),
        }
    }

    /// A new access token (a new device) of `name` by password login;
    /// works for the users up made and those [`Synapse::register`] made.
    pub async fn login(&self, name: &str) -> Result<MatrixUser> {
        let body = json!({
            "type": "m.login.password",
            "identifier": {"type": "m.id.user", "user": name},
            "password": password(name),
        });
        let answer = self
            .call(Method::POST, None, &client(&["login"]), &[], Some(&body))
            .await?;
        Ok(MatrixUser {
            id: str_field(&answer, "user_id")?.to_string(),
            token: str_field(&answer, "access_token")?.to_string(),
        })
    }

    /// The user id the token belongs to (`/account/whoami`).
    pub async fn whoami(&self, user: &MatrixUser) -> Result<String> {
        let path = client(&["account", "whoami"]);
        let answer = self
            .call(Method::GET, Some(&user.token), &path, &[], None)
            .await?;
        Ok(str_field(&answer, "user_id")?.to_string())
    }

    /// A fresh public room named `name`, made by `creator`, with every one
    /// of `members` invited and joined (each with its own token); its id.
    /// One per test keeps parallel tests apart on the shared server.
    pub async fn new_room(
        &self,
        creator: &MatrixUser,
        name: &str,
        members: &[&MatrixUser],
    ) -> Result<String> {
        let body = json!({"name": name, "preset": "public_chat"});
        let answer = self
            .call(
                Method::POST,
                Some(&creator.token),
                &client(&["createRoom"]),
                &[],
                Some(&body),
            )
            .await?;
        let room = str_field(&answer, "room_id")?.to_string();
        for member in members.iter().filter(|m| m.id != creator.id) {
            self.invite(creator, &room, &member.id).await?;
            self.join(member, &room).await?;
        }
        Ok(room)
    }

    /// `inviter` invites `user_id` into `room` (the bot: the controller
    /// joins by itself).
    pub async fn invite(&self, inviter: &MatrixUser, room: &str, user_id: &str) -> Result<()> {
        let path = client(&["rooms", room, "invite"]);
        let body = json!({"user_id": user_id});
        self.call(Method::POST, Some(&inviter.token), &path, &[], Some(&body))
            .await
            .map(drop)
    }

    /// The room id an alias (`#review:localhost`) points to.
    pub async fn resolve_alias(&self, alias: &str) -> Result<String> {
        let path = client(&["directory", "room", alias]);
        let answer = self.call(Method::GET, None, &path, &[], None).await?;
        Ok(str_field(&answer, "room_id")?.to_string())
    }

    /// `user` joins `room` (an id or an alias).
    pub async fn join(&self, user: &MatrixUser, room: &str) -> Result<()> {
        let path = client(&["join", room]);
        self.call(
            Method::POST,
            Some(&user.token),
            &path,
            &[],
            Some(&json!({})),
        )
        .await
        .map(drop)
    }

    /// `user`'s membership in `room` (`join`, `invite`, `leave`, …), or
    /// `None` when it never had one; read as `reader`, a member.
    pub async fn membership(
        &self,
        reader: &MatrixUser,
        room: &str,
        user_id: &str,
    ) -> Result<Option<String>> {
        let path = client(&["rooms", room, "state", "m.room.member", user_id]);
        match self
            .call(Method::GET, Some(&reader.token), &path, &[], None)
            .await
        {
            Ok(state) => Ok(state["membership"].as_str().map(str::to_string)),
            Err(Error::MatrixRefused { status: 404, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Posts a plain text message; its event id. Each call has a fresh
    /// transaction id.
    pub async fn send_text(&self, user: &MatrixUser, room: &str, body: &str) -> Result<String> {
        let content = json!({"msgtype": "m.text", "body": body});
        self.send_message(user, room, &fresh_txn_id(), &content)
            .await
    }

    /// Posts a text reply in the thread of `root` (an event id), as
    /// clients do: `m.relates_to` with `rel_type: m.thread` and a fallback
    /// reply to the root; its event id.
    pub async fn send_in_thread(
        &self,
        user: &MatrixUser,
        room: &str,
        root: &str,
        body: &str,
    ) -> Result<String> {
        let content = json!({
            "msgtype": "m.text",
            "body": body,
            "m.relates_to": {
                "rel_type": "m.thread",
                "event_id": root,
                "is_falling_back": true,
                "m.in_reply_to": {"event_id": root},
            },
        });
        self.send_message(user, room, &fresh_txn_id(), &content)
            .await
    }

    /// `PUT /rooms/{room}/send/m.room.message/{txn_id}` with `content`; its
    /// event id. The homeserver answers a repeated transaction id (same
    /// device) with the first event's id and posts nothing new.
    pub async fn send_message(
        &self,
        user: &MatrixUser,
        room: &str,
        txn_id: &str,
        content: &Value,
    ) -> Result<String> {
        let path = client(&["rooms", room, "send", "m.room.message", txn_id]);
        let answer = self
            .call(Method::PUT, Some(&user.token), &path, &[], Some(content))
            .await?;
        Ok(str_field(&answer, "event_id")?.to_string())
    }

    /// Every `m.room.message` event of `room` that `user` can see, oldest
    /// first (`/messages` backwards from now, page by page).
    pub async fn events(&self, user: &MatrixUser, room: &str) -> Result<Vec<Value>> {
        let path = client(&["rooms", room, "messages"]);
        let filter = json!({"types": ["m.room.message"]}).to_string();
        let mut events = Vec::new();
        let mut from: Option<String> = None;
        // An empty page is not the end (Synapse drops events the reader
        // may not see after reading a page); a missing `end` is. The cap
        // only guards against a server that never says so.
        for _ in 0..MAX_PAGES {
            let mut query = vec![("dir", "b"), ("limit", PAGE), ("filter", filter.as_str())];
            if let Some(token) = &from {
                query.push(("from", token));
            }
            let page = self
                .call(Method::GET, Some(&user.token), &path, &query, None)
                .await?;
            let chunk = page["chunk"].as_array().cloned().unwrap_or_default();
            let end = page["end"].as_str().map(str::to_string);
            events.extend(chunk);
            if end.is_none() || end == from {
                events.reverse();
                return Ok(events);
            }
            from = end;
        }
        Err(Error::Chat(format!(
            "{room}: history still going after {MAX_PAGES} pages of {PAGE}"
        )))
    }

    /// One event of `room` by id, as `user` sees it.
    pub async fn event(&self, user: &MatrixUser, room: &str, event_id: &str) -> Result<Value> {
        let path = client(&["rooms", room, "event", event_id]);
        self.call(Method::GET, Some(&user.token), &path, &[], None)
            .await
    }

    /// The first (oldest) message of `room` that `predicate` accepts,
    /// polling until one arrives or `timeout` passes (a bound, not a
    /// timing assertion); the error then carries the room's transcript.
    pub async fn wait_for(
        &self,
        user: &MatrixUser,
        room: &str,
        predicate: impl Fn(&Value) -> bool,
        timeout: Duration,
    ) -> Result<Value> {
        let what = format!("a matching message in {room}");
        let found = crate::wait_for(&what, timeout, || async {
            Ok(self
                .events(user, room)
                .await?
                .into_iter()
                .find(|e| predicate(e)))
        })
        .await;
        match found {
            Err(Error::Timeout(bound, what)) => {
                let transcript = self.transcript(user, room).await.unwrap_or_default();
                Err(Error::Timeout(
                    bound,
                    format!("{what}; the room reads:\n{transcript}"),
                ))
            }
            other => other,
        }
    }

    /// The room as people read it, one line per message, `sender: body`;
    /// thread replies indented under their root with `↳`. For printing in
    /// tests and in notes.
    pub async fn transcript(&self, user: &MatrixUser, room: &str) -> Result<String> {
        Ok(transcript(&self.events(user, room).await?))
    }

    /// A chat connection Secret named `name` for a Flow's `command.chat`:
    /// `type: matrix`, this server's `url` and `user`'s `token` (the bot's,
    /// [`Synapse::user`]`("coxswain")`), as JSON to create or apply.
    pub fn connection_secret(&self, name: &str, user: &MatrixUser) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name},
            "type": "Opaque",
            "stringData": {"type": "matrix", "url": self.url(), "token": user.token},
        })
    }

    fn value(&self, key: &str) -> Result<&str> {
        self.env.get(key).map(String::as_str).ok_or_else(|| {
            Error::Chat(format!(
                "{} has no {key}: e2e/chat/up makes the users coxswain, alice and bob; \
                 Synapse::register makes others",
                self.env_file.display()
            ))
        })
    }

    /// One request: `path` segments are percent-encoded (room and event
    /// ids carry `!`, `$` and `:`); a non-2xx answer becomes
    /// [`Error::MatrixRefused`] with Matrix's errcode.
    async fn call(
        &self,
        method: Method,
        token: Option<&str>,
        path: &[&str],
        query: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<Value> {
        let mut url = self.url.clone();
        url.path_segments_mut()
            .map_err(|()| Error::Chat(format!("{} cannot be a base URL", self.url)))?
            .pop_if_empty()
            .extend(path);
        let request = format!("{method} {}", url.path());
        let mut builder = self.http.request(method, url).query(query);
        if let Some(token) = token {
            builder = builder.bearer_auth(token);
        }
        if let Some(body) = body {
            builder = builder.json(body);
        }
        let response = builder
            .send()
            .await
            .map_err(|e| Error::Chat(format!("{request}: {e}")))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| Error::Chat(format!("{request}: reading the answer: {e}")))?;
        let answer: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        if status.is_success() {
            return Ok(answer);
        }
        Err(Error::MatrixRefused {
            request,
            status: status.as_u16(),
            errcode: answer["errcode"].as_str().unwrap_or_default().to_string(),
            error: answer["error"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| answer.to_string()),
        })
    }
}

/// Runs `e2e/chat/up` and returns the env file its last line names.
fn run_up() -> Result<PathBuf> {
    let script = workspace_root().join("e2e/chat/up");
    let output = Command::new(&script)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::Chat(format!("running {}: {e}", script.display())))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    match line.strip_prefix("COXSWAIN_MATRIX_ENV=") {
        Some(path) if output.status.success() => Ok(PathBuf::from(path)),
        _ => {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(30).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            Err(Error::Chat(format!(
                "e2e/chat/up exited with {} without COXSWAIN_MATRIX_ENV=…; its last lines:\n{}",
                output.status,
                tail.join("\n")
            )))
        }
    }
}

/// `KEY=VALUE` lines; others are skipped.
fn parse_env(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.to_string()))
        .collect()
}

/// `_matrix/client/v3/` followed by `rest`.
fn client<'a>(rest: &[&'a str]) -> Vec<&'a str> {
    let mut path = vec!["_matrix", "client", "v3"];
    path.extend_from_slice(rest);
    path
}

/// The password up and [`Synapse::register`] give `name` (a local test
/// server: fixed passwords let a kept database log users in again).
fn password(name: &str) -> String {
    format!("{name}-e2e-password")
}

/// The admin register API's `mac`: HMAC-SHA1 over
/// `nonce NUL user NUL password NUL notadmin` with the shared secret, hex.
fn register_mac(secret: &str, nonce: &str, user: &str, password: &str) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, secret.as_bytes());
    let signed = [nonce, user, password, "notadmin"].join("\0");
    let tag = ring::hmac::sign(&key, signed.as_bytes());
    tag.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// A transaction id no other call of any test process has used: the
/// process id, a counter and the time (the database outlives processes,
/// and pids come back).
fn fresh_txn_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("e2e-{}-{n}-{nanos}", std::process::id())
}

fn str_field<'a>(answer: &'a Value, key: &str) -> Result<&'a str> {
    answer[key]
        .as_str()
        .ok_or_else(|| Error::Chat(format!("the homeserver's answer has no {key:?}: {answer}")))
}

fn localpart(user_id: &str) -> &str {
    let id = user_id.strip_prefix('@').unwrap_or(user_id);
    id.split_once(':').map_or(id, |(local, _)| local)
}

/// Waits, up to `timeout`, until the controller marks the Run `run` in
/// `namespace` as answered in chat, and returns the mark: the id of the
/// outcome message it posted.
pub async fn wait_answered(
    kubectl: &crate::Kubectl,
    namespace: &str,
    run: &str,
    timeout: Duration,
) -> String {
    crate::wait_for("the run is marked answered", timeout, || async {
        let run: Value = kubectl.json(&["get", "run", run, "-n", namespace, "-o", "json"]);
        Ok(
            run["metadata"]["annotations"][coxswain_k8s::names::CHAT_ANSWERED_ANNOTATION]
                .as_str()
                .map(str::to_string),
        )
    })
    .await
    .expect("answered")
}

/// The `review` Flow the chat tests start: `!review WORDS` through the
/// connection `connection`, heard in `room` from `allowed` (a user id or
/// `*`); one condition step, and an output that shows what the run got.
pub fn review_flow(connection: &str, room: &str, allowed: &str) -> String {
    format!(
        r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {{name: review}}
spec:
  command:
    name: review
    chat: {connection}
    rooms: ["{room}"]
    allowedUsers: ["{allowed}"]
  output: {{reviewed: $input.prompt, asker: $input.sender, asked: $steps.check.output.result}}
  steps:
    - key: check
      condition:
        when: $input.prompt != ""
"#
    )
}

/// The root event id of a thread reply, if `event` is one.
pub fn thread_root(event: &Value) -> Option<&str> {
    let relation = &event["content"]["m.relates_to"];
    (relation["rel_type"] == "m.thread")
        .then(|| relation["event_id"].as_str())
        .flatten()
}

/// The lines of [`Synapse::transcript`] for `events` (oldest first).
pub fn transcript(events: &[Value]) -> String {
    let line = |e: &Value| {
        format!(
            "{}: {}",
            localpart(e["sender"].as_str().unwrap_or("?")),
            e["content"]["body"].as_str().unwrap_or("")
        )
    };
    let ids: Vec<&str> = events
        .iter()
        .filter_map(|e| e["event_id"].as_str())
        .collect();
    let mut out = String::new();
    for event in events.iter().filter(|e| thread_root(e).is_none()) {
        out.push_str(&line(event));
        out.push('\n');
        let id = event["event_id"].as_str();
        for reply in events
            .iter()
            .filter(|e| id.is_some() && thread_root(e) == id)
        {
            out.push_str(&format!("  ↳ {}\n", line(reply)));
        }
    }
    // replies whose root is not a message here (another event type, or
    // older than what the server returned)
    for reply in events
        .iter()
        .filter(|e| thread_root(e).is_some_and(|root| !ids.contains(&root)))
    {
        let root = thread_root(reply).unwrap_or_default();
        out.push_str(&format!("  ↳ (thread {root}) {}\n", line(reply)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_register_mac_is_hmac_sha1_over_the_nul_joined_fields() {
        // Python's hmac.new(b"secret", b"nonce\0user\0pass\0notadmin", sha1)
        let mac = register_mac("secret", "nonce", "user", "pass");
        assert_eq!(mac, "a62633a505e2bc2e61569cf3c6847ee41ef09bae");
    }

    #[test]
    fn thread_replies_are_listed_under_their_root() {
        let events = [
            json!({"event_id": "$a", "sender": "@alice:localhost", "content": {"body": "!review x"}}),
            json!({"event_id": "$b", "sender": "@bob:localhost", "content": {"body": "hi"}}),
            json!({"event_id": "$c", "sender": "@coxswain:localhost", "content": {"body": "started",
                "m.relates_to": {"rel_type": "m.thread", "event_id": "$a"}}}),
            json!({"event_id": "$d", "sender": "@coxswain:localhost", "content": {"body": "lost",
                "m.relates_to": {"rel_type": "m.thread", "event_id": "$gone"}}}),
        ];
        assert_eq!(
            transcript(&events),
            "alice: !review x\n  ↳ coxswain: started\nbob: hi\n  ↳ (thread $gone) coxswain: lost\n"
        );
    }

    #[test]
    fn env_lines_split_at_the_first_equals_sign() {
        let env = parse_env("MATRIX_URL=http://127.0.0.1:1\nnoise\nA=b=c\n");
        assert_eq!(env["MATRIX_URL"], "http://127.0.0.1:1");
        assert_eq!(env["A"], "b=c");
        assert_eq!(env.len(), 2);
    }
}
