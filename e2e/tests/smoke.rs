//! Smoke tests proving the e2e cluster is a real control plane with pods that
//! really run: CRDs with status, Jobs (Complete and Failed), termination
//! messages, pod logs, validating webhooks, Leases and garbage collection.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use coxswain_e2e::{TestNamespace, wait_for, wait_for_job_condition, wait_pod_finished};
use k8s_openapi::{
    api::{
        admissionregistration::v1::ValidatingWebhookConfiguration,
        batch::v1::Job,
        coordination::v1::Lease,
        core::v1::{ConfigMap, Pod},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::Timestamp,
};
use kube::{
    Api,
    api::{
        ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, LogParams, Patch,
        PatchParams, PostParams,
    },
};
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(120);

/// A Job (no retries) whose one container runs `script` with `sh -c`;
/// `container` and `pod` are merged into the container and the pod spec.
fn job(name: &str, script: &str, container: Value, pod: Value) -> Job {
    let mut c = json!({"name": "main", "image": "host", "command": ["sh", "-c", script]});
    merge(&mut c, container);
    let mut pod_spec = json!({"restartPolicy": "Never", "containers": [c]});
    merge(&mut pod_spec, pod);
    let pod = pod_spec;
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name},
        "spec": {"backoffLimit": 0, "template": {"spec": pod}}
    }))
    .expect("valid job")
}

fn merge(a: &mut Value, b: Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

async fn job_pod(ns: &TestNamespace, job: &str) -> Pod {
    let pods: Api<Pod> = ns.api();
    let lp = ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}"));
    let list = pods.list(&lp).await.expect("list pods");
    assert_eq!(list.items.len(), 1, "one pod for job {job}");
    list.items.into_iter().next().expect("one pod")
}

/// Creates Job `job`, waits until it has condition `condition` (`Complete`,
/// `Failed`) with status True, and returns its one pod: how each Job test
/// here starts.
async fn run_job(ns: &TestNamespace, job: &Job, condition: &str) -> Pod {
    let jobs: Api<Job> = ns.api();
    let name = job.metadata.name.clone().expect("a named job");
    jobs.create(&PostParams::default(), job)
        .await
        .expect("create job");
    let done = wait_for_job_condition(&jobs, &name, condition, BOUND)
        .await
        .expect("job finished");
    let conds = done.status.and_then(|s| s.conditions).unwrap_or_default();
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == condition && c.status == "True"),
        "job {condition}: {conds:?}"
    );
    job_pod(ns, &name).await
}

fn terminated(pod: &Pod) -> k8s_openapi::api::core::v1::ContainerStateTerminated {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.first())
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.clone())
        .expect("container terminated")
}

#[tokio::test]
async fn crd_with_status_subresource_round_trips() {
    let ns = TestNamespace::new().await.expect("namespace");
    let crds: Api<CustomResourceDefinition> = Api::all(ns.client());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.e2e.coxswain.dev"},
        "spec": {
            "group": "e2e.coxswain.dev", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer", "minimum": 1}}},
                    "status": {"type": "object", "properties": {"phase": {"type": "string"}}}
                }}}
            }]
        }
    }))
    .expect("valid crd");
    match crds.create(&PostParams::default(), &crd).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("create crd: {e}"),
    }
    coxswain_e2e::wait_crd_established(&crds, "widgets.e2e.coxswain.dev", BOUND)
        .await
        .expect("established");

    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("e2e.coxswain.dev", "v1", "Widget"),
        "widgets",
    );
    let widgets: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &ar);
    let w: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "e2e.coxswain.dev/v1", "kind": "Widget",
        "metadata": {"name": "w1"}, "spec": {"size": 3},
        "status": {"phase": "ignored-on-create"}
    }))
    .expect("valid widget");
    // The discovery cache may lag the Established condition: retry the create.
    let created = coxswain_e2e::create_when_discovered(&widgets, &w, BOUND)
        .await
        .expect("create widget");
    assert!(
        created.data.get("status").is_none(),
        "status is dropped on create: {:?}",
        created.data
    );

    // The schema is enforced.
    let bad: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "e2e.coxswain.dev/v1", "kind": "Widget",
        "metadata": {"name": "w2"}, "spec": {"size": 0}
    }))
    .expect("valid json");
    let err = widgets
        .create(&PostParams::default(), &bad)
        .await
        .expect_err("size 0 is invalid");
    assert!(err.to_string().contains("spec.size"), "{err}");

    // Status only through the status subresource; spec changes there are ignored.
    let patch = json!({"spec": {"size": 9}, "status": {"phase": "Ready"}});
    widgets
        .patch_status("w1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch status");
    let got = widgets.get("w1").await.expect("get");
    assert_eq!(got.data["status"]["phase"], "Ready");
    assert_eq!(got.data["spec"]["size"], 3);
    // A main-resource patch cannot change status.
    widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"phase": "Hacked"}})),
        )
        .await
        .expect("patch");
    assert_eq!(
        widgets.get("w1").await.expect("get").data["status"]["phase"],
        "Ready"
    );
}

