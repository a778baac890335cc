//! Script steps as Jobs on a real API server, in namespaces that enforce
//! the "restricted" Pod Security Standard: what a script returns through
//! its Job is what `coxswain run`'s executor returns for the same work.
//!
//! The pods run `target/debug/coxswain` (the stand-in node uses the host's
//! files for images): build it first (`cargo build -p coxswain`).

use std::sync::Arc;
use std::time::Duration;

use coxswain_core::api::{EnvVar, Field, Run, ScriptOutput, ScriptStep};
use coxswain_core::engine::{RunInfo, Task, Work, WorkResult, codes};
use coxswain_e2e::{TestNamespace, wait_for};
use coxswain_k8s::jobs::{self, JobLauncher, JobSettings};
use coxswain_k8s::names;
use coxswain_steps::Executor;
use coxswain_steps::launch::{Launcher, Observation, WorkId};
use coxswain_steps::script::LocalScript;
use coxswain_steps::secrets::MapSecrets;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(120);

/// A restricted namespace, a Run in it, and a launcher for that Run.
struct Restricted {
    ns: TestNamespace,
    run: Run,
    launcher: JobLauncher,
}

async fn setup() -> Restricted {
    let ns = TestNamespace::new().await.expect("namespace");
    restrict(&ns).await;
    install_run_crd(ns.client()).await;
    let run: Run = serde_json::from_value(json!({
        "apiVersion": "coxswain.dev/v1alpha1", "kind": "Run",
        "metadata": {"name": "nightly"},
        "spec": {"flowRef": {"name": "report"}}
    }))
    .expect("a run");
    let runs: Api<Run> = ns.api();
    // Discovery may not know the new CRD yet.
    let run = coxswain_e2e::create_when_discovered(&runs, &run, BOUND)
        .await
        .expect("run");
    let settings = JobSettings {
        executable: Some(coxswain_e2e::coxswain_bin().expect("coxswain built")),
        ..JobSettings::default()
    };
    let launcher = JobLauncher::for_run(ns.client(), Arc::new(settings), &run);
    Restricted { ns, run, launcher }
}

/// Makes the namespace enforce the "restricted" Pod Security Standard.
async fn restrict(ns: &TestNamespace) {
    let namespaces: Api<Namespace> = Api::all(ns.client());
    let patch = json!({"metadata": {"labels": {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest",
    }}});
    namespaces
        .patch(ns.name(), &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("namespace labelled");
}

mod crd_files;

async fn install_run_crd(client: kube::Client) {
    crd_files::install(client, &["runs.yaml"], BOUND).await;
}

fn script(source: &str) -> ScriptStep {
    ScriptStep {
        source: Some(source.to_string()),
        ..ScriptStep::default()
    }
}

fn work(run: &Run, step: &str, script: ScriptStep, input: Value) -> Work {
    Work {
        step: step.to_string(),
        part: None,
        attempt: 1,
        iteration: None,
        task: Task::Script(script),
        input,
        timeout: Some(Duration::from_secs(90)),
        data: Default::default(),
        run: RunInfo {
            name: run.metadata.name.clone().expect("named"),
            namespace: run.metadata.namespace.clone().expect("namespaced"),
            uid: run.metadata.uid.clone().expect("uid"),
            since: Some("1700000000".into()),
        },
        review: None,
        lookups: Vec::new(),
    }
}

/// Launches `work` and waits for its result.
async fn through_job(launcher: &JobLauncher, work: &Work) -> WorkResult {
    launcher.launch(work).await.expect("launched");
    let id = WorkId::of(work);
    wait_for(&format!("{id} finishes"), BOUND, || async {
        match observed(launcher, &id).await {
            Observation::Finished(result) => Ok(Some(result)),
            Observation::Running => Ok(None),
            Observation::Unknown => panic!("{id} is unknown after its launch"),
        }
    })
    .await
    .expect("finished")
}

/// What `coxswain run`'s executor gives for the same work.
async fn locally(work: &Work, secrets: MapSecrets) -> WorkResult {
    LocalScript::new(Arc::new(secrets)).run(work).await
}

/// What the launcher observes of `id` now.
async fn observed(launcher: &JobLauncher, id: &WorkId) -> Observation {
    launcher.observe(id).await.expect("observed")
}

/// Whether the object `name` is there to read through `api`.
async fn exists<K>(api: Api<K>, name: &str) -> bool
where
    K: Clone + std::fmt::Debug + k8s_openapi::serde::de::DeserializeOwned,
{
    api.get_opt(name).await.expect("read").is_some()
}

fn error_of(result: &WorkResult) -> (&str, &str) {
    let failed = result.as_ref().expect_err("a failure");
    (failed.error.code.as_str(), failed.error.message.as_str())
}

#[tokio::test]
async fn the_namespace_refuses_pods_that_are_not_hardened() {
    let r = setup().await;
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "plain"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["true"]}]}
    }))
    .expect("a pod");
    let pods: Api<Pod> = r.ns.api();
    let refused = pods.create(&PostParams::default(), &pod).await;
    let Err(kube::Error::Api(status)) = refused else {
        panic!("an unhardened pod was admitted: {refused:?}");
    };
    assert_eq!(status.code, 403, "{status:?}");
    assert!(
        status.message.contains("violates PodSecurity \"restricted"),
        "{}",
        status.message
    );
}

