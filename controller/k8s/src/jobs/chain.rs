//! The Job of a script chain: the first member's Job as it would be alone,
//! with one more container for each later member (see [`handoff`](super::handoff)).
//!
//! Containers of a pod start together; a later member's wrapper waits for
//! the one before it, so the chain costs one pod start, not one a step.
//! Each member keeps what a step's pod gives it alone: its own task,
//! inputs, `$OUTPUTS`, `$WORKSPACE`, `$HOME` and `$TMPDIR` folders, its own
//! `env` (its Secrets reach its container only), its own image and limits.
//! What members share is the copied `coxswain` (read-only) and, between
//! two neighbours only, the folder where the first hands its result to the
//! second: written by the first, read-only for the second, unseen by the
//! rest. A container runs in a process namespace of its own, so nothing a
//! member's script starts can see another member's processes or memory.
//!
//! Containers run side by side as far as the scheduler knows, so the pod's
//! requests would be the sum of its members'; each resource's largest
//! request is kept on its container and the others ask for none (as Tekton
//! does for a Task's steps), since only one member runs at a time.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, EmptyDirVolumeSource, PodSpec, Volume};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::Value;

use super::JobSettings;
use super::handoff::{CHAIN_ENV, ChainTask, HAND_TO_ENV, random_name};
use super::manifest::{
    INLINE_MAX, Manifests, RunOwner, STEP_CONTAINER, Source, env, hardened, literal, manifests,
    mount, pod_task,
};
use super::task::paths;
use crate::names;
use coxswain_core::api::ScriptStep;
use coxswain_core::engine::{Compiled, Task, Work};

/// Where a member reads what the member before it handed over.
pub const HANDOFF_IN: &str = "/coxswain/handoff/in";

/// Where a member hands its result to the next.
pub const HANDOFF_OUT: &str = "/coxswain/handoff/out";

/// A later member of a chain, as the first member's launch knows it: from
/// the flow, before the engine has made its work.
#[derive(Debug, Clone, PartialEq)]
pub struct LaterMember {
    /// The step's key.
    pub key: String,
    /// The step as written.
    pub step: ScriptStep,
    /// Its `input` as written, which the pod resolves (`None`: the default
    /// input).
    pub input: Option<Value>,
    /// The key of the member before it.
    pub before: String,
    /// Its timeout.
    pub timeout: Option<Duration>,
}

impl LaterMember {
    /// The first attempt of this member as the engine will make it, but
    /// for its input, which the pod makes.
    pub fn work(&self, head: &Work) -> Work {
        Work {
            step: self.key.clone(),
            part: None,
            attempt: 1,
            iteration: None,
            task: Task::Script(self.step.clone()),
            input: Value::Null,
            timeout: self.timeout,
            data: Default::default(),
            run: head.run.clone(),
            review: None,
            lookups: Vec::new(),
        }
    }
}

/// The chains of a run's flow, as its Job launcher needs them: each
/// member's step as written, and the run input later members' inputs are
/// made from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunChains {
    run_input: Value,
    /// Each chain's members, its first included.
    chains: Vec<Vec<LaterMember>>,
}

impl RunChains {
    /// The chains of `flow` for a run whose input is `run_input`; none in
    /// a flow with a workspace, whose steps share the run's volume and
    /// branch, one pod after another.
    pub fn of(flow: &Compiled<'_>, run_input: &Value) -> Self {
        if flow.spec.workspace.is_some() {
            return RunChains::default();
        }
        let member = |(i, key): (usize, &String), keys: &[String]| {
            let node = flow.node(key)?;
            let compiled = &flow.steps[node];
            Some(LaterMember {
                key: key.clone(),
                step: compiled.step.script.clone()?,
                input: compiled.step.input.clone(),
                before: i
                    .checked_sub(1)
                    .map(|b| keys[b].clone())
                    .unwrap_or_default(),
                timeout: compiled.timeout,
            })
        };
        let chains = flow
            .chains
            .all()
            .iter()
            .filter_map(|keys| {
                keys.iter()
                    .enumerate()
                    .map(|m| member(m, keys))
                    .collect::<Option<Vec<_>>>()
            })
            .collect();
        RunChains {
            run_input: run_input.clone(),
            chains,
        }
    }