#[tokio::test]
async fn job_reading_a_configmap_completes_and_logs_are_served() {
    let ns = TestNamespace::new().await.expect("namespace");
    ns.create::<ConfigMap>(json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "greeting"},
        "data": {"greeting.txt": "hello from a configmap"}
    }))
    .await;
    let j = job(
        "reader",
        r#"cat /e2e-config/greeting.txt; echo; test "$(cat /e2e-config/greeting.txt)" = "hello from a configmap""#,
        json!({"volumeMounts": [{"name": "cfg", "mountPath": "/e2e-config", "readOnly": true}]}),
        json!({"volumes": [{"name": "cfg", "configMap": {"name": "greeting"}}]}),
    );
    let pod = run_job(&ns, &j, "Complete").await;
    let t = terminated(&pod);
    assert_eq!(t.exit_code, 0);
    assert_eq!(t.reason.as_deref(), Some("Completed"));
    assert_eq!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded")
    );

    // pods/log goes apiserver -> the stand-in node's kubelet port.
    let pods: Api<Pod> = ns.api();
    let logs = pods
        .logs(
            &pod.metadata.name.clone().expect("name"),
            &LogParams::default(),
        )
        .await
        .expect("pods/log");
    assert!(logs.contains("hello from a configmap"), "logs: {logs:?}");
}

#[tokio::test]
async fn failing_command_fails_the_job_with_exit_code_and_termination_message() {
    let ns = TestNamespace::new().await.expect("namespace");
    let j = job(
        "failer",
        "echo 'step went wrong' > /dev/termination-log; exit 3",
        json!({}),
        json!({}),
    );
    let pod = run_job(&ns, &j, "Failed").await;
    assert_eq!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Failed")
    );
    let t = terminated(&pod);
    assert_eq!(t.exit_code, 3);
    assert_eq!(t.reason.as_deref(), Some("Error"));
    assert_eq!(t.message.as_deref(), Some("step went wrong\n"));
}

#[tokio::test]
async fn termination_message_falls_back_to_logs_on_error() {
    let ns = TestNamespace::new().await.expect("namespace");
    let done = finished_pod(&ns, json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "fallback"},
        "spec": {"restartPolicy": "Never", "containers": [{
            "name": "main", "image": "host", "terminationMessagePolicy": "FallbackToLogsOnError",
            "command": ["sh", "-c", "echo first line; echo 'last words' >&2; exit 1"]
        }]}
    })).await;
    let t = terminated(&done);
    assert_eq!(t.exit_code, 1);
    assert_eq!(t.message.as_deref(), Some("first line\nlast words"));
}

#[tokio::test]
async fn lease_can_be_acquired_and_renewed() {
    let ns = TestNamespace::new().await.expect("namespace");
    let leases: Api<Lease> = ns.api();
    let now = Timestamp::now();
    let lease: Lease = serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "leader"},
        "spec": {"holderIdentity": "replica-a", "leaseDurationSeconds": 15,
                 "acquireTime": MicroTime(now), "renewTime": MicroTime(now), "leaseTransitions": 0}
    }))
    .expect("valid lease");
    let acquired = leases
        .create(&PostParams::default(), &lease)
        .await
        .expect("acquire");
    // A second replica cannot acquire it by creating it again.
    let err = leases
        .create(&PostParams::default(), &lease)
        .await
        .expect_err("already held");
    assert!(
        matches!(err, kube::Error::Api(ref e) if e.code == 409),
        "{err}"
    );

    // Renew with optimistic concurrency (resourceVersion from the acquire).
    let mut renewed = acquired.clone();
    let later = now + Duration::from_secs(5);
    renewed.spec.as_mut().expect("spec").renew_time = Some(MicroTime(later));
    let renewed = leases
        .replace("leader", &PostParams::default(), &renewed)
        .await
        .expect("renew");
    let spec = renewed.spec.expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("replica-a"));
    assert_eq!(
        spec.renew_time.expect("renewTime").0.as_second(),
        later.as_second()
    );
    // A renewal based on the stale version conflicts.
    let err = leases
        .replace("leader", &PostParams::default(), &acquired)
        .await
        .expect_err("stale renew");
    assert!(
        matches!(err, kube::Error::Api(ref e) if e.code == 409),
        "{err}"
    );
}

