//! Admission of Approvals against the real API server, with the real
//! kubectl: only the controller creates them, an approver who did not
//! start the run decides once, and an entry has exactly its fields.
//! People are impersonated (`--as`, `--as-group`) and get their rights
//! from Roles in the test's namespace.

mod admission;

use admission::{ALICE, BOB, BOUND, EVE, REVIEWED, assert_refused, setup};
use serde_json::json;

#[tokio::test]
async fn approvals_are_decided_once_by_an_approver_who_did_not_start_the_run() {
    let s = setup().await;
    s.apply_as(&ALICE, REVIEWED)
        .unwrap_or_else(|e| panic!("{e}"));
    let run = s
        .create_run_as(
            &["--as", "alice", "--as-group", "editors"],
            "reviewed",
            json!({"brief": "hello"}),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let approval = s.approval(&run, "review").await;
    let name = approval["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_string();

    // Only the controller creates Approvals.
    let mut copy = approval.clone();
    copy["metadata"] = json!({"name": "forged"});
    assert_refused(
        s.kubectl_as(&EVE, &["create", "-f", "-"], Some(&copy.to_string())),
        "approvals.coxswain.dev",
        &["Approvals are created by the Coxswain controller"],
    );
    let decide = json!({"spec": {"decision": "approve"}});
    assert_refused(
        s.patch_as(&EVE, "approval", &name, decide.clone()),
        "approvals.coxswain.dev",
        &["`eve` may not decide step `review`: it is for users `bob` and members of `editors`"],
    );
    assert_refused(
        s.patch_as(
            &["--as", "alice", "--as-group", "editors"],
            "approval",
            &name,
            decide.clone(),
        ),
        "approvals.coxswain.dev",
        &["`alice` created run", "allowSelfApproval: true"],
    );
    assert_refused(
        s.patch_as(
            &BOB,
            "approval",
            &name,
            json!({"spec": {"decision": "maybe"}}),
        ),
        "approvals.coxswain.dev",
        &["`maybe` is not a decision of step `review`; choose one of approve, changes"],
    );
    assert_refused(
        s.patch_as(
            &BOB,
            "approval",
            &name,
            json!({"spec": {"approvers": null}}),
        ),
        "approvals.coxswain.dev",
        &["is the controller's"],
    );
    // A member of editors decides; who and when are stamped, whatever was sent.
    let carol = ["--as", "carol", "--as-group", "editors"];
    s.patch_as(
        &carol,
        "approval",
        &name,
        json!({"spec": {"decision": "approve", "feedback": "Fine.", "decidedBy": {"username": "boss"}}}),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let decided = s.get("approval", &name);
    assert_eq!(
        decided["spec"]["decidedBy"]["username"], "carol",
        "{decided}"
    );
    assert!(
        decided["spec"]["decidedBy"]["groups"]
            .as_array()
            .is_some_and(|g| g.contains(&json!("editors"))),
        "{decided}"
    );
    assert!(
        decided["spec"]["decidedAt"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z')),
        "{decided}"
    );
    assert_refused(
        s.patch_as(
            &BOB,
            "approval",
            &name,
            json!({"spec": {"decision": "changes"}}),
        ),
        "approvals.coxswain.dev",
        &["was already decided `approve` by `carol`; an answer never changes"],
    );
    let done = s
        .kubectl
        .wait_run(s.ns.name(), &run, &["Succeeded"], BOUND)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", s.logs()));
    assert_eq!(done["status"]["phase"], "Succeeded");
}

#[tokio::test]
async fn entries_have_exactly_their_fields_and_self_approval_is_opt_in() {
    let s = setup().await;
    let entry = r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: assign}
spec:
  steps:
    - key: assign
      approval:
        mode: entry
        fields: [{name: owner, type: string}, {name: count, type: integer}]
        allowSelfApproval: true
"#;
    s.apply_as(&ALICE, entry).unwrap_or_else(|e| panic!("{e}"));
    let run = s
        .create_run_as(&ALICE, "assign", json!({}))
        .unwrap_or_else(|e| panic!("{e}"));
    let name = s.kubectl.approval_name(s.ns.name(), &run, "assign", 1);
    s.approval(&run, "assign").await;
    assert_refused(
        s.patch_as(
            &ALICE,
            "approval",
            &name,
            json!({"spec": {"response": {"owner": "ana"}}}),
        ),
        "approvals.coxswain.dev",
        &["the entry for step `assign` lacks `count` (a whole number)"],
    );
    assert_refused(
        s.patch_as(
            &ALICE,
            "approval",
            &name,
            json!({"spec": {"response": {"owner": "ana", "count": "2"}}}),
        ),
        "approvals.coxswain.dev",
        &["`count` in the entry for step `assign` must be a whole number; it is text"],
    );
    // allowSelfApproval: the run's creator may answer this one.
    s.patch_as(
        &ALICE,
        "approval",
        &name,
        json!({"spec": {"response": {"owner": "ana", "count": 2}}}),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        s.get("approval", &name)["spec"]["decidedBy"]["username"],
        "alice"
    );
    s.kubectl
        .wait_run(s.ns.name(), &run, &["Succeeded"], BOUND)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", s.logs()));
}
