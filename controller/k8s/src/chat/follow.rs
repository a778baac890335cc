//! Following the rooms of one Matrix connection: long-polling `/sync`,
//! turning each command into a Run (or a refusal), answering in the thread,
//! and storing the position after every batch.
//!
//! Exactly once, across crashes: a batch is acted on before its position is
//! stored, so a crash replays at most that batch. A replayed command finds
//! its Run already there (the name comes from the event id) and its answers
//! carry the same transaction ids, which the homeserver posts once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::guard::Guarded;
use kube::Resource;
use kube::api::PostParams;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::Store;
use kube::{Api, Client, ResourceExt};

use super::command::{self, Decision, Heard, Listener};
use super::connection::{self, Connection};
use super::position::{self, Position};
use crate::error::Error;
use coxswain_core::api::{Flow, Run};
use coxswain_steps::chat::{Matrix, MatrixError, MatrixEvent};
use coxswain_steps::net::{self, NetPolicy};

/// How long one sync waits for news.
const SYNC_WAIT: Duration = Duration::from_secs(25);
/// The longest pause after failures, doubling from one second.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// One connection's follower.
pub struct Follower {
    /// The API server.
    pub client: Client,
    /// The connection's namespace.
    pub namespace: String,
    /// The connection (Secret) name.
    pub connection: String,
    /// Every Flow the controller sees.
    pub flows: Store<Guarded<Flow>>,
    /// The network policy chat calls go through.
    pub policy: Arc<NetPolicy>,
    /// Tells the flows' owners (`kubectl describe flow`) when following
    /// starts and why it stopped.
    pub recorder: Recorder,
    /// The user the controller acts as, written as the `created-by` of the
    /// Runs it starts (admission stamps the same where it runs).
    pub me: String,
    /// Rooms that could not be joined and were told about once.
    pub unjoinable: Mutex<BTreeSet<String>>,
}

