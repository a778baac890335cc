//! A namespace member tries to steer the controller through what admission
//! guards, with the real kubectl, impersonated (`--as mallory`), under a
//! Role a team would be given: everything on `coxswain.dev` (which RBAC
//! lets include `runs/status`), ConfigMaps, reading pods, Jobs and logs; no
//! Secrets, no pod or Job creation. Every attack is refused by the webhook
//! with a message saying why, and an honest run beside it still finishes.
//! The last test calls the webhook directly over TLS, as anyone on the
//! network could, to show that `--webhook-client-ca` answers only a caller
//! with a client certificate from that CA.

use std::sync::Arc;
use std::time::Duration;

use coxswain_e2e::{ControllerProcess, Kubectl, Setup, TestNamespace, wait_for};
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(90);

const MALLORY: [&str; 2] = ["--as", "mallory"];
const BOB: [&str; 2] = ["--as", "bob"];

/// A flow that ends without Jobs: one condition.
const QUICK: &str = r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: quick}
spec:
  steps:
    - {key: check, condition: {when: "true"}}
"#;

/// A flow with a person step for bob.
const REVIEWED: &str = r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: reviewed}
spec:
  steps:
    - key: review
      approval:
        decisions: [approve, changes]
        approvers: {users: [bob]}
"#;

coxswain_e2e::setup_newtype!(
    /// A [`Setup`] serving admission, with the member's Role (mallory's and
    /// bob's), and what these tests do through it.
    Member
);

async fn setup() -> Member {
    let rbac = coxswain_e2e::rbac::member_role(&["mallory", "bob"]);
    Member(Setup::serving_admission(&rbac, false, &[]).await)
}

impl Member {
    /// `kubectl create` of `object` as `user`; returns its name.
    fn create_as(&self, user: &[&str], object: &Value) -> Result<String, String> {
        self.kubectl_as(
            user,
            &["create", "-f", "-", "-o", "jsonpath={.metadata.name}"],
            Some(&object.to_string()),
        )
        .map(|name| name.trim().to_string())
    }

    /// A Run of `flow` with `input` and `metadata` (beside `generateName`).
    fn run_as(
        &self,
        user: &[&str],
        flow: &str,
        input: Value,
        metadata: Value,
    ) -> Result<String, String> {
        let mut meta = json!({"generateName": format!("{flow}-")});
        if let (Value::Object(m), Value::Object(extra)) = (&mut meta, metadata) {
            m.extend(extra);
        }
        self.create_as(
            user,
            &json!({
                "apiVersion": "coxswain.dev/v1alpha1", "kind": "Run",
                "metadata": meta,
                "spec": {"flowRef": {"name": flow}, "input": input},
            }),
        )
    }

    /// A merge patch of `kind/name` (its `/status` with `status`) as `user`.
    fn patch_as(
        &self,
        user: &[&str],
        kind: &str,
        name: &str,
        status: bool,
        patch: Value,
    ) -> Result<String, String> {
        let patch = patch.to_string();
        let mut args = vec!["patch", kind, name, "--type", "merge", "-p", &patch];
        if status {
            args.push("--subresource=status");
        }
        self.kubectl_as(user, &args, None)
    }

    async fn finished(&self, run: &str) -> Value {
        self.kubectl
            .wait_run(
                self.ns.name(),
                run,
                &["Succeeded", "Failed", "Cancelled"],
                BOUND,
            )
            .await
            .unwrap_or_else(|e| panic!("{e}\ncontroller log:\n{}", self.logs()))
    }