#[tokio::test]
async fn deleting_a_job_in_background_removes_its_pods() {
    let ns = TestNamespace::new().await.expect("namespace");
    let jobs: Api<Job> = ns.api();
    let pods: Api<Pod> = ns.api();
    jobs.create(
        &PostParams::default(),
        &job("sleeper", "sleep 300", json!({}), json!({})),
    )
    .await
    .expect("create job");
    let lp = ListParams::default().labels("batch.kubernetes.io/job-name=sleeper");
    wait_for("sleeper pod running", BOUND, || async {
        let list = pods.list(&lp).await?;
        let running = list
            .items
            .iter()
            .any(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"));
        Ok(running.then_some(()))
    })
    .await
    .expect("pod running");
    jobs.delete("sleeper", &DeleteParams::background())
        .await
        .expect("delete job");
    wait_for("sleeper pods gone", BOUND, || async {
        Ok(pods.list(&lp).await?.items.is_empty().then_some(()))
    })
    .await
    .expect("garbage collector removed the pods");
    assert!(jobs.get_opt("sleeper").await.expect("get job").is_none());
}

/// The webhook: denies every ConfigMap whose name starts with "deny-".
async fn serve_webhook(
    hits: Arc<AtomicUsize>,
) -> (SocketAddr, String, axum_server::Handle<SocketAddr>) {
    use axum::{Json, Router, routing::post};
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("ca params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "e2e webhook ca");
    let ca_key = rcgen::KeyPair::generate().expect("ca key");
    let ca = ca_params.self_signed(&ca_key).expect("ca cert");
    let mut leaf_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("leaf params");
    leaf_params
        .subject_alt_names
        .push(rcgen::SanType::IpAddress(std::net::IpAddr::from([
            127, 0, 0, 1,
        ])));
    let leaf_key = rcgen::KeyPair::generate().expect("leaf key");
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let leaf = leaf_params
        .signed_by(&leaf_key, &issuer)
        .expect("leaf cert");
    let tls = axum_server::tls_rustls::RustlsConfig::from_pem(
        leaf.pem().into_bytes(),
        leaf_key.serialize_pem().into_bytes(),
    )
    .await
    .expect("tls config");

    let app = Router::new().route(
        "/validate",
        post(move |Json(review): Json<Value>| {
            let hits = hits.clone();
            async move {
                let req = &review["request"];
                let name = req["name"].as_str().or(req["object"]["metadata"]["name"].as_str()).unwrap_or("");
                let allowed = !name.starts_with("deny-");
                if !allowed {
                    hits.fetch_add(1, Ordering::SeqCst);
                }
                Json(json!({
                    "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                    "response": {"uid": req["uid"], "allowed": allowed,
                        "status": {"code": 403, "message": format!("coxswain e2e webhook says no to {name}")}}
                }))
            }
        }),
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let addr = listener.local_addr().expect("addr");
    let handle = axum_server::Handle::new();
    let server = axum_server::from_tcp_rustls(listener, tls)
        .expect("server")
        .handle(handle.clone());
    tokio::spawn(async move { server.serve(app.into_make_service()).await });
    (addr, ca.pem(), handle)
}

#[tokio::test]
async fn validating_webhook_on_loopback_denies_with_its_message() {
    let ns = TestNamespace::new().await.expect("namespace");
    let hits = Arc::new(AtomicUsize::new(0));
    let (addr, ca_pem, handle) = serve_webhook(hits.clone()).await;
    let name = format!("e2e-{}", ns.name());
    let vwc: ValidatingWebhookConfiguration = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": "deny.e2e.coxswain.dev",
            "clientConfig": {"url": format!("https://127.0.0.1:{}/validate", addr.port()),
                             "caBundle": k8s_openapi::ByteString(ca_pem.into_bytes())},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns.name()}},
            "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 5
        }]
    }))
    .expect("valid webhook configuration");
    let vwcs: Api<ValidatingWebhookConfiguration> = Api::all(ns.client());
    vwcs.create(&PostParams::default(), &vwc)
        .await
        .expect("create webhook configuration");

    let cms: Api<ConfigMap> = ns.api();
    let mut attempt = 0;
    let message = wait_for("webhook denial", BOUND, || {
        attempt += 1;
        let cm: ConfigMap = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("deny-{attempt}")}
        }))
        .expect("valid cm");
        let cms = cms.clone();
        async move {
            match cms.create(&PostParams::default(), &cm).await {
                Ok(_) => Ok(None), // the apiserver has not seen the webhook yet
                Err(kube::Error::Api(e)) => Ok(Some(e.message)),
                Err(e) => Err(e.into()),
            }
        }
    })
    .await
    .expect("denied");
    assert!(
        message.contains("coxswain e2e webhook says no to deny-"),
        "{message}"
    );
    assert!(hits.load(Ordering::SeqCst) >= 1);
    // Allowed objects still go through the webhook and are admitted.
    let ok: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "allowed"}
    }))
    .expect("valid cm");
    cms.create(&PostParams::default(), &ok)
        .await
        .expect("allowed create");

    vwcs.delete(&name, &DeleteParams::default())
        .await
        .expect("delete webhook configuration");
    handle.shutdown();
}

