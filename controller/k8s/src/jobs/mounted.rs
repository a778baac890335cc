//! The run's workspace volume as a pod mounts it: which claim, which
//! branch, which node. The script pods' manifests and the checkout and push
//! Jobs both use it.

use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    PersistentVolumeClaimVolumeSource, Volume,
};

use super::JobSettings;
use coxswain_core::api::WorkspaceStatus;

/// The run's volume as a script pod mounts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountedWorkspace {
    /// The PersistentVolumeClaim's name.
    pub claim: String,
    /// The run's branch (`$BRANCH`).
    pub branch: String,
    /// The node every pod is placed on (a ReadWriteOnce volume's node).
    pub node: Option<String>,
}

impl MountedWorkspace {
    /// The workspace a run's status says was made, if it was: its claim is
    /// named and its uid recorded.
    pub fn of(status: &WorkspaceStatus, settings: &JobSettings) -> Option<Self> {
        status.volume_uid.as_ref()?;
        Some(MountedWorkspace {
            claim: status.volume.clone()?,
            branch: status.branch.clone(),
            node: status.node.clone().filter(|_| settings.pins_pods()),
        })
    }

    /// The pod volume `name` backed by the claim.
    pub fn volume(&self, name: &str) -> Volume {
        claim_volume(name, &self.claim)
    }

    /// Every pod of the run on the volume's node, when it is pinned: the
    /// node's name as a field (a label may be anyone's to set on a node).
    pub fn affinity(&self) -> Option<Affinity> {
        self.node.as_deref().map(pinned_to)
    }
}

pub(super) fn claim_volume(name: &str, claim: &str) -> Volume {
    Volume {
        name: name.into(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: claim.into(),
            read_only: None,
        }),
        ..Volume::default()
    }
}

pub(super) fn pinned_to(node: &str) -> Affinity {
    Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_fields: Some(vec![NodeSelectorRequirement {
                        key: "metadata.name".into(),
                        operator: "In".into(),
                        values: Some(vec![node.to_string()]),
                    }]),
                    ..NodeSelectorTerm::default()
                }],
            }),
            ..NodeAffinity::default()
        }),
        ..Affinity::default()
    }
}
