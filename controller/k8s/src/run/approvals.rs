//! Person steps as Approval objects: one per waiting attempt, owned by the
//! Run, named after run, step and attempt (and a digest that includes the
//! Run's uid, so no two attempts of any two runs share one). A person
//! patches `decision` and `feedback` (or `response`), or on a step that
//! needs several approvers adds an entry to `answers`; the next reconcile
//! checks each answer against the step's approvers, hands the decision
//! taken to the engine and marks the Approval consumed. `status.state`
//! (`open`, `refused`, `taken`, `closed`) says where each stands.
//!
//! An Approval is this run's only when it says so in what nobody can change
//! afterwards: its name (the digest of the run's uid, step and attempt), its
//! `spec.run`, `spec.step` and `spec.attempt`, and its controller owner's
//! uid. Labels count for nothing: anyone who may edit it may relabel it.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::{Value, json};

use crate::error::Error;
use crate::names;
use coxswain_core::api::{Approval, ApprovalSpec, ApprovalState, Run};
use coxswain_core::engine::{ApprovalRequest, Ballot, Decision};
use coxswain_core::flow::{Vote, check_answer_to, describe_tally, tally};
pub use coxswain_kube::approvals::{approval_name, not_ours};

/// A waiting approval and what a person answered, if anything.
pub struct Asked {
    /// What the engine asks.
    pub request: ApprovalRequest,
    /// The Approval's name.
    pub name: String,
    /// The object, when it exists.
    pub object: Option<Approval>,
    /// Why the object under that name is not this run's, when it is not:
    /// nothing is taken from it and nothing is written to it.
    pub foreign: Option<String>,
}

impl Asked {
    /// What the engine asks, with the Approval's name and no object read.
    pub fn new(run: &Run, request: ApprovalRequest) -> Self {
        Asked {
            name: approval_name(run, &request.step, request.attempt),
            request,
            object: None,
            foreign: None,
        }
    }

    /// The person's answer, when one was written and not taken in yet (on
    /// a step that needs one approver).
    pub fn answer(&self) -> Option<Decision> {
        let spec = self.unsettled()?;
        if spec.decision.is_none() && spec.response.is_none() {
            return None;
        }
        Some(Decision {
            decision: spec.decision.clone(),
            feedback: spec.feedback.clone(),
            response: spec.response.clone(),
            decided_by: spec.decided_by.as_ref().map(|d| d.username.clone()),
            ballots: Vec::new(),
        })
    }

    /// The spec, when the object is this run's and its answer was not
    /// taken in yet.
    fn unsettled(&self) -> Option<&ApprovalSpec> {
        if self.foreign.is_some() {
            return None;
        }
        let approval = self.object.as_ref()?;
        if approval.status.as_ref().is_some_and(|s| s.consumed) {
            return None;
        }
        Some(&approval.spec)
    }

