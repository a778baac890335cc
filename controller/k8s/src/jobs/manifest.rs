//! The objects one attempt of a script becomes: its Job, and its inputs
//! ConfigMap when they are too large to ride in the Job itself; built from
//! the work alone, so launching again builds the same.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMap, ConfigMapVolumeSource, Container, EmptyDirVolumeSource, EnvVar,
    EnvVarSource, KeyToPath, PodSecurityContext, PodSpec, PodTemplateSpec, SeccompProfile,
    SecretKeySelector, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;

use super::JobSettings;
use super::mounted::MountedWorkspace;
use super::task::{PodTask, paths};
use crate::names;
use coxswain_core::api::{Run, ScriptStep, StepError};
use coxswain_core::engine::{Work, codes, step_error};
use coxswain_steps::launch::WorkId;
use coxswain_steps::script::{InputFile, work_input_files};

/// The inputs ConfigMap's key holding the [`PodTask`].
pub const TASK_KEY: &str = "step.json";

/// What each input file's key in the inputs ConfigMap starts with (then the
/// file's name), so no input can take the [`TASK_KEY`].
pub const INPUT_KEY_PREFIX: &str = "input.";

/// The step's container (the init container is [`INSTALL_CONTAINER`]).
pub const STEP_CONTAINER: &str = "step";

/// The init container that copies `coxswain` into the pod.
pub const INSTALL_CONTAINER: &str = "install";

/// The most a ConfigMap holds (keys and values), less room for its metadata.
const CONFIG_MAP_MAX: usize = (1 << 20) - (8 << 10);

/// The longest ConfigMap key.
const KEY_MAX: usize = 253;

/// The most the task and input files (keys and values) may weigh to ride
/// in the Job, in the step container's [`INLINE_ENV`], instead of a
/// ConfigMap of their own: two API writes (the create, and the delete once
/// the result is read) and a read fewer per attempt. Not more, because
/// what rides in the Job is in its pod too, and both are written again
/// whole with each of their status changes (about nine an attempt): past
/// this, one ConfigMap written once costs the API server less. (Argo and
/// Tekton carry a step's template and script in its pod in the same way.)
pub(super) const INLINE_MAX: usize = 16 << 10;

/// The step container's variable holding its task and input files as one
/// JSON object (keys as in the ConfigMap), when they ride in the Job. It
/// comes after the step's own `env`, so it wins, and `step-exec` never
/// passes it on to the script.
pub const INLINE_ENV: &str = "COXSWAIN_STEP_INPUTS_JSON";

/// The Run everything is made for, as its children need it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOwner {
    /// The Run's namespace, where its children go.
    pub namespace: String,
    /// The Run's name.
    pub name: String,
    /// The Run's uid.
    pub uid: String,
}

impl RunOwner {
    /// The facts of `run` (empty when the object lacks them, which a Run
    /// read from the API server never does).
    pub fn of(run: &Run) -> Self {
        RunOwner {
            namespace: run.metadata.namespace.clone().unwrap_or_default(),
            name: run.metadata.name.clone().unwrap_or_default(),
            uid: run.metadata.uid.clone().unwrap_or_default(),
        }
    }

    /// A Run in the namespace `team`, for the tests of what is made for it.
    #[cfg(test)]
    pub(crate) fn in_team(name: &str, uid: &str) -> Self {
        RunOwner {
            namespace: "team".into(),
            name: name.into(),
            uid: uid.into(),
        }
    }

    /// The owner reference that makes the Run the controller of a child, so
    /// deleting the Run deletes it.
    pub fn reference(&self) -> OwnerReference {
        OwnerReference {
            api_version: Run::api_version(&()).into_owned(),
            kind: Run::kind(&()).into_owned(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }
}

/// An attempt's objects, ready to create.
#[derive(Debug, Clone)]
pub struct Manifests {
    /// The inputs (and the [`PodTask`]), when they do not ride in the Job.
    pub config_map: Option<ConfigMap>,
    /// The Job.
    pub job: Job,
}

/// Why inputs cannot become a ConfigMap's files.
#[derive(Debug, thiserror::Error)]
enum InputsProblem {
    /// A key too long for a ConfigMap key.
    #[error(
        "input `{key}` has a name of {len} characters; as a file in $INPUTS it may have at most {max}"
    )]
    NameTooLong { key: String, len: usize, max: usize },
    /// More than a ConfigMap holds.
    #[error(
        "the step's inputs weigh {bytes} bytes, more than the {max} bytes a ConfigMap holds; pass the script less (a reference, a smaller part) and let it fetch the rest"
    )]
    TooLarge { bytes: usize, max: usize },
}

