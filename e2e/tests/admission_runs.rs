//! Admission of Runs against the real API server, with the real kubectl:
//! a run needs a valid flow and input that fits it, records who created
//! it, and its spec is fixed but for `cancel`. People are impersonated
//! (`--as`) and get their rights from Roles in the test's namespace.

mod admission;

use admission::{ALICE, EVE, REVIEWED, assert_refused, setup};
use serde_json::json;

#[tokio::test]
async fn runs_need_a_valid_flow_and_fitting_input_and_record_their_creator() {
    let s = setup().await;
    s.apply_as(&ALICE, REVIEWED)
        .unwrap_or_else(|e| panic!("{e}"));
    // The self-managed CA is in the Secret and is what the API server trusts.
    let secret = s.get("secret", "coxswain-webhook-tls");
    assert_eq!(secret["type"], "kubernetes.io/tls");
    let config = s.kubectl.json(&[
        "get",
        "validatingwebhookconfiguration",
        &format!("coxswain-{}", s.ns.name()),
        "-o",
        "json",
    ]);
    for hook in config["webhooks"].as_array().expect("webhooks") {
        assert_eq!(hook["clientConfig"]["caBundle"], secret["data"]["ca.crt"]);
        assert_eq!(hook["failurePolicy"], "Fail");
        assert_eq!(hook["sideEffects"], "None");
    }
    assert_refused(
        s.create_run_as(&ALICE, "reviewed", json!({"brief": "x", "words": "many"})),
        "runs.coxswain.dev",
        &["the input does not fit the Flow `reviewed`: input.words: expected integer"],
    );
    assert_refused(
        s.create_run_as(&ALICE, "reviewed", json!({"words": 3})),
        "runs.coxswain.dev",
        &["input: ", "brief"],
    );
    assert_refused(
        s.create_run_as(&ALICE, "missing", json!({})),
        "runs.coxswain.dev",
        &["there is no Flow `missing`"],
    );
    let run = s.run_created_by_alice("reviewed", json!({"brief": "hello"}));

    // Nobody forges or moves the creator.
    let forged = json!({
        "apiVersion": "coxswain.dev/v1alpha1", "kind": "Run",
        "metadata": {"generateName": "reviewed-", "annotations": {"coxswain.dev/created-by": "bob"}},
        "spec": {"flowRef": {"name": "reviewed"}, "input": {"brief": "x"}},
    });
    assert_refused(
        s.kubectl_as(&EVE, &["create", "-f", "-"], Some(&forged.to_string())),
        "runs.coxswain.dev",
        &["`bob` is not you (`eve`)"],
    );
    assert_refused(
        s.patch_as(
            &ALICE,
            "run",
            &run,
            json!({"metadata": {"annotations": {"coxswain.dev/created-by": "bob"}}}),
        ),
        "runs.coxswain.dev",
        &["never changes"],
    );
    // The spec is fixed, except cancel.
    assert_refused(
        s.patch_as(
            &ALICE,
            "run",
            &run,
            json!({"spec": {"input": {"brief": "other"}}}),
        ),
        "runs.coxswain.dev",
        &["does not change after it is created, except `cancel`"],
    );
    s.patch_as(&ALICE, "run", &run, json!({"spec": {"cancel": true}}))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.get("run", &run)["spec"]["cancel"], true);
}
