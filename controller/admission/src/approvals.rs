//! Approval admission: the controller alone creates Approvals and writes
//! what they ask; a person writes the answer once — a decision the step
//! offers, or an entry with exactly its fields, or both — if they are among
//! the approvers and did not create the run (unless the step allows it).
//! Who decided and when are stamped from the request, whatever the client
//! sent. On a step that needs several approvers each person adds one entry
//! to `answers` instead, stamped the same way; earlier entries never change
//! and nobody answers twice.

use k8s_openapi::api::authentication::v1::UserInfo;
use kube::core::admission::Operation;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use coxswain_core::api::{Approval, ApprovalAnswer, ApprovalSpec, DecidedBy, Run};
use coxswain_core::flow::{Decider, DeciderRule, check_answer_to, check_decider};

use super::admit::{Admit, CannotAsk, Refusal, Request, Reviewer};
pub use super::refusal::ApprovalRefusal;
use super::reserved;
use coxswain_kube::names::CREATED_BY_ANNOTATION;

impl Admit for Approval {
    async fn review(reviewer: &Reviewer, request: &Request<'_>) -> Result<(), Refusal> {
        let Some((new, old)) = request.objects::<Approval>()? else {
            return Ok(());
        };
        let user = request.user();
        if let (Operation::Update, Some(old)) = (request.operation(), &old)
            && user != reviewer.controller_user
        {
            reserved::check_metadata("Approval", Some(&old.metadata), &new.metadata, user)?;
        }
        match (request.operation(), old) {
            (Operation::Create, _) => Ok(check_create(user, &reviewer.controller_user)?),
            (Operation::Update, Some(old)) => {
                review_update(&reviewer.client, &old, &new, request.user_info()).await
            }
            _ => Ok(()),
        }
    }

    /// Who answered and when, on update.
    async fn stamp(_: &Reviewer, request: &Request<'_>) -> Result<Vec<Value>, Refusal> {
        if !matches!(request.operation(), Operation::Update) {
            return Ok(Vec::new());
        }
        let new = request.object::<Approval>()?;
        let old = request.old_object::<Approval>()?;
        Ok(match (old, new) {
            (Some(old), Some(new)) => {
                let now = jiff::Timestamp::now()
                    .round(jiff::Unit::Second)
                    .unwrap_or_else(|_| jiff::Timestamp::now());
                stamp(&old.spec, &new.spec, request.user_info(), &now.to_string())
            }
            _ => Vec::new(),
        })
    }
}

/// The fields a person writes; the rest of the spec is the controller's.
const ANSWER: [&str; 4] = ["decision", "feedback", "response", "answers"];
/// The fields the webhook stamps.
const STAMPS: [&str; 2] = ["decidedBy", "decidedAt"];

/// Whether an answer has been written.
fn answered(spec: &ApprovalSpec) -> bool {
    spec.decision.is_some() || spec.response.is_some()
}

/// Whether this update writes the answer (any of decision, feedback,
/// response changes).
pub fn answering(old: &ApprovalSpec, new: &ApprovalSpec) -> bool {
    old.decision != new.decision || old.feedback != new.feedback || old.response != new.response
}

/// Whether this update writes to `answers`.
pub fn adding(old: &ApprovalSpec, new: &ApprovalSpec) -> bool {
    old.answers != new.answers
}

/// The entries of `answers`, none when it is unset.
fn entries(spec: &ApprovalSpec) -> &[ApprovalAnswer] {
    spec.answers.as_deref().unwrap_or(&[])
}

/// Only the controller creates Approvals.
pub fn check_create(user: &str, controller: &str) -> Result<(), ApprovalRefusal> {
    if user == controller {
        Ok(())
    } else {
        Err(ApprovalRefusal::NotTheController {
            user: user.to_string(),
        })
    }
}

/// The spec as JSON without the fields named.
fn without(spec: &ApprovalSpec, fields: &[&str]) -> Value {
    let mut value = serde_json::to_value(spec).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        for field in fields {
            map.remove(*field);
        }
    }
    value
}