/// The ConfigMap and Job of `work`, a script step, for `owner`, in the
/// run's `workspace` when it has one.
pub fn manifests(
    owner: &RunOwner,
    work: &Work,
    step: &ScriptStep,
    settings: &JobSettings,
    workspace: Option<&MountedWorkspace>,
) -> Manifests {
    let id = WorkId::of(work);
    let name = names::job(&owner.name, &id);
    let mut task = pod_task(work, step, settings, workspace);
    let files = work_input_files(work).map_err(StepError::from);
    let (inputs, entries) = attempt_entries(&mut task, files);
    let config_map = config_map(owner, &name, &work.step, entries);
    let digest = config_map_digest(&config_map);
    let source = match inline(&config_map) {
        Some(json) => Source::Inline(json),
        None => Source::ConfigMap(&name),
    };
    let attempt = Attempt {
        work,
        step,
        inputs: &inputs,
        digest: &digest,
        source,
        settings,
        workspace,
    };
    let job = job(owner, &name, &attempt);
    let config_map = matches!(attempt.source, Source::ConfigMap(_)).then_some(config_map);
    Manifests { config_map, job }
}

/// What the pod is told of `work` besides its inputs.
pub(super) fn pod_task(
    work: &Work,
    step: &ScriptStep,
    settings: &JobSettings,
    workspace: Option<&MountedWorkspace>,
) -> PodTask {
    PodTask {
        step: step.clone(),
        step_key: work.step.clone(),
        run_name: work.run.name.clone(),
        attempt: work.attempt,
        part_key: work.part.as_ref().map(|p| p.key.clone()),
        since: work.run.since.clone(),
        timeout_ms: work
            .timeout
            .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
        max_output: settings.max_output,
        branch: workspace.map(|w| w.branch.clone()),
        part_round: work.part.as_ref().map(|p| p.round),
        error: None,
    }
}

/// Whether `job`'s task and inputs ride in it (no inputs ConfigMap was made).
pub fn inputs_inline(job: &Job) -> bool {
    let containers = job
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    containers
        .iter()
        .filter(|c| c.name == STEP_CONTAINER)
        .flat_map(|c| c.command.iter().flatten())
        .any(|arg| arg == "--inputs-inline")
}

/// Where a pod finds its task and input files.
pub(super) enum Source<'a> {
    /// The inputs ConfigMap of this name, mounted.
    ConfigMap(&'a str),
    /// [`INLINE_ENV`], holding this JSON.
    Inline(String),
    /// Made in the pod (a later member of a script chain), where inline
    /// inputs go.
    Made,
}

/// What `config_map` holds as one JSON object, when it is small enough to
/// ride in the Job.
fn inline(config_map: &ConfigMap) -> Option<String> {
    let data = config_map.data.as_ref()?;
    let weight: usize = data.iter().map(|(k, v)| k.len() + v.len()).sum();
    (weight <= INLINE_MAX)
        .then(|| serde_json::to_string(data).ok())
        .flatten()
}

/// What one attempt's Job and pod are made of.
struct Attempt<'a> {
    work: &'a Work,
    step: &'a ScriptStep,
    inputs: &'a [InputFile],
    /// The digest of the task and inputs, which the pod checks.
    digest: &'a str,
    /// Where the pod finds them.
    source: Source<'a>,
    settings: &'a JobSettings,
    workspace: Option<&'a MountedWorkspace>,
}

/// The digest of what `config_map` holds, as its pod will check it.
pub fn config_map_digest(config_map: &ConfigMap) -> String {
    let data = config_map.data.iter().flatten();
    let binary = config_map.binary_data.iter().flatten();
    super::task::inputs_digest(
        data.map(|(k, v)| (k.as_str(), v.as_bytes()))
            .chain(binary.map(|(k, v)| (k.as_str(), v.0.as_slice()))),
    )
}