    /// The name of the Approval the controller made for `run`.
    async fn approval_of(&self, run: &str) -> String {
        let selector = format!("coxswain.dev/run={run}");
        wait_for(&format!("the approval of {run}"), BOUND, || async {
            Ok(self
                .kubectl
                .run(&[
                    "get",
                    "approvals",
                    "-n",
                    self.ns.name(),
                    "-l",
                    &selector,
                    "-o",
                    "jsonpath={.items[0].metadata.name}",
                ])
                .ok()
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty()))
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\ncontroller log:\n{}", self.logs()))
    }
}

/// Asserts the webhook `webhook` refused, with `message` in its words;
/// prints kubectl's line, as the member sees it.
fn assert_refused(outcome: Result<String, String>, webhook: &str, message: &str) {
    let error = match outcome {
        Ok(out) => panic!("expected a refusal, kubectl said: {out}"),
        Err(error) => error,
    };
    let prefix = format!("admission webhook \"{webhook}\" denied the request: ");
    assert!(
        error.contains(&format!("{prefix}{message}")),
        "expected {prefix}{message}\nkubectl said: {error}"
    );
    let line = error.lines().find(|l| l.contains(&prefix)).unwrap_or("");
    eprintln!("kubectl: {line}");
}

/// A chat label and annotations would make the bot post the outcome into a
/// room of the member's choosing; a schedule's annotations would take its
/// slot. None can be set, changed or removed by the member; other labels
/// can, and the honest run finishes.
#[tokio::test]
async fn a_member_sets_no_label_or_annotation_the_controller_acts_on() {
    let s = setup().await;
    s.kubectl_as(&MALLORY, &["apply", "-f", "-"], Some(QUICK))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_refused(
        s.run_as(
            &MALLORY,
            "quick",
            json!({}),
            json!({"labels": {"coxswain.dev/chat": "team-chat"}}),
        ),
        "runs.coxswain.dev",
        // generateName has made the name by the time admission is asked.
        "the label `coxswain.dev/chat` is written by the Coxswain controller, which acts on it; `mallory` may not set it on Run quick-",
    );
    assert_refused(
        s.run_as(
            &MALLORY,
            "quick",
            json!({}),
            json!({"annotations": {
                "coxswain.dev/chat-connection": "team-chat",
                "coxswain.dev/chat-room": "!elsewhere:example.org"
            }}),
        ),
        "runs.coxswain.dev",
        "the annotation `coxswain.dev/chat-connection` is written by the Coxswain controller",
    );
    assert_refused(
        s.create_as(
            &MALLORY,
            &json!({
                "apiVersion": "coxswain.dev/v1alpha1", "kind": "Run",
                "metadata": {
                    "name": "quick-31558202",
                    "labels": {"coxswain.dev/flow": "quick"},
                    "annotations": {"coxswain.dev/scheduled-at": "2030-01-01T10:02:00Z"}
                },
                "spec": {"flowRef": {"name": "quick"}},
            }),
        ),
        "runs.coxswain.dev",
        "the label `coxswain.dev/flow` is written by the Coxswain controller, which acts on it; `mallory` may not set it on Run quick-31558202",
    );
    // The honest run beside them.
    let run = s
        .run_as(
            &MALLORY,
            "quick",
            json!({}),
            json!({"labels": {"team": "a"}}),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert_refused(
        s.kubectl_as(
            &MALLORY,
            &["label", "run", &run, "coxswain.dev/chat=team-chat"],
            None,
        ),
        "runs.coxswain.dev",
        &format!(
            "the label `coxswain.dev/chat` is written by the Coxswain controller, which acts on it; `mallory` may not set it on Run {run}"
        ),
    );
    assert_refused(
        s.kubectl_as(
            &MALLORY,
            &["annotate", "run", &run, "coxswain.dev/since=0"],
            None,
        ),
        "runs.coxswain.dev",
        "the annotation `coxswain.dev/since` is written by the Coxswain controller",
    );
    s.kubectl_as(
        &MALLORY,
        &["label", "run", &run, "team=b", "--overwrite"],
        None,
    )
    .unwrap_or_else(|e| panic!("a label of her own: {e}"));
    let done = s.finished(&run).await;
    assert_eq!(done["status"]["phase"], "Succeeded", "{done}");
    assert_eq!(done["metadata"]["labels"]["team"], "b");
    assert!(
        done["metadata"]["labels"]
            .as_object()
            .is_some_and(|l| !l.keys().any(|k| k.starts_with("coxswain.dev/chat"))),
        "{done}"
    );
}

/// Relabelling an Approval with another run's uid would let the member
/// close it by cancelling her own run; a status patch would forge the
/// record (a review approved, the next step running). RBAC allows both
/// (`*` on coxswain.dev); admission refuses them, while the controller's
/// own status writes still pass and bob's answer moves the run on.
#[tokio::test]
async fn a_member_relabels_no_approval_and_writes_no_status() {
    let s = setup().await;
    s.kubectl_as(&MALLORY, &["apply", "-f", "-"], Some(REVIEWED))
        .unwrap_or_else(|e| panic!("{e}"));
    let can = s.kubectl_as(
        &MALLORY,
        &["auth", "can-i", "patch", "runs", "--subresource=status"],
        None,
    );
    assert_eq!(
        can.as_deref().map(str::trim),
        Ok("yes"),
        "RBAC lets her try"
    );
    let run = s
        .run_as(&MALLORY, "reviewed", json!({}), json!({}))
        .unwrap_or_else(|e| panic!("{e}"));
    let approval = s.approval_of(&run).await;
    let own = s
        .run_as(&MALLORY, "reviewed", json!({}), json!({}))
        .unwrap_or_else(|e| panic!("{e}"));
    let own_uid = s.get("run", &own)["metadata"]["uid"]
        .as_str()
        .expect("uid")
        .to_string();
    assert_refused(
        s.kubectl_as(
            &MALLORY,
            &[
                "label",
                "approval",
                &approval,
                &format!("coxswain.dev/run-uid={own_uid}"),
                "--overwrite",
            ],
            None,
        ),
        "approvals.coxswain.dev",
        &format!(
            "the label `coxswain.dev/run-uid` is written by the Coxswain controller, which acts on it; `mallory` may not change it on Approval {approval}"
        ),
    );
    assert_refused(
        s.kubectl_as(
            &MALLORY,
            &["label", "approval", &approval, "coxswain.dev/step-"],
            None,
        ),
        "approvals.coxswain.dev",
        "the label `coxswain.dev/step` is written by the Coxswain controller, which acts on it; `mallory` may not remove it",
    );
    let forged = json!({"status": {"phase": "Succeeded", "steps": {"review": {"status": "completed", "exit": "approve"}}}});
    assert_refused(
        s.patch_as(&MALLORY, "run", &run, true, forged),
        "status.coxswain.dev",
        &format!(
            "the status of Run {run} is written by the Coxswain controller only; `mallory` may not write it (the controller acts on what the status records)"
        ),
    );
    assert_refused(
        s.patch_as(
            &MALLORY,
            "approval",
            &approval,
            true,
            json!({"status": {"closed": "run ended"}}),
        ),
        "status.coxswain.dev",
        &format!("the status of Approval {approval} is written by the Coxswain controller only"),
    );
    assert_refused(
        s.patch_as(
            &MALLORY,
            "flow",
            "reviewed",
            true,
            json!({"status": {"observedGeneration": 99}}),
        ),
        "status.coxswain.dev",
        "the status of Flow reviewed is written by the Coxswain controller only; `mallory` may not write it",
    );
    // Nothing moved: the run still waits, and bob's answer finishes it.
    assert_ne!(s.get("run", &run)["status"]["phase"], "Succeeded");
    s.patch_as(
        &BOB,
        "approval",
        &approval,
        false,
        json!({"spec": {"decision": "approve"}}),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let done = s.finished(&run).await;
    assert_eq!(done["status"]["phase"], "Succeeded", "{done}");
    assert_eq!(
        s.get("approval", &approval)["metadata"]["labels"]["coxswain.dev/run-uid"],
        done["metadata"]["uid"]
    );
}

/// `{"a": {"a": … 1 …}}`, `levels` objects deep.
fn nested(levels: usize) -> Value {
    (0..levels).fold(json!(1), |inner, _| json!({"a": inner}))
}

/// `n` condition steps in a row, as a Flow named `name`.
fn long_flow(name: &str, n: usize) -> Value {
    let steps: Vec<Value> = (0..n)
        .map(|i| json!({"key": format!("s{i}"), "condition": {"when": "true"}}))
        .collect();
    json!({
        "apiVersion": "coxswain.dev/v1alpha1", "kind": "Flow",
        "metadata": {"name": name},
        "spec": {"steps": steps},
    })
}

/// An input nested 120 deep once made every later list of Runs fail, and a
/// 10,000-step flow a Run whose status the API server never took; both are
/// refused at the door with the reason, deeper inputs too (the webhook
/// reads only what serde_json reads), and a deep-enough input and a
/// 1,000-step flow still run.
#[tokio::test]
async fn inputs_nested_too_deep_and_flows_too_long_are_refused_at_the_door() {
    let s = setup().await;
    s.kubectl_as(&MALLORY, &["apply", "-f", "-"], Some(QUICK))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_refused(
        s.run_as(&MALLORY, "quick", nested(100), json!({})),
        "runs.coxswain.dev",
        "the input nests arrays and objects 100 levels deep; a Run's input may be nested at most 64 levels deep",
    );
    // Too deep for the webhook to read whole: still a refusal, not an error.
    assert_refused(
        s.run_as(&MALLORY, "quick", nested(200), json!({})),
        "runs.coxswain.dev",
        "this Run nests arrays and objects ",
    );
    let run = s
        .run_as(&MALLORY, "quick", nested(64), json!({}))
        .unwrap_or_else(|e| panic!("64 levels are allowed: {e}"));
    assert_eq!(s.finished(&run).await["status"]["phase"], "Succeeded");

    // `create`, not `apply`: apply's last-applied annotation of a long flow
    // is over the API server's 256 KiB for annotations.
    assert_refused(
        s.create_as(&MALLORY, &long_flow("huge", 5_000)),
        "flows.coxswain.dev",
        "flow huge is not valid (1 problem): steps: the flow has 5000 steps (nested steps and named parallel parts included); at most 1404 are allowed: each step keeps about 560 bytes of bookkeeping in its Run's record, which must stay under 768 KiB for the API server to store it",
    );
    s.create_as(&MALLORY, &long_flow("long", 1_000))
        .unwrap_or_else(|e| panic!("1,000 steps are allowed: {e}"));
    let run = s
        .run_as(&MALLORY, "long", json!({}), json!({}))
        .unwrap_or_else(|e| panic!("{e}"));
    let done = s.finished(&run).await;
    assert_eq!(done["status"]["phase"], "Succeeded");
    assert_eq!(done["status"]["progress"], "1000/1000");
}

/// A CA and a certificate it signed for a TLS client.
struct ClientCert {
    ca_pem: String,
    cert_der: Vec<u8>,
    key_der: Vec<u8>,
}

fn client_cert(name: &str) -> ClientCert {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("{name} CA"));
    let ca_key = rcgen::KeyPair::generate().expect("key");
    let ca = ca_params.self_signed(&ca_key).expect("CA");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = params
        .signed_by(&key, &rcgen::Issuer::new(ca_params, ca_key))
        .expect("client certificate");
    ClientCert {
        ca_pem: ca.pem(),
        cert_der: cert.der().to_vec(),
        key_der: key.serialize_der(),
    }
}

/// POSTs `body` to `https://{addr}/validate`, trusting `server_ca`, with
/// `identity` as the client certificate when given; the whole HTTP answer,
/// or why there was none.
async fn post(
    addr: &str,
    server_ca: &str,
    identity: Option<&ClientCert>,
    body: &str,
) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut roots = rustls::RootCertStore::empty();
    let ca = rustls::pki_types::pem::PemObject::from_pem_slice(server_ca.as_bytes())
        .map_err(|e| e.to_string())?;
    roots.add(ca).map_err(|e| e.to_string())?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
    let config = match identity {
        Some(id) => builder
            .with_client_auth_cert(
                vec![id.cert_der.clone().into()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(id.key_der.clone().into()),
            )
            .map_err(|e| e.to_string())?,
        None => builder.with_no_client_auth(),
    };
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").map_err(|e| e.to_string())?;
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    let request = format!(
        "POST /validate HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tls.write_all(request.as_bytes())
        .await
        .map_err(|e| format!("writing: {e}"))?;
    let mut answer = String::new();
    tls.read_to_string(&mut answer)
        .await
        .map_err(|e| format!("reading: {e}"))?;
    Ok(answer)
}

/// With `--webhook-client-ca`, a caller without a client certificate from
/// that CA (anyone on the network but the API server) gets no verdict: the
/// TLS session ends before a request is read. One with such a certificate
/// gets the verdict the API server would.
#[tokio::test]
async fn only_a_caller_with_a_client_certificate_from_the_named_ca_gets_a_verdict() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kubectl = Kubectl::new().await.expect("kubectl");
    kubectl.install_crds().await.expect("CRDs");
    let ns = TestNamespace::new().await.expect("namespace");
    let dir = coxswain_e2e::workspace_root().join(format!(
        "target/e2e/cert-dirs/client-ca-{}-{}",
        std::process::id(),
        ns.name()
    ));
    std::fs::create_dir_all(&dir).expect("cert dir");
    let serving = coxswain_e2e::tls::loopback_cert("serving CA").expect("certificate");
    std::fs::write(dir.join("tls.crt"), &serving.cert_pem).expect("tls.crt");
    std::fs::write(dir.join("tls.key"), &serving.key_pem).expect("tls.key");
    let api_server = client_cert("kube-apiserver");
    let stranger = client_cert("stranger");
    let client_ca = dir.join("client-ca.crt");
    std::fs::write(&client_ca, &api_server.ca_pem).expect("client CA");
    let port = coxswain_e2e::free_port().expect("a free port");
    let addr = format!("127.0.0.1:{port}");
    let url = format!("https://{addr}");
    let (dir_arg, ca_arg) = (
        dir.to_string_lossy().into_owned(),
        client_ca.to_string_lossy().into_owned(),
    );
    let controller = ControllerProcess::for_namespace(
        ns.name(),
        &[
            "--webhook-url",
            &url,
            "--webhook-cert-dir",
            &dir_arg,
            "--webhook-register=false",
            "--webhook-client-ca",
            &ca_arg,
        ],
    )
    .await
    .expect("controller");
    // A status write by someone other than the controller: the verdict
    // needs no object from the cluster.
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "0d6f1c2e-0000-4000-8000-00000000000a",
            "kind": {"group": "coxswain.dev", "version": "v1alpha1", "kind": "Run"},
            "resource": {"group": "coxswain.dev", "version": "v1alpha1", "resource": "runs"},
            "subResource": "status",
            "name": "r1", "namespace": ns.name(), "operation": "UPDATE",
            "userInfo": {"username": "mallory"},
            "object": {"apiVersion": "coxswain.dev/v1alpha1", "kind": "Run",
                "metadata": {"name": "r1"}, "spec": {"flowRef": {"name": "f"}}},
            "oldObject": null, "dryRun": false
        }
    })
    .to_string();
    let verdict = wait_for(
        "a verdict for the API server's certificate",
        BOUND,
        || async {
            Ok(post(&addr, &serving.ca_pem, Some(&api_server), &review)
                .await
                .ok()
                .filter(|a| a.starts_with("HTTP/1.1 200")))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\ncontroller log:\n{}", controller.log_text()));
    assert!(
        verdict.contains(r#""uid":"0d6f1c2e-0000-4000-8000-00000000000a""#)
            && verdict.contains(r#""allowed":false"#)
            && verdict.contains("`mallory` may not write it"),
        "{verdict}"
    );
    for (who, identity) in [
        ("no certificate", None),
        ("a certificate from another CA", Some(&stranger)),
    ] {
        let outcome = post(&addr, &serving.ca_pem, identity, &review).await;
        assert!(
            !matches!(&outcome, Ok(answer) if answer.contains("allowed")),
            "{who} got a verdict: {outcome:?}"
        );
        eprintln!("{who}: {outcome:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
