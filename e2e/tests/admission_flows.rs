//! Admission of Flows against the real API server, with the real kubectl:
//! a flow that is not valid is refused naming the step and the character,
//! and nobody reaches a Secret through a flow, Argo CD's service account
//! included. People and that account are impersonated (`--as`) and get
//! their rights from Roles in the test's namespace.

mod admission;

use admission::{ALICE, EVE, assert_refused, flow, setup};

/// A bare `n` key reaches the API server as `"false"`: the Flow is admitted
/// (the key may be meant) with a warning kubectl prints; quoted, none.
#[tokio::test]
async fn a_key_kubectl_read_as_a_boolean_is_admitted_with_a_warning() {
    let s = setup().await;
    let strict = ["--as", "alice", "--warnings-as-errors"];
    let keys = flow(
        "keys",
        "    - {key: a, agent: {prompt: x}, input: {n: 1, ok: 2}}\n",
    );
    let warned = s.apply_as(&strict, &keys).expect_err("a warning");
    assert!(
        warned.contains("Warning: spec.steps[0].input: the key \"false\" is what kubectl makes of a bare n, no or off (YAML 1.1 reads it as a boolean); if you meant the word, quote it in the YAML, as in \"no\":"),
        "{warned}"
    );
    assert_eq!(
        s.get("flow", "keys")["spec"]["steps"][0]["input"],
        serde_json::json!({"false": 1, "ok": 2})
    );
    let quoted = keys.replace("{n: 1", "{\"n\": 1");
    s.apply_as(&strict, &quoted)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        s.get("flow", "keys")["spec"]["steps"][0]["input"],
        serde_json::json!({"n": 1, "ok": 2})
    );
}

#[tokio::test]
async fn kubectl_apply_of_a_bad_flow_is_refused_naming_step_and_character() {
    let s = setup().await;
    // Each refused flow, with what kubectl's refusal must say. The last has
    // every problem of a flow in one refusal.
    let refused: [(&str, &str, &[&str]); 4] = [
        (
            "malformed",
            "    - {key: draft, agent: {prompt: x}, when: \"$input.x == 'open\"}\n",
            &[
                "flow malformed is not valid (1 problem): step draft: when: ",
                "(character ",
            ],
        ),
        (
            "capitalised",
            "    - {key: draft, agent: {prompt: x}, when: \"$input.ready == True\"}\n",
            &["step draft: when: ", "`true`", "(character 17)"],
        ),
        (
            "later",
            "    - {key: draft, agent: {prompt: x}, input: {notes: $steps.review.output.notes}}\n    - {key: review, agent: {prompt: Review it.}}\n",
            &["step draft: input.notes: ", "`review`", "(character "],
        ),
        (
            "two",
            "    - {key: a, agent: {prompt: x}, when: \"$input.x == True\"}\n    - {key: b, agent: {prompt: Review it.}, after: [c]}\n    - {key: c, agent: {prompt: z}}\n",
            &["(2 problems): step a: when: ", "; step b: after[0]: "],
        ),
    ];
    for (name, steps, says) in refused {
        assert_refused(
            s.apply_as(&ALICE, &flow(name, steps)),
            "flows.coxswain.dev",
            says,
        );
    }
    // A read into a declared output is typed at apply, client-side and
    // server-side alike.
    let typed = flow(
        "typed",
        "    - key: write\n      agent:\n        prompt: Write it.\n        reply: {format: json, fields: [{name: tagline, type: string}]}\n    - {key: post, agent: {prompt: x}, input: {line: $steps.write.output.taglin}}\n",
    );
    for apply in [
        &["apply", "-f", "-"][..],
        &["apply", "--server-side", "-f", "-"][..],
    ] {
        assert_refused(
            s.kubectl_as(&ALICE, apply, Some(&typed)),
            "flows.coxswain.dev",
            &["step post: input.line: `write` yields `tagline`, not `taglin` (character 1)"],
        );
    }
    for name in ["malformed", "capitalised", "later", "typed", "two"] {
        assert!(
            s.kubectl_as(&[], &["get", "flow", name], None).is_err(),
            "{name} was stored"
        );
    }
    // A valid flow is accepted, created and then updated.
    let good = flow(
        "good",
        "    - {key: draft, agent: {prompt: x}, when: \"$input.ready == true\"}\n",
    );
    s.apply_as(&ALICE, &good).unwrap_or_else(|e| panic!("{e}"));
    let edited = good.replace("prompt: x", "prompt: Write more.");
    s.apply_as(&ALICE, &edited)
        .unwrap_or_else(|e| panic!("{e}"));
    // An update that breaks it is refused; the stored flow stays as it was.
    let broken = good.replace("== true", "== True");
    assert_refused(
        s.apply_as(&ALICE, &broken),
        "flows.coxswain.dev",
        &["step draft: when: "],
    );
    assert_eq!(
        s.get("flow", "good")["spec"]["steps"][0]["agent"]["prompt"],
        "Write more."
    );
}