    /// On a step that needs several approvers: the answers in `answers`,
    /// each checked as a single answer is (it fits the step as the flow
    /// states it, and its stamped writer may decide), then counted.
    pub fn ballots(&self, run: &Run) -> Ballots {
        let mut ballots = Ballots::default();
        let Some(spec) = self.unsettled() else {
            return ballots;
        };
        let request = &self.request;
        if spec.decision.is_some() || spec.response.is_some() {
            ballots.refused.push(format!(
                "step `{}` needs {} approvers to agree, each adding an entry to spec.answers; spec.decision and spec.response are not read",
                request.step, request.approvals
            ));
        }
        let answers = spec.answers.as_deref().unwrap_or(&[]);
        let mut votes: Vec<Vote<'_>> = Vec::new();
        let mut counted: Vec<&coxswain_core::api::ApprovalAnswer> = Vec::new();
        for (i, answer) in answers.iter().enumerate() {
            let Some(by) = &answer.decided_by else {
                ballots.refused.push(format!(
                    "answer {} does not say who wrote it (decidedBy, which Coxswain's mutating webhook stamps); step `{}` counts only stamped answers",
                    i + 1,
                    request.step
                ));
                continue;
            };
            if counted
                .iter()
                .any(|c| c.decided_by.as_ref().map(|d| &d.username) == Some(&by.username))
            {
                ballots.refused.push(format!(
                    "`{}` answered more than once; only their first answer counts",
                    by.username
                ));
                continue;
            }
            let fits = check_answer_to(
                request,
                answer.decision.as_deref(),
                answer.response.as_ref(),
            )
            .map_err(|e| e.to_string())
            .and_then(|()| {
                self.check_decider_of(run, Some(by))
                    .map_err(|e| e.to_string())
            });
            if let Err(why) = fits {
                ballots.refused.push(format!(
                    "the answer of `{}` is not counted: {why}",
                    by.username
                ));
                continue;
            }
            counted.push(answer);
            votes.push(Vote {
                by: &by.username,
                decision: answer.decision.as_deref().unwrap_or_default(),
            });
        }
        ballots.tally = Some(describe_tally(request.approvals, &votes));
        let Some((decision, agreeing)) = tally(request.approvals, &request.sends_back, &votes)
        else {
            return ballots;
        };
        let taken: Vec<Ballot> = agreeing
            .iter()
            .map(|&i| Ballot {
                by: votes[i].by.to_string(),
                decision: decision.clone(),
                feedback: counted[i].feedback.clone(),
            })
            .collect();
        let feedback = match taken.as_slice() {
            [one] => one.feedback.clone(),
            several => {
                let lines: Vec<String> = several
                    .iter()
                    .filter_map(|b| Some(format!("{}: {}", b.by, b.feedback.as_deref()?)))
                    .collect();
                (!lines.is_empty()).then(|| lines.join("\n"))
            }
        };
        let names: Vec<&str> = taken.iter().map(|b| b.by.as_str()).collect();
        ballots.decision = Some(Decision {
            decision: Some(decision),
            feedback,
            response: None,
            decided_by: Some(names.join(", ")),
            ballots: taken,
        });
        ballots
    }

    /// The refusal already recorded on the Approval, so it is not written twice.
    pub fn refused(&self) -> Option<&str> {
        self.object.as_ref()?.status.as_ref()?.refused.as_deref()
    }

    /// Whether the person who answered may decide the step, by the rule the
    /// flow gives (not the one the object says: only admission guards
    /// that), from the identity admission stamped on the answer.
    pub fn check_decider(&self, run: &Run) -> Result<(), coxswain_core::flow::DeciderError> {
        let stamp = self
            .object
            .as_ref()
            .and_then(|a| a.spec.decided_by.as_ref());
        self.check_decider_of(run, stamp)
    }

    /// [`Asked::check_decider`] for the answer stamped `stamp`.
    fn check_decider_of(
        &self,
        run: &Run,
        stamp: Option<&coxswain_core::api::DecidedBy>,
    ) -> Result<(), coxswain_core::flow::DeciderError> {
        let creator = run
            .annotations()
            .get(crate::names::CREATED_BY_ANNOTATION)
            .map(String::as_str);
        let name = run.name_any();
        coxswain_core::flow::check_decider(
            coxswain_core::flow::DeciderRule {
                step: &self.request.step,
                run: &name,
                approvers: self.request.approvers.as_ref(),
                allow_self_approval: self.request.allow_self_approval,
                creator,
            },
            stamp.map(|d| coxswain_core::flow::Decider {
                user: &d.username,
                groups: &d.groups,
            }),
        )
    }

    /// The answer the run takes from this Approval, if any: the one
    /// person's, or the decision several agreed on.
    pub fn taken(&self, run: &Run) -> Option<Decision> {
        if self.request.approvals > 1 {
            self.ballots(run).decision
        } else {
            self.answer()
        }
    }

    /// The tally the Approval shows, so the same one is not written twice.
    pub fn shown_tally(&self) -> Option<&str> {
        self.object.as_ref()?.status.as_ref()?.tally.as_deref()
    }
}

/// What the answers of a step that needs several approvers come to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ballots {
    /// The decision they take, when they take one.
    pub decision: Option<Decision>,
    /// Why answers were not counted, one sentence each.
    pub refused: Vec<String>,
    /// How the counted answers stand (`approve 1 of 2`).
    pub tally: Option<String>,
}