/// What the pod reads of an attempt, as keys and values (the inputs
/// ConfigMap's data, or what rides in the Job): each input file under
/// [`INPUT_KEY_PREFIX`], and the task under [`TASK_KEY`], which carries the
/// error instead when `files` cannot become the attempt's input files. The
/// controller makes them from the engine's work; a chain's pod makes a later
/// member's from its own, and the two digests must agree.
pub fn attempt_entries(
    task: &mut PodTask,
    files: Result<Vec<InputFile>, StepError>,
) -> (Vec<InputFile>, BTreeMap<String, String>) {
    let inputs = match checked_inputs(files, task) {
        Ok(inputs) => inputs,
        Err(error) => {
            task.error = Some(error);
            Vec::new()
        }
    };
    let mut entries: BTreeMap<String, String> = inputs
        .iter()
        .map(|f| (format!("{INPUT_KEY_PREFIX}{}", f.file), f.content.clone()))
        .collect();
    entries.insert(
        TASK_KEY.to_string(),
        serde_json::to_string(task).unwrap_or_default(),
    );
    (inputs, entries)
}

/// The input files, or the step error that stops the attempt (the local
/// runner's for clashing names, else what a ConfigMap cannot hold).
fn checked_inputs(
    files: Result<Vec<InputFile>, StepError>,
    task: &PodTask,
) -> Result<Vec<InputFile>, StepError> {
    let files = files?;
    let max = KEY_MAX - INPUT_KEY_PREFIX.len();
    if let Some(long) = files.iter().find(|f| f.file.len() > max) {
        let problem = InputsProblem::NameTooLong {
            key: long.key.clone(),
            len: long.file.len(),
            max,
        };
        return Err(step_error(codes::SCRIPT, problem.to_string()));
    }
    let task_bytes = serde_json::to_string(task).map(|t| t.len()).unwrap_or(0);
    let bytes: usize = files
        .iter()
        .map(|f| INPUT_KEY_PREFIX.len() + f.file.len() + f.content.len())
        .sum();
    if bytes + task_bytes + TASK_KEY.len() > CONFIG_MAP_MAX {
        let problem = InputsProblem::TooLarge {
            bytes,
            max: CONFIG_MAP_MAX.saturating_sub(task_bytes + TASK_KEY.len()),
        };
        return Err(step_error(codes::SCRIPT, problem.to_string()));
    }
    Ok(files)
}

/// The labels of a child of the run for `step` (none for the run as a
/// whole), playing `role`.
pub(super) fn labels(owner: &RunOwner, step: Option<&str>, role: &str) -> BTreeMap<String, String> {
    let mut labels = names::owner_labels(&owner.uid, &owner.name, role);
    if let Some(step) = step {
        labels.insert(names::STEP_LABEL.to_string(), names::step_label(step));
    }
    labels
}

fn meta(owner: &RunOwner, name: &str, step: &str, role: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(owner.namespace.clone()),
        labels: Some(labels(owner, Some(step), role)),
        owner_references: Some(vec![owner.reference()]),
        ..ObjectMeta::default()
    }
}

fn config_map(
    owner: &RunOwner,
    name: &str,
    step: &str,
    data: BTreeMap<String, String>,
) -> ConfigMap {
    ConfigMap {
        metadata: meta(owner, name, step, "inputs"),
        data: Some(data),
        immutable: Some(true),
        ..ConfigMap::default()
    }
}

fn job(owner: &RunOwner, name: &str, attempt: &Attempt) -> Job {
    let Attempt { work, digest, .. } = *attempt;
    let id = WorkId::of(work);
    let mut metadata = meta(owner, name, &work.step, "step");
    let mut annotations = BTreeMap::from([
        (names::WORK_ANNOTATION.to_string(), id.to_string()),
        (
            names::INPUTS_DIGEST_ANNOTATION.to_string(),
            digest.to_string(),
        ),
    ]);
    if let Some(timeout) = work.timeout {
        annotations.insert(
            names::TIMEOUT_ANNOTATION.to_string(),
            timeout.as_millis().to_string(),
        );
    }
    metadata.annotations = Some(annotations);
    let template_meta = ObjectMeta {
        labels: Some(labels(owner, Some(&work.step), "step")),
        ..ObjectMeta::default()
    };
    Job {
        metadata,
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            active_deadline_seconds: work.timeout.map(|t| {
                let secs = t.as_secs() + u64::from(t.subsec_nanos() > 0);
                i64::try_from(secs.max(1)).unwrap_or(i64::MAX)
            }),
            // Set once the result is recorded (`JobLauncher::forget`): a
            // Job Kubernetes deleted before the controller read it would
            // lose the attempt's result.
            ttl_seconds_after_finished: None,
            template: PodTemplateSpec {
                metadata: Some(template_meta),
                spec: Some(pod_spec(attempt)),
            },
            ..JobSpec::default()
        }),
        status: None,
    }
}

