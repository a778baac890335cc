//! A run's workspace on a cluster: the PersistentVolumeClaim every script
//! pod of the run mounts at `$WORKSPACE`, and the two Jobs that run `git`
//! in it (`coxswain step-exec checkout` before the first step, `push` after
//! the last), built from the run and the flow alone so a restarted
//! controller builds the same objects under the same names.
//!
//! The git Jobs run the code `coxswain run` runs
//! ([`coxswain_steps::workspace`]), and hand back their result as a script
//! step's pod does ([`wire`](super::wire)), so the launcher reads them the
//! same way. What they are told is on their command line, which only whoever
//! creates the Job writes; a repo's Secret is mounted into the Job's pod, so
//! the controller never reads it.

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, EnvVar, EnvVarSource, ObjectFieldSelector,
    PersistentVolumeClaim, PersistentVolumeClaimSpec, PodSpec, PodTemplateSpec, SecretVolumeSource,
    Volume, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::JobSettings;
use super::manifest::{
    RunOwner, STEP_CONTAINER, hardened, install, labels, literal, mount, pod_security,
};
use super::mounted::{claim_volume, pinned_to};
use super::task::paths;
use crate::names;
use coxswain_core::api::{PushedBranch, StepError, Workspace};
use coxswain_core::engine::{Done, Failed, WorkResult};
use coxswain_steps::launch::WorkId;
use coxswain_steps::secrets::EnvSecrets;
use coxswain_steps::workspace::Repos;

/// The step-like name of the checkout Job's work. A step key cannot hold
/// `-`, so no step's Job can take its name.
pub const CHECKOUT: &str = "workspace-checkout";

/// The step-like name of the push Job's work.
pub const PUSH: &str = "workspace-push";

/// Where a git Job's pod finds each repo's Secret: `SECRETS_DIR/<name>/<key>`.
pub const SECRETS_DIR: &str = "/coxswain/secrets";

/// The variable a git Job's pod learns its node from (downward API), for
/// the status's `node`.
pub const NODE_VAR: &str = "COXSWAIN_NODE_NAME";

/// Which git Job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GitAct {
    /// Clone every repo and make the run's branch.
    Checkout,
    /// Push the run's branch back.
    Push,
}

impl From<coxswain_core::engine::WorkspaceWork> for GitAct {
    fn from(work: coxswain_core::engine::WorkspaceWork) -> Self {
        match work {
            coxswain_core::engine::WorkspaceWork::CheckOut => GitAct::Checkout,
            coxswain_core::engine::WorkspaceWork::Push => GitAct::Push,
        }
    }
}

impl GitAct {
    /// The name its work goes by (and its Job's name ends with).
    pub fn key(self) -> &'static str {
        match self {
            GitAct::Checkout => CHECKOUT,
            GitAct::Push => PUSH,
        }
    }

    /// The `coxswain step-exec` subcommand its pod runs.
    fn command(self) -> &'static str {
        match self {
            GitAct::Checkout => "checkout",
            GitAct::Push => "push",
        }
    }

    /// The id the launcher finds its Job by: one per run, never retried.
    pub fn work_id(self, run_uid: &str) -> WorkId {
        WorkId {
            run: run_uid.to_string(),
            step: self.key().to_string(),
            part: None,
            iteration: None,
            attempt: 1,
        }
    }
}

/// What a git Job is told: the flow's workspace and the run's branch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GitTask {
    /// The workspace as the flow declares it.
    pub workspace: Workspace,
    /// The run's branch.
    pub branch: String,
}

/// The run's PersistentVolumeClaim: its size and class from the flow, else
/// the controller's settings and the cluster's default class.
pub fn claim(
    owner: &RunOwner,
    workspace: &Workspace,
    settings: &JobSettings,
) -> PersistentVolumeClaim {
    let name = names::workspace_claim(&owner.name, &owner.uid);
    let size = workspace
        .size
        .clone()
        .unwrap_or_else(|| Quantity(settings.workspace.size.clone()));
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(owner.namespace.clone()),
            labels: Some(labels(owner, None, "workspace")),
            owner_references: Some(vec![owner.reference()]),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec![settings.workspace.access_mode.as_str().to_string()]),
            storage_class_name: workspace.storage_class_name.clone(),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".to_string(), size)])),
                ..VolumeResourceRequirements::default()
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    }
}