/// The Approvals of the attempts waiting for a person.
pub async fn read(
    api: &Api<Approval>,
    run: &Run,
    requests: Vec<ApprovalRequest>,
) -> Result<Vec<Asked>, Error> {
    let mut asked = Vec::with_capacity(requests.len());
    for request in requests {
        let mut a = Asked::new(run, request);
        a.object = api
            .get_opt(&a.name)
            .await
            .map_err(|e| Error::kube(format!("reading the approval {}", a.name), e))?;
        a.foreign = a
            .object
            .as_ref()
            .and_then(|o| not_ours(o, run, &a.request.step, a.request.attempt));
        asked.push(a);
    }
    Ok(asked)
}

/// Creates the Approval for a waiting attempt; one that exists is left
/// alone. `Some` says why the one under its name is not this run's (the
/// next reconcile reads it again and fails the attempt).
pub async fn create(
    api: &Api<Approval>,
    run: &Run,
    asked: &Asked,
    show: Value,
) -> Result<Option<String>, Error> {
    let request = &asked.request;
    let mut approval = Approval::new(
        &asked.name,
        ApprovalSpec {
            run: run.name_any(),
            step: request.step.clone(),
            attempt: request.attempt as i32,
            mode: request.mode,
            show: (!request.show.is_empty()).then_some(show),
            decisions: request.decisions.clone(),
            fields: request.fields.clone(),
            approvers: request.approvers.clone(),
            instructions: request.instructions.clone(),
            allow_self_approval: request.allow_self_approval,
            // Written empty so that people add theirs with a JSON patch
            // (`add /spec/answers/-`).
            approvals: (request.approvals > 1).then_some(request.approvals as i32),
            answers: (request.approvals > 1).then(Vec::new),
            ..Default::default()
        },
    );
    approval.metadata = ObjectMeta {
        name: Some(asked.name.clone()),
        namespace: run.namespace(),
        owner_references: run.controller_owner_ref(&()).map(|o| vec![o]),
        labels: Some({
            let mut labels = names::child_labels(run, "approval");
            labels.insert(names::STEP_LABEL.into(), names::step_label(&request.step));
            labels
        }),
        ..Default::default()
    };
    match api.create(&PostParams::default(), &approval).await {
        Ok(_) => {
            // Status cannot be written with the object; the STATUS column
            // says `open` from the write right after.
            let mut status = json!({"state": ApprovalState::Open});
            if request.approvals > 1 {
                status["tally"] = json!(describe_tally(request.approvals, &[]));
            }
            patch_status(api, &asked.name, status, "opening").await?;
            Ok(None)
        }
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let found = api
                .get_opt(&asked.name)
                .await
                .map_err(|e| Error::kube(format!("reading the approval {}", asked.name), e))?;
            let Some(found) = found else { return Ok(None) };
            if let Some(foreign) = not_ours(&found, run, &request.step, request.attempt) {
                return Ok(Some(foreign));
            }
            // Made by an earlier reconcile that stopped before saying it is
            // open (or by a controller from before the STATUS column).
            if found.status.as_ref().is_none_or(|s| s.state.is_none()) {
                patch_status(
                    api,
                    &asked.name,
                    json!({"state": ApprovalState::Open}),
                    "opening",
                )
                .await?;
            }
            Ok(None)
        }
        Err(e) => Err(Error::kube(
            format!("creating the approval {}", asked.name),
            e,
        )),
    }
}

/// Marks an answer taken in (`consumed`), with the decision taken when it
/// is known, or refused with the reason; with `tally`, how the answers of a
/// step of several approvers stand, in the same write.
pub async fn settle(
    api: &Api<Approval>,
    name: &str,
    refused: Option<&str>,
    taken: Option<&Decision>,
    tally: Option<&str>,
) -> Result<(), Error> {
    let mut status = match refused {
        None => json!({
            "consumed": true,
            "refused": null,
            "state": ApprovalState::Taken,
            "decision": taken.and_then(|d| d.decision.clone()),
            "decidedBy": taken.and_then(|d| d.decided_by.clone()),
        }),
        Some(reason) => json!({"refused": reason, "state": ApprovalState::Refused}),
    };
    if let Some(tally) = tally {
        status["tally"] = json!(tally);
    }
    patch_status(api, name, status, "updating").await
}

/// Writes how the answers of a step that needs several approvers stand.
pub async fn show_tally(api: &Api<Approval>, name: &str, tally: &str) -> Result<(), Error> {
    patch_status(api, name, json!({"tally": tally}), "updating").await
}

