//! Where a Matrix follower stands, kept in the API server so a restarted or
//! new leader goes on from the same place: the sync position (`since`) and
//! the rooms already followed (their events after that position are all
//! new). One ConfigMap per connection, beside the connection's Secret.
//!
//! Anyone who may write ConfigMaps in the namespace may edit it, so it is
//! signed: an HMAC of what it holds, keyed by the connection's token (in
//! the Secret, which they cannot read). A position whose signature does not
//! hold is not followed — moving it back would replay old commands, moving
//! it on would drop new ones — and the follower starts from now instead.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use ring::hmac;

use crate::error::Error;
use crate::names;

/// The key holding the sync position.
const SINCE: &str = "since";
/// The key holding the followed rooms, as a JSON list of ids.
const ROOMS: &str = "rooms";
/// The key holding the signature of `since` and `rooms`.
const MAC: &str = "mac";

/// A connection's position, as read or about to be written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Position {
    /// The `since` token of the next sync.
    pub since: String,
    /// Rooms whose every event after `since` is to be read.
    pub rooms: BTreeSet<String>,
    /// The ConfigMap's resource version, so two writers cannot both win.
    version: Option<String>,
}

impl Position {
    /// A position not stored yet.
    pub fn new(since: String, rooms: BTreeSet<String>) -> Self {
        Position {
            since,
            rooms,
            version: None,
        }
    }

    /// This position, written over `self`'s stored object (one made by
    /// someone else, say) instead of next to it.
    pub fn replacing(mut self, stored: &Position) -> Self {
        self.version = stored.version.clone();
        self
    }
}

/// What was found where a connection's position is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Loaded {
    /// Nothing stored yet.
    Nothing,
    /// The position the follower stored.
    Position(Position),
    /// Something the follower did not write (its signature does not hold):
    /// why, for an Event, and what a fresh position must replace.
    Forged {
        /// Why it is not followed.
        why: String,
        /// A fresh position that replaces it.
        fresh: Position,
    },
}

/// The signature of a position's `since` and `rooms` (as stored) under `key`.
fn mac(key: &[u8], since: &str, rooms: &str) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, key);
    let mut signed = Vec::with_capacity(since.len() + rooms.len() + 1);
    signed.extend_from_slice(since.as_bytes());
    signed.push(b'\n');
    signed.extend_from_slice(rooms.as_bytes());
    names::hex(hmac::sign(&key, &signed).as_ref())
}

/// Reads a stored position, checking its signature under `key`.
fn read(map: ConfigMap, key: &[u8], name: &str) -> Loaded {
    let version = map.metadata.resource_version.clone();
    let forged = |why: String| Loaded::Forged {
        why,
        fresh: Position {
            version: version.clone(),
            ..Position::default()
        },
    };
    let data = map.data.unwrap_or_default();
    let Some(since) = data.get(SINCE).filter(|s| !s.is_empty()) else {
        return Loaded::Nothing;
    };
    let stored_rooms = data.get(ROOMS).map(String::as_str).unwrap_or_default();
    let signed = data
        .get(MAC)
        .is_some_and(|m| hmac_matches(key, since, stored_rooms, m));
    if !signed {
        return forged(format!(
            "the chat position ConfigMap {name} was not written by Coxswain (its signature does not match); it is not followed, and the bot goes on from now"
        ));
    }
    let Ok(rooms) = serde_json::from_str(stored_rooms) else {
        return forged(format!(
            "the chat position ConfigMap {name} holds unreadable rooms"
        ));
    };
    Loaded::Position(Position {
        since: since.clone(),
        rooms,
        version,
    })
}

fn hmac_matches(key: &[u8], since: &str, rooms: &str, given: &str) -> bool {
    let expected = mac(key, since, rooms);
    // Constant time, as ring compares tags.
    expected.len() == given.len()
        && expected
            .bytes()
            .zip(given.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// Where the connection `connection` in `namespace` stands, if anywhere;
/// `key` (the connection's token) checks that the follower wrote it.
pub async fn load(
    client: &Client,
    namespace: &str,
    connection: &str,
    key: &[u8],
) -> Result<Loaded, Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let name = names::chat_position(connection);
    let Some(map) = api
        .get_opt(&name)
        .await
        .map_err(|e| Error::kube(format!("reading the chat position {namespace}/{name}"), e))?
    else {
        return Ok(Loaded::Nothing);
    };
    Ok(read(map, key, &name))
}

/// Stores `position`, created or replaced, signed under `key`; a write that
/// lost to another writer fails with a conflict (the follower then starts
/// over from what the API server holds).
pub async fn save(
    client: &Client,
    namespace: &str,
    connection: &str,
    position: &mut Position,
    key: &[u8],
) -> Result<(), Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let name = names::chat_position(connection);
    let rooms: Vec<&String> = position.rooms.iter().collect();
    let rooms = serde_json::to_string(&rooms).unwrap_or_default();
    let signature = mac(key, &position.since, &rooms);
    let map = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.to_string()),
            resource_version: position.version.clone(),
            labels: Some(BTreeMap::from([(
                names::CHAT_LABEL.to_string(),
                names::flow_label(connection),
            )])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([
            (SINCE.to_string(), position.since.clone()),
            (ROOMS.to_string(), rooms),
            (MAC.to_string(), signature),
        ])),
        ..Default::default()
    };
    let what = format!("writing the chat position {namespace}/{name}");
    let written = match &position.version {
        Some(_) => api.replace(&name, &PostParams::default(), &map).await,
        None => api.create(&PostParams::default(), &map).await,
    }
    .map_err(|e| Error::kube(what, e))?;
    position.version = written.metadata.resource_version;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(since: &str, rooms: &str, key: &[u8]) -> ConfigMap {
        ConfigMap {
            data: Some(BTreeMap::from([
                (SINCE.to_string(), since.to_string()),
                (ROOMS.to_string(), rooms.to_string()),
                (MAC.to_string(), mac(key, since, rooms)),
            ])),
            ..Default::default()
        }
    }

    #[test]
    fn only_a_position_signed_with_the_connections_token_is_followed() {
        let key = b"syt_bot_token";
        let rooms = r#"["!a:hs"]"#;
        let Loaded::Position(ours) = read(stored("s42", rooms, key), key, "p") else {
            panic!("ours")
        };
        assert_eq!(ours.since, "s42");
        assert!(ours.rooms.contains("!a:hs"));
        // Moved back (to replay old commands) by someone without the token.
        let mut moved = stored("s42", rooms, key);
        moved
            .data
            .as_mut()
            .expect("data")
            .insert(SINCE.into(), "s1".into());
        assert!(
            matches!(read(moved, key, "p"), Loaded::Forged { why, .. } if why.contains("ConfigMap p"))
        );
        // Signed with another key, or unsigned (a position made by hand).
        assert!(matches!(
            read(stored("s42", rooms, b"guess"), key, "p"),
            Loaded::Forged { .. }
        ));
        let mut unsigned = stored("s42", rooms, key);
        unsigned.data.as_mut().expect("data").remove(MAC);
        assert!(matches!(read(unsigned, key, "p"), Loaded::Forged { .. }));
        assert_eq!(read(ConfigMap::default(), key, "p"), Loaded::Nothing);
    }
}
