//! Reruns (`Run.spec.from`) attacked by a namespace member, through the
//! real kubectl with admission served. eve holds the member Role of
//! [`coxswain_e2e::rbac`] (every `coxswain.dev` resource, ConfigMaps, no
//! Secrets); the cluster admin owns the flows, which send the Secret `cms`
//! to a local HTTP server standing in for a CMS. Each attack is refused at
//! `kubectl create` with its reason, and the server counts that the Secret
//! went out only for honest runs:
//!
//! - a rerun that would copy bob's approval into eve's run (issue 32, 1);
//! - a rerun pinned to another uid than the Run under that name;
//! - a rerun of eve's own run after the admin put a review first, and after
//!   the admin deleted the Flow (issue 32, 4).
//!
//! The honest reruns still work: the admin reruns their own reviewed run
//! from `publish` (bob's decision reused), eve reruns hers while the Flow is
//! unchanged, and eve may rerun the admin's run from the review, which asks
//! bob again.

mod admission;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use admission::{BOB, EVE, assert_refused, setup};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use coxswain_e2e::flow;
use coxswain_e2e::rbac::member_role;
use serde_json::json;

const RUNS: &str = "runs.coxswain.dev";
const ADMIN: [&str; 0] = [];

/// The `Authorization` headers the stand-in CMS received, in order.
#[derive(Clone, Default)]
struct Cms(Arc<Mutex<Vec<String>>>);

impl Cms {
    fn published(&self) -> Vec<String> {
        self.0.lock().expect("lock").clone()
    }
}

async fn serve_cms() -> (SocketAddr, Cms) {
    let cms = Cms::default();
    let app = axum::Router::new()
        .route(
            "/publish",
            post(|State(cms): State<Cms>, headers: HeaderMap| async move {
                let auth = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                cms.0.lock().expect("lock").push(auth);
                axum::Json(json!({"published": true}))
            }),
        )
        .with_state(cms.clone());
    let addr = coxswain_e2e::serve_on_loopback(app).await;
    (addr, cms)
}

const SECRET: &str = r#"
apiVersion: v1
kind: Secret
metadata: {name: cms}
stringData: {token: Bearer cms-token-1f2e}
"#;

/// The `publish` step: the Secret `cms` sent to the stand-in CMS.
fn publish(addr: SocketAddr, after: &str) -> String {
    format!(
        r#"    - key: publish
      after: [{after}]
      http:
        url: http://{addr}/publish
        method: POST
        headers: [{{name: Authorization, valueFrom: {{secretKeyRef: {{name: cms, key: token}}}}}}]
"#
    )
}

/// `release`: bob's review, then `publish`.
fn release(addr: SocketAddr) -> String {
    flow(
        "release",
        &format!(
            r#"
  steps:
    - key: review
      approval:
        decisions: [approve, changes]
        approvers: {{users: [bob]}}
{}"#,
            publish(addr, "review.approve")
        ),
    )
}

/// `deploy`: v1 builds then publishes; v2 puts bob's review first.
fn deploy(addr: SocketAddr, gated: bool) -> String {
    let review = if gated {
        "    - key: review\n      approval: {decisions: [approve], approvers: {users: [bob]}}\n"
    } else {
        ""
    };
    let build_after = if gated { "[review.approve]" } else { "[]" };
    flow(
        "deploy",
        &format!(
            r#"
  steps:
{review}    - key: build
      after: {build_after}
      condition: {{when: "true"}}
{}"#,
            publish(addr, "build")
        ),
    )
}

/// A Run of `flow` rerunning `run` from `step`; `uid` pins the old run.
fn rerun_of(flow: &str, run: &str, step: &str, uid: Option<&str>) -> String {
    let mut from = json!({"run": run, "step": step});
    if let Some(uid) = uid {
        from["uid"] = json!(uid);
    }
    json!({
        "apiVersion": "coxswain.dev/v1alpha1", "kind": "Run",
        "metadata": {"generateName": format!("{flow}-again-")},
        "spec": {"flowRef": {"name": flow}, "from": from},
    })
    .to_string()
}

/// `kubectl create` of `run` as `user`: the new Run's name, or kubectl's error.
fn create(s: &admission::Admission, user: &[&str], run: &str) -> Result<String, String> {
    s.kubectl_as(user, &["create", "-f", "-", "-o", "name"], Some(run))
        .map(|out| {
            out.trim()
                .trim_start_matches("run.coxswain.dev/")
                .to_string()
        })
}

