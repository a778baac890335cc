//! Approval admission: the controller alone creates Approvals and writes
//! what they ask; a person writes the answer once — a decision the step
//! offers, or an entry with exactly its fields — if they are among the
//! approvers and did not create the run (unless the step allows it). Who
//! decided and when are stamped from the request, whatever the client sent.

use k8s_openapi::api::authentication::v1::UserInfo;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use coxswain_core::api::{Approval, ApprovalMode, ApprovalSpec, DecidedBy, Run};
use coxswain_core::flow::{Decider, DeciderRule, check_decider, check_decision, check_entry};

use super::review::Verdict;
use super::runs::CREATED_BY_ANNOTATION;

/// The fields a person writes; the rest of the spec is the controller's.
const ANSWER: [&str; 3] = ["decision", "feedback", "response"];
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

/// Only the controller creates Approvals.
pub fn check_create(user: &str, controller: &str) -> Result<(), String> {
    if user == controller {
        Ok(())
    } else {
        Err(format!(
            "Approvals are created by the Coxswain controller when a run reaches a person step; `{user}` may answer one, not create it"
        ))
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
) -> Result<(), String> {
    let user = who.username.as_deref().unwrap_or("");
    let skip: Vec<&str> = ANSWER.iter().chain(STAMPS.iter()).copied().collect();
    if without(old, &skip) != without(new, &skip) {
        return Err(format!(
            "only decision, feedback and response of an Approval are written by people; the rest of approval {name} is the controller's"
        ));
    }
    if !answering(old, new) {
        if (&old.decided_by, &old.decided_at) != (&new.decided_by, &new.decided_at) {
            return Err("decidedBy and decidedAt are stamped by Coxswain when the answer is written; leave them out".into());
        }
        return Ok(());
    }
    if answered(old) {
        let by = old
            .decided_by
            .as_ref()
            .map_or(String::new(), |d| format!(" by `{}`", d.username));
        let what = old
            .decision
            .as_deref()
            .map_or("answered".to_string(), |d| format!("decided `{d}`"));
        return Err(format!(
            "approval {name} was already {what}{by}; an answer never changes"
        ));
    }
    if !answered(new) {
        return Err(format!(
            "approval {name} needs {} written together with the feedback",
            match new.mode {
                ApprovalMode::Review => "a decision",
                ApprovalMode::Entry => "the response",
            }
        ));
    }
    match new.mode {
        ApprovalMode::Review => check_decision(&new.step, &new.decisions, new.decision.as_deref()),
        ApprovalMode::Entry => check_entry(
            &new.step,
            &new.fields,
            new.response.as_ref().unwrap_or(&Value::Null),
        ),
    }
    .map_err(|e| e.to_string())?;
    // The same rule the controller applies again before taking the answer in.
    let groups = who.groups.as_deref().unwrap_or(&[]);
    check_decider(
        DeciderRule {
            step: &new.step,
            run: &new.run,
            approvers: new.approvers.as_ref(),
            allow_self_approval: new.allow_self_approval,
            creator,
        },
        Some(Decider { user, groups }),
    )
    .map_err(|e| e.to_string())?;
    let stamped = new.decided_by.as_ref().map(|d| d.username.as_str());
    if stamped != Some(user) || new.decided_at.is_none() {
        return Err("decidedBy and decidedAt are stamped by Coxswain's mutating webhook, which did not run; is its MutatingWebhookConfiguration installed?".into());
    }
    Ok(())
}

/// The JSON patch that stamps who answered and when (when this update
/// answers), or puts back what was stamped before (whatever the client
/// sent otherwise).
pub fn stamp(old: &ApprovalSpec, new: &ApprovalSpec, who: &UserInfo, now: &str) -> Vec<Value> {
    let (by, at) = if answering(old, new) && !answered(old) {
        let by = DecidedBy {
            username: who.username.clone().unwrap_or_default(),
            groups: who.groups.clone().unwrap_or_default(),
        };
        (Some(by), Some(now.to_string()))
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
    ops
}

/// The refusal of an answer written to an Approval the controller closed
/// (its run ended first): nothing would ever read it.
pub fn closed(old: &Approval, new: &Approval) -> Option<String> {
    let reason = old.status.as_ref()?.closed.as_deref()?;
    answering(&old.spec, &new.spec).then(|| {
        format!(
            "approval {} is closed ({reason}); an answer would never be read",
            new.name_any()
        )
    })
}

/// Checks an update, reading the run's creator when it writes an answer.
pub async fn review_update(
    client: &kube::Client,
    old: &Approval,
    new: &Approval,
    who: &UserInfo,
) -> Verdict {
    let creator = if answering(&old.spec, &new.spec) {
        let runs: Api<Run> = Api::namespaced(client.clone(), &new.namespace().unwrap_or_default());
        match runs.get_opt(&new.spec.run).await {
            Ok(run) => match creator_of_run(new, run.as_ref()) {
                Ok(creator) => creator,
                Err(refusal) => return Verdict::Deny(refusal),
            },
            Err(e) => return Verdict::Deny(format!("cannot read run {}: {e}", new.spec.run)),
        }
    } else {
        None
    };
    if let Some(refusal) = closed(old, new) {
        return Verdict::Deny(refusal);
    }
    Verdict::from(check_update(
        &new.name_any(),
        &old.spec,
        &new.spec,
        who,
        creator.as_deref(),
    ))
}

/// Who created the run an answer to `approval` is for, from `run`, the Run
/// under its `spec.run` now; refused when there is none, or when it is
/// another Run than the one that owns the Approval (the owner was deleted
/// without its Approvals and a new Run took its name).
fn creator_of_run(approval: &Approval, run: Option<&Run>) -> Result<Option<String>, String> {
    match run {
        Some(run) if !owned_by(approval, run) => Err(format!(
            "approval {} belongs to a run {} that is gone (the Run of that name now is another one); there is nothing to decide",
            approval.name_any(),
            approval.spec.run
        )),
        Some(run) => Ok(run.annotations().get(CREATED_BY_ANNOTATION).cloned()),
        None => Err(format!(
            "the run {} of approval {} is gone; there is nothing to decide",
            approval.spec.run,
            approval.name_any()
        )),
    }
}

/// Whether `run` is the controller owner of `approval`.
fn owned_by(approval: &Approval, run: &Run) -> bool {
    crate::names::controlled_by(approval, &run.uid().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let replaced = creator_of_run(&approval, Some(&run("uid-new"))).unwrap_err();
        assert!(
            replaced.contains(
                "belongs to a run r1 that is gone (the Run of that name now is another one)"
            ),
            "{replaced}"
        );
        assert!(
            creator_of_run(&approval, None)
                .unwrap_err()
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
        let refusal = closed(&old, &new).expect("refused");
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
        check_update("r1-review-1", old, &new, who, creator)
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
        let error = check_update("a", &new, &again, &ana, Some("carl")).expect_err("second");
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

    #[test]
    fn what_the_controller_wrote_and_creation_are_the_controllers() {
        let old = spec(json!({"approvers": {"users": ["ana"]}}));
        let mut widened = old.clone();
        widened.approvers = None;
        let error =
            check_update("a", &old, &widened, &user("eve", &[]), None).expect_err("widened");
        assert!(
            error.contains("the rest of approval a is the controller's"),
            "{error}"
        );
        assert!(check_create("eve", "system:serviceaccount:coxswain:coxswain").is_err());
        assert_eq!(check_create("ctl", "ctl"), Ok(()));
    }
}