/// The Job of `act` for the run, mounting `claim`, on `node` when pinned.
pub fn git_job(
    owner: &RunOwner,
    act: GitAct,
    task: &GitTask,
    claim: &str,
    node: Option<&str>,
    settings: &JobSettings,
) -> Job {
    let name = names::job(&owner.name, &act.work_id(&owner.uid));
    let job_labels = labels(owner, Some(act.key()), "workspace");
    let metadata = ObjectMeta {
        name: Some(name),
        namespace: Some(owner.namespace.clone()),
        labels: Some(job_labels.clone()),
        annotations: Some(BTreeMap::from([(
            names::WORK_ANNOTATION.to_string(),
            act.work_id(&owner.uid).to_string(),
        )])),
        owner_references: Some(vec![owner.reference()]),
        ..ObjectMeta::default()
    };
    Job {
        metadata,
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(job_labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(git_pod(act, task, claim, node, settings)),
            },
            ..JobSpec::default()
        }),
        status: None,
    }
}

fn git_pod(
    act: GitAct,
    task: &GitTask,
    claim: &str,
    node: Option<&str>,
    settings: &JobSettings,
) -> PodSpec {
    let image = settings
        .workspace
        .image
        .clone()
        .unwrap_or_else(|| settings.image.clone());
    let install = install(settings);
    let task_json = serde_json::to_string(task).unwrap_or_default();
    let secrets = secret_names(&task.workspace);
    let mut mounts = vec![
        mount("coxswain-bin", paths::BIN_DIR, true),
        mount("workspace", paths::WORKSPACE, false),
        mount("home", paths::HOME, false),
        mount("tmp", paths::TMP, false),
    ];
    let mut volumes = vec![
        empty("coxswain-bin"),
        claim_volume("workspace", claim),
        empty("home"),
        empty("tmp"),
    ];
    for (i, secret) in secrets.iter().enumerate() {
        let volume = format!("secret-{i}");
        mounts.push(mount(&volume, &format!("{SECRETS_DIR}/{secret}"), true));
        volumes.push(Volume {
            name: volume,
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.clone()),
                // Readable by the pod's group (its `fsGroup`), nobody else.
                default_mode: Some(0o440),
                optional: Some(false),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        });
    }
    let node_var = EnvVar {
        name: NODE_VAR.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: "spec.nodeName".into(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    };
    let main = Container {
        name: STEP_CONTAINER.to_string(),
        image: Some(image),
        command: Some(vec![
            paths::EXECUTABLE.into(),
            "step-exec".into(),
            act.command().into(),
            "--task".into(),
            task_json,
        ]),
        env: Some(vec![
            literal("HOME", paths::HOME),
            literal("TMPDIR", paths::TMP),
            node_var,
        ]),
        working_dir: Some(paths::WORKSPACE.into()),
        volume_mounts: Some(mounts),
        security_context: Some(hardened()),
        termination_message_path: Some(paths::TERMINATION_LOG.into()),
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        ..Container::default()
    };
    PodSpec {
        restart_policy: Some("Never".into()),
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        security_context: Some(pod_security(settings, true)),
        init_containers: Some(vec![install]),
        containers: vec![main],
        volumes: Some(volumes),
        affinity: node.map(pinned_to),
        ..PodSpec::default()
    }
}

fn empty(name: &str) -> Volume {
    Volume {
        name: name.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    }
}

/// Each Secret the repos name, once, in order.
fn secret_names(workspace: &Workspace) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for secret in workspace.repos.iter().filter_map(|r| r.secret_ref.as_ref()) {
        if !names.contains(&secret.name) {
            names.push(secret.name.clone());
        }
    }
    names
}

/// What the push Job hands back: the branches pushed, and the first
/// failure (the pushes before it stand).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pushed {
    /// The repos pushed to.
    #[serde(default)]
    pub pushed: Vec<PushedBranch>,
    /// Why a push failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<StepError>,
}