    /// The run input.
    pub fn run_input(&self) -> &Value {
        &self.run_input
    }

    /// The later members of the chain `step` is the first of.
    pub fn after_head(&self, step: &str) -> Option<&[LaterMember]> {
        let chain = self.chains.iter().find(|c| c[0].key == step)?;
        Some(&chain[1..])
    }

    /// For a later member: the first member's key and its own position.
    pub fn head_of(&self, step: &str) -> Option<(&str, usize)> {
        self.chains.iter().find_map(|chain| {
            let position = chain.iter().position(|m| m.key == step)?;
            (position > 0).then(|| (chain[0].key.as_str(), position))
        })
    }
}

/// The chain's Job holding a later member, and where the member is in it.
pub(super) struct ChainJob {
    /// The chain's Job (the first member's).
    pub job: k8s_openapi::api::batch::v1::Job,
    /// The first member's key.
    pub head: String,
    /// The member's container in the Job's pod.
    pub container: String,
}

/// Whether `work` may run in a chain's pod: a first attempt of a step of
/// the flow's own list, nobody's send-back.
pub fn chainable(work: &Work) -> bool {
    work.attempt == 1
        && work.part.is_none()
        && work.iteration.is_none()
        && work.review.is_none()
        && matches!(work.task, Task::Script(_))
}

/// The objects of a chain whose first member's work is `head` and whose
/// later members are `later`; `None` when a later member's task is too
/// large to ride in the Job (each then runs in a pod of its own).
pub fn chain_manifests(
    owner: &RunOwner,
    head: &Work,
    step: &ScriptStep,
    later: &[LaterMember],
    run_input: &Value,
    settings: &JobSettings,
) -> Option<Manifests> {
    let Manifests {
        config_map,
        mut job,
    } = manifests(owner, head, step, settings, None);
    if later.is_empty() {
        return None;
    }
    // One secret name for each hand-over, drawn once: the Job is made once.
    let hand_overs: Vec<String> = later.iter().map(|_| random_name()).collect();
    let mut members = Vec::with_capacity(later.len());
    for (i, member) in later.iter().enumerate() {
        let position = i + 1;
        let names = HandOvers {
            after: &hand_overs[i],
            to: hand_overs.get(position).map(String::as_str),
        };
        members.push(later_container(
            member, head, position, names, run_input, settings,
        )?);
    }
    let annotations = job.metadata.annotations.get_or_insert_default();
    annotations.insert(
        names::CHAIN_ANNOTATION.to_string(),
        later
            .iter()
            .map(|m| m.key.as_str())
            .collect::<Vec<_>>()
            .join(","),
    );
    let spec = job.spec.as_mut()?;
    spec.active_deadline_seconds = deadline(head.timeout, later);
    let pod = spec.template.spec.as_mut()?;
    hand_over_from_head(pod, &hand_overs[0]);
    let volumes = pod.volumes.get_or_insert_default();
    for position in 0..later.len() {
        volumes.push(empty(&format!("handoff-{position}")));
    }
    for position in 1..=later.len() {
        for role in MEMBER_FOLDERS {
            volumes.push(empty(&format!("{role}-{position}")));
        }
    }
    pod.containers.extend(members);
    share_requests(&mut pod.containers);
    Some(Manifests { config_map, job })
}

/// The folders each later member has to itself.
const MEMBER_FOLDERS: [&str; 5] = ["task", "outputs", "workspace", "home", "tmp"];

/// The hand-over names a later member reads and writes.
struct HandOvers<'a> {
    /// What the member before it hands over.
    after: &'a str,
    /// What it hands over itself; `None` for the last member.
    to: Option<&'a str>,
}