/// Creates the pod `manifest` describes and returns it once it has
/// finished (`Succeeded` or `Failed`): how each pod test here starts.
async fn finished_pod(ns: &TestNamespace, manifest: Value) -> Pod {
    let pod: Pod = ns.create(manifest).await;
    let name = pod.metadata.name.as_deref().expect("a named pod");
    let pods: Api<Pod> = ns.api();
    wait_pod_finished(&pods, name, BOUND)
        .await
        .expect("pod finished")
}

#[tokio::test]
async fn pod_gets_init_containers_env_volumes_and_workdir() {
    let ns = TestNamespace::new().await.expect("namespace");
    ns.create::<ConfigMap>(json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
        "data": {"colour": "blue", "size": "7"}
    }))
    .await;
    ns.create::<k8s_openapi::api::core::v1::Secret>(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
        "stringData": {"password": "s3cret"}
    }))
    .await;
    let script = r#"
set -u
sa=/var/run/secrets/kubernetes.io/serviceaccount
{
  echo "order=$(cat order | tr '\n' ,)"
  echo "pwd=$(pwd)"
  echo "env=$FROM_CM,$FROM_SECRET,$POD_NAME,$LITERAL,$CM_size"
  echo "secret=$(cat /e2e-secret/password)"
  echo "secret_ro=$(touch /e2e-secret/x 2>/dev/null && echo writable || echo readonly)"
  echo "labels=$(cat /e2e-podinfo/labels)"
  echo "token=$(test -s $sa/token && echo yes)"
  echo "ns=$(cat $sa/namespace)"
  echo "ca=$(grep -c 'BEGIN CERTIFICATE' $sa/ca.crt)"
} > /dev/termination-log
"#;
    let done = finished_pod(&ns, json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "features", "labels": {"app": "features"}},
        "spec": {
            "restartPolicy": "Never",
            "volumes": [
                {"name": "work", "emptyDir": {}},
                {"name": "creds", "secret": {"secretName": "creds"}},
                {"name": "podinfo", "downwardAPI": {"items": [
                    {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}
            ],
            "initContainers": [
                {"name": "one", "image": "host", "command": ["sh", "-c", "echo one > /e2e-work/order"],
                 "volumeMounts": [{"name": "work", "mountPath": "/e2e-work"}]},
                {"name": "two", "image": "host", "command": ["sh", "-c", "echo two >> /e2e-work/order"],
                 "volumeMounts": [{"name": "work", "mountPath": "/e2e-work"}]}
            ],
            "containers": [{
                "name": "main", "image": "host", "command": ["sh", "-c", script],
                "workingDir": "/e2e-work",
                "env": [
                    {"name": "FROM_CM", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "colour"}}},
                    {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "LITERAL", "value": "x-$(POD_NAME)"}
                ],
                "envFrom": [{"prefix": "CM_", "configMapRef": {"name": "settings"}}],
                "volumeMounts": [
                    {"name": "work", "mountPath": "/e2e-work"},
                    {"name": "creds", "mountPath": "/e2e-secret", "readOnly": true},
                    {"name": "podinfo", "mountPath": "/e2e-podinfo"}
                ]
            }]
        }
    })).await;
    let t = terminated(&done);
    let msg = t.message.clone().unwrap_or_default();
    assert_eq!(t.exit_code, 0, "{msg}");
    let expected = [
        "order=one,two,".to_string(),
        "pwd=/e2e-work".into(),
        "env=blue,s3cret,features,x-features,7".into(),
        "secret=s3cret".into(),
        "secret_ro=readonly".into(),
        "labels=app=\"features\"".into(),
        "token=yes".into(),
        format!("ns={}", ns.name()),
        "ca=1".into(),
    ];
    let lines: Vec<&str> = msg.lines().collect();
    assert_eq!(
        lines,
        expected.iter().map(String::as_str).collect::<Vec<_>>()
    );
    let init = done
        .status
        .as_ref()
        .and_then(|s| s.init_container_statuses.clone())
        .unwrap_or_default();
    assert_eq!(init.len(), 2);
    assert!(init.iter().all(|s| {
        s.state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .map(|t| t.exit_code)
            == Some(0)
    }));
}