/// Checks an update of an Approval by `who`; `creator` is the user who
/// created its run (when the update writes an answer).
pub fn check_update(
    name: &str,
    old: &ApprovalSpec,
    new: &ApprovalSpec,
    who: &UserInfo,
    creator: Option<&str>,
) -> Result<(), ApprovalRefusal> {
    let user = who.username.as_deref().unwrap_or("");
    let skip: Vec<&str> = ANSWER.iter().chain(STAMPS.iter()).copied().collect();
    if without(old, &skip) != without(new, &skip) {
        return Err(ApprovalRefusal::ControllersPart {
            name: name.to_string(),
        });
    }
    let approvals = new.required_approvals();
    if approvals > 1 {
        if answering(old, new) {
            return Err(ApprovalRefusal::UseAnswers {
                name: name.to_string(),
                step: new.step.clone(),
                approvals,
            });
        }
        if (&old.decided_by, &old.decided_at) != (&new.decided_by, &new.decided_at) {
            return Err(ApprovalRefusal::StampsMoved);
        }
        return if adding(old, new) {
            check_added(name, old, new, who, creator)
        } else {
            Ok(())
        };
    }
    if adding(old, new) {
        return Err(ApprovalRefusal::OneApprover {
            name: name.to_string(),
            step: new.step.clone(),
        });
    }
    if !answering(old, new) {
        if (&old.decided_by, &old.decided_at) != (&new.decided_by, &new.decided_at) {
            return Err(ApprovalRefusal::StampsMoved);
        }
        return Ok(());
    }
    if answered(old) {
        return Err(ApprovalRefusal::AlreadyAnswered {
            name: name.to_string(),
            decision: old.decision.clone(),
            decided_by: old.decided_by.as_ref().map(|d| d.username.clone()),
        });
    }
    if !answered(new) {
        return Err(ApprovalRefusal::NoAnswer {
            name: name.to_string(),
            mode: new.mode,
        });
    }
    check_answer_to(new, new.decision.as_deref(), new.response.as_ref())?;
    // The same rule the controller applies again before taking the answer in.
    check_person(new, who, creator)?;
    check_stamp(&new.decided_by, &new.decided_at, user)
}

/// Whether `who` may decide the step of `spec`, by its approvers and the
/// self-approval rule.
fn check_person(
    spec: &ApprovalSpec,
    who: &UserInfo,
    creator: Option<&str>,
) -> Result<(), ApprovalRefusal> {
    let user = who.username.as_deref().unwrap_or("");
    let groups = who.groups.as_deref().unwrap_or(&[]);
    check_decider(
        DeciderRule {
            step: &spec.step,
            run: &spec.run,
            approvers: spec.approvers.as_ref(),
            allow_self_approval: spec.allow_self_approval,
            creator,
        },
        Some(Decider { user, groups }),
    )?;
    Ok(())
}

/// Checks one answer added to `answers` on a step that needs several
/// approvers: every earlier entry kept as it was, exactly one more at the
/// end, from an approver who had not answered, fitting the step, stamped.
fn check_added(
    name: &str,
    old: &ApprovalSpec,
    new: &ApprovalSpec,
    who: &UserInfo,
    creator: Option<&str>,
) -> Result<(), ApprovalRefusal> {
    let user = who.username.as_deref().unwrap_or("");
    let (before, after) = (entries(old), entries(new));
    let [added] = after.get(before.len()..).unwrap_or(&[]) else {
        return Err(ApprovalRefusal::AnswersOnlyGrow {
            name: name.to_string(),
            had: before.len(),
        });
    };
    if after[..before.len()] != *before {
        return Err(ApprovalRefusal::AnswersOnlyGrow {
            name: name.to_string(),
            had: before.len(),
        });
    }
    if let Some(first) = before
        .iter()
        .find(|a| a.decided_by.as_ref().is_some_and(|d| d.username == user))
    {
        return Err(ApprovalRefusal::AnsweredTwice {
            name: name.to_string(),
            user: user.to_string(),
            decision: first.decision.clone(),
            step: new.step.clone(),
            approvals: new.required_approvals(),
        });
    }
    check_answer_to(new, added.decision.as_deref(), added.response.as_ref())?;
    check_person(new, who, creator)?;
    check_stamp(&added.decided_by, &added.decided_at, user)
}

/// An answer carries the stamp of the user who wrote it, with a time.
fn check_stamp(
    by: &Option<DecidedBy>,
    at: &Option<String>,
    user: &str,
) -> Result<(), ApprovalRefusal> {
    let stamped = by.as_ref().map(|d| d.username.as_str());
    if stamped != Some(user) || at.is_none() {
        return Err(ApprovalRefusal::NotStamped);
    }
    Ok(())
}

