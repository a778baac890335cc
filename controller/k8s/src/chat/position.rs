//! Where a Matrix follower stands, kept in the API server so a restarted or
//! new leader goes on from the same place: the sync position (`since`) and
//! the rooms already followed (their events after that position are all
//! new). One ConfigMap per connection, beside the connection's Secret.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

use crate::error::Error;
use crate::names;

/// The key holding the sync position.
const SINCE: &str = "since";
/// The key holding the followed rooms, as a JSON list of ids.
const ROOMS: &str = "rooms";

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
}

/// Where the connection `connection` in `namespace` stands, if anywhere.
pub async fn load(
    client: &Client,
    namespace: &str,
    connection: &str,
) -> Result<Option<Position>, Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let name = names::chat_position(connection);
    let Some(map) = api
        .get_opt(&name)
        .await
        .map_err(|e| Error::kube(format!("reading the chat position {namespace}/{name}"), e))?
    else {
        return Ok(None);
    };
    let data = map.data.unwrap_or_default();
    let Some(since) = data.get(SINCE).filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let rooms = data
        .get(ROOMS)
        .and_then(|r| serde_json::from_str(r).ok())
        .unwrap_or_default();
    Ok(Some(Position {
        since: since.clone(),
        rooms,
        version: map.metadata.resource_version,
    }))
}

/// Stores `position`, created or replaced; a write that lost to another
/// writer fails with a conflict (the follower then starts over from what
/// the API server holds).
pub async fn save(
    client: &Client,
    namespace: &str,
    connection: &str,
    position: &mut Position,
) -> Result<(), Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let name = names::chat_position(connection);
    let rooms: Vec<&String> = position.rooms.iter().collect();
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
            (
                ROOMS.to_string(),
                serde_json::to_string(&rooms).unwrap_or_default(),
            ),
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