/// Why a batch could not be acted on; the follower pauses and starts over
/// from the stored position.
#[derive(Debug, thiserror::Error)]
enum FollowError {
    #[error(transparent)]
    Connection(#[from] connection::ConnectionError),
    #[error(transparent)]
    Matrix(#[from] MatrixError),
    #[error(transparent)]
    Kube(#[from] Error),
    #[error("the HTTP client could not be built: {0}")]
    Client(net::NetError),
}

impl Follower {
    /// Follows until the task is dropped; failures are logged and retried
    /// with back-off from the stored position.
    pub async fn run(self) {
        let mut backoff = Duration::from_secs(1);
        let mut told = String::new();
        loop {
            match self.follow().await {
                Ok(()) => backoff = Duration::from_secs(1),
                Err(e) => {
                    let text = e.to_string();
                    tracing::warn!(namespace = %self.namespace, connection = %self.connection, "chat: {text}");
                    if text != told {
                        self.tell(EventType::Warning, "ChatFailed", &text).await;
                        told = text;
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
            tokio::time::sleep(backoff).await;
        }
    }

    /// An Event on every flow of this connection; best effort.
    async fn tell(&self, type_: EventType, reason: &str, note: &str) {
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note.chars().take(1000).collect()),
            action: "Follow".into(),
            secondary: None,
        };
        for flow in self.flows_of_connection() {
            let reference = flow.object_ref(&());
            if let Err(e) = self.recorder.publish(&event, &reference).await {
                tracing::debug!(flow = %flow.name_any(), "chat: event not sent: {e}");
            }
        }
    }

    /// Every readable flow whose command names this connection, valid or not.
    fn flows_of_connection(&self) -> Vec<Arc<Flow>> {
        self.flows_where(false)
    }

    /// The flows of this connection whose command is valid.
    fn flows(&self) -> Vec<Arc<Flow>> {
        self.flows_where(true)
    }

    fn flows_where(&self, valid: bool) -> Vec<Arc<Flow>> {
        self.flows
            .state()
            .iter()
            .filter_map(|guard| guard.0.as_ref().ok())
            .filter(|flow| flow.namespace().as_deref() == Some(self.namespace.as_str()))
            .filter(|flow| command::listens_on(flow, &self.connection, valid))
            .cloned()
            .collect()
    }

    /// Follows as long as nothing fails; `Ok` when the connection is not
    /// Matrix (Slack pushes its events to the endpoint instead).
    async fn follow(&self) -> Result<(), FollowError> {
        let found = connection::read(&self.client, &self.namespace, &self.connection).await?;
        let Connection::Matrix { url, token } = found else {
            tokio::time::sleep(MAX_BACKOFF).await;
            return Ok(());
        };
        let http = net::client(self.policy.clone(), net::Redirects::SameOrigin)
            .map_err(FollowError::Client)?;
        let matrix = Matrix::new(http, self.policy.clone(), &url, &token)?;
        let me = matrix.whoami().await?;
        let mut joined: BTreeMap<String, String> = BTreeMap::new();
        // Room id → since when its messages are for this follower (ms): in
        // a room the bot was already in, what came before is not for it. A
        // flow that lists a room is seen between two syncs, so its room
        // counts from the start of the sync before: a command typed just
        // after the flow was applied is not lost.
        let mut followed_since: BTreeMap<String, i64> = BTreeMap::new();
        let mut previous_sync = now_ms();
        let key = token.as_bytes().to_vec();
        let found = position::load(&self.client, &self.namespace, &self.connection, &key).await?;
        let mut replaced = Position::default();
        // Starting from now: a sync may still bring what was said before
        // (a cut timeline completed from history, or an answer the
        // homeserver kept from an earlier start); none of it is news, in
        // whichever batch it comes.
        let mut from_now: Option<i64> = None;
        if let position::Loaded::Forged { why, fresh } = &found {
            tracing::warn!(namespace = %self.namespace, connection = %self.connection, "{why}");
            self.tell(EventType::Warning, "Tampered", why).await;
            replaced = fresh.clone();
        }
        let mut position = match found {
            position::Loaded::Position(position) => position,
            position::Loaded::Nothing | position::Loaded::Forged { .. } => {
                from_now = Some(now_ms());
                // Nothing stored: what happens from now on is news.
                self.join_all(&matrix, &self.flows(), &mut joined).await;
                let since = matrix.now().await?;
                let mut start =
                    Position::new(since, joined.values().cloned().collect()).replacing(&replaced);
                position::save(
                    &self.client,
                    &self.namespace,
                    &self.connection,
                    &mut start,
                    &key,
                )
                .await?;
                tracing::info!(namespace = %self.namespace, connection = %self.connection, user = %me, "chat: following from now on");
                start
            }
        };
        self.join_all(&matrix, &self.flows(), &mut joined).await;
        let rooms: Vec<&str> = joined.keys().map(String::as_str).collect();
        let note = format!(
            "following {} as {me} on {}",
            if rooms.is_empty() {
                "no room yet".to_string()
            } else {
                rooms.join(", ")
            },
            matrix.server()
        );
        self.tell(EventType::Normal, "ChatFollowing", &note).await;
        loop {
            let flows = self.flows();
            self.join_all(&matrix, &flows, &mut joined).await;
            let rooms: Vec<String> = joined.values().cloned().collect();
            followed_since.retain(|id, _| rooms.contains(id));
            for id in &rooms {
                followed_since.entry(id.clone()).or_insert(previous_sync);
            }
            previous_sync = now_ms();
            let fresh: BTreeSet<String> = rooms
                .iter()
                .filter(|r| !position.rooms.contains(*r))
                .cloned()
                .collect();
            let mut batch = matrix
                .sync(&position.since, &rooms, &fresh, SYNC_WAIT)
                .await?;
            let listeners = listeners(&flows, &joined);
            for room in &fresh {
                // A room the bot was in already: no sync brings what was
                // said before it entered the filter; read it back (the
                // room goes into the position below in either case).
                let joined_now = batch
                    .rooms
                    .get(room)
                    .is_some_and(|events| events.iter().any(|e| e.is_join_of(&me)));
                if !joined_now {
                    let since = followed_since.get(room).copied().unwrap_or_default();
                    let events = matrix.sent_since(room, &batch.next_batch, since).await?;
                    batch.rooms.insert(room.clone(), events);
                }
            }
            for (room, events) in &batch.rooms {
                let followed_at = fresh
                    .contains(room)
                    .then(|| followed_since.get(room).copied().unwrap_or_default());
                for event in news(events, followed_at, &me, now_ms()) {
                    if from_now.is_some_and(|start| event.origin_server_ts < start) {
                        continue;
                    }
                    self.act(&matrix, room, event, &listeners).await?;
                }
            }
            position.since = batch.next_batch;
            position.rooms.extend(batch.rooms.keys().cloned());
            position.rooms.extend(fresh);
            position::save(
                &self.client,
                &self.namespace,
                &self.connection,
                &mut position,
                &key,
            )
            .await?;
        }
    }

    /// Joins every room the connection's flows list and remembers its id;
    /// a room that cannot be joined is logged and tried again next time.
    async fn join_all(
        &self,
        matrix: &Matrix,
        flows: &[Arc<Flow>],
        joined: &mut BTreeMap<String, String>,
    ) {
        let wanted: BTreeSet<String> = flows
            .iter()
            .filter_map(|f| f.spec.command.as_ref())
            .flat_map(|c| c.rooms.iter().cloned())
            .collect();
        joined.retain(|written, _| wanted.contains(written));
        for room in wanted {
            if joined.contains_key(&room) {
                continue;
            }
            match matrix.join(&room).await {
                Ok(id) => {
                    tracing::info!(%room, %id, connection = %self.connection, "chat: joined");
                    joined.insert(room, id);
                }
                Err(e) => {
                    tracing::warn!(%room, connection = %self.connection, "chat: cannot join: {e}");
                    if self
                        .unjoinable
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(room.clone())
                    {
                        let note = format!("cannot join {room}: {e}");
                        self.tell(EventType::Warning, "ChatRoomUnavailable", &note)
                            .await;
                    }
                }
            }
        }
    }

    /// Acts on one message: a Run and its answer, a refusal, or nothing.
    /// Fails only when trying again later may work.
    async fn act(
        &self,
        matrix: &Matrix,
        room: &str,
        event: &MatrixEvent,
        listeners: &[Listener<'_>],
    ) -> Result<(), FollowError> {
        let Some(text) = event.text() else {
            return Ok(());
        };
        let heard = Heard {
            connection: self.connection.clone(),
            room: room.to_string(),
            event_id: event.event_id.clone(),
            thread_root: event.thread_root().to_string(),
            sender: event.sender.clone(),
            text: text.to_string(),
        };
        let (kind, answer) = match command::decide(&heard, listeners) {
            Decision::Ignore => return Ok(()),
            Decision::Refuse(text) => ("refused", text),
            Decision::Help(text) => ("help", text),
            Decision::Start(run) => self.start(&run, &heard).await?,
        };
        let txn = command::transaction(kind, &heard.event_id);
        match matrix
            .send_text(room, &txn, &answer, Some(&heard.thread_root))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_transient() => Err(e.into()),
            Err(e) => {
                tracing::warn!(%room, connection = %self.connection, "chat: cannot answer: {e}");
                Ok(())
            }
        }
    }

    /// Creates the Run (finding it there is as good) and says what to answer.
    async fn start(&self, run: &Run, heard: &Heard) -> Result<(&'static str, String), FollowError> {
        let runs: Api<Run> = Api::namespaced(self.client.clone(), &self.namespace);
        let run = &command::created_by(run, &self.me);
        match runs.create(&PostParams::default(), run).await {
            Ok(_) => {
                tracing::info!(run = %run.name_any(), sender = %heard.sender, "chat: started a run");
                Ok(("started", command::started_text(run)))
            }
            Err(kube::Error::Api(status)) if status.code == 409 => {
                Ok(("started", command::started_text(run)))
            }
            Err(kube::Error::Api(status))
                if (400..500).contains(&status.code) && status.code != 429 =>
            {
                let name = command::parse(&heard.text)
                    .map(|(n, _)| n)
                    .unwrap_or_default();
                Ok((
                    "not-started",
                    command::not_started_text(name, &status.message),
                ))
            }
            Err(e) => Err(Error::kube(format!("creating the run {}", run.name_any()), e).into()),
        }
    }
}

/// The listeners: each flow with its rooms as ids (rooms not joined yet
/// are left out).
fn listeners<'a>(flows: &'a [Arc<Flow>], joined: &BTreeMap<String, String>) -> Vec<Listener<'a>> {
    flows
        .iter()
        .map(|flow| Listener::of(flow, |written| joined.get(written).cloned()))
        .collect()
}

/// Commands older than this are not acted on: a follower that resumes
/// after a long pause (its flows were deleted, then applied again) does not
/// start what people asked for long ago.
const MAX_AGE_MS: i64 = 60 * 60 * 1000;

/// The events of one room that are news at `now_ms`: not the follower's
/// own, not older than [`MAX_AGE_MS`]. In a room new to the position
/// (`fresh` holds when this follower began to follow it, in ms), only those
/// after the bot's joining when the batch holds it, else (the bot was in
/// the room already) those sent since it began to follow.
fn news<'a>(
    events: &'a [MatrixEvent],
    fresh: Option<i64>,
    me: &'a str,
    now_ms: i64,
) -> impl Iterator<Item = &'a MatrixEvent> {
    let joined = fresh.and_then(|_| events.iter().rposition(|e| e.is_join_of(me)));
    let (start, since) = match (joined, fresh) {
        (Some(join), _) => (join + 1, i64::MIN),
        (None, Some(followed_at)) => (0, followed_at),
        (None, None) => (0, i64::MIN),
    };
    events[start..].iter().filter(move |e| {
        e.sender != me
            && e.origin_server_ts >= since
            && now_ms.saturating_sub(e.origin_server_ts) <= MAX_AGE_MS
    })
}

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn event(
        id: &str,
        sender: &str,
        kind: &str,
        content: serde_json::Value,
        key: Option<&str>,
    ) -> MatrixEvent {
        MatrixEvent {
            event_id: id.into(),
            sender: sender.into(),
            kind: kind.into(),
            content,
            origin_server_ts: 1_000_000_000,
            state_key: key.map(str::to_string),
        }
    }

    const NOW: i64 = 1_000_001_000;

    #[test]
    fn in_a_fresh_room_only_what_follows_the_join_is_news() {
        let me = "@bot:x";
        let events = [
            event(
                "$old",
                "@a:x",
                "m.room.message",
                json!({"msgtype": "m.text", "body": "!review old"}),
                None,
            ),
            event(
                "$join",
                me,
                "m.room.member",
                json!({"membership": "join"}),
                Some(me),
            ),
            event(
                "$mine",
                me,
                "m.room.message",
                json!({"msgtype": "m.text", "body": "hi"}),
                None,
            ),
            event(
                "$new",
                "@a:x",
                "m.room.message",
                json!({"msgtype": "m.text", "body": "!review new"}),
                None,
            ),
        ];
        let ids = |fresh| {
            news(&events, fresh, me, NOW)
                .map(|e| e.event_id.as_str())
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(Some(NOW)), ["$new"], "after the join, whenever sent");
        assert_eq!(ids(None), ["$old", "$new"]);
        // Two hours later, nothing is news any more.
        assert!(
            news(&events, None, me, NOW + 2 * 3600 * 1000)
                .next()
                .is_none()
        );
    }

    #[test]
    fn in_a_fresh_room_the_bot_was_already_in_what_was_sent_since_following_is_news() {
        let me = "@bot:x";
        let at = |id: &str, ts: i64| MatrixEvent {
            origin_server_ts: ts,
            ..event(
                id,
                "@a:x",
                "m.room.message",
                json!({"msgtype": "m.text", "body": "!review it"}),
                None,
            )
        };
        let followed = NOW - 5_000;
        let events = [
            at("$before", followed - 1),
            at("$since", followed),
            at("$later", NOW),
        ];
        let ids: Vec<&str> = news(&events, Some(followed), me, NOW)
            .map(|e| e.event_id.as_str())
            .collect();
        assert_eq!(ids, ["$since", "$later"]);
    }
}