/// The JSON patch that stamps who answered and when (when this update
/// answers), or puts back what was stamped before (whatever the client
/// sent otherwise); and stamps each entry this update adds to `answers`.
pub fn stamp(old: &ApprovalSpec, new: &ApprovalSpec, who: &UserInfo, now: &str) -> Vec<Value> {
    let person = || DecidedBy {
        username: who.username.clone().unwrap_or_default(),
        groups: who.groups.clone().unwrap_or_default(),
    };
    let (by, at) = if answering(old, new) && !answered(old) {
        (Some(person()), Some(now.to_string()))
    } else {
        (old.decided_by.clone(), old.decided_at.clone())
    };
    let mut ops = Vec::new();
    let mut set = |field: &str, present: bool, value: Option<Value>| match value {
        Some(value) => {
            ops.push(json!({"op": "add", "path": format!("/spec/{field}"), "value": value}))
        }
        None if present => ops.push(json!({"op": "remove", "path": format!("/spec/{field}")})),
        None => {}
    };
    set(
        "decidedBy",
        new.decided_by.is_some(),
        by.map(|b| serde_json::to_value(b).unwrap_or(Value::Null)),
    );
    set("decidedAt", new.decided_at.is_some(), at.map(Value::String));
    // Entries past those there were are this write's: stamped with its
    // user. (Changing an earlier one is refused by the validation.)
    let had = entries(old).len();
    for i in had..entries(new).len() {
        let by = serde_json::to_value(person()).unwrap_or(Value::Null);
        ops.push(json!({"op": "add", "path": format!("/spec/answers/{i}/decidedBy"), "value": by}));
        ops.push(
            json!({"op": "add", "path": format!("/spec/answers/{i}/decidedAt"), "value": now}),
        );
    }
    ops
}

/// The refusal of an answer written to an Approval the controller closed
/// (its run ended first): nothing would ever read it.
pub fn closed(old: &Approval, new: &Approval) -> Option<ApprovalRefusal> {
    if !answering(&old.spec, &new.spec) && !adding(&old.spec, &new.spec) {
        return None;
    }
    let status = old.status.as_ref()?;
    if let Some(reason) = status.closed.as_deref() {
        return Some(ApprovalRefusal::Closed {
            name: new.name_any(),
            reason: reason.to_string(),
        });
    }
    // One answer per person already refuses the rest on a single-approver
    // step; on a step of several, the run may take a decision before
    // everyone answered, and no answer counts after that.
    (status.consumed && adding(&old.spec, &new.spec)).then(|| ApprovalRefusal::Taken {
        name: new.name_any(),
    })
}

/// Checks an update, reading the run's creator when it writes an answer.
pub async fn review_update(
    client: &kube::Client,
    old: &Approval,
    new: &Approval,
    who: &UserInfo,
) -> Result<(), Refusal> {
    let creator = if answering(&old.spec, &new.spec) || adding(&old.spec, &new.spec) {
        let runs: Api<Run> = Api::namespaced(client.clone(), &new.namespace().unwrap_or_default());
        let run = runs
            .get_opt(&new.spec.run)
            .await
            .map_err(|source| CannotAsk::Run {
                run: new.spec.run.clone(),
                source,
            })?;
        creator_of_run(new, run.as_ref())?
    } else {
        None
    };
    if let Some(refusal) = closed(old, new) {
        return Err(refusal.into());
    }
    Ok(check_update(
        &new.name_any(),
        &old.spec,
        &new.spec,
        who,
        creator.as_deref(),
    )?)
}

/// Who created the run an answer to `approval` is for, from `run`, the Run
/// under its `spec.run` now; refused when there is none, or when it is
/// another Run than the one that owns the Approval (the owner was deleted
/// without its Approvals and a new Run took its name).
fn creator_of_run(
    approval: &Approval,
    run: Option<&Run>,
) -> Result<Option<String>, ApprovalRefusal> {
    match run {
        Some(run) if !owned_by(approval, run) => Err(ApprovalRefusal::RunReplaced {
            approval: approval.name_any(),
            run: approval.spec.run.clone(),
        }),
        Some(run) => Ok(run.annotations().get(CREATED_BY_ANNOTATION).cloned()),
        None => Err(ApprovalRefusal::RunGone {
            approval: approval.name_any(),
            run: approval.spec.run.clone(),
        }),
    }
}

