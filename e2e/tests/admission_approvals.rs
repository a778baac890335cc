//! Admission of Approvals against the real API server, with the real
//! kubectl: only the controller creates them, an approver who did not
//! start the run decides once, and an entry has exactly its fields; a step
//! in mode both takes a decision and an entry together; a step that needs
//! two approvers takes each person's answer once, in `answers`. People are
//! impersonated (`--as`, `--as-group`) and get their rights from Roles in
//! the test's namespace.

mod admission;

use admission::{ALICE, Admission, BOB, BOUND, EVE, REVIEWED, assert_refused, setup};
use coxswain_e2e::{flow, wait_for, words};
use serde_json::{Value, json};

/// Waits until the Approval `name` says `state` in its STATUS column.
async fn wait_state(s: &Admission, name: &str, state: &str) -> Value {
    wait_for(&format!("approval {name} {state}"), BOUND, || async {
        // Not there yet is as good as not in that state yet.
        let approval = s
            .kubectl_as(&[], &["get", "approval", name, "-o", "json"], None)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok());
        Ok(approval.filter(|a| a["status"]["state"] == state))
    })
    .await
    .unwrap_or_else(|e| {
        panic!(
            "{e}\n{}
{}",
            s.get("approval", name),
            s.logs()
        )
    })
}

/// `kubectl get approvals` in the test's namespace, as a person reads it.
fn table(s: &Admission) -> String {
    s.kubectl_as(&[], &["get", "approvals"], None)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Adds `answer` at the end of the Approval's `answers`, as `user`: the
/// JSON patch a person writes on a step that needs several approvers.
fn add_answer(s: &Admission, user: &[&str], name: &str, answer: Value) -> Result<String, String> {
    let patch = json!([{"op": "add", "path": "/spec/answers/-", "value": answer}]);
    s.kubectl_as(
        user,
        &[
            "patch",
            "approval",
            name,
            "--type",
            "json",
            "-p",
            &patch.to_string(),
        ],
        None,
    )
}

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
    wait_state(&s, &name, "open").await;

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
    let done = s.wait_phase(&run, &["Succeeded"]).await;
    assert_eq!(done["status"]["phase"], "Succeeded");
    wait_state(&s, &name, "taken").await;
}

#[tokio::test]
async fn entries_have_exactly_their_fields_and_self_approval_is_opt_in() {
    let s = setup().await;
    let entry = flow(
        "assign",
        r#"
  steps:
    - key: assign
      approval:
        mode: entry
        fields: [{name: owner, type: string}, {name: count, type: integer}]
        allowSelfApproval: true
"#,
    );
    s.apply_as(&ALICE, &entry).unwrap_or_else(|e| panic!("{e}"));
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
    s.wait_phase(&run, &["Succeeded"]).await;
}

