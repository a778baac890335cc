//! PersistentVolumeClaims on the test cluster, with the real in-tree hostPath
//! provisioner of kube-controller-manager (`--enable-hostpath-provisioner`)
//! and the harness's default StorageClass `standard`: a claim is provisioned
//! and bound, one Job's pod writes to it and another's reads it back, a pod
//! whose claim never binds is never run, a claim bound later lets its pod
//! run, a WaitForFirstConsumer claim is provisioned once a pod uses it, and
//! deleting a claim deletes its PV and the PV's host directory.

use std::{path::Path, time::Duration};

use coxswain_e2e::{TestNamespace, wait_for, wait_for_job_condition, wait_pod_finished};
use k8s_openapi::api::{
    batch::v1::Job,
    core::v1::{Event, PersistentVolume, PersistentVolumeClaim, Pod},
    storage::v1::StorageClass,
};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, LogParams, PostParams},
};
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(60);
/// Where kube-controller-manager's hostPath provisioner makes volumes
/// (`pkg/volume/hostpath`: `/tmp/hostpath_pv/<uuid>`).
const PROVISIONED_UNDER: &str = "/tmp/hostpath_pv/";
/// The uid our step Jobs run as.
const STEP_UID: i64 = 65532;

fn claim(name: &str, class: Option<&str>) -> PersistentVolumeClaim {
    let mut spec = json!({
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Mi"}}
    });
    if let Some(class) = class {
        spec["storageClassName"] = json!(class);
    }
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name}, "spec": spec
    }))
    .expect("valid claim")
}

/// A pod spec (no retries) whose one container runs `script` with `sh -c`
/// with the security context of our step Jobs (uid 65532, non-root; the
/// stand-in node ignores it and runs the process as root, which is why the
/// provisioner's 0750 root directory is writable), with claim `claim` as
/// volume `data` mounted at `/data` (`read_only`: the claim is mounted
/// read-only).
fn pod_spec(script: &str, claim: &str, read_only: bool) -> Value {
    json!({
        "restartPolicy": "Never",
        "securityContext": {"runAsUser": STEP_UID, "runAsNonRoot": true},
        "containers": [{
            "name": "main", "image": "host", "command": ["sh", "-c", script],
            "volumeMounts": [{"name": "data", "mountPath": "/data"}]
        }],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim, "readOnly": read_only}}]
    })
}

fn job(name: &str, pod: Value) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name},
        "spec": {"backoffLimit": 0, "template": {"spec": pod}}
    }))
    .expect("valid job")
}

fn bare_pod(name: &str, pod: Value) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": pod
    }))
    .expect("valid pod")
}

async fn job_pod(ns: &TestNamespace, job: &str) -> Pod {
    let lp = ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}"));
    let list = ns.api::<Pod>().list(&lp).await.expect("list pods");
    assert_eq!(list.items.len(), 1, "one pod for job {job}");
    list.items.into_iter().next().expect("one pod")
}

async fn pod_log(ns: &TestNamespace, pod: &Pod) -> String {
    let name = pod.metadata.name.as_deref().expect("name");
    ns.api::<Pod>()
        .logs(name, &LogParams::default())
        .await
        .expect("pods/log")
}

fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref().and_then(|s| s.phase.as_deref())
}

/// Pod `name` once it has finished, which it must have done with phase
/// `Succeeded`, and its log.
async fn succeeded(ns: &TestNamespace, name: &str) -> (Pod, String) {
    let pods: Api<Pod> = ns.api();
    let pod = wait_pod_finished(&pods, name, BOUND)
        .await
        .expect("pod finished");
    let log = pod_log(ns, &pod).await;
    assert_eq!(phase(&pod), Some("Succeeded"), "log: {log}");
    (pod, log)
}

/// The annotation `key` of `object`, if it has one.
fn annotation<'a>(object: &'a impl ResourceExt, key: &str) -> Option<&'a str> {
    object.annotations().get(key).map(String::as_str)
}

fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
}