/// Whether `run` is the controller owner of `approval`.
fn owned_by(approval: &Approval, run: &Run) -> bool {
    coxswain_kube::names::controlled_by(approval, &run.uid().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::refused;

    fn spec(json: Value) -> ApprovalSpec {
        let mut base = json!({"run": "r1", "step": "review", "attempt": 1, "decisions": ["approve", "changes"]});
        if let (Value::Object(b), Value::Object(extra)) = (&mut base, json) {
            b.extend(extra);
        }
        serde_json::from_value(base).expect("spec")
    }

    #[test]
    fn an_answer_counts_only_for_the_run_that_owns_the_approval() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
        let run = |uid: &str| {
            let mut run = Run::new("r1", Default::default());
            run.metadata.uid = Some(uid.into());
            run.metadata.annotations =
                Some([(CREATED_BY_ANNOTATION.to_string(), "ana".to_string())].into());
            run
        };
        let mut approval = Approval::new("r1-review-1-0a1b2c3d", spec(json!({})));
        approval.metadata.owner_references = Some(vec![OwnerReference {
            uid: "uid-old".into(),
            controller: Some(true),
            ..Default::default()
        }]);
        assert_eq!(
            creator_of_run(&approval, Some(&run("uid-old"))),
            Ok(Some("ana".to_string()))
        );
        // Deleted without its Approvals, and a new Run took the name.
        let replaced = creator_of_run(&approval, Some(&run("uid-new")))
            .unwrap_err()
            .to_string();
        assert!(
            replaced.contains(
                "belongs to a run r1 that is gone (the Run of that name now is another one)"
            ),
            "{replaced}"
        );
        assert!(
            creator_of_run(&approval, None)
                .unwrap_err()
                .to_string()
                .contains("is gone")
        );
    }

    #[test]
    fn an_answer_to_a_closed_approval_is_refused() {
        let mut old = Approval::new("r1-review-1", spec(json!({})));
        let new = Approval::new("r1-review-1", spec(json!({"decision": "approve"})));
        assert_eq!(closed(&old, &new), None, "open: answered as usual");
        old.status = Some(coxswain_core::api::ApprovalStatus {
            closed: Some("run r1 ended Cancelled before an answer was taken in".into()),
            ..Default::default()
        });
        let refusal = closed(&old, &new).expect("refused").to_string();
        assert!(
            refusal.contains("r1-review-1 is closed (run r1 ended Cancelled"),
            "{refusal}"
        );
        assert_eq!(
            closed(&old, &old.clone()),
            None,
            "a write that answers nothing passes"
        );
    }

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            username: Some(name.into()),
            groups: Some(groups.iter().map(|g| g.to_string()).collect()),
            ..Default::default()
        }
    }

    /// `new` as the mutating webhook leaves it for `who`.
    fn stamped(old: &ApprovalSpec, new: ApprovalSpec, who: &UserInfo) -> ApprovalSpec {
        let mut value = json!({"spec": serde_json::to_value(&new).expect("json")});
        let patch: json_patch::Patch =
            serde_json::from_value(Value::Array(stamp(old, &new, who, "2030-01-01T00:00:00Z")))
                .expect("patch");
        json_patch::patch(&mut value, &patch).expect("applies");
        serde_json::from_value(value["spec"].clone()).expect("spec")
    }

    fn decide(
        old: &ApprovalSpec,
        answer: Value,
        who: &UserInfo,
        creator: Option<&str>,
    ) -> Result<(), String> {
        let mut new = serde_json::to_value(old).expect("json");
        if let (Value::Object(n), Value::Object(a)) = (&mut new, answer) {
            n.extend(a);
        }
        let new = stamped(old, serde_json::from_value(new).expect("spec"), who);
        check_update("r1-review-1", old, &new, who, creator).map_err(|e| e.to_string())
    }

    #[test]
    fn an_approver_decides_once_and_is_stamped() {
        let old = spec(json!({"approvers": {"groups": ["editors"]}}));
        let ana = user("ana", &["editors"]);
        let mut new = old.clone();
        new.decision = Some("approve".into());
        new.decided_by = Some(DecidedBy {
            username: "boss".into(),
            groups: vec![],
        });
        let new = stamped(&old, new, &ana);
        assert_eq!(
            new.decided_by.as_ref().map(|d| d.username.as_str()),
            Some("ana")
        );
        assert_eq!(new.decided_at.as_deref(), Some("2030-01-01T00:00:00Z"));
        assert_eq!(check_update("a", &old, &new, &ana, Some("carl")), Ok(()));
        // A second decision, by anyone, is refused.
        let mut again = new.clone();
        again.decision = Some("changes".into());
        let again = stamped(&new, again, &ana);
        let error = refused(
            check_update("a", &new, &again, &ana, Some("carl")),
            "second",
        );
        assert!(
            error.contains("was already decided `approve` by `ana`; an answer never changes"),
            "{error}"
        );
        // A later metadata-only update cannot move the stamp.
        let mut forged = new.clone();
        forged.decided_by = Some(DecidedBy {
            username: "boss".into(),
            groups: vec![],
        });
        let restored = stamped(&new, forged, &ana);
        assert_eq!(restored, new);
    }

    #[test]
    fn a_non_approver_or_the_runs_creator_is_refused() {
        let old = spec(json!({"approvers": {"users": ["ana"], "groups": ["editors"]}}));
        let error = decide(
            &old,
            json!({"decision": "approve"}),
            &user("eve", &["staff"]),
            None,
        )
        .expect_err("not an approver");
        assert!(
            error.contains(
                "`eve` may not decide step `review`: it is for users `ana` and members of `editors`"
            ),
            "{error}"
        );
        let error = decide(
            &old,
            json!({"decision": "approve"}),
            &user("ana", &[]),
            Some("ana"),
        )
        .expect_err("self");
        assert!(
            error.contains("`ana` created run r1 and may not decide"),
            "{error}"
        );
        let mut allowed = old.clone();
        allowed.allow_self_approval = true;
        assert_eq!(
            decide(
                &allowed,
                json!({"decision": "approve"}),
                &user("ana", &[]),
                Some("ana")
            ),
            Ok(())
        );
    }

    #[test]
    fn answers_must_fit_the_step() {
        let old = spec(json!({}));
        let error =
            decide(&old, json!({"decision": "maybe"}), &user("ana", &[]), None).expect_err("bad");
        assert!(
            error.contains("`maybe` is not a decision of step `review`"),
            "{error}"
        );
        let entry = spec(
            json!({"mode": "entry", "decisions": [], "fields": [{"name": "owner", "type": "string"}, {"name": "count", "type": "integer"}]}),
        );
        let error = decide(
            &entry,
            json!({"response": {"owner": "ana"}}),
            &user("ana", &[]),
            None,
        )
        .expect_err("missing");
        assert!(error.contains("lacks `count`"), "{error}");
        let error = decide(
            &entry,
            json!({"response": {"owner": "ana", "count": "2"}}),
            &user("ana", &[]),
            None,
        )
        .expect_err("type");
        assert!(
            error.contains(
                "`count` in the entry for step `review` must be a whole number; it is text"
            ),
            "{error}"
        );
        assert_eq!(
            decide(
                &entry,
                json!({"response": {"owner": "ana", "count": 2}}),
                &user("ana", &[]),
                None
            ),
            Ok(())
        );
    }

    /// `old` with `answer` added at the end of `answers`, stamped for `who`.
    fn add(old: &ApprovalSpec, answer: Value, who: &UserInfo) -> ApprovalSpec {
        let mut new = old.clone();
        let mut answers = new.answers.take().unwrap_or_default();
        answers.push(serde_json::from_value(answer).expect("answer"));
        new.answers = Some(answers);
        stamped(old, new, who)
    }

    #[test]
    fn several_approvers_each_add_one_stamped_answer() {
        let old = spec(
            json!({"approvals": 2, "answers": [], "approvers": {"users": ["ana", "bo", "cy"]}}),
        );
        let ana = user("ana", &[]);
        // The one-person fields are refused, saying what to write instead.
        let mut decided = old.clone();
        decided.decision = Some("approve".into());
        let error = refused(check_update("a", &old, &decided, &ana, None), "decision");
        assert!(
            error.contains("needs 2 approvers to agree") && error.contains("/spec/answers/-"),
            "{error}"
        );
        // ana adds hers; the stamp is hers whatever she sent.
        let one = add(
            &old,
            json!({"decision": "approve", "decidedBy": {"username": "boss"}}),
            &ana,
        );
        let first = &entries(&one)[0];
        assert_eq!(
            first.decided_by.as_ref().map(|d| d.username.as_str()),
            Some("ana")
        );
        assert_eq!(first.decided_at.as_deref(), Some("2030-01-01T00:00:00Z"));
        assert_eq!(check_update("a", &old, &one, &ana, None), Ok(()));
        // Not twice.
        let twice = add(&one, json!({"decision": "changes"}), &ana);
        let error = refused(check_update("a", &one, &twice, &ana, None), "twice");
        assert!(
            error.contains("`ana` already answered approval a (`approve`)"),
            "{error}"
        );
        // Someone else: yes, unless not an approver, or the answer does not fit.
        let bo = user("bo", &[]);
        let two = add(&one, json!({"decision": "approve"}), &bo);
        assert_eq!(check_update("a", &one, &two, &bo, None), Ok(()));
        let eve = user("eve", &[]);
        let error = refused(
            check_update(
                "a",
                &one,
                &add(&one, json!({"decision": "approve"}), &eve),
                &eve,
                None,
            ),
            "eve",
        );
        assert!(
            error.contains("`eve` may not decide step `review`"),
            "{error}"
        );
        let error = refused(
            check_update(
                "a",
                &one,
                &add(&one, json!({"decision": "maybe"}), &bo),
                &bo,
                None,
            ),
            "maybe",
        );
        assert!(error.contains("`maybe` is not a decision"), "{error}");
        // The run's creator neither.
        let error = refused(check_update("a", &one, &two, &bo, Some("bo")), "self");
        assert!(error.contains("`bo` created run r1"), "{error}");
        // Earlier answers never change, and one write adds one.
        let mut rewritten = two.clone();
        if let Some(answers) = rewritten.answers.as_mut() {
            answers[0].decision = Some("changes".into());
        }
        let error = refused(
            check_update("a", &two, &rewritten, &user("cy", &[]), None),
            "rewritten",
        );
        assert!(error.contains("are only added to"), "{error}");
        let mut replaced = old.clone();
        replaced.answers = Some(vec![entries(&two)[1].clone()]);
        assert!(matches!(
            check_update("a", &one, &replaced, &bo, None),
            Err(ApprovalRefusal::AnswersOnlyGrow { had: 1, .. })
        ));
        let cy = user("cy", &[]);
        let both = add(
            &add(&one, json!({"decision": "approve"}), &cy),
            json!({"decision": "approve"}),
            &cy,
        );
        assert!(matches!(
            check_update("a", &one, &both, &cy, None),
            Err(ApprovalRefusal::AnswersOnlyGrow { .. })
        ));
    }

    #[test]
    fn one_approver_writes_the_decision_not_answers() {
        let old = spec(json!({}));
        let ana = user("ana", &[]);
        let added = add(&old, json!({"decision": "approve"}), &ana);
        let error = refused(check_update("a", &old, &added, &ana, None), "answers");
        assert!(
            error.contains("step `review` is decided by one person: write spec.decision"),
            "{error}"
        );
    }

    #[test]
    fn an_answer_to_a_taken_approval_of_several_is_refused() {
        let mut old = Approval::new(
            "r1-review-1",
            spec(json!({"approvals": 2, "answers": [{"decision": "changes"}]})),
        );
        old.status = Some(coxswain_core::api::ApprovalStatus {
            consumed: true,
            ..Default::default()
        });
        let mut new = old.clone();
        new.spec = add(&old.spec, json!({"decision": "approve"}), &user("bo", &[]));
        let refusal = closed(&old, &new).expect("refused").to_string();
        assert!(
            refusal.contains("was already taken in by its run"),
            "{refusal}"
        );
    }

    #[test]
    fn mode_both_needs_the_decision_and_the_response() {
        let old = spec(json!({"mode": "both", "fields": [{"name": "owner", "type": "string"}]}));
        let ana = user("ana", &[]);
        let error = decide(&old, json!({"decision": "approve"}), &ana, None).expect_err("entry");
        assert!(error.contains("must be an object with `owner`"), "{error}");
        let error =
            decide(&old, json!({"response": {"owner": "ana"}}), &ana, None).expect_err("decision");
        assert!(error.contains("needs a decision"), "{error}");
        assert_eq!(
            decide(
                &old,
                json!({"decision": "approve", "response": {"owner": "ana"}}),
                &ana,
                None
            ),
            Ok(())
        );
    }

    #[test]
    fn what_the_controller_wrote_and_creation_are_the_controllers() {
        let old = spec(json!({"approvers": {"users": ["ana"]}}));
        let mut widened = old.clone();
        widened.approvers = None;
        let error = refused(
            check_update("a", &old, &widened, &user("eve", &[]), None),
            "widened",
        );
        assert!(
            error.contains("the rest of approval a is the controller's"),
            "{error}"
        );
        assert!(check_create("eve", "system:serviceaccount:coxswain:coxswain").is_err());
        assert_eq!(check_create("ctl", "ctl"), Ok(()));
    }
}