#[tokio::test]
async fn output_text_and_inputs_come_back_as_the_local_executor_gives_them() {
    let r = setup().await;
    let step = script(
        r#"echo made > "$OUTPUTS/report.txt"
printf '{"brief":%s,"count":%s,"inputs":"%s","step":"%s","attempt":%s,"run":"%s","since":"%s","last":"%s"}\n' \
  "$(cat "$INPUTS/brief")" "$(cat "$INPUTS/count")" "$(ls "$INPUTS" | tr '\n' ' ')" \
  "$STEP_KEY" "$ATTEMPT" "$RUN_NAME" "$SINCE" "$LAST_RUN""#,
    );
    let input = json!({"brief": {"title": "Q3"}, "count": 3, "Jira Ticket": "A-1"});
    let work = work(&r.run, "summarize", step, input);
    let job = through_job(&r.launcher, &work).await;
    let local = locally(&work, MapSecrets::new()).await;
    assert_eq!(job, local, "a Job gives what the local executor gives");
    let done = job.expect("done");
    assert_eq!(
        done.output,
        json!({
            "brief": {"title": "Q3"},
            "count": {"data": 3},
            "inputs": "Jira_Ticket brief count ",
            "step": "summarize", "attempt": 1, "run": "nightly",
            "since": "1700000000", "last": "1700000000",
            "files": ["report.txt"]
        })
    );
}

#[tokio::test]
async fn inputs_are_read_only_files_in_contract_form() {
    let r = setup().await;
    let step = script(
        r#"for f in "$INPUTS"/*; do [ "${f##*/}" = pad ] || printf '%s=%s\n' "${f##*/}" "$(cat "$f")"; done
if touch "$INPUTS/new" 2>/dev/null; then echo writable; else echo read-only; fi"#,
    );
    let files = "a_b={\"data\":[1,2]}\nc={\"d\":null}\n";
    // Small inputs ride in the Job, and `step-exec` writes them. The
    // stand-in node runs pods as root, whom no file mode stops, so their
    // folder's being read-only is proven on the real node (`real_node.rs`),
    // where pods run as the random non-root user they must.
    let small = json!({"a b": [1, 2], "c": {"d": null}});
    let work = work(&r.run, "read", step.clone(), small.clone());
    let text = through_job(&r.launcher, &work)
        .await
        .expect("done")
        .text
        .expect("text");
    assert!(
        text.starts_with(files),
        "one file per input, named safely: {text}"
    );
    // Large ones come from a ConfigMap volume, mounted read-only.
    let mut large = small;
    large["pad"] = json!("x".repeat(40 << 10));
    let work = self::work(&r.run, "read_large", step, large);
    let text = through_job(&r.launcher, &work)
        .await
        .expect("done")
        .text
        .expect("text");
    assert_eq!(
        text,
        format!("{files}read-only\n"),
        "one file per input, named safely, in contract form"
    );
}