fn pod_spec(attempt: &Attempt) -> PodSpec {
    let Attempt {
        work,
        step,
        inputs,
        digest,
        ref source,
        settings,
        workspace,
    } = *attempt;
    let inlined = matches!(source, Source::Inline(_));
    let install = Container {
        resources: step.resources.clone(),
        ..install(settings)
    };
    let main = Container {
        name: STEP_CONTAINER.to_string(),
        image: Some(step.image.clone().unwrap_or_else(|| settings.image.clone())),
        command: Some(command(digest, source)),
        env: Some(env(work, step, workspace, source)),
        working_dir: Some(paths::WORKSPACE.into()),
        volume_mounts: Some(mounts(inlined)),
        resources: step.resources.clone(),
        security_context: Some(hardened()),
        termination_message_path: Some(paths::TERMINATION_LOG.into()),
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        ..Container::default()
    };
    let mut volumes = match source {
        Source::ConfigMap(name) => volumes(name, inputs),
        Source::Inline(_) | Source::Made => volumes_inline(),
    };
    if let Some(workspace) = workspace {
        for volume in volumes.iter_mut().filter(|v| v.name == "workspace") {
            *volume = workspace.volume("workspace");
        }
    }
    PodSpec {
        restart_policy: Some("Never".into()),
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        security_context: Some(pod_security(settings, workspace.is_some())),
        init_containers: Some(vec![install]),
        containers: vec![main],
        volumes: Some(volumes),
        affinity: workspace.and_then(MountedWorkspace::affinity),
        ..PodSpec::default()
    }
}

/// The init container that copies our executable into the pod's
/// `coxswain-bin` volume, so a step's image needs nothing of ours.
pub(super) fn install(settings: &JobSettings) -> Container {
    Container {
        name: INSTALL_CONTAINER.to_string(),
        image: Some(settings.image.clone()),
        command: Some(vec![
            settings.executable().to_string_lossy().into_owned(),
            "step-exec".into(),
            "install".into(),
            paths::EXECUTABLE.into(),
        ]),
        volume_mounts: Some(vec![mount("coxswain-bin", paths::BIN_DIR, false)]),
        security_context: Some(hardened()),
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        ..Container::default()
    }
}

/// The pod's security context: not root, the runtime's seccomp profile,
/// and with a workspace the volume's files in the pod user's group, so
/// every pod of the run may write what another left.
pub(super) fn pod_security(settings: &JobSettings, workspace: bool) -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(settings.run_as_user),
        run_as_group: Some(settings.run_as_user),
        fs_group: workspace.then_some(settings.run_as_user),
        seccomp_profile: Some(runtime_default()),
        ..PodSecurityContext::default()
    }
}

/// What the "restricted" Pod Security Standard asks of every container.
pub(super) fn hardened() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            ..Capabilities::default()
        }),
        run_as_non_root: Some(true),
        seccomp_profile: Some(runtime_default()),
        ..SecurityContext::default()
    }
}

fn runtime_default() -> SeccompProfile {
    SeccompProfile {
        type_: "RuntimeDefault".into(),
        ..SeccompProfile::default()
    }
}

pub(super) fn mount(volume: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: volume.into(),
        mount_path: path.into(),
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    }
}