/// The pod's PodScheduled condition: (status, reason, message).
fn scheduled(pod: &Pod) -> Option<(String, String, String)> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
        .map(|c| {
            (
                c.status.clone(),
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

/// Waits until the claim is Bound and returns it with its PV.
async fn bound(ns: &TestNamespace, name: &str) -> (PersistentVolumeClaim, PersistentVolume) {
    let claims: Api<PersistentVolumeClaim> = ns.api();
    let pvc = wait_for(&format!("claim {name} Bound"), BOUND, || async {
        let c = claims.get(name).await?;
        let phase = c.status.as_ref().and_then(|s| s.phase.as_deref());
        Ok((phase == Some("Bound")).then_some(c))
    })
    .await
    .expect("claim bound");
    let volume = pvc
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .expect("a bound claim names its volume");
    let pv = Api::<PersistentVolume>::all(ns.client())
        .get(&volume)
        .await
        .expect("the bound PV exists");
    (pvc, pv)
}

fn host_path(pv: &PersistentVolume) -> String {
    pv.spec
        .as_ref()
        .and_then(|s| s.host_path.as_ref())
        .map(|h| h.path.clone())
        .expect("a hostPath PV")
}

#[tokio::test]
async fn claim_is_provisioned_written_read_and_deleted_with_its_directory() {
    let ns = TestNamespace::new().await.expect("namespace");
    let claims: Api<PersistentVolumeClaim> = ns.api();
    ns.create::<PersistentVolumeClaim>(claim("data", None))
        .await;

    // The default class was given by admission, the real provisioner made
    // a hostPath PV bound to the claim, and its directory is on the host.
    let (pvc, pv) = bound(&ns, "data").await;
    let pvc_spec = pvc.spec.as_ref().expect("spec");
    assert_eq!(pvc_spec.storage_class_name.as_deref(), Some("standard"));
    let pv_name = pv.metadata.name.clone().expect("name");
    assert_eq!(
        pv_name,
        format!("pvc-{}", pvc.metadata.uid.as_deref().expect("uid")),
        "the provisioner names the PV after the claim's uid"
    );
    let pv_spec = pv.spec.as_ref().expect("pv spec");
    let claim_ref = pv_spec.claim_ref.as_ref().expect("claimRef");
    assert_eq!(claim_ref.namespace.as_deref(), Some(ns.name()));
    assert_eq!(claim_ref.name.as_deref(), Some("data"));
    assert_eq!(claim_ref.uid, pvc.metadata.uid);
    assert_eq!(
        pv_spec.persistent_volume_reclaim_policy.as_deref(),
        Some("Delete")
    );
    assert_eq!(pv_spec.storage_class_name.as_deref(), Some("standard"));
    assert_eq!(
        annotation(&pv, "pv.kubernetes.io/provisioned-by"),
        Some("kubernetes.io/host-path")
    );
    let dir = host_path(&pv);
    assert!(
        dir.starts_with(PROVISIONED_UNDER),
        "provisioned under {PROVISIONED_UNDER}: {dir}"
    );
    assert!(Path::new(&dir).is_dir(), "{dir} exists on the host");

    // One Job's pod writes, as our step Jobs run (uid 65532).
    let jobs: Api<Job> = ns.api();
    let content = format!("written in {}", ns.name());
    let write = format!("printf '%s' '{content}' > /data/greeting.txt");
    ns.create::<Job>(job("writer", pod_spec(&write, "data", false)))
        .await;
    wait_for_job_condition(&jobs, "writer", "Complete", BOUND)
        .await
        .expect("writer finished");
    let writer = job_pod(&ns, "writer").await;
    assert_eq!(phase(&writer), Some("Succeeded"), "{:?}", writer.status);
    assert_eq!(node_name(&writer), Some("e2e-node"));
    assert_eq!(
        std::fs::read_to_string(Path::new(&dir).join("greeting.txt")).expect("file on the host"),
        content,
        "the pod wrote into the PV's directory"
    );

    // Another Job's pod reads it through the same claim, mounted read-only.
    let read = "cat /data/greeting.txt; echo; \
                if touch /data/other 2>/dev/null; then echo 'read-only mount was writable'; exit 1; fi";
    ns.create::<Job>(job("reader", pod_spec(read, "data", true)))
        .await;
    wait_for_job_condition(&jobs, "reader", "Complete", BOUND)
        .await
        .expect("reader finished");
    let reader = job_pod(&ns, "reader").await;
    let log = pod_log(&ns, &reader).await;
    assert_eq!(phase(&reader), Some("Succeeded"), "log: {log}");
    assert_eq!(log, format!("{content}\n"));
    assert!(!Path::new(&dir).join("other").exists());

    // Deleting the claim: pvc-protection keeps it while the (finished)
    // pods that were bound with it exist...
    claims
        .delete("data", &DeleteParams::default())
        .await
        .expect("delete claim");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let held = claims.get("data").await.expect("claim still there");
    assert!(held.metadata.deletion_timestamp.is_some());
    assert!(
        held.metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|f| f == "kubernetes.io/pvc-protection")),
        "{:?}",
        held.metadata.finalizers
    );
    assert!(Path::new(&dir).is_dir());
    // ...and once they are gone, the claim goes, then the released PV is
    // deleted by the hostPath deleter, which removes its directory.
    for name in ["writer", "reader"] {
        jobs.delete(name, &DeleteParams::background())
            .await
            .expect("delete job");
    }
    let pvs: Api<PersistentVolume> = Api::all(ns.client());
    wait_for("claim, PV and directory gone", BOUND, || async {
        let gone = claims.get_opt("data").await?.is_none()
            && pvs.get_opt(&pv_name).await?.is_none()
            && !Path::new(&dir).exists();
        Ok(gone.then_some(()))
    })
    .await
    .expect("claim, PV and its directory deleted");
}

#[tokio::test]
async fn pod_whose_claim_never_binds_stays_pending_and_never_runs() {
    let ns = TestNamespace::new().await.expect("namespace");
    ns.api::<PersistentVolumeClaim>()
        .create(
            &PostParams::default(),
            &claim("stuck", Some("no-such-class")),
        )
        .await
        .expect("create claim");
    let marker = std::env::temp_dir().join(format!("coxswain-e2e-ran-{}", ns.name()));
    let script = format!("touch {}", marker.display());
    let pods: Api<Pod> = ns.api();
    ns.create::<Pod>(bare_pod("waiter", pod_spec(&script, "stuck", false)))
        .await;

    let pod = wait_for("PodScheduled=False", BOUND, || async {
        let p = pods.get("waiter").await?;
        Ok(scheduled(&p)
            .is_some_and(|(s, _, _)| s == "False")
            .then_some(p))
    })
    .await
    .expect("pod marked unschedulable");
    let (_, reason, message) = scheduled(&pod).expect("condition");
    assert_eq!(reason, "Unschedulable");
    assert!(
        message.contains("pod has unbound immediate PersistentVolumeClaims"),
        "{message}"
    );

    // A while later it is still Pending, on no node, never started, with a
    // FailedScheduling event; the claim is still unbound.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pod = pods.get("waiter").await.expect("pod");
    assert_eq!(phase(&pod), Some("Pending"));
    assert_eq!(node_name(&pod), None);
    assert!(
        pod.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .is_none_or(|c| c.is_empty()),
        "{:?}",
        pod.status
    );
    assert!(!marker.exists(), "the pod's command never ran");
    let events = ns
        .api::<Event>()
        .list(&ListParams::default().fields("involvedObject.name=waiter"))
        .await
        .expect("events");
    assert!(
        events
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some("FailedScheduling")
                && e.message
                    .as_deref()
                    .is_some_and(|m| m.contains("unbound immediate"))),
        "{:?}",
        events.items
    );
    let pvc = ns
        .api::<PersistentVolumeClaim>()
        .get("stuck")
        .await
        .expect("claim");
    assert_eq!(pvc.status.and_then(|s| s.phase).as_deref(), Some("Pending"));
    pods.delete("waiter", &DeleteParams::default())
        .await
        .expect("delete pod");
}