/// Merges `status` into the Approval's status; one deleted meanwhile (the
/// run was deleted) needs nothing. `doing` names the write in errors.
async fn patch_status(
    api: &Api<Approval>,
    name: &str,
    status: Value,
    doing: &str,
) -> Result<(), Error> {
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .map(|_| ())
    .or_else(|e| match e {
        kube::Error::Api(status) if status.code == 404 => Ok(()),
        e => Err(Error::kube(format!("{doing} the approval {name}"), e)),
    })
}

/// Closes the Approvals of an ended run that no answer was taken from, so
/// nobody is left waiting to answer (and Argo CD stops showing them as
/// Suspended); returns how many it closed.
pub async fn close_unanswered(
    api: &Api<Approval>,
    run: &Run,
    reason: &str,
) -> Result<usize, Error> {
    let uid = run.uid().unwrap_or_default();
    let selector = format!("{}={uid}", names::RUN_UID_LABEL);
    let list = api
        .list(&kube::api::ListParams::default().labels(&selector))
        .await
        .map_err(|e| {
            Error::kube(
                format!("listing the approvals of run {}", run.name_any()),
                e,
            )
        })?;
    let run_status = run.status.clone().unwrap_or_default();
    let mut closed = 0;
    for approval in list.items {
        // The label is anyone's to write: another run's Approval relabelled
        // with this run's uid is not closed.
        let (step, attempt) = (approval.spec.step.clone(), approval.spec.attempt);
        let Ok(attempt) = u32::try_from(attempt) else {
            continue;
        };
        if not_ours(&approval, run, &step, attempt).is_some() {
            continue;
        }
        match leftover(&approval, &run_status) {
            Leftover::Settled => {}
            Leftover::TakenIn => settle(api, &approval.name_any(), None, None, None).await?,
            Leftover::Unanswered => {
                close(api, &approval.name_any(), reason).await?;
                closed += 1;
            }
        }
    }
    Ok(closed)
}

/// What an Approval whose attempt no longer waits still needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leftover {
    /// Nothing: consumed or closed already.
    Settled,
    /// Its answer is in the run's status, but the Approval does not say so:
    /// the write that took it in was applied and its answer lost (or the
    /// controller stopped right after it), so marking it consumed never
    /// happened. It is marked now, not closed as if nobody had answered.
    TakenIn,
    /// No answer was taken in from it: it is closed.
    Unanswered,
}

/// What `approval`, whose attempt no longer waits, still needs, from the
/// run's status.
pub fn leftover(approval: &Approval, run_status: &coxswain_core::api::RunStatus) -> Leftover {
    let status = approval.status.clone().unwrap_or_default();
    if status.consumed || status.closed.is_some() {
        return Leftover::Settled;
    }
    let spec = &approval.spec;
    if spec.answered() && taken_in(run_status, &spec.step, spec.attempt) {
        Leftover::TakenIn
    } else {
        Leftover::Unanswered
    }
}

/// Whether the run's status shows attempt `attempt` of the person step `step`
/// completed: only an answer completes one (a timeout or a stop fails or
/// cancels it).
pub fn taken_in(run_status: &coxswain_core::api::RunStatus, step: &str, attempt: i32) -> bool {
    run_status.steps.get(step).is_some_and(|s| {
        s.attempts
            .iter()
            .any(|a| a.number == attempt && a.status == coxswain_core::api::StepPhase::Completed)
    })
}

/// Closes one Approval nobody will read an answer from, saying why; one
/// already gone is as good.
pub async fn close(api: &Api<Approval>, name: &str, reason: &str) -> Result<(), Error> {
    let status = json!({"closed": reason, "state": ApprovalState::Closed});
    patch_status(api, name, status, "closing").await
}

/// Why attempt `attempt` of `step` no longer waits, from the run's status: the
/// attempt's error (a timeout, say) when it has one.
pub fn attempt_ended_reason(
    status: &coxswain_core::api::RunStatus,
    step: &str,
    attempt: u32,
) -> String {
    let error = status
        .steps
        .get(step)
        .and_then(|run_status| {
            run_status
                .attempts
                .iter()
                .find(|a| a.number == i32::try_from(attempt).unwrap_or(i32::MAX))
        })
        .and_then(|attempt| attempt.error.as_ref())
        .map(|e| format!(" ({})", e.message))
        .unwrap_or_default();
    format!("attempt {attempt} of step {step} ended{error} before an answer was taken in")
}