/// A namespace served by admission where eve holds the member Role, the
/// Secret `cms` exists, and the stand-in CMS listens.
async fn with_member_and_cms() -> (admission::Admission, SocketAddr, Cms) {
    let s = setup().await;
    for yaml in [member_role(&["eve"]).as_str(), SECRET] {
        s.kubectl
            .apply(s.ns(), yaml)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let (addr, cms) = serve_cms().await;
    (s, addr, cms)
}

#[tokio::test]
async fn a_member_cannot_replay_another_persons_review_through_a_rerun() {
    let (s, addr, cms) = with_member_and_cms().await;
    s.apply_as(&ADMIN, &release(addr))
        .unwrap_or_else(|e| panic!("{e}"));

    let old = s
        .create_run_as(&ADMIN, "release", json!({}))
        .unwrap_or_else(|e| panic!("{e}"));
    let approval = s.approval(&old, "review").await;
    let name = approval["metadata"]["name"].as_str().expect("name");
    s.patch_as(
        &BOB,
        "approval",
        name,
        json!({"spec": {"decision": "approve"}}),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let done = s.wait_phase(&old, &["Succeeded", "Failed"]).await;
    assert_eq!(done["status"]["phase"], "Succeeded", "{}", done["status"]);
    assert_eq!(cms.published(), ["Bearer cms-token-1f2e"]);
    let old_uid = done["metadata"]["uid"].as_str().expect("uid").to_string();
    let admin = done["metadata"]["annotations"]["coxswain.dev/created-by"]
        .as_str()
        .expect("creator stamped")
        .to_string();

    // eve reruns from `publish`: bob's decision would be copied into her run.
    assert_refused(
        create(&s, &EVE, &rerun_of("release", &old, "publish", None)),
        RUNS,
        &[
            &format!(
                "a rerun from `publish` copies the decision of `review` made for the Run `{old}`, which `{admin}` created; only they may reuse it"
            ),
            "Rerun from `review` so the review is asked again",
        ],
    );
    // Pinned to a uid that is not the Run's: refused whoever asks.
    assert_refused(
        create(
            &s,
            &EVE,
            &rerun_of(
                "release",
                &old,
                "review",
                Some("0e4c5c6a-0000-4000-8000-000000000000"),
            ),
        ),
        RUNS,
        &[&format!(
            "spec.from.uid pins the Run `{old}` with uid 0e4c5c6a-0000-4000-8000-000000000000, but the Run of that name now has uid {old_uid}"
        )],
    );
    assert_eq!(cms.published().len(), 1, "no attack published");

    // From the review, eve's rerun asks bob again: admitted, admission pins
    // the uid, and it waits for bob's new answer.
    let asks = create(&s, &EVE, &rerun_of("release", &old, "review", None))
        .unwrap_or_else(|e| panic!("{e}"));
    let pinned = s.get("run", &asks);
    assert_eq!(pinned["spec"]["from"]["uid"], old_uid.as_str());
    let waiting = s
        .wait_phase(&asks, &["Waiting", "Succeeded", "Failed"])
        .await;
    assert_eq!(
        waiting["status"]["phase"], "Waiting",
        "{}",
        waiting["status"]
    );
    assert!(
        waiting["status"]["steps"]["review"]
            .get("copiedFrom")
            .is_none()
    );
    s.patch_as(&EVE, "run", &asks, json!({"spec": {"cancel": true}}))
        .unwrap_or_else(|e| panic!("{e}"));

    // The admin reruns their own run from `publish`: bob's decision stands.
    let again = create(&s, &ADMIN, &rerun_of("release", &old, "publish", None))
        .unwrap_or_else(|e| panic!("{e}"));
    let done = s.wait_phase(&again, &["Succeeded", "Failed"]).await;
    let status = &done["status"];
    assert_eq!(status["phase"], "Succeeded", "{status}");
    assert_eq!(
        status["steps"]["review"]["copiedFrom"]["uid"],
        old_uid.as_str()
    );
    assert_eq!(cms.published().len(), 2);
}

#[tokio::test]
async fn a_rerun_never_outlives_a_gate_its_flows_owner_added_or_the_flow_itself() {
    let (s, addr, cms) = with_member_and_cms().await;
    s.apply_as(&ADMIN, &deploy(addr, false))
        .unwrap_or_else(|e| panic!("{e}"));

    let old = s
        .create_run_as(&EVE, "deploy", json!({}))
        .unwrap_or_else(|e| panic!("{e}"));
    let done = s.wait_phase(&old, &["Succeeded", "Failed"]).await;
    assert_eq!(done["status"]["phase"], "Succeeded", "{}", done["status"]);
    // An honest rerun of her own run of an unchanged Flow works.
    let again = create(&s, &EVE, &rerun_of("deploy", &old, "publish", None))
        .unwrap_or_else(|e| panic!("{e}"));
    let done = s.wait_phase(&again, &["Succeeded", "Failed"]).await;
    assert_eq!(done["status"]["phase"], "Succeeded", "{}", done["status"]);
    assert_eq!(cms.published().len(), 2);

    // The admin puts bob's review first: eve's old run is no capsule.
    s.apply_as(&ADMIN, &deploy(addr, true))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_refused(
        create(&s, &EVE, &rerun_of("deploy", &old, "publish", None)),
        RUNS,
        &[
            &format!("spec.from: the Flow `deploy` changed since the Run `{old}` ran it"),
            "so every review and gate added since holds: start a new Run of the Flow instead",
        ],
    );
    // The admin withdraws the Flow.
    s.kubectl_as(&ADMIN, &["delete", "flow", "deploy", "--wait=true"], None)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_refused(
        create(&s, &EVE, &rerun_of("deploy", &old, "publish", None)),
        RUNS,
        &[&format!(
            "spec.from: the Flow `deploy` that the Run `{old}` ran no longer exists"
        )],
    );
    assert_eq!(
        cms.published().len(),
        2,
        "no rerun published after the gate"
    );
}
