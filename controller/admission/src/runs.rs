//! Run admission: a Run starts a valid Flow with input that fits it, its
//! spec never changes after creation except `cancel`, and who created it is
//! recorded by the webhook (the `coxswain.dev/created-by` annotation) from
//! the request, so no client can forge it or change it later.

use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::core::admission::Operation;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use coxswain_core::api::{CopiedFrom, Flow, Run, RunFrom};
use coxswain_core::engine::{copied_decisions, rerun_from};
use coxswain_core::flow::{MAX_JSON_DEPTH, StartProblem, check_start, json_depth};

use super::admit::{Admit, CannotAsk, Refusal, Request, Reviewer, may_get};
pub use super::refusal::RunRefusal;
use super::reserved;
use coxswain_kube::names::CREATED_BY_ANNOTATION;
use coxswain_kube::rerun_source as rerun;
use coxswain_kube::snapshot::{self, Recorded};

impl Admit for Run {
    async fn review(reviewer: &Reviewer, request: &Request<'_>) -> Result<(), Refusal> {
        let Some((new, old)) = request.objects::<Run>()? else {
            return Ok(());
        };
        let user = request.user();
        if user != reviewer.controller_user {
            reserved::check_metadata(
                "Run",
                old.as_ref().map(|o| &o.metadata),
                &new.metadata,
                user,
            )?;
        }
        match (request.operation(), old) {
            (Operation::Create, _) => {
                review_create(&reviewer.client, &new, request.user_info()).await
            }
            (Operation::Update, Some(old)) => Ok(check_update(&old, &new)?),
            _ => Ok(()),
        }
    }

    /// The creator, on create; for a rerun also the old Run's uid
    /// (`spec.from.uid`), so the controller later reads that very Run.
    async fn stamp(reviewer: &Reviewer, request: &Request<'_>) -> Result<Vec<Value>, Refusal> {
        if !matches!(request.operation(), Operation::Create) {
            return Ok(Vec::new());
        }
        let Some(run) = request.object::<Run>()? else {
            return Ok(Vec::new());
        };
        let mut stamps = stamp_creator(&run, request.user())?;
        if let Some(from) = run.spec.from.as_ref().filter(|from| from.uid.is_none()) {
            let old = rerun::old_run(&reviewer.client, &run, from)
                .await
                .map_err(|source| CannotAsk::Run {
                    run: from.run.clone(),
                    source,
                })?;
            // No Run of that name: the validating review says so.
            if let Some(uid) = old.and_then(|old| old.uid()) {
                stamps.push(json!({"op": "add", "path": "/spec/from/uid", "value": uid}));
            }
        }
        Ok(stamps)
    }
}

/// The creator stamp for a Run being created by `user`: a JSON patch adding
/// the annotation, or a refusal when the client wrote another name.
pub fn stamp_creator(run: &Run, user: &str) -> Result<Vec<Value>, RunRefusal> {
    match run.annotations().get(CREATED_BY_ANNOTATION) {
        Some(given) if given != user => Err(RunRefusal::ForgedCreator {
            given: given.clone(),
            user: user.to_string(),
        }),
        Some(_) => Ok(Vec::new()),
        None if run.metadata.annotations.is_none() => Ok(vec![json!({
            "op": "add", "path": "/metadata/annotations",
            "value": {CREATED_BY_ANNOTATION: user}
        })]),
        None => Ok(vec![json!({
            "op": "add",
            "path": format!("/metadata/annotations/{}", CREATED_BY_ANNOTATION.replace('~', "~0").replace('/', "~1")),
            "value": user
        })]),
    }
}

/// Checks a Run being created: who created it is recorded truthfully, its
/// input nests no deeper than [`MAX_JSON_DEPTH`], and the start check
/// passes: its Flow exists and is valid, and its input fits the Flow's
/// schema ([`check_start`], which the controller's pin asks again).
pub fn check_created(run: &Run, flow: Option<&Flow>, user: &str) -> Result<(), RunRefusal> {
    check_creator_and_depth(run, user)?;
    let flow_name = &run.spec.flow_ref.name;
    let Some(flow) = flow else {
        return Err(RunRefusal::NoFlow {
            flow: flow_name.clone(),
            namespace: run.namespace().unwrap_or_default(),
        });
    };
    check_start(&flow.spec, run.spec.input.as_ref()).map_err(|problem| match problem {
        StartProblem::Invalid(problems) => RunRefusal::FlowNotValid {
            flow: flow_name.clone(),
            problems,
        },
        StartProblem::Input(problems) => RunRefusal::InputDoesNotFit {
            flow: flow_name.clone(),
            problems,
        },
    })
}