/// Inside a git Job's pod: does `act` in `dir` with the repos' Secrets
/// from `secrets`, as `coxswain run` would; the result is the
/// [`WorkspaceStatus`](coxswain_core::api::WorkspaceStatus) (checkout) or [`Pushed`] (push) as an output.
pub async fn run_git(act: GitAct, task: &GitTask, dir: &Path, secrets: &Path) -> WorkResult {
    let store = EnvSecrets::with_dir(secrets);
    let repos = Repos::read(&task.workspace, &store)
        .await
        .map_err(|e| Failed::from(StepError::from(e)))?;
    let output = match act {
        GitAct::Checkout => {
            let mut status = repos
                .check_out(dir, &task.branch)
                .await
                .map_err(|e| Failed::from(StepError::from(e)))?;
            status.volume = None;
            status.node = std::env::var(NODE_VAR).ok().filter(|n| !n.is_empty());
            serde_json::to_value(status)
        }
        GitAct::Push => {
            let (pushed, error) = repos.push(dir, &task.branch).await;
            serde_json::to_value(Pushed {
                pushed,
                error: error.map(StepError::from),
            })
        }
    };
    Ok(Done {
        output: output.unwrap_or(Value::Null),
        ..Done::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_core::api::{RepoSecretRef, WorkspaceRepo};

    fn owner() -> RunOwner {
        RunOwner::in_team("fix-42", "0b7c5d7e-1111-4222-8333-944455556666")
    }

    fn workspace() -> Workspace {
        Workspace {
            repos: vec![
                WorkspaceRepo {
                    name: "app".into(),
                    url: "https://git.example/app.git".into(),
                    secret_ref: Some(RepoSecretRef {
                        name: "git-app".into(),
                    }),
                    ..WorkspaceRepo::default()
                },
                WorkspaceRepo {
                    name: "docs".into(),
                    url: "https://git.example/docs.git".into(),
                    secret_ref: Some(RepoSecretRef {
                        name: "git-app".into(),
                    }),
                    ..WorkspaceRepo::default()
                },
            ],
            ..Workspace::default()
        }
    }

    #[test]
    fn the_claim_takes_the_flows_size_and_class_or_the_settings() {
        let settings = JobSettings::default();
        let c = claim(&owner(), &Workspace::default(), &settings);
        let spec = c.spec.expect("spec");
        assert_eq!(spec.storage_class_name, None, "the cluster's default class");
        assert_eq!(spec.access_modes, Some(vec!["ReadWriteOnce".to_string()]));
        let size = &spec.resources.and_then(|r| r.requests).expect("requests")["storage"];
        assert_eq!(size.0, settings.workspace.size);
        let owners = c.metadata.owner_references.expect("owned");
        assert_eq!(owners[0].uid, owner().uid);
        assert_eq!(owners[0].controller, Some(true));

        let ws = Workspace {
            size: Some(Quantity("5Gi".into())),
            storage_class_name: Some("fast".into()),
            ..Workspace::default()
        };
        let spec = claim(&owner(), &ws, &settings).spec.expect("spec");
        assert_eq!(spec.storage_class_name.as_deref(), Some("fast"));
        assert_eq!(
            spec.resources.and_then(|r| r.requests).expect("requests")["storage"].0,
            "5Gi"
        );
    }

    #[test]
    fn claims_and_git_jobs_of_two_runs_of_one_name_never_share_a_name() {
        let a = claim(&owner(), &Workspace::default(), &JobSettings::default());
        let mut other = owner();
        other.uid = "0b7c5d7e-1111-4222-8333-000000000000".into();
        let b = claim(&other, &Workspace::default(), &JobSettings::default());
        assert_ne!(a.metadata.name, b.metadata.name);
        let checkout = GitAct::Checkout.work_id(&owner().uid);
        let push = GitAct::Push.work_id(&owner().uid);
        assert_ne!(names::job("fix-42", &checkout), names::job("fix-42", &push));
    }

    #[test]
    fn a_git_job_mounts_the_claim_and_each_secret_once_and_says_its_task() {
        let task = GitTask {
            workspace: workspace(),
            branch: "coxswain/fix-42".into(),
        };
        let job = git_job(
            &owner(),
            GitAct::Checkout,
            &task,
            "fix-42-workspace",
            Some("node-7"),
            &JobSettings::default(),
        );
        let pod = job.spec.and_then(|s| s.template.spec).expect("pod spec");
        let volumes = pod.volumes.clone().expect("volumes");
        let claim = volumes
            .iter()
            .find_map(|v| v.persistent_volume_claim.clone())
            .expect("the claim");
        assert_eq!(claim.claim_name, "fix-42-workspace");
        let secrets: Vec<_> = volumes.iter().filter_map(|v| v.secret.clone()).collect();
        assert_eq!(secrets.len(), 1, "git-app once");
        let command = pod.containers[0].command.clone().expect("command");
        assert_eq!(
            command[1..3],
            ["step-exec".to_string(), "checkout".to_string()]
        );
        let told: GitTask = serde_json::from_str(&command[4]).expect("task");
        assert_eq!(told, task);
        let pinned = pod
            .affinity
            .and_then(|a| a.node_affinity)
            .and_then(|n| n.required_during_scheduling_ignored_during_execution)
            .expect("pinned");
        let field = &pinned.node_selector_terms[0]
            .match_fields
            .as_ref()
            .expect("fields")[0];
        assert_eq!(field.key, "metadata.name");
        assert_eq!(field.values, Some(vec!["node-7".to_string()]));
        assert_eq!(
            pod.security_context.and_then(|s| s.fs_group),
            Some(JobSettings::default().run_as_user)
        );
    }
}