/// The first member hands its result over to the second, as `name`.
fn hand_over_from_head(pod: &mut PodSpec, name: &str) {
    let Some(head) = pod.containers.iter_mut().find(|c| c.name == STEP_CONTAINER) else {
        return;
    };
    let env = head.env.get_or_insert_default();
    env.retain(|v| v.name != HAND_TO_ENV);
    env.push(literal(HAND_TO_ENV, name));
    head.command
        .get_or_insert_default()
        .extend(["--hand-to".to_string(), HANDOFF_OUT.to_string()]);
    head.volume_mounts
        .get_or_insert_default()
        .push(mount("handoff-0", HANDOFF_OUT, false));
}

/// The container of a later member.
fn later_container(
    member: &LaterMember,
    head: &Work,
    position: usize,
    names: HandOvers<'_>,
    run_input: &Value,
    settings: &JobSettings,
) -> Option<Container> {
    let work = member.work(head);
    let chain = ChainTask {
        task: pod_task(&work, &member.step, settings, None),
        run_input: run_input.clone(),
        input: member.input.clone(),
        before: member.before.clone(),
        after: names.after.to_string(),
    };
    let json = serde_json::to_string(&chain).ok()?;
    if json.len() > INLINE_MAX {
        return None;
    }
    let mut env = env(&work, &member.step, None, &Source::Made);
    env.retain(|v| v.name != CHAIN_ENV && v.name != HAND_TO_ENV);
    env.push(literal(CHAIN_ENV, &json));
    if let Some(to) = names.to {
        env.push(literal(HAND_TO_ENV, to));
    }
    let mut command = vec![
        paths::EXECUTABLE.to_string(),
        "step-exec".into(),
        "run".into(),
        "--task".into(),
        paths::TASK_FILE.into(),
        "--inputs".into(),
        paths::INLINE_INPUTS.into(),
        "--after".into(),
        HANDOFF_IN.into(),
    ];
    let own = |role: &str| format!("{role}-{position}");
    let mut mounts = vec![
        mount("coxswain-bin", paths::BIN_DIR, true),
        mount(&own("task"), paths::TASK_DIR, false),
        mount(&own("outputs"), paths::OUTPUTS, false),
        mount(&own("workspace"), paths::WORKSPACE, false),
        mount(&own("home"), paths::HOME, false),
        mount(&own("tmp"), paths::TMP, false),
        mount(&format!("handoff-{}", position - 1), HANDOFF_IN, true),
    ];
    if names.to.is_some() {
        command.extend(["--hand-to".into(), HANDOFF_OUT.into()]);
        mounts.push(mount(&format!("handoff-{position}"), HANDOFF_OUT, false));
    }
    Some(Container {
        name: names::chain_container(position),
        image: Some(
            member
                .step
                .image
                .clone()
                .unwrap_or_else(|| settings.image.clone()),
        ),
        command: Some(command),
        env: Some(env),
        working_dir: Some(paths::WORKSPACE.into()),
        volume_mounts: Some(mounts),
        resources: member.step.resources.clone(),
        security_context: Some(hardened()),
        termination_message_path: Some(paths::TERMINATION_LOG.into()),
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        ..Container::default()
    })
}

/// The Job's deadline: every member's timeout added up, and a few seconds
/// a member for its start, when every member has one; else none (each
/// member's wrapper keeps its own timeout either way).
fn deadline(head: Option<Duration>, later: &[LaterMember]) -> Option<i64> {
    let mut total = head?;
    for member in later {
        total += member.timeout? + Duration::from_secs(5);
    }
    let secs = total.as_secs() + u64::from(total.subsec_nanos() > 0);
    Some(i64::try_from(secs.max(1)).unwrap_or(i64::MAX))
}

fn empty(name: &str) -> Volume {
    Volume {
        name: name.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    }
}