#[tokio::test]
async fn a_300_kib_output_comes_back_through_the_log() {
    let r = setup().await;
    let step = script(r#"printf '{"data":"'; head -c 307200 /dev/zero | tr '\0' a; printf '"}'"#);
    let work = work(&r.run, "big", step, Value::Null);
    let done = through_job(&r.launcher, &work).await.expect("done");
    assert_eq!(done.output, json!("a".repeat(307_200)));
    // JSON printed: the text is the output's, kept once.
    assert_eq!(done.text.map(|t| t.len()), Some(307_200));
    // It did go through the log: the termination message only points there.
    let job_name = names::job("nightly", &WorkId::of(&work));
    let pods: Api<Pod> = r.ns.api();
    let listed = pods
        .list(&ListParams::default().labels(&format!("job-name={job_name}")))
        .await
        .expect("pods");
    let message = listed.items[0]
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs[0].state.as_ref())
        .and_then(|s| s.terminated.as_ref())
        .and_then(|t| t.message.clone())
        .expect("a termination message");
    assert!(
        matches!(
            jobs::wire::decode_message(&message),
            Some(jobs::wire::Decoded::InLog(_))
        ),
        "{message}"
    );
}

#[tokio::test]
async fn declared_fields_are_enforced_as_locally() {
    let r = setup().await;
    let mut step = script(r#"echo '{"id": "7", "extra": true}'"#);
    step.output = Some(ScriptOutput {
        fields: vec![
            Field {
                name: "id".into(),
                type_: "integer".into(),
                description: None,
            },
            Field {
                name: "name".into(),
                type_: "string".into(),
                description: None,
            },
        ],
        ..Default::default()
    });
    let work = work(&r.run, "typed", step, Value::Null);
    let job = through_job(&r.launcher, &work).await;
    assert_eq!(job, locally(&work, MapSecrets::new()).await);
    let (code, message) = error_of(&job);
    assert_eq!(code, codes::OUTPUT);
    assert!(message.contains("missing field `name`"), "{message}");
}

#[tokio::test]
async fn a_failing_script_gives_script_failed_with_its_stderr() {
    let r = setup().await;
    let step = script("echo 'partial' ; echo 'disk full' >&2; exit 3");
    let work = work(&r.run, "fails", step, Value::Null);
    let job = through_job(&r.launcher, &work).await;
    assert_eq!(job, locally(&work, MapSecrets::new()).await);
    assert_eq!(
        error_of(&job),
        (codes::SCRIPT, "the script exited with status 3: disk full")
    );
}

#[tokio::test]
async fn a_timeout_gives_workflow_timeout() {
    let r = setup().await;
    let mut work = work(&r.run, "slow", script("sleep 60"), Value::Null);
    work.timeout = Some(Duration::from_secs(3));
    let job = through_job(&r.launcher, &work).await;
    assert_eq!(
        error_of(&job),
        (
            codes::TIMEOUT,
            "the script ran longer than its timeout of 3s and was stopped"
        )
    );
}

#[tokio::test]
async fn launching_twice_makes_one_job() {
    let r = setup().await;
    let work = work(&r.run, "once", script("echo 1"), Value::Null);
    let (a, b) = tokio::join!(r.launcher.launch(&work), r.launcher.launch(&work));
    a.expect("first launch");
    b.expect("second launch");
    r.launcher.launch(&work).await.expect("third launch");
    let jobs: Api<Job> = r.ns.api();
    let uid = r.run.metadata.uid.clone().expect("uid");
    let listed = jobs
        .list(&ListParams::default().labels(&format!("{}={uid}", names::RUN_UID_LABEL)))
        .await
        .expect("jobs");
    assert_eq!(listed.items.len(), 1);
    let done = through_job(&r.launcher, &work).await.expect("done");
    assert_eq!(done.output, json!(1));
}

#[tokio::test]
async fn a_secret_env_var_reaches_the_script_and_stays_out_of_the_job() {
    let r = setup().await;
    r.ns.create::<Secret>(json!({
        "metadata": {"name": "api"},
        "stringData": {"token": "s3cret-$(not-expanded)"}
    }))
    .await;
    let mut step = script(r#"printf '{"token":"%s","plain":"%s"}' "$TOKEN" "$PLAIN""#);
    step.env = vec![
        EnvVar::from_secret("TOKEN", "api", "token"),
        EnvVar {
            name: "PLAIN".into(),
            value: Some("$(TOKEN) $$".into()),
            value_from: None,
        },
    ];
    let work = work(&r.run, "call", step, Value::Null);
    let job = through_job(&r.launcher, &work).await;
    let local = locally(
        &work,
        MapSecrets::new().with("api", "token", "s3cret-$(not-expanded)"),
    )
    .await;
    assert_eq!(job, local);
    assert_eq!(
        job.expect("done").output,
        json!({"token": "s3cret-$(not-expanded)", "plain": "$(TOKEN) $$"})
    );
    let spec =
        r.ns.api::<Job>()
            .get(&names::job("nightly", &WorkId::of(&work)))
            .await
            .expect("the job");
    let text = serde_json::to_string(&spec).expect("json");
    assert!(!text.contains("s3cret"), "the Job holds the secret's value");
}

#[tokio::test]
async fn a_missing_secret_fails_the_attempt_with_a_secret_error() {
    let r = setup().await;
    let mut step = script("echo never");
    step.env = vec![EnvVar::from_secret("TOKEN", "absent", "token")];
    let work = work(&r.run, "call", step, Value::Null);
    let job = through_job(&r.launcher, &work).await;
    let (code, message) = error_of(&job);
    assert_eq!(code, codes::SECRET, "{message}");
    assert!(message.contains("absent"), "{message}");
    // Forgetting it stops the Job whose pod would wait for the Secret forever.
    let id = WorkId::of(&work);
    r.launcher.forget(&id).await.expect("forgotten");
    assert_eq!(observed(&r.launcher, &id).await, Observation::Unknown);
}

#[tokio::test]
async fn cancel_removes_the_job_its_pods_and_its_inputs() {
    let r = setup().await;
    // Inputs too large to ride in the Job: a ConfigMap to remove too.
    let large = json!({"a": "x".repeat(40 << 10)});
    let work = work(&r.run, "long", script("sleep 300"), large);
    r.launcher.launch(&work).await.expect("launched");
    let name = names::job("nightly", &WorkId::of(&work));
    let pods: Api<Pod> = r.ns.api();
    let selector = ListParams::default().labels(&format!("job-name={name}"));
    wait_for("the step's container runs", BOUND, || async {
        let listed = pods.list(&selector).await?;
        let running = listed.items.iter().any(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
                })
        });
        Ok(running.then_some(()))
    })
    .await
    .expect("running");
    let id = WorkId::of(&work);
    assert_eq!(observed(&r.launcher, &id).await, Observation::Running);
    r.launcher.cancel(&id).await.expect("cancelled");
    r.launcher
        .cancel(&id)
        .await
        .expect("cancelling again is fine");
    let jobs: Api<Job> = r.ns.api();
    let config_maps: Api<ConfigMap> = r.ns.api();
    wait_for(
        "the Job, its pods and its inputs are gone",
        BOUND,
        || async {
            let gone = jobs.get_opt(&name).await?.is_none()
                && pods.list(&selector).await?.items.is_empty()
                && config_maps.get_opt(&name).await?.is_none();
            Ok(gone.then_some(()))
        },
    )
    .await
    .expect("gone");
    assert_eq!(observed(&r.launcher, &id).await, Observation::Unknown);
}

#[tokio::test]
async fn forget_deletes_the_inputs_and_keeps_the_finished_job() {
    let r = setup().await;
    let large = json!({"a": "x".repeat(40 << 10)});
    let work = work(&r.run, "kept", script("echo 2"), large);
    let result = through_job(&r.launcher, &work).await;
    let id = WorkId::of(&work);
    let name = names::job("nightly", &id);
    assert!(
        exists(r.ns.api::<ConfigMap>(), &name).await,
        "inputs too large to ride in the Job have a ConfigMap"
    );
    r.launcher.forget(&id).await.expect("forgotten");
    r.launcher
        .forget(&id)
        .await
        .expect("forgetting again is fine");
    assert!(
        !exists(r.ns.api::<ConfigMap>(), &name).await,
        "the inputs are deleted"
    );
    assert!(
        exists(r.ns.api::<Job>(), &name).await,
        "the Job stays for `kubectl logs`"
    );
    // The result is still there to read: it never depended on the inputs.
    assert_eq!(
        observed(&r.launcher, &id).await,
        Observation::Finished(result)
    );
}