/// The checks every created Run passes, a rerun's too: its creator is
/// stamped truthfully and its input nests no deeper than [`MAX_JSON_DEPTH`].
fn check_creator_and_depth(run: &Run, user: &str) -> Result<(), RunRefusal> {
    match run.annotations().get(CREATED_BY_ANNOTATION) {
        Some(by) if by == user => {}
        _ => {
            return Err(RunRefusal::CreatorNotStamped {
                user: user.to_string(),
            });
        }
    }
    if let Some(input) = &run.spec.input {
        let depth = json_depth(input);
        if depth > MAX_JSON_DEPTH {
            return Err(RunRefusal::TooDeep { depth });
        }
    }
    Ok(())
}

/// Checks a Run being updated: only `cancel` may change in its spec (and
/// only to true), and its creator stays as recorded.
pub fn check_update(old: &Run, new: &Run) -> Result<(), RunRefusal> {
    let before = old.annotations().get(CREATED_BY_ANNOTATION);
    let after = new.annotations().get(CREATED_BY_ANNOTATION);
    if before != after {
        return Err(RunRefusal::CreatorChanged {
            before: before.cloned(),
            after: after.cloned(),
        });
    }
    let mut changed = Vec::new();
    if old.spec.flow_ref != new.spec.flow_ref {
        changed.push("flowRef");
    }
    if old.spec.input != new.spec.input {
        changed.push("input");
    }
    if old.spec.from != new.spec.from {
        changed.push("from");
    }
    if !changed.is_empty() {
        return Err(RunRefusal::SpecChanged { changed });
    }
    if old.spec.cancel && !new.spec.cancel {
        return Err(RunRefusal::Uncancelled);
    }
    Ok(())
}

/// Checks a Run being created, reading its Flow (a rerun: its old Run).
pub async fn review_create(
    client: &kube::Client,
    run: &Run,
    who: &UserInfo,
) -> Result<(), Refusal> {
    let user = who.username.as_deref().unwrap_or("");
    if let Some(from) = &run.spec.from {
        check_creator_and_depth(run, user)?;
        return review_rerun(client, run, from, who).await;
    }
    let namespace = run.namespace().unwrap_or_default();
    let flows: Api<Flow> = Api::namespaced(client.clone(), &namespace);
    let flow = flows
        .get_opt(&run.spec.flow_ref.name)
        .await
        .map_err(|source| CannotAsk::Flow {
            flow: run.spec.flow_ref.name.clone(),
            source,
        })?;
    Ok(check_created(run, flow.as_ref(), user)?)
}