/// Keeps each resource's largest request on its container and asks for
/// none of it on the others: the members run one after another.
fn share_requests(containers: &mut [Container]) {
    let mut largest: BTreeMap<String, (usize, f64)> = BTreeMap::new();
    for (i, c) in containers.iter().enumerate() {
        let requests = c.resources.as_ref().and_then(|r| r.requests.as_ref());
        for (name, quantity) in requests.into_iter().flatten() {
            let amount = amount(quantity);
            let entry = largest.entry(name.clone()).or_insert((i, amount));
            if amount > entry.1 {
                *entry = (i, amount);
            }
        }
    }
    for (name, (keeper, _)) in largest {
        for (i, c) in containers.iter_mut().enumerate() {
            if i == keeper {
                continue;
            }
            let resources = c.resources.get_or_insert_default();
            let limited = resources
                .limits
                .as_ref()
                .is_some_and(|l| l.contains_key(&name));
            let requested = resources
                .requests
                .as_ref()
                .is_some_and(|r| r.contains_key(&name));
            // A container with a limit and no request would get its limit
            // as its request: it asks for none instead.
            if requested || limited {
                resources
                    .requests
                    .get_or_insert_default()
                    .insert(name.clone(), Quantity("0".into()));
            }
        }
    }
}

/// A quantity's size, enough to compare two of one resource (`500m` with
/// `1`, `512Mi` with `1Gi`); an unreadable one counts as nothing.
fn amount(quantity: &Quantity) -> f64 {
    let text = quantity.0.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let number: f64 = number.parse().unwrap_or(0.0);
    let factor = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => 0.0,
    };
    number * factor
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_core::api::{EnvVar as StepEnv, SecretKeyRef, ValueFrom};
    use coxswain_core::engine::RunInfo;
    use k8s_openapi::api::core::v1::ResourceRequirements;
    use serde_json::json;

    fn owner() -> RunOwner {
        RunOwner::in_team("nightly-x7k2", "3f1c0a52-77aa-4b7e-9d51-0c2b3b7a1e11")
    }

    fn script(source: &str) -> ScriptStep {
        ScriptStep {
            source: Some(source.into()),
            ..ScriptStep::default()
        }
    }

    fn head() -> Work {
        Work {
            step: "fetch".into(),
            part: None,
            attempt: 1,
            iteration: None,
            task: Task::Script(script("echo 1")),
            input: json!({"team": "a"}),
            timeout: Some(Duration::from_secs(10)),
            data: Default::default(),
            run: RunInfo {
                name: "nightly-x7k2".into(),
                namespace: "team".into(),
                uid: owner().uid,
                since: None,
            },
            review: None,
            lookups: Vec::new(),
        }
    }

    fn member(key: &str, step: ScriptStep) -> LaterMember {
        LaterMember {
            key: key.into(),
            step,
            input: None,
            before: String::new(),
            timeout: Some(Duration::from_secs(20)),
        }
    }

    /// What container `c` is told in its chain variable (as Kubernetes
    /// expands `$$` in it).
    fn told_task(c: &Container) -> ChainTask {
        let var = c
            .env
            .iter()
            .flatten()
            .find(|v| v.name == CHAIN_ENV)
            .expect("task");
        let text = var.value.clone().unwrap_or_default().replace("$$", "$");
        serde_json::from_str(&text).expect("chain task")
    }

    fn pod_of(manifests: &Manifests) -> PodSpec {
        manifests
            .job
            .spec
            .clone()
            .and_then(|s| s.template.spec)
            .expect("pod spec")
    }

    fn chain() -> Manifests {
        let secret = ScriptStep {
            env: vec![StepEnv {
                name: "TOKEN".into(),
                value: None,
                value_from: Some(ValueFrom {
                    secret_key_ref: SecretKeyRef {
                        name: "deploy".into(),
                        key: "token".into(),
                    },
                }),
            }],
            ..script("echo 2")
        };
        let later = [member("build", secret), member("ship", script("echo 3"))];
        chain_manifests(
            &owner(),
            &head(),
            &script("echo 1"),
            &later,
            &json!({"team": "a"}),
            &JobSettings::default(),
        )
        .expect("a chain")
    }

    fn mounts_of(pod: &PodSpec, container: &str) -> Vec<(String, String, bool)> {
        let c = pod
            .containers
            .iter()
            .find(|c| c.name == container)
            .expect("container");
        c.volume_mounts
            .iter()
            .flatten()
            .map(|m| {
                (
                    m.name.clone(),
                    m.mount_path.clone(),
                    m.read_only == Some(true),
                )
            })
            .collect()
    }

    #[test]
    fn each_member_has_a_container_and_the_job_names_them() {
        let made = chain();
        let pod = pod_of(&made);
        let names: Vec<&str> = pod.containers.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["step", "next-1", "next-2"]);
        let annotations = made.job.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(annotations[names::CHAIN_ANNOTATION], "build,ship");
        // 10 s + (20 s + 5 s) × 2.
        let spec = made.job.spec.expect("spec");
        assert_eq!(spec.active_deadline_seconds, Some(60));
    }

    #[test]
    fn a_member_sees_only_its_own_folders_and_the_hand_over_before_it() {
        let pod = pod_of(&chain());
        let head = mounts_of(&pod, "step");
        assert!(head.contains(&("handoff-0".into(), HANDOFF_OUT.into(), false)));
        let second = mounts_of(&pod, "next-1");
        let third = mounts_of(&pod, "next-2");
        assert!(second.contains(&("handoff-0".into(), HANDOFF_IN.into(), true)));
        assert!(second.contains(&("handoff-1".into(), HANDOFF_OUT.into(), false)));
        assert!(third.contains(&("handoff-1".into(), HANDOFF_IN.into(), true)));
        // No later member's task (its inputs), folders or hand-over is
        // mounted in any container before it; only the executable is
        // shared by all, read-only.
        let volumes_of = |m: &[(String, String, bool)]| -> Vec<String> {
            m.iter().map(|(v, _, _)| v.clone()).collect()
        };
        for earlier in [volumes_of(&head), volumes_of(&second)] {
            for role in MEMBER_FOLDERS {
                assert!(!earlier.contains(&format!("{role}-2")), "{earlier:?}");
            }
            assert!(!earlier.contains(&"handoff-2".to_string()));
        }
        assert!(!volumes_of(&head).contains(&"task-1".to_string()));
        for mounts in [&head, &second, &third] {
            let bin = mounts
                .iter()
                .find(|(v, _, _)| v == "coxswain-bin")
                .expect("bin");
            assert!(bin.2, "the executable is writable: {mounts:?}");
        }
        // The last member hands nothing over.
        assert!(!third.iter().any(|(_, path, _)| path == HANDOFF_OUT));
    }

    #[test]
    fn a_members_secret_reaches_its_container_alone() {
        let pod = pod_of(&chain());
        let with_token: Vec<&str> = pod
            .containers
            .iter()
            .filter(|c| c.env.iter().flatten().any(|v| v.name == "TOKEN"))
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(with_token, ["next-1"]);
    }

    #[test]
    fn a_member_is_told_its_attempt_as_a_pod_of_its_own_would_be() {
        let pod = pod_of(&chain());
        let c = pod
            .containers
            .iter()
            .find(|c| c.name == "next-2")
            .expect("c");
        let told = told_task(c);
        let member = member("ship", script("echo 3"));
        let alone = pod_task(
            &member.work(&head()),
            &member.step,
            &JobSettings::default(),
            None,
        );
        assert_eq!(told.task, alone);
        assert_eq!(told.run_input, json!({"team": "a"}));
        // It waits for the name the member before it hands over as, which
        // no other container is told.
        let told_to = |name: &str| -> Vec<String> {
            let c = pod.containers.iter().find(|c| c.name == name).expect("c");
            c.env
                .iter()
                .flatten()
                .filter(|v| v.name == HAND_TO_ENV)
                .filter_map(|v| v.value.clone())
                .collect()
        };
        assert_eq!(told_to("next-1"), vec![told.after.clone()]);
        assert!(
            told_to("next-2").is_empty(),
            "the last member hands nothing over"
        );
        assert_ne!(told_to("step"), told_to("next-1"));
        assert_eq!(told_to("step").len(), 1);
        let command = c.command.clone().unwrap_or_default();
        assert!(command.windows(2).any(|w| w == ["--after", HANDOFF_IN]));
        assert!(!command.iter().any(|a| a == "--hand-to"));
    }

    #[test]
    fn a_member_with_its_own_input_is_told_it_and_the_step_before() {
        let spec: coxswain_core::api::FlowSpec = serde_json::from_value(json!({"steps": [
            {"key": "build", "script": {"source": "echo 1"}},
            {"key": "test", "input": {"n": "$steps.build.output.n"}, "script": {"source": "echo 2"}},
            {"key": "ship", "script": {"source": "echo 3"}},
        ]}))
        .expect("flow");
        let flow = coxswain_core::engine::CompiledFlow::new(spec).expect("compiles");
        let chains = RunChains::of(flow.get(), &json!({"team": "a"}));
        let later = chains.after_head("build").expect("a chain");
        let told: Vec<(&str, &str, Option<&Value>)> = later
            .iter()
            .map(|m| (m.key.as_str(), m.before.as_str(), m.input.as_ref()))
            .collect();
        let input = json!({"n": "$steps.build.output.n"});
        assert_eq!(
            told,
            [("test", "build", Some(&input)), ("ship", "test", None)]
        );
        let made = chain_manifests(
            &owner(),
            &head(),
            &script("echo 1"),
            later,
            chains.run_input(),
            &JobSettings::default(),
        )
        .expect("a chain's Job");
        let pod = pod_of(&made);
        let c = pod
            .containers
            .iter()
            .find(|c| c.name == "next-1")
            .expect("c");
        let told = told_task(c);
        assert_eq!((told.input, told.before.as_str()), (Some(input), "build"));
    }

    #[test]
    fn a_task_too_large_to_ride_in_the_job_makes_no_chain() {
        let huge = member("build", script(&"x".repeat(INLINE_MAX)));
        let made = chain_manifests(
            &owner(),
            &head(),
            &script("echo 1"),
            &[huge],
            &Value::Null,
            &JobSettings::default(),
        );
        assert!(made.is_none());
    }

    #[test]
    fn only_the_largest_request_of_each_resource_is_kept() {
        let asks = |cpu: &str, memory: Option<&str>| ResourceRequirements {
            requests: Some(
                [("cpu", Some(cpu)), ("memory", memory)]
                    .into_iter()
                    .filter_map(|(k, v)| Some((k.to_string(), Quantity(v?.to_string()))))
                    .collect(),
            ),
            ..ResourceRequirements::default()
        };
        let mut containers = vec![
            Container {
                resources: Some(asks("500m", Some("1Gi"))),
                ..Container::default()
            },
            Container {
                resources: Some(asks("2", Some("512Mi"))),
                ..Container::default()
            },
            Container::default(),
        ];
        share_requests(&mut containers);
        let request = |i: usize, name: &str| {
            containers[i]
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get(name))
                .map(|q| q.0.clone())
        };
        assert_eq!(request(0, "cpu").as_deref(), Some("0"));
        assert_eq!(request(1, "cpu").as_deref(), Some("2"));
        assert_eq!(request(0, "memory").as_deref(), Some("1Gi"));
        assert_eq!(request(1, "memory").as_deref(), Some("0"));
        assert_eq!(request(2, "cpu"), None);
    }
}