#[tokio::test]
async fn pod_runs_once_its_claim_is_bound_later() {
    let ns = TestNamespace::new().await.expect("namespace");
    let class = format!("manual-{}", ns.name());
    let pvc = ns
        .api::<PersistentVolumeClaim>()
        .create(&PostParams::default(), &claim("later", Some(&class)))
        .await
        .expect("create claim");
    let pods: Api<Pod> = ns.api();
    ns.create::<Pod>(bare_pod(
        "patient",
        pod_spec("echo ran > /data/ran; cat /data/ran", "later", false),
    ))
    .await;
    wait_for("PodScheduled=False", BOUND, || async {
        let p = pods.get("patient").await?;
        Ok(scheduled(&p)
            .is_some_and(|(s, r, _)| s == "False" && r == "Unschedulable")
            .then_some(()))
    })
    .await
    .expect("pod waits for its claim");

    // An administrator's PV, pre-bound to the claim: the PV controller binds
    // them, and the node then takes the pod. (With the claim's uid in the
    // claimRef the PV controller binds at once; without, at its next resync
    // of claims, 15 s.)
    let dir = std::env::temp_dir().join(format!("coxswain-e2e-static-{}", ns.name()));
    std::fs::create_dir_all(&dir).expect("static PV directory");
    let pv_name = format!("static-{}", ns.name());
    let pv: PersistentVolume = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": pv_name},
        "spec": {
            "capacity": {"storage": "1Mi"}, "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain", "storageClassName": class,
            "hostPath": {"path": dir.to_str().expect("utf-8 path")},
            "claimRef": {"namespace": ns.name(), "name": "later", "uid": pvc.metadata.uid}
        }
    }))
    .expect("valid pv");
    let pvs: Api<PersistentVolume> = Api::all(ns.client());
    pvs.create(&PostParams::default(), &pv)
        .await
        .expect("create pv");
    let (pod, log) = succeeded(&ns, "patient").await;
    assert_eq!(log, "ran\n");
    assert_eq!(node_name(&pod), Some("e2e-node"));
    assert_eq!(scheduled(&pod).map(|(s, _, _)| s).as_deref(), Some("True"));
    assert_eq!(
        std::fs::read_to_string(dir.join("ran")).expect("written on the host"),
        "ran\n"
    );
    let _ = pvs.delete(&pv_name, &DeleteParams::default()).await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn wait_for_first_consumer_claim_is_provisioned_for_its_pod() {
    let ns = TestNamespace::new().await.expect("namespace");
    let class = format!("wffc-{}", ns.name());
    let sc: StorageClass = serde_json::from_value(json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": class},
        "provisioner": "kubernetes.io/host-path",
        "reclaimPolicy": "Delete", "volumeBindingMode": "WaitForFirstConsumer"
    }))
    .expect("valid class");
    let classes: Api<StorageClass> = Api::all(ns.client());
    classes
        .create(&PostParams::default(), &sc)
        .await
        .expect("create class");
    let claims: Api<PersistentVolumeClaim> = ns.api();
    ns.create::<PersistentVolumeClaim>(claim("late", Some(&class)))
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pvc = claims.get("late").await.expect("claim");
    assert_eq!(
        pvc.status.and_then(|s| s.phase).as_deref(),
        Some("Pending"),
        "no volume before a pod uses the claim"
    );

    let pods: Api<Pod> = ns.api();
    ns.create::<Pod>(bare_pod(
        "consumer",
        pod_spec("echo first > /data/f; cat /data/f", "late", false),
    ))
    .await;
    let (_, log) = succeeded(&ns, "consumer").await;
    assert_eq!(log, "first\n");
    let (pvc, pv) = bound(&ns, "late").await;
    assert_eq!(
        annotation(&pvc, "volume.kubernetes.io/selected-node"),
        Some("e2e-node")
    );
    let dir = host_path(&pv);
    assert_eq!(
        std::fs::read_to_string(Path::new(&dir).join("f")).expect("written on the host"),
        "first\n"
    );

    pods.delete("consumer", &DeleteParams::default())
        .await
        .expect("delete pod");
    claims
        .delete("late", &DeleteParams::default())
        .await
        .expect("delete claim");
    wait_for("directory gone", BOUND, || async {
        Ok((!Path::new(&dir).exists()).then_some(()))
    })
    .await
    .expect("PV directory deleted");
    let _ = classes.delete(&class, &DeleteParams::default()).await;
}