/// Checks a rerun being created, with the controller's rules
/// ([`coxswain_kube::rerun_source`]): the old Run is the one `spec.from.uid` pins,
/// ran the same Flow with the same input and has ended; `step` is a step
/// of the flow it pinned (read from its snapshot, checked by digest); the
/// Flow still exists with that very spec; a person's decision is copied
/// only into a rerun by the old run's creator; and anyone else may read
/// the old Run.
async fn review_rerun(
    client: &kube::Client,
    run: &Run,
    from: &RunFrom,
    who: &UserInfo,
) -> Result<(), Refusal> {
    let cannot_read = |source| CannotAsk::Run {
        run: from.run.clone(),
        source,
    };
    let old = rerun::old_run(client, run, from)
        .await
        .map_err(cannot_read)?
        .ok_or_else(|| RunRefusal::from(rerun::SourceProblem::missing(run, from)))?;
    if from.uid.is_none() {
        return Err(RunRefusal::RerunUnpinned {
            run: old.name_any(),
        }
        .into());
    }
    rerun::check_source(run, &old).map_err(RunRefusal::from)?;
    let status = old.status.clone().unwrap_or_default();
    let source = CopiedFrom {
        run: old.name_any(),
        uid: old.uid().unwrap_or_default(),
    };
    // Not ended, or never pinned: refused before its snapshot is looked for.
    let digest = rerun::pinned_digest(&old, &status).map_err(RunRefusal::from)?;
    let unreadable = |reason: String| RunRefusal::RerunFlowUnreadable {
        run: old.name_any(),
        reason,
    };
    let snapshots: Api<ConfigMap> =
        Api::namespaced(client.clone(), &old.namespace().unwrap_or_default());
    let flow = match snapshot::recorded(&snapshots, &old.name_any(), digest).await {
        Ok(Recorded::Flow(flow)) => flow,
        Ok(Recorded::Gone(reason) | Recorded::Tampered { reason, .. }) => {
            return Err(unreadable(reason).into());
        }
        Err(e) => return Err(unreadable(e.to_string()).into()),
    };
    let problem = |p: rerun::SourceProblem| Refusal::from(RunRefusal::from(p));
    let seeded =
        rerun_from(flow.get(), &status, &from.step, source).map_err(|e| problem(e.into()))?;
    let today = rerun::today_flow(client, &old)
        .await
        .map_err(|source| CannotAsk::Flow {
            flow: old.spec.flow_ref.name.clone(),
            source,
        })?;
    let decided = copied_decisions(flow.get(), &seeded);
    rerun::check_gates(run, &old, digest, today.as_ref(), decided).map_err(problem)?;
    if rerun::creator(&old) != rerun::creator(run) {
        let namespace = old.namespace().unwrap_or_default();
        if !may_get(client, who, "runs", &namespace, &old.name_any())
            .await
            .map_err(cannot_read)?
        {
            let user = who.username.clone().unwrap_or_default();
            return Err(RunRefusal::OldRunUnreadable {
                user,
                run: old.name_any(),
            }
            .into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::refused;

    fn run(json: Value) -> Run {
        serde_json::from_value(json).expect("run")
    }

    fn flow() -> Flow {
        serde_json::from_value(json!({
            "apiVersion": "coxswain.dev/v1alpha1", "kind": "Flow",
            "metadata": {"name": "f", "namespace": "ns"},
            "spec": {
                "input": {"type": "object", "required": ["brief"], "properties": {"brief": {"type": "string"}}},
                "steps": [{"key": "a", "agent": {"prompt": "x"}}]
            }
        }))
        .expect("flow")
    }

    fn created_by(user: &str, input: Value) -> Run {
        run(json!({
            "apiVersion": "coxswain.dev/v1alpha1", "kind": "Run",
            "metadata": {"name": "r", "namespace": "ns", "annotations": {CREATED_BY_ANNOTATION: user}},
            "spec": {"flowRef": {"name": "f"}, "input": input}
        }))
    }

    #[test]
    fn a_run_needs_its_flow_and_input_that_fits() {
        let ok = created_by("ana", json!({"brief": "hi"}));
        assert_eq!(check_created(&ok, Some(&flow()), "ana"), Ok(()));
        let missing = refused(check_created(&ok, None, "ana"), "no flow");
        assert!(
            missing.contains("no Flow `f` in namespace `ns`"),
            "{missing}"
        );
        let bad = created_by("ana", json!({"brief": 3}));
        let error = refused(check_created(&bad, Some(&flow()), "ana"), "bad input");
        assert!(
            error
                .contains("the input does not fit the Flow `f`: input.brief: expected string, got"),
            "{error}"
        );
    }

    #[test]
    fn the_creator_is_stamped_and_cannot_be_forged() {
        let bare = run(json!({
            "apiVersion": "coxswain.dev/v1alpha1", "kind": "Run",
            "metadata": {"name": "r"}, "spec": {"flowRef": {"name": "f"}}
        }));
        let patch = stamp_creator(&bare, "ana").expect("stamped");
        assert_eq!(patch[0]["value"][CREATED_BY_ANNOTATION], "ana");
        let forged = created_by("boss", json!({}));
        let error = refused(stamp_creator(&forged, "ana"), "forged");
        assert!(error.contains("`boss` is not you (`ana`)"), "{error}");
        let error = refused(check_created(&forged, Some(&flow()), "ana"), "forged");
        assert!(
            error.contains("must name the user creating the Run"),
            "{error}"
        );
        let mut other = created_by("ana", json!({"brief": "x"}));
        other.annotations_mut().insert("team".into(), "a".into());
        let patch = stamp_creator(&run(json!({
            "apiVersion": "coxswain.dev/v1alpha1", "kind": "Run",
            "metadata": {"name": "r", "annotations": {"team": "a"}}, "spec": {"flowRef": {"name": "f"}}
        })), "ana").expect("stamped");
        assert_eq!(
            patch[0]["path"],
            "/metadata/annotations/coxswain.dev~1created-by"
        );
    }

    #[test]
    fn only_cancel_changes_after_creation() {
        let old = created_by("ana", json!({"brief": "a"}));
        let mut cancelled = old.clone();
        cancelled.spec.cancel = true;
        assert_eq!(check_update(&old, &cancelled), Ok(()));
        let error = refused(check_update(&cancelled, &old), "uncancel");
        assert!(error.contains("stays cancelled"), "{error}");
        let mut edited = old.clone();
        edited.spec.input = Some(json!({"brief": "b"}));
        let error = check_update(&old, &edited).expect_err("edited").to_string();
        assert!(error.contains("changes input"), "{error}");
        let mut moved = old.clone();
        moved
            .annotations_mut()
            .insert(CREATED_BY_ANNOTATION.into(), "boss".into());
        let error = check_update(&old, &moved).expect_err("moved").to_string();
        assert!(error.contains("never changes (it was `ana`"), "{error}");
    }

    #[test]
    fn a_rerun_names_the_same_flow_and_input_and_its_from_never_changes() {
        let old = created_by("ana", json!({"brief": "a"}));
        let mut again = old.clone();
        again.spec.from = Some(RunFrom {
            run: "r".into(),
            step: "a".into(),
            uid: None,
        });
        assert_eq!(rerun::check_source(&again, &old), Ok(()));
        let mut other_input = again.clone();
        other_input.spec.input = Some(json!({"brief": "b"}));
        let error = refused(rerun::check_source(&other_input, &old), "other input");
        assert!(
            error.contains("spec.input differs from the input of the Run `r`"),
            "{error}"
        );
        let mut other_flow = again.clone();
        other_flow.spec.flow_ref.name = "g".into();
        let error = refused(rerun::check_source(&other_flow, &old), "other flow");
        assert!(
            error.contains("spec.flowRef names the Flow `g`, but the Run `r` ran the Flow `f`"),
            "{error}"
        );
        let error = check_update(&again, &old).expect_err("from").to_string();
        assert!(error.contains("changes from"), "{error}");
    }

    #[test]
    fn a_rerun_starts_only_from_the_run_whose_uid_it_pinned() {
        let mut old = created_by("ana", json!({}));
        old.metadata.uid = Some("uid-2".into());
        let mut again = created_by("ana", json!({}));
        let from = |uid: &str| RunFrom {
            run: "r".into(),
            step: "a".into(),
            uid: Some(uid.into()),
        };
        again.spec.from = Some(from("uid-2"));
        assert_eq!(rerun::check_source(&again, &old), Ok(()));
        again.spec.from = Some(from("uid-1"));
        let error = refused(rerun::check_source(&again, &old), "made again");
        assert!(
            error.contains(
                "pins the Run `r` with uid uid-1, but the Run of that name now has uid uid-2"
            ),
            "{error}"
        );
    }

    #[test]
    fn only_the_old_runs_creator_reuses_a_persons_decision() {
        let old = created_by("admin", json!({}));
        let mut again = created_by("admin", json!({}));
        again.spec.from = Some(RunFrom {
            run: "r".into(),
            step: "publish".into(),
            uid: None,
        });
        let decided = || vec!["review".to_string()];
        assert_eq!(rerun::check_reuse(&again, &old, decided()), Ok(()));
        let mut by_eve = again.clone();
        by_eve
            .annotations_mut()
            .insert(CREATED_BY_ANNOTATION.into(), "eve".into());
        // With nothing decided, anyone's rerun copies nothing of a person's.
        assert_eq!(rerun::check_reuse(&by_eve, &old, Vec::new()), Ok(()));
        let error = refused(
            rerun::check_reuse(&by_eve, &old, decided()),
            "eve reuses bob's decision",
        );
        assert_eq!(
            error,
            "spec.from: a rerun from `publish` copies the decision of `review` made for the Run \
             `r`, which `admin` created; only they may reuse it. Rerun from `review` so the \
             review is asked again"
        );
        // A run nobody is stamped as creating: its decisions are nobody's to reuse.
        let mut unstamped = old.clone();
        unstamped.annotations_mut().clear();
        again.annotations_mut().clear();
        assert!(rerun::check_reuse(&again, &unstamped, decided()).is_err());
    }

    #[test]
    fn a_rerun_runs_only_while_its_flow_is_unchanged() {
        let old = created_by("ana", json!({}));
        let today = Flow::new("f", flow().spec);
        let digest = coxswain_core::flow::flow_digest(&today.spec);
        assert_eq!(rerun::check_today(&old, &digest, Some(&today)), Ok(()));
        let gone = refused(rerun::check_today(&old, &digest, None), "deleted");
        assert!(
            gone.contains("the Flow `f` that the Run `r` ran no longer exists"),
            "{gone}"
        );
        let mut gated = today.clone();
        gated.spec.steps.truncate(0);
        let changed = refused(rerun::check_today(&old, &digest, Some(&gated)), "changed");
        assert!(
            changed.contains(&format!("the Flow `f` changed since the Run `r` ran it (it ran {digest}; the Flow is now sha256:")),
            "{changed}"
        );
    }
}