/// The step container's mounts; when the inputs ride in the Job, the
/// task's emptyDir is writable (`step-exec` writes the task and the
/// inputs' folder there) and there is no inputs volume.
pub(super) fn mounts(inlined: bool) -> Vec<VolumeMount> {
    let mut mounts = vec![
        mount("coxswain-bin", paths::BIN_DIR, true),
        mount("coxswain-task", paths::TASK_DIR, !inlined),
    ];
    if !inlined {
        mounts.push(mount("inputs", paths::INPUTS, true));
    }
    mounts.extend([
        mount("outputs", paths::OUTPUTS, false),
        mount("workspace", paths::WORKSPACE, false),
        mount("home", paths::HOME, false),
        mount("tmp", paths::TMP, false),
    ]);
    mounts
}

/// `step-exec run`, told the digest its task and inputs must have, and
/// where they are.
fn command(digest: &str, source: &Source) -> Vec<String> {
    let mut command = vec![
        paths::EXECUTABLE.into(),
        "step-exec".into(),
        "run".into(),
        "--inputs-sha256".into(),
        digest.into(),
    ];
    match source {
        Source::ConfigMap(name) => command.extend(["--inputs-from".into(), name.to_string()]),
        Source::Inline(_) => command.extend([
            "--inputs".into(),
            paths::INLINE_INPUTS.into(),
            "--inputs-inline".into(),
        ]),
        Source::Made => {}
    }
    command
}

/// The pod's volumes when the task and inputs ride in [`INLINE_ENV`]: all
/// empty, the task's and the inputs' filled by `step-exec`.
fn volumes_inline() -> Vec<Volume> {
    [
        "coxswain-bin",
        "coxswain-task",
        "outputs",
        "workspace",
        "home",
        "tmp",
    ]
    .into_iter()
    .map(|name| Volume {
        name: name.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    })
    .collect()
}