#[tokio::test]
async fn active_deadline_kills_the_pod() {
    let ns = TestNamespace::new().await.expect("namespace");
    let done = finished_pod(
        &ns,
        json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "slow"},
            "spec": {"restartPolicy": "Never", "activeDeadlineSeconds": 2,
                     "containers": [{"name": "main", "image": "host", "command": ["sleep", "300"]}]}
        }),
    )
    .await;
    let status = done.status.clone().expect("status");
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("DeadlineExceeded"));
    assert_ne!(terminated(&done).exit_code, 0);
}

#[tokio::test]
async fn on_failure_pod_restarts_until_it_succeeds() {
    let ns = TestNamespace::new().await.expect("namespace");
    let done = finished_pod(&ns, json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "flaky"},
        "spec": {"restartPolicy": "OnFailure",
                 "volumes": [{"name": "state", "emptyDir": {}}],
                 "containers": [{"name": "main", "image": "host",
                    "command": ["sh", "-c", "n=$(cat /e2e-state/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /e2e-state/n; exit $((n < 3))"],
                    "volumeMounts": [{"name": "state", "mountPath": "/e2e-state"}]}]}
    })).await;
    let status = done.status.clone().expect("status");
    assert_eq!(status.phase.as_deref(), Some("Succeeded"));
    let cs = status
        .container_statuses
        .expect("container statuses")
        .remove(0);
    assert_eq!(cs.restart_count, 2);
    let last = cs
        .last_state
        .and_then(|s| s.terminated)
        .expect("last state terminated");
    assert_eq!(last.exit_code, 1);
}

#[tokio::test]
async fn deleting_a_pod_kills_its_process_and_removes_it() {
    let ns = TestNamespace::new().await.expect("namespace");
    let pods: Api<Pod> = ns.api();
    ns.create::<Pod>(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "victim"},
        "spec": {"restartPolicy": "Always",
                 "containers": [{"name": "main", "image": "host", "command": ["sleep", "300"]}]}
    }))
    .await;
    // The stand-in node reports the container's host pid as its container ID.
    let pid = wait_for("victim running", BOUND, || async {
        let p = pods.get("victim").await?;
        let cs = p
            .status
            .and_then(|s| s.container_statuses)
            .unwrap_or_default();
        Ok(cs
            .first()
            .filter(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
            .and_then(|c| c.container_id.clone()))
    })
    .await
    .expect("running")
    .strip_prefix("stand-in://")
    .expect("stand-in container id")
    .to_string();
    let proc_dir = std::path::PathBuf::from(format!("/proc/{pid}"));
    assert!(proc_dir.exists(), "process {pid} runs");
    pods.delete("victim", &DeleteParams::default())
        .await
        .expect("delete");
    wait_for("victim gone", BOUND, || async {
        Ok(pods.get_opt("victim").await?.is_none().then_some(()))
    })
    .await
    .expect("pod removed after the node killed it");
    let cmdline = std::fs::read_to_string(proc_dir.join("cmdline")).unwrap_or_default();
    assert!(
        !cmdline.starts_with("sleep\x00300"),
        "process {pid} was killed"
    );
}