/// Settles the Approvals of the attempts of `request`'s step before it,
/// other than those read this reconcile (`read`, which [`open`] and the plan
/// handles): called before `request`'s Approval is created, so once per
/// attempt. The write that ended the earlier attempt and asked this one
/// may have been applied with its answer lost, and then the reconcile that
/// would have closed the earlier Approval never ran: it would stay open,
/// and an answer written there would never be read.
pub async fn settle_earlier(
    api: &Api<Approval>,
    run: &Run,
    run_status: &coxswain_core::api::RunStatus,
    request: &ApprovalRequest,
    read: &[&str],
) -> Result<(), Error> {
    for attempt in 1..request.attempt {
        let name = approval_name(run, &request.step, attempt);
        if read.contains(&name.as_str()) {
            continue;
        }
        let approval = api
            .get_opt(&name)
            .await
            .map_err(|e| Error::kube(format!("reading the approval {name}"), e))?;
        let Some(approval) = approval else { continue };
        if not_ours(&approval, run, &request.step, attempt).is_some() {
            continue;
        }
        match leftover(&approval, run_status) {
            Leftover::Settled => {}
            Leftover::TakenIn => settle(api, &name, None, None, None).await?,
            Leftover::Unanswered => {
                let reason = attempt_ended_reason(run_status, &request.step, attempt);
                close(api, &name, &reason).await?;
            }
        }
    }
    Ok(())
}

/// The Approvals read this reconcile that are open and unanswered and that
/// Coxswain made: those whose attempt stops waiting (a timeout ended it, a
/// send-back or a failure elsewhere stopped it) are closed, so nobody is
/// left answering them.
pub fn open<'a>(asked: &'a [Asked], run: &'a Run) -> impl Iterator<Item = &'a Asked> + 'a {
    asked
        .iter()
        .filter(|a| a.foreign.is_none())
        // Answered: what the run takes in is settled, not closed.
        .filter(move |a| a.taken(run).is_none())
        .filter(|a| {
            a.object.as_ref().is_some_and(|o| {
                o.status
                    .as_ref()
                    .is_none_or(|s| !s.consumed && s.closed.is_none())
            })
        })
}