#[tokio::test]
async fn a_step_in_mode_both_takes_a_decision_and_an_entry_together() {
    let s = setup().await;
    let triaged = flow(
        "triaged",
        r#"
  steps:
    - key: triage
      approval:
        mode: both
        decisions: [accept, reject]
        fields: [{name: owner, type: string}]
        approvers: {users: [bob]}
"#,
    );
    s.apply_as(&ALICE, &triaged)
        .unwrap_or_else(|e| panic!("{e}"));
    let run = s
        .create_run_as(&ALICE, "triaged", json!({}))
        .unwrap_or_else(|e| panic!("{e}"));
    let name = s.kubectl.approval_name(s.ns.name(), &run, "triage", 1);
    s.approval(&run, "triage").await;
    wait_state(&s, &name, "open").await;
    assert_refused(
        s.patch_as(
            &BOB,
            "approval",
            &name,
            json!({"spec": {"decision": "accept"}}),
        ),
        "approvals.coxswain.dev",
        &["the entry for step `triage` must be an object with `owner`; it is null"],
    );
    assert_refused(
        s.patch_as(
            &BOB,
            "approval",
            &name,
            json!({"spec": {"response": {"owner": "ana"}}}),
        ),
        "approvals.coxswain.dev",
        &["step `triage` needs a decision: one of accept, reject"],
    );
    s.patch_as(
        &BOB,
        "approval",
        &name,
        json!({"spec": {"decision": "accept", "response": {"owner": "ana"}}}),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let done = s.wait_phase(&run, &["Succeeded"]).await;
    let triage = &done["status"]["steps"]["triage"];
    assert_eq!(triage["exit"], "accept", "{triage}");
    assert_eq!(
        triage["output"],
        json!({"decision": "accept", "feedback": null, "decidedBy": "bob", "response": {"owner": "ana"}}),
        "{triage}"
    );
    wait_state(&s, &name, "taken").await;
    let shown = table(&s);
    eprintln!("kubectl get approvals:\n{shown}");
    let row = shown
        .lines()
        .find(|l| l.starts_with(&name))
        .unwrap_or_else(|| panic!("{shown}"));
    assert_eq!(
        words(row)[1..6],
        [run.as_str(), "triage", "both", "taken", "accept"],
        "{shown}"
    );
}

/// A script that prints what a reviewer asked when the work was sent
/// back, and `{"first": true}` before; reviewed by two of three people.
fn two_approvers() -> String {
    flow(
        "doubly",
        r#"
  steps:
    - key: build
      script:
        source: 'if [ -f "$INPUTS/review" ]; then cat "$INPUTS/review"; else echo "{\"first\": true}"; fi'
    - key: review
      approval:
        show: [build]
        decisions: [approve, changes]
        approvers: {users: [bob, carol, dan]}
        approvals: 2
      sendBack: [{exit: changes, to: build}]
"#,
    )
}

#[tokio::test]
async fn two_approvers_must_agree_each_answers_once_and_one_changes_sends_back() {
    let s = setup().await;
    s.apply_as(&ALICE, &two_approvers())
        .unwrap_or_else(|e| panic!("{e}"));
    let run = s
        .create_run_as(&ALICE, "doubly", json!({}))
        .unwrap_or_else(|e| panic!("{e}"));
    let first = s.kubectl.approval_name(s.ns.name(), &run, "review", 1);
    let asked = s.approval(&run, "review").await;
    assert_eq!(asked["spec"]["approvals"], 2, "{asked}");
    assert_eq!(asked["spec"]["answers"], json!([]), "{asked}");
    let opened = wait_state(&s, &first, "open").await;
    assert_eq!(opened["status"]["tally"], "no answer yet of 2", "{opened}");

    let carol = ["--as", "carol", "--as-group", "editors"];
    let dan = ["--as", "dan", "--as-group", "editors"];
    // The one-person path is refused, saying how to answer instead.
    assert_refused(
        s.patch_as(
            &BOB,
            "approval",
            &first,
            json!({"spec": {"decision": "approve"}}),
        ),
        "approvals.coxswain.dev",
        &[
            "step `review` needs 2 approvers to agree, so each adds an answer to spec.answers",
            "/spec/answers/-",
        ],
    );
    // Someone not among the approvers.
    assert_refused(
        add_answer(&s, &EVE, &first, json!({"decision": "approve"})),
        "approvals.coxswain.dev",
        &["`eve` may not decide step `review`: it is for users `bob`, `carol`, `dan`"],
    );
    // The run's creator, even with an approver's group.
    assert_refused(
        add_answer(
            &s,
            &["--as", "alice", "--as-group", "editors"],
            &first,
            json!({"decision": "approve"}),
        ),
        "approvals.coxswain.dev",
        &["`alice` may not decide step `review`"],
    );
    // A decision the step does not offer.
    assert_refused(
        add_answer(&s, &BOB, &first, json!({"decision": "maybe"})),
        "approvals.coxswain.dev",
        &["`maybe` is not a decision of step `review`"],
    );
    // bob approves; his stamp is the request's user, whatever he sent.
    add_answer(
        &s,
        &BOB,
        &first,
        json!({"decision": "approve", "decidedBy": {"username": "boss"}}),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let one = s.get("approval", &first);
    assert_eq!(
        one["spec"]["answers"][0]["decidedBy"]["username"], "bob",
        "{one}"
    );
    assert!(
        one["spec"]["answers"][0]["decidedAt"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z')),
        "{one}"
    );
    // The same person twice.
    assert_refused(
        add_answer(&s, &BOB, &first, json!({"decision": "approve"})),
        "approvals.coxswain.dev",
        &[
            "`bob` already answered approval",
            "(`approve`); each approver answers once",
        ],
    );
    // Replacing the list (a merge patch) would drop bob's answer.
    assert_refused(
        s.patch_as(
            &carol,
            "approval",
            &first,
            json!({"spec": {"answers": [{"decision": "approve"}]}}),
        ),
        "approvals.coxswain.dev",
        &[
            "are only added to, one per write, at the end",
            "the 1 written before stay",
        ],
    );
    // Nor may anyone rewrite bob's answer.
    assert_refused(
        s.kubectl_as(
            &carol,
            &[
                "patch",
                "approval",
                &first,
                "--type",
                "json",
                "-p",
                r#"[{"op": "replace", "path": "/spec/answers/0/decision", "value": "changes"}]"#,
            ],
            None,
        ),
        "approvals.coxswain.dev",
        &["are only added to"],
    );
    // One approval of two: the run still waits, and says how far it got.
    let tallied = wait_for("the tally of one answer", BOUND, || async {
        let a = s.get("approval", &first);
        Ok((a["status"]["tally"] == "approve 1 of 2").then_some(a))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", s.logs()));
    assert_eq!(tallied["status"]["state"], "open", "{tallied}");
    assert_eq!(s.get("run", &run)["status"]["phase"], "Waiting");
    let waiting = table(&s);
    eprintln!("kubectl get approvals (one answer of two):\n{waiting}");

    // One "changes" is enough to send the work back; the redone script
    // reads the reviewer's answer in $INPUTS/review.
    add_answer(
        &s,
        &dan,
        &first,
        json!({"decision": "changes", "feedback": "Pin the base image."}),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let taken = wait_state(&s, &first, "taken").await;
    assert_eq!(taken["status"]["consumed"], true, "{taken}");
    assert_eq!(
        taken["status"]["tally"], "approve 1 of 2, changes 1 of 2",
        "{taken}"
    );
    let second = s.kubectl.approval_name(s.ns.name(), &run, "review", 2);
    wait_state(&s, &second, "open").await;
    let record = s.get("run", &run);
    let build = &record["status"]["steps"]["build"];
    assert_eq!(
        build["output"],
        json!({
            "decision": "changes",
            "feedback": "Pin the base image.",
            "by": "dan",
            "reviewed": {"build": {"first": true}},
        }),
        "{build}"
    );
    // An answer after the decision was taken is refused.
    assert_refused(
        add_answer(&s, &carol, &first, json!({"decision": "approve"})),
        "approvals.coxswain.dev",
        &["was already taken in by its run"],
    );

    // Two approvals take "approve".
    add_answer(
        &s,
        &carol,
        &second,
        json!({"decision": "approve", "feedback": "Good."}),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    add_answer(&s, &dan, &second, json!({"decision": "approve"})).unwrap_or_else(|e| panic!("{e}"));
    let done = s.wait_phase(&run, &["Succeeded"]).await;
    let review = &done["status"]["steps"]["review"];
    assert_eq!(review["exit"], "approve", "{review}");
    assert_eq!(review["output"]["decidedBy"], "carol, dan", "{review}");
    assert_eq!(
        review["output"]["answers"],
        json!([
            {"by": "carol", "decision": "approve", "feedback": "Good."},
            {"by": "dan", "decision": "approve", "feedback": null},
        ]),
        "{review}"
    );
    let agreed = wait_state(&s, &second, "taken").await;
    assert_eq!(agreed["status"]["tally"], "approve 2 of 2", "{agreed}");
    let shown = table(&s);
    eprintln!("kubectl get approvals:\n{shown}");
    let mut lines = shown.lines();
    assert_eq!(
        words(lines.next().unwrap_or_default()),
        [
            "NAME", "RUN", "STEP", "MODE", "STATUS", "DECISION", "DECIDED", "BY", "AGE"
        ],
        "{shown}"
    );
    // Each row: the run, step, mode, STATUS, then the decision the run
    // took in and who took it (both people when two agreed).
    for (approval, decided) in [(&first, "changes dan"), (&second, "approve carol, dan")] {
        let row = shown
            .lines()
            .find(|l| l.starts_with(approval.as_str()))
            .unwrap_or_else(|| panic!("{shown}"));
        assert_eq!(
            words(row)[1..5],
            [run.as_str(), "review", "review", "taken"],
            "{shown}"
        );
        let after = row.split(" taken ").nth(1).unwrap_or_default();
        assert!(words(after).join(" ").starts_with(decided), "{shown}");
    }
}
