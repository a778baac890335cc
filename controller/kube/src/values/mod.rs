//! Reading a Run's status whole: large values live in ConfigMaps the Run
//! owns (the controller moves them there to keep the status small), and
//! the status only says where each went. [`Values::load`] puts them back,
//! checking each against the digest the status recorded. It only reads, so
//! the controller and whatever acts as a person (the viewer, the plugin)
//! share it; moving values out is the controller's (`coxswain-k8s`).
//!
//! Each ConfigMap holds one piece (at most
//! [`PIECE_BYTES`](coxswain_core::api::offload::PIECE_BYTES)) of a value's
//! compact JSON under the key `value`, is immutable, owned by the Run and
//! labelled with the Run's uid. Its name comes from the value's digest, so
//! a piece read once never goes stale.

pub mod cache;
pub mod config_map;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};

use cache::Cache;
use config_map::Owner;
use coxswain_core::api::offload::{self, MovedValue, OffloadError};
use coxswain_core::api::{Run, RunStatus};

/// Why a Run's status could not be read whole.
#[derive(Debug, thiserror::Error)]
pub enum ValueError {
    /// The API server refused or failed a read.
    #[error("{action}: {source}")]
    Kube {
        /// What was being read, such as `reading ConfigMap r-value-…-0`.
        action: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// A ConfigMap or the status itself does not hold what it should.
    #[error("{0}")]
    Corrupt(String),
    /// A value ConfigMap holds something else than the piece the status
    /// recorded: someone replaced it.
    #[error("{reason}")]
    Tampered {
        /// The object, such as `a value ConfigMap`.
        object: String,
        /// What is wrong with it, for the run's status.
        reason: String,
    },
    /// The moved values and the status do not fit together.
    #[error("the status of run {run}: {source}")]
    Offload {
        /// The Run, as `namespace/name`.
        run: String,
        /// What was wrong.
        #[source]
        source: OffloadError,
    },
}

/// Reads moved values back, keeping the pieces it read (they never change).
/// The controller shares one for all runs; a person's reader makes its own,
/// so nothing one caller may read is served to another.
pub struct Values {
    client: Client,
    cache: Cache,
}

impl Values {
    /// A reader acting with `client`'s credentials.
    pub fn new(client: Client) -> Self {
        Values {
            client,
            cache: Cache::default(),
        }
    }

    /// The status of `run` with every moved value put back.
    pub async fn load(&self, run: &Run) -> Result<RunStatus, ValueError> {
        let Some(status) = &run.status else {
            return Ok(RunStatus::default());
        };
        if status.values.is_empty() {
            return Ok(status.clone());
        }
        let owner = Owner::of(run)?;
        let stored = serde_json::to_value(status)
            .map_err(|e| ValueError::Corrupt(format!("the status of run {}: {e}", owner.id())))?;
        let mut contents = BTreeMap::new();
        for entry in unique(status.values.clone()) {
            let mut content = String::with_capacity(usize::try_from(entry.bytes).unwrap_or(0));
            for name in &entry.config_maps {
                content.push_str(&self.piece(&owner, &entry.path, name).await?);
            }
            contents.insert(entry.sha256, content);
        }
        let joined = offload::join(stored, &contents).map_err(|source| match source {
            // Pieces that do not add up to the value the status recorded:
            // someone replaced them (a value ConfigMap is immutable).
            OffloadError::Mismatch { .. } => ValueError::Tampered {
                object: "a value ConfigMap".into(),
                reason: format!(
                    "{source}: a ConfigMap holding a value moved out of run {}'s status was replaced by someone else (it was left alone)",
                    owner.id()
                ),
            },
            source => owner.error(source),
        })?;
        serde_json::from_value(joined)
            .map_err(|e| ValueError::Corrupt(format!("the status of run {}: {e}", owner.id())))
    }

    /// The piece ConfigMap `name` holds, from the cache or the API server.
    async fn piece(&self, owner: &Owner, path: &str, name: &str) -> Result<Arc<str>, ValueError> {
        if let Some(piece) = self.cache.get(name) {
            return Ok(piece);
        }
        let what = || {
            format!(
                "ConfigMap {name}, holding the value at {path} of run {}",
                owner.id()
            )
        };
        let object = self
            .api(owner)
            .get(name)
            .await
            .map_err(|source| ValueError::Kube {
                action: format!("reading {}", what()),
                source,
            })?;
        let piece = config_map::piece_of(object)
            .ok_or_else(|| ValueError::Corrupt(format!("{} has no `value` key", what())))?;
        let piece: Arc<str> = Arc::from(piece);
        self.cache.put(name, piece.clone());
        Ok(piece)
    }

    /// The pieces already read or written, by ConfigMap name: the
    /// controller keeps what it writes here too.
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// The ConfigMaps of `owner`'s namespace, as this reader's client.
    pub fn api(&self, owner: &Owner) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), &owner.namespace)
    }
}

/// One entry per digest: the same value in several places is stored once.
pub fn unique(entries: Vec<MovedValue>) -> Vec<MovedValue> {
    let mut seen = BTreeSet::new();
    entries
        .into_iter()
        .filter(|e| seen.insert(e.sha256.clone()))
        .collect()
}