/// A reference to an Approval, for events about it.
pub fn reference(approval: &Approval) -> ObjectReference {
    approval.object_ref(&())
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_core::api::{ApprovalStatus, Attempt, RunStatus, StepPhase, StepStatus};

    fn approval(attempt: i32, decision: Option<&str>, status: ApprovalStatus) -> Approval {
        let mut a = Approval::new(
            "r-ask-1",
            ApprovalSpec {
                run: "r".into(),
                step: "ask".into(),
                attempt,
                decision: decision.map(String::from),
                ..Default::default()
            },
        );
        a.status = Some(status);
        a
    }

    fn run_status(attempts: &[StepPhase]) -> RunStatus {
        let mut run_status = RunStatus::default();
        let step = StepStatus {
            attempts: attempts
                .iter()
                .zip(1..)
                .map(|(status, number)| Attempt {
                    number,
                    status: *status,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        run_status.steps.insert("ask".into(), step);
        run_status
    }

    #[test]
    fn ballots_count_each_checked_answer_once() {
        let mut run = Run::new("r", Default::default());
        run.metadata.annotations = Some(
            [(
                crate::names::CREATED_BY_ANNOTATION.to_string(),
                "ana".to_string(),
            )]
            .into(),
        );
        let request = ApprovalRequest {
            step: "ask".into(),
            attempt: 1,
            mode: coxswain_core::api::ApprovalMode::Review,
            show: Default::default(),
            decisions: vec!["approve".into(), "changes".into()],
            fields: Vec::new(),
            approvers: Some(coxswain_core::api::Approvers {
                users: vec!["ana".into(), "bo".into(), "cy".into()],
                groups: Vec::new(),
            }),
            instructions: None,
            allow_self_approval: false,
            approvals: 2,
            sends_back: vec!["changes".into()],
            lookups: Vec::new(),
            data: Default::default(),
        };
        let by = |user: &str, decision: &str, feedback: Option<&str>| {
            serde_json::from_value::<coxswain_core::api::ApprovalAnswer>(json!({
                "decision": decision,
                "feedback": feedback,
                "decidedBy": {"username": user},
            }))
            .expect("answer")
        };
        let mut unstamped = by("x", "approve", None);
        unstamped.decided_by = None;
        let answers = vec![
            by("ana", "approve", None),
            by("bo", "approve", Some("Fine.")),
            by("bo", "changes", None),
            unstamped,
            by("eve", "approve", None),
            by("cy", "approve", Some("Ship it.")),
        ];
        let mut object = approval(1, None, ApprovalStatus::default());
        object.spec.answers = Some(answers.clone());
        let mut asked = Asked::new(&run, request);
        asked.object = Some(object);
        let ballots = asked.ballots(&run);
        let decision = ballots.decision.expect("two agreed");
        assert_eq!(decision.decision.as_deref(), Some("approve"));
        assert_eq!(decision.decided_by.as_deref(), Some("bo, cy"));
        assert_eq!(
            decision.feedback.as_deref(),
            Some("bo: Fine.\ncy: Ship it.")
        );
        assert_eq!(ballots.tally.as_deref(), Some("approve 2 of 2"));
        let refused = ballots.refused.join("\n");
        assert_eq!(ballots.refused.len(), 4, "{refused}");
        for why in [
            "`ana` is not counted: `ana` created run r",
            "`bo` answered more than once",
            "answer 4 does not say who wrote it",
            "the answer of `eve` is not counted: `eve` may not decide step `ask`",
        ] {
            assert!(refused.contains(why), "{why}: {refused}");
        }
        // Short of two, nothing is taken; one "changes" is enough.
        let mut object = approval(1, None, ApprovalStatus::default());
        object.spec.answers = Some(answers[..2].to_vec());
        asked.object = Some(object);
        assert_eq!(asked.ballots(&run).decision, None);
        assert!(open(std::slice::from_ref(&asked), &run).next().is_some());
        let mut object = approval(1, None, ApprovalStatus::default());
        object.spec.answers = Some(vec![by("cy", "changes", Some("Redo."))]);
        asked.object = Some(object);
        let back = asked.ballots(&run).decision.expect("sent back");
        assert_eq!(
            (
                back.decision.as_deref(),
                back.decided_by.as_deref(),
                back.feedback.as_deref()
            ),
            (Some("changes"), Some("cy"), Some("Redo."))
        );
        assert!(
            open(std::slice::from_ref(&asked), &run).next().is_none(),
            "a decided Approval is settled, not closed"
        );
    }

    #[test]
    fn an_answer_the_status_took_in_is_marked_consumed_not_closed() {
        // The write that took "approve" in was applied, its answer lost:
        // the run's status has the attempt completed, the Approval is not
        // consumed. Closing it would say nobody's answer was taken.
        let completed = run_status(&[StepPhase::Completed]);
        let answered = approval(1, Some("approve"), ApprovalStatus::default());
        assert_eq!(leftover(&answered, &completed), Leftover::TakenIn);
    }

    #[test]
    fn approvals_nobody_answered_in_time_are_closed_and_settled_ones_left() {
        let completed = run_status(&[StepPhase::Completed]);
        let unanswered = approval(1, None, ApprovalStatus::default());
        assert_eq!(leftover(&unanswered, &completed), Leftover::Unanswered);
        // Answered after the attempt timed out: the answer was never read.
        let timed_out = run_status(&[StepPhase::Failed]);
        let late = approval(1, Some("approve"), ApprovalStatus::default());
        assert_eq!(leftover(&late, &timed_out), Leftover::Unanswered);
        // Answered for attempt 2 while only attempt 1 completed.
        let other = approval(2, Some("approve"), ApprovalStatus::default());
        assert_eq!(leftover(&other, &completed), Leftover::Unanswered);
        for status in [
            ApprovalStatus {
                consumed: true,
                ..Default::default()
            },
            ApprovalStatus {
                closed: Some("ended".into()),
                ..Default::default()
            },
        ] {
            let settled = approval(1, Some("approve"), status);
            assert_eq!(leftover(&settled, &completed), Leftover::Settled);
        }
    }
}