#[tokio::test]
async fn nobody_gains_a_secret_through_a_flow() {
    let s = setup().await;
    let binds = |url: &str| {
        format!(
            r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {{name: publish}}
spec:
  steps:
    - key: publish
      http:
        method: POST
        url: "{url}"
        headers: [{{name: Authorization, valueFrom: {{secretKeyRef: {{name: cms, key: token}}}}}}]
"#
        )
    };
    let fixed = binds("https://cms.example.com/api/posts/{{input.json.id}}");
    assert_refused(
        s.apply_as(&EVE, &fixed),
        "flows.coxswain.dev",
        &["step publish: http.headers[0].valueFrom: `eve` may not read the Secret `cms`"],
    );
    s.apply_as(&ALICE, &fixed).unwrap_or_else(|e| panic!("{e}"));
    // Not even someone who may read it lets run input choose the host.
    let chosen = binds("https://{{input.json.host}}/api/posts");
    assert_refused(
        s.apply_as(&ALICE, &chosen.replace("publish}", "exfiltrate}")),
        "flows.coxswain.dev",
        &[
            "step publish: http.url: this step sends the Secret `cms` in a header",
            "(character 9)",
        ],
    );
    assert_refused(
        s.kubectl_as(
            &[],
            &["apply", "-f", "-"],
            Some(&chosen.replace("publish}", "exfiltrate}")),
        ),
        "flows.coxswain.dev",
        &["choose where the secret goes"],
    );
}

/// Under Argo CD the applier is its application controller's service
/// account: the Secret rule asks about that account, whoever wrote the
/// commit, and the flow is admitted once that account may read the Secret.
#[tokio::test]
async fn under_argo_cd_the_secret_rule_asks_about_its_service_account() {
    const ARGOCD: &str = "system:serviceaccount:argocd:argocd-application-controller";
    let s = setup().await;
    let argocd = [
        "--as",
        ARGOCD,
        "--as-group",
        "system:serviceaccounts",
        "--as-group",
        "system:serviceaccounts:argocd",
    ];
    let grant = |role: &str| {
        format!(
            r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: argocd-{role}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: {role}}}
subjects:
  - {{kind: ServiceAccount, name: argocd-application-controller, namespace: argocd}}
"#
        )
    };
    s.kubectl_as(&[], &["apply", "-f", "-"], Some(&grant("coxswain-user")))
        .unwrap_or_else(|e| panic!("{e}"));
    let synced = flow(
        "synced",
        r#"    - key: publish
      http:
        method: POST
        url: https://cms.example.com/api/posts
        headers: [{name: Authorization, valueFrom: {secretKeyRef: {name: cms, key: token}}}]
"#,
    );
    assert_refused(
        s.apply_as(&argocd, &synced),
        "flows.coxswain.dev",
        &[&format!(
            "step publish: http.headers[0].valueFrom: `{ARGOCD}` may not read the Secret `cms`"
        )],
    );
    s.kubectl_as(&[], &["apply", "-f", "-"], Some(&grant("read-cms")))
        .unwrap_or_else(|e| panic!("{e}"));
    // RBAC takes a moment to reach the authorizer's cache.
    let admitted = coxswain_e2e::wait_for("the flow admitted", admission::BOUND, || async {
        Ok(s.apply_as(&argocd, &synced).ok())
    })
    .await;
    admitted.unwrap_or_else(|e| panic!("{e}"));
}
