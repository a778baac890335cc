//! The ConfigMap holding one piece of a moved value, and who owns it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};

use super::ValueError;
use crate::names;
use coxswain_core::api::Run;
use coxswain_core::api::offload::{MovedValue, OffloadError};

/// The key under which a ConfigMap holds its piece.
pub const KEY: &str = "value";

/// The Run that owns the value ConfigMaps, as they need it.
pub struct Owner {
    /// The Run's name, which value ConfigMaps' names start with.
    pub name: String,
    /// Where the Run and its ConfigMaps are.
    pub namespace: String,
    /// The Run's uid, which labels its ConfigMaps.
    pub uid: String,
    reference: OwnerReference,
}

impl Owner {
    /// The owner facts of `run`; a Run read from the API server has them all.
    pub fn of(run: &Run) -> Result<Self, ValueError> {
        let name = run.name_any();
        let missing = |what: &str| ValueError::Corrupt(format!("run {name} has no {what}"));
        Ok(Owner {
            namespace: run.namespace().ok_or_else(|| missing("namespace"))?,
            uid: run.uid().ok_or_else(|| missing("uid"))?,
            reference: run
                .controller_owner_ref(&())
                .ok_or_else(|| missing("uid"))?,
            name,
        })
    }

    /// `namespace/name`, for messages.
    pub fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// An offload error about this run.
    pub fn error(&self, source: OffloadError) -> ValueError {
        ValueError::Offload {
            run: self.id(),
            source,
        }
    }

    /// The immutable ConfigMap `name` holding `piece` of `entry`'s value,
    /// labelled with `role` ([`names::ROLE_VALUE`] or [`names::ROLE_SHOWN`]).
    pub fn config_map(&self, role: &str, entry: &MovedValue, name: &str, piece: &str) -> ConfigMap {
        let labels = names::owner_labels(&self.uid, &self.name, role);
        let annotations = BTreeMap::from([
            (
                names::VALUE_SHA_ANNOTATION.to_string(),
                entry.sha256.clone(),
            ),
            (names::VALUE_PATH_ANNOTATION.to_string(), entry.path.clone()),
        ]);
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(self.namespace.clone()),
                labels: Some(labels),
                annotations: Some(annotations),
                owner_references: Some(vec![self.reference.clone()]),
                ..Default::default()
            },
            immutable: Some(true),
            data: Some(BTreeMap::from([(KEY.to_string(), piece.to_string())])),
            ..Default::default()
        }
    }
}

/// The piece a value ConfigMap holds.
pub fn piece_of(object: ConfigMap) -> Option<String> {
    object.data?.remove(KEY)
}