fn volumes(config_map: &str, inputs: &[InputFile]) -> Vec<Volume> {
    let from_config_map = |name: &str, items: Vec<KeyToPath>| Volume {
        name: name.into(),
        config_map: Some(ConfigMapVolumeSource {
            name: config_map.into(),
            items: Some(items),
            // Readable by the pod's (non-root) user; the pod is the only reader.
            default_mode: Some(0o444),
            // A ConfigMap that lacks a key (not the one the controller
            // made) still lets the pod start: `step-exec` then finds the
            // digest wrong and says so, instead of a pod stuck unexplained.
            optional: Some(true),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    };
    let empty = |name: &str| Volume {
        name: name.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    };
    let item = |key: String, path: &str| KeyToPath {
        key,
        path: path.into(),
        ..KeyToPath::default()
    };
    let task = from_config_map("coxswain-task", vec![item(TASK_KEY.to_string(), TASK_KEY)]);
    // An empty `items` would project every key, the task included: no
    // inputs means an empty folder.
    let inputs = if inputs.is_empty() {
        empty("inputs")
    } else {
        from_config_map(
            "inputs",
            inputs
                .iter()
                .map(|f| item(format!("{INPUT_KEY_PREFIX}{}", f.file), &f.file))
                .collect(),
        )
    };
    vec![
        empty("coxswain-bin"),
        task,
        inputs,
        empty("outputs"),
        empty("workspace"),
        empty("home"),
        empty("tmp"),
    ]
}

/// The script's contract variables, then the step's own `env` (which wins,
/// as locally). Kubernetes expands `$(NAME)` in values: every `$` is
/// doubled, so a value reaches the script exactly as written.
pub(super) fn env(
    work: &Work,
    step: &ScriptStep,
    workspace: Option<&MountedWorkspace>,
    source: &Source,
) -> Vec<EnvVar> {
    let since = work.run.since.clone().unwrap_or_default();
    let inputs = match source {
        Source::ConfigMap(_) => paths::INPUTS,
        Source::Inline(_) | Source::Made => paths::INLINE_INPUTS,
    };
    let contract = [
        ("INPUTS", inputs.to_string()),
        ("OUTPUTS", paths::OUTPUTS.to_string()),
        ("WORKSPACE", paths::WORKSPACE.to_string()),
        ("HOME", paths::HOME.to_string()),
        ("TMPDIR", paths::TMP.to_string()),
        ("RUN_NAME", work.run.name.clone()),
        ("STEP_KEY", work.step.clone()),
        ("ATTEMPT", work.attempt.to_string()),
        (
            "PART_KEY",
            work.part
                .as_ref()
                .map(|p| p.key.clone())
                .unwrap_or_default(),
        ),
        ("SINCE", since.clone()),
        ("LAST_RUN", since),
    ];
    let branch = workspace.map(|w| ("BRANCH", w.branch.clone()));
    let overridden = |name: &str| step.env.iter().any(|v| v.name == name);
    let mut vars: Vec<EnvVar> = contract
        .into_iter()
        .chain(branch)
        .filter(|(name, _)| !overridden(name))
        .map(|(name, value)| literal(name, &value))
        .collect();
    for var in &step.env {
        vars.push(match (&var.value, &var.value_from) {
            (Some(value), _) => literal(&var.name, value),
            (None, Some(from)) => EnvVar {
                name: var.name.clone(),
                value_from: Some(EnvVarSource {
                    secret_key_ref: Some(SecretKeySelector {
                        name: from.secret_key_ref.name.clone(),
                        key: from.secret_key_ref.key.clone(),
                        optional: Some(false),
                    }),
                    ..EnvVarSource::default()
                }),
                ..EnvVar::default()
            },
            (None, None) => literal(&var.name, ""),
        });
    }
    if let Source::Inline(json) = source {
        vars.retain(|v| v.name != INLINE_ENV);
        vars.push(literal(INLINE_ENV, json));
    }
    vars
}

pub(super) fn literal(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: Some(value.replace('$', "$$")),
        ..EnvVar::default()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use coxswain_core::api::{EnvVar as StepEnv, SecretKeyRef, ValueFrom};
    use coxswain_core::engine::{RunInfo, Task};

    fn owner() -> RunOwner {
        RunOwner::in_team("nightly-x7k2", "3f1c0a52-77aa-4b7e-9d51-0c2b3b7a1e11")
    }

    fn work(step: ScriptStep, input: serde_json::Value) -> Work {
        Work {
            step: "build_report".into(),
            part: None,
            attempt: 2,
            iteration: None,
            task: Task::Script(step),
            input,
            timeout: Some(Duration::from_millis(1500)),
            data: Default::default(),
            run: RunInfo {
                name: "nightly-x7k2".into(),
                namespace: "team".into(),
                uid: owner().uid,
                since: Some("1700000000".into()),
            },
            review: None,
            lookups: Vec::new(),
        }
    }

    fn script() -> ScriptStep {
        ScriptStep {
            source: Some("echo $HOME".into()),
            env: vec![
                StepEnv {
                    name: "GREETING".into(),
                    value: Some("costs $(PRICE) and $$5".into()),
                    value_from: None,
                },
                StepEnv {
                    name: "TOKEN".into(),
                    value: None,
                    value_from: Some(ValueFrom {
                        secret_key_ref: SecretKeyRef {
                            name: "api".into(),
                            key: "token".into(),
                        },
                    }),
                },
                StepEnv {
                    name: "HOME".into(),
                    value: Some("/home/me".into()),
                    value_from: None,
                },
            ],
            ..ScriptStep::default()
        }
    }

    fn build(input: serde_json::Value) -> Manifests {
        let step = script();
        manifests(
            &owner(),
            &work(step.clone(), input),
            &step,
            &JobSettings::default(),
            None,
        )
    }

    /// The task and inputs as the pod gets them: the ConfigMap's data, or
    /// the JSON in the step container's variable (its `$$` read as `$`,
    /// as Kubernetes reads them).
    fn data(m: &Manifests) -> BTreeMap<String, String> {
        if let Some(config_map) = &m.config_map {
            return config_map.data.clone().expect("data");
        }
        let env = pod(m).containers[0].env.clone().expect("env");
        let inline = env.iter().find(|v| v.name == INLINE_ENV).expect("inline");
        let json = inline.value.clone().expect("value").replace("$$", "$");
        serde_json::from_str(&json).expect("a JSON object")
    }

    fn command(m: &Manifests) -> Vec<String> {
        pod(m).containers[0].command.clone().expect("command")
    }

    fn pod(m: &Manifests) -> &PodSpec {
        m.job
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .expect("pod spec")
    }

    #[test]
    fn one_attempt_one_job_that_never_retries_and_stops_at_the_timeout() {
        let m = build(json!({}));
        let spec = m.job.spec.as_ref().expect("spec");
        assert_eq!(spec.backoff_limit, Some(0));
        assert_eq!(spec.active_deadline_seconds, Some(2), "1.5 s rounds up");
        assert_eq!(pod(&m).restart_policy.as_deref(), Some("Never"));
        let name = m.job.metadata.name.clone().expect("named");
        assert!(name.starts_with("nightly-x7k2-build-report-a2-"), "{name}");
        assert!(name.len() <= names::LABEL_MAX);
        // Small inputs ride in the Job: no ConfigMap, none to delete.
        assert!(m.config_map.is_none());
        assert!(inputs_inline(&m.job));
        assert_eq!(
            command(&m).last().map(String::as_str),
            Some("--inputs-inline")
        );
        // Large ones get a ConfigMap of the Job's name.
        let large = build(json!({"notes": "$".repeat(INLINE_MAX)}));
        let config_map = large.config_map.as_ref().expect("a ConfigMap");
        assert_eq!(config_map.metadata.name, Some(name.clone()));
        assert!(!inputs_inline(&large.job));
        assert_eq!(command(&large)[5..], ["--inputs-from".to_string(), name]);
        let owners = m.job.metadata.owner_references.clone().expect("owned");
        assert_eq!(owners[0].kind, "Run");
        assert_eq!(owners[0].controller, Some(true));
        let labels = m.job.metadata.labels.clone().expect("labels");
        assert_eq!(labels[names::STEP_LABEL], "build-report");
        assert_eq!(labels[names::ROLE_LABEL], "step");
        assert_eq!(labels[names::RUN_UID_LABEL], owner().uid);
    }

    #[test]
    fn in_a_run_with_a_workspace_the_pod_mounts_its_claim_on_its_node() {
        let step = script();
        let mounted = MountedWorkspace {
            claim: "nightly-x7k2-workspace-0011aabb".into(),
            branch: "coxswain/nightly-x7k2".into(),
            node: Some("node-3".into()),
        };
        let mut w = work(step.clone(), json!({}));
        w.part = Some(coxswain_core::engine::PartRef {
            index: 1,
            key: "b".into(),
            round: 2,
        });
        let m = manifests(&owner(), &w, &step, &JobSettings::default(), Some(&mounted));
        let pod = pod(&m);
        let volumes = pod.volumes.clone().expect("volumes");
        let ws = volumes
            .iter()
            .find(|v| v.name == "workspace")
            .expect("workspace");
        assert_eq!(
            ws.persistent_volume_claim
                .as_ref()
                .map(|c| c.claim_name.as_str()),
            Some("nightly-x7k2-workspace-0011aabb")
        );
        assert!(ws.empty_dir.is_none());
        let env = pod.containers[0].env.clone().expect("env");
        let branch = env.iter().find(|v| v.name == "BRANCH").expect("BRANCH");
        assert_eq!(branch.value.as_deref(), Some("coxswain/nightly-x7k2"));
        let node = pod
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|n| {
                n.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(|s| s.node_selector_terms[0].match_fields.clone());
        assert!(format!("{node:?}").contains("node-3"), "{node:?}");
        assert!(
            pod.security_context
                .as_ref()
                .and_then(|s| s.fs_group)
                .is_some()
        );
        let task: PodTask = serde_json::from_str(&data(&m)[TASK_KEY]).expect("task");
        assert_eq!(task.branch.as_deref(), Some("coxswain/nightly-x7k2"));
        assert_eq!(task.part_round, Some(2));

        // Without one: an emptyDir of its own, no branch, nowhere pinned.
        let plain = build(json!({}));
        let pod = super::tests::pod(&plain);
        assert!(pod.affinity.is_none());
        assert!(
            pod.security_context
                .as_ref()
                .and_then(|s| s.fs_group)
                .is_none()
        );
        let env = pod.containers[0].env.clone().expect("env");
        assert!(env.iter().all(|v| v.name != "BRANCH"));
    }

    #[test]
    fn pods_meet_the_restricted_standard() {
        let m = build(json!({}));
        let pod = pod(&m);
        assert_eq!(pod.automount_service_account_token, Some(false));
        let sc = pod.security_context.as_ref().expect("pod security");
        assert_eq!(sc.run_as_non_root, Some(true));
        assert_eq!(sc.run_as_user, Some(DEFAULT_RUN_AS_USER));
        assert_eq!(
            sc.seccomp_profile.as_ref().map(|p| p.type_.as_str()),
            Some("RuntimeDefault")
        );
        let containers = pod
            .containers
            .iter()
            .chain(pod.init_containers.iter().flatten());
        for c in containers {
            let sc = c.security_context.as_ref().expect("container security");
            assert_eq!(sc.allow_privilege_escalation, Some(false), "{}", c.name);
            assert_eq!(
                sc.capabilities.as_ref().and_then(|c| c.drop.clone()),
                Some(vec!["ALL".to_string()])
            );
        }
    }

    use super::super::DEFAULT_RUN_AS_USER;

    #[test]
    fn env_keeps_values_as_written_and_secrets_as_references() {
        let m = build(json!({}));
        let env = pod(&m).containers[0].env.clone().expect("env");
        let get = |name: &str| env.iter().find(|v| v.name == name).cloned();
        assert_eq!(
            get("GREETING").and_then(|v| v.value),
            Some("costs $$(PRICE) and $$$$5".to_string())
        );
        let token = get("TOKEN")
            .and_then(|v| v.value_from)
            .and_then(|f| f.secret_key_ref);
        assert_eq!(
            token.map(|s| (s.name, s.key)),
            Some(("api".into(), "token".into()))
        );
        assert_eq!(get("ATTEMPT").and_then(|v| v.value), Some("2".into()));
        assert_eq!(
            get("SINCE").and_then(|v| v.value),
            Some("1700000000".into())
        );
        // The step's HOME wins over the contract's, once.
        let homes: Vec<_> = env.iter().filter(|v| v.name == "HOME").collect();
        assert_eq!(homes.len(), 1);
        assert_eq!(homes[0].value.as_deref(), Some("/home/me"));
    }

    #[test]
    fn inputs_are_files_and_the_task_is_apart() {
        let m = build(json!({"Jira Ticket": {"id": 7}, "count": "$(HOME) $$"}));
        let inline = data(&m);
        assert_eq!(inline["input.Jira_Ticket"], r#"{"id":7}"#);
        assert_eq!(inline["input.count"], r#"{"data":"$(HOME) $$"}"#);
        let task: PodTask = serde_json::from_str(&inline[TASK_KEY]).expect("task");
        assert_eq!(task.timeout_ms, Some(1500));
        assert_eq!(task.error, None);
        // The digest the pod checks is the same either way.
        let digest = super::super::task::inputs_digest(
            inline.iter().map(|(k, v)| (k.as_str(), v.as_bytes())),
        );
        assert_eq!(command(&m)[4], digest);
        assert_eq!(command(&m)[5..7], ["--inputs", paths::INLINE_INPUTS]);
        let volumes = pod(&m).volumes.clone().expect("volumes");
        assert!(volumes.iter().all(|v| v.empty_dir.is_some()), "{volumes:?}");

        let m = build(json!({"Jira Ticket": {"id": 7}, "count": "x".repeat(INLINE_MAX)}));
        let volumes = pod(&m).volumes.clone().expect("volumes");
        let inputs = volumes.iter().find(|v| v.name == "inputs").expect("inputs");
        let items = inputs
            .config_map
            .as_ref()
            .and_then(|c| c.items.clone())
            .expect("items");
        let paths: Vec<_> = items.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(paths, ["Jira_Ticket", "count"]);
    }

    #[test]
    fn inputs_that_cannot_be_files_fail_the_attempt_in_the_pod() {
        let m = build(json!({"a b": 1, "a_b": 2}));
        let data = data(&m);
        let task: PodTask = serde_json::from_str(&data[TASK_KEY]).expect("task");
        let error = task.error.expect("an error");
        assert_eq!(error.code, codes::SCRIPT);
        assert!(error.message.contains("$INPUTS/a_b"), "{}", error.message);
        assert_eq!(data.len(), 1, "no input keys");

        let m = build(json!({"big": "x".repeat(2 << 20)}));
        let data = super::tests::data(&m);
        let task: PodTask = serde_json::from_str(&data[TASK_KEY]).expect("task");
        let message = task.error.expect("an error").message;
        assert!(message.contains("more than"), "{message}");
    }
}
